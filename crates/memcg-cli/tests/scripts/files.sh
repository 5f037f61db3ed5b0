# Files through the page cache: a RAM disk refuses a write past its size
# at write time (ENOSPC; the file stays, empty), a rewrite shorter than the
# file frees the pages past its end, and verify checks every byte. Paths
# under a mount are files; others stay cgroup paths. drop_caches leaves
# dirty pages (and their inode) until they are written back.
echo +memory > /cgroup.subtree_control
mkdir /a
mount ram 1M /mnt
mount ram 1M /mnt/inner
write /a /mnt/f 2M
ls /mnt
write /a /mnt/g 1M --fill random
verify /mnt/g
cat /a/memory.current
write /a /mnt/g 100 --fill seq
verify /mnt/g
cat /a/memory.current
write /a /mnt/sub/x 1K
read /a /mnt/nope
cat /proc/sys/vm/drop_caches
echo 0 > /proc/sys/vm/drop_caches
echo 3 > /proc/sys/vm/drop_caches
cat /a/memory.current
sync
echo 3 > /proc/sys/vm/drop_caches
echo 3 > /proc/sys/vm/drop_caches
cat /a/memory.current
umount /mnt
ls /mnt
