#!/bin/bash
# scenario: writing the files that have no write method (EINVAL for
#   root, who may open them), and a missing file.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
for f in memory.current memory.stat memory.events memory.events.local memory.numa_stat \
	memory.swap.current memory.swap.events memory.zswap.current cgroup.controllers \
	cgroup.stat cgroup.events; do
	obs "child.$f" "$(wl $T/a/$f 1)"
done
for f in cgroup.controllers cgroup.stat memory.stat memory.numa_stat; do
	obs "root.$f" "$(wl $CG/$f 1)"
done
obs missing_read "$(rd $T/a/memory.nope)"
obs missing_write "$(wl $T/a/memory.nope 1)"
obs touch "$(touch $T/a/newfile 2> $ERRF; result)"
obs rm_file "$(rm -f $T/a/memory.max 2> $ERRF; result)"
obs meminfo_write "$(wl /proc/meminfo x)"
