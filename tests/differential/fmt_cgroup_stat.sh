#!/bin/bash
# scenario: cgroup.stat's keys (version-dependent) and counts of live
#   descendants at a few depths.
# machine: mem=1G swap=64M fs=512M
# cmp: * exact
# cmp: keys version
# known: *keys the simulator's hierarchy has the memory controller only (its root cgroup.controllers is `memory`), so cgroup.stat lists nr_subsys_memory and nr_dying_subsys_memory; 6.12 and 7.3 list nr_subsys_* and nr_dying_subsys_* for each of their nine controllers (cpuset cpu io memory perf_event hugetlb pids rdma misc)
. "$(dirname "$0")/lib.sh"
mkdir -p $T/a/b/c $T/a/d
obs keys "$(keys $T/cgroup.stat)"
obs T.nr_descendants "$(val $T/cgroup.stat nr_descendants)"
obs a.nr_descendants "$(val $T/a/cgroup.stat nr_descendants)"
obs c.nr_descendants "$(val $T/a/b/c/cgroup.stat nr_descendants)"
obs T.nr_dying "$(val $T/cgroup.stat nr_dying_descendants)"
obs root_keys "$(keys $CG/cgroup.stat)"
