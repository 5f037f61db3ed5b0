# memory.swap.max refuses swap charges with max and fail events.
swapon ram 4M
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/memcg_test
echo 8K > /sys/fs/cgroup/memcg_test/memory.swap.max
charge /memcg_test 8K swap
charge /memcg_test 4K swap
cat /memcg_test/memory.swap.current /memcg_test/memory.swap.events
cat /proc/swaps
uncharge /memcg_test 8K swap
cat /memcg_test/memory.swap.current /memcg_test/memory.swap.peak
