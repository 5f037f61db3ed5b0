#!/bin/bash
# scenario: memory.oom.group's parser (kstrtoint, then 0 or 1 only).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/memory.oom.group)"
battery $T/a/memory.oom.group oom.group "1" "0" "2" "-1" " 1 " "1\n" "0x1" "01" "x" "\n" "1 1" "+1" "true" "0" "4294967297" "-0"
