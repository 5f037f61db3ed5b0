#!/bin/bash
# Reproducer (issue 25): under `memcg run --anon on` (the default) the
# differential corpus's kill_rules goes wrong now and then after
# `echo 1 > $T/a/cgroup.kill` (which SIGKILLs the `sleep 60` of a/x and
# of a/b; a third `sleep 60` sits in the sibling cgroup $T/o):
#  - other_alive=0: $T/o's sleep is gone too (the scenario's final
#    `kill $p3` says "No such process"); both kernels, and --anon off,
#    keep it alive every time;
#  - hang: the shell never gets past `wait $p1`/`wait $p2`, or a command
#    substitution right after the kill never returns (its stderr shows
#    the killed sleeps reaped), until `timeout 60` ends `memcg run`.
# Seen at f954516..75fa9f3: --anon on: 5 of 20 other_alive=0 (no
# timeout then); with a variant that also waits for $p3, 2 of 12 runs
# hung; this script with 12 runs: 3 hung, 9 fine; --anon off: 0 of 20
# and 0 of 12 either way. A stripped-down script (no
# lib.sh: no command substitutions between the moves and the kill) did
# not show it in 10 runs.
# Run from the repository root (root, release build):
#   bash repro/kill_other_cgroup.sh [RUNS]
MEMCG=${MEMCG:-target/release/memcg}
RUNS=${1:-20}
for anon in on off; do
	for i in $(seq "$RUNS"); do
		out=$(MEMCG_ENV=sim timeout 60 "$MEMCG" run --anon $anon --kernel 7.3 --mem 1G \
			--cpus 2 --swap 64M --fs /mnt/fs=ram:512M -- \
			bash tests/differential/kill_rules.sh 2>/dev/null)
		rc=$?
		if [ $rc = 124 ]; then
			echo "hang (timeout 60)"
		else
			echo "$out" | grep other_alive || echo "no other_alive line, rc=$rc"
		fi
	done | sort | uniq -c | sed "s/^/--anon $anon: /"
done
