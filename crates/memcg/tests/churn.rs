//! Host memory under cgroup churn: 100000 memory cgroups are made and
//! removed, 10000 at a time, each holding a page, a slab object and a
//! list_lru item across its rmdir (so it goes dying and is released when
//! they go). A released cgroup leaves nothing behind, so the process's
//! resident memory after the first 10000 stays within a bound while the
//! other 90000 come and go (before the fix every rmdir left its memory
//! cgroup allocated on its parent's list of dying children, ~0.9 KB each:
//! ~80 MB here).
//!
//! Alone in its test binary: it measures the whole process's VmRSS.
#![cfg(all(target_os = "linux", not(loom)))]

use std::sync::Arc;

use memcg::list_lru::{ListLru, ListLruConfig};
use memcg::memcontrol::Gfp;
use memcg::memcontrol::{CgroupTree, ChargeKind, MemCgroup, SlabKind, TreeConfig};

const BATCH: u32 = 10_000;
const CYCLES: u32 = 10;

/// Growth of VmRSS allowed over the 90000 cgroups after the first 10000:
/// allocator slack, not per-cgroup residue (which would be ≥ 9 MB at
/// 100 bytes each).
const RSS_GROWTH_BOUND_KB: u64 = 8 * 1024;

fn vm_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .expect("a VmRSS line")
}

/// Makes `BATCH` children of `n`, gives each a page, a slab object and a
/// list_lru item, removes them all, then frees what they held.
fn cycle(tree: &CgroupTree, n: &Arc<MemCgroup>, lru: &ListLru) {
    let children: Vec<Arc<MemCgroup>> = (0..BATCH)
        .map(|i| {
            tree.mkdir_in((n).cgroup(), &i.to_string())
                .unwrap()
                .memcg()
                .unwrap()
        })
        .collect();
    let mut held = Vec::with_capacity(children.len());
    for (i, c) in children.iter().enumerate() {
        tree.try_charge(c, 1, ChargeKind::Anon, Gfp::Kernel)
            .unwrap();
        let objcg = c.obj_cgroup();
        tree.charge_slab(&objcg, 64, SlabKind::Reclaimable, Gfp::Kernel)
            .unwrap();
        assert!(lru.add(i as u32, 0, c).unwrap());
        held.push(objcg);
    }
    for c in &children {
        tree.rmdir_cgroup(c).unwrap();
    }
    for (i, (c, objcg)) in children.into_iter().zip(held).enumerate() {
        tree.uncharge(&c, 1, ChargeKind::Anon);
        tree.uncharge_slab(&objcg, 64, SlabKind::Reclaimable);
        // Reparented to `n` at rmdir.
        assert!(lru.del(i as u32, 0, n).unwrap());
    }
    assert_eq!(n.cgroup().nr_dying_descendants(), 0, "all released");
}

#[test]
fn churning_100000_cgroups_leaves_nothing_behind() {
    let tree = CgroupTree::new(TreeConfig::default());
    let lru = ListLru::new(
        &tree,
        ListLruConfig {
            max_items: BATCH,
            ..ListLruConfig::default()
        },
    )
    .unwrap();
    let n = tree.mkdir("/n").unwrap().memcg().unwrap();
    cycle(&tree, &n, &lru);
    let after_first = vm_rss_kb();
    for _ in 1..CYCLES {
        cycle(&tree, &n, &lru);
    }
    let after_all = vm_rss_kb();
    let growth = after_all.saturating_sub(after_first);
    eprintln!("VmRSS after 10000: {after_first} kB, after 100000: {after_all} kB");
    assert!(
        growth <= RSS_GROWTH_BOUND_KB,
        "VmRSS grew by {growth} kB over 90000 cgroups (bound {RSS_GROWTH_BOUND_KB} kB)"
    );
    assert_eq!(tree.ids_in_use(), 2, "root and /n");
    // The freed slab objects' pages went to this thread's charge stock
    // (`obj_cgroup_uncharge_pages`), charged to /n until drained.
    tree.drain_all_stock(&n);
    assert_eq!(n.memory().usage(), 0);
}
