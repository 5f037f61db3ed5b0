#!/bin/bash
# scenario: a child's memory.* and cgroup.* files with the memory
#   controller on and off, and their modes.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: files_* version
# cmp: mode.* version
# known: files_* a version difference the 7.3 profile does not carry yet: 7.3 adds cgroup.stat.local (mode 0444) to every cgroup (profiles lane)
# known: mode.cgroup.stat.local as files_*
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a/b
obs files_memory "$(ls $T/a | grep -E '^(memory|cgroup)\.' | tr '\n' ',' | sed 's/,$//')"
obs files_nomemory "$(ls $T/a/b | grep -E '^(memory|cgroup)\.' | tr '\n' ',' | sed 's/,$//')"
for f in $(ls $T/a | grep -E '^(memory|cgroup)\.'); do
	obs "mode.$f" "$(ls -l $T/a/$f | cut -c1-10)"
done
obs mode.dir "$(ls -ld $T/a | cut -c1-10)"
