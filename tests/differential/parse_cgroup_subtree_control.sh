#!/bin/bash
# scenario: cgroup.subtree_control's parser: +/- tokens separated by
#   spaces, an unknown name, a name without a sign, a controller the
#   parent has not enabled.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs default "$(rd $T/a/cgroup.subtree_control)"
obs controllers "$(rd $T/a/cgroup.controllers)"
battery $T/a/cgroup.subtree_control subtree "+memory" "-memory" "memory" "+foo" "-foo" \
	"+memory -memory" "-memory +memory" "  +memory  " "+memory\n" "\n" "+ memory" "++memory" \
	"+memory,-memory" "-memory" "+Memory" "+memory\t-memory"
