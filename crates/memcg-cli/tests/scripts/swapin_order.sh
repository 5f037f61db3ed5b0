# Swap-in order (fidelity D1, R1). 1M of 64K folios goes to zswap and
# comes back: once zswap has ever been enabled, v6.14 swaps in 4K pages
# only (alloc_swap_folio falls back), so the 16 faults that mapped the
# folios are followed by 256 major faults (pgfault 272). The same rule
# holds for a device that is not synchronous (swapin_readahead). Run with
# --zswap-large-folio-loads on (swapin_order_large.sh), each folio comes
# back whole: pgfault 32, pgmajfault 16.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /a
swapon ram 64M
echo 1 > /sys/module/zswap/parameters/enabled
alloc /a x 1M --folio 64K --fill text
pageout x
touch x
verify x
grep -E '^(pgfault|pgmajfault|zswpout|zswpin) ' /a/memory.stat
free x
