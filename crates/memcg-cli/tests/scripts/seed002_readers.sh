# Seed 002's do_test at a tiny scale, with real files: a RAM disk at
# /tmp/test-fs (prepare's brd + xfs), three files of `seq 8000`, one
# reader cgroup per file. After the rmdirs the readers' page cache keeps
# them dying (v6.14); drop_caches frees the cache and with it the cgroups.
mount ram 16G /tmp/test-fs
write / /tmp/test-fs/1 38893 --fill seq
write / /tmp/test-fs/2 38893 --fill seq
write / /tmp/test-fs/3 38893 --fill seq
sync
mkdir -p /sys/fs/cgroup/system.slice/bench/test/1
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/1/cgroup.subtree_control
echo 768M > /sys/fs/cgroup/system.slice/bench/memory.max
echo 3 > /proc/sys/vm/drop_caches
mkdir /sys/fs/cgroup/system.slice/bench/test/1/1
read /system.slice/bench/test/1/1 /tmp/test-fs/1
mkdir /sys/fs/cgroup/system.slice/bench/test/1/2
read /system.slice/bench/test/1/2 /tmp/test-fs/2
mkdir /sys/fs/cgroup/system.slice/bench/test/1/3
read /system.slice/bench/test/1/3 /tmp/test-fs/3
verify /tmp/test-fs/2
rmdir /sys/fs/cgroup/system.slice/bench/test/1/1
rmdir /sys/fs/cgroup/system.slice/bench/test/1/2
rmdir /sys/fs/cgroup/system.slice/bench/test/1/3
cat /sys/fs/cgroup/system.slice/bench/test/cgroup.stat
cat /sys/fs/cgroup/system.slice/bench/memory.stat > /dev/null
echo 1 > /proc/sys/vm/drop_caches
cat /sys/fs/cgroup/system.slice/bench/test/cgroup.stat
