# Dirty page cache (the December review's R2, D2 and D3), on the shell's
# virtual clock. A 40M file written through a RAM disk by a cgroup with
# memory.max 20M: the writer is balanced against its memory cgroup's
# writeback domain (20% of about 20M: some 4M), background writeback
# cleans behind it, reclaim frees written pages, every byte reads back.
echo +memory > /cgroup.subtree_control
mkdir /a
mount ram 128M /mnt
echo 20M > /a/memory.max
cat /proc/sys/vm/dirty_ratio /proc/sys/vm/dirty_background_ratio
cat /proc/sys/vm/dirty_bytes /proc/sys/vm/dirty_background_bytes
cat /proc/sys/vm/dirty_expire_centisecs /proc/sys/vm/dirty_writeback_centisecs
write /a /mnt/f 40M
grep file /a/memory.stat
grep pg /a/memory.stat
verify /mnt/f
# What is still dirty goes once it is 30 s old (the periodic writeback
# runs every 5 s).
sleep 29
grep file_dirty /a/memory.stat
sleep 6
grep file_dirty /a/memory.stat
grep Dirty /proc/meminfo
# sync, then drop_caches: nothing of the file stays.
sync
echo 3 > /proc/sys/vm/drop_caches
grep file /a/memory.stat
# Reclaim never writes a file page. /b dirties 8M with no limit (its
# domain is the machine), then memory.max drops to 2M: the dirty folios
# reclaim meets are activated (pgactivate), the flushers woken write
# everything, and the folios, rotated back to the inactive list, are
# freed.
mkdir /b
write /b /mnt/g 8M
grep file_dirty /b/memory.stat
echo 2M > /b/memory.max
grep file /b/memory.stat
grep pg /b/memory.stat
verify /mnt/g
# The sysctls: the kernel's ranges and errnos, and the byte and ratio
# settings turning each other off.
echo 101 > /proc/sys/vm/dirty_ratio
echo -1 > /proc/sys/vm/dirty_background_ratio
echo 4096 > /proc/sys/vm/dirty_bytes
echo 10x > /proc/sys/vm/dirty_ratio
echo -5 > /proc/sys/vm/dirty_bytes
echo 0 > /proc/sys/vm/dirty_background_bytes
echo -1 > /proc/sys/vm/dirty_expire_centisecs
echo 18446744073709551615 > /proc/sys/vm/dirty_bytes
echo 0x2000 > /proc/sys/vm/dirty_bytes
cat /proc/sys/vm/dirty_bytes /proc/sys/vm/dirty_ratio
echo 15 > /proc/sys/vm/dirty_ratio
cat /proc/sys/vm/dirty_bytes /proc/sys/vm/dirty_ratio
echo 1M > /proc/sys/vm/dirty_background_bytes
echo 1048576 > /proc/sys/vm/dirty_background_bytes
cat /proc/sys/vm/dirty_background_bytes /proc/sys/vm/dirty_background_ratio
echo 10 > /proc/sys/vm/dirty_background_ratio
cat /proc/sys/vm/dirty_background_bytes /proc/sys/vm/dirty_background_ratio
rm /mnt/f /mnt/g
umount /mnt
cat /a/memory.current /b/memory.current
