#!/bin/bash
# scenario: memory.high throttles page cache: reading 32M with high=8M
#   keeps usage near the threshold, counts high events, no max event;
#   lowering memory.high below usage reclaims.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: file num:abs=2M
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 32
sync
echo 3 > /proc/sys/vm/drop_caches
echo 8M > $T/a/memory.high
in_cg $T/a readall ${D}_f
c=$(cat $T/a/memory.current)
obs near_high "$([ $c -le $((8388608 + 2097152)) ] && echo 1 || echo 0)"
obs file "$(val $T/a/memory.stat file)"
obs high_events "$([ $(val $T/a/memory.events high) -gt 0 ] && echo gt0 || echo 0)"
obs max_events "$(val $T/a/memory.events max)"
obs lower "$(wl $T/a/memory.high 2M)"
c=$(cat $T/a/memory.current)
obs within_lower "$([ $c -le $((2097152 + 262144)) ] && echo 1 || echo 0)"
