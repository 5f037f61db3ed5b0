# kill, cgroup.kill, /proc/PID/oom_score_adj, /proc/sys/vm/swappiness,
# memory.reclaim and memory.high throttling (on the shell's simulated
# clock, so the sleep costs no time).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a /sys/fs/cgroup/b
swapon ram 64M
alloc /a one 1M
alloc /a two 1M
alloc /b three 1M
pidof one
kill one
pidof one
echo $?
kill 12345
kill nosuchmapping
cat /a/memory.current
echo 1 > /b/cgroup.kill
pidof three
echo $?
cat /b/memory.current
echo 2 > /b/cgroup.kill
cat /b/cgroup.kill
cat /proc/101/oom_score_adj
echo -1000 > /proc/101/oom_score_adj
cat /proc/101/oom_score_adj
echo 1001 > /proc/101/oom_score_adj
cat /proc/999/oom_score_adj
cat /proc/sys/vm/swappiness
echo 100 > /proc/sys/vm/swappiness
echo 201 > /proc/sys/vm/swappiness
cat /proc/sys/vm/swappiness
# Proactive reclaim: swaps out what it is asked to; swappiness=0 refuses
# anon, so nothing can be reclaimed (EAGAIN).
echo 512K > /a/memory.reclaim
cat /a/memory.current
echo "256K swappiness=0" > /a/memory.reclaim
# memory.high: an allocation past it is reclaimed back towards it.
echo 1M > /a/memory.high
alloc /a four 2M
cat /a/memory.current
cat /a/memory.events
sleep 2.5
sleep forever
