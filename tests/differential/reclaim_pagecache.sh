#!/bin/bash
# scenario: memory.reclaim on page cache: 16M cached, reclaim 8M succeeds
#   and frees at least that; swappiness=0 reclaims file all the same;
#   asking for more than there is ends in EAGAIN with the cache gone.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 16
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
c0=$(cat $T/a/memory.current)
obs reclaim_8M "$(wl $T/a/memory.reclaim 8M)"
c1=$(cat $T/a/memory.current)
obs freed_ge_8M "$([ $((c0 - c1)) -ge 8388608 ] && echo 1 || echo 0)"
obs freed_le_10M "$([ $((c0 - c1)) -le 10485760 ] && echo 1 || echo 0)"
obs reclaim_swappiness0 "$(wl $T/a/memory.reclaim '2M swappiness=0')"
c2=$(cat $T/a/memory.current)
obs freed_ge_2M "$([ $((c1 - c2)) -ge 2097152 ] && echo 1 || echo 0)"
obs reclaim_too_much "$(wl $T/a/memory.reclaim 64M)"
obs file_left_le_256K "$([ $(val $T/a/memory.stat file) -le 262144 ] && echo 1 || echo 0)"
obs pgsteal_ge_16M "$([ $(($(val $T/a/memory.stat pgsteal) * 4096)) -ge 16000000 ] && echo 1 || echo 0)"
