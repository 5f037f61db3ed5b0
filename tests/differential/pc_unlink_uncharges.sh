#!/bin/bash
# scenario: removing a cached file uncharges its pages from the cgroup
#   that owns them (a truncate too).
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
mkfile ${D}_f 8
mkfile ${D}_g 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
in_cg $T/a readall ${D}_g
obs file_read "$(val $T/a/memory.stat file)"
rm ${D}_f
obs file_after_rm "$(val $T/a/memory.stat file)"
: > ${D}_g
obs file_after_truncate "$(val $T/a/memory.stat file)"
