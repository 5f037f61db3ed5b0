#!/bin/bash
# scenario: a cached file read a second time: which LRU list its pages are
#   on (6.12 leaves them inactive, 7.3 activates them) and workingset
#   counters; the total stays the same.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
# cmp: active_* version
# cmp: inactive_* version
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
obs active_after_1 "$(val $T/a/memory.stat active_file)"
obs inactive_after_1 "$(val $T/a/memory.stat inactive_file)"
in_cg $T/a readall ${D}_f
obs active_after_2 "$(val $T/a/memory.stat active_file)"
obs inactive_after_2 "$(val $T/a/memory.stat inactive_file)"
in_cg $T/a readall ${D}_f
obs active_after_3 "$(val $T/a/memory.stat active_file)"
obs inactive_after_3 "$(val $T/a/memory.stat inactive_file)"
obs file_after_3 "$(val $T/a/memory.stat file)"
