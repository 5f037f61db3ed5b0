# --memcg-metadata: each new memory cgroup charges its own metadata to its
# parent, as the kernel's per-CPU memcg structures are (55K here: 14 pages
# each). Removing a child gives its metadata back once it is released;
# a parent that cannot take it refuses the mkdir with ENOMEM.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/p
echo +memory > /sys/fs/cgroup/p/cgroup.subtree_control
mkdir /p/a /p/b
cat /p/memory.current
rmdir /p/a
cat /p/memory.current
echo 64K > /p/memory.max
mkdir /p/c
cat /p/memory.current
