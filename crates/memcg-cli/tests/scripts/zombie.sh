# A removed cgroup whose pages are still charged stays a dying (zombie)
# memory cgroup until its last page goes (F7, M3): charged pages pin it as
# the kernel's per-folio css reference does.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
charge /a 4M file
rmdir /sys/fs/cgroup/a
cat /sys/fs/cgroup/cgroup.stat
uncharge /a 4M file
cat /sys/fs/cgroup/cgroup.stat
