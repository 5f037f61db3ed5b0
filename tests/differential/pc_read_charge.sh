#!/bin/bash
# scenario: a cold read charges the reader's cgroup: 16M read in a child
#   shows in its memory.current, memory.stat file and inactive_file, and
#   hierarchically in the parent; a 1-byte read charges readahead's
#   initial window.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
# cmp: current num:abs=512K
# cmp: ra_* num:abs=64K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/p && subtree $T/p && mkdir -p $T/p/a $T/p/b
mkfile ${D}_f 16
seq 100000 > ${D}_small
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/p/a readall ${D}_f
obs current "$(cat $T/p/a/memory.current)"
obs file "$(val $T/p/a/memory.stat file)"
obs inactive_file "$(val $T/p/a/memory.stat inactive_file)"
obs active_file "$(val $T/p/a/memory.stat active_file)"
obs parent_file "$(val $T/p/memory.stat file)"
in_cg $T/p/b head -c 1 ${D}_small > /dev/null
obs ra_head1 "$(val $T/p/b/memory.stat file)"
