#!/bin/bash
# Reproducer (issue 25): under `memcg run --anon on` (the default) the
# shim holds low descriptors in every process: its userfaultfd at 3, a
# socket at 4, /proc/PID/pagemap at 8 (bash, at d123a3e). A program that
# uses those numbers itself meets them: after bash's `exec 3< FILE`, a
# child reading the file through the inherited descriptor (`cat <&3`,
# `dd bs=1M <&3`) gets EAGAIN ("Resource temporarily unavailable") and
# reads nothing; with --anon off it reads the file. In the differential
# corpus this is fs_tree:read_unlinked_open (0 bytes where both kernels
# read 8388608; every run with --anon on, none with --anon off).
# Why (read, not changed): bash's `exec 3< FILE` dup2s over the shim's
# userfaultfd (closing it: bash's own ranges are silently unregistered);
# at the next fork the shim's pthread_atfork child handler
# (memcg-shim/src/uffd.rs `child`) closes UFFD and SOCK by number -- now
# the program's FILE at 3 (and whatever is at 4) -- and `start()` makes a
# new O_NONBLOCK userfaultfd, which takes the lowest free number, 3: the
# child's `<&3` then duplicates that userfaultfd onto stdin (EAGAIN).
# Expected: the shim's descriptors out of the way (F_DUPFD_CLOEXEC above
# the range programs pick, as bash keeps its own at 255) and a program's
# dup2/close onto them never touching the shim's.
# Run from the repository root (root, release build):
#   bash repro/shim_low_fds.sh
MEMCG=${MEMCG:-target/release/memcg}
S=$(mktemp)
F=$(mktemp)
cat > "$S" <<'EOS'
echo "fds before: $(ls -l /proc/$$/fd | awk 'NF > 9 {printf "%s->%s ", $9, $11}')"
head -c 8192 /dev/zero > "$1"
exec 3< "$1"
echo "read through fd 3: $(cat <&3 | wc -c) bytes (expected 8192)"
EOS
for anon in on off; do
	echo "--anon $anon:"
	"$MEMCG" run --anon $anon --mem 1G -- bash "$S" "$F"
done
rm -f "$S" "$F"
