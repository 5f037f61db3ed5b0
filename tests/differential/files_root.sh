#!/bin/bash
# scenario: the memory.* and cgroup.* files of the root cgroup, and what
#   reading each gives (or its errno), values left out.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: files version
. "$(dirname "$0")/lib.sh"
obs files "$(ls $CG | grep -E '^(memory|cgroup)\.' | tr '\n' ',' | sed 's/,$//')"
for f in $(ls $CG | grep -E '^(memory|cgroup)\.'); do
	r=$(rd $CG/$f)
	case "$r" in !*) ;; *) r=readable ;; esac
	obs "read.$f" "$r"
done
