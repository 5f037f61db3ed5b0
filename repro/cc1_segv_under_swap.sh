#!/usr/bin/env bash
# Reproducer (issue 25, real build): gcc's cc1 dies with SIGSEGV
# ("internal compiler error: Segmentation fault") when its anonymous
# memory is swapped out and back in by `memcg run --anon on` under a tight
# memory.max, two compiles at a time (as `make -j2`). On a kernel cc1 would only thrash (or be OOM-killed); it
# must never see wrong bytes. Usage (root, /dev/fuse):
#   repro/cc1_segv_under_swap.sh [MEMCG_BINARY] [MEMORY_MAX] [PARALLEL]
# PARALLEL: 2 (default) runs two compiles at a time, 1 one.
# Needs zlib's source (crates/memcg-cli/tests/realbuild/fetch.sh) for a
# real C file; any -O3 compile of a few hundred lines does it.
set -u
memcg=${1:-target/release/memcg}
max=${2:-8M}
parallel=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
tarball=$("$here/../crates/memcg-cli/tests/realbuild/fetch.sh" ~/.cache/memcg-realbuild)
fs=$(mktemp -d)
cat > "$fs.sh" <<INNER
CG=/sys/fs/cgroup
echo +memory > \$CG/cgroup.subtree_control
mkdir \$CG/cc; echo $max > \$CG/cc/memory.max; echo \$\$ > \$CG/cc/cgroup.procs
cd $fs && tar xjf $tarball && cd zlib-*
for i in \$(seq 10); do
    if [ $parallel = 1 ]; then
        gcc -O3 -c -o trees.o trees.c 2>>gcc.log; echo "gcc \$?"
    else
        gcc -O3 -c -o trees.o trees.c 2>>gcc.log & gcc -O3 -c -o deflate.o deflate.c 2>>gcc.log
        echo "gcc \$?"; wait \$!; echo "gcc \$?"
    fi
done
grep -c "Segmentation fault" gcc.log | sed "s/^/segfaults /"
grep -E '^(pswpin|pswpout)' \$CG/cc/memory.stat; grep -E '^(max|oom_kill) ' \$CG/cc/memory.events
INNER
"$memcg" run --mem 512M --swap 256M --fs "$fs=ram:64M" -- bash "$fs.sh"
rm -rf "$fs" "$fs.sh"
