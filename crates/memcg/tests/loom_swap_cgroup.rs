//! Loom models of the swap_cgroup designs: every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS`) of two or three threads on the real code.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p memcg --release --test loom_swap_cgroup`.
//! Under loom a cluster has 4 slots (`SWAPFILE_CLUSTER`), so small maps
//! still span several clusters.
//!
//! Loom 0.7's DPOR can stop exploring when a spawned thread's first step is
//! an atomic load (tokio-rs/loom#392). So the models keep writers on the
//! main thread where they can, and every model collects the outcomes it saw
//! and asserts that each interesting one occurred: a model that silently
//! stopped exploring fails instead of passing.
#![cfg(loom)]

mod common;

use std::collections::BTreeSet;

use common::explore;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use memcg::SwapEntry;
use memcg::mm_types::SWAPFILE_CLUSTER;
use memcg::swap_cgroup::{Design, SwapCgroup, SwapCgroupError, SwapCgroupMap};

fn small_map(design: Design) -> Arc<SwapCgroupMap> {
    Arc::new(SwapCgroupMap::new(design, 2 * SWAPFILE_CLUSTER as u64).unwrap())
}

/// Two owners of the two halves of one packed word (slots 0 and 1) record
/// and clear at the same time: neither may clobber the other.
#[test]
fn neighbours_on_one_word_never_clobber() {
    for design in Design::ALL {
        let outcomes = explore(move || {
            let map = small_map(design);
            let other = Arc::clone(&map);
            let neighbour = thread::spawn(move || {
                assert_eq!(other.record(1, 2, 1).unwrap(), 0);
                let saw_slot0 = other.lookup(0).unwrap();
                assert_eq!(other.clear(1, 1).unwrap(), 2);
                assert_eq!(other.record(1, 3, 1).unwrap(), 0);
                saw_slot0
            });
            assert_eq!(map.record(0, 1, 1).unwrap(), 0);
            assert_eq!(map.clear(0, 1).unwrap(), 1);
            assert_eq!(map.record(0, 4, 1).unwrap(), 0);
            let saw_slot0 = neighbour.join().unwrap();
            assert_eq!(map.lookup(0).unwrap(), 4, "{design}: slot 0 clobbered");
            assert_eq!(map.lookup(1).unwrap(), 3, "{design}: slot 1 clobbered");
            saw_slot0
        });
        assert_eq!(
            outcomes,
            BTreeSet::from([0, 1, 4]),
            "{design}: the neighbour must see slot 0 before, during and after"
        );
    }
}

/// The recorder pins the id (a relaxed store standing for the id pin that
/// swap-out takes before recording) and records a two-slot folio; a lookup
/// on another thread that sees the id must also see the pin. With
/// `prealloc`, the cluster already exists, so only the slot's own ordering
/// can carry the pin; without, the lookup may also race the allocation.
#[test]
fn record_publishes_to_concurrent_lookup() {
    for design in Design::ALL {
        for prealloc in [true, false] {
            let outcomes = explore(move || {
                let map = small_map(design);
                if prealloc {
                    map.record(0, 1, 1).unwrap();
                }
                let pin = Arc::new(AtomicUsize::new(0));
                let (m, p) = (Arc::clone(&map), Arc::clone(&pin));
                let reader = thread::spawn(move || {
                    let seen = m.lookup(3).unwrap();
                    (seen, p.load(Ordering::Relaxed))
                });
                pin.store(1, Ordering::Relaxed);
                map.record(2, 7, 2).unwrap();
                let (seen, pin_seen) = reader.join().unwrap();
                assert!(seen == 0 || seen == 7, "{design}: lookup saw {seen}");
                assert!(
                    !(seen == 7 && pin_seen == 0),
                    "{design}: id visible before its pin"
                );
                seen
            });
            assert_eq!(
                outcomes,
                BTreeSet::from([0, 7]),
                "{design} prealloc={prealloc}"
            );
        }
    }
}

/// Two owners write different slots of one never-used cluster at the same
/// time, racing to allocate it (`cluster`) or to mark its page written
/// (`memcg`), while a third thread looks up: both ids survive, the memory is
/// counted once, and the lookup sees 0 or the id.
#[test]
fn lazy_cluster_allocation_races_itself() {
    for design in [Design::Memcg, Design::Cluster] {
        let outcomes = explore(move || {
            let pages = 2 * SWAPFILE_CLUSTER as u64;
            // One cluster written sequentially: what a single allocation costs.
            let reference = SwapCgroupMap::new(design, pages).unwrap();
            reference.record(0, 1, 1).unwrap();
            let one_cluster_bytes = reference.memory_bytes();

            let map = Arc::new(SwapCgroupMap::new(design, pages).unwrap());
            let (a, r) = (Arc::clone(&map), Arc::clone(&map));
            let writer = thread::spawn(move || assert_eq!(a.record(1, 2, 1).unwrap(), 0));
            let reader = thread::spawn(move || r.lookup(0).unwrap());
            assert_eq!(map.record(0, 1, 1).unwrap(), 0);
            writer.join().unwrap();
            let seen = reader.join().unwrap();
            assert!(seen == 0 || seen == 1, "{design}: lookup saw {seen}");
            assert_eq!(map.lookup(0).unwrap(), 1, "{design}: first allocation lost");
            assert_eq!(
                map.lookup(1).unwrap(),
                2,
                "{design}: second allocation lost"
            );
            assert_eq!(map.lookup(SWAPFILE_CLUSTER as u64).unwrap(), 0);
            assert_eq!(
                map.memory_bytes(),
                one_cluster_bytes,
                "{design}: duplicate cluster kept"
            );
            seen
        });
        assert_eq!(outcomes, BTreeSet::from([0, 1]), "{design}");
    }
}

/// swapoff of one type while another thread uses a different type: the
/// other device is undisturbed, and a late user of the switched-off type
/// gets a clean error or a valid (detached) map, never a dangling one.
#[test]
fn swapoff_races_use_of_other_devices() {
    let outcomes = explore(|| {
        let sc = Arc::new(SwapCgroup::new(Design::Memcg));
        sc.swapon(0, 4).unwrap();
        sc.swapon(1, 4).unwrap();
        let held = sc.device(0).unwrap();
        let user = Arc::clone(&sc);
        let t = thread::spawn(move || {
            let e1 = SwapEntry::new(1, 2).unwrap();
            assert_eq!(user.record(e1, 5, 1).unwrap(), 0);
            assert_eq!(user.lookup(e1).unwrap(), 5);
            match user.lookup(SwapEntry::new(0, 1).unwrap()) {
                Ok(id) => {
                    assert!(id == 0 || id == 9);
                    true
                }
                Err(e) => {
                    assert_eq!(e, SwapCgroupError::DeviceOff { ty: 0 });
                    false
                }
            }
        });
        held.record(1, 9, 1).unwrap();
        sc.swapoff(0).unwrap();
        assert_eq!(held.lookup(1).unwrap(), 9);
        let found_device0 = t.join().unwrap();
        assert_eq!(sc.lookup(SwapEntry::new(1, 2).unwrap()).unwrap(), 5);
        found_device0
    });
    assert_eq!(outcomes, BTreeSet::from([false, true]));
}
