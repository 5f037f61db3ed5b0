#!/bin/bash
# scenario: page cache belongs to the cgroup that read it first: a second
#   cgroup reading the same cached file is charged nothing; after the
#   file is dropped, the next reader owns it.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $T/b
mkfile ${D}_f 8
sync
echo 3 > /proc/sys/vm/drop_caches
in_cg $T/a readall ${D}_f
in_cg $T/b readall ${D}_f
obs a_file "$(val $T/a/memory.stat file)"
obs b_file "$(val $T/b/memory.stat file)"
sync
echo 1 > /proc/sys/vm/drop_caches
in_cg $T/b readall ${D}_f
obs a_file_after_drop "$(val $T/a/memory.stat file)"
obs b_file_after_drop "$(val $T/b/memory.stat file)"
