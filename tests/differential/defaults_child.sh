#!/bin/bash
# scenario: what every interface file of a fresh child reads (files whose
#   values move with the machine are read in other scenarios).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: memory.events* version
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
for f in memory.current memory.peak memory.min memory.low memory.high memory.max \
	memory.events memory.events.local memory.oom.group memory.swap.current \
	memory.swap.high memory.swap.max memory.swap.peak memory.swap.events \
	memory.zswap.current memory.zswap.max memory.zswap.writeback \
	cgroup.controllers cgroup.subtree_control cgroup.events cgroup.freeze \
	cgroup.type cgroup.max.depth cgroup.max.descendants cgroup.procs cgroup.threads \
	cgroup.pressure; do
	obs "$f" "$(rd $T/a/$f)"
done
