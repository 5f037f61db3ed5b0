#!/bin/bash
# scenario: a real process past memory.max without swap
#   (memory.swap.max=0) is OOM-killed: usemem writing 64M under
#   memory.max=16M dies of SIGKILL (status 137), memory.events counts the
#   oom and the kill, the cgroup's memory goes with it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: *_after num:abs=1M
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
echo 16M > $T/a/memory.max
echo 0 > $T/a/memory.swap.max
in_cg $T/a "$USEMEM" 64
obs status $?
obs oom "$(gt0 $(val $T/a/memory.events oom))"
obs oom_kill "$(val $T/a/memory.events oom_kill)"
obs max_events "$(gt0 $(val $T/a/memory.events max))"
obs swap "$(cat $T/a/memory.swap.current)"
obs anon_after "$(val $T/a/memory.stat anon)"
obs current_after "$(cat $T/a/memory.current)"
