//! Workingset detection: shadow entries and refault distances
//! (mm/workingset.c, v6.14, classic LRU).
//!
//! When reclaim drops a page-cache folio, the file's mapping keeps a
//! [`Shadow`] in its place: the memory cgroup the reclaim was for (its
//! target; the root for the machine's reclaim), that cgroup's eviction
//! clock (`nonresident_age`) just before, and whether the folio had been
//! in the working set (`PG_workingset`). The clock of a memory cgroup and
//! of all its ancestors advances with every eviction and every activation
//! below it.
//!
//! When the page is read again (a refault), the distance `now - then` on
//! the evicting cgroup's clock is how many pages were evicted or
//! activated since: had the active file list (plus the anon lists when
//! the cgroup can swap) been that much bigger, the folio would have
//! stayed. If the distance fits in it, the refaulting folio goes straight
//! to the active list (`workingset_activate_*`), and if it had been in
//! the working set before, it is a `workingset_restore_*`; every refault
//! counts `workingset_refault_*`. Activations are what reclaim watches to
//! decide that the active lists are too big (`prepare_scan_control`).
//!
//! Anonymous pages get the same treatment through the swap cache, which
//! keeps a shadow per swapped-out folio until its slots are freed
//! (`swap_state.rs`).
//!
//! # Shadow nodes
//!
//! Shadows take memory: a page cache's radix-tree nodes (`xarray.rs`)
//! stay while they hold shadows. A leaf node holding only shadows is a
//! *shadow node* (`workingset_update_node`): it sits on the machine's one
//! memcg-aware list_lru of shadow nodes (`ShadowNodes`), on the list of
//! the memory cgroup its node is charged to, and the "mm-shadow" shrinker
//! frees them (`count_shadow_nodes`, `shadow_lru_isolate`): for a memory
//! cgroup it counts the nodes beyond `max_nodes`, an eighth of its own
//! pages (its LRU pages plus its own slab, in pages: shadow nodes beyond
//! 1/8 entry density cannot all be useful), and with `seeks` 0 it scans
//! half of those per call. Freeing a node deletes its shadows and the
//! nodes above that empty, counts `workingset_nodereclaim` on the node's
//! memory cgroup, and may make the mapping's inode reclaimable
//! (`mapping_shrinkable`). Swap-cache shadows are not on the list: a swap
//! slot's shadow goes with the slot.
//!
//! Locking: the clocks are relaxed atomics (a statistic whose exact
//! interleaving does not matter); statistics are the memory cgroup's. The
//! shadow-node list is updated under the owning mapping's lock (mapping,
//! then list lock); the shrinker's walk, under a list lock, only tries the
//! mapping's lock (`xa_trylock`) and skips the node if it is held. The
//! table of list items is a leaf lock.

use std::collections::HashMap;
use std::sync::Weak;

use crate::folio::Folio;
use crate::list_lru::{ItemGuard, ItemId, ListLru, ListLruConfig, LruDesign, Walked};
use crate::lruvec::{LruList, lru_note_cost};
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use crate::mm_types::PAGE_SIZE;
use crate::shrinker::{ShrinkControl, ShrinkCount, ShrinkScan, Shrinker, ShrinkerHandle};
use crate::sync::{Arc, Mutex, Ordering, lock};

/// What a mapping keeps in place of an evicted folio (`pack_shadow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shadow {
    /// The id of the memory cgroup the evicting reclaim was for.
    pub memcg_id: u16,
    /// Its serial, checked only with [`CgroupTree::shadow_memcg_serial`]:
    /// v6.14 takes a reused id for the same cgroup (it only costs
    /// accuracy).
    serial: u64,
    /// Its `nonresident_age` before the eviction.
    eviction: u64,
    /// `PG_workingset` at eviction.
    workingset: bool,
}

impl Shadow {
    /// Whether the evicted folio had been in the working set
    /// (`PG_workingset`): reading it back is a memory stall.
    pub fn workingset(&self) -> bool {
        self.workingset
    }
}

/// Advances the eviction clock of `memcg` and every ancestor by `nr_pages`
/// (`workingset_age_nonresident`).
fn age_nonresident(memcg: &MemCgroup, nr_pages: u64) {
    for m in memcg.self_and_ancestors() {
        // Relaxed: a clock read for distances only.
        m.lruvec()
            .nonresident_age
            .fetch_add(nr_pages, Ordering::Relaxed);
    }
}

/// A folio is leaving the page cache or going to swap by a reclaim of
/// `target` (`workingset_eviction`; the root for reclaim of the whole
/// machine): the shadow records the target's eviction clock as it was,
/// then the clock of the target and its ancestors advances.
pub fn workingset_eviction(folio: &Folio, target: &MemCgroup) -> Shadow {
    // Relaxed: see `age_nonresident`.
    let eviction = target.lruvec().nonresident_age.load(Ordering::Relaxed);
    age_nonresident(target, u64::from(folio.nr()));
    Shadow {
        memcg_id: target.id(),
        serial: target.serial(),
        eviction,
        workingset: folio.lru().workingset(),
    }
}

/// A folio was activated by an access (`workingset_activation`).
pub(crate) fn workingset_activation(folio: &Folio) {
    age_nonresident(&folio.memcg(), u64::from(folio.nr()));
}

/// `workingset_test_recent`: whether the refault distance on the
/// evicting cgroup's clock fits in its working set: its active file list,
/// plus for anon its inactive file list, plus, when it can swap, its
/// active anon list (and for file its inactive anon list too).
/// `swap_free_pages` tells the swap devices' free space
/// (`get_nr_swap_pages`), asked only if needed.
pub(crate) fn workingset_test_recent(
    tree: &CgroupTree,
    shadow: &Shadow,
    file: bool,
    swap_free_pages: &dyn Fn() -> u64,
) -> bool {
    tree.with_memcg(shadow.memcg_id, |memcg| {
        if tree.shadow_memcg_serial() && memcg.serial() != shadow.serial {
            return false;
        }
        // Relaxed: see `age_nonresident`.
        let now = memcg.lruvec().nonresident_age.load(Ordering::Relaxed);
        let distance = now.wrapping_sub(shadow.eviction);
        let pages = |s| u64::try_from(memcg.stat(s)).unwrap_or(0);
        let mut workingset_size = pages(MemcgStat::ActiveFile);
        if !file {
            workingset_size += pages(MemcgStat::InactiveFile);
        }
        if distance <= workingset_size {
            return true;
        }
        if tree.nr_swap_pages(memcg, swap_free_pages()) > 0 {
            workingset_size += pages(MemcgStat::ActiveAnon);
            if file {
                workingset_size += pages(MemcgStat::InactiveAnon);
            }
        }
        distance <= workingset_size
    })
    .unwrap_or(false)
}

/// A folio is coming back where `shadow` was (`workingset_refault`), a
/// page-cache read or a swap-in, charged to its new memory cgroup already
/// and not yet on a list. Counts the refault there; if the distance fits
/// in the working set, marks the folio to go on the active list (counting
/// the activation, and the restore if it had been in the working set,
/// which also makes reclaiming its type look more costly, and marks it
/// `PG_workingset`: reading it in is a memory stall). Returns whether it
/// did.
pub fn workingset_refault(
    tree: &CgroupTree,
    folio: &Folio,
    shadow: &Shadow,
    swap_free_pages: &dyn Fn() -> u64,
) -> bool {
    let file = folio.is_file();
    let memcg = folio.memcg();
    let nr = i64::from(folio.nr());
    let (refault, activate, restore) = if file {
        (
            MemcgStat::WorkingsetRefaultFile,
            MemcgStat::WorkingsetActivateFile,
            MemcgStat::WorkingsetRestoreFile,
        )
    } else {
        (
            MemcgStat::WorkingsetRefaultAnon,
            MemcgStat::WorkingsetActivateAnon,
            MemcgStat::WorkingsetRestoreAnon,
        )
    };
    memcg.mod_stat(refault, nr);
    if !workingset_test_recent(tree, shadow, file, swap_free_pages) {
        return false;
    }
    folio.lru().set_active();
    age_nonresident(&memcg, nr as u64);
    memcg.mod_stat(activate, nr);
    if shadow.workingset {
        folio.lru().set_workingset();
        lru_note_cost(&memcg, file, nr as u64, 0);
        memcg.mod_stat(restore, nr);
    }
    true
}

/// Shadow nodes the machine can list at once (list_lru item ids): one per
/// 64 pages of shadows, 4 TiB of them.
#[cfg(not(loom))]
const MAX_SHADOW_NODES: u32 = 1 << 24;
/// Under loom a few: its list_lru tables are allocated whole, every entry
/// a modelled atomic, for every execution of a model.
#[cfg(loom)]
const MAX_SHADOW_NODES: u32 = 64;

/// A mapping whose shadow nodes are on the list: the shrinker's way back
/// from a list item to the mapping (`container_of(node->array, ...)`).
pub(crate) trait ShadowOwner: Send + Sync {
    /// Frees its shadow node `leaf`, the item `guard` holds
    /// (`shadow_lru_isolate`): without waiting for the mapping's lock
    /// (skipped if held), takes the item off the list, drops the list lock,
    /// deletes the node's shadows and the nodes that empty, counts
    /// `workingset_nodereclaim`, and adds the bytes of the nodes freed to
    /// `freed_bytes`.
    fn isolate_shadow_node<'g>(
        &self,
        leaf: u64,
        guard: ItemGuard<'g>,
        freed_bytes: &mut u64,
    ) -> Walked<'g>;
}

/// Who each listed shadow node belongs to.
#[derive(Default)]
struct Owners {
    by_item: HashMap<ItemId, (Weak<dyn ShadowOwner>, u64)>,
    free: Vec<ItemId>,
    next: ItemId,
}

/// The machine's shadow nodes (`shadow_nodes`) and their shrinker
/// (module docs). One per tree, shared by every mapping
/// ([`ShadowNodes::of`]).
pub(crate) struct ShadowNodes {
    lru: ListLru,
    owners: Mutex<Owners>,
    /// Registered while the list exists.
    shrinker: Mutex<Option<ShrinkerHandle>>,
}

impl ShadowNodes {
    /// The shadow-node list of `tree`, made and its shrinker registered
    /// on first use (`workingset_init`).
    pub(crate) fn of(tree: &CgroupTree) -> Arc<ShadowNodes> {
        tree.tree_local(|| {
            let config = ListLruConfig {
                memcg_aware: true,
                max_items: MAX_SHADOW_NODES,
                design: LruDesign::Split,
            };
            let lru = ListLru::new(tree, config).expect("a shrinker id for the shadow nodes");
            let id = lru.shrinker_id();
            let nodes = Arc::new(ShadowNodes {
                lru,
                owners: Mutex::new(Owners::default()),
                shrinker: Mutex::new(None),
            });
            let shrinker = Arc::new(ShadowShrinker(Arc::downgrade(&nodes)));
            *lock(&nodes.shrinker) = Some(crate::shrinker::register_shrinker(tree, shrinker, id));
            nodes
        })
    }

    /// Lists `owner`'s leaf `leaf`, charged to `memcg`, as a shadow node
    /// (`list_lru_add_obj`); `None` if the list is full (the node then
    /// stays until its mapping lets it go).
    pub(crate) fn add(
        &self,
        memcg: &MemCgroup,
        owner: Weak<dyn ShadowOwner>,
        leaf: u64,
    ) -> Option<ItemId> {
        let item = {
            let mut owners = lock(&self.owners);
            let item = match owners.free.pop() {
                Some(item) => item,
                None if owners.next < MAX_SHADOW_NODES => {
                    owners.next += 1;
                    owners.next - 1
                }
                None => return None,
            };
            owners.by_item.insert(item, (owner, leaf));
            item
        };
        match self.lru.add(item, 0, memcg) {
            Ok(_) => Some(item),
            Err(_) => {
                self.release(item);
                None
            }
        }
    }

    /// Takes `item` off the list (`list_lru_del_obj`; `memcg` is the
    /// node's memory cgroup now) and frees its id.
    pub(crate) fn del(&self, item: ItemId, memcg: &MemCgroup) {
        let _ = self.lru.del(item, 0, memcg);
        self.release(item);
    }

    /// Frees the id of an item already off the list.
    pub(crate) fn release(&self, item: ItemId) {
        let mut owners = lock(&self.owners);
        if owners.by_item.remove(&item).is_some() {
            owners.free.push(item);
        }
    }

    /// Shadow nodes listed under `memcg` on node `nid`.
    pub(crate) fn count(&self, nid: usize, memcg: &MemCgroup) -> u64 {
        self.lru.count_one(nid, memcg).unwrap_or(0) as u64
    }

    fn owner(&self, item: ItemId) -> Option<(Weak<dyn ShadowOwner>, u64)> {
        lock(&self.owners).by_item.get(&item).cloned()
    }
}

/// Shadow nodes listed under `memcg` (the kernel's `workingset_nodes` of
/// its lruvec; not in `memory.stat`).
pub fn nr_shadow_nodes(tree: &CgroupTree, memcg: &MemCgroup) -> u64 {
    ShadowNodes::of(tree).count(0, memcg)
}

/// The most shadow nodes `memcg` keeps before the shrinker takes the rest
/// (`count_shadow_nodes`): an eighth of its own pages, LRU and slab.
pub fn max_shadow_nodes(memcg: &MemCgroup) -> u64 {
    let lru: u64 = LruList::ALL
        .iter()
        .map(|&list| memcg.lruvec().size(list))
        .sum();
    let own = |stat| {
        let children: i64 = memcg.reclaim_children().iter().map(|c| c.stat(stat)).sum();
        u64::try_from(memcg.stat(stat) - children).unwrap_or(0)
    };
    let slab = own(MemcgStat::SlabReclaimable) + own(MemcgStat::SlabUnreclaimable);
    (lru + slab / PAGE_SIZE) >> 3
}

/// The "mm-shadow" shrinker.
struct ShadowShrinker(std::sync::Weak<ShadowNodes>);

impl Shrinker for ShadowShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
        let Some(nodes) = self.0.upgrade() else {
            return ShrinkCount::Empty;
        };
        match nodes.count(sc.nid, &sc.memcg) {
            0 => ShrinkCount::Empty,
            n => ShrinkCount::Objects(n.saturating_sub(max_shadow_nodes(&sc.memcg))),
        }
    }

    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
        let Some(nodes) = self.0.upgrade() else {
            return ShrinkScan::Stop;
        };
        let mut budget = usize::try_from(sc.nr_to_scan).unwrap_or(usize::MAX);
        let mut freed_bytes = 0;
        // Mappings upgraded during the walk are dropped after it: the last
        // reference to one going inside the walk would take the list lock
        // the walk holds.
        let mut held = Vec::new();
        let freed = nodes
            .lru
            .walk_one(sc.nid, &sc.memcg, &mut budget, |item, guard| {
                let Some(owner) = nodes
                    .owner(item)
                    .and_then(|(w, leaf)| Some((w.upgrade()?, leaf)))
                else {
                    return Walked::Skip(guard);
                };
                let walked = owner
                    .0
                    .isolate_shadow_node(owner.1, guard, &mut freed_bytes);
                held.push(owner.0);
                walked
            })
            .unwrap_or(0);
        drop(held);
        sc.reclaimed_pages += freed_bytes / PAGE_SIZE;
        ShrinkScan::Freed(freed as u64)
    }

    /// The nodes cost no I/O to make again: trim half of the excess
    /// (`seeks` 0).
    fn seeks(&self) -> u32 {
        0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::test_tree;

    /// A shadow whose memory cgroup is gone and whose id a new cgroup
    /// took: v6.14 measures the refault on the new cgroup's clock (here
    /// a distance of 0: recent); the serial check, an option, refuses.
    #[test]
    fn a_recycled_memcg_id_is_taken_for_the_evicting_cgroup() {
        let t = test_tree(1, 8);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let shadow = Shadow {
            memcg_id: a.id(),
            serial: a.serial(),
            eviction: 0,
            workingset: false,
        };
        t.rmdir("/a").unwrap();
        drop(a);
        let b = t.mkdir("/b").unwrap().memcg().unwrap();
        assert_eq!(b.id(), shadow.memcg_id, "the id was recycled");
        let no_swap = || 0;
        assert!(workingset_test_recent(&t, &shadow, true, &no_swap));
        t.set_shadow_memcg_serial(true);
        assert!(!workingset_test_recent(&t, &shadow, true, &no_swap));
    }
}
