# The memory.stat and memory.events key lists of the kernel profile (the
# default 6.14 here; kernel_stat_keys_6_12 and kernel_stat_keys_7_3 run
# it under the others), and where memory.reclaim's scans count: as direct
# reclaim before 7.3, as proactive on 7.3.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
mount ram 8M /mnt
write /a /mnt/f 1M
sync
echo 512K > /sys/fs/cgroup/a/memory.reclaim
cat /sys/fs/cgroup/a/memory.events
grep -E "^(pg(scan|steal)|zswap|pgdemote|pgrefill|pswp)" /sys/fs/cgroup/a/memory.stat
grep -c . /sys/fs/cgroup/a/memory.stat
