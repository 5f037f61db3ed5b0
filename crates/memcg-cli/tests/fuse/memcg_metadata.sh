# scripts/memcg_metadata.sh for bash, under `memcg run` (same arguments).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/p
echo +memory > /sys/fs/cgroup/p/cgroup.subtree_control
mkdir /sys/fs/cgroup/p/a /sys/fs/cgroup/p/b
cat /sys/fs/cgroup/p/memory.current
rmdir /sys/fs/cgroup/p/a
cat /sys/fs/cgroup/p/memory.current
echo 64K > /sys/fs/cgroup/p/memory.max
mkdir /sys/fs/cgroup/p/c
cat /sys/fs/cgroup/p/memory.current
