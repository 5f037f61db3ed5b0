#!/bin/bash
# scenario: a removed cgroup whose page cache is still cached stays dying
#   (cgroup.stat nr_dying_descendants) until drop_caches frees its pages;
#   an empty one goes at once.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir -p $T/p/a $T/p/e
mkfile ${D}_f 4
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/p/a readall ${D}_f
rmdir $T/p/a $T/p/e
dying() { val $T/p/cgroup.stat nr_dying_descendants; }
sleep 1
obs dying_after_rmdir "$(dying)"
obs descendants_after_rmdir "$(val $T/p/cgroup.stat nr_descendants)"
obs parent_file "$(val $T/p/memory.stat file)"
echo 1 > /proc/sys/vm/drop_caches
wait_for test "$(dying)" = 0
obs dying_after_drop "$(dying)"
