#!/bin/bash
# scenario: memory.zswap.writeback's parser (kstrtoint, 0 or 1).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/memory.zswap.writeback)"
battery $T/a/memory.zswap.writeback zswap.writeback "0" "1" "2" "-1" " 0 " "0\n" "0x1" "x" "\n" "1 1" "+0" "1"
