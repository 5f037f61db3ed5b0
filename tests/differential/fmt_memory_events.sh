#!/bin/bash
# scenario: memory.events, memory.events.local and memory.swap.events:
#   keys in order and a fresh child's zero counts.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: events* version
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs events "$(rd $T/a/memory.events)"
obs events_local "$(rd $T/a/memory.events.local)"
obs swap_events "$(rd $T/a/memory.swap.events)"
obs root_has_events "$([ -e $CG/memory.events ] && echo 1 || echo 0)"
