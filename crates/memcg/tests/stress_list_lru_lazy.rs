//! Stress probe of the lazy allocation path (the audit's F1 probe): a
//! list_lru created after the cgroups gives `/a/b` its lists on the first
//! `add`, which races `rmdir /a/b` at a varying distance. After each round
//! the removed cgroup must hold no lists, the item must be on its parent's
//! list, and a new cgroup reusing the id must be able to add (before the
//! fix, a late allocation stranded the item on the dying cgroup's lists and
//! the next `add` with the reused id looped forever).
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use memcg::list_lru::{ListLru, ListLruConfig, LruDesign};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Rounds per design (each is a fresh tree, list_lru and thread).
const ROUNDS: usize = 3000;

/// How long an `add` may take before it counts as livelocked.
const ADD_DEADLINE: Duration = Duration::from_secs(3);

fn round(design: LruDesign, spin: u32, seed: u64, i: usize) {
    let tree = common::small_tree(1, 8);
    let a = tree.mkdir("/a").unwrap().memcg().unwrap();
    let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
    let lru = Arc::new(
        ListLru::new(
            &tree,
            ListLruConfig {
                memcg_aware: true,
                max_items: 8,
                design,
            },
        )
        .unwrap(),
    );
    assert!(lru.add(5, 0, &a).unwrap());
    let go = Arc::new(AtomicBool::new(false));
    let adder = {
        let (lru, b, go) = (Arc::clone(&lru), Arc::clone(&b), Arc::clone(&go));
        std::thread::spawn(move || {
            while !go.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            assert!(lru.add(0, 0, &b).unwrap());
        })
    };
    go.store(true, Ordering::Release);
    for _ in 0..spin {
        std::hint::spin_loop();
    }
    tree.rmdir("/a/b").unwrap();
    adder.join().unwrap();

    let ctx = format!("{design} seed {seed} round {i} (spin {spin})");
    assert_eq!(lru.nr_memcg_lists(), 1, "{ctx}: removed /a/b kept lists");
    let mut on_a = lru.items(0, &a).unwrap();
    on_a.sort();
    assert_eq!(on_a, [0, 5], "{ctx}: item 0 stranded");
    assert_eq!(lru.count_node(0).unwrap(), 2, "{ctx}: node total");

    // The id comes back; adding with it must finish.
    let c = tree.mkdir("/a/c").unwrap().memcg().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    {
        let (lru, c) = (Arc::clone(&lru), Arc::clone(&c));
        std::thread::spawn(move || {
            let added = lru.add(1, 0, &c).unwrap();
            let _ = done_tx.send(added);
        });
    }
    match done_rx.recv_timeout(ADD_DEADLINE) {
        Ok(added) => assert!(added, "{ctx}: add to /a/c"),
        Err(_) => panic!("{ctx}: add to /a/c (id {}) did not return", c.id()),
    }
    assert_eq!(lru.items(0, &c).unwrap(), [1], "{ctx}");
}

#[test]
fn lazy_allocation_racing_rmdir_loses_nothing() {
    let seed = common::stress_seed("lazy_allocation_racing_rmdir_loses_nothing");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for design in LruDesign::ALL {
        for i in 0..ROUNDS {
            // Spread the rmdir over the adder's allocation window.
            let spin = rng.random_range(0..64) * 20;
            round(design, spin, seed, i);
        }
    }
}
