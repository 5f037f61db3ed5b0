# What bash and coreutils print when the kernel refuses, errno by errno,
# as on a real machine (bash's "FILE: line N: " prefix is not compared).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
echo bogus > /sys/fs/cgroup/a/memory.max
echo +memory > /sys/fs/cgroup/a/cgroup.subtree_control
mkdir /sys/fs/cgroup/a/b
echo $$ > /sys/fs/cgroup/a/cgroup.procs
rmdir /sys/fs/cgroup/a
mkdir /sys/fs/cgroup/a
echo 1 > /sys/fs/cgroup/a/memory.current
touch /sys/fs/cgroup/a/newfile
rm /sys/fs/cgroup/a/memory.max
echo 99999999 > /sys/fs/cgroup/a/b/cgroup.procs
cat /sys/fs/cgroup/a/nope
cat /proc/sys/vm/drop_caches
echo 4 > /proc/sys/vm/drop_caches
echo 201 > /proc/sys/vm/swappiness
echo lz5 > /sys/module/zswap/parameters/compressor
echo 2 > /sys/fs/cgroup/a/b/cgroup.kill
echo 100M > /sys/fs/cgroup/a/b/memory.max
cat /sys/fs/cgroup/a/b/memory.max
rmdir /sys/fs/cgroup/a/b /sys/fs/cgroup/a
ls /sys/fs/cgroup/a
