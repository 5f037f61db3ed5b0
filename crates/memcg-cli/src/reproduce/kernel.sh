#!/bin/bash
# The real-kernel column of `memcg reproduce` (kernel.rs runs it in the
# test bed's guest, one boot per kernel): seed 002's readers on the xfs at
# /mnt/fs, then seed 000's sequential zero-folio swap on the same brd
# device turned into swap. Prints `key=value` lines (the host parses them).
# Arguments: READERS RUNS SEQ PARENT_MAX SWAP_MIB SWAP_MAX
R=$1 K=$2 N=$3 MAX=$4 SWAP_MIB=$5 SWAP_MAX=$6
cg=/sys/fs/cgroup
test=$cg/system.slice/bench/test/1

# seed 002's prepare(), files synced (as the simulator's prepare does).
mkdir -p "$test"
for d in system.slice system.slice/bench system.slice/bench/test; do
    echo +memory > "$cg/$d/cgroup.subtree_control"
done
echo +memory > "$test/cgroup.subtree_control"
echo "$MAX" > $cg/system.slice/bench/memory.max
for i in $(seq "$R"); do seq "$N" > "/mnt/fs/$i"; done
sync

read_worker() {
    mkdir -p "$test/$1"
    echo $BASHPID > "$test/$1/cgroup.procs"
    read -r __TMP < "/mnt/fs/$1"
}
dying() { grep nr_dying_descendants $cg/cgroup.stat | cut -d' ' -f2; }
for k in $(seq "$K"); do
    echo 3 > /proc/sys/vm/drop_caches
    t0=$EPOCHREALTIME
    for i in $(seq "$R"); do read_worker "$i" & done
    wait
    t1=$EPOCHREALTIME
    for i in $(seq "$R"); do rmdir "$test/$i" 2>/dev/null; done
    sleep 1
    echo "readers run=$k secs=$(echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}')" \
        "dying=$(dying) current=$(cat $cg/system.slice/bench/memory.current)"
done

# seed 000: the brd device becomes the swap device.
[ -e /share/in/zero_swap ] || { echo "swap error=no-zero_swap-binary"; exit 0; }
cd / && umount /mnt/fs || { echo "swap error=umount"; exit 0; }
cp /share/in/zero_swap /tmp/zero_swap && chmod +x /tmp/zero_swap
mkswap /dev/ram0 >/dev/null && swapon /dev/ram0 || { echo "swap error=swapon"; exit 0; }
thp=/sys/kernel/mm/transparent_hugepage
echo never > $thp/enabled
mkdir $cg/zs
echo "$SWAP_MAX" > $cg/zs/memory.max
vm() { grep -E "^($1) " /proc/vmstat | cut -d' ' -f2; }
for kib in 4 64; do
    if [ "$kib" = 64 ]; then
        [ -e $thp/hugepages-64kB/enabled ] || { echo "swap folio=64 error=no-mthp"; continue; }
        echo always > $thp/hugepages-64kB/enabled
    fi
    before=$(vm 'pswpout|pswpin|swpout_zero|swpin_zero' | tr '\n' ' ')
    out=$(bash -c "echo \$\$ > $cg/zs/cgroup.procs; exec /tmp/zero_swap $SWAP_MIB" | tr '\n' ' ')
    after=$(vm 'pswpout|pswpin|swpout_zero|swpin_zero' | tr '\n' ' ')
    echo "swap folio=$kib $out" $(echo "$before $after" | awk '{
        n = NF / 2; split("pswpin pswpout swpin_zero swpout_zero", k, " ");
        for (i = 1; i <= n; i++) printf "%s=%d ", k[i], $(i + n) - $i }')
    echo never > $thp/hugepages-64kB/enabled 2>/dev/null
done
