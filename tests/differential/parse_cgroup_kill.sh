#!/bin/bash
# scenario: cgroup.kill's parser (kstrtoint, 1 only else ERANGE); it is
#   write-only; the root has none.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs read "$(rd $T/a/cgroup.kill)"
battery $T/a/cgroup.kill kill "0" "2" "-1" "x" "\n" " 1 " "1" "0x1" "1\n" "01"
obs root_has_kill "$([ -e $CG/cgroup.kill ] && echo 1 || echo 0)"
