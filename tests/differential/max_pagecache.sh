#!/bin/bash
# scenario: memory.max bounds page cache: reading 32M in an 8M cgroup
#   reclaims (no OOM), memory.current stays at or below the limit, the
#   max event counts; lowering memory.max below usage reclaims to it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: file num:abs=2M
# cmp: current num:abs=2M
# cmp: file_after_lower num:abs=512K
# known: file_after_lower lowering memory.max from 8M to 2M leaves 1.7M of cache on 6.12 (and 7.3 in the first run, with cat reads): reclaim stops at the new limit; the simulator's memory_max_write loop reclaims everything (its do_try_to_free_pages reaches priority 0 on a 2K-page list before the goal, which the kernel's folio-sized isolation does not); open
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 32
sync
echo 3 > /proc/sys/vm/drop_caches
echo 8M > $T/a/memory.max
in_cg $T/a readall ${D}_f
c=$(cat $T/a/memory.current)
obs current "$c"
obs within_max "$([ $c -le 8388608 ] && echo 1 || echo 0)"
obs file "$(val $T/a/memory.stat file)"
obs max_events "$([ $(val $T/a/memory.events max) -gt 0 ] && echo gt0 || echo 0)"
obs oom "$(val $T/a/memory.events oom)"
obs oom_kill "$(val $T/a/memory.events oom_kill)"
obs lower "$(wl $T/a/memory.max 2M)"
c=$(cat $T/a/memory.current)
obs within_lower "$([ $c -le 2097152 ] && echo 1 || echo 0)"
obs file_after_lower "$(val $T/a/memory.stat file)"
obs pgsteal_gt0 "$([ $(val $T/a/memory.stat pgsteal) -gt 0 ] && echo 1 || echo 0)"
