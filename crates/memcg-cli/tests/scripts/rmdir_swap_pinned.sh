# rmdir of a cgroup with swap entries recorded: it stays a dying
# descendant (id pinned) until the last slot is freed.
set -e
swapon ram 4M
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/memcg_test
charge /memcg_test 64K swap
charge /memcg_test 4K swap
rmdir /sys/fs/cgroup/memcg_test
cat /sys/fs/cgroup/cgroup.stat
uncharge /memcg_test 64K swap
cat /sys/fs/cgroup/cgroup.stat
uncharge /memcg_test 4K swap
cat /sys/fs/cgroup/cgroup.stat
