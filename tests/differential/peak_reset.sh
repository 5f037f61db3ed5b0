#!/bin/bash
# scenario: memory.peak: the high-water mark of a cgroup that read 8M;
#   it stays after the cache is dropped; a write through another open
#   file resets only that writer's view, so a fresh read still sees it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: peak* num:abs=2M
# cmp: current_after_drop num:abs=512K
# The reader's own memory (dd's 1M buffer, its stack and page tables) is
# charged to the cgroup on a kernel while it runs, and so counts in the
# peak; the simulator charges page cache only: hence the 2M tolerance.
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
obs peak "$(cat $T/a/memory.peak)"
echo 1 > /proc/sys/vm/drop_caches
obs current_after_drop "$(cat $T/a/memory.current)"
obs peak_after_drop "$(cat $T/a/memory.peak)"
echo reset > $T/a/memory.peak
obs peak_after_reset_elsewhere "$(cat $T/a/memory.peak)"
obs swap_peak "$(cat $T/a/memory.swap.peak)"
