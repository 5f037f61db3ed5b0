#!/bin/bash
# scenario: moving a process leaves its page cache charged where it was
#   read; what the process reads after the move goes to the new cgroup.
# machine: mem=1G swap=64M fs=512M
# cmp: * num:abs=256K
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $T/b
mkfile ${D}_f1 4
mkfile ${D}_f2 6
sync
echo 3 > /proc/sys/vm/drop_caches
(
	echo $BASHPID > $T/a/cgroup.procs
	readall ${D}_f1
	echo $BASHPID > $T/b/cgroup.procs
	readall ${D}_f2
)
obs a_file "$(val $T/a/memory.stat file)"
obs b_file "$(val $T/b/memory.stat file)"
