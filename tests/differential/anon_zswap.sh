#!/bin/bash
# scenario: a real process past memory.max with zswap on: usemem writes
#   48M of compressible pages under memory.max=16M; they go to zswap
#   (zswpout, memory.zswap.current, zswapped), come back from it when
#   read (zswpin), every byte intact; nothing left after exit.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: *_after num:abs=1M
. "$(dirname "$0")/lib.sh"
Z=/sys/module/zswap/parameters/enabled
was=$(cat $Z)
echo Y > $Z
mkdir -p $T/a
echo 16M > $T/a/memory.max
if usemem_hold $T/a 48; then obs held ok; else obs held failed; fi
obs zswpout "$(gt0 $(val $T/a/memory.stat zswpout))"
obs zswap_current "$(gt0 $(cat $T/a/memory.zswap.current))"
obs zswapped "$(gt0 $(val $T/a/memory.stat zswapped))"
obs max_events "$(gt0 $(val $T/a/memory.events max))"
usemem_release
obs status $UST
obs zswpin "$(gt0 $(val $T/a/memory.stat zswpin))"
obs oom_kill "$(val $T/a/memory.events oom_kill)"
obs zswap_after "$(cat $T/a/memory.zswap.current)"
obs swap_after "$(cat $T/a/memory.swap.current)"
echo $was > $Z
