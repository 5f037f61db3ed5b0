# Memory pressure (PSI): a task over memory.high that reclaim cannot help
# (no swap allowed) is throttled; the sleep is a memory stall, and with no
# other task running it is "full" too. The shell's clock is simulated, so
# the figures repeat exactly. A quiet stretch decays the averages. Poll
# triggers are not simulated: writing one is EOPNOTSUPP (the kernel's
# pressure file takes them).
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
sleep 60
cat /a/memory.pressure
sleep 3600
cat /a/memory.pressure
echo "some 150000 1000000" > /a/memory.pressure
