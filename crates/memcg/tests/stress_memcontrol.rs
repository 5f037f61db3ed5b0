//! Stress test of charging and swap accounting: threads charge, uncharge,
//! swap out, swap in and free slots across a small hierarchy with limits,
//! while another thread removes cgroups. At the end, once everything is
//! freed, every counter is zero, no id is pinned, and removed cgroups have
//! released their ids.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;

use memcg::SwapEntry;
use memcg::memcontrol::Gfp;
use memcg::memcontrol::{ChargeKind, MemCgroup};
use memcg::swap_cgroup::{Design, SwapCgroup};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const THREADS: usize = 3;
const SLOTS_PER_THREAD: u64 = 4096;

/// What a thread holds: memory charges and swap slots, each with the
/// cgroup that holds the charge.
#[derive(Default)]
struct Held {
    memory: Vec<(Arc<MemCgroup>, u64)>,
    swap: Vec<(SwapEntry, u32)>,
}

#[test]
fn charges_and_swap_balance_to_zero_under_churn_and_rmdir() {
    let seed = common::stress_seed("memcontrol stress");
    let tree = common::small_tree(1, 256);
    let swap = SwapCgroup::new(Design::Memcg);
    swap.swapon(0, SLOTS_PER_THREAD * THREADS as u64).unwrap();
    let mut cgs = vec![
        tree.mkdir("/a").unwrap().memcg().unwrap(),
        tree.mkdir("/b").unwrap().memcg().unwrap(),
    ];
    for i in 0..30 {
        cgs.push(
            tree.mkdir(&format!("/{}/c{i}", if i % 2 == 0 { "a" } else { "b" }))
                .unwrap()
                .memcg()
                .unwrap(),
        );
    }
    cgs[0].memory().set_max(2000).unwrap();
    cgs[1].swap().set_max(1500).unwrap();
    let victims: Vec<Arc<MemCgroup>> = cgs[2..12].to_vec();

    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (tree, swap, cgs) = (&tree, &swap, &cgs);
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed + t as u64);
                let mut held = Held::default();
                let mut free_slots: Vec<u64> = (0..SLOTS_PER_THREAD / 16)
                    .map(|i| t as u64 * SLOTS_PER_THREAD + i * 16)
                    .collect();
                for _ in 0..4000 {
                    let cg = &cgs[rng.random_range(0..cgs.len())];
                    match rng.random_range(0..5) {
                        0 | 1 => {
                            let n = rng.random_range(1..32);
                            if tree
                                .try_charge(cg, n, ChargeKind::Anon, Gfp::Kernel)
                                .is_ok()
                            {
                                held.memory.push((Arc::clone(cg), n));
                            }
                        }
                        2 => {
                            if let Some((c, n)) = held.memory.pop() {
                                tree.uncharge(&c, n, ChargeKind::Anon);
                            }
                        }
                        3 => {
                            // Swap out: charge swap for a slot range owned by this thread.
                            if let Some(offset) = free_slots.pop() {
                                let nr = [1u32, 4, 16][rng.random_range(0..3)];
                                let entry = SwapEntry::new(0, offset).unwrap();
                                match tree.swapout_charge(cg, swap, entry, nr) {
                                    Ok(_) => held.swap.push((entry, nr)),
                                    Err(_) => free_slots.push(offset),
                                }
                            }
                        }
                        _ => {
                            // Swap in (charging the owner or this cgroup) and free the slots.
                            if let Some((entry, nr)) = held.swap.pop() {
                                if let Ok(charged) = tree.swapin_charge(
                                    swap,
                                    entry,
                                    cg,
                                    u64::from(nr),
                                    ChargeKind::Anon,
                                    Gfp::Kernel,
                                ) {
                                    held.memory.push((charged, u64::from(nr)));
                                }
                                tree.swap_uncharge(swap, entry, nr).unwrap();
                                free_slots.push(entry.swp_offset());
                            }
                        }
                    }
                }
                for (c, n) in held.memory.drain(..) {
                    tree.uncharge(&c, n, ChargeKind::Anon);
                }
                for (entry, nr) in held.swap.drain(..) {
                    tree.swap_uncharge(swap, entry, nr).unwrap();
                }
            });
        }
        let tree = &tree;
        s.spawn(move || {
            for v in &victims {
                std::thread::yield_now();
                tree.rmdir_cgroup(v).unwrap();
            }
        });
    });

    // Pages the threads' charge stocks still hold are charged, not used.
    tree.drain_all_stock(tree.root());
    for cg in &cgs {
        assert_eq!(cg.memory().usage(), 0, "seed {seed}: {} memory", cg.path());
        assert_eq!(cg.swap().usage(), 0, "seed {seed}: {} swap", cg.path());
        assert!(cg.id_pins() <= 1, "seed {seed}: {} pinned", cg.path());
        if cg.is_dying() {
            assert!(
                tree.lookup(cg.id()).is_none_or(|c| !Arc::ptr_eq(&c, cg)),
                "seed {seed}: {} id kept",
                cg.path()
            );
        }
    }
    assert_eq!(tree.root().memory().usage(), 0, "seed {seed}");
    assert_eq!(tree.root().swap().usage(), 0, "seed {seed}");
    assert_eq!(
        tree.ids_in_use(),
        1 + cgs.len() - 10,
        "seed {seed}: ids of removed cgroups released"
    );
    // Nothing but this test's own references keeps the removed ones dying.
    let root = tree.root_cgroup();
    assert_eq!(root.nr_dying_descendants(), 10, "seed {seed}");
    drop(cgs);
    assert_eq!(
        (root.nr_dying_descendants(), root.nr_dying_subsys_memory()),
        (0, 0),
        "seed {seed}: removed cgroups released"
    );
    for offset in 0..SLOTS_PER_THREAD * THREADS as u64 {
        assert_eq!(
            swap.lookup(SwapEntry::new(0, offset).unwrap()).unwrap(),
            0,
            "seed {seed}: slot {offset}"
        );
    }
}
