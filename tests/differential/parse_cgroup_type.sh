#!/bin/bash
# scenario: cgroup.type: reads `domain`; `domain` cannot be written;
#   `threaded` where the parent hosts a domain controller (memory).
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $T/b
obs default "$(rd $T/a/cgroup.type)"
obs root "$(rd $CG/cgroup.type)"
battery $T/a/cgroup.type type "domain" "x" "threaded\n" " threaded " "domain threaded" "\n"
obs b_threaded "$(wr $T/b/cgroup.type threaded)/$(rd $T/b/cgroup.type)"
