#!/bin/bash
# scenario: cgroup.events' format and populated: empty, with a process,
#   in a parent of a populated child, after the process is gone.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a/b
obs empty "$(rd $T/a/cgroup.events)"
sleep 30 &
pid=$!
wl $T/a/b/cgroup.procs $pid > /dev/null
obs child_populated "$(rd $T/a/b/cgroup.events)"
obs parent_populated "$(rd $T/a/cgroup.events)"
kill $pid
wait $pid 2>/dev/null
wait_for grep -q 'populated 0' $T/a/cgroup.events
obs after_exit "$(rd $T/a/cgroup.events)"
