#!/bin/bash
# scenario: cgroup.kill kills every process of a cgroup and its
#   descendants and no other; cgroup.events goes unpopulated.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a && subtree $T/a && mkdir $T/a/x $T/a/b $T/o
sleep 60 & p1=$!
sleep 60 & p2=$!
sleep 60 & p3=$!
echo $p1 > $T/a/x/cgroup.procs
echo $p2 > $T/a/b/cgroup.procs
echo $p3 > $T/o/cgroup.procs
obs procs_x "$(grep -c . $T/a/x/cgroup.procs)"
obs a_populated "$(rd $T/a/cgroup.events)"
obs kill "$(wl $T/a/cgroup.kill 1)"
wait $p1 2>/dev/null; s1=$?
wait $p2 2>/dev/null; s2=$?
obs status_p1 "$s1"
obs status_p2 "$s2"
obs other_alive "$(kill -0 $p3 2>/dev/null && echo 1 || echo 0)"
wait_for grep -q 'populated 0' $T/a/cgroup.events
obs a_events "$(rd $T/a/cgroup.events)"
obs kill_empty "$(wl $T/a/cgroup.kill 1)"
kill $p3
wait $p3 2>/dev/null
