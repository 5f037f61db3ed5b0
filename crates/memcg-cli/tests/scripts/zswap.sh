# v6.14's tools/testing/selftests/cgroup/test_zswap.c through memcg sh, at
# the selftest's own sizes on a 64M machine with 64M of RAM swap. Each
# block names its test and its pass condition; the Rust ports in
# crates/memcg-sim/tests/selftests_zswap.rs assert them.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
swapon ram 64M
echo 1 > /sys/module/zswap/parameters/enabled
cat /sys/module/zswap/parameters/compressor
cat /sys/fs/cgroup/memory.zswap.writeback

# test_zswap_usage: memory.max 1M, 4M touched: zswpout rises above 0.
mkdir /sys/fs/cgroup/no_shrink_test
echo 1M > /no_shrink_test/memory.max
alloc /no_shrink_test allocate_bytes 4M --fill sparse
free allocate_bytes
grep zswpout /no_shrink_test/memory.stat
rmdir /no_shrink_test

# test_swapin_nozswap: zswap.max 0, 32M written and read back in 8M:
# swap.peak >= 24M, zswpout 0.
mkdir /sys/fs/cgroup/no_zswap_test
echo 8M > /no_zswap_test/memory.max
echo 0 > /no_zswap_test/memory.zswap.max
alloc /no_zswap_test rw 32M --fill sparse
touch rw
verify rw
free rw
cat /no_zswap_test/memory.swap.peak
grep zswpout /no_zswap_test/memory.stat
rmdir /no_zswap_test

# test_zswapin: the same with zswap.max max: zswpin >= 24M of pages (6144).
mkdir /sys/fs/cgroup/zswapin_test
echo 8M > /zswapin_test/memory.max
echo max > /zswapin_test/memory.zswap.max
alloc /zswapin_test rw 32M --fill sparse
touch rw
verify rw
free rw
grep zswpin /zswapin_test/memory.stat
rmdir /zswapin_test

# test_zswap_writeback_disabled: 4M half-filled pages reclaimed into zswap,
# read back, zswap.max set to half their compressed size (142K of
# 285K): the second
# reclaim fails with EAGAIN and nothing is written back.
mkdir /sys/fs/cgroup/zswap_writeback_test
echo 0 > /zswap_writeback_test/memory.zswap.writeback
alloc /zswap_writeback_test wb 4M --fill half
echo 4M > /zswap_writeback_test/memory.reclaim
cat /zswap_writeback_test/memory.zswap.current
touch wb
verify wb
echo 142K > /zswap_writeback_test/memory.zswap.max
echo 4M > /zswap_writeback_test/memory.reclaim
grep zswpwb /zswap_writeback_test/memory.stat
free wb
rmdir /zswap_writeback_test

# test_no_invasive_cgroup_shrink: two 1M groups; the store over
# wb_group's 10K zswap.max writes back wb_group's entries only:
# zswpwb(wb) > 0 and zswpwb(control) == 0.
mkdir /sys/fs/cgroup/per_memcg_wb_test1
echo 1M > /per_memcg_wb_test1/memory.max
echo 10K > /per_memcg_wb_test1/memory.zswap.max
mkdir /sys/fs/cgroup/per_memcg_wb_test2
echo 1M > /per_memcg_wb_test2/memory.max
alloc /per_memcg_wb_test2 control_allocation 10M --fill sparse
alloc /per_memcg_wb_test1 allocate_bytes 10M --fill sparse
free allocate_bytes
grep zswpwb /per_memcg_wb_test1/memory.stat
grep zswpwb /per_memcg_wb_test2/memory.stat
free control_allocation
rmdir /per_memcg_wb_test1
rmdir /per_memcg_wb_test2

# test_no_kmem_bypass: a child holds RAM - high + 5% (35.2M) under a low
# min_free_kbytes; raised to RAM/2000 KiB, a root task's 3.2M allocations
# wake kswapd, which pushes the child's pages to zswap charged to the
# child: stored_pages * 4096 - zswapped < a quarter of stored_pages * 4096.
cat /proc/sys/vm/min_free_kbytes
echo 134 > /proc/sys/vm/min_free_kbytes
mkdir /sys/fs/cgroup/kmem_bypass_test
alloc /kmem_bypass_test child 36044K --fill sparse
echo 33554 > /proc/sys/vm/min_free_kbytes
alloc / trigger 3276K --fill sparse
free trigger
alloc / trigger 3276K --fill sparse
free trigger
cat /sys/kernel/debug/zswap/stored_pages
grep zswapped /kmem_bypass_test/memory.stat
grep kswapd /sys/fs/cgroup/memory.stat
echo 1024 > /proc/sys/vm/min_free_kbytes
free child
rmdir /kmem_bypass_test
cat /sys/kernel/debug/zswap/stored_pages
cat /sys/kernel/debug/zswap/pool_total_size
