#!/bin/bash
# scenario: the no-internal-process rule: a cgroup that hands a domain
#   controller to children takes no process (EBUSY), nor can one with
#   processes enable it for children; a controller still used by a
#   child's subtree_control cannot be disabled.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p $T/q
subtree $T/p
mkdir $T/p/c
sleep 30 &
pid=$!
obs into_parent "$(wl $T/p/cgroup.procs $pid)"
obs into_child "$(wl $T/p/c/cgroup.procs $pid)"
obs into_q "$(wl $T/q/cgroup.procs $pid)"
obs enable_populated "$(wl $T/q/cgroup.subtree_control +memory)"
obs q_subtree "$(rd $T/q/cgroup.subtree_control)"
subtree $T/p/c
obs disable_used "$(wl $T/p/cgroup.subtree_control -memory)"
obs disable_t_used "$(wl $T/cgroup.subtree_control -memory)"
obs leaf_subtree_empty_ok "$(wl $T/p/c/cgroup.subtree_control -memory)"
obs disable_now "$(wl $T/p/cgroup.subtree_control -memory)"
obs c_has_memory_files "$([ -e $T/p/c/memory.max ] && echo 1 || echo 0)"
obs into_parent_after "$(wl $T/p/cgroup.procs $pid)"
kill $pid
wait $pid 2>/dev/null
