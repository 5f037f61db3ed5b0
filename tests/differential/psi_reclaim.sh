#!/bin/bash
# scenario: memory pressure stalls counted (shape, not values): a cgroup
#   reading 64M through an 8M limit has stalled (memory.pressure some
#   total > 0) and its parent too; an idle sibling has not.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir $T/p/a $T/p/idle
mkfile ${D}_f 64
sync
echo 3 > /proc/sys/vm/drop_caches
echo 8M > $T/p/a/memory.max
in_cg $T/p/a readall ${D}_f
tot() { sed -n "s/^$2 .*total=\([0-9]*\)$/\1/p" $1/memory.pressure; }
gt0() { [ "${1:-0}" -gt 0 ] && echo gt0 || echo "${1:-missing}"; }
obs a_some "$(gt0 $(tot $T/p/a some))"
obs p_some "$(gt0 $(tot $T/p some))"
obs idle_some "$(gt0 $(tot $T/p/idle some))"
obs idle_full "$(gt0 $(tot $T/p/idle full))"
