#!/bin/bash
# scenario: cgroup.subtree_control with a controller the parent does not
#   offer: one the kernel has but this subtree lacks, and unknown ones.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
battery $T/a/cgroup.subtree_control other "+cpu" "+io" "+pids" "-cpu" "+cpuset" "+hugetlb" "+rdma" "+misc" "+perf_event" "+freezer" "+devices" "+memory +cpu"
obs after "$(rd $T/a/cgroup.subtree_control)"
