# scripts/seed002_readers.sh for bash, under `memcg run --fs
# /tmp/test-fs=ram:16G`: the files are written by `seq`, `sync` (sync(2),
# as the sh script's) writes them all back (`sync FILE` is fsync(2) of
# that file alone, on a kernel as here), and each read runs in a subshell
# that moved itself into its reader cgroup (as do_test's read_worker does).
for i in 1 2 3; do seq 8000 > /tmp/test-fs/$i; done
sync
mkdir -p /sys/fs/cgroup/system.slice/bench/test/1
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/system.slice/bench/test/1/cgroup.subtree_control
echo 768M > /sys/fs/cgroup/system.slice/bench/memory.max
echo 3 > /proc/sys/vm/drop_caches
read_in() {
    mkdir /sys/fs/cgroup/system.slice/bench/test/1/$1
    (
        echo $BASHPID > /sys/fs/cgroup/system.slice/bench/test/1/$1/cgroup.procs
        echo "/tmp/test-fs/$1: $(cat /tmp/test-fs/$1 | wc -c) bytes"
    )
}
read_in 1
read_in 2
read_in 3
cmp <(seq 8000) /tmp/test-fs/2
rmdir /sys/fs/cgroup/system.slice/bench/test/1/1
rmdir /sys/fs/cgroup/system.slice/bench/test/1/2
rmdir /sys/fs/cgroup/system.slice/bench/test/1/3
cat /sys/fs/cgroup/system.slice/bench/test/cgroup.stat
cat /sys/fs/cgroup/system.slice/bench/memory.stat > /dev/null
echo 1 > /proc/sys/vm/drop_caches
cat /sys/fs/cgroup/system.slice/bench/test/cgroup.stat
