#!/bin/bash
# scenario: what reclaim ages a real process's pages by: usemem re-reads
#   a 4M hot set after each MiB of 48M of cold pages it writes once and
#   keeps, under memory.max=16M with swap. The cold pages are never read
#   again, so every major fault and refault is the hot set's: a kernel
#   sees the hot set's accessed bits and keeps it resident. The kernels
#   run with the classic LRU the simulator models (MGLRU off for the
#   scenario, as it was after).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: pgmajfault num:abs=256
# cmp: refault_anon num:abs=256
# cmp: swap_after num:abs=1M
# known: pgmajfault reclaim sees a real process's faults, never its accessed bits, so it ages the hot set by fault order and evicts it as readily as the cold pages: 4100 major faults (4 per hot page) against the kernels' 67-410 (classic LRU, five runs); a simulated task, whose touches mark its pages young, has 2048 (memcg bench anon): half is the access approximation, the rest the simulator's own aging (open)
# known: refault_anon as pgmajfault: 4100 against the kernels' 354-2692 (their disk swap reads ahead: refaults with no major fault)
. "$(dirname "$0")/lib.sh"
LRU_GEN=/sys/kernel/mm/lru_gen/enabled
gen=$(cat $LRU_GEN 2>/dev/null)
[ -n "$gen" ] && echo n > $LRU_GEN
mkdir -p $T/a
echo 16M > $T/a/memory.max
in_cg $T/a "$USEMEM" 48 hotcold 4
obs status $?
[ -n "$gen" ] && echo "$gen" > $LRU_GEN
obs swap_after "$(cat $T/a/memory.swap.current)"
obs pgmajfault "$(val $T/a/memory.stat pgmajfault)"
obs refault_anon "$(val $T/a/memory.stat workingset_refault_anon)"
