# The prepare() step of the seed 002 benchmark, pasted unchanged, then a
# few of its per-reader cgroups made and removed. (The 8000-byte charge
# shows as 64 pages: the charge stock's batch, as in the kernel. The 15
# pages more are the four memory cgroups below bench: 14K of their own
# structures each, charged to their parents, as v6.14 charges them.)
mkdir -p /sys/fs/cgroup/system.slice/bench/test/1
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/1/cgroup.subtree_control
echo 768M > /sys/fs/cgroup/system.slice/bench/memory.max
mkdir -p "/sys/fs/cgroup/system.slice/bench/test/1/1"
mkdir -p "/sys/fs/cgroup/system.slice/bench/test/1/2"
charge /system.slice/bench/test/1/1 8000
cat /sys/fs/cgroup/system.slice/bench/memory.current
rmdir "/sys/fs/cgroup/system.slice/bench/test/1/1" &>/dev/null
