#!/bin/bash
# scenario: writing charges the writer: file and file_dirty grow, sync
#   writes back (file_dirty and file_writeback 0, the pages stay charged),
#   drop_caches then frees them; drop_caches leaves dirty pages alone.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
in_cg $T/a mkfile ${D}_f 8
obs file "$(val $T/a/memory.stat file)"
obs file_dirty "$(val $T/a/memory.stat file_dirty)"
echo 1 > /proc/sys/vm/drop_caches
obs dirty_after_drop "$(val $T/a/memory.stat file_dirty)"
obs file_after_drop "$(val $T/a/memory.stat file)"
sync
obs dirty_after_sync "$(val $T/a/memory.stat file_dirty)"
obs writeback_after_sync "$(val $T/a/memory.stat file_writeback)"
obs file_after_sync "$(val $T/a/memory.stat file)"
echo 1 > /proc/sys/vm/drop_caches
obs file_after_sync_drop "$(val $T/a/memory.stat file)"
