# `charge CG SIZE swap` takes real slots of a swap device: with none on it
# fails as a swap-out finding no device does (ENOSPC); with one on,
# /proc/swaps counts the slots, and swapoff refuses while the charge holds
# them (no page stands behind them to swap back in).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
charge /a 4K swap
swapon ram 1M
charge /a 8K swap
cat /a/memory.swap.current /proc/swaps
swapoff /dev/ram0
uncharge /a 8K swap
swapoff /dev/ram0
cat /a/memory.swap.current /proc/swaps
