#!/bin/bash
# scenario: memory.peak: the high-water mark of a cgroup that read 8M;
#   it stays after the cache is dropped; a write through another open
#   file resets only that writer's view, so a fresh read still sees it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: peak* num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
obs peak "$(cat $T/a/memory.peak)"
echo 1 > /proc/sys/vm/drop_caches
obs current_after_drop_le_256K "$([ $(cat $T/a/memory.current) -le 262144 ] && echo 1 || echo 0)"
obs peak_after_drop "$(cat $T/a/memory.peak)"
echo reset > $T/a/memory.peak
obs peak_after_reset_elsewhere "$(cat $T/a/memory.peak)"
obs swap_peak "$(cat $T/a/memory.swap.peak)"
