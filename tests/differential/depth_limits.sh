#!/bin/bash
# scenario: cgroup.max.depth and cgroup.max.descendants refuse mkdir past
#   them (EAGAIN); raising them allows it again.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/d $T/n
ex() { "$@" 2> "$ERRF"; result; }
echo 1 > $T/d/cgroup.max.depth
obs depth_child "$(ex mkdir $T/d/c)"
obs depth_grandchild "$(ex mkdir $T/d/c/g)"
echo 0 > $T/d/cgroup.max.depth
obs depth0_child "$(ex mkdir $T/d/c2)"
echo max > $T/d/cgroup.max.depth
obs depth_max_grandchild "$(ex mkdir $T/d/c/g)"
echo 2 > $T/n/cgroup.max.descendants
obs desc_1 "$(ex mkdir $T/n/a)"
obs desc_2 "$(ex mkdir $T/n/b)"
obs desc_3 "$(ex mkdir $T/n/c)"
rmdir $T/n/b
obs desc_after_rmdir "$(ex mkdir $T/n/c)"
obs n_descendants "$(val $T/n/cgroup.stat nr_descendants)"
echo 0 > $T/n/cgroup.max.descendants
obs desc_0 "$(ex mkdir $T/n/d)"
