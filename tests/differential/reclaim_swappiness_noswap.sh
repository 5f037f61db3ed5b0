#!/bin/bash
# scenario: memory.reclaim with swappiness at its bounds on a cgroup of
#   page cache only, without swap: file pages go either way.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
obs reclaim_200 "$(wl $T/a/memory.reclaim '2M swappiness=200')"
obs reclaim_0 "$(wl $T/a/memory.reclaim '2M swappiness=0')"
obs left_le_4M "$([ $(val $T/a/memory.stat file) -le 4456448 ] && echo 1 || echo 0)"
