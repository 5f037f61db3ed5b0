# Seed 002's benchmark (mm/list_lru: simplify reparenting), its functions
# as published with the reader count 10000 made $N. prepare()'s brd, mkfs
# and mount lines are what `memcg run --fs /tmp/test-fs=ram:16G` replaces;
# the cgroup lines need the root's +memory, which a booted system has.
# After do_test, the reader cgroups are gone but, with v6.14's folio
# pinning, each stays dying until its page cache goes.
N=${N:-10000}

prepare() {
        for i in $(seq $N); do
                seq 8000 > "/tmp/test-fs/$i"
        done
        mkdir -p /sys/fs/cgroup/system.slice/bench/test/1
        echo +memory > /sys/fs/cgroup/system.slice/bench/cgroup.subtree_control
        echo +memory > /sys/fs/cgroup/system.slice/bench/test/cgroup.subtree_control
        echo +memory > /sys/fs/cgroup/system.slice/bench/test/1/cgroup.subtree_control
        echo 768M > /sys/fs/cgroup/system.slice/bench/memory.max
}

do_test() {
        read_worker() {
                mkdir -p "/sys/fs/cgroup/system.slice/bench/test/1/$1"
                echo $BASHPID > "/sys/fs/cgroup/system.slice/bench/test/1/$1/cgroup.procs"
                read -r __TMP < "/tmp/test-fs/$1";
        }
        read_in_all() {
                for i in $(seq $N); do
                        read_worker "$i" &
                done; wait
        }
        echo 3 > /proc/sys/vm/drop_caches
        time read_in_all
        for i in $(seq 1 $N); do
                rmdir "/sys/fs/cgroup/system.slice/bench/test/1/$i" &>/dev/null
        done
}

# What a booted system has: the memory controller on below the root and
# system.slice, and the files written back long before the test.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/system.slice
echo +memory > /sys/fs/cgroup/system.slice/cgroup.subtree_control
prepare
sync
do_test
echo "reader cgroups left: $(ls /sys/fs/cgroup/system.slice/bench/test/1 | grep -c '^[0-9]')"
cat /sys/fs/cgroup/system.slice/bench/test/1/cgroup.stat
