# A charge past memory.max with nothing reclaimable fails: max is raised on
# the cgroup and, hierarchically, on its parent. Only a charge of at most 8
# pages goes on to the OOM path (v6.14's mem_cgroup_oom returns before
# MEMCG_OOM above PAGE_ALLOC_COSTLY_ORDER), so the 20M charge raises no oom
# and the 4K one does.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/parent/child
echo +memory > /sys/fs/cgroup/parent/cgroup.subtree_control
echo 30M > /sys/fs/cgroup/parent/child/memory.max
charge /parent/child 20M
charge /parent/child 20M
cat /parent/child/memory.events
charge /parent/child 10M
charge /parent/child 4K
cat /parent/child/memory.current
cat /parent/child/memory.events.local
cat /parent/memory.events.local
cat /parent/memory.events
