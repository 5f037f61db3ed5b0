# memory.max below usage is accepted (the kernel reclaims; here nothing is
# reclaimable, so oom is raised) and later charges fail until usage drops.
# The last memory.current is 64 pages: a 4K charge takes a batch of 64 from
# the counters and keeps 63 in the charge stock, as the kernel's does.
set -e
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/memcg_test
charge /memcg_test 40M file
echo 30M > /sys/fs/cgroup/memcg_test/memory.max
cat /memcg_test/memory.max /memcg_test/memory.current
set +e
charge /memcg_test 4K file
set -e
uncharge /memcg_test 40M file
charge /memcg_test 4K file
cat /memcg_test/memory.current /memcg_test/memory.events
