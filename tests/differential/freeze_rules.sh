#!/bin/bash
# scenario: cgroup.freeze stops a cgroup's processes: cgroup.events says
#   frozen (and a child's inherits it), thawing resumes them.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# known: stopped the simulator freezes real processes with SIGSTOP (state T, stopped); the kernel's freezer leaves them in TASK_FROZEN, which /proc shows as S (6.12 and 7.3 both print S)
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a && subtree $T/a && mkdir $T/a/x $T/a/b
sleep 60 & p1=$!
sleep 60 & p2=$!
echo $p1 > $T/a/x/cgroup.procs
echo $p2 > $T/a/b/cgroup.procs
wl $T/a/cgroup.freeze 1 > /dev/null
wait_for grep -q 'frozen 1' $T/a/cgroup.events
obs a_events "$(rd $T/a/cgroup.events)"
wait_for grep -q 'frozen 1' $T/a/b/cgroup.events
obs b_events "$(rd $T/a/b/cgroup.events)"
obs b_freeze "$(rd $T/a/b/cgroup.freeze)"
obs stopped "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' /proc/$p2/status)"
wl $T/a/cgroup.freeze 0 > /dev/null
wait_for grep -q 'frozen 0' $T/a/b/cgroup.events
obs b_events_thawed "$(rd $T/a/b/cgroup.events)"
kill $p1 $p2
wait $p1 $p2 2>/dev/null
