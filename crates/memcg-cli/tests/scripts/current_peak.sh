# memory.current and memory.peak follow charges.
set -e
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/memcg_test
cd /sys/fs/cgroup/memcg_test
charge . 50M anon
charge . 10M file
cat memory.current memory.peak
uncharge . 50M anon
uncharge . 10M file
cat memory.current memory.peak
echo reset > memory.peak
cat memory.peak
