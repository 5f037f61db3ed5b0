# --memcg-metadata: each new memory cgroup charges its own structures to
# its parent, byte by byte through the parent's object cgroup, as v6.14
# charges them (55K here in place of the 14K model: two children take 28
# pages, one 14). Removing a child gives its metadata back once it is
# released; a parent that cannot take it refuses the mkdir with ENOMEM.
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
