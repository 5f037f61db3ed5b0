#!/bin/bash
# scenario: memory.stat and memory.current are hierarchical: the parent's
#   file count is its children's sum; a new child charges its parent's
#   memory.current for its own structures (percpu, slab): the kernel
#   charges the creating process's cgroup, here a sibling, so both land
#   in the grandparent.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
# cmp: metadata_per_child num:abs=12K
# cmp: metadata_per_plain_child num:abs=8K
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
sleep 0.2
before=$(cat $T/m/memory.current)
(
	echo $BASHPID > $T/m/w/cgroup.procs
	for i in 1 2 3 4 5 6 7 8; do mkdir $T/m/x/c$i; done
)
after=$(cat $T/m/memory.current)
obs metadata_per_child "$(((after - before) / 8))"
# Cgroups without the memory controller (x/y hands none to its children).
mkdir $T/m/x/y
sleep 0.2
before=$(cat $T/m/memory.current)
(
	echo $BASHPID > $T/m/w/cgroup.procs
	for i in 1 2 3 4 5 6 7 8; do mkdir $T/m/x/y/p$i; done
)
after=$(cat $T/m/memory.current)
obs metadata_per_plain_child "$(((after - before) / 8))"
