#!/bin/bash
# scenario: dying cgroups count in every ancestor's cgroup.stat; a dying
#   cgroup's parent may be removed too (it dies in turn); its cache stays
#   charged up the hierarchy until dropped.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: *_file num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir -p $T/p/q && subtree $T/p/q && mkdir $T/p/q/r
mkfile ${D}_f 4
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/p/q/r readall ${D}_f
rmdir $T/p/q/r
sleep 1
obs q_dying "$(val $T/p/q/cgroup.stat nr_dying_descendants)"
obs p_dying "$(val $T/p/cgroup.stat nr_dying_descendants)"
rmdir $T/p/q
sleep 1
obs p_dying_after_q "$(val $T/p/cgroup.stat nr_dying_descendants)"
obs p_file "$(val $T/p/memory.stat file)"
echo 1 > /proc/sys/vm/drop_caches
wait_for test "$(val $T/p/cgroup.stat nr_dying_descendants)" = 0
obs p_dying_after_drop "$(val $T/p/cgroup.stat nr_dying_descendants)"
obs p_file_after_drop "$(val $T/p/memory.stat file)"
