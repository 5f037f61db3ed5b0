#!/usr/bin/env bash
# Run by `memcg run`: builds the zlib tree of tarball $1 with `make -j$5`
# (default 2) in a --fs filesystem at $2, in cgroup /build limited to $3
# of memory, then compares every output with the host's build in $4
# (reproduce's real build reads the same lines). Prints what the
# test checks: make's status, memory.stat `file` before and after,
# reclaim (`max` events, pgscan, refaults), swap (pswpin, pswpout, zswpin,
# zswpout, where the kernel's memory.stat has them; `oom_kill`) and each
# output that differs.
set -u
CG=/sys/fs/cgroup
echo +memory > $CG/cgroup.subtree_control
mkdir $CG/build
echo "$3" > $CG/build/memory.max
echo $$ > $CG/build/cgroup.procs
mkdir "$2/src" && cd "$2/src" && tar xjf "$1" && cd zlib-*
echo "file_before $(awk '$1 == "file" {print $2}' $CG/build/memory.stat)"
./configure > configure.log 2>&1 && make -j"${5:-2}" > make.log 2>&1
status=$?
echo "make $status"
[ $status = 0 ] || { grep -E -m 6 'error|Killed|signal' make.log ||
    tail -n 20 configure.log make.log; } | sed 's/^/log: /'
awk '$1 ~ /^(file|anon|pgscan|workingset_refault_(file|anon)|pswpin|pswpout|zswpin|zswpout)$/ {
    print $1 "_after", $2 }' $CG/build/memory.stat
echo "peak $(cat $CG/build/memory.peak 2>/dev/null)"
awk '$1 == "max" {print "max_events", $2} $1 == "oom_kill" {print "oom_kill", $2}' \
    $CG/build/memory.events
for f in *.o libz.a libz.so.1.2.13 example minigzip; do
    cmp -s "$f" "$4/$f" || echo "differs $f"
done
echo compared
