//! Loom model of the per-CPU charge stock (`memcontrol/stock.rs`): a
//! charge served through the stock racing `drain_all_stock` (a limit hit
//! by another task, a `memory.max` write, an rmdir). Under loom every
//! thread has slot 0, so the two really share one stock.
#![cfg(loom)]

mod common;

use std::sync::Arc;

use common::{explore, small_tree};
use loom::thread;
use memcg::memcontrol::{ChargeKind, Gfp};

/// The counter always equals the pages charged plus the pages stocked:
/// a drain never loses a stocked page nor gives back one a charge took,
/// whichever of consume, refill and drain runs first.
#[test]
fn a_stocked_charge_racing_a_drain_keeps_the_counter_exact() {
    let outcomes = explore(|| {
        let t = small_tree(1, 4);
        t.set_charge_stock(true);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        // A batch of 64: one page in use, 63 stocked.
        t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        let drainer = {
            let (t, a) = (t.clone(), Arc::clone(&a));
            thread::spawn(move || t.drain_all_stock(&a))
        };
        t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        drainer.join().unwrap();
        let stocked = t.stocked_pages(&a);
        assert_eq!(a.memory().usage(), 2 + stocked, "in use + stocked");
        assert_eq!(t.root().memory().usage(), a.memory().usage());
        t.drain_all_stock(&a);
        assert_eq!(a.memory().usage(), 2);
        t.uncharge(&a, 2, ChargeKind::Anon);
        assert_eq!(t.root().memory().usage(), 0);
        stocked
    });
    // Drained before the second charge (which then took a new batch), or
    // after it (nothing left).
    assert!(outcomes.contains(&0), "{outcomes:?}");
    assert!(outcomes.contains(&63), "{outcomes:?}");
}
