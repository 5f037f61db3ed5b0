#!/bin/bash
# scenario: memory.events is hierarchical, memory.events.local is not:
#   a child reading past its parent's memory.max counts the parent's max
#   events in the parent (and its ancestors), none in the child.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir $T/p/c
mkfile ${D}_f 24
sync
echo 3 > /proc/sys/vm/drop_caches
echo 8M > $T/p/memory.max
in_cg $T/p/c readall ${D}_f
gt0() { [ "${1:-0}" -gt 0 ] && echo gt0 || echo "${1:-missing}"; }
obs p_max "$(gt0 $(val $T/p/memory.events max))"
obs p_max_local "$(gt0 $(val $T/p/memory.events.local max))"
obs c_max "$(gt0 $(val $T/p/c/memory.events max))"
obs c_max_local "$(gt0 $(val $T/p/c/memory.events.local max))"
obs t_max "$(gt0 $(val $T/memory.events max))"
obs t_max_local "$(gt0 $(val $T/memory.events.local max))"
obs p_equal_max "$([ "$(val $T/p/memory.events max)" = "$(val $T/memory.events max)" ] && echo 1 || echo 0)"
