# test_memcg_subtree_control: memory files appear only below +memory.
mkdir /sys/fs/cgroup/memcg_test_0
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
echo +memory > /sys/fs/cgroup/memcg_test_0/cgroup.subtree_control
mkdir /sys/fs/cgroup/memcg_test_0/memcg_test_1
cat /sys/fs/cgroup/memcg_test_0/memcg_test_1/cgroup.controllers
mkdir -p /sys/fs/cgroup/memcg_test_1/memcg_test_1
cat /sys/fs/cgroup/memcg_test_1/memcg_test_1/cgroup.controllers
cat /sys/fs/cgroup/memcg_test_1/memcg_test_1/memory.max
