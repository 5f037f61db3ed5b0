# swapin_order.sh with --zswap-large-folio-loads on (beyond v6.14): each
# 64K folio comes back whole from zswap, one major fault per folio.
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
