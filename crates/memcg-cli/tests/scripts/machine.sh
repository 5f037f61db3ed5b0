# The simulated machine has a size (--mem 64M here): charges past it fail
# cleanly, as do swap areas whose tables would not fit, and /proc/meminfo
# shows where its memory went. A task faulting in more than the machine
# (no swap to reclaim to) meets the global OOM killer, and is its own
# victim: the largest task.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
charge /a 15T
alloc /a big 100G
cat /a/memory.current
alloc /a t 8M --fill pattern
swapon ram 1E
swapon ram 1T
swapon ram 16M
cat /proc/swaps
pageout t
verify t
cat /proc/meminfo
free t
