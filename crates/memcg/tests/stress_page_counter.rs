//! Stress test: threads try-charge and uncharge random amounts at the
//! leaves of a depth-4 tree while another thread moves limits; no level
//! ever ends above a limit it accepted, and everything drains to zero.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memcg::page_counter::PageCounter;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The most that charging threads can have added speculatively at once.
const IN_FLIGHT: u64 = 4 * 63;

#[test]
fn depth_four_under_churn_and_limit_changes() {
    let seed = common::stress_seed("page_counter stress");
    // root -> mid -> {l0, l1} -> leaves (two each): depth 4.
    let root = Arc::new(PageCounter::new(None, true));
    let mid = Arc::new(PageCounter::new(Some(Arc::clone(&root)), true));
    let lower: Vec<Arc<PageCounter>> = (0..2)
        .map(|_| Arc::new(PageCounter::new(Some(Arc::clone(&mid)), true)))
        .collect();
    let leaves: Vec<Arc<PageCounter>> = (0..4)
        .map(|i| Arc::new(PageCounter::new(Some(Arc::clone(&lower[i / 2])), true)))
        .collect();
    mid.set_max(1000).unwrap();
    let finished = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for (t, leaf) in leaves.iter().enumerate() {
            let finished = &finished;
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed + t as u64);
                let mut held = Vec::new();
                for _ in 0..20_000 {
                    if rng.random_bool(0.55) {
                        let n = rng.random_range(1..64);
                        if leaf.try_charge(n).is_ok() {
                            held.push(n);
                        }
                    } else if let Some(n) = held.pop() {
                        leaf.uncharge(n);
                    }
                }
                for n in held.drain(..) {
                    leaf.uncharge(n);
                }
                finished.fetch_add(1, Ordering::Release);
            });
        }
        let (mid, finished, nr_leaves) = (&mid, &finished, leaves.len());
        s.spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfeed);
            while finished.load(Ordering::Acquire) < nr_leaves {
                let limit = rng.random_range(100..1500);
                if mid.set_max(limit).is_ok() {
                    // Accepted: a snapshot may exceed it only by charges
                    // still in flight, which will back out (speculative
                    // charging): at most one per charging thread.
                    assert!(
                        mid.usage() <= limit.max(mid.max()) + IN_FLIGHT,
                        "seed {seed}: over an accepted limit"
                    );
                }
                std::thread::yield_now();
            }
        });
    });
    for c in std::iter::once(&root)
        .chain([&mid])
        .chain(&lower)
        .chain(&leaves)
    {
        assert_eq!(c.usage(), 0, "seed {seed}: drained");
        assert!(c.watermark() > 0);
    }
    assert!(
        mid.watermark() <= 1500 + IN_FLIGHT,
        "seed {seed}: peak {} above every limit",
        mid.watermark()
    );
    assert_eq!(root.children_min_usage(), 0);
}
