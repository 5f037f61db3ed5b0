# cgroup.pressure and PSI poll triggers (kernel/cgroup/cgroup.c
# cgroup_pressure_write, kernel/sched/psi.c psi_trigger_create). 0 in
# cgroup.pressure hides memory.pressure and stops the cgroup's accounting
# (its ancestors' goes on); 1 brings it back. A trigger is
# "some|full THRESHOLD_US WINDOW_US": the window 1us..10s, the threshold
# 1us..window, else EINVAL. /proc/pressure/memory looks at only 31 bytes
# of a write, dropping the last (the kernel's NUL goes there): without its
# newline, a trigger loses its last digit.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /a
cat /a/cgroup.pressure
echo 2 > /a/cgroup.pressure
echo off > /a/cgroup.pressure
echo 0 > /a/cgroup.pressure
cat /a/cgroup.pressure
cat /a/memory.pressure
echo 0 > /a/memory.swap.max
echo 1M > /a/memory.high
alloc /a x 1200K
echo 1 > /a/cgroup.pressure
cat /a/memory.pressure
cat /proc/pressure/memory
echo "some 150000 1000000" > /a/memory.pressure
echo "full 2000000 2000000" > /a/memory.pressure
echo "some 0 1000000" > /a/memory.pressure
echo "some 1000 0" > /a/memory.pressure
echo "some 1000 10000001" > /a/memory.pressure
echo "half 1000 1000000" > /a/memory.pressure
echo "some 150000 1000000" > /proc/pressure/memory
echo -n "some 150000 1000000" > /proc/pressure/memory
echo -n "some 15000 1000000" > /proc/pressure/memory
