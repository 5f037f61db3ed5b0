#!/bin/bash
# scenario: cgroup.freeze's parser (kstrtoint, 0 or 1 else ERANGE) and
#   what cgroup.events says of an empty cgroup frozen and thawed.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/cgroup.freeze)"
battery $T/a/cgroup.freeze freeze "1" "0" "2" "-1" "x" " 1 " "0\n" "0x1" "\n" "1"
wait_for grep -q 'frozen 1' $T/a/cgroup.events
obs events_frozen "$(rd $T/a/cgroup.events)"
wr $T/a/cgroup.freeze 0 > /dev/null
wait_for grep -q 'frozen 0' $T/a/cgroup.events
obs events_thawed "$(rd $T/a/cgroup.events)"
