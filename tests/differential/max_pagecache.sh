#!/bin/bash
# scenario: memory.max bounds page cache: reading 32M in an 8M cgroup
#   reclaims (no OOM), memory.current stays at or below the limit, the
#   max event counts; lowering memory.max below usage reclaims to it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: file num:abs=1M
# cmp: current num:abs=1M
# cmp: file_after_lower num:abs=512K
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
