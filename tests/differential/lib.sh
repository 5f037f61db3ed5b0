# Shared helpers of the differential corpus, sourced by every scenario
# (`. "$(dirname "$0")/lib.sh"`). Everything here runs unchanged under
# `memcg run` (MEMCG_ENV=sim, host coreutils) and in a booted kernel's
# guest (MEMCG_ENV=kernel, busybox): only POSIX options busybox has.
#
# A scenario prints observations, one `key=value` a line, through `obs`;
# any other output line is ignored by the comparator. It works below its
# own top cgroup $T (unique per scenario and process) and in its own
# file prefix $D on /mnt/fs (files ${D}_NAME, or a tree under the
# directory $D), and `finish` (an EXIT trap) removes both, so many
# scenarios can run in one boot.

CG=/sys/fs/cgroup
SCEN=$(basename "$0" .sh)
T=$CG/dt_${SCEN}_$$
D=/mnt/fs/dt_${SCEN}_$$

# The root's memory controller on for its children, as a booted system
# (systemd) has it; harmless where it already is.
echo +memory > $CG/cgroup.subtree_control
mkdir "$T" && echo +memory > "$T/cgroup.subtree_control"

obs() { printf '%s=%s\n' "$1" "$2"; }

ERRF=/tmp/dt_err_$$

# The errno name of an error message's last part ("...: Invalid argument").
errname() {
	local m=${1##*: }
	case "$m" in
	"Invalid argument") echo EINVAL ;;
	"Device or resource busy") echo EBUSY ;;
	"Numerical result out of range") echo ERANGE ;;
	"No such file or directory") echo ENOENT ;;
	"Permission denied") echo EACCES ;;
	"Operation not permitted") echo EPERM ;;
	"Resource temporarily unavailable") echo EAGAIN ;;
	"Operation not supported") echo EOPNOTSUPP ;;
	"No such process") echo ESRCH ;;
	"Not a directory") echo ENOTDIR ;;
	"Is a directory") echo EISDIR ;;
	"File exists") echo EEXIST ;;
	"Directory not empty") echo ENOTEMPTY ;;
	"Input/output error") echo EIO ;;
	"Argument list too long") echo E2BIG ;;
	"Interrupted system call") echo EINTR ;;
	"Cannot allocate memory") echo ENOMEM ;;
	"Bad file descriptor") echo EBADF ;;
	"File name too long") echo ENAMETOOLONG ;;
	"Too many levels of symbolic links") echo ELOOP ;;
	*) echo "${m// /_}" ;;
	esac
}

# The errno of the last failed builtin whose stderr went to $ERRF, or ok.
result() {
	local line=
	[ -s "$ERRF" ] && IFS= read -r line < "$ERRF"
	if [ -z "$line" ]; then echo ok; else errname "$line"; fi
}

# try FILE ESCAPED: write printf %b's ESCAPED (no newline added) and print
# `ok` or the errno's name. Bash's printf flushes at each newline, so a
# value with a newline inside is several write(2)s (the kernel sees each);
# otherwise it is one.
try() {
	printf '%b' "$2" 2> "$ERRF" > "$1"
	result
}

# wr FILE TEXT: write TEXT (no newline added) with one write(2); prints
# `ok` or the errno's name.
wr() {
	printf '%s' "$2" 2> "$ERRF" > "$1"
	result
}

# wl FILE TEXT: as wr, with echo's trailing newline.
wl() {
	echo "$2" 2> "$ERRF" > "$1"
	result
}

# rd FILE: the file's content on one line (lines joined by `|`), or
# `!ERRNO` when reading fails.
rd() {
	local lines r
	mapfile -t lines 2> "$ERRF" < "$1"
	r=$(result)
	if [ "$r" != ok ]; then
		echo "!$r"
	else
		local IFS='|'
		echo "${lines[*]}"
	fi
}

# val FILE KEY: the value of KEY in a flat-keyed file (memory.stat,
# memory.events, cgroup.stat), empty when absent.
val() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

# keys FILE: the file's first fields, in order, comma-separated.
keys() { awk '{ printf "%s%s", (NR > 1 ? "," : ""), $1 } END { print "" }' "$1"; }

# mkcg PATH...: make cgroups (parents first) with +memory in each parent.
mkcg() {
	local p
	for p in "$@"; do
		mkdir -p "$p"
	done
}

# subtree DIR: enable the memory controller for DIR's children.
subtree() { echo +memory > "$1/cgroup.subtree_control"; }

# in_cg CG CMD...: run CMD in a subshell moved into cgroup CG.
in_cg() {
	(
		echo $BASHPID > "$1/cgroup.procs" || exit 1
		shift
		"$@"
	)
}

# mkfile PATH MIB: a file of MIB MiB (zeros), written from the caller's
# cgroup.
mkfile() { dd if=/dev/zero of="$1" bs=1M count="$2" 2>/dev/null; }

# readall PATH: read PATH to the end in 1M reads, discarding the data.
# One read(2) per 1M touches each page-cache folio once (xfs caches large
# folios, up to the 128K readahead window: `cat`'s 128K reads would touch
# one several times, which activates it), so a single read leaves the
# pages inactive on a kernel as in the simulator (4K folios).
readall() { dd if="$1" of=/dev/null bs=1M 2>/dev/null; }

# kib BYTES: BYTES rounded to KiB (integer division).
kib() { echo $(($1 / 1024)); }

# wait_for CMD...: retry CMD (up to ~5 s) until it succeeds.
wait_for() {
	local i
	for i in $(seq 50); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# The corpus's C helpers (`usemem`, from usemem.c, built by `memcg
# testbed corpus`): in $CORPUS_BIN on the simulator, beside the scenario
# in a guest.
BIN=${CORPUS_BIN:-$(cd "$(dirname "$0")" && pwd)}
USEMEM=$BIN/usemem
HOLD=/tmp/dt_hold_${SCEN}_$$

# usemem_hold CG MIB [malloc|brk]: usemem in cgroup CG, in the
# background, writing MIB MiB and then holding them; returns (status 0)
# once every page is written (up to ~120 s; 1 when it died first). $UPID
# is its subshell's pid.
usemem_hold() {
	local i
	rm -f "$HOLD"
	in_cg "$1" "$USEMEM" "$2" "${3:-malloc}" "$HOLD" &
	UPID=$!
	for i in $(seq 1200); do
		[ -e "$HOLD" ] && return 0
		kill -0 $UPID 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# usemem_release: lets the held usemem read its pages back and exit;
# its status in $UST (0: every byte intact, 137: killed). Not in a
# command substitution: only this shell can wait for it.
usemem_release() {
	rm -f "$HOLD"
	wait $UPID
	UST=$?
}

# gt0 N: `gt0` when N > 0, else N (empty: `absent`).
gt0() {
	if [ -z "$1" ]; then echo absent; elif [ "$1" -gt 0 ]; then echo gt0; else echo "$1"; fi
}

# Removes every cgroup below and including $T (deepest first), after
# killing what still runs there, and the scenario's files on /mnt/fs.
finish() {
	local d
	if [ -d "$T" ]; then
		for d in $(find "$T" -depth -type d); do
			[ -e "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null
		done
		for d in $(find "$T" -depth -type d); do
			wait_for rmdir "$d" 2>/dev/null
		done
	fi
	[ -d /mnt/fs ] && rm -rf "${D}" "${D}"_*
	rm -f "$ERRF" "$HOLD"
	# A scenario's status is not an observation (its last command may
	# be a `wait` for a process it killed).
	exit 0
}
trap finish EXIT

# label TEXT: TEXT as a key part: spaces `_`, `=` `:`, no newlines (the
# caller passes the escaped form, `\n` as two characters).
label() {
	local t=${1// /_}
	echo "${t//=/:}"
}

# battery FILE PREFIX ESCAPED...: for each value, `PREFIX[value]=` the
# write's result `/` what FILE reads after it.
battery() {
	local f=$1 p=$2 v r
	shift 2
	for v in "$@"; do
		r=$(try "$f" "$v")
		obs "$p[$(label "$v")]" "$r/$(rd "$f")"
	done
}

# The values every page_counter_memparse file (memory.max, high, low,
# min, swap.max, swap.high, zswap.max) is tried with, in this order.
MEMPARSE_VALUES=(
	"1M" "1m" "4097" "4095" "0x200000" "010" " 2M " "3M\n" "\n4M\n" "\t5M\t"
	"max" "max\n" " max " "MAX" "Max" "-1" "+1M" "1M2" "1.5M" "1MB" "1 M"
	"1K" "1k" "1G" "1g" "1T" "1P" "1E" "7E" "8E" "16E" "17E"
	"18446744073709551615" "18446744073709551616" "9223372036854775807"
	"99999999999999999999" "0" "\n" "1M max" "x" "0x" "0b1" "6M\0"
)
