# Reclaim and the OOM killer through the shell. With swap, an allocation
# past memory.max reclaims (swapping out the coldest pages of the subtree)
# and succeeds; every byte stays intact. Without room to reclaim, the OOM
# killer picks the largest task: when that is the allocating one, the verb
# reports "Killed" with status 137; another victim just disappears.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
swapon ram 64M
echo 8M > /a/memory.max
alloc /a big 12M
verify big
cat /a/memory.current
cat /a/memory.swap.current
cat /a/memory.events
touch big
verify big
# No more swap for /a: the next allocation can only OOM-kill. big (12M
# between memory and swap) outweighs small's 1M, so big goes.
echo 0 > /a/memory.swap.max
alloc /a small 1M
alloc /a more 2M
pidof big
echo $?
pidof small
cat /a/memory.events
# Writing memory.max below usage reclaims, then OOM-kills (more, the
# larger); then huge's first fault finds small larger than itself, and once
# small is gone huge grows to the limit and is its own victim.
echo 1M > /a/memory.max
pidof more
echo $?
alloc /a huge 4M
echo $?
pidof small
echo $?
cat /a/memory.current
cat /a/memory.swap.current
cat /a/memory.events
