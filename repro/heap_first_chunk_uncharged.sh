#!/bin/bash
# Fixed 2026-12-07: the constructor registers the regions mapped before
# it and the server charges the pages touched there (HostMm::adopt); now
# anon follows RssAnon (the stack and the loader's own pages aside).
#
# Reproducer (issue 25, corpus helper): the shim's first heap chunk (4M,
# heap.rs CHUNK) is never charged. It is mapped by the first malloc,
# which ld.so makes before the shim's constructor has a userfaultfd
# (anon::map -> uffd::register returns early while UFFD < 0), and it is
# never registered afterwards: the first ~4M of a program's small-block
# heap (malloc below glibc's mmap threshold, e.g. 64K blocks) run
# uncharged, so memory.stat anon is ~4M below the process's RssAnon.
#
# Run from the repository root (root, release build):
#   bash repro/heap_first_chunk_uncharged.sh
# Seen at d123a3e: for 2/4/6/8/32 MiB of 64K blocks, anon 0 / 68K /
# 2.1M / 4.1M / 28.1M against RssAnon 2.1M / 4.1M / 6.1M / 8.1M / 32.2M.
set -e
MEMCG=${MEMCG:-target/release/memcg}
B=$(mktemp -d)
gcc -O1 -o "$B/usemem" tests/differential/usemem.c
cat > "$B/s.sh" <<'EOS'
mkdir /sys/fs/cgroup/x
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
( echo $BASHPID > /sys/fs/cgroup/x/cgroup.procs; exec "$1/usemem" "$2" brk "$1/hold" ) &
p=$!
while [ ! -e "$1/hold" ]; do sleep 0.1; done
echo "MiB=$2 RssAnon=$(awk '/RssAnon/ {print $2}' /proc/$p/status)K anon=$(awk '$1 == "anon" {print $2}' /sys/fs/cgroup/x/memory.stat)"
rm "$1/hold"; wait $p
EOS
for n in 2 4 8 32; do
	"$MEMCG" run --mem 1G --swap 64M -- bash "$B/s.sh" "$B" $n
done
rm -rf "$B"
