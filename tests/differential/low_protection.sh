#!/bin/bash
# scenario: memory.low protects page cache from a sibling's pressure: in
#   a 32M parent, A (low=16M) reads 12M, then B reads 48M; A keeps its
#   cache, B is reclaimed; A's low event count stays 0.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: a_file num:abs=1M
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir -p $T/p/a $T/p/b
mkfile ${D}_fa 12
mkfile ${D}_fb 48
sync
echo 3 > /proc/sys/vm/drop_caches
echo 32M > $T/p/memory.max
echo 16M > $T/p/a/memory.low
in_cg $T/p/a readall ${D}_fa
in_cg $T/p/b readall ${D}_fb
a=$(val $T/p/a/memory.stat file)
obs a_file "$a"
obs a_kept "$([ $a -ge $((11 * 1048576)) ] && echo 1 || echo 0)"
obs a_low_events "$(val $T/p/a/memory.events low)"
obs parent_within "$([ $(cat $T/p/memory.current) -le 33554432 ] && echo 1 || echo 0)"
obs oom "$(val $T/p/memory.events oom)"
