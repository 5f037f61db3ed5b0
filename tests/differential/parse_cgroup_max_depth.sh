#!/bin/bash
# scenario: cgroup.max.depth's parser (`max` or kstrtoint, negative ERANGE).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/cgroup.max.depth)"
battery $T/a/cgroup.max.depth max.depth "0" "1" "5" "max" "-1" "x" " 3 " "0x10" "010" "2147483647" "2147483648" "max\n" "MAX" "1M" "\n" "-0" "+2" "max"
