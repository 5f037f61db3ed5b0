#!/usr/bin/env bash
# Reproducer (issue 25): random malloc/realloc/free churn over ~400 blocks
# (4K to 100K), each block verified then rewritten on every visit, in a
# cgroup with memory.max 6M and 256M of swap under `memcg run --anon on`.
# On the host (and under a 200M memory.max, no swap) it prints "bad 0".
# Under swap it aborts with "memcg shim: realloc(): invalid pointer" (the
# shim heap's metadata read back wrong) or reports blocks whose bytes
# changed. It fails as well with realloc left out (malloc, memset, free
# only: `free(): invalid pointer`), so the shim heap's own bookkeeping in
# swapped pages comes back wrong, not realloc's copy. Blocks stay under
# 128K before realloc: the shim heap's size classes (4 MiB chunks, free
# lists). Usage (root, /dev/fuse):
#   repro/heap_churn_under_swap.sh [MEMCG_BINARY] [MEMORY_MAX] [ITERATIONS]
set -u
memcg=${1:-target/release/memcg}
max=${2:-6M}
iters=${3:-100000}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp)
gcc -O1 -o "$bin" "$here/heap_churn_under_swap.c" || exit 1
"$bin" 2000 > /dev/null || { echo "fails on the host"; exit 1; }
"$memcg" run --mem 512M --swap 256M -- bash -c "
CG=/sys/fs/cgroup
echo +memory > \$CG/cgroup.subtree_control
mkdir \$CG/t; echo $max > \$CG/t/memory.max; echo \$\$ > \$CG/t/cgroup.procs
$bin $iters; echo \"rc \$?\"
grep -E '^(pswpin|pswpout)' \$CG/t/memory.stat; grep -E '^(max|oom_kill) ' \$CG/t/memory.events"
rm -f "$bin"
