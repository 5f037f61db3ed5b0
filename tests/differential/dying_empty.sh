#!/bin/bash
# scenario: cgroups that never charged anything are freed soon after
#   rmdir: ten of them, nested and flat.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
for i in 1 2 3 4 5 6 7 8; do mkdir $T/k$i; done
mkdir -p $T/n1 && subtree $T/n1 && mkdir $T/n1/n2
obs descendants "$(val $T/cgroup.stat nr_descendants)"
rmdir $T/k* $T/n1/n2 $T/n1
obs descendants_after "$(val $T/cgroup.stat nr_descendants)"
wait_for test "$(val $T/cgroup.stat nr_dying_descendants)" = 0
obs dying "$(val $T/cgroup.stat nr_dying_descendants)"
