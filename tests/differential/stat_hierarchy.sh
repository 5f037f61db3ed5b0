#!/bin/bash
# scenario: memory.stat and memory.current are hierarchical: the parent's
#   file count is its children's sum; a new child charges its parent's
#   memory.current for its own structures (percpu, slab): the kernel
#   charges the creating process's cgroup, here a sibling, so both land
#   in the grandparent.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
# cmp: metadata_per_child_kernel num:abs=8K
# cmp: metadata_per_plain_child_kernel num:abs=8K
# memory.current's view moves with the per-CPU stocks (up to 64 pages per
# CPU, 16K per cgroup over 32): printed, not compared (6.12 7296 and 7.3
# 27392 per child in one run, 6.12 4096 in another).
# cmp: metadata_per_child ignore
# cmp: metadata_per_plain_child ignore
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir $T/p/a $T/p/b
mkfile ${D}_f1 4
mkfile ${D}_f2 6
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/p/a readall ${D}_f1
in_cg $T/p/b readall ${D}_f2
obs a_file "$(val $T/p/a/memory.stat file)"
obs b_file "$(val $T/p/b/memory.stat file)"
obs p_file "$(val $T/p/memory.stat file)"
mkdir -p $T/m && subtree $T/m
mkdir $T/m/x $T/m/w
subtree $T/m/x
mkdir $T/m/x/y
# What 32 new cgroups charge, per cgroup, seen in m's memory.current (the
# per-CPU stocks blur it by up to 64 pages per CPU: 16K per cgroup here)
# and in m's memory.stat `kernel` (exact, once flushed).
per_child() {
	local b k a l
	sleep 2.5
	b=$(cat $T/m/memory.current)
	k=$(val $T/m/memory.stat kernel)
	(
		echo $BASHPID > $T/m/w/cgroup.procs
		for i in $(seq 32); do mkdir $1$i; done
	)
	sleep 2.5
	a=$(cat $T/m/memory.current)
	l=$(val $T/m/memory.stat kernel)
	obs "$2" "$(((a - b) / 32))"
	obs "$2_kernel" "$(((l - k) / 32))"
}
per_child $T/m/x/c metadata_per_child
# Cgroups without the memory controller (y hands none to its children).
per_child $T/m/x/y/p metadata_per_plain_child
