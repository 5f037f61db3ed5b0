#!/bin/bash
# scenario: seed 002's shape at 200 readers: 200 files of `seq 8000`
#   written and synced, each read by a reader in its own cgroup under a
#   768M parent, the reader cgroups removed: how many stay dying, what
#   the parent holds, and what drop_caches leaves.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: dying num:10%
# cmp: parent_file num:abs=1M
# cmp: dying_after_drop num:abs=20
# cmp: parent_file version
# known: parent_file 6.12 reads each whole 10-page file (40K) for bash's first `read` where 7.3 and the simulator read 16K (readahead's initial window); the 6.12 profile does not carry it
. "$(dirname "$0")/lib.sh"
N=200
B=$T/bench
mkdir -p $B && subtree $B && mkdir -p $B/test && subtree $B/test
echo 768M > $B/memory.max
for i in $(seq $N); do seq 8000 > ${D}_$i; done
sync
echo 3 > /proc/sys/vm/drop_caches
read_worker() {
	mkdir -p "$B/test/$1"
	echo $BASHPID > "$B/test/$1/cgroup.procs"
	read -r __TMP < "${D}_$1"
}
for i in $(seq $N); do read_worker $i & done; wait
obs parent_file "$(val $B/memory.stat file)"
for i in $(seq $N); do rmdir $B/test/$i 2>/dev/null; done
obs readers_left "$(ls $B/test | grep -c '^[0-9]')"
sleep 1
obs dying "$(val $B/test/cgroup.stat nr_dying_descendants)"
echo 1 > /proc/sys/vm/drop_caches
sleep 2
obs dying_after_drop "$(val $B/test/cgroup.stat nr_dying_descendants)"
