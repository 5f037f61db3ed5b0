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
# A write resets the peak of the writer's own open file only: `cat` opens
# the file afresh and still sees the peak since creation (v6.14).
echo reset > memory.peak
cat memory.peak
