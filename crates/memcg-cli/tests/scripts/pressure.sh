# Memory pressure (PSI): a task over memory.high that reclaim cannot help
# (no swap allowed) is throttled; the sleep is a memory stall, and with no
# other task running it is "full" too. The shell's clock is simulated, so
# the figures repeat exactly. The averages take a sample every 2.001 s
# (PSI_FREQ is 2*HZ+1 jiffies), so right after the 2 s stall they still
# read 0, a second later they show it; a quiet stretch decays them. A poll trigger written to the file
# lives as long as the open file (here, echo's); a threshold over its
# window is EINVAL.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a /sys/fs/cgroup/b
swapon ram 64M
cat /a/memory.pressure
echo 0 > /a/memory.swap.max
echo 1M > /a/memory.high
alloc /a x 1200K
cat /a/memory.pressure
cat /b/memory.pressure
cat /proc/pressure/memory
cat /a/memory.events
sleep 1
cat /a/memory.pressure
sleep 60
cat /a/memory.pressure
sleep 3600
cat /a/memory.pressure
echo "some 150000 1000000" > /a/memory.pressure
echo "some 150000 100000" > /a/memory.pressure
