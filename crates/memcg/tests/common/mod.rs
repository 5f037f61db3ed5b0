//! Helpers shared by the integration tests (and, through `#[path]`, by
//! memcg-sim's): each test crate includes this module and uses a subset of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::sync::Arc;

use memcg::fs::{FsSource, Superblock};
use memcg::list_lru::LruDesign;
use memcg::memcontrol::{CgroupTree, MemcgMetadata, TreeConfig};
use memcg::vmscan::SwapSpace;

/// The seed for a randomised stress test: `MEMCG_STRESS_SEED` if set, else
/// derived from the clock. Printed so a failing run can be replayed (the
/// test harness shows captured output of failing tests).
pub fn stress_seed(test: &str) -> u64 {
    let seed = std::env::var("MEMCG_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
    eprintln!("{test}: seed {seed} (replay with MEMCG_STRESS_SEED={seed})");
    seed
}

/// The seed for a stress test that runs one fixed seed by default:
/// `MEMCG_STRESS_SEED` if set, else `default`. Printed as
/// [`stress_seed`] prints its seed.
pub fn stress_seed_or(test: &str, default: u64) -> u64 {
    let seed = std::env::var("MEMCG_STRESS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default);
    eprintln!("{test}: seed {seed} (replay with MEMCG_STRESS_SEED={seed})");
    seed
}

/// A tree where every cgroup has memory, with `nr_nodes` NUMA nodes and
/// room for `max_ids` memory cgroup ids (small, so that id exhaustion and
/// reuse are reachable). Memory cgroups charge no metadata to their
/// parents, so that charges balance to exact figures.
pub fn small_tree(nr_nodes: usize, max_ids: u32) -> CgroupTree {
    let tree = CgroupTree::new(TreeConfig {
        nr_nodes,
        max_ids,
        ..TreeConfig::default()
    });
    tree.set_memcg_metadata(MemcgMetadata::NONE);
    tree
}

/// Branches (atomic operations and thread switches) one loom execution may
/// take before loom calls it a livelock.
#[cfg(loom)]
const MAX_BRANCHES: usize = 20_000;

/// Runs `model` under loom and returns the set of outcomes it produced, so
/// that a model can assert every interesting interleaving occurred (loom
/// 0.7 can stop exploring early, tokio-rs/loom#392: a model that silently
/// stopped fails instead of passing).
#[cfg(loom)]
pub fn explore<T: Ord + std::fmt::Debug + Send + 'static>(
    model: impl Fn() -> T + Send + Sync + 'static,
) -> std::collections::BTreeSet<T> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let sink = std::sync::Arc::clone(&seen);
    // The models' set-up (a tree, a swap device, charges through every
    // level) is sequential but still a chain of atomic operations, each a
    // loom branch; loom's default of 1000 branches per execution is below
    // what a model that also tears its tree down takes. Builder::new()
    // still reads LOOM_MAX_PREEMPTIONS and the other LOOM_* settings.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = MAX_BRANCHES;
    builder.check(move || {
        let outcome = model();
        sink.lock().unwrap().insert(outcome);
    });
    std::mem::take(&mut *seen.lock().unwrap())
}

/// A filesystem on `source` in `tree`, its caches on `Split` list_lrus,
/// with no swap (refault distances against an empty swap space).
pub fn mount_fs(tree: &CgroupTree, source: FsSource) -> Arc<Superblock> {
    Superblock::mount(tree, source, LruDesign::Split, Arc::new(SwapSpace::default)).unwrap()
}

/// [`mount_fs`] of a RAM disk of `size_bytes`.
pub fn ram_fs(tree: &CgroupTree, size_bytes: u64) -> Arc<Superblock> {
    mount_fs(tree, FsSource::Ram { size_bytes })
}
