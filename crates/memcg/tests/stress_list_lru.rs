//! Stress test: worker threads add, delete and rotate-walk items across
//! more than 1000 cgroups while another thread removes half of them bottom
//! up. Every worker owns its item ids and remembers the cgroup it added
//! each item with; deletes with that cgroup must always succeed, even after
//! it was removed. At the end every item on a list is on exactly one live
//! list, none is on a removed cgroup's, and all counts agree.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memcg::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign, Walked};
use memcg::memcontrol::MemCgroup;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NODES: usize = 2;
const GROUPS: usize = 10;
const PER_GROUP: usize = 100;
const WORKERS: u32 = 3;
const ITEMS_PER_WORKER: u32 = 400;
const MIN_OPS: usize = 20_000;

fn stress(design: LruDesign, seed: u64) {
    let tree = common::small_tree(NODES, 2048);
    let lru = ListLru::new(
        &tree,
        ListLruConfig {
            memcg_aware: true,
            max_items: WORKERS * ITEMS_PER_WORKER,
            design,
        },
    )
    .unwrap();
    let mut all: Vec<Arc<MemCgroup>> = vec![tree.mkdir("/s").unwrap().memcg().unwrap()];
    for g in 0..GROUPS {
        all.push(tree.mkdir(&format!("/s/g{g}")).unwrap().memcg().unwrap());
        for c in 0..PER_GROUP {
            all.push(
                tree.mkdir(&format!("/s/g{g}/c{c}"))
                    .unwrap()
                    .memcg()
                    .unwrap(),
            );
        }
    }
    assert!(all.len() > 1000);
    let removing_done = AtomicBool::new(false);

    let homes: Vec<Vec<Option<(usize, usize)>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (lru, all, done) = (&lru, &all, &removing_done);
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ u64::from(w + 1) << 40);
                    let base = w * ITEMS_PER_WORKER;
                    let mut homes: Vec<Option<(usize, usize)>> =
                        vec![None; ITEMS_PER_WORKER as usize];
                    let mut ops = 0;
                    while ops < MIN_OPS || !done.load(Ordering::Relaxed) {
                        ops += 1;
                        let slot = rng.random_range(0..ITEMS_PER_WORKER) as usize;
                        let item = base + slot as ItemId;
                        match homes[slot] {
                            None => {
                                let (cg, nid) =
                                    (rng.random_range(0..all.len()), rng.random_range(0..NODES));
                                assert!(
                                    lru.add(item, nid, &all[cg]).unwrap(),
                                    "{design} seed {seed}: add {item}"
                                );
                                homes[slot] = Some((cg, nid));
                            }
                            Some((cg, nid)) => {
                                assert!(
                                    lru.del(item, nid, &all[cg]).unwrap(),
                                    "{design} seed {seed}: del {item} from {} (dying {})",
                                    all[cg].path(),
                                    all[cg].is_dying()
                                );
                                homes[slot] = None;
                            }
                        }
                        if ops % 97 == 0 {
                            // Reorder someone's list; membership must not change.
                            let cg = &all[rng.random_range(0..all.len())];
                            let mut budget = 16;
                            lru.walk_one(
                                rng.random_range(0..NODES),
                                cg,
                                &mut budget,
                                |_, guard| Walked::Rotate(guard),
                            )
                            .unwrap();
                        }
                    }
                    homes
                })
            })
            .collect();

        // Remove groups g0..g4 bottom-up: their children in random order,
        // then the group itself.
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for g in 0..GROUPS / 2 {
            let mut order: Vec<usize> = (0..PER_GROUP).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
            for c in order {
                tree.rmdir(&format!("/s/g{g}/c{c}")).unwrap();
            }
            tree.rmdir(&format!("/s/g{g}")).unwrap();
        }
        removing_done.store(true, Ordering::Relaxed);
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // Every live list, with its items.
    let live: Vec<&Arc<MemCgroup>> = std::iter::once(tree.root())
        .chain(all.iter().filter(|c| !c.is_dying()))
        .collect();
    assert_eq!(live.len(), 1 + 1 + (GROUPS / 2) * (PER_GROUP + 1));
    let mut seen = vec![0u32; (WORKERS * ITEMS_PER_WORKER) as usize];
    let mut counted = [0usize; NODES];
    for cg in &live {
        for (nid, counted) in counted.iter_mut().enumerate() {
            let items = lru.items(nid, cg).unwrap();
            assert_eq!(
                lru.count_one(nid, cg).unwrap(),
                items.len(),
                "{design} seed {seed}: count of {}",
                cg.path()
            );
            *counted += items.len();
            for item in items {
                seen[item as usize] += 1;
            }
        }
    }
    for cg in all.iter().filter(|c| c.is_dying()) {
        assert!(
            design == LruDesign::Legacy || !lru.has_lists(cg),
            "{design}: {} kept lists",
            cg.path()
        );
    }
    let mut on_lists = [0usize; NODES];
    for (w, homes) in homes.iter().enumerate() {
        for (slot, home) in homes.iter().enumerate() {
            let item = w * ITEMS_PER_WORKER as usize + slot;
            let want = u32::from(home.is_some());
            assert_eq!(
                seen[item], want,
                "{design} seed {seed}: item {item} on {} lists, expected {want}",
                seen[item]
            );
            if let Some((_, nid)) = home {
                on_lists[*nid] += 1;
            }
        }
    }
    for nid in 0..NODES {
        assert_eq!(
            counted[nid], on_lists[nid],
            "{design} seed {seed}: node {nid} lists"
        );
        assert_eq!(
            lru.count_node(nid).unwrap(),
            on_lists[nid],
            "{design} seed {seed}: node {nid} total"
        );
    }
    // Removed cgroups released their ids: root, /s, five groups of 101.
    assert_eq!(tree.ids_in_use(), live.len());
}

#[test]
fn adds_and_dels_survive_bottom_up_removal_of_1000_cgroups() {
    let seed = common::stress_seed("list_lru stress");
    for design in LruDesign::ALL {
        stress(design, seed);
    }
}
