# Memory stalls take simulated time in memcg sh (memcg::clock): reclaim
# work costs --reclaim-cost per page (default scan=1.5us, write=16us,
# read=140us), so a task reclaiming at memory.max stalls for what its
# scans, swap-outs and refault reads cost, deterministically. A `write` or
# `read` runs as a short-lived task of its cgroup, an `alloc` or `touch`
# as the mapping's task; each stall counts in its cgroup and up to the
# root (/proc/pressure/memory), "full" as no other task ran meanwhile.
# Before: every total here read 0.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /a /b
mount ram 128M /mnt
echo 4M > /a/memory.max
write /a /mnt/f 16M
cat /a/memory.pressure
grep pgscan /a/memory.stat
read /a /mnt/f
cat /a/memory.pressure
grep workingset_refault_file /a/memory.stat
swapon ram 64M
echo 8M > /b/memory.max
alloc /b x 16M
cat /b/memory.pressure
grep pswpout /b/memory.stat
touch x
cat /b/memory.pressure
grep workingset_refault_anon /b/memory.stat
# The root weighs each CPU's stall time by its non-idle time within an
# aggregation stretch (the kernel's approximation): stalls one after
# another on different CPUs within one 2.001 s period add up to less than
# their sum. The averages take their first sample at 2.001 s.
cat /proc/pressure/memory
sleep 2
cat /b/memory.pressure
