# rmdir of a cgroup whose (synced) page cache stays: the dying cgroup stays pinned
# by its LRU folios on 6.12 and 6.14, and is released on 7.3, which moves
# them to the parent (kernel_rmdir_7_3, kernel_rmdir_6_12).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/p
echo +memory > /sys/fs/cgroup/p/cgroup.subtree_control
mkdir /sys/fs/cgroup/p/a
mount ram 8M /mnt
write /p/a /mnt/f 1M
sync
rmdir /sys/fs/cgroup/p/a
grep dying /sys/fs/cgroup/p/cgroup.stat
grep -E "^(file|active_file|inactive_file) " /sys/fs/cgroup/p/memory.stat
