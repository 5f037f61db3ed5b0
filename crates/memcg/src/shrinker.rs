//! Shrinkers: caches that give objects back under memory pressure
//! (mm/shrinker.c and `shrink_slab` in mm/vmscan.c, v6.14).
//!
//! A cache registers a [`Shrinker`] with the tree ([`register_shrinker`]):
//! `count_objects` says how many objects it could free, `scan_objects`
//! frees up to a number asked for. A memcg-aware shrinker (one whose
//! objects sit on a memcg-aware `list_lru`) shares that list_lru's shrinker
//! id and is asked only for memory cgroups whose bit for the id is set; the
//! list_lru sets it when a list gains its first item.
//!
//! [`shrink_slab`] is what reclaim calls for each memory cgroup it visits
//! (after its LRU lists), at the reclaim's priority:
//!
//! - a memory cgroup below the root: every memcg-aware shrinker whose bit
//!   is set; an offline one is skipped (its list_lrus went to its parent);
//!   a shrinker that reports `Empty` has its bit cleared and is asked once
//!   more, so an object added meanwhile is not missed (`shrink_slab_memcg`);
//! - the root: every registered shrinker.
//!
//! Each call (`do_shrink_slab`): `delta = (freeable >> priority) * 4 /
//! seeks` (`freeable / 2` for `seeks` 0), plus the work deferred by earlier
//! calls `>> priority`, at most `2 * freeable`; scanned in batches of the
//! shrinker's batch (`SHRINK_BATCH` = 128) while a whole batch remains (or
//! everything, when less than a batch is freeable); what was not scanned
//! is deferred to the next call (`nr_deferred`): a memcg-aware shrinker's
//! per memory cgroup and node, in the memory cgroup's `ShrinkerInfo`
//! (freed with it); any other shrinker's per node.
//!
//! When a memory cgroup goes offline its deferred work is added to its
//! parent's, as its list_lrus' objects move there
//! (`reparent_shrinker_deferred`).
//!
//! Objects are not pages: a shrinker that frees memory says how many pages
//! in [`ShrinkControl::reclaimed_pages`] (the kernel's `reclaim_state`),
//! and reclaim of the whole machine counts them as reclaimed; a memory
//! cgroup's reclaim runs the shrinkers but counts only its LRU pages
//! (`flush_reclaim_state` with `root_reclaim`).
//!
//! Locking: the registry is one mutex, held only to copy the list out; a
//! memory cgroup's deferred counts are one mutex per node, a global
//! shrinker's are atomics. Shrinkers run with no tree lock held.

use std::any::Any;

use crate::memcontrol::{CgroupTree, MemCgroup, ShrinkerId};
use crate::sync::{Arc, AtomicU64, Ordering, lock};

/// The default cost of recreating an object (`DEFAULT_SEEKS`).
pub const DEFAULT_SEEKS: u32 = 2;

/// Objects scanned per `scan_objects` call by default (`SHRINK_BATCH`).
pub const SHRINK_BATCH: u64 = 128;

/// What `count_objects` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkCount {
    /// Objects that could be freed.
    Objects(u64),
    /// Nothing at all here (`SHRINK_EMPTY`): the memory cgroup's bit is
    /// cleared until an object comes back.
    Empty,
}

/// What `scan_objects` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkScan {
    /// Objects freed.
    Freed(u64),
    /// Cannot make progress now (`SHRINK_STOP`).
    Stop,
}

/// One call's parameters and results (`struct shrink_control`).
#[derive(Debug)]
pub struct ShrinkControl {
    /// The node.
    pub nid: usize,
    /// The memory cgroup whose objects to count or scan.
    pub memcg: Arc<MemCgroup>,
    /// Objects to scan (`scan_objects`).
    pub nr_to_scan: u64,
    /// Objects the shrinker looked at; it may lower it.
    pub nr_scanned: u64,
    /// Pages the shrinker freed (added to reclaim's progress).
    pub reclaimed_pages: u64,
}

/// A cache that can give objects back (`struct shrinker`'s callbacks).
pub trait Shrinker: Send + Sync {
    /// Freeable objects of `sc.memcg` on `sc.nid`.
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount;
    /// Frees up to `sc.nr_to_scan` of them.
    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan;
    /// The cost of recreating an object (0: trim half of them).
    fn seeks(&self) -> u32 {
        DEFAULT_SEEKS
    }
    /// Objects per scan call (0: [`SHRINK_BATCH`]).
    fn batch(&self) -> u64 {
        0
    }
}

/// A registered shrinker and its deferred work.
struct Registered {
    shrinker: Arc<dyn Shrinker>,
    /// The list_lru's id for a memcg-aware shrinker.
    id: Option<ShrinkerId>,
    /// A global shrinker's deferred scans, per node (`nr_deferred`); a
    /// memcg-aware one's are in each memory cgroup's `ShrinkerInfo`.
    deferred: Box<[AtomicU64]>,
}

impl Registered {
    /// Takes the scans deferred for `memcg` on `nid` (`xchg_nr_deferred`).
    fn take_deferred(&self, nid: usize, memcg: &MemCgroup) -> u64 {
        match self.id {
            Some(id) => memcg.shrinker_info(nid).take_deferred(id),
            // Relaxed: a count of work; nothing else is published with it.
            None => self.deferred[nid].swap(0, Ordering::Relaxed),
        }
    }

    /// Defers `nr` scans for `memcg` on `nid` (`add_nr_deferred`).
    fn add_deferred(&self, nid: usize, memcg: &MemCgroup, nr: u64) {
        match self.id {
            Some(id) => memcg.shrinker_info(nid).add_deferred(id, nr),
            // Relaxed: as in `take_deferred`.
            None => {
                self.deferred[nid].fetch_add(nr, Ordering::Relaxed);
            }
        }
    }
}

/// Keeps a shrinker registered; unregisters it when dropped
/// (`shrinker_free`).
pub struct ShrinkerHandle {
    tree: CgroupTree,
    registered: Arc<Registered>,
}

impl Drop for ShrinkerHandle {
    fn drop(&mut self) {
        let me = Arc::as_ptr(&self.registered);
        lock(&self.tree.shrinkers().list).retain(|r| !std::ptr::addr_eq(Arc::as_ptr(r), me));
    }
}

impl std::fmt::Debug for ShrinkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShrinkerHandle")
            .field("memcg_aware", &self.registered.id.is_some())
            .finish_non_exhaustive()
    }
}

/// Registers `shrinker` with `tree` (`shrinker_register`); `memcg_aware`
/// gives the id of the list_lru whose bits say where it has objects.
pub fn register_shrinker(
    tree: &CgroupTree,
    shrinker: Arc<dyn Shrinker>,
    memcg_aware: Option<ShrinkerId>,
) -> ShrinkerHandle {
    let registered = Arc::new(Registered {
        shrinker,
        id: memcg_aware,
        deferred: (0..tree.nr_nodes()).map(|_| AtomicU64::new(0)).collect(),
    });
    let erased: Arc<dyn Any + Send + Sync> = Arc::clone(&registered) as _;
    lock(&tree.shrinkers().list).push(erased);
    ShrinkerHandle {
        tree: tree.clone(),
        registered,
    }
}

/// What one `shrink_slab` call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlabShrunk {
    /// Objects freed.
    pub freed: u64,
    /// Pages the shrinkers reported freed.
    pub reclaimed_pages: u64,
}

/// `shrink_slab`: asks the shrinkers of `memcg` on node `nid` to free
/// objects at `priority` (12 gentlest, 0 hardest).
pub fn shrink_slab(
    tree: &CgroupTree,
    nid: usize,
    memcg: &Arc<MemCgroup>,
    priority: u32,
) -> SlabShrunk {
    let mut total = SlabShrunk::default();
    let list: Vec<Arc<Registered>> = {
        let list = lock(&tree.shrinkers().list);
        if list.is_empty() {
            return total;
        }
        // Every entry is a `Registered` (`register_shrinker` is the only
        // way in).
        list.iter()
            .filter_map(|r| Arc::clone(r).downcast::<Registered>().ok())
            .collect()
    };
    if !memcg.is_root() {
        if memcg.is_dying() {
            return total;
        }
        for r in list.iter() {
            let Some(id) = r.id else { continue };
            if !memcg.shrinker_bit(nid, id) {
                continue;
            }
            let mut out = do_shrink_slab(r, nid, memcg, priority);
            if out.is_none() {
                // Empty: clear the bit, then look once more, so an object
                // added between the count and the clear keeps it set.
                memcg.clear_shrinker_bit(nid, id);
                out = do_shrink_slab(r, nid, memcg, priority);
                if out.is_some() {
                    memcg.set_shrinker_bit(nid, id);
                }
            }
            total.add(out.unwrap_or_default());
        }
        return total;
    }
    for r in list.iter() {
        total.add(do_shrink_slab(r, nid, memcg, priority).unwrap_or_default());
    }
    total
}

impl SlabShrunk {
    fn add(&mut self, other: SlabShrunk) {
        self.freed += other.freed;
        self.reclaimed_pages += other.reclaimed_pages;
    }
}

/// `do_shrink_slab`: `None` when the shrinker has nothing here
/// (`SHRINK_EMPTY`).
fn do_shrink_slab(
    r: &Registered,
    nid: usize,
    memcg: &Arc<MemCgroup>,
    priority: u32,
) -> Option<SlabShrunk> {
    let shrinker = &r.shrinker;
    let mut sc = ShrinkControl {
        nid,
        memcg: Arc::clone(memcg),
        nr_to_scan: 0,
        nr_scanned: 0,
        reclaimed_pages: 0,
    };
    let freeable = match shrinker.count_objects(&sc) {
        ShrinkCount::Empty => return None,
        ShrinkCount::Objects(0) => return Some(SlabShrunk::default()),
        ShrinkCount::Objects(n) => n,
    };
    // Take the deferred work, so concurrent calls do not all do it.
    let nr = r.take_deferred(nid, memcg);
    let delta = match shrinker.seeks() {
        0 => freeable / 2,
        seeks => (freeable >> priority) * 4 / u64::from(seeks),
    };
    let mut total_scan = ((nr >> priority) + delta).min(2 * freeable);
    let batch = match shrinker.batch() {
        0 => SHRINK_BATCH,
        b => b,
    };
    let (mut freed, mut scanned) = (0, 0);
    while total_scan >= batch || total_scan >= freeable {
        let nr_to_scan = batch.min(total_scan);
        sc.nr_to_scan = nr_to_scan;
        sc.nr_scanned = nr_to_scan;
        match shrinker.scan_objects(&mut sc) {
            ShrinkScan::Stop => break,
            ShrinkScan::Freed(n) => freed += n,
        }
        // A shrinker that scanned nothing would loop forever.
        let step = sc.nr_scanned.max(1);
        total_scan = total_scan.saturating_sub(step);
        scanned += step;
    }
    // What was asked and not done waits for the next call.
    let next_deferred = (nr + delta).saturating_sub(scanned).min(2 * freeable);
    if next_deferred > 0 {
        r.add_deferred(nid, memcg, next_deferred);
    }
    Some(SlabShrunk {
        freed,
        reclaimed_pages: sc.reclaimed_pages,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::list_lru::{ListLru, ListLruConfig, Walked};
    use crate::memcontrol::Gfp;
    use crate::memcontrol::test_tree;
    use crate::sync::Mutex;

    /// A cache of list_lru items: counts a memory cgroup's list, frees by
    /// isolating from its head; each object "is" a page, charged (as slab
    /// is) when `charged` holds the tree.
    struct Cache {
        lru: ListLru,
        scans: Mutex<Vec<u64>>,
        charged: Option<CgroupTree>,
    }

    impl Shrinker for Cache {
        fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
            match self.lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) {
                0 => ShrinkCount::Empty,
                n => ShrinkCount::Objects(n as u64),
            }
        }

        fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
            lock(&self.scans).push(sc.nr_to_scan);
            let mut budget = sc.nr_to_scan as usize;
            let freed = self
                .lru
                .walk_one(sc.nid, &sc.memcg, &mut budget, |_, guard| {
                    let (list, token) = guard.isolate();
                    Walked::Removed(list, token)
                })
                .unwrap_or(0) as u64;
            sc.reclaimed_pages += freed;
            if let Some(tree) = &self.charged {
                tree.uncharge(&sc.memcg, freed, crate::memcontrol::ChargeKind::Anon);
            }
            ShrinkScan::Freed(freed)
        }
    }

    fn cache(tree: &CgroupTree) -> (Arc<Cache>, ShrinkerHandle) {
        cache_charged(tree, false)
    }

    fn cache_charged(tree: &CgroupTree, charged: bool) -> (Arc<Cache>, ShrinkerHandle) {
        let lru = ListLru::new(tree, ListLruConfig::default()).unwrap();
        let id = lru.shrinker_id();
        let cache = Arc::new(Cache {
            lru,
            scans: Mutex::new(Vec::new()),
            charged: charged.then(|| tree.clone()),
        });
        let handle = register_shrinker(tree, cache.clone(), id);
        (cache, handle)
    }

    #[test]
    fn priority_seeks_batches_and_deferral() {
        let t = test_tree(1, 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let (c, _h) = cache(&t);
        for item in 0..1000 {
            assert!(c.lru.add(item, 0, &a).unwrap());
        }
        // Priority 12: 1000 >> 12 = 0, nothing scanned (less than a batch
        // and less than everything).
        assert_eq!(shrink_slab(&t, 0, &a, 12).freed, 0);
        // Priority 2: (1000 >> 2) * 4 / 2 = 500: three batches of 128 and
        // 116 deferred.
        let out = shrink_slab(&t, 0, &a, 2);
        assert_eq!(out.freed, 384);
        assert_eq!(out.reclaimed_pages, 384);
        assert_eq!(*lock(&c.scans), vec![128, 128, 128]);
        // Priority 0 with 616 left: delta 1232 + deferred 116, capped at
        // twice the freeable: everything goes, the last scan below a batch.
        let out = shrink_slab(&t, 0, &a, 0);
        assert_eq!(out.freed, 616);
        assert_eq!(c.lru.count_one(0, &a).unwrap(), 0);
    }

    #[test]
    fn offline_gives_deferred_work_to_the_parent() {
        let t = test_tree(1, 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
        let (c, _h) = cache(&t);
        let id = c.lru.shrinker_id().unwrap();
        for item in 0..1000 {
            c.lru.add(item, 0, &b).unwrap();
        }
        a.shrinker_info(0).add_deferred(id, 7);
        // As in the test above: 384 scanned, 116 deferred, in b's info.
        assert_eq!(shrink_slab(&t, 0, &b, 2).freed, 384);
        assert_eq!(b.shrinker_info(0).deferred(id), 116);
        // rmdir: b's objects and its deferred work go to a
        // (`reparent_shrinker_deferred`).
        t.rmdir("/a/b").unwrap();
        assert_eq!(b.shrinker_info(0).deferred(id), 0);
        assert_eq!(a.shrinker_info(0).deferred(id), 7 + 116);
        assert_eq!(c.lru.count_one(0, &a).unwrap(), 616);
        // a's next shrink takes it: (616 >> 2) * 4 / 2 = 308 plus
        // 123 >> 2 = 30 to scan, two whole batches; 308 + 123 - 256 left
        // deferred (59 had b's work been lost).
        assert_eq!(shrink_slab(&t, 0, &a, 2).freed, 256);
        assert_eq!(a.shrinker_info(0).deferred(id), 175);
    }

    #[test]
    fn an_empty_cgroup_loses_its_bit_until_an_object_comes_back() {
        let t = test_tree(1, 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let (c, _h) = cache(&t);
        let id = c.lru.shrinker_id().unwrap();
        c.lru.add(1, 0, &a).unwrap();
        assert!(a.shrinker_bit(0, id));
        c.lru.del(1, 0, &a).unwrap();
        shrink_slab(&t, 0, &a, 0);
        assert!(!a.shrinker_bit(0, id), "cleared once found empty");
        c.lru.add(2, 0, &a).unwrap();
        assert!(a.shrinker_bit(0, id), "set again by the list_lru");
        assert_eq!(shrink_slab(&t, 0, &a, 0).freed, 1);
    }

    #[test]
    fn memcg_reclaim_reaches_the_shrinkers_of_the_subtree() {
        let t = test_tree(1, 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
        let (c, _h) = cache_charged(&t, true);
        for item in 0..300 {
            c.lru.add(item, 0, &b).unwrap();
        }
        // Charged like slab (a memory cgroup charged nothing is below any
        // protection, even none, and skipped, as in the kernel).
        t.try_charge(&b, 300, crate::memcontrol::ChargeKind::Anon, Gfp::Kernel)
            .unwrap();
        let no_swap = crate::vmscan::SwapSpace::default;
        let opts = crate::memcontrol::ReclaimOptions::default();
        // No LRU pages and no swap: only the shrinker can make progress.
        // The machine's reclaim counts what it frees, and stops at its
        // goal as priorities fall.
        let reclaimed =
            crate::vmscan::try_to_free_mem_cgroup_pages(&t, t.root(), 32, &no_swap, opts);
        assert!(reclaimed >= 32, "{reclaimed}");
        let left = c.lru.count_one(0, &b).unwrap() as u64;
        assert_eq!(left, 300 - reclaimed);
        // A memory cgroup's reclaim runs the shrinker too, but counts only
        // LRU pages: it reports nothing, having gone through every priority.
        let reclaimed = crate::vmscan::try_to_free_mem_cgroup_pages(&t, &a, 32, &no_swap, opts);
        assert_eq!(reclaimed, 0);
        let now = c.lru.count_one(0, &b).unwrap() as u64;
        assert!(now < left, "the shrinker ran: {now} of {left} left");
        assert_eq!(b.memory().usage(), now);
        t.uncharge(&b, now, crate::memcontrol::ChargeKind::Anon);
    }

    /// `memory.reclaim` written at the root is a root reclaim
    /// (`root_reclaim`: the target is the root), so what shrinkers free
    /// counts as its progress (`flush_reclaim_state`), as for the
    /// machine's own reclaim.
    #[test]
    fn proactive_reclaim_at_the_root_counts_what_shrinkers_free() {
        let t = test_tree(1, 16);
        let _machine = crate::machine::Machine::with_tree(t.clone());
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let (c, _h) = cache_charged(&t, true);
        for item in 0..300 {
            c.lru.add(item, 0, &a).unwrap();
        }
        t.try_charge(&a, 300, crate::memcontrol::ChargeKind::Anon, Gfp::Kernel)
            .unwrap();
        // No LRU pages: only the shrinker can make progress.
        assert_eq!(t.reclaim_proactive(t.root(), 32, None), Ok(()));
        let left = c.lru.count_one(0, &a).unwrap() as u64;
        assert!(left <= 300 - 32, "{left} left");
        // Below the root it is a memory cgroup's reclaim: no progress.
        assert_eq!(
            t.reclaim_proactive(&a, 32, None),
            Err(crate::errno::Errno::EAGAIN)
        );
        let now = c.lru.count_one(0, &a).unwrap() as u64;
        t.uncharge(&a, now, crate::memcontrol::ChargeKind::Anon);
    }

    #[test]
    fn unregistered_shrinkers_are_not_called() {
        let t = test_tree(1, 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let (c, h) = cache(&t);
        c.lru.add(1, 0, &a).unwrap();
        drop(h);
        assert_eq!(shrink_slab(&t, 0, &a, 0).freed, 0);
        assert_eq!(shrink_slab(&t, 0, t.root(), 0).freed, 0);
    }
}
