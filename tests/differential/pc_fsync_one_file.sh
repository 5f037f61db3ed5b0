#!/bin/bash
# scenario: fsync of one file (dd conv=fsync, `sync FILE`) writes back
#   that file only; the other file stays dirty.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
in_cg $T/a mkfile ${D}_f1 4
in_cg $T/a mkfile ${D}_f2 4
obs dirty_before "$(val $T/a/memory.stat file_dirty)"
in_cg $T/a dd if=/dev/zero of=${D}_f3 bs=1M count=4 conv=fsync 2>/dev/null
obs dirty_after_conv_fsync "$(val $T/a/memory.stat file_dirty)"
sync ${D}_f1
obs dirty_after_sync_f1 "$(val $T/a/memory.stat file_dirty)"
sync
obs dirty_after_sync "$(val $T/a/memory.stat file_dirty)"
