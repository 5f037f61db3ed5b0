#!/bin/bash
# scenario: memory.numa_stat's keys and `key N0=value` shape on one node.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: keys version
# known: keys a version difference the profiles do not carry yet: 6.12 has no hugetlb line; 7.3 adds vmalloc, pgdemote_proactive, pgsteal_*, pgscan_* (kswapd, direct, khugepaged, proactive) and pgrefill (profiles lane)
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a
obs keys "$(keys $T/a/memory.numa_stat)"
obs shape_ok "$(awk '$2 !~ /^N0=[0-9]+$/ || NF != 2 { bad++ } END { print bad ? 0 : 1 }' $T/a/memory.numa_stat)"
obs fresh_anon "$(val $T/a/memory.numa_stat anon)"
obs fresh_file "$(val $T/a/memory.numa_stat file)"
