#!/bin/bash
# scenario: memory.high throttles a real process: usemem writing 48M
#   with memory.high=16M (swap available) stays near high, counts high
#   events and no max event, stalls on memory (memory.pressure), its
#   pages swapped and back intact.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: *_after num:abs=1M
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
echo 16M > $T/a/memory.high
if usemem_hold $T/a 48; then obs held ok; else obs held failed; fi
c=$(cat $T/a/memory.current)
obs near_high "$([ $c -le $((16777216 + 2097152)) ] && echo 1 || echo 0)"
obs high_events "$(gt0 $(val $T/a/memory.events high))"
obs max_events "$(val $T/a/memory.events max)"
obs swapped "$(gt0 $(cat $T/a/memory.swap.current))"
total=$(sed -n 's/^some .*total=\([0-9]*\)$/\1/p' $T/a/memory.pressure)
obs psi_some "$(gt0 $total)"
usemem_release
obs status $UST
obs oom_kill "$(val $T/a/memory.events oom_kill)"
obs swap_after "$(cat $T/a/memory.swap.current)"
