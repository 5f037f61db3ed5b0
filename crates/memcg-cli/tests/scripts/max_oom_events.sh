# A charge past memory.max with nothing reclaimable fails; max and oom are
# raised on the cgroup and, hierarchically, on its parent.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/parent/child
echo +memory > /sys/fs/cgroup/parent/cgroup.subtree_control
echo 30M > /sys/fs/cgroup/parent/child/memory.max
charge /parent/child 20M
charge /parent/child 20M
cat /parent/child/memory.current
cat /parent/child/memory.events.local
cat /parent/memory.events.local
cat /parent/memory.events
