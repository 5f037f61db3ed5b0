//! Memory cgroups: the tree, ids, lifecycle and references
//! (mm/memcontrol.c).
//!
//! # Cgroups and their memory cgroups
//!
//! A [`Cgroup`] is a directory of the hierarchy, kept by the cgroup core
//! ([`crate::cgroup`]). A [`MemCgroup`] is the memory controller's
//! state for one cgroup (the kernel's memcg css): an id, counters, events,
//! list_lru lists. A cgroup has one while the memory controller is on for
//! it, as the tree's [`MemoryController`] mode says. A cgroup without one
//! charges its tasks' memory to its nearest ancestor's
//! ([`Cgroup::effective_memcg`]). Only memory cgroups take ids, so the
//! 65535-id limit applies to them alone.
//!
//! A [`CgroupTree`] is a hierarchy with the memory controller: it holds the
//! cgroup core's [`CgroupRoot`] and derefs to it for the cgroup operations
//! (mkdir, rmdir, `cgroup.subtree_control`, tasks), and is the memory
//! controller the core calls when a memory cgroup goes online or offline
//! (the core's `CgroupSubsys`).
//!
//! # Using it
//!
//! Create cgroups with [`CgroupRoot::mkdir`] (one cgroup, its parent must
//! exist), [`CgroupRoot::mkdir_p`] (missing ancestors too) or
//! [`CgroupRoot::mkdir_in`] (a named child of a cgroup you hold): each
//! returns the new [`Cgroup`], and [`Cgroup::memcg`] its memory cgroup,
//! which is what charges, limits, events and statistics are on. Every
//! cgroup has one in the default [`MemoryController::Everywhere`] mode; in
//! [`MemoryController::SubtreeControl`] mode only those whose parent has
//! `+memory` in its `cgroup.subtree_control`.
//!
//! Charges, uncharges, limits and
//! [`PageCounter`](crate::page_counter::PageCounter) figures are in pages;
//! statistics are in the unit [`MemcgStat::unit`] says. The per-thread
//! charge stock is on by default ([`CgroupTree::set_charge_stock`]): a
//! memory cgroup's `usage()` then counts up to [`MEMCG_CHARGE_BATCH`]
//! pages per charging thread that are charged but not in use. Each new
//! memory cgroup charges its own metadata to its parent
//! ([`CgroupTree::set_memcg_metadata_bytes`]).
//!
//! ```
//! use memcg::memcontrol::{CgroupTree, ChargeError, ChargeKind, Gfp, MemcgEvent, TreeConfig};
//!
//! let tree = CgroupTree::new(TreeConfig::default());
//! tree.set_charge_stock(false); // exact usage figures
//! tree.set_memcg_metadata_bytes(0); // mkdir charges nothing to the parent
//!
//! let web = tree.mkdir_p("/jobs/web")?.memcg().unwrap(); // creates /jobs too
//! let jobs = tree.find("/jobs")?;
//! let batch = tree.mkdir_in(jobs.cgroup(), "batch")?.memcg().unwrap();
//! assert_eq!(batch.path(), "/jobs/batch");
//!
//! // Limits are in pages: 1024 pages (4 MiB) for /jobs, 768 for web.
//! assert!(tree.set_memory_max(&jobs, 1024));
//! assert!(tree.set_memory_max(&web, 768));
//! tree.try_charge(&web, 700, ChargeKind::Anon, Gfp::Kernel)?;
//! tree.try_charge(&batch, 320, ChargeKind::File, Gfp::Kernel)?;
//! assert_eq!(jobs.memory().usage(), 1020);
//!
//! // The parent's limit refuses batch's next charge: `max` counts on
//! // /jobs, the cgroup over its limit, and the error names it. A small
//! // charge (8 pages or fewer) also goes through the OOM path (`oom`),
//! // which finds no task to kill in a library tree.
//! let err = tree.try_charge(&batch, 30, ChargeKind::File, Gfp::Kernel).unwrap_err();
//! assert_eq!(err, ChargeError::OutOfMemory { path: "/jobs".into() });
//! assert!(jobs.event(MemcgEvent::Max) > 0);
//! assert_eq!(batch.event(MemcgEvent::Max), 0);
//! assert!(tree.try_charge(&batch, 8, ChargeKind::File, Gfp::Kernel).is_err());
//! assert_eq!(jobs.event(MemcgEvent::Oom), 1);
//!
//! // memory.stat: `anon` and `file` are kept in pages, hierarchically.
//! assert_eq!(jobs.stat(memcg::memcontrol::MemcgStat::File), 320);
//!
//! tree.uncharge(&web, 700, ChargeKind::Anon);
//! tree.uncharge(&batch, 320, ChargeKind::File);
//! tree.rmdir("/jobs/web")?;
//! tree.rmdir("/jobs/batch")?;
//! tree.rmdir("/jobs")?;
//! drop((web, batch, jobs)); // released: their ids are free again
//! assert_eq!(tree.ids_in_use(), 1); // the root's
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Lifecycle
//!
//! `mkdir` creates a cgroup; if the controller is on there it also creates
//! its memory cgroup: an id is allocated, every registered memcg-aware
//! list_lru allocates lists for it (top-down), then it goes *online* (the
//! id is published). `rmdir` removes the cgroup (it becomes dying) and
//! *offlines* its memory cgroup, which writing `-memory` to the parent's
//! `cgroup.subtree_control` also does while the cgroup lives on: the memory
//! cgroup becomes dying ([`MemCgroup::is_dying`]), `memory.min`/`memory.low`
//! drop to 0, every list_lru reparents its lists, its shrinkers' deferred
//! work goes to the parent, it joins its parent's list of dying children
//! (which reclaim walks), leaves its cgroup and drops its own id pin.
//!
//! A dying memory cgroup lives on while anything references it: every page
//! charged to it (as the kernel's css reference per folio), every swapped
//! page (through its id pin), every `Arc` a user holds. When the last goes
//! it is *released* (`nr_dying_subsys_memory` drops) and leaves its
//! parent's dying list, in O(1) by the index it was given there; a removed
//! cgroup is released when its last memory cgroup is
//! (`nr_dying_descendants` drops): the zombie memcgs of `cgroup.stat`.
//! Nothing of a released cgroup stays behind, so the host memory a tree
//! takes is bounded by the cgroups alive at once, however many come and go.
//!
//! # Invariants
//!
//! - Ids are `1..=max_ids` (65535 by default, `MEM_CGROUP_ID_MAX`); the root
//!   has id 1 and is never offlined. An id resolves ([`CgroupTree::lookup`])
//!   exactly while its pin count is non-zero.
//! - A dying memory cgroup never comes back online (`+memory` makes a new
//!   one).
//! - A memory cgroup's parent is its cgroup's parent's memory cgroup (the
//!   controller is enabled top-down).
//!
//! # Locking
//!
//! The cgroup core's `cgroup_mutex` serialises mkdir, rmdir and
//! `cgroup.subtree_control` writes, so memory cgroups go online and
//! offline (ids, offline work) under it ([`crate::cgroup`]'s locking). The
//! id table is read lock-free. The registry of memcg-aware list_lrus has
//! its own mutex (`list_lrus_mutex`), always taken inside `cgroup_mutex`
//! when both are.

use std::fmt;

mod charge;
mod entry;
mod hooks;
mod kmem;
mod metadata;
mod protection;
mod shrinker_info;
mod stat;
mod stock;
mod swap;
mod watermark;

use charge::Accounting;
pub use charge::{ChargeError, ChargeKind, Gfp};
pub use entry::KernelEntry;
use hooks::Hooks;
pub use hooks::{MemcgReclaim, OomHandler, OomOutcome, ReclaimOptions};
pub use kmem::{ObjCgroup, PageTableCharge, SlabKind};
pub use metadata::MemcgMetadata;
use metadata::MetadataCharge;
pub(crate) use shrinker_info::{ShrinkerInfo, ShrinkerList};
pub use stat::{MemcgEvent, MemcgStat, StatUnit, VmEvent};
use stock::ChargeStocks;
pub use stock::MEMCG_CHARGE_BATCH;
pub use watermark::Watermarks;

use crate::cgroup::{Cgroup, CgroupError, CgroupRoot, CgroupSubsys, MemoryController};
use crate::idr::{IdAllocator, IdTable};
use crate::lruvec::Lruvec;
use crate::page_alloc::PageAllocator;
use crate::profile::Behaviour;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, lock};
use crate::weak_slab::WeakSlab;
use std::sync::Weak;

/// `dying_slot` of a memory cgroup that is not on its parent's list.
const NO_SLOT: usize = usize::MAX;

/// The largest memory cgroup id (`MEM_CGROUP_ID_MAX`).
pub const MEM_CGROUP_ID_MAX: u32 = 65535;

/// Shrinker ids a tree can hand out (the kernel grows its bitmaps; a fixed
/// bound keeps the per-cgroup bitmaps flat).
pub(crate) const MAX_SHRINKERS: usize = 256;

/// How to build a [`CgroupTree`].
#[derive(Debug, Clone, Copy)]
pub struct TreeConfig {
    /// NUMA nodes (list_lru keeps one list per node per cgroup).
    pub nr_nodes: usize,
    /// The largest id (`MEM_CGROUP_ID_MAX` by default; tests use fewer).
    pub max_ids: u32,
    /// Which cgroups get a memory cgroup.
    pub memory: MemoryController,
    /// The simulated machine's CPUs (`nr_cpu_ids`): what the kernel keeps
    /// per CPU (pressure stall counts, per-CPU memcg data) scales with it.
    /// Default [`DEFAULT_NR_CPUS`].
    pub nr_cpus: u32,
    /// The kernel version's behaviour switches the tree and its interface
    /// files follow (v6.14's by default).
    pub behaviour: Behaviour,
}

/// CPUs of a machine when none is given: 2, the machine the project's
/// figures and the booted-kernel comparisons were taken on.
pub const DEFAULT_NR_CPUS: u32 = 2;

/// The most CPUs a simulated machine may have (the kernel's `NR_CPUS`
/// for x86_64's `MAXSMP`).
pub const MAX_NR_CPUS: u32 = 8192;

impl Default for TreeConfig {
    fn default() -> Self {
        Self {
            nr_nodes: 1,
            max_ids: MEM_CGROUP_ID_MAX,
            memory: MemoryController::default(),
            nr_cpus: DEFAULT_NR_CPUS,
            behaviour: Behaviour::default(),
        }
    }
}

/// The cgroup2 mount options that change the memory controller
/// (`mount -o remount,memory_localevents,memory_recursiveprot`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// `memory.events` counts only the cgroup's own events, as
    /// `memory.events.local` does (`memory_localevents`).
    pub memory_localevents: bool,
    /// Protection a parent has and its children do not claim is shared out
    /// to them (`memory_recursiveprot`).
    pub memory_recursiveprot: bool,
}

/// What a memcg-aware list_lru does when memory cgroups come and go.
pub(crate) trait MemcgLruHooks: Send + Sync {
    /// Allocate lists for `cg` (and ancestors lacking them), top-down.
    fn memcg_alloc(&self, cg: &MemCgroup);
    /// `cg` is going offline: move its lists' items to `parent`.
    fn reparent(&self, cg: &MemCgroup, parent: &MemCgroup);
}

/// The id table and allocator, and the machine's page frames; memory
/// cgroups hold it so that the last id pin can release the id, and a
/// folio give back its bytes, without reaching the tree.
struct IdSpace {
    table: IdTable<MemCgroup>,
    alloc: Mutex<IdAllocator>,
    max: u32,
    pages: PageAllocator,
}

impl IdSpace {
    /// Unpublishes and frees `id` (its last pin is gone).
    fn release(&self, id: u16) {
        self.table.store(id.into(), None);
        lock(&self.alloc).free(id.into());
    }
}

/// The memory controller's side of a cgroup.
impl Cgroup {
    /// The memory cgroup, while the controller is on here.
    pub fn memcg(&self) -> Option<Arc<MemCgroup>> {
        self.css()
    }

    /// The memory cgroup that accounts this cgroup's tasks: its own, else
    /// the nearest ancestor's (`mem_cgroup_from_task`).
    pub fn effective_memcg(&self) -> Arc<MemCgroup> {
        let mut at = self;
        loop {
            if let Some(m) = at.memcg() {
                return m;
            }
            at = at.parent().expect("the root always has a memory cgroup");
        }
    }
}

/// Reclaim work counted by a tree ([`CgroupTree::reclaim_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReclaimCounts {
    /// `try_to_free_mem_cgroup_pages` calls.
    pub calls: u64,
    /// Memory cgroups those calls visited (dying ones included).
    pub memcgs_visited: u64,
}

/// Moves `nr_pages` of `kind` charged to `child` to its `parent` (offline
/// reparenting): the parent and every ancestor keep their usage, the child
/// loses it, and the pages pin the parent instead.
pub(crate) fn move_charge(
    child: &MemCgroup,
    parent: &Arc<MemCgroup>,
    nr_pages: u64,
    kind: ChargeKind,
) {
    if nr_pages == 0 {
        return;
    }
    // The parent first, so the usage above never dips.
    parent.memory().charge(nr_pages);
    parent.pin_pages(nr_pages);
    parent.account(kind, nr_pages as i64);
    child.uncharge_pages(nr_pages, kind);
}

/// [`move_charge`] for the anon and file pages of reparented LRU folios.
pub(crate) fn move_charge_to_parent(
    child: &MemCgroup,
    parent: &Arc<MemCgroup>,
    anon: u64,
    file: u64,
) {
    move_charge(child, parent, anon, ChargeKind::Anon);
    move_charge(child, parent, file, ChargeKind::File);
}

/// One memory cgroup (the memory controller's css of a cgroup). Shared as
/// `Arc<MemCgroup>`; see the module docs for its lifecycle.
pub struct MemCgroup {
    id: u16,
    serial: u64,
    cgroup: Arc<Cgroup>,
    parent: Option<Arc<MemCgroup>>,
    dying: AtomicBool,
    /// Id pins; the id resolves while this is non-zero.
    id_refs: AtomicUsize,
    /// Per node: its shrinker bits and deferred scans (`shrinker_info.rs`).
    shrinker_info: Box<[ShrinkerInfo]>,
    ids: Arc<IdSpace>,
    options: Arc<Options>,
    /// Counters, events and statistics (`charge.rs`).
    acct: Accounting,
    /// Pages charged to this memory cgroup itself.
    own_pages: AtomicU64,
    /// A reference to itself while `own_pages` is not 0: charged pages keep
    /// a dying memory cgroup alive, as the kernel's per-folio css reference.
    pages_pin: Mutex<Option<Arc<MemCgroup>>>,
    /// Written `memory.peak` descriptors (`memory_peaks`).
    memory_peaks: Mutex<Vec<Arc<PeakWatcher>>>,
    /// Written `memory.swap.peak` descriptors (`swap_peaks`).
    swap_peaks: Mutex<Vec<Arc<PeakWatcher>>>,
    /// `memory.oom.group`.
    oom_group: AtomicBool,
    /// `memory.zswap.writeback`.
    zswap_writeback: AtomicBool,
    /// Its LRU lists (`lruvec.rs`).
    lruvec: Lruvec,
    /// Children taken offline and not yet released: reclaim still walks
    /// them (a dying css stays on its parent's children list). Each
    /// leaves it when it is released.
    dying_children: Mutex<WeakSlab<MemCgroup>>,
    /// Its index in its parent's `dying_children` once offline
    /// ([`NO_SLOT`] before).
    dying_slot: AtomicUsize,
    /// Its own metadata, charged to its parent, given back when it is
    /// released (`metadata.rs`).
    metadata: Option<MetadataCharge>,
    /// Its object cgroups and slab accounting (`kmem.rs`).
    kmem: kmem::Kmem,
}

impl MemCgroup {
    /// The memory cgroup's id (`mem_cgroup_id`), stable for its whole life.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// A number unique to this memory cgroup for the tree's life (ids are
    /// reused, serials never).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The machine's page frames, where its folios' bytes come from.
    /// Its LRU lists.
    pub fn lruvec(&self) -> &Lruvec {
        &self.lruvec
    }

    /// The memory cgroups directly below this one, online ones first, then
    /// dying ones still alive (`css_for_each_child` sees both).
    pub fn reclaim_children(&self) -> Vec<Arc<MemCgroup>> {
        let mut out: Vec<Arc<MemCgroup>> = if self.is_dying() {
            Vec::new()
        } else {
            self.cgroup
                .children()
                .iter()
                .filter_map(|c| c.memcg())
                .collect()
        };
        let dying = lock(&self.dying_children);
        // A child going offline is on both lists for a moment (pushed on
        // the dying list before it leaves its cgroup): list it once.
        let online: std::collections::HashSet<u64> = out.iter().map(|m| m.serial).collect();
        out.extend(
            dying
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|m| !online.contains(&m.serial)),
        );
        out
    }

    pub(crate) fn page_allocator(&self) -> &PageAllocator {
        &self.ids.pages
    }

    /// The cgroup it belongs to.
    pub fn cgroup(&self) -> &Arc<Cgroup> {
        &self.cgroup
    }

    /// Its cgroup's name ("" for the root).
    pub fn name(&self) -> &str {
        self.cgroup.name()
    }

    /// Depth below the root (the root is 0).
    pub fn level(&self) -> u32 {
        self.cgroup.level()
    }

    /// Its cgroup's path.
    pub fn path(&self) -> String {
        self.cgroup.path()
    }

    /// The parent memory cgroup (`None` for the root).
    pub fn parent(&self) -> Option<&Arc<MemCgroup>> {
        self.parent.as_ref()
    }

    /// Whether this is the root memory cgroup.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether it went offline (its cgroup was removed, or the controller
    /// was turned off there); its memory may still live on.
    pub fn is_dying(&self) -> bool {
        // Acquire: pairs with the Release store in `offline_memcg`, so
        // whoever sees it dying also sees the state offline set up before.
        self.dying.load(Ordering::Acquire)
    }

    /// The parent, grandparent, ... up to the root.
    pub fn ancestors(&self) -> impl Iterator<Item = &Arc<MemCgroup>> {
        std::iter::successors(self.parent.as_ref(), |p| p.parent.as_ref())
    }

    /// This memory cgroup, then its parent, up to the root (the levels a
    /// hierarchical charge, event or statistic touches).
    pub(crate) fn self_and_ancestors(&self) -> impl Iterator<Item = &MemCgroup> {
        std::iter::once(self).chain(self.ancestors().map(|a| &**a))
    }

    /// Whether `self` is `ancestor` or lies below it.
    pub fn is_descendant_of(&self, ancestor: &MemCgroup) -> bool {
        self.self_and_ancestors().any(|m| std::ptr::eq(m, ancestor))
    }

    /// This memory cgroup and every online one below it, parents first.
    pub fn descendants_pre(&self) -> impl Iterator<Item = Arc<MemCgroup>> {
        self.cgroup.descendants_pre().filter_map(|c| c.memcg())
    }

    /// Pins the id so that it keeps resolving (`mem_cgroup_id_get`). Fails
    /// once the id has been released.
    #[cfg(test)]
    pub(crate) fn pin_id(self: &Arc<Self>) -> Option<IdPin> {
        self.try_id_get().then(|| IdPin {
            cg: Arc::clone(self),
        })
    }

    /// Takes one id pin unless the id was released
    /// (`refcount_inc_not_zero`); the caller owns the pin as a count.
    pub(crate) fn try_id_get(&self) -> bool {
        let mut refs = self.id_refs.load(Ordering::Relaxed);
        loop {
            if refs == 0 {
                return false;
            }
            // Relaxed: taking a pin needs no ordering, only atomicity (like
            // refcount_inc_not_zero); releasing is what orders.
            match self.id_refs.compare_exchange_weak(
                refs,
                refs + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => refs = actual,
            }
        }
    }

    /// Current id pins (an online memory cgroup holds one itself).
    pub fn id_pins(&self) -> usize {
        self.id_refs.load(Ordering::Relaxed)
    }

    /// Takes `n` id pins (`mem_cgroup_id_get_many`); the caller already
    /// holds one, so the count cannot be zero.
    pub(crate) fn id_get_many(&self, n: u64) {
        // Relaxed: like `try_id_get`, taking pins only needs atomicity; the
        // AcqRel `fetch_sub` in `id_put` orders their release.
        let was = self.id_refs.fetch_add(n as usize, Ordering::Relaxed);
        debug_assert!(was > 0, "pinning a released id");
    }

    /// Drops `n` id pins (`mem_cgroup_id_put_many`).
    pub(crate) fn id_put_many(&self, n: u64) {
        if self.id_drop_pins(n) {
            // The table's reference goes last: the caller still holds one.
            self.release_id();
        }
    }

    fn id_put(&self) {
        self.id_put_many(1);
    }

    /// Drops `n` id pins in one step; `true` if they were the last, when
    /// the caller must [`release_id`](Self::release_id).
    pub(crate) fn id_drop_pins(&self, n: u64) -> bool {
        // AcqRel: the Release half orders this holder's use of the id before
        // the release; the Acquire half (on the last put) orders the release
        // after every other holder's use.
        let was = self.id_refs.fetch_sub(n as usize, Ordering::AcqRel);
        debug_assert!(was >= n as usize, "more pins dropped than taken");
        was == n as usize
    }

    /// Frees the id once its last pin went ([`MemCgroup::id_drop_pins`]).
    fn release_id(&self) {
        self.ids.release(self.id);
    }

    /// A number naming the id space (the tree) this memory cgroup belongs
    /// to: equal to [`CgroupTree::id_space_tag`] of its tree, and to no
    /// other tree's while that tree lives. Whoever holds a tree can keep
    /// its tag and check many cgroups against it with one load each
    /// (list_lru's per-call check).
    pub(crate) fn id_space_tag(&self) -> usize {
        Arc::as_ptr(&self.ids) as usize
    }

    /// Marks that `shrinker` may find objects of this memory cgroup on node
    /// `nid` (`set_shrinker_bit`); a no-op for the root, as in the kernel.
    pub(crate) fn set_shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) {
        if self.is_root() {
            return;
        }
        self.shrinker_info[nid].set_bit(shrinker);
    }

    /// Whether `shrinker`'s bit is set for node `nid`.
    pub fn shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) -> bool {
        self.shrinker_info[nid].bit(shrinker)
    }

    /// Clears `shrinker`'s bit for node `nid` (reclaim found it empty).
    pub(crate) fn clear_shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) {
        self.shrinker_info[nid].clear_bit(shrinker);
    }

    /// Its shrinker state on node `nid`.
    pub(crate) fn shrinker_info(&self, nid: usize) -> &ShrinkerInfo {
        &self.shrinker_info[nid]
    }

    /// The written `memory.peak` (or, with `swap`, `memory.swap.peak`)
    /// descriptors, under the lock `peak_write` takes.
    pub(crate) fn peak_watchers(&self, swap: bool) -> &Mutex<Vec<Arc<PeakWatcher>>> {
        if swap {
            &self.swap_peaks
        } else {
            &self.memory_peaks
        }
    }

    /// `memory.oom.group`.
    pub fn oom_group(&self) -> bool {
        self.oom_group.load(Ordering::Relaxed)
    }

    /// Sets `memory.oom.group`.
    pub(crate) fn set_oom_group(&self, on: bool) {
        self.oom_group.store(on, Ordering::Relaxed);
    }

    /// `memory.zswap.writeback` of this memory cgroup alone.
    pub fn zswap_writeback(&self) -> bool {
        self.zswap_writeback.load(Ordering::Relaxed)
    }

    /// Sets `memory.zswap.writeback`.
    pub(crate) fn set_zswap_writeback(&self, on: bool) {
        self.zswap_writeback.store(on, Ordering::Relaxed);
    }

    /// Whether zswap may write this memory cgroup's pages back: not if it
    /// or any ancestor has `memory.zswap.writeback` at 0
    /// (`mem_cgroup_zswap_writeback_enabled`).
    pub(crate) fn zswap_writeback_enabled(&self) -> bool {
        self.self_and_ancestors().all(MemCgroup::zswap_writeback)
    }

    /// Counts `nr_pages` newly charged here; the first pins the memory
    /// cgroup (`css_get` per charged folio).
    fn pin_pages(self: &Arc<Self>, nr_pages: u64) {
        if self.is_root() || nr_pages == 0 {
            return;
        }
        // AcqRel: orders against `unpin_pages`'s decrement, whose thread
        // then rechecks under the pin lock.
        if self.own_pages.fetch_add(nr_pages, Ordering::AcqRel) == 0 {
            let mut pin = lock(&self.pages_pin);
            if pin.is_none() {
                *pin = Some(Arc::clone(self));
            }
        }
    }

    /// Counts `nr_pages` uncharged here; the last drops the pin. Returns
    /// the pages that were charged here to uncharge: more than that is a
    /// caller's bug, clamped (so that no ancestor loses usage another
    /// cgroup charged), counted on the memory counter
    /// ([`crate::page_counter::PageCounter::underflows`]) and reported once, as the kernel's
    /// `page_counter_cancel` WARNs. The root counts no pages of its own:
    /// its counter clamps.
    fn unpin_pages(&self, nr_pages: u64) -> u64 {
        if self.is_root() || nr_pages == 0 {
            return nr_pages;
        }
        // AcqRel: pairs with `pin_pages`; the recheck under the lock decides.
        let was = self
            .own_pages
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |own| {
                Some(own - own.min(nr_pages))
            })
            .unwrap_or_else(|own| own);
        let taken = was.min(nr_pages);
        if taken < nr_pages {
            self.memory()
                .note_underflow(was as i64 - nr_pages as i64, nr_pages);
        }
        if taken > 0 && was == taken {
            let released = {
                let mut pin = lock(&self.pages_pin);
                if self.own_pages.load(Ordering::Acquire) == 0 {
                    pin.take()
                } else {
                    None
                }
            };
            // The caller holds a reference of its own, so this is never the
            // last one while `self` is in use.
            drop(released);
        }
        taken
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // Released: it leaves its parent's list of dying children (the
        // parent outlives it: `self.parent` holds it).
        // Relaxed: the last reference going orders everything before it.
        let slot = self.dying_slot.load(Ordering::Relaxed);
        if let Some(parent) = &self.parent
            && slot != NO_SLOT
        {
            lock(&parent.dying_children).remove(slot, self);
        }
        // Released: the metadata charged to the parent goes back, first,
        // while `self.parent` still holds the ancestors its object cgroup
        // may point at.
        drop(self.metadata.take());
        // Released: an offline memory cgroup stops counting as dying.
        // Relaxed: the last `Arc` going orders everything before it.
        if self.dying.load(Ordering::Relaxed) {
            self.cgroup.uncount_dying_css();
        }
    }
}

impl fmt::Debug for MemCgroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemCgroup")
            .field("id", &self.id)
            .field("path", &self.path())
            .field("dying", &self.is_dying())
            .finish_non_exhaustive()
    }
}

/// The peak a written `memory.peak` (or `memory.swap.peak`) file
/// descriptor shows (`cgroup_of_peak`): the usage at its reset, raised by
/// later resets through other descriptors.
#[derive(Debug, Default)]
pub(crate) struct PeakWatcher(AtomicU64);

impl PeakWatcher {
    /// The descriptor's peak in pages.
    pub(crate) fn value(&self) -> u64 {
        // Relaxed: written under the memory cgroup's peaks lock; a reader
        // showing the file may see the value before or after a reset.
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, pages: u64) {
        self.0.store(pages, Ordering::Relaxed);
    }
}

/// A pin on a memory cgroup's id (`mem_cgroup_id_get`/`put`): while it
/// lives the id resolves to the memory cgroup, even after rmdir. Dropping it
/// unpins; the last unpin releases the id for reuse.
pub struct IdPin {
    cg: Arc<MemCgroup>,
}

impl IdPin {
    /// The pinned memory cgroup.
    pub fn memcg(&self) -> &Arc<MemCgroup> {
        &self.cg
    }
}

impl Drop for IdPin {
    fn drop(&mut self) {
        self.cg.id_put();
    }
}

impl fmt::Debug for IdPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdPin({})", self.cg.id)
    }
}

/// A shrinker's id, for the per-cgroup "has objects" bitmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShrinkerId(usize);

impl ShrinkerId {
    /// The numeric id.
    pub fn get(self) -> usize {
        self.0
    }
}

/// Mount options, shared by every memory cgroup of a tree.
struct Options {
    localevents: AtomicBool,
    recursiveprot: AtomicBool,
    /// What each new memory cgroup charges to its parent for its own
    /// structures.
    metadata: Mutex<MemcgMetadata>,
    /// Offline moves LRU folios to the parent (the 2026 behaviour)
    /// instead of leaving them to pin the dying memory cgroup (v6.14).
    reparent_lru_folios: AtomicBool,
    /// Refaults check the evicting memory cgroup's serial besides its id
    /// (beyond v6.14, which takes a recycled id for the same cgroup).
    shadow_memcg_serial: AtomicBool,
    /// The kernel version's behaviour switches ([`TreeConfig::behaviour`]).
    behaviour: Behaviour,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            localevents: AtomicBool::new(false),
            recursiveprot: AtomicBool::new(false),
            metadata: Mutex::new(MemcgMetadata::NONE),
            reparent_lru_folios: AtomicBool::new(false),
            shadow_memcg_serial: AtomicBool::new(false),
            behaviour: Behaviour::default(),
        }
    }
}

struct TreeShared {
    ids: Arc<IdSpace>,
    /// The cgroup core's state: the hierarchy, `cgroup_mutex`, the tasks.
    cgroups: CgroupRoot,
    root_memcg: Arc<MemCgroup>,
    nr_nodes: usize,
    nr_cpus: u32,
    options: Arc<Options>,
    list_lrus: Mutex<Vec<Arc<dyn MemcgLruHooks>>>,
    shrinker_ids: Mutex<IdAllocator>,
    hooks: Mutex<Hooks>,
    /// The per-thread charge stocks (`stock.rs`).
    stocks: ChargeStocks,
    /// Registered shrinkers (`shrinker.rs`).
    shrinkers: ShrinkerList,
    /// Reclaim calls and memory cgroups they visited (for experiments).
    reclaim_calls: AtomicU64,
    reclaim_visits: AtomicU64,
    /// The simulated machine's size and its reclaim reserve (`charge.rs`).
    machine: watermark::MachineSize,
    /// Tree-wide objects of the modules built on the tree (the page
    /// cache's shadow-node list), by type, held weakly: each lives while
    /// its users hold it ([`CgroupTree::tree_local`]).
    locals: Mutex<std::collections::HashMap<std::any::TypeId, TreeLocal>>,
    /// The `vm.dirty_*` sysctls and the filesystems' flushers
    /// (`page_writeback.rs`).
    writeback: crate::writeback::TreeWriteback,
}

/// A tree-wide object, held weakly ([`CgroupTree::tree_local`]).
type TreeLocal = Weak<dyn std::any::Any + Send + Sync>;

impl Drop for TreeShared {
    fn drop(&mut self) {
        // Break the cycles that memory cgroups form (a memory cgroup whose
        // pages were never uncharged holds itself; id table <-> memory
        // cgroup) so that everything is freed with the tree; the cgroup
        // core then breaks its own (parent <-> children, cgroup <-> memory
        // cgroup).
        let root = self.cgroups.root_cgroup();
        for cg in root.descendants_pre().collect::<Vec<_>>() {
            if let Some(memcg) = cg.memcg() {
                lock(&memcg.pages_pin).take();
            }
        }
        for (_, memcg) in self.ids.table.entries().collect::<Vec<_>>() {
            lock(&memcg.pages_pin).take();
        }
        for (id, _) in self.ids.table.entries().collect::<Vec<_>>() {
            self.ids.table.store(id, None);
        }
    }
}

/// A hierarchy of cgroups with the memory controller (one cgroup v2
/// mount's view). Cheap to clone: clones share the tree.
#[derive(Clone)]
pub struct CgroupTree {
    shared: Arc<TreeShared>,
}

impl Default for CgroupTree {
    fn default() -> Self {
        Self::new(TreeConfig::default())
    }
}

impl CgroupTree {
    /// A tree holding only the root cgroup (memory cgroup id 1).
    pub fn new(config: TreeConfig) -> Self {
        assert!(config.nr_nodes >= 1, "a machine has at least one node");
        assert!(
            (1..=MAX_NR_CPUS).contains(&config.nr_cpus),
            "nr_cpus must be 1..={MAX_NR_CPUS}"
        );
        assert!(
            (2..=MEM_CGROUP_ID_MAX).contains(&config.max_ids),
            "max_ids must be 2..={MEM_CGROUP_ID_MAX}"
        );
        let mut alloc = IdAllocator::new(1, config.max_ids);
        let root_id = alloc.alloc().expect("fresh allocator");
        let ids = Arc::new(IdSpace {
            table: IdTable::new(config.max_ids as usize + 1),
            alloc: Mutex::new(alloc),
            max: config.max_ids,
            pages: PageAllocator::default(),
        });
        let options = Arc::new(Options {
            metadata: Mutex::new(MemcgMetadata::v6_14(config.nr_cpus, config.nr_nodes)),
            behaviour: config.behaviour,
            ..Options::default()
        });
        // The cgroup core calls the memory controller (this tree) back
        // through a weak reference: it lives inside it.
        let shared = Arc::new_cyclic(|tree: &Weak<TreeShared>| {
            let subsys: Weak<dyn CgroupSubsys> = tree.clone();
            let cgroups = CgroupRoot::new(config.memory, subsys);
            let root = cgroups.root_cgroup();
            let root_memcg = Arc::new(new_memcg(
                root_id,
                0,
                root,
                None,
                config.nr_nodes,
                &ids,
                &options,
            ));
            kmem::Kmem::online(&root_memcg);
            root.set_css(Some(Arc::clone(&root_memcg) as _));
            ids.table
                .store(root_id as usize, Some(Arc::clone(&root_memcg)));
            TreeShared {
                ids,
                cgroups,
                root_memcg,
                nr_nodes: config.nr_nodes,
                nr_cpus: config.nr_cpus,
                options,
                list_lrus: Mutex::new(Vec::new()),
                shrinker_ids: Mutex::new(IdAllocator::new(0, MAX_SHRINKERS as u32 - 1)),
                hooks: Mutex::new(Hooks::default()),
                stocks: ChargeStocks::new(config.nr_cpus),
                shrinkers: ShrinkerList::default(),
                reclaim_calls: AtomicU64::new(0),
                reclaim_visits: AtomicU64::new(0),
                machine: watermark::MachineSize::default(),
                locals: Mutex::new(std::collections::HashMap::new()),
                writeback: crate::writeback::TreeWriteback::default(),
            }
        });
        Self { shared }
    }

    /// The tree's one `T` while anyone holds it, else a new one from
    /// `make` (run with no lock of the tree's cgroups held). The tree holds
    /// it weakly, so a `T` holding the tree (a list_lru, a shrinker) makes
    /// no cycle and goes with its last user.
    pub(crate) fn tree_local<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Arc<T>,
    ) -> Arc<T> {
        let mut locals = lock(&self.shared.locals);
        let id = std::any::TypeId::of::<T>();
        if let Some(alive) = locals.get(&id).and_then(Weak::upgrade)
            && let Ok(alive) = alive.downcast::<T>()
        {
            return alive;
        }
        let made = make();
        let erased: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(&made) as _;
        locals.insert(id, Arc::downgrade(&erased));
        made
    }

    fn stocks(&self) -> &ChargeStocks {
        &self.shared.stocks
    }

    pub(crate) fn shrinkers(&self) -> &ShrinkerList {
        &self.shared.shrinkers
    }

    pub(crate) fn writeback(&self) -> &crate::writeback::TreeWriteback {
        &self.shared.writeback
    }

    /// The root memory cgroup.
    pub fn root(&self) -> &Arc<MemCgroup> {
        &self.shared.root_memcg
    }

    /// NUMA nodes of this tree.
    pub fn nr_nodes(&self) -> usize {
        self.shared.nr_nodes
    }

    /// CPUs of the simulated machine ([`TreeConfig::nr_cpus`]).
    pub fn nr_cpus(&self) -> u32 {
        self.shared.nr_cpus
    }

    /// The largest id.
    pub fn max_ids(&self) -> u32 {
        self.shared.ids.max
    }

    /// The tag of this tree's id space (see [`MemCgroup::id_space_tag`]).
    pub(crate) fn id_space_tag(&self) -> usize {
        Arc::as_ptr(&self.shared.ids) as usize
    }

    /// Ids in use (online memory cgroups plus dying ones still pinned).
    pub fn ids_in_use(&self) -> usize {
        lock(&self.shared.ids.alloc).in_use()
    }

    /// The memory cgroup whose id is `id` while the id is pinned
    /// (`mem_cgroup_from_id`); lock-free.
    pub fn lookup(&self, id: u16) -> Option<Arc<MemCgroup>> {
        self.shared.ids.table.get(id.into())
    }

    /// How many handles share this tree (for leak tests).
    #[cfg(test)]
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.shared)
    }

    /// Calls `f` with the memory cgroup whose id is `id`, borrowed (no
    /// reference count taken); `None` if the id resolves to none. `f`
    /// must not release ids (the table is read-locked under loom).
    pub(crate) fn with_memcg<R>(&self, id: u16, f: impl FnOnce(&MemCgroup) -> R) -> Option<R> {
        self.shared.ids.table.with(id.into(), |cg| cg.map(f))
    }

    /// Frees id `id`, whose last pin [`MemCgroup::id_drop_pins`] dropped.
    pub(crate) fn release_memcg_id(&self, id: u16) {
        self.shared.ids.release(id);
    }

    /// The mount options.
    pub fn mount_options(&self) -> MountOptions {
        MountOptions {
            memory_localevents: self.shared.options.localevents.load(Ordering::Relaxed),
            memory_recursiveprot: self.shared.options.recursiveprot.load(Ordering::Relaxed),
        }
    }

    /// What every memory cgroup created from now on charges to its parent
    /// for its own structures, through the parent's object cgroup (as
    /// `mem_cgroup_css_alloc` does under `set_active_memcg(parent)`),
    /// given back when it is released. By default
    /// [`MemcgMetadata::v6_14`] for the tree's CPUs and nodes: 14 KiB per
    /// memory cgroup on 2 CPUs, 1688 bytes more per CPU.
    pub fn set_memcg_metadata(&self, metadata: MemcgMetadata) {
        *lock(&self.shared.options.metadata) = metadata;
    }

    /// Overrides the model with `bytes` per memory cgroup, counted as
    /// `percpu` (and `kernel`); 0 charges nothing.
    pub fn set_memcg_metadata_bytes(&self, bytes: u64) {
        self.set_memcg_metadata(MemcgMetadata::percpu(bytes));
    }

    /// What each new memory cgroup charges to its parent
    /// ([`CgroupTree::set_memcg_metadata`]).
    pub fn memcg_metadata(&self) -> MemcgMetadata {
        *lock(&self.shared.options.metadata)
    }

    /// Whether offline moves LRU folios to the parent (the 2026
    /// behaviour); off (v6.14: they pin the dying memory cgroup) by
    /// default.
    pub fn reparent_lru_folios(&self) -> bool {
        self.shared
            .options
            .reparent_lru_folios
            .load(Ordering::Relaxed)
    }

    /// Chooses what offline does with LRU folios (see
    /// [`CgroupTree::reparent_lru_folios`]).
    pub fn set_reparent_lru_folios(&self, on: bool) {
        self.shared
            .options
            .reparent_lru_folios
            .store(on, Ordering::Relaxed);
    }

    /// Whether a refault checks the serial of the memory cgroup its shadow
    /// names besides its id, so that a shadow whose cgroup is gone and
    /// whose id went to a new cgroup is not measured on the new one's
    /// clock. Off by default: v6.14's `workingset_test_recent` accepts the
    /// recycled id (a rare, speculative activation).
    pub fn shadow_memcg_serial(&self) -> bool {
        self.shared
            .options
            .shadow_memcg_serial
            .load(Ordering::Relaxed)
    }

    /// Sets [`CgroupTree::shadow_memcg_serial`].
    pub fn set_shadow_memcg_serial(&self, on: bool) {
        self.shared
            .options
            .shadow_memcg_serial
            .store(on, Ordering::Relaxed);
    }

    /// The kernel version's behaviour switches this tree follows
    /// ([`TreeConfig::behaviour`]).
    pub fn behaviour(&self) -> Behaviour {
        self.shared.options.behaviour
    }

    /// Reclaim calls so far, and memory cgroups they visited.
    pub fn reclaim_counts(&self) -> ReclaimCounts {
        // Relaxed: statistics.
        ReclaimCounts {
            calls: self.shared.reclaim_calls.load(Ordering::Relaxed),
            memcgs_visited: self.shared.reclaim_visits.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn note_reclaim(&self) {
        // Relaxed: a statistic.
        self.shared.reclaim_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_reclaim_visit(&self) {
        // Relaxed: a statistic.
        self.shared.reclaim_visits.fetch_add(1, Ordering::Relaxed);
    }

    /// Changes the mount options (`mount -o remount,...`).
    pub fn set_mount_options(&self, options: MountOptions) {
        let o = &self.shared.options;
        o.localevents
            .store(options.memory_localevents, Ordering::Relaxed);
        o.recursiveprot
            .store(options.memory_recursiveprot, Ordering::Relaxed);
    }

    /// The memory cgroup of the cgroup at `path`.
    pub fn find(&self, path: &str) -> Result<Arc<MemCgroup>, CgroupError> {
        self.find_cgroup(path)?
            .memcg()
            .ok_or_else(|| CgroupError::NoMemoryController {
                path: path.to_owned(),
            })
    }

    /// Gives `cg` a memory cgroup (`css_create` + online): an id, list_lru
    /// lists, then the id is published.
    fn online_memcg(&self, cg: &Arc<Cgroup>, path: &str) -> Result<(), CgroupError> {
        let parent = cg
            .parent()
            .expect("the root's memory cgroup is made with the tree")
            .memcg()
            .ok_or_else(|| CgroupError::NoMemoryController {
                path: path.to_owned(),
            })?;
        // Its own metadata is charged to the parent first (reclaim and the
        // OOM killer may run for it); refused, the mkdir fails. Dropped on
        // any later failure, the charge goes back.
        let metadata = self
            .charge_metadata(&parent, self.memcg_metadata())
            .map_err(|_| CgroupError::NoMemory {
                path: path.to_owned(),
            })?;
        let Some(id) = lock(&self.shared.ids.alloc).alloc() else {
            return Err(CgroupError::NoIds {
                max: self.shared.ids.max,
            });
        };
        let serial = self.next_serial();
        let mut memcg = new_memcg(
            id,
            serial,
            cg,
            Some(&parent),
            self.shared.nr_nodes,
            &self.shared.ids,
            &self.shared.options,
        );
        memcg.metadata = metadata;
        let memcg = Arc::new(memcg);
        for lru in lock(&self.shared.list_lrus).iter() {
            lru.memcg_alloc(&memcg);
        }
        kmem::Kmem::online(&memcg);
        // Online: publish the id, then attach to the cgroup.
        self.shared
            .ids
            .table
            .store(id as usize, Some(Arc::clone(&memcg)));
        cg.set_css(Some(memcg as _));
        Ok(())
    }

    /// Takes `cg`'s memory cgroup offline (`mem_cgroup_css_offline`): it
    /// becomes dying, its protection is reset, its list_lru lists move to
    /// the parent, it leaves the cgroup and drops its own id pin.
    fn offline_memcg(&self, cg: &Cgroup) {
        let Some(memcg) = cg.memcg() else {
            return;
        };
        let parent = memcg.parent().expect("the root never goes offline");
        // Counted as dying before anything can release it.
        cg.count_dying_css();
        // Release: pairs with the Acquire in `is_dying`.
        memcg.dying.store(true, Ordering::Release);
        memcg.memory().set_min(0);
        memcg.memory().set_low(0);
        for lru in lock(&self.shared.list_lrus).iter() {
            lru.reparent(&memcg, parent);
        }
        self.reparent_objcgs(&memcg, parent);
        if self.reparent_lru_folios() {
            crate::lruvec::reparent_lruvec(&memcg, parent);
        }
        for nid in 0..self.nr_nodes() {
            memcg
                .shrinker_info(nid)
                .reparent_deferred(parent.shrinker_info(nid));
        }
        let slot = lock(&parent.dying_children).insert(Arc::downgrade(&memcg));
        // Relaxed: read by its own release, which the last reference's
        // drop orders after this.
        memcg.dying_slot.store(slot, Ordering::Relaxed);
        // Stocked pages go back, and with them the stocks' references.
        self.shared.stocks.drain_all(&memcg);
        cg.set_css(None);
        memcg.id_put();
    }

    /// Removes the cgroup of `memcg` (see [`CgroupRoot::rmdir`]).
    pub fn rmdir_cgroup(&self, memcg: &Arc<MemCgroup>) -> Result<(), CgroupError> {
        if memcg.is_dying() {
            return Err(CgroupError::NotFound { path: memcg.path() });
        }
        self.remove(memcg.cgroup())
    }

    /// Registers a memcg-aware list_lru: it gets lists for every memory
    /// cgroup created from now on and is reparented at every offline.
    pub(crate) fn register_list_lru(&self, lru: Arc<dyn MemcgLruHooks>) {
        lock(&self.shared.list_lrus).push(lru);
    }

    /// Undoes [`CgroupTree::register_list_lru`].
    pub(crate) fn unregister_list_lru(&self, lru: &Arc<dyn MemcgLruHooks>) {
        lock(&self.shared.list_lrus).retain(|l| !Arc::ptr_eq(l, lru));
    }

    /// Allocates a shrinker id.
    pub(crate) fn alloc_shrinker_id(&self) -> Result<ShrinkerId, CgroupError> {
        lock(&self.shared.shrinker_ids)
            .alloc()
            .map(|id| ShrinkerId(id as usize))
            .ok_or(CgroupError::NoShrinkerIds { max: MAX_SHRINKERS })
    }

    /// Frees a shrinker id, clearing its bit and its deferred scans in
    /// every memory cgroup with an id (offline ones gave theirs to their
    /// parents, and are never shrunk again).
    pub(crate) fn free_shrinker_id(&self, id: ShrinkerId) {
        for (_, memcg) in self.shared.ids.table.entries() {
            for nid in 0..self.nr_nodes() {
                memcg.shrinker_info(nid).forget(id);
            }
        }
        lock(&self.shared.shrinker_ids).free(id.0 as u32);
    }
}

/// A new memory cgroup for `cgroup` under `parent`, not yet online.
fn new_memcg(
    id: u32,
    serial: u64,
    cgroup: &Arc<Cgroup>,
    parent: Option<&Arc<MemCgroup>>,
    nr_nodes: usize,
    ids: &Arc<IdSpace>,
    options: &Arc<Options>,
) -> MemCgroup {
    MemCgroup {
        id: id as u16,
        serial,
        cgroup: Arc::clone(cgroup),
        parent: parent.cloned(),
        dying: AtomicBool::new(false),
        id_refs: AtomicUsize::new(1),
        shrinker_info: (0..nr_nodes).map(|_| ShrinkerInfo::default()).collect(),
        ids: Arc::clone(ids),
        options: Arc::clone(options),
        acct: Accounting::new(parent.map(|p| &p.acct)),
        own_pages: AtomicU64::new(0),
        pages_pin: Mutex::new(None),
        memory_peaks: Mutex::new(Vec::new()),
        swap_peaks: Mutex::new(Vec::new()),
        oom_group: AtomicBool::new(false),
        zswap_writeback: AtomicBool::new(true),
        lruvec: Lruvec::default(),
        dying_children: Mutex::new(WeakSlab::default()),
        dying_slot: AtomicUsize::new(NO_SLOT),
        metadata: None,
        kmem: kmem::Kmem::default(),
    }
}

/// The tree's cgroup operations are the cgroup core's
/// ([`CgroupRoot`]: mkdir, rmdir, `cgroup.subtree_control`, tasks).
impl std::ops::Deref for CgroupTree {
    type Target = CgroupRoot;

    fn deref(&self) -> &CgroupRoot {
        &self.shared.cgroups
    }
}

/// The memory controller's ops, as the cgroup core calls them.
impl CgroupSubsys for TreeShared {
    fn css_online(self: Arc<Self>, cg: &Arc<Cgroup>, path: &str) -> Result<(), CgroupError> {
        CgroupTree { shared: self }.online_memcg(cg, path)
    }

    fn css_offline(self: Arc<Self>, cg: &Cgroup) {
        CgroupTree { shared: self }.offline_memcg(cg);
    }
}

impl fmt::Debug for CgroupTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CgroupTree")
            .field("nr_nodes", &self.shared.nr_nodes)
            .field("ids_in_use", &self.ids_in_use())
            .finish_non_exhaustive()
    }
}

/// A tree for unit tests: every cgroup has memory, `nr_nodes` nodes and
/// room for `max_ids` memory cgroup ids.
#[cfg(all(test, not(loom)))]
pub(crate) fn test_tree(nr_nodes: usize, max_ids: u32) -> CgroupTree {
    let t = CgroupTree::new(TreeConfig {
        nr_nodes,
        max_ids,
        ..TreeConfig::default()
    });
    // Exact figures: tests of the stock, and of the memory cgroups' own
    // metadata, turn them back on.
    t.set_charge_stock(false);
    t.set_memcg_metadata(MemcgMetadata::NONE);
    t
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::errno::Errno;

    #[test]
    fn a_child_going_offline_is_listed_once_for_reclaim() {
        let t = test_tree(1, 64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        // The moment in `offline_memcg` when the child is on its parent's
        // dying list and still its cgroup's memory cgroup (a reclaim walk
        // that listed it twice looped on the shared cursor forever).
        let slot = lock(&p.dying_children).insert(Arc::downgrade(&c));
        let children = p.reclaim_children();
        assert_eq!(children.len(), 1, "{children:?}");
        assert!(lock(&p.dying_children).remove(slot, Arc::as_ptr(&c)));
    }

    #[test]
    fn a_released_child_leaves_its_parents_dying_list() {
        let t = test_tree(1, 64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        for i in 0..3 {
            t.mkdir(&format!("/p/{i}")).unwrap().memcg().unwrap();
        }
        let pinned = t.find("/p/1").unwrap();
        for i in 0..3 {
            t.rmdir(&format!("/p/{i}")).unwrap();
        }
        // Released at rmdir: nothing of them is left on the list.
        assert_eq!(lock(&p.dying_children).len(), 1, "only the pinned one");
        assert_eq!(p.reclaim_children().len(), 1);
        drop(pinned);
        assert_eq!(lock(&p.dying_children).len(), 0);
        assert!(p.reclaim_children().is_empty());
    }

    #[test]
    fn a_freed_object_cgroup_leaves_its_memory_cgroups_list() {
        let t = test_tree(1, 64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        let objcg = c.obj_cgroup();
        t.charge_slab(&objcg, 100, SlabKind::Unreclaimable, Gfp::Kernel)
            .unwrap();
        t.rmdir("/p/c").unwrap();
        assert_eq!(p.kmem.nr_objcgs(), 2, "its own and c's, reparented");
        t.uncharge_slab(&objcg, 100, SlabKind::Unreclaimable);
        drop(objcg);
        assert_eq!(p.kmem.nr_objcgs(), 1, "c's left with its last object");
        drop(c);
        t.rmdir("/p").unwrap();
        assert_eq!(t.root().kmem.nr_objcgs(), 1);
    }

    #[test]
    fn a_memcg_charges_its_metadata_to_its_parent_until_released() {
        let t = test_tree(1, 64);
        t.set_memcg_metadata_bytes(10_000);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        assert_eq!(p.memory().usage(), 3, "10000 bytes: 3 pages");
        assert_eq!(p.stat(MemcgStat::Kernel), 3);
        assert_eq!(p.stat(MemcgStat::Percpu), 10_000);
        assert_eq!(c.memory().usage(), 0, "not its own");
        assert_eq!(t.root().memory().usage(), 6, "both, on the machine");
        // A removed child's metadata stays charged while it lives on.
        t.rmdir("/p/c").unwrap();
        assert_eq!(p.memory().usage(), 3);
        drop(c);
        assert_eq!(p.memory().usage(), 0, "released");
        assert_eq!(p.stat(MemcgStat::Percpu), 0);
        // With no room in the parent (nothing to reclaim, nobody to kill),
        // the mkdir fails and leaves nothing behind.
        p.memory().set_max(2).unwrap();
        let err = t.mkdir("/p/d").unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert!(p.cgroup().child("d").is_none());
        assert_eq!(p.memory().usage(), 0);
        assert_eq!(t.ids_in_use(), 2, "root and /p");
        t.rmdir("/p").unwrap();
        drop(p);
        assert_eq!(t.root().memory().usage(), 0);
    }

    #[test]
    fn the_v6_14_model_is_14k_on_2_cpus_and_scales_with_cpus_and_nodes() {
        let two = MemcgMetadata::v6_14(2, 1);
        assert_eq!(
            (two.percpu_bytes, two.slab_bytes, two.other_bytes),
            (1688 * 4, 2056 + 1032, 4496)
        );
        assert_eq!(two.total_bytes(), 14 << 10);
        let four = MemcgMetadata::v6_14(4, 1);
        assert_eq!(four.total_bytes() - two.total_bytes(), 2 * 1688);
        let two_nodes = MemcgMetadata::v6_14(2, 2);
        assert_eq!(two_nodes.percpu_bytes - two.percpu_bytes, 512 * 4);
        assert_eq!(two_nodes.slab_bytes - two.slab_bytes, 1032);
        // A tree charges it by default, for its own CPUs.
        let t = CgroupTree::new(TreeConfig {
            nr_cpus: 4,
            ..TreeConfig::default()
        });
        assert_eq!(t.memcg_metadata(), four);
    }

    #[test]
    fn metadata_shows_in_percpu_slab_and_kernel_and_follows_a_parents_offline() {
        let t = test_tree(1, 64);
        t.set_memcg_metadata(MemcgMetadata::v6_14(2, 1));
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let kids: Vec<_> = (0..10)
            .map(|i| t.mkdir(&format!("/p/{i}")).unwrap().memcg().unwrap())
            .collect();
        // Byte by byte through p's object cgroup: 10 x 14 KiB, 35 pages.
        assert_eq!(p.memory().usage(), 35);
        assert_eq!(p.stat(MemcgStat::Kernel), 35);
        assert_eq!(p.stat(MemcgStat::Percpu), 10 * 6752);
        assert_eq!(p.stat(MemcgStat::SlabUnreclaimable), 10 * 3088);
        // Nine are released at their rmdir; one lives on, dying.
        let first = Arc::clone(&kids[0]);
        drop(kids);
        for i in 0..10 {
            t.rmdir(&format!("/p/{i}")).unwrap();
        }
        assert_eq!(p.memory().usage(), 4, "one child's 14 KiB");
        assert_eq!(p.stat(MemcgStat::Percpu), 6752);
        // p goes offline: its object cgroup, and the charge, move to the
        // root (whose own charge for p is there too).
        t.rmdir("/p").unwrap();
        assert_eq!(p.memory().usage(), 0);
        assert_eq!(t.root().stat(MemcgStat::Percpu), 2 * 6752);
        drop(p);
        drop(first);
        assert_eq!(t.root().memory().usage(), 0, "both released");
        assert_eq!(t.root().stat(MemcgStat::Percpu), 0);
        assert_eq!(t.root().stat(MemcgStat::SlabUnreclaimable), 0);
    }

    fn small_tree() -> CgroupTree {
        test_tree(2, 8)
    }

    fn mount() -> CgroupTree {
        CgroupTree::new(TreeConfig {
            memory: MemoryController::SubtreeControl,
            ..TreeConfig::default()
        })
    }

    #[test]
    fn mkdir_find_rmdir_and_states() {
        let t = CgroupTree::default();
        assert_eq!(t.root().id(), 1);
        assert_eq!(t.root().path(), "/");
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/sys/fs/cgroup/a/b").unwrap().memcg().unwrap();
        assert_eq!((a.id(), b.id()), (2, 3));
        assert_eq!(b.path(), "/a/b");
        assert_eq!(b.level(), 2);
        assert!(Arc::ptr_eq(&t.find("/a/b/").unwrap(), &b));
        assert!(Arc::ptr_eq(&t.lookup(3).unwrap(), &b));
        assert!(b.is_descendant_of(&a) && !a.is_descendant_of(&b));
        assert!(Arc::ptr_eq(b.parent().unwrap(), &a));

        assert_eq!(t.rmdir("/a").unwrap_err().errno(), Errno::EBUSY);
        assert_eq!(t.rmdir("/nope").unwrap_err().errno(), Errno::ENOENT);
        assert_eq!(t.rmdir("/").unwrap_err().errno(), Errno::EBUSY);
        assert_eq!(t.mkdir("/a").unwrap_err().errno(), Errno::EEXIST);
        assert_eq!(t.mkdir("/x/y").unwrap_err().errno(), Errno::ENOENT);

        let weak = std::sync::Arc::downgrade(&b);
        let pin = b.pin_id().unwrap();
        t.rmdir("/a/b").unwrap();
        assert!(b.is_dying() && b.cgroup().is_removed());
        assert!(t.find("/a/b").is_err());
        // Pinned: the id still resolves to the dying memory cgroup.
        assert!(Arc::ptr_eq(&t.lookup(3).unwrap(), &b));
        assert_eq!(t.rmdir_cgroup(&b).unwrap_err().errno(), Errno::ENOENT);
        drop(pin);
        assert!(t.lookup(3).is_none(), "last pin released the id");
        assert!(b.pin_id().is_none());
        drop(b);
        assert!(
            weak.upgrade().is_none(),
            "freed once the last reference went"
        );
        // The id is reused.
        assert_eq!(t.mkdir("/a/c").unwrap().memcg().unwrap().id(), 3);
    }

    #[test]
    fn ids_exhaust_with_ebusy_and_come_back() {
        let t = small_tree();
        let made: Vec<_> = (0..7)
            .map(|i| t.mkdir(&format!("/c{i}")).unwrap().memcg().unwrap())
            .collect();
        assert_eq!(t.ids_in_use(), 8);
        let err = t.mkdir("/full").unwrap_err();
        assert_eq!(err.errno(), Errno::EBUSY, "xa_alloc's EBUSY (v6.14)");
        assert!(t.find_cgroup("/full").is_err(), "nothing half made");
        t.rmdir("/c3").unwrap();
        assert_eq!(
            t.mkdir("/again").unwrap().memcg().unwrap().id(),
            made[3].id()
        );
    }

    #[test]
    fn only_cgroups_with_the_controller_take_ids() {
        let t = CgroupTree::new(TreeConfig {
            max_ids: 4,
            memory: MemoryController::SubtreeControl,
            ..TreeConfig::default()
        });
        // No +memory anywhere: any number of cgroups, one id (the root's).
        for i in 0..10 {
            let c = t.mkdir(&format!("/c{i}")).unwrap();
            assert!(c.memcg().is_none());
            assert!(Arc::ptr_eq(&c.effective_memcg(), t.root()));
        }
        assert_eq!(t.ids_in_use(), 1);
        // +memory on the root gives ten children ids: more than there are.
        let err = t.set_subtree_memory(t.root_cgroup(), true).unwrap_err();
        assert_eq!(err.errno(), Errno::EBUSY);
        assert!(!t.root_cgroup().subtree_memory(), "undone");
        assert_eq!(t.ids_in_use(), 1, "the ids taken were given back");
        for i in 3..10 {
            t.rmdir(&format!("/c{i}")).unwrap();
        }
        t.set_subtree_memory(t.root_cgroup(), true).unwrap();
        assert_eq!(t.ids_in_use(), 4);
        assert!(t.find("/c0").is_ok());
    }

    #[test]
    fn subtree_control_rules() {
        let t = mount();
        let root = t.root_cgroup();
        let a = t.mkdir("/a").unwrap();
        let b = t.mkdir("/a/b").unwrap();
        // +memory needs the controller on the cgroup itself.
        assert_eq!(
            t.set_subtree_memory(&a, true).unwrap_err().errno(),
            Errno::ENOENT
        );
        t.set_subtree_memory(root, true).unwrap();
        t.set_subtree_memory(&a, true).unwrap();
        let b_memcg = b.memcg().unwrap();
        // -memory on the root is refused while a child has it in its own
        // subtree control, allowed once it has not.
        assert_eq!(
            t.set_subtree_memory(root, false).unwrap_err().errno(),
            Errno::EBUSY
        );
        t.set_subtree_memory(&a, false).unwrap();
        assert!(b_memcg.is_dying(), "b's memory cgroup went offline");
        assert!(b.memcg().is_none() && Arc::ptr_eq(&b.effective_memcg(), &a.memcg().unwrap()));
        assert_eq!(b.nr_dying_subsys_memory(), 1, "pinned by our Arc");
        drop(b_memcg);
        assert_eq!(b.nr_dying_subsys_memory(), 0);
        t.set_subtree_memory(root, false).unwrap();
        assert!(a.memcg().is_none());
        assert_eq!(t.ids_in_use(), 1);
        // Everywhere trees have no subtree control to write.
        let lib = CgroupTree::default();
        assert_eq!(
            lib.set_subtree_memory(lib.root_cgroup(), false)
                .unwrap_err()
                .errno(),
            Errno::EINVAL
        );
    }

    #[test]
    fn offline_resets_protection() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.memory().set_min(10);
        a.memory().set_low(20);
        a.memory().set_high(30);
        t.rmdir("/a").unwrap();
        assert_eq!((a.memory().min(), a.memory().low()), (0, 0));
        assert_eq!(a.memory().high(), 30, "only min and low");
    }

    #[test]
    fn charged_pages_keep_a_removed_cgroup_dying() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        t.try_charge(&a, 4, ChargeKind::File, Gfp::Kernel).unwrap();
        let weak = std::sync::Arc::downgrade(&a);
        drop(a);
        t.rmdir("/a").unwrap();
        let root = t.root_cgroup();
        assert_eq!(
            (root.nr_dying_descendants(), root.nr_dying_subsys_memory()),
            (1, 1)
        );
        assert_eq!(root.nr_descendants(), 0);
        assert_eq!(t.ids_in_use(), 1, "no id: only swap pins ids");
        let a = weak.upgrade().expect("pages pin it");
        t.uncharge(&a, 3, ChargeKind::File);
        drop(a);
        assert_eq!(root.nr_dying_descendants(), 1, "one page left");
        let a = weak.upgrade().unwrap();
        t.uncharge(&a, 1, ChargeKind::File);
        drop(a);
        assert!(weak.upgrade().is_none(), "released with its last page");
        assert_eq!(
            (root.nr_dying_descendants(), root.nr_dying_subsys_memory()),
            (0, 0)
        );
    }

    #[test]
    fn hierarchy_limits_refuse_with_eagain() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap();
        a.set_max_depth(1);
        t.mkdir("/a/b").unwrap();
        assert_eq!(t.mkdir("/a/b/c").unwrap_err().errno(), Errno::EAGAIN);
        a.set_max_descendants(1);
        assert_eq!(t.mkdir("/a/d").unwrap_err().errno(), Errno::EAGAIN);
        t.rmdir("/a/b").unwrap();
        t.mkdir("/a/d").unwrap();
        t.root_cgroup().set_max_depth(0);
        assert_eq!(t.mkdir("/e").unwrap_err().errno(), Errno::EAGAIN);
    }

    #[test]
    fn names_are_validated() {
        let t = small_tree();
        assert_eq!(t.mkdir("/..").unwrap_err().errno(), Errno::EINVAL);
        assert_eq!(
            t.mkdir(&format!("/{}", "x".repeat(256)))
                .unwrap_err()
                .errno(),
            Errno::ENAMETOOLONG
        );
        assert_eq!(t.mkdir("/").unwrap_err().errno(), Errno::EEXIST);
        assert_eq!(
            t.mkdir_in(t.root_cgroup(), "a/b").unwrap_err().errno(),
            Errno::EINVAL
        );
    }

    #[test]
    fn mkdir_p_and_pre_order() {
        let t = CgroupTree::default();
        t.mkdir_p("/a/b/c").unwrap().memcg().unwrap();
        t.mkdir_p("/a/d").unwrap().memcg().unwrap();
        t.mkdir_p("/e").unwrap().memcg().unwrap();
        let order: Vec<String> = t.root().descendants_pre().map(|c| c.path()).collect();
        assert_eq!(order, ["/", "/a", "/a/b", "/a/b/c", "/a/d", "/e"]);
        assert_eq!(t.root_cgroup().nr_descendants(), 5);
        assert_eq!(t.root_cgroup().nr_subsys_memory(), 6);
    }

    #[test]
    fn concurrent_mkdir_rmdir_and_iteration() {
        let t = CgroupTree::default();
        std::thread::scope(|s| {
            for w in 0..2 {
                let t = t.clone();
                s.spawn(move || {
                    for i in 0..300 {
                        let p = format!("/w{w}/c{i}");
                        t.mkdir_p(&p).unwrap().memcg().unwrap();
                        if i % 2 == 0 {
                            t.rmdir(&p).unwrap();
                        }
                    }
                });
            }
            let t = t.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    let n = t.root().descendants_pre().count();
                    assert!(n >= 1);
                }
            });
        });
        assert_eq!(t.root().descendants_pre().count(), 1 + 2 + 300);
        assert_eq!(t.ids_in_use(), 1 + 2 + 300);
        assert_eq!(t.root_cgroup().nr_dying_descendants(), 0);
    }

    #[test]
    fn shrinker_bits_per_node_never_on_root() {
        let t = small_tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let s = t.alloc_shrinker_id().unwrap();
        a.set_shrinker_bit(1, s);
        t.root().set_shrinker_bit(0, s);
        assert!(a.shrinker_bit(1, s) && !a.shrinker_bit(0, s));
        assert!(!t.root().shrinker_bit(0, s));
        t.free_shrinker_id(s);
        assert!(!a.shrinker_bit(1, s));
    }
}
