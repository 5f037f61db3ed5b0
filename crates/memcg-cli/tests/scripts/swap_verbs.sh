# The swap verbs end to end: a RAM swap device, a task's anonymous mapping
# of random 64 KiB folios and one of zero pages, pageout (MADV_PAGEOUT) and
# the fault back in, a task moved to another cgroup (its charges stay), and
# an rmdir refused while the cgroup still has tasks.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/app /sys/fs/cgroup/other
swapon ram 64M
alloc /app data 4M --folio 64K --fill random
alloc /app zeros 1M --fill zero
cat /app/cgroup.procs /app/memory.current
pageout data
pageout zeros
# Zero pages take a slot (and a swap charge) but are never written.
cat /app/memory.current /app/memory.swap.current /app/memory.swap.peak
cat /proc/swaps
verify data
# Move the zeros task: swap-in charges the owner recorded in swap_cgroup
# (/app, still online), not the faulting task's new cgroup.
echo 101 > /sys/fs/cgroup/other/cgroup.procs
cat /other/cgroup.procs
touch zeros
cat /other/memory.current /app/memory.current
rmdir /app
touch data
verify data
cat /app/memory.swap.current /app/memory.swap.events
free data
free zeros
cat /app/memory.current /proc/swaps
cat /app/memory.stat
