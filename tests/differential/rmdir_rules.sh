#!/bin/bash
# scenario: rmdir and mkdir rules: a populated cgroup or one with children
#   is busy, an interface file is not a directory, a missing one ENOENT,
#   mkdir of an existing cgroup EEXIST, rename refused.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a/b $T/c
sleep 30 &
pid=$!
echo $pid > $T/c/cgroup.procs
ex() { "$@" 2> "$ERRF"; result; }
obs rmdir_populated "$(ex rmdir $T/c)"
obs rmdir_children "$(ex rmdir $T/a)"
obs rmdir_file "$(ex rmdir $T/a/cgroup.procs)"
obs rmdir_missing "$(ex rmdir $T/nope)"
obs mkdir_exists "$(ex mkdir $T/a)"
obs mkdir_in_file "$(ex mkdir $T/a/cgroup.procs/x)"
obs rename "$(ex mv $T/a/b $T/a/z)"
kill $pid
wait $pid 2>/dev/null
wait_for test "$(cat $T/c/cgroup.procs)" = ""
obs rmdir_after_exit "$(ex rmdir $T/c)"
obs rmdir_leaf "$(ex rmdir $T/a/b)"
obs rmdir_now_empty "$(ex rmdir $T/a)"
