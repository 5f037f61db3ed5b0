# On-demand readahead (mm/readahead.c, v6.14). A first small read of a
# file brings in the initial window: get_init_ra_size gives a 1-page read
# 4 pages when read_ahead_kb is 128 (32 pages), so /a is charged 16K of
# `file`, as on booted 6.12 and 7.3 kernels. Reading on into the second
# page, which readahead marked, moves the window on, twice as large (8
# pages). read_ahead_kb is the mount's device's (`mount` names it);
# 0 reads the page alone. Readahead never reads past the end of a file.
# Two reads within one page mark it accessed once (it stays inactive);
# a read through another open file activates it.
echo +memory > /cgroup.subtree_control
mkdir /a /b /c /d
mount ram 64M /mnt
write / /mnt/f 1M
write / /mnt/small 100
sync
echo 1 > /proc/sys/vm/drop_caches
mount
cat /sys/class/bdi/0:1/read_ahead_kb
read /a /mnt/f --bs 1 --count 1
grep "file " /a/memory.stat
echo 1 > /proc/sys/vm/drop_caches
read /b /mnt/f --bs 4K --count 2
grep "file " /b/memory.stat
echo 1 > /proc/sys/vm/drop_caches
echo 0 > /sys/class/bdi/0:1/read_ahead_kb
read /c /mnt/f --bs 1 --count 1
grep "file " /c/memory.stat
echo 130 > /sys/class/bdi/0:1/read_ahead_kb
cat /sys/class/bdi/0:1/read_ahead_kb
echo -1 > /sys/class/bdi/0:1/read_ahead_kb
read /c /mnt/small
grep "file " /c/memory.stat
echo 1 > /proc/sys/vm/drop_caches
read /d /mnt/f --bs 100 --count 2
grep "active_file " /d/memory.stat
read /d /mnt/f --bs 100 --count 1
grep "active_file " /d/memory.stat
cat /sys/class/bdi/0:2/read_ahead_kb
