# What the kernel profile (--kernel, here the default 6.14) changes in the
# interface: 16E wraps to 0 in memory.max, a bare suffix is 0 bytes, and
# memory.reclaim takes no swappiness=max. kernel_profile_7_3 and
# kernel_profile_6_12 run the same script under the other profiles.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
echo 16E > /sys/fs/cgroup/a/memory.max
cat /sys/fs/cgroup/a/memory.max
echo 17E > /sys/fs/cgroup/a/memory.max
cat /sys/fs/cgroup/a/memory.max
echo K > /sys/fs/cgroup/a/memory.high
cat /sys/fs/cgroup/a/memory.high
echo "0 swappiness=max" > /sys/fs/cgroup/a/memory.reclaim
echo "0 swappiness=200" > /sys/fs/cgroup/a/memory.reclaim
echo done
