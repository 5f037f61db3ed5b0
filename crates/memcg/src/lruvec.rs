//! LRU lists: each memory cgroup's lists of its folios and the moves
//! between them (the kernel's `struct lruvec` of include/linux/mmzone.h,
//! include/linux/mm_inline.h, and mm/swap.c's LRU add, putback, activate
//! and rotate; v6.14, classic LRU: `lru_gen` off).
//!
//! # What it does
//!
//! Every memory cgroup has a [`Lruvec`] (one node): an inactive and an
//! active list of the anonymous folios charged to it, and the same pair
//! for its page cache ([`LruList`]). A new folio enters its inactive list
//! ([`folio_add_lru`]; the active one if its refault said it belongs to
//! the working set), an anonymous one with its page-table accessed bit set
//! (the fault that mapped it); accesses set that bit again
//! ([`folio_mark_young`]). Each listed folio records its owner, the
//! [`Rmap`] reclaim asks to free it.
//!
//! This module only moves folios between lists and keeps the counts:
//! reclaim (`vmscan.rs`) takes the oldest off ([`isolate_lru_folios`]) and
//! puts back what stays ([`folio_putback_lru`]); a second read of page
//! cache activates it (`folio_activate`); `drop_caches` deactivates what
//! it could not drop (`deactivate_file_folio`); the end of writeback
//! rotates a folio reclaim marked (`folio_rotate_reclaimable`); a memory
//! cgroup going offline hands its lists to its parent
//! (`reparent_lruvec`). `lru_note_cost` records what reclaiming each type
//! cost, which the scan balances on. What to scan, how much and when to
//! stop is `vmscan.rs`'s.
//!
//! # Invariants
//!
//! - A folio is on at most one list; its `FolioLru` state says which
//!   (or none: not yet added, or isolated by a reclaimer). The lists'
//!   page counts and the `inactive_*`/`active_*` statistics equal the
//!   pages of the folios whose state names that list.
//! - A folio freed while listed leaves a dead entry behind (a `Weak` that
//!   no longer upgrades); its counts were already taken off by the free.
//!   Dead entries are skipped by scans and compacted away on add.
//!
//! # Locking
//!
//! One mutex per lruvec (`lru_lock`), a leaf: held only to move entries
//! and counts, never while calling an [`Rmap`] or charging (a reparent
//! holds the child's, then the parent's). A folio's list state is an
//! atomic: the side that takes it off a list swaps it to "none" and alone
//! adjusts the counts, whether that is a reclaimer isolating it (it holds
//! a strong reference, so the folio cannot be freed meanwhile) or the
//! folio's drop (no reclaimer can hold one then). The cost and the reclaim
//! cursor are one mutex each, leaves too.

use std::collections::VecDeque;
use std::sync::Weak;

use crate::folio::Folio;
use crate::memcontrol::{MemCgroup, MemcgStat, VmEvent};
use crate::mm_types::SWAP_CLUSTER_MAX;
use crate::sync::{
    Arc, AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering, lock,
};
/// The evictable LRU lists of a lruvec, in the kernel's order
/// (`enum lru_list`, `for_each_evictable_lru`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LruList {
    /// `LRU_INACTIVE_ANON`: anonymous reclaim candidates, oldest first.
    InactiveAnon = 0,
    /// `LRU_ACTIVE_ANON`: the anonymous working set.
    ActiveAnon = 1,
    /// `LRU_INACTIVE_FILE`: page-cache reclaim candidates.
    InactiveFile = 2,
    /// `LRU_ACTIVE_FILE`: the page-cache working set.
    ActiveFile = 3,
}

/// How many evictable lists a lruvec has (`NR_LRU_LISTS`).
pub(crate) const NR_LRU_LISTS: usize = 4;

/// "Not on any list" in [`FolioLru::list`].
const NOT_ON_LRU: u8 = u8::MAX;

impl LruList {
    /// Every list, in scan order.
    pub const ALL: [LruList; NR_LRU_LISTS] = [
        LruList::InactiveAnon,
        LruList::ActiveAnon,
        LruList::InactiveFile,
        LruList::ActiveFile,
    ];

    /// The list a folio of this type and activity goes on.
    pub fn of(file: bool, active: bool) -> Self {
        match (file, active) {
            (false, false) => LruList::InactiveAnon,
            (false, true) => LruList::ActiveAnon,
            (true, false) => LruList::InactiveFile,
            (true, true) => LruList::ActiveFile,
        }
    }

    /// Whether it holds page cache (`is_file_lru`).
    pub(crate) fn is_file(self) -> bool {
        matches!(self, LruList::InactiveFile | LruList::ActiveFile)
    }

    /// Whether it is an active list (`is_active_lru`).
    pub(crate) fn is_active(self) -> bool {
        matches!(self, LruList::ActiveAnon | LruList::ActiveFile)
    }

    /// The `memory.stat` key counting this list's pages.
    pub(crate) fn stat(self) -> MemcgStat {
        match self {
            LruList::InactiveAnon => MemcgStat::InactiveAnon,
            LruList::ActiveAnon => MemcgStat::ActiveAnon,
            LruList::InactiveFile => MemcgStat::InactiveFile,
            LruList::ActiveFile => MemcgStat::ActiveFile,
        }
    }

    fn from_index(i: u8) -> Self {
        match i {
            0 => LruList::InactiveAnon,
            1 => LruList::ActiveAnon,
            2 => LruList::InactiveFile,
            3 => LruList::ActiveFile,
            _ => unreachable!("LRU list index {i}"),
        }
    }
}

/// What reclaim knows about a folio (`folio->lru` membership, `PG_lru`,
/// `PG_active`, `PG_referenced`, `PG_workingset` and the accessed bit of
/// its mapping).
#[derive(Debug)]
pub(crate) struct FolioLru {
    /// The list holding it, or [`NOT_ON_LRU`].
    list: AtomicU8,
    /// Bumped each time the folio is linked: the entry carrying the
    /// current value is the folio's one live entry (an activation moves a
    /// folio by linking it anew and leaves the old entry stale).
    generation: AtomicU32,
    /// The accessed bit of the page-table entry mapping it (one mapping
    /// per folio here): set by the fault and by accesses, cleared by
    /// `folio_referenced`. Page cache read with `read()` is not mapped.
    young: AtomicBool,
    /// `PG_referenced`: seen accessed by one reclaim pass already, or read
    /// once (`folio_mark_accessed`).
    referenced: AtomicBool,
    /// `PG_workingset`: it was on an active list (deactivated or evicted
    /// since); a refault of it is a `workingset_restore`.
    workingset: AtomicBool,
    /// `PG_active` before the folio is on a list: set by
    /// `workingset_refault`, so `folio_add_lru` puts it on the active list.
    activate_on_add: AtomicBool,
    /// `PG_reclaim`: reclaim met it dirty or under writeback and activated
    /// it; the end of its writeback moves it to the inactive list's oldest
    /// end, to be reclaimed next (`folio_rotate_reclaimable`).
    reclaim: AtomicBool,
}

impl Default for FolioLru {
    fn default() -> Self {
        Self {
            list: AtomicU8::new(NOT_ON_LRU),
            generation: AtomicU32::new(0),
            young: AtomicBool::new(false),
            referenced: AtomicBool::new(false),
            workingset: AtomicBool::new(false),
            activate_on_add: AtomicBool::new(false),
            reclaim: AtomicBool::new(false),
        }
    }
}

impl FolioLru {
    /// `folio_test_workingset`.
    pub(crate) fn workingset(&self) -> bool {
        // Relaxed: a hint, as the page flag is.
        self.workingset.load(Ordering::Relaxed)
    }

    /// `folio_set_workingset`.
    pub(crate) fn set_workingset(&self) {
        // Relaxed: a hint, as the page flag is.
        self.workingset.store(true, Ordering::Relaxed);
    }

    /// `folio_set_reclaim`.
    pub(crate) fn set_reclaim(&self) {
        // Relaxed: a hint, as the page flag is (a race with the end of
        // writeback only loses one rotation).
        self.reclaim.store(true, Ordering::Relaxed);
    }

    /// `folio_test_clear_reclaim`.
    pub(crate) fn test_clear_reclaim(&self) -> bool {
        // Relaxed: a hint, as the page flag is.
        self.reclaim.swap(false, Ordering::Relaxed)
    }

    /// Reads and clears the accessed bit (`ptep_clear_flush_young` in
    /// `folio_referenced`).
    pub(crate) fn test_clear_young(&self) -> bool {
        // Relaxed: a hint, as the hardware's accessed bit is.
        self.young.swap(false, Ordering::Relaxed)
    }

    /// Clears the accessed bit (`folio_referenced` on deactivation).
    pub(crate) fn clear_young(&self) {
        // Relaxed: a hint, as the hardware's accessed bit is.
        self.young.store(false, Ordering::Relaxed);
    }

    /// Reads and clears `PG_referenced`.
    pub(crate) fn test_clear_referenced(&self) -> bool {
        // Relaxed: a hint, as the page flag is.
        self.referenced.swap(false, Ordering::Relaxed)
    }

    /// `folio_set_referenced`.
    pub(crate) fn set_referenced(&self) {
        // Relaxed: a hint, as the page flag is.
        self.referenced.store(true, Ordering::Relaxed);
    }

    /// `folio_set_active` on a folio not yet on a list.
    pub(crate) fn set_active(&self) {
        // Relaxed: read by the same thread's `folio_add_lru`, or published
        // with the folio by whatever hands it over.
        self.activate_on_add.store(true, Ordering::Relaxed);
    }
}

/// The owner of a folio, which reclaim asks to free it: for anonymous
/// memory the address space mapping it (`try_to_unmap` + `pageout`,
/// through the reverse map), for page cache the file's mapping
/// (`__remove_mapping`, leaving a shadow entry).
pub trait Rmap: Send + Sync {
    /// Locks the folio's owner without waiting (`folio_trylock` and the
    /// page-table lock in one; [`RmapOutcome::Busy`] if held), asks
    /// `references` what to do with it under that lock
    /// (`folio_check_references`, which reads and clears the accessed
    /// bits), and when that says reclaim, frees it: unmapped and swapped
    /// out (anon), or dropped from the page cache (file). Page cache that
    /// is dirty or under writeback is never written or freed here
    /// ([`RmapOutcome::Dirty`], [`RmapOutcome::Writeback`]: reclaim
    /// activates it for the flusher). A large anonymous folio that finds no
    /// contiguous swap space is split and its pages swapped one by one;
    /// pieces that stay resident are put back on the LRU by the owner
    /// ([`folio_putback_lru`], active: `activate_locked_split`).
    ///
    /// `target` is the memory cgroup the reclaim is for (the root for the
    /// machine's reclaim), whose eviction clock the folio's shadow records
    /// (`workingset_eviction`).
    fn reclaim(
        &self,
        folio: Arc<Folio>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> RmapOutcome;

    /// [`Rmap::reclaim`] of several folios of this owner at once, one
    /// outcome per folio in order: reclaim hands an owner each run of its
    /// folios in an isolated batch (`shrink_folio_list`, whose unmaps
    /// share one TLB flush: `try_to_unmap_flush`). By default one by one.
    fn reclaim_batch(
        &self,
        folios: Vec<Arc<Folio>>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> Vec<RmapOutcome> {
        folios
            .into_iter()
            .map(|folio| self.reclaim(folio, target, references))
            .collect()
    }
}

/// What became of a folio reclaim handed to its [`Rmap`].
#[derive(Debug)]
pub enum RmapOutcome {
    /// `nr_pages` pages were freed (swapped out, or dropped from the page
    /// cache); a split folio may have left pieces behind, already back on
    /// the LRU.
    Reclaimed {
        /// Pages freed.
        nr_pages: u64,
    },
    /// The owner is busy (its lock is held: `folio_trylock` failed), or
    /// someone else holds the folio (`folio_ref_freeze` failed); the folio
    /// goes back to the inactive list, its accessed bits untouched.
    Busy(Arc<Folio>),
    /// Referenced: kept for another round, or activated.
    Referenced(Arc<Folio>, FolioRef),
    /// No swap space: the folio is activated (`activate_locked`).
    NoSwap(Arc<Folio>),
    /// Page cache not referenced but dirty: reclaim does not write it
    /// (only the flusher does); it is marked for immediate reclaim and
    /// activated.
    Dirty(Arc<Folio>),
    /// Page cache under writeback (looked at before its references):
    /// marked for immediate reclaim and activated.
    Writeback(Arc<Folio>),
    /// The folio is no longer there (freed or replaced meanwhile).
    Gone,
}

/// Folios taken off a list, with who owns them.
pub type Isolated = Vec<(Arc<Folio>, Weak<dyn Rmap>)>;

/// One list entry: the folio, who owns it, and the link generation it was
/// made for. Dead once the folio is freed or linked again elsewhere.
struct LruEntry {
    folio: Weak<Folio>,
    rmap: Weak<dyn Rmap>,
    generation: u32,
}

impl LruEntry {
    /// The folio, if this entry is still its live entry on `list`.
    fn live(&self, list: LruList) -> Option<Arc<Folio>> {
        let folio = self.folio.upgrade()?;
        let lru = folio.lru();
        // Relaxed: both change only under the lru lock the caller holds.
        (lru.list.load(Ordering::Relaxed) == list as u8
            && lru.generation.load(Ordering::Relaxed) == self.generation)
            .then_some(folio)
    }
}

/// `anon_cost`/`file_cost` (`lru_note_cost`): the recent price of
/// reclaiming each type, which balances the scan between them; and the
/// workingset activations seen by the last reclaim of this lruvec
/// (`lruvec->refaults`, `snapshot_refaults`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReclaimCost {
    pub(crate) anon: u64,
    pub(crate) file: u64,
    pub(crate) refaults_anon: i64,
    pub(crate) refaults_file: i64,
}

/// The shared reclaim cursor of a subtree (`mem_cgroup_reclaim_iter`).
#[derive(Debug, Default)]
pub(crate) struct ReclaimIter {
    /// The serial of the memory cgroup last handed out.
    pub(crate) position: Option<u64>,
    /// Completed walks.
    pub(crate) generation: u64,
}

type Lists = [VecDeque<LruEntry>; NR_LRU_LISTS];

/// A memory cgroup's LRU lists on the one node (`struct lruvec`).
pub struct Lruvec {
    lists: Mutex<Lists>,
    /// Pages on each list (`lru_zone_size`, local to this memory cgroup).
    nr_pages: [AtomicU64; NR_LRU_LISTS],
    /// Dead entries left on the lists (a hint for compaction; may lag).
    dead_entries: AtomicI64,
    /// What reclaiming each type cost lately (`vmscan.rs` balances on it).
    pub(crate) cost: Mutex<ReclaimCost>,
    /// The reclaim cursor of this memory cgroup's subtree (`vmscan.rs`).
    pub(crate) iter: Mutex<ReclaimIter>,
    /// Evictions and activations of this memory cgroup and its
    /// descendants (`nonresident_age`), the clock refault distances are
    /// measured on (`workingset.rs`).
    pub(crate) nonresident_age: AtomicU64,
    /// Folios of this memory cgroup read back from a swap device rather
    /// than zswap since the zswap shrinker last counted them
    /// (`zswap_lruvec_state.nr_disk_swapins`).
    pub(crate) zswap_nr_disk_swapins: AtomicU64,
}

impl Default for Lruvec {
    fn default() -> Self {
        Self {
            lists: Mutex::new(std::array::from_fn(|_| VecDeque::new())),
            nr_pages: std::array::from_fn(|_| AtomicU64::new(0)),
            dead_entries: AtomicI64::new(0),
            cost: Mutex::new(ReclaimCost::default()),
            iter: Mutex::new(ReclaimIter::default()),
            nonresident_age: AtomicU64::new(0),
            zswap_nr_disk_swapins: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Lruvec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Lruvec");
        for list in LruList::ALL {
            d.field(list.stat().key().unwrap_or("?"), &self.size(list));
        }
        d.finish_non_exhaustive()
    }
}

impl Lruvec {
    /// Pages on `list` of this memory cgroup alone (`lruvec_lru_size`).
    pub fn size(&self, list: LruList) -> u64 {
        // Relaxed: a statistic; list moves happen under the lru lock.
        self.nr_pages[list as usize].load(Ordering::Relaxed)
    }

    /// Entries on the lists, dead ones included (for tests of compaction).
    #[cfg(test)]
    pub(crate) fn nr_entries(&self) -> usize {
        lock(&self.lists).iter().map(VecDeque::len).sum()
    }

    /// Puts `folio` on `list` (newest end), counting its pages.
    fn add(&self, memcg: &MemCgroup, folio: &Arc<Folio>, rmap: Weak<dyn Rmap>, list: LruList) {
        let mut lists = lock(&self.lists);
        let nr = link(&mut lists, folio, rmap, list);
        self.count(memcg, list, nr as i64);
        self.compact_if_mostly_dead(&mut lists);
    }

    /// Adds `delta` pages to `list`'s count and statistic.
    fn count(&self, memcg: &MemCgroup, list: LruList, delta: i64) {
        self.nr_pages[list as usize].fetch_add(delta as u64, Ordering::Relaxed);
        memcg.mod_stat(list.stat(), delta);
    }

    /// Drops dead entries once they outnumber the live ones.
    fn compact_if_mostly_dead(&self, lists: &mut Lists) {
        let len: usize = lists.iter().map(VecDeque::len).sum();
        let dead = self.dead_entries.load(Ordering::Relaxed);
        if dead < 64 || (dead as usize) < len / 2 {
            return;
        }
        let mut removed = 0;
        for (list, entries) in LruList::ALL.into_iter().zip(lists.iter_mut()) {
            let before = entries.len();
            entries.retain(|e| e.live(list).is_some());
            removed += before - entries.len();
        }
        self.dead_entries
            .fetch_sub(removed as i64, Ordering::Relaxed);
    }

    /// Takes up to `nr_to_scan` pages' worth of the oldest live folios off
    /// `list` (`isolate_lru_folios`); returns them with their owners and
    /// the pages scanned.
    pub(crate) fn isolate(
        &self,
        memcg: &MemCgroup,
        list: LruList,
        nr_to_scan: u64,
    ) -> (Isolated, u64) {
        let mut lists = lock(&self.lists);
        let mut taken = Vec::new();
        let (mut scanned, mut taken_pages) = (0, 0);
        while scanned < nr_to_scan {
            let Some(entry) = lists[list as usize].pop_front() else {
                break;
            };
            let Some(folio) = entry.live(list) else {
                self.dead_entries.fetch_sub(1, Ordering::Relaxed);
                continue;
            };
            let nr = u64::from(folio.nr());
            scanned += nr;
            take_off(&folio, list);
            taken_pages += nr;
            taken.push((folio, entry.rmap));
        }
        // The counts once per batch, as the kernel's `update_lru_sizes`.
        self.count(memcg, list, -(taken_pages as i64));
        (taken, scanned)
    }

    /// Puts isolated folios back on `list` (`move_folios_to_lru`): one lock
    /// and one count update for the batch.
    pub(crate) fn putback(&self, memcg: &MemCgroup, folios: Isolated, list: LruList) {
        if folios.is_empty() {
            return;
        }
        let mut lists = lock(&self.lists);
        let nr: u64 = folios
            .into_iter()
            .map(|(folio, rmap)| link(&mut lists, &folio, rmap, list))
            .sum();
        self.count(memcg, list, nr as i64);
    }

    /// Moves a listed inactive folio to its active list (`folio_activate`);
    /// false if it is not on the inactive list (isolated, or active).
    fn activate(&self, memcg: &MemCgroup, folio: &Arc<Folio>) -> bool {
        let inactive = LruList::of(folio.is_file(), false);
        let active = LruList::of(folio.is_file(), true);
        self.relink(memcg, folio, inactive, active, false)
    }

    /// Moves a listed folio from `from` to `to`, at the oldest end if
    /// `oldest`; false if it is not on `from`.
    fn relink(
        &self,
        memcg: &MemCgroup,
        folio: &Arc<Folio>,
        from: LruList,
        to: LruList,
        oldest: bool,
    ) -> bool {
        let mut lists = lock(&self.lists);
        // Relaxed: the state changes only under this lock.
        if folio.lru().list.load(Ordering::Relaxed) != from as u8 {
            return false;
        }
        let Some(rmap) = live_rmap(&lists[from as usize], folio) else {
            return false;
        };
        take_off(folio, from);
        // The old entry is stale now (its generation is behind).
        self.dead_entries.fetch_add(1, Ordering::Relaxed);
        let nr = i64::from(folio.nr());
        self.count(memcg, from, -nr);
        link(&mut lists, folio, rmap, to);
        if oldest && let Some(entry) = lists[to as usize].pop_back() {
            lists[to as usize].push_front(entry);
        }
        self.count(memcg, to, nr);
        true
    }
}

/// A page-cache folio `drop_caches` could not drop (dirty, or in use)
/// leaves the active list and its referenced mark (`deactivate_file_folio`,
/// counting `pgdeactivate` if it was active): a clean one goes to the
/// oldest end of the inactive list, to be reclaimed soon, a dirty one to
/// the newest end.
pub(crate) fn deactivate_file_folio(folio: &Arc<Folio>) {
    folio_test_set_referenced(folio, false);
    let memcg = folio.memcg();
    let lruvec = memcg.lruvec();
    let clean = !folio.is_dirty();
    let (active, inactive) = (LruList::ActiveFile, LruList::InactiveFile);
    if lruvec.relink(&memcg, folio, active, inactive, clean) {
        memcg.count_vm_event(VmEvent::Pgdeactivate, u64::from(folio.nr()));
    } else if clean {
        lruvec.relink(&memcg, folio, inactive, inactive, true);
    }
}

/// A folio's writeback ended and reclaim had marked it for immediate
/// reclaim (`folio_end_writeback` → `folio_rotate_reclaimable`): unless it
/// was dirtied again meanwhile, it leaves whichever list it is on for the
/// oldest end of the inactive file list, where reclaim looks first. A
/// folio off the lists (isolated) is left alone.
pub(crate) fn folio_rotate_reclaimable(folio: &Arc<Folio>) {
    if folio.is_dirty() {
        return;
    }
    let memcg = folio.memcg();
    let lruvec = memcg.lruvec();
    for from in [LruList::ActiveFile, LruList::InactiveFile] {
        if lruvec.relink(&memcg, folio, from, LruList::InactiveFile, true) {
            return;
        }
    }
}

/// The owner recorded in `folio`'s live entry on `entries` (searched from
/// the newest end, where a recently read folio is).
fn live_rmap(entries: &VecDeque<LruEntry>, folio: &Arc<Folio>) -> Option<Weak<dyn Rmap>> {
    // Relaxed: under the lru lock.
    let generation = folio.lru().generation.load(Ordering::Relaxed);
    entries
        .iter()
        .rev()
        .find(|e| e.generation == generation && std::ptr::eq(e.folio.as_ptr(), Arc::as_ptr(folio)))
        .map(|e| e.rmap.clone())
}

/// Puts `folio` at the newest end of `list` (under the lru lock, which
/// `lists` proves is held) and returns its pages; 0 for a folio already on
/// a list, which stays where it is (one list at most). The caller adds the
/// pages to the counts.
fn link(lists: &mut Lists, folio: &Arc<Folio>, rmap: Weak<dyn Rmap>, list: LruList) -> u64 {
    // AcqRel: pairs with the swap in `take_off` (isolation or free):
    // whoever takes the folio off sees the list it was put on.
    if folio
        .lru()
        .list
        .compare_exchange(NOT_ON_LRU, list as u8, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        debug_assert!(false, "{folio:?} is on an LRU list already");
        return 0;
    }
    // Relaxed: read under this same lru lock (`LruEntry::live`).
    let generation = folio.lru().generation.fetch_add(1, Ordering::Relaxed) + 1;
    lists[list as usize].push_back(LruEntry {
        folio: Arc::downgrade(folio),
        rmap,
        generation,
    });
    u64::from(folio.nr())
}

/// Swaps `folio`'s list state from `list` to none (under the lru lock).
fn take_off(folio: &Folio, list: LruList) {
    // AcqRel: pairs with the compare-exchange in `link`.
    let was = folio.lru().list.swap(NOT_ON_LRU, Ordering::AcqRel);
    debug_assert_eq!(was, list as u8, "entry and state disagree");
}

/// A new folio goes on its memory cgroup's LRU (`folio_add_lru`): the
/// active list if its refault said it belongs to the working set
/// (`workingset_refault`), else the inactive one; a faulted anonymous
/// folio accessed once by the fault that mapped it (page cache read with
/// `read()` is not mapped). `rmap` is who reclaim asks to free it.
pub fn folio_add_lru(folio: &Arc<Folio>, rmap: Weak<dyn Rmap>) {
    let lru = folio.lru();
    // Relaxed: a hint read by reclaim; the list add below publishes it.
    lru.young.store(!folio.is_file(), Ordering::Relaxed);
    // Relaxed: see `FolioLru::set_active`.
    let active = lru.activate_on_add.swap(false, Ordering::Relaxed);
    let memcg = folio.memcg();
    let list = LruList::of(folio.is_file(), active);
    memcg.lruvec().add(&memcg, folio, rmap, list);
}

/// Puts back a folio an [`Rmap`] kept resident (a piece of a split whose
/// swap-out failed): on the active list when `active`
/// (`activate_locked_split`, counting `pgactivate`), else inactive.
pub fn folio_putback_lru(folio: &Arc<Folio>, rmap: Weak<dyn Rmap>, active: bool) {
    let memcg = folio.memcg();
    if active {
        memcg.count_vm_event(VmEvent::Pgactivate, u64::from(folio.nr()));
    }
    let list = LruList::of(folio.is_file(), active);
    memcg.lruvec().add(&memcg, folio, rmap, list);
}

/// Takes up to `nr_to_scan` pages' worth of the oldest folios off
/// `memcg`'s `list` (`isolate_lru_folios`), for a caller that reclaims or
/// moves them itself; returns them with their owners, and the pages
/// scanned. Each must go back with [`folio_putback_lru`] or be freed.
pub fn isolate_lru_folios(memcg: &MemCgroup, list: LruList, nr_to_scan: u64) -> (Isolated, u64) {
    memcg.lruvec().isolate(memcg, list, nr_to_scan)
}

/// Records an access to a mapped folio (the hardware setting the accessed
/// bit of its page-table entry).
pub fn folio_mark_young(folio: &Folio) {
    // Relaxed: a hint; reclaim reads it with a swap.
    folio.lru().young.store(true, Ordering::Relaxed);
}

/// Moves a listed inactive folio to its active list (`folio_activate`),
/// counting `pgactivate`; false if it is not on an inactive list.
pub(crate) fn folio_activate(folio: &Arc<Folio>) -> bool {
    let memcg = folio.memcg();
    let moved = memcg.lruvec().activate(&memcg, folio);
    if moved {
        memcg.count_vm_event(VmEvent::Pgactivate, u64::from(folio.nr()));
    }
    moved
}

/// Reads and clears `PG_referenced`; sets it when `set`.
pub(crate) fn folio_test_set_referenced(folio: &Folio, set: bool) -> bool {
    // Relaxed: a hint, as the page flag is.
    folio.lru().referenced.swap(set, Ordering::Relaxed)
}

/// A folio is being freed: if it is still listed, take its pages off the
/// counts (its entry stays behind, dead). Called by `Folio`'s drop.
pub(crate) fn folio_freed(folio: &Folio) {
    // AcqRel: pairs with the compare-exchange in `link`. No reclaimer can isolate it now:
    // isolating needs a strong reference, and this is the last one.
    let was = folio.lru().list.swap(NOT_ON_LRU, Ordering::AcqRel);
    if was == NOT_ON_LRU {
        return;
    }
    let list = LruList::from_index(was);
    let nr = i64::from(folio.nr());
    let memcg = folio.memcg();
    let lruvec = memcg.lruvec();
    lruvec.count(&memcg, list, -nr);
    lruvec.dead_entries.fetch_add(1, Ordering::Relaxed);
}

/// Moves every listed folio of a memory cgroup going offline to its
/// parent's lists, with its charge (the 2026 "reparent LRU folios at
/// offline", `lru_reparent_memcg`): the folios stop pinning the child,
/// which is freed once nothing else holds it. Entries go to the parent's
/// newest end, list by list. A folio isolated by a reclaimer at that
/// moment is not on a list and stays with the child until freed (the
/// kernel instead retries `folio_lruvec_lock` until it sees the new
/// owner). Returns the pages moved.
pub(crate) fn reparent_lruvec(child: &MemCgroup, parent: &Arc<MemCgroup>) -> u64 {
    // Lock order: child before parent, as list_lru's reparent.
    let mut from = lock(&child.lruvec().lists);
    let mut to = lock(&parent.lruvec().lists);
    let mut moved = Moved::default();
    // Every moved folio is held until its charge has moved too: a folio
    // freed in between would uncharge the parent for a page still charged
    // to the child.
    let mut held = Vec::new();
    for list in LruList::ALL {
        let entries = std::mem::take(&mut from[list as usize]);
        for entry in entries {
            let Some(folio) = entry.live(list) else {
                continue;
            };
            take_off(&folio, list);
            let (dirty, writeback) = folio.reparent_to(Arc::clone(parent));
            let nr = link(&mut to, &folio, entry.rmap, list);
            moved.add(list, nr, dirty, writeback);
            held.push(folio);
        }
    }
    child.lruvec().dead_entries.store(0, Ordering::Relaxed);
    moved.transfer(child, parent);
    drop(to);
    drop(from);
    drop(held);
    moved.total()
}

/// Pages a reparent moved, by list and kind.
#[derive(Default)]
struct Moved {
    per_list: [u64; NR_LRU_LISTS],
    dirty: u64,
    writeback: u64,
}

impl Moved {
    fn add(&mut self, list: LruList, nr: u64, dirty: bool, writeback: bool) {
        self.per_list[list as usize] += nr;
        if dirty {
            self.dirty += nr;
        }
        if writeback {
            self.writeback += nr;
        }
    }

    fn total(&self) -> u64 {
        self.per_list.iter().sum()
    }

    /// Moves the counts, statistics and charges of the moved folios from
    /// `child` to `parent` (under both lru locks).
    fn transfer(&self, child: &MemCgroup, parent: &Arc<MemCgroup>) {
        for list in LruList::ALL {
            let nr = self.per_list[list as usize] as i64;
            child.lruvec().count(child, list, -nr);
            parent.lruvec().count(parent, list, nr);
        }
        let pages = |list: LruList| self.per_list[list as usize];
        let anon = pages(LruList::InactiveAnon) + pages(LruList::ActiveAnon);
        let file = pages(LruList::InactiveFile) + pages(LruList::ActiveFile);
        crate::memcontrol::move_charge_to_parent(child, parent, anon, file);
        let dirty = self.dirty as i64;
        child.mod_stat(MemcgStat::FileDirty, -dirty);
        parent.mod_stat(MemcgStat::FileDirty, dirty);
        let writeback = self.writeback as i64;
        child.mod_stat(MemcgStat::FileWriteback, -writeback);
        parent.mod_stat(MemcgStat::FileWriteback, writeback);
    }
}

/// `folio_check_references`' verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolioRef {
    /// Accessed again while marked referenced (`FOLIOREF_ACTIVATE`).
    Activate,
    /// Accessed once: another round on the inactive list
    /// (`FOLIOREF_KEEP`).
    Keep,
    /// Not accessed: reclaim it (`FOLIOREF_RECLAIM`).
    Reclaim,
    /// Page cache read once but not mapped: reclaim it if it is clean
    /// (`FOLIOREF_RECLAIM_CLEAN`).
    ReclaimClean,
}

/// A hierarchical statistic in pages, clamped at 0.
pub(crate) fn stat_pages(memcg: &MemCgroup, stat: MemcgStat) -> u64 {
    u64::try_from(memcg.stat(stat)).unwrap_or(0)
}

/// `lru_note_cost`: `nr_io * SWAP_CLUSTER_MAX + nr_rotated` on `memcg` and
/// every ancestor, for the type reclaimed, halving both costs at a level
/// once they exceed a quarter of its LRU pages.
pub(crate) fn lru_note_cost(memcg: &MemCgroup, file: bool, nr_io: u64, nr_rotated: u64) {
    let cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
    for m in memcg.self_and_ancestors() {
        let lru_pages: u64 = LruList::ALL.iter().map(|l| stat_pages(m, l.stat())).sum();
        let mut c: MutexGuard<'_, ReclaimCost> = lock(&m.lruvec().cost);
        if file {
            c.file += cost;
        } else {
            c.anon += cost;
        }
        if c.anon + c.file > lru_pages / 4 {
            c.anon /= 2;
            c.file /= 2;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::CgroupTree;
    use crate::memcontrol::Gfp;

    struct NoOwner;
    impl Rmap for NoOwner {
        fn reclaim(
            &self,
            _: Arc<Folio>,
            _: &MemCgroup,
            _: &mut dyn FnMut(&Folio) -> FolioRef,
        ) -> RmapOutcome {
            RmapOutcome::Gone
        }
    }

    #[test]
    fn a_freed_folio_leaves_a_dead_entry() {
        let t = CgroupTree::default();
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let owner: Arc<dyn Rmap> = Arc::new(NoOwner);
        for _ in 0..3 {
            let folio = Arc::new(Folio::new(&t, &a, 1, Gfp::Kernel).unwrap());
            folio_add_lru(&folio, Arc::downgrade(&owner));
        }
        // Each folio was freed as its last reference went: the counts came
        // off at once, the entries stay until a scan or compaction.
        assert_eq!(a.lruvec().size(LruList::InactiveAnon), 0);
        assert_eq!(a.stat(MemcgStat::InactiveAnon), 0);
        assert_eq!(a.lruvec().nr_entries(), 3);
        let (isolated, scanned) = isolate_lru_folios(&a, LruList::InactiveAnon, 32);
        assert!(isolated.is_empty());
        assert_eq!(scanned, 0, "dead entries are not scanned");
        assert_eq!(a.lruvec().nr_entries(), 0);
        assert_eq!(a.memory().usage(), 0);
    }

    #[test]
    fn dead_entries_are_compacted_once_they_outnumber_the_live() {
        let t = CgroupTree::default();
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let owner: Arc<dyn Rmap> = Arc::new(NoOwner);
        let live = Arc::new(Folio::new(&t, &a, 1, Gfp::Kernel).unwrap());
        folio_add_lru(&live, Arc::downgrade(&owner));
        for _ in 0..200 {
            let folio = Arc::new(Folio::new(&t, &a, 1, Gfp::Kernel).unwrap());
            folio_add_lru(&folio, Arc::downgrade(&owner));
        }
        assert!(a.lruvec().nr_entries() < 100, "{}", a.lruvec().nr_entries());
        assert_eq!(a.lruvec().size(LruList::InactiveAnon), 1);
        drop(live);
        assert_eq!(a.memory().usage(), 0);
    }
}
