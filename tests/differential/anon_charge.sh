#!/bin/bash
# scenario: a real process's anonymous memory is charged to its cgroup:
#   usemem writing 32M in one malloc'd block (glibc maps it), and 32M in
#   64K heap blocks, each in its own cgroup; memory.current and
#   memory.stat's anon while it holds them, nothing left after it exits.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: *_anon num:abs=2M
# cmp: *_current num:abs=3M
# cmp: *_after num:abs=1M
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $T/b
one() {
	local cg=$1 p=$2
	if usemem_hold $cg 32 "$3"; then obs ${p}_held ok; else obs ${p}_held failed; fi
	obs ${p}_anon "$(val $cg/memory.stat anon)"
	obs ${p}_current "$(cat $cg/memory.current)"
	obs ${p}_swap "$(cat $cg/memory.swap.current)"
	usemem_release
	obs ${p}_status $UST
	obs ${p}_anon_after "$(val $cg/memory.stat anon)"
	obs ${p}_current_after "$(cat $cg/memory.current)"
}
one $T/a mmap malloc
one $T/b heap brk
