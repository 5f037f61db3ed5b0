#!/bin/bash
# scenario: memory.stat's keys in order (version-dependent) and format:
#   one `key value` a line, every value a non-negative integer; a fresh
#   child's page counts zero.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: keys version
# cmp: nkeys version
# known: *keys the 6.14 profile prints v6.14's own list (67 keys: pswpin/pswpout, which 6.12 lacks; not 7.3's zswap_incomp and *_proactive counters, nor its order), which is neither 6.12's (65) nor 7.3's (71), as the kernel in between; the 6.12 and 7.3 profiles match their kernels
# known: nkeys as keys
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs keys "$(keys $T/a/memory.stat)"
obs nkeys "$(grep -c . $T/a/memory.stat)"
obs format_ok "$(awk 'NF != 2 || $2 !~ /^[0-9]+$/ { bad++ } END { print bad ? 0 : 1 }' $T/a/memory.stat)"
for k in anon file kernel kernel_stack pagetables sec_pagetables percpu sock vmalloc shmem \
	zswap zswapped file_mapped file_dirty file_writeback swapcached anon_thp file_thp \
	shmem_thp inactive_anon active_anon inactive_file active_file unevictable \
	slab_reclaimable slab_unreclaimable slab workingset_refault_anon workingset_refault_file \
	workingset_activate_anon workingset_activate_file workingset_restore_anon \
	workingset_restore_file workingset_nodereclaim pgscan pgsteal pgscan_kswapd \
	pgscan_direct pgscan_khugepaged pgsteal_kswapd pgsteal_direct pgsteal_khugepaged \
	pgfault pgmajfault pgrefill pgactivate pgdeactivate pglazyfree pglazyfreed \
	zswpin zswpout zswpwb thp_fault_alloc thp_collapse_alloc thp_swpout thp_swpout_fallback; do
	obs "fresh.$k" "$(val $T/a/memory.stat $k)"
done
obs root_keys "$(keys $CG/memory.stat)"
