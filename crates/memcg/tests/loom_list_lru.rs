//! Loom models of list_lru reparenting racing list operations.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p memcg --release --test loom_list_lru`.
//! As in `loom_swap_cgroup.rs`, each model asserts that it saw every
//! interesting interleaving, so a loom exploration gap fails loudly.
#![cfg(loom)]

mod common;

use std::collections::BTreeSet;

use common::explore;
use loom::sync::Arc;
use loom::thread;
use memcg::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign};
use memcg::memcontrol::{CgroupTree, MemCgroup};

fn setup(design: LruDesign) -> (CgroupTree, Arc<ListLru>) {
    let tree = common::small_tree(1, 4);
    let lru = ListLru::new(
        &tree,
        ListLruConfig {
            memcg_aware: true,
            max_items: 4,
            design,
        },
    )
    .unwrap();
    (tree, Arc::new(lru))
}

/// Every item on exactly one live list, and the counts agree.
fn assert_consistent(lru: &ListLru, live: &[&MemCgroup], expected: &[ItemId]) {
    let mut all: Vec<ItemId> = live
        .iter()
        .flat_map(|cg| lru.items(0, cg).unwrap())
        .collect();
    all.sort();
    assert_eq!(all, expected, "items lost or duplicated");
    let counted: usize = live.iter().map(|cg| lru.count_one(0, cg).unwrap()).sum();
    assert_eq!(counted, expected.len(), "per-list counts");
    assert_eq!(lru.count_node(0).unwrap(), expected.len(), "node total");
}

/// `del` and `add` with a cgroup that is being removed: the item added to
/// it before must still be found (the race the 2026 fix closed), the new
/// item lands on exactly one live list, nothing is left on a dead list.
#[test]
fn add_and_del_race_reparent() {
    for design in LruDesign::ALL {
        let outcomes = explore(move || {
            let (tree, lru) = setup(design);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
            assert!(lru.add(0, 0, &b).unwrap());
            let remover = {
                let tree = tree.clone();
                thread::spawn(move || tree.rmdir("/a/b").unwrap())
            };
            let had_lists = lru.has_lists(&b);
            assert!(
                lru.del(0, 0, &b).unwrap(),
                "{design}: del missed an item that was added"
            );
            assert!(lru.add(1, 0, &b).unwrap());
            remover.join().unwrap();
            assert!(!lru.has_lists(&b) || design == LruDesign::Legacy);
            assert_eq!(
                lru.count_one(0, &b).unwrap(),
                if design == LruDesign::Legacy { 1 } else { 0 }
            );
            assert_consistent(&lru, &[tree.root(), &a], &[1]);
            assert_eq!(lru.items(0, &a).unwrap(), [1]);
            had_lists
        });
        assert_eq!(
            outcomes,
            BTreeSet::from([false, true]),
            "{design}: both sides of the offline explored"
        );
    }
}

/// Two siblings are removed at the same time while their parent gets a new
/// item: every item ends on the parent's list exactly once.
#[test]
fn sibling_reparents_race_adds_to_their_parent() {
    for design in LruDesign::ALL {
        let outcomes = explore(move || {
            let (tree, lru) = setup(design);
            let p = tree.mkdir("/p").unwrap().memcg().unwrap();
            let x = tree.mkdir("/p/x").unwrap().memcg().unwrap();
            let y = tree.mkdir("/p/y").unwrap().memcg().unwrap();
            lru.add(0, 0, &x).unwrap();
            lru.add(1, 0, &y).unwrap();
            let rm = |path: &'static str| {
                let tree = tree.clone();
                thread::spawn(move || tree.rmdir(path).unwrap())
            };
            let (tx, ty) = (rm("/p/x"), rm("/p/y"));
            let x_gone_at_add = x.is_dying();
            lru.add(2, 0, &p).unwrap();
            tx.join().unwrap();
            ty.join().unwrap();
            assert_consistent(&lru, &[tree.root(), &p], &[0, 1, 2]);
            // Splices go to the head: the order says which reparent ran last.
            (lru.items(0, &p).unwrap(), x_gone_at_add)
        });
        let orders: BTreeSet<_> = outcomes.iter().map(|(order, _)| order.clone()).collect();
        let adds: BTreeSet<_> = outcomes.iter().map(|&(_, gone)| gone).collect();
        assert_eq!(
            orders,
            BTreeSet::from([vec![0, 1, 2], vec![1, 0, 2]]),
            "{design}: both reparent orders"
        );
        assert_eq!(
            adds,
            BTreeSet::from([false, true]),
            "{design}: add before and after an offline"
        );
    }
}

/// A cgroup removed earlier (so its index names its parent) keeps adding
/// and deleting while that parent goes offline: every add lands on a live
/// list and every count stays exact (the race the stress test found in the
/// legacy design: an add on the parent's spliced, about-to-be-erased list).
#[test]
fn removed_grandchild_races_its_parents_offline() {
    for design in LruDesign::ALL {
        let outcomes = explore(move || {
            let (tree, lru) = setup(design);
            let s = tree.mkdir("/s").unwrap().memcg().unwrap();
            let g = tree.mkdir("/s/g").unwrap().memcg().unwrap();
            let c = tree.mkdir("/s/g/c").unwrap().memcg().unwrap();
            lru.add(0, 0, &g).unwrap();
            tree.rmdir("/s/g/c").unwrap();
            let remover = {
                let tree = tree.clone();
                thread::spawn(move || tree.rmdir("/s/g").unwrap())
            };
            let g_gone = !lru.has_lists(&g);
            assert!(lru.add(1, 0, &c).unwrap());
            assert!(lru.del(1, 0, &c).unwrap());
            assert!(lru.add(2, 0, &c).unwrap());
            remover.join().unwrap();
            assert_consistent(&lru, &[tree.root(), &s], &[0, 2]);
            g_gone
        });
        assert_eq!(
            outcomes,
            BTreeSet::from([false, true]),
            "{design}: before and after the offline"
        );
    }
}

/// The lazy path: the list_lru is created after the cgroups, so `/a/b`
/// gets its lists on its first `add`, which races `rmdir /a/b`. Whatever
/// the order, the item ends on a live list exactly once and the removed
/// cgroup keeps no lists (the race the audit found: an allocation that saw
/// the cgroup alive stored lists after the reparent looked, stranding the
/// item and, once the id was reused, livelocking `add`). Mutation check:
/// reading the slot without the allocation lock in `reparent_split` or
/// `reparent_legacy` fails this model for that design.
#[test]
fn lazy_allocation_races_offline() {
    for design in LruDesign::ALL {
        let outcomes = explore(move || {
            let tree = common::small_tree(1, 4);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
            let lru = Arc::new(
                ListLru::new(
                    &tree,
                    ListLruConfig {
                        memcg_aware: true,
                        max_items: 4,
                        design,
                    },
                )
                .unwrap(),
            );
            let adder = {
                let (lru, b) = (Arc::clone(&lru), std::sync::Arc::clone(&b));
                thread::spawn(move || {
                    let dying = b.is_dying();
                    assert!(lru.add(0, 0, &b).unwrap());
                    dying
                })
            };
            tree.rmdir("/a/b").unwrap();
            let dying_at_add = adder.join().unwrap();
            assert_eq!(
                lru.nr_memcg_lists(),
                1,
                "{design}: only /a keeps lists (a removed cgroup's were freed)"
            );
            assert_consistent(&lru, &[tree.root(), &a], &[0]);
            assert_eq!(lru.items(0, &a).unwrap(), [0], "{design}: on the parent");
            // The id comes back for a new cgroup, which gets lists of its own.
            let c = tree.mkdir("/a/c").unwrap().memcg().unwrap();
            assert_eq!(c.id(), b.id(), "lowest free id reused");
            assert!(lru.add(1, 0, &c).unwrap());
            assert_eq!(lru.items(0, &c).unwrap(), [1]);
            dying_at_add
        });
        assert_eq!(
            outcomes,
            BTreeSet::from([false, true]),
            "{design}: the add ran before and after the offline began"
        );
    }
}

/// The type-stable read protocol: a reader (`del`, then `add`) of `/a/b`
/// races `rmdir /a/b`, after which `/a/c` gets b's id and, with it, b's
/// list set, recycled (and an item of its own). The reader may have
/// loaded the set while it was b's and lock a list only once it is c's:
/// the re-check of the owner serial and the dead mark under the lock must
/// send it to the parent, never onto c's list. Mutation check: with the
/// split design's owner check made before taking the list lock instead of
/// under it, the reader's `add` lands on c's list and this model fails.
#[test]
fn reader_races_reparent_and_id_reuse() {
    for design in LruDesign::ALL {
        let outcomes = explore(move || {
            let (tree, lru) = setup(design);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
            assert!(lru.add(0, 0, &a).unwrap());
            assert!(lru.add(1, 0, &b).unwrap());
            let reader = {
                let (lru, b) = (Arc::clone(&lru), std::sync::Arc::clone(&b));
                thread::spawn(move || {
                    assert!(lru.del(1, 0, &b).unwrap(), "{design}: del missed b's item");
                    assert!(lru.add(2, 0, &b).unwrap());
                })
            };
            tree.rmdir("/a/b").unwrap();
            let c = tree.mkdir("/a/c").unwrap().memcg().unwrap();
            assert_eq!(c.id(), b.id(), "b's id (and its set) reused");
            assert!(lru.add(3, 0, &c).unwrap());
            reader.join().unwrap();
            assert_eq!(
                lru.items(0, &c).unwrap(),
                [3],
                "{design}: nothing of b's on c's list"
            );
            assert_eq!(lru.count_one(0, &c).unwrap(), 1, "{design}: c's count");
            assert_consistent(&lru, &[tree.root(), &a, &c], &[0, 2, 3]);
            // b's item 2 went to b's list before the splice (head of a's),
            // or to a's list after the offline (tail).
            lru.items(0, &a).unwrap()
        });
        assert_eq!(
            outcomes,
            BTreeSet::from([vec![0, 2], vec![2, 0]]),
            "{design}: the reader before and after the offline"
        );
    }
}
