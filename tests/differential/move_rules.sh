#!/bin/bash
# scenario: moving processes: cgroup.procs lists a moved process in one
#   cgroup only; a move into a removed cgroup fails; a thread-less
#   process's cgroup.threads lists it once.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# known: proc_cgroup the simulator does not serve /proc/PID/cgroup (per-process procfs files stay the host's)
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a $T/b $T/gone
sleep 60 & p=$!
echo $p > $T/a/cgroup.procs
obs in_a "$(grep -cx $p $T/a/cgroup.procs)"
obs threads_a "$(grep -cx $p $T/a/cgroup.threads)"
echo $p > $T/b/cgroup.procs
obs in_a_after "$(grep -cx $p $T/a/cgroup.procs)"
obs in_b_after "$(grep -cx $p $T/b/cgroup.procs)"
obs proc_cgroup "$(sed 's/^0:://; s,.*/,,' /proc/$p/cgroup)"
rmdir $T/gone
obs into_removed "$(wl $T/gone/cgroup.procs $p)"
obs back_to_root "$(wl $CG/cgroup.procs $p)"
obs in_b_final "$(grep -cx $p $T/b/cgroup.procs)"
kill $p
wait $p 2>/dev/null
