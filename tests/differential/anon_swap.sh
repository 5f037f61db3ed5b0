#!/bin/bash
# scenario: a real process past memory.max with swap: usemem writes 48M
#   under memory.max=16M; its pages go to swap (memory.swap.current,
#   memory.events max, pgsteal), come back when it reads them (pgmajfault,
#   workingset_refault_anon), every byte intact; nothing left after exit.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: swap_current num:abs=4M
# cmp: pswpout version
# cmp: *_after num:abs=1M
# known: status 6.12 OOM-kills usemem (137) in 3 of 6 booted runs while it reads its pages back from the disk swap under memory.max=16M (7.3: 0 of 6); the simulator never does
# known: oom_kill as status: 6.12's kill of the swapping-in reader, not modelled
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
echo 16M > $T/a/memory.max
if usemem_hold $T/a 48; then obs held ok; else obs held failed; fi
c=$(cat $T/a/memory.current)
obs within_max "$([ $c -le 16777216 ] && echo 1 || echo 0)"
obs swap_current "$(cat $T/a/memory.swap.current)"
obs max_events "$(gt0 $(val $T/a/memory.events max))"
obs pgsteal "$(gt0 $(val $T/a/memory.stat pgsteal))"
obs pswpout "$(gt0 $(val $T/a/memory.stat pswpout))"
usemem_release
obs status $UST
obs pgmajfault "$(gt0 $(val $T/a/memory.stat pgmajfault))"
obs refault_anon "$(gt0 $(val $T/a/memory.stat workingset_refault_anon))"
obs oom_kill "$(val $T/a/memory.events oom_kill)"
obs swap_after "$(cat $T/a/memory.swap.current)"
obs anon_after "$(val $T/a/memory.stat anon)"
