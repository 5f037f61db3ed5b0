#!/bin/bash
# scenario: cgroup.procs' parser and errnos: not a number, negative,
#   no such pid, bases, whitespace; the writer's own pid moves it.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
battery $T/a/cgroup.procs procs "x" "-1" "99999999" "0x7fffffff" "\n" "1.5" "4194304" "2147483648" "1x"
obs move_self "$(in_cg $T/a true && echo ok || echo failed)"
obs move_self_spaces "$( ( wr $T/a/cgroup.procs " $BASHPID " ) )"
obs move_self_hex "$( ( wr $T/a/cgroup.procs "$(printf '0x%x' $BASHPID)" ) )"
obs move_self_octal "$( ( wr $T/a/cgroup.procs "$(printf '0%o' $BASHPID)" ) )"
obs move_self_zero "$( ( wr $T/a/cgroup.procs "0"; grep -c . $T/a/cgroup.procs ) | tr '\n' ' ')"
obs procs_after "$(grep -c . $T/a/cgroup.procs)"
obs threads_after "$(grep -c . $T/a/cgroup.threads)"
