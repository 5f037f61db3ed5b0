//! The swap cache and the swap-out / swap-in paths with cgroup accounting
//! (mm/swap_state.c, mm/page_io.c and their memcontrol hooks, v6.14).
//!
//! A [`SwapSystem`] ties the cgroup tree, the swap devices and the
//! `swap_cgroup` map (in any [`Design`]) together:
//!
//! - [`SwapSystem::swap_out`] allocates slots for a folio (a naturally
//!   aligned run for a large folio, or fails with `NoContiguous`), charges
//!   swap to the folio's cgroup and pins its id once per page (recording it
//!   in `swap_cgroup`), puts the folio in the swap cache while its pages are
//!   written (zero pages are only marked), and counts `pswpout`
//!   (`swpout_zero` for a wholly zero folio, as v6.12+ does). The caller
//!   then drops the folio, which uncharges its memory. A write error rolls
//!   everything back: the folio stays resident, nothing is charged or
//!   recorded, the slots are free.
//! - [`SwapSystem::swap_out_or_split`] is reclaim's policy on top: a large
//!   folio that finds no contiguous run is split into pages, each swapped
//!   on its own (vmscan and the simulator's `pageout` share it).
//! - [`SwapSystem::reserve_slots`] takes charged single slots with no folio
//!   behind them (direct swap charges).
//! - [`SwapSystem::swap_in`] looks the entry up in the swap cache; the first
//!   fault reads it into a new folio charged per the swap-in rule (the
//!   recorded cgroup if online, else the faulting one) while later faults
//!   on the same entry wait and share it. A page with one reference on a
//!   synchronous device (a RAM disk) skips the swap cache, as the kernel's
//!   `do_swap_page` does: no other fault can want it, and the claim on its
//!   slots (the cache bit) keeps a racing free of the mapping from taking
//!   them mid-read. Each fault drops its mapping's
//!   reference; when the last goes the slot is freed, which uncharges swap
//!   on the recorded (possibly dead) cgroup and unpins its id. A read error
//!   fails the fault and leaves slot, data and accounting for a retry.
//! - [`SwapSystem::swap_free`] drops a mapping's reference without a fault
//!   (`free`/`munmap`).
//! - A folio swapped out leaves a shadow (`workingset.rs`) under its entry
//!   until a swap-in takes it (`workingset_refault`, which may send the
//!   folio straight to the active list) or its slots are freed.
//! - [`SwapSystem::swapoff`] stops allocation on a device and asks the
//!   caller, who knows the mappings, to fault every slot back in; if one
//!   cannot be (its cgroup is full) the device stays on.
//!
//! Invariants: a slot holds one reference per mapping that still points
//! at it, plus the swap cache bit while a folio for it is in the cache or
//! being read or written; while either holds, its cgroup is charged one
//! swap page (below the root), pinned once, and recorded in `swap_cgroup`
//! (unless that is disabled). Those three go
//! exactly when the last of them does, before the slot can be handed out
//! again. A folio is in the swap cache under its first entry only.
//!
//! Locking: a swap cache shard lock covers looking up, adding and removing
//! an entry together with dropping references to it, so "the last
//! reference frees the slot" cannot race a fault that is about to share it.

use std::collections::HashMap;
use std::fmt;

use rustc_hash::FxHashMap;
use std::path::Path;

use crate::clock::Work;
use crate::errno::Errno;
use crate::folio::Folio;
use crate::list_lru::LruDesign;
use crate::memcontrol::{CgroupTree, ChargeError, ChargeKind, Gfp, MemCgroup, MemcgStat, VmEvent};
use crate::mm_types::{PAGE_BYTES, SWAPFILE_CLUSTER};
use crate::swap_cgroup::{Design, SwapCgroup, SwapCgroupError};
use crate::swapfile::{
    DeviceRef, FileBackend, MAX_SWAP_PAGES, RamBackend, SwapBackend, SwapDevice, SwapError,
    Swapfiles, check_size, is_zero,
};
use crate::swapops::SwapEntry;
use crate::sync::{Arc, Condvar, Mutex, MutexGuard, lock};
use crate::vmscan::SwapSpace;
use crate::workingset::{self, Shadow};
use crate::zswap::{WritebackError, Zswap, ZswapWriteback};

/// Swap cache shards (each a lock and a map).
const CACHE_SHARDS: usize = 64;

/// One piece of a folio after [`SwapSystem::swap_out_or_split`].
#[derive(Debug)]
pub struct SwapOutPiece {
    /// Its first page, counted from the start of the original folio.
    pub first_page: u32,
    /// Its pages.
    pub nr: u32,
    /// Its first swap entry, or the folio (still resident and charged) and
    /// why it could not go.
    pub outcome: Result<SwapEntry, (Arc<Folio>, SwapOutError)>,
}

/// Why a swap-out did not happen. The folio is untouched and still charged.
#[derive(Debug, thiserror::Error)]
pub enum SwapOutError {
    /// No naturally aligned run for a large folio: split it and retry.
    #[error("no contiguous swap space for a {0}-page folio")]
    NoContiguous(u32),
    /// No swap slot at all (counted as a swap `fail` event).
    #[error("no swap space")]
    Full,
    /// The cgroup's swap limit refused the charge.
    #[error(transparent)]
    Charge(#[from] ChargeError),
    /// Writing a page failed; everything was rolled back.
    #[error(transparent)]
    Io(#[from] SwapError),
    /// zswap did not take the folio and `memory.zswap.writeback` is 0 in
    /// its cgroup or an ancestor: it may not go to the device
    /// (`AOP_WRITEPAGE_ACTIVATE`: reclaim activates it).
    #[error("zswap writeback is disabled for this cgroup")]
    WritebackDisabled,
}

impl SwapOutError {
    /// The errno a program would see.
    pub fn errno(&self) -> Errno {
        match self {
            SwapOutError::NoContiguous(_) | SwapOutError::Full => Errno::ENOSPC,
            SwapOutError::WritebackDisabled => Errno::EAGAIN,
            SwapOutError::Charge(e) => e.errno(),
            SwapOutError::Io(e) => e.errno(),
        }
    }
}

/// Why a swap-in failed. The swap slot, its data and its accounting stay.
#[derive(Debug, thiserror::Error)]
pub enum SwapInError {
    /// The memory charge failed (nothing to reclaim or kill).
    #[error(transparent)]
    Charge(#[from] ChargeError),
    /// Reading failed, or the entry is not in use.
    #[error(transparent)]
    Swap(#[from] SwapError),
    /// Another fault on the same entry was reading it in and failed with
    /// this errno (every waiter gets the reader's error).
    #[error("a concurrent swap-in of the same entry failed: {0}")]
    Shared(Errno),
}

impl SwapInError {
    /// The errno a program would see.
    pub fn errno(&self) -> Errno {
        match self {
            SwapInError::Charge(e) => e.errno(),
            SwapInError::Swap(e) => e.errno(),
            SwapInError::Shared(errno) => *errno,
        }
    }
}

/// A folio in the swap cache: being read (waiters block on `ready`), or
/// read and shared.
struct CacheSlot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

/// What a [`CacheSlot`] holds, under its lock.
struct SlotState {
    /// The read's outcome, once there is one.
    result: Option<Result<Arc<Folio>, Errno>>,
    /// Faults blocked in [`CacheSlot::wait`]: `resolve` wakes them only
    /// when there are some (the kernel's `PG_waiters`), since a wake-up is
    /// a system call even with nobody to wake.
    waiters: u32,
}

impl CacheSlot {
    fn new(result: Option<Result<Arc<Folio>, Errno>>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(SlotState { result, waiters: 0 }),
            ready: Condvar::new(),
        })
    }

    fn loading() -> Arc<Self> {
        Self::new(None)
    }

    fn resolved(folio: &Arc<Folio>) -> Arc<Self> {
        Self::new(Some(Ok(Arc::clone(folio))))
    }

    fn wait(&self) -> Result<Arc<Folio>, Errno> {
        let mut state = lock(&self.state);
        loop {
            if let Some(result) = state.result.as_ref() {
                return result.clone();
            }
            // Counted under the lock `resolve` takes, so it cannot miss us.
            state.waiters += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.waiters -= 1;
        }
    }

    fn resolve(&self, result: Result<Arc<Folio>, Errno>) {
        let mut state = lock(&self.state);
        state.result = Some(result);
        let waiters = state.waiters;
        drop(state);
        if waiters > 0 {
            self.ready.notify_all();
        }
    }
}

/// One shard of the swap cache.
type CacheShard = HashMap<SwapEntry, Arc<CacheSlot>>;

/// The swap cache, keyed by a folio's first entry: folios being read or
/// written, and the shadows of folios reclaim swapped out (what
/// `__remove_mapping` leaves in the swap cache's xarray), until a swap-in
/// takes them or the slots are freed.
struct SwapCache {
    shards: Box<[Mutex<CacheShard>]>,
    /// Keyed by slot with `rustc_hash`'s Fx hash: entries are plain
    /// integers no attacker chooses, and SipHash cost a reclaimed page
    /// ~10 ns per slot.
    shadows: Box<[Mutex<FxHashMap<SwapEntry, Shadow>>]>,
}

impl SwapCache {
    fn new() -> Self {
        Self {
            shards: (0..CACHE_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            shadows: (0..CACHE_SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
        }
    }

    fn shard(&self, entry: SwapEntry) -> MutexGuard<'_, HashMap<SwapEntry, Arc<CacheSlot>>> {
        let h = entry.val().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        lock(&self.shards[h as usize % CACHE_SHARDS])
    }

    /// The shadow shard of `entry`: by cluster, so the slots of one folio
    /// (never across a cluster) share one lock.
    fn shadow_shard(&self, entry: SwapEntry) -> MutexGuard<'_, FxHashMap<SwapEntry, Shadow>> {
        let cluster = entry.val() / SWAPFILE_CLUSTER as u64;
        let h = cluster.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        lock(&self.shadows[h as usize % CACHE_SHARDS])
    }

    /// Keeps `shadow` in each of the `nr` slots of a folio swapped out at
    /// `entry` (a later swap-in may take its pages one by one).
    fn put_shadow(&self, entry: SwapEntry, nr: u32, shadow: Shadow) {
        let mut shard = self.shadow_shard(entry);
        for e in (0..u64::from(nr)).filter_map(|i| entry.add(i).ok()) {
            shard.insert(e, shadow);
        }
    }

    /// Takes the shadows left in the `nr` slots at `entry`; returns the
    /// first found.
    fn take_shadow(&self, entry: SwapEntry, nr: u32) -> Option<Shadow> {
        let mut shard = self.shadow_shard(entry);
        if shard.is_empty() {
            return None;
        }
        (0..u64::from(nr))
            .filter_map(|i| entry.add(i).ok())
            .filter_map(|e| shard.remove(&e))
            .reduce(|first, _| first)
    }

    fn nr_shadows(&self) -> usize {
        self.shadows.iter().map(|s| lock(s).len()).sum()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}

/// zswap's writeback to the devices of one [`SwapSystem`].
struct DeviceWriteback(std::sync::Weak<SwapSystem>);

impl ZswapWriteback for DeviceWriteback {
    fn writeback(&self, slot: SwapEntry) -> Result<(), WritebackError> {
        self.0
            .upgrade()
            .ok_or(WritebackError::Gone)?
            .zswap_writeback(slot)
    }
}

/// Swap devices, the swap cache and swap accounting together; see the
/// module docs.
pub struct SwapSystem {
    tree: CgroupTree,
    swap_cgroup: SwapCgroup,
    swapfiles: Swapfiles,
    cache: SwapCache,
    zswap: Arc<Zswap>,
}

impl SwapSystem {
    /// A system over `tree` recording swap owners with `design`.
    pub fn new(tree: &CgroupTree, design: Design) -> Self {
        Self::with_lru_design(tree, design, LruDesign::default())
    }

    /// [`SwapSystem::new`] with zswap's entries on list_lrus of
    /// `lru_design`. Its owner installs zswap's writeback path
    /// ([`SwapSystem::install_zswap_writeback`]).
    pub(crate) fn with_lru_design(
        tree: &CgroupTree,
        design: Design,
        lru_design: LruDesign,
    ) -> Self {
        Self {
            tree: tree.clone(),
            swap_cgroup: SwapCgroup::new(design),
            swapfiles: Swapfiles::default(),
            cache: SwapCache::new(),
            zswap: Zswap::new(tree, lru_design),
        }
    }

    /// Points zswap's writeback at this system's devices
    /// ([`SwapSystem::zswap_writeback`]); the path holds a weak reference,
    /// so a writeback after the system is gone finds its entry `Gone`.
    pub fn install_zswap_writeback(self: &Arc<Self>) {
        self.zswap
            .set_writeback(Arc::new(DeviceWriteback(Arc::downgrade(self))));
    }

    /// `zswap_writeback_entry`: writes the page zswap holds for `slot` to
    /// its device, holding the slot as a swap-cache folio would (its cache
    /// bit, under its cache shard's lock, so no fault or free can touch it
    /// meanwhile), and drops the entry. Fails with `Exists` if a folio of
    /// the slot is in the swap cache or a fault is reading it.
    pub fn zswap_writeback(&self, slot: SwapEntry) -> Result<(), WritebackError> {
        let device = self
            .swapfiles
            .device(slot)
            .map_err(|_| WritebackError::Gone)?;
        let shard = self.cache.shard(slot);
        if shard.contains_key(&slot) {
            return Err(WritebackError::Exists);
        }
        device
            .claim_for_read(slot, 1)
            .map_err(|_| WritebackError::Exists)?;
        let mut page = vec![0; PAGE_BYTES];
        let owner = self
            .swap_cgroup
            .lookup(slot)
            .ok()
            .and_then(|id| self.tree.lookup(id));
        let result = if self.zswap.take_for_writeback(slot, &mut page) {
            device.write(slot, &page).map_err(|_| {
                // Stored again: the slot keeps its page.
                if let Some(memcg) = &owner {
                    self.zswap
                        .restore_after_failed_writeback(slot, &page, memcg);
                }
                WritebackError::Io
            })
        } else {
            Err(WritebackError::Gone)
        };
        device.uncache(slot, 1).expect("the claim holds the slot");
        // Written back: zswap holds the page no more; failed: it does again.
        debug_assert!(result.is_err() || !self.zswap.contains(slot));
        drop(shard);
        result
    }

    /// The swap space the devices have now (`total_swap_pages` and
    /// `nr_swap_pages`: a device being swapped off counts no more).
    pub fn swap_space(&self) -> SwapSpace {
        let (total_pages, free_pages) = self.swapfiles.space_pages();
        SwapSpace {
            free_pages,
            total_pages,
        }
    }

    /// The compressed cache in front of the devices.
    pub fn zswap(&self) -> &Zswap {
        &self.zswap
    }

    /// Shadows kept for swapped-out folios.
    pub fn nr_shadows(&self) -> usize {
        self.cache.nr_shadows()
    }

    /// The cgroup tree.
    pub fn tree(&self) -> &CgroupTree {
        &self.tree
    }

    /// The swap_cgroup table.
    pub fn swap_cgroup(&self) -> &SwapCgroup {
        &self.swap_cgroup
    }

    /// The devices.
    pub fn swapfiles(&self) -> &Swapfiles {
        &self.swapfiles
    }

    /// Folios currently in the swap cache.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Swaps on a RAM disk of `size_bytes` named `name`. The machine must
    /// have room for the area's tables before anything is allocated.
    pub fn swapon_ram(
        &self,
        name: &str,
        size_bytes: u64,
        prio: Option<i32>,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        let tables = self.reserve_tables(check_size(size_bytes)?)?;
        let machine = Arc::new(self.tree.clone());
        // A disk past the largest area is never used beyond it.
        let usable_bytes = size_bytes.min(MAX_SWAP_PAGES * PAGE_BYTES as u64);
        let backend = RamBackend::with_memory(usable_bytes, machine)?;
        self.swapon_reserved(name, Box::new(backend), prio, tables)
    }

    /// Swaps on the file `path` (created and preallocated, or reused if at
    /// least `size_bytes`); nothing is created when the machine has no room
    /// for the area's tables.
    pub fn swapon_file(
        &self,
        path: &Path,
        size_bytes: u64,
        prio: Option<i32>,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        let name = path.display().to_string();
        if self.swapfiles.by_name(&name).is_some() {
            return Err(SwapError::AlreadyOn(name));
        }
        let tables = self.reserve_tables(check_size(size_bytes)?)?;
        let backend = FileBackend::open(path, size_bytes)?;
        self.swapon_reserved(&name, Box::new(backend), prio, tables)
    }

    /// Swaps on any backend. The area's tables are kernel memory of the
    /// machine ([`swap_tables_pages`]); a machine without room for them
    /// refuses with `ENOMEM`, as the kernel's `vzalloc` of `swap_map` does.
    pub fn swapon(
        &self,
        name: &str,
        backend: Box<dyn SwapBackend>,
        prio: Option<i32>,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        let tables = self.reserve_tables(backend.nr_pages())?;
        self.swapon_reserved(name, backend, prio, tables)
    }

    /// Takes the machine memory the tables of an area of `nr_pages` need
    /// (truncated to [`MAX_SWAP_PAGES`]); given back when the guard drops
    /// unless the area comes on.
    fn reserve_tables(&self, nr_pages: u64) -> Result<TablesCharge, SwapError> {
        let nr_pages = nr_pages.min(MAX_SWAP_PAGES);
        let pages = swap_tables_pages(nr_pages);
        self.tree
            .charge_kernel(pages)
            .map_err(|_| SwapError::NoMemory { pages: nr_pages })?;
        Ok(TablesCharge {
            tree: self.tree.clone(),
            pages,
        })
    }

    fn swapon_reserved(
        &self,
        name: &str,
        backend: Box<dyn SwapBackend>,
        prio: Option<i32>,
        tables: TablesCharge,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        debug_assert_eq!(
            tables.pages,
            swap_tables_pages(backend.nr_pages().min(MAX_SWAP_PAGES))
        );
        let device = self.swapfiles.swapon(name, backend, prio)?;
        if let Err(e) = self.swap_cgroup.swapon(device.ty(), device.nr_pages()) {
            // As the kernel's swap_cgroup_swapon, only memory can run out:
            // the type was just handed out and the size checked.
            debug_assert!(matches!(e, SwapCgroupError::NoMemory { .. }), "{e}");
            self.swapfiles.begin_swapoff(device.ty())?;
            self.swapfiles.finish_swapoff(device.ty())?;
            return Err(SwapError::NoMemory {
                pages: device.nr_pages(),
            });
        }
        // The device holds the tables now; swapoff gives them back.
        tables.keep();
        Ok(device)
    }

    /// Takes `nr_pages` single swap slots charged to `memcg` as swapped-out
    /// pages would be (swap charge, id pins, `swap_cgroup` records), each
    /// holding a zero page: swap usage without folios behind it, for tools
    /// that drive the counters directly. [`SwapSystem::swap_free`] gives a
    /// slot back. All or nothing, and failing as a swap-out does: too few
    /// slots (`ENOSPC`, one swap `fail` event) or over `memory.swap.max`
    /// (one charge of all the pages, so a refusal moves no watermark).
    pub fn reserve_slots(
        &self,
        memcg: &Arc<MemCgroup>,
        nr_pages: u64,
    ) -> Result<Vec<SwapEntry>, SwapOutError> {
        if nr_pages == 0 {
            return Ok(Vec::new());
        }
        let mut entries = Vec::new();
        while (entries.len() as u64) < nr_pages {
            let Some(entry) = self.swapfiles.alloc(0) else {
                self.put_fresh(&entries);
                self.tree.swapout_failed(memcg);
                return Err(SwapOutError::Full);
            };
            self.swapfiles
                .mark_zero(entry, 1)
                .expect("slot just allocated");
            entries.push(entry);
        }
        debug_assert_eq!(entries.len() as u64, nr_pages);
        let runs: Vec<(SwapEntry, u32)> = entries.iter().map(|&e| (e, 1)).collect();
        if let Err(e) = self
            .tree
            .swapout_charge_runs(memcg, &self.swap_cgroup, &runs)
        {
            self.put_fresh(&entries);
            return Err(e.into());
        }
        Ok(entries)
    }

    /// Gives back single slots just allocated and not yet charged.
    fn put_fresh(&self, entries: &[SwapEntry]) {
        for &entry in entries {
            self.swapfiles.put(entry, 1).expect("slot just allocated");
        }
    }

    /// `folio_alloc_swap`: a naturally aligned run of `nr` slots, held by
    /// the swap cache (for the folio about to be written), charged to
    /// `memcg` and recorded in `swap_cgroup`; returns the entry and its
    /// device. No slot raises swap `fail` on `memcg` (for a large folio
    /// too: vmscan then splits it); a refused charge leaves nothing
    /// allocated.
    fn alloc_charged(
        &self,
        memcg: &Arc<MemCgroup>,
        nr: u32,
    ) -> Result<(SwapEntry, DeviceRef), SwapOutError> {
        let Some(entry) = self.swapfiles.alloc_cached(nr.trailing_zeros() as usize) else {
            self.tree.swapout_failed(memcg);
            if nr > 1 {
                return Err(SwapOutError::NoContiguous(nr));
            }
            return Err(SwapOutError::Full);
        };
        // The device stays while its slot is in use (swapoff waits).
        let device = self.swapfiles.device(entry)?;
        // Nobody else knows the entry yet: its slots hold our reference.
        debug_assert!(matches!(device.count(entry), Ok(1)));
        if let Err(e) = self
            .tree
            .swapout_charge(memcg, &self.swap_cgroup, entry, nr)
        {
            device.put_last(entry, nr).expect("slots just allocated");
            return Err(e.into());
        }
        debug_assert!(
            !self.swap_cgroup.is_enabled()
                || matches!(self.swap_cgroup.lookup(entry), Ok(id) if id != 0),
            "a charged entry has an owner record"
        );
        Ok((entry, device))
    }

    /// Swaps `folio` out (see the module docs); returns its first entry.
    /// No shadow is kept: that is for reclaim ([`SwapSystem::swap_out_or_split`]).
    pub fn swap_out(&self, folio: &Arc<Folio>) -> Result<SwapEntry, SwapOutError> {
        self.swap_out_with(folio, None)
    }

    /// [`SwapSystem::swap_out`]; for a reclaim of `shadow_target`, the
    /// slots keep a shadow recording its eviction clock.
    fn swap_out_with(
        &self,
        folio: &Arc<Folio>,
        shadow_target: Option<&MemCgroup>,
    ) -> Result<SwapEntry, SwapOutError> {
        let nr = folio.nr();
        debug_assert!(nr.is_power_of_two(), "a folio is 2^order pages");
        let (entry, device) = self.alloc_charged(&folio.memcg(), nr)?;
        self.cache
            .shard(entry)
            .insert(entry, CacheSlot::resolved(folio));
        folio.memcg().mod_stat(MemcgStat::Swapcached, i64::from(nr));

        let written = self.write_folio(&device, folio, entry);

        self.cache.shard(entry).remove(&entry);
        folio
            .memcg()
            .mod_stat(MemcgStat::Swapcached, -i64::from(nr));
        device.uncache(entry, nr)?;
        let written = match written {
            Ok(written) => written,
            Err(e) => {
                // Roll back: the folio stays resident; undo the accounting
                // (record, swap charge, id pins), then free the slots.
                self.tree
                    .swap_uncharge(&self.swap_cgroup, entry, nr)
                    .expect("the record was made above");
                device.put(entry, nr).expect("slots allocated above");
                return Err(e);
            }
        };
        // As the kernel's swap_writepage: a wholly zero folio counts as
        // `swpout_zero`, one written to the device as `pswpout` (zswap
        // counted its `zswpout`).
        let event = match written {
            Written::Zero => Some(VmEvent::SwpoutZero),
            Written::Device => Some(VmEvent::Pswpout),
            Written::Zswap => None,
        };
        if let Some(event) = event {
            folio.memcg().count_vm_event(event, u64::from(nr));
        }
        // Reclaimed: a shadow stays for refault detection.
        if let Some(target) = shadow_target {
            let shadow = workingset::workingset_eviction(folio, target);
            self.cache.put_shadow(entry, nr, shadow);
        }
        // Written and out of the swap cache; its mapping's reference stays.
        debug_assert!(!self.cache.shard(entry).contains_key(&entry));
        debug_assert!(matches!(device.count(entry), Ok(1)));
        Ok(entry)
    }

    /// Swaps `folio` out as reclaim does: whole if a naturally aligned run
    /// of slots is free, otherwise (a large folio, `NoContiguous`) split
    /// into single pages that are swapped one by one (`shrink_folio_list`
    /// splitting a folio `folio_alloc_swap` could not place, then retrying
    /// its pages). A shared large folio cannot be split and stays whole.
    /// Returns every piece in page order with what became of it; pieces
    /// that stay resident keep their charge and say why.
    ///
    /// `target` is the memory cgroup the reclaim is for (the root for the
    /// machine's reclaim and for `MADV_PAGEOUT`): the slots keep a shadow
    /// on its eviction clock.
    pub fn swap_out_or_split(&self, folio: Arc<Folio>, target: &MemCgroup) -> Vec<SwapOutPiece> {
        let pieces = match self.swap_out_with(&folio, Some(target)) {
            Ok(entry) => {
                return vec![SwapOutPiece {
                    first_page: 0,
                    nr: folio.nr(),
                    outcome: Ok(entry),
                }];
            }
            Err(SwapOutError::NoContiguous(_)) => Folio::split(folio).unwrap_or_else(|f| vec![f]),
            Err(e) => {
                return vec![SwapOutPiece {
                    first_page: 0,
                    nr: folio.nr(),
                    outcome: Err((folio, e)),
                }];
            }
        };
        let mut first_page = 0;
        let mut out = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let nr = piece.nr();
            let outcome = self
                .swap_out_with(&piece, Some(target))
                .map_err(|e| (piece, e));
            out.push(SwapOutPiece {
                first_page,
                nr,
                outcome,
            });
            first_page += nr;
        }
        // The pieces are the folio's pages, each once, in order.
        debug_assert_eq!(out.iter().map(|p| p.nr).sum::<u32>(), first_page);
        out
    }

    /// Whether a fault may bring the swapped large folio at `entry` back
    /// whole (`alloc_swap_folio`): only on the path that skips the swap
    /// cache (a synchronous device, a slot with one reference; otherwise
    /// `swapin_readahead` reads single pages), and only while zswap has
    /// never been enabled, unless [`Zswap::large_folio_loads`] is on.
    /// Otherwise each page faults on its own.
    pub fn may_swap_in_large(&self, entry: SwapEntry) -> bool {
        let Ok(device) = self.swapfiles.device(entry) else {
            return false;
        };
        device.synchronous()
            && device.count(entry).is_ok_and(|count| count == 1)
            && (self.zswap.never_enabled() || self.zswap.large_folio_loads())
    }

    /// A page fault on the swapped `nr`-page folio at `entry` by a task in
    /// `faulting` (`do_swap_page`): [`SwapSystem::swap_in`], plus a major
    /// fault (`pgmajfault`) on `faulting` (the faulting mm's memory cgroup,
    /// whoever the page is charged to) when this fault read the folio in
    /// rather than finding it in the swap cache. The folio is charged with
    /// the effort `gfp` allows: `alloc_swap_folio` charges a large folio
    /// without reclaim, and the caller falls back to single pages when
    /// that fails.
    pub fn do_swap_page(
        &self,
        entry: SwapEntry,
        nr: u32,
        faulting: &Arc<MemCgroup>,
        gfp: Gfp,
    ) -> Result<Arc<Folio>, SwapInError> {
        let (folio, read) = self.swap_in_inner(entry, nr, faulting, gfp)?;
        if read {
            faulting.count_vm_event(VmEvent::Pgmajfault, 1);
        }
        Ok(folio)
    }

    /// Brings in the `nr`-page folio at `entry` for a task in `faulting`
    /// (see the module docs) without counting a fault (swapoff's
    /// `unuse_pte`); returns the folio, charged where the swap-in rule says.
    pub fn swap_in(
        &self,
        entry: SwapEntry,
        nr: u32,
        faulting: &Arc<MemCgroup>,
    ) -> Result<Arc<Folio>, SwapInError> {
        self.swap_in_inner(entry, nr, faulting, Gfp::Kernel)
            .map(|(folio, _)| folio)
    }

    /// The swap-in; the flag says whether this call read the folio in.
    fn swap_in_inner(
        &self,
        entry: SwapEntry,
        nr: u32,
        faulting: &Arc<MemCgroup>,
        gfp: Gfp,
    ) -> Result<(Arc<Folio>, bool), SwapInError> {
        debug_assert!(nr.is_power_of_two(), "a folio is 2^order pages");
        // `get_swap_device`: once per fault.
        let device = self.swapfiles.device(entry)?;
        let (claim, slot) = {
            let mut shard = self.cache.shard(entry);
            if let Some(slot) = shard.get(&entry) {
                // Another fault is reading it, or read it: share its folio.
                let slot = Arc::clone(slot);
                drop(shard);
                let folio = slot.wait().map_err(SwapInError::Shared)?;
                self.drop_reference(&device, entry, nr, true)?;
                return Ok((folio, false));
            }
            // Claim the slots for the read (checking that mappings still
            // reference them) before others can find them.
            let claim = device.claim_for_read(entry, nr)?;
            if claim.only_reference && device.synchronous() {
                // `do_swap_page`'s skip-swapcache path: a synchronous device
                // and no other mapping, so no other fault can want the
                // folio; the claim keeps the slots ours meanwhile.
                (claim, None)
            } else {
                let slot = CacheSlot::loading();
                shard.insert(entry, Arc::clone(&slot));
                (claim, Some(slot))
            }
        };
        let read = ReadClaim {
            all_zero: claim.all_zero,
            via_cache: slot.is_some(),
        };
        let result = self.read_folio(&device, entry, nr, faulting, gfp, read);
        if let Some(slot) = &slot {
            slot.resolve(result.as_ref().map(Arc::clone).map_err(SwapInError::errno));
        }
        match result {
            Ok(folio) if slot.is_none() => {
                // Skipped the cache, so ours was the only reference: undo
                // the slots' accounting while the claim still holds them,
                // then free them (the claim refuses a racing free).
                self.uncharge_freed(entry, nr);
                device.put_last(entry, nr)?;
                Ok((folio, true))
            }
            Ok(folio) => {
                // The reader keeps its own folio: no second look-up.
                self.drop_reference(&device, entry, nr, true)?;
                Ok((folio, true))
            }
            Err(e) => {
                // Leave the slot and its data for a retry.
                let mut shard = self.cache.shard(entry);
                shard.remove(&entry);
                device.uncache(entry, nr)?;
                Err(e)
            }
        }
    }

    /// `swap_writepage`: a wholly zero folio is only marked in the zero
    /// map; otherwise zswap may take it; otherwise, unless zswap writeback
    /// is off for its cgroup, its pages are written to the device.
    fn write_folio(
        &self,
        device: &SwapDevice,
        folio: &Folio,
        entry: SwapEntry,
    ) -> Result<Written, SwapOutError> {
        let zero = is_zero(&folio.bytes());
        if zero {
            device.mark_zero(entry, folio.nr())?;
            return Ok(Written::Zero);
        }
        if self.zswap.store(folio, entry).is_ok() {
            // The slot's claim keeps what was stored until it is written.
            debug_assert!(self.zswap.contains(entry));
            return Ok(Written::Zswap);
        }
        if self.zswap.enabled() && !folio.memcg().zswap_writeback_enabled() {
            return Err(SwapOutError::WritebackDisabled);
        }
        let bytes = folio.bytes();
        for (i, page) in bytes.chunks_exact(PAGE_BYTES).enumerate() {
            let e = entry
                .add(i as u64)
                .map_err(|_| SwapError::BadEntry(entry))?;
            device.write(e, page)?;
        }
        Ok(Written::Device)
    }

    /// Reads the folio at `entry` into a new folio charged per the swap-in
    /// rule; counts `pswpin` (or `swpin_zero`) where it is charged. A folio
    /// whose slots all hold zero pages is not read: a new folio is zeroed.
    fn read_folio(
        &self,
        device: &SwapDevice,
        entry: SwapEntry,
        nr: u32,
        faulting: &Arc<MemCgroup>,
        gfp: Gfp,
        read: ReadClaim,
    ) -> Result<Arc<Folio>, SwapInError> {
        let ReadClaim {
            all_zero,
            via_cache: swapcached,
        } = read;
        let charged = self.tree.swapin_charge(
            &self.swap_cgroup,
            entry,
            faulting,
            u64::from(nr),
            ChargeKind::Anon,
            gfp,
        )?;
        // The charged cgroup's reference moves into the folio.
        let folio = if all_zero {
            Folio::adopt(charged, nr)
        } else {
            Folio::adopt_to_fill(charged, nr)
        };
        // A shadow makes this a refault, decided before the read; reading
        // back a folio of the working set is a memory stall
        // (`swap_read_folio` on a `PG_workingset` folio).
        if let Some(shadow) = self.cache.take_shadow(entry, nr) {
            let free = || self.swap_space().free_pages;
            workingset::workingset_refault(&self.tree, &folio, &shadow, &free);
        }
        let from_device = match all_zero {
            true => 0,
            false => self.fill_from_swap(device, entry, &folio)?,
        };
        let charged = folio.memcg();
        if swapcached {
            charged.mod_stat(MemcgStat::Swapcached, i64::from(nr));
        }
        if all_zero {
            charged.count_vm_event(VmEvent::SwpinZero, u64::from(nr));
        } else if from_device > 0 {
            charged.count_vm_event(VmEvent::Pswpin, from_device);
            // Read from the device, not zswap: protect zswap's entries.
            Zswap::folio_swapin(&charged);
        }
        debug_assert_eq!(folio.nr(), nr);
        Ok(Arc::new(folio))
    }

    /// Fills `folio`, the `nr`-page folio at `entry`, from the device and
    /// zswap (a memory stall if it is of the working set); returns the
    /// pages read from the device.
    fn fill_from_swap(
        &self,
        device: &SwapDevice,
        entry: SwapEntry,
        folio: &Folio,
    ) -> Result<u64, SwapInError> {
        let nr = folio.nr();
        let workingset = folio.lru().workingset();
        let _stall = workingset.then(|| self.tree.memstall(false)).flatten();
        if workingset {
            self.tree.clock().work(Work::RefaultRead(u64::from(nr)));
        }
        let mut bytes = folio.bytes();
        let mut from_device = 0;
        // The device's pages first (`pswpin`), then zswap's
        // (`zswap_load`, exclusive, counting `zswpin`): a device error
        // leaves zswap's copies for the retry.
        let mut in_zswap = Vec::new();
        for (i, page) in bytes.chunks_exact_mut(PAGE_BYTES).enumerate() {
            let e = entry
                .add(i as u64)
                .map_err(|_| SwapError::BadEntry(entry))?;
            if self.zswap.contains(e) {
                in_zswap.push(i);
            } else {
                device.read(e, page)?;
                from_device += 1;
            }
        }
        for i in in_zswap {
            let e = entry
                .add(i as u64)
                .map_err(|_| SwapError::BadEntry(entry))?;
            let page = &mut bytes[i * PAGE_BYTES..(i + 1) * PAGE_BYTES];
            let loaded = self.zswap.load_page(e, page);
            debug_assert!(loaded, "the slot's claim keeps its zswap page");
        }
        Ok(from_device)
    }

    /// Drops one mapping's reference to the folio at `entry`; the last one
    /// frees the slots (uncharging swap and unpinning the owner) and takes
    /// the folio out of the swap cache.
    /// `faulted`: the caller is a fault holding its claim on the slots (or
    /// sharing the cached folio); a plain free of a mapping is not.
    fn drop_reference(
        &self,
        device: &SwapDevice,
        entry: SwapEntry,
        nr: u32,
        faulted: bool,
    ) -> Result<(), SwapError> {
        let mut shard = self.cache.shard(entry);
        // Not the last reference: one cluster operation. A free slot is
        // refused before anything changes, and so is a mapping's last
        // reference freed while a fault through it reads without the
        // cache.
        let cache_owned = faulted || shard.contains_key(&entry);
        if device.put_unless_last(entry, nr, cache_owned)? {
            return Ok(());
        }
        // The last reference. Undo the accounting while it still holds the
        // slots: once free, the allocator may hand them to another folio
        // whose owner record a late clear would wipe (the kernel too
        // uncharges before `swap_range_free`). Faults on the entry wait on
        // the shard lock we hold; nobody else can take a reference.
        debug_assert!(matches!(device.count(entry), Ok(1)));
        let cached = shard.remove(&entry);
        debug_assert!(!shard.contains_key(&entry));
        self.uncharge_freed(entry, nr);
        if let Some(Ok(folio)) = cached.map(|slot| slot.wait()) {
            folio
                .memcg()
                .mod_stat(MemcgStat::Swapcached, -i64::from(nr));
        }
        device.put_last(entry, nr)
    }

    fn uncharge_freed(&self, entry: SwapEntry, nr: u32) {
        // The slots are about to be freed: their shadow goes, then clear the
        // owner record, uncharge its swap, unpin its id; zswap lets go of
        // their compressed pages (`zswap_invalidate`).
        self.cache.take_shadow(entry, nr);
        self.zswap.invalidate(entry, nr);
        self.tree
            .swap_uncharge(&self.swap_cgroup, entry, nr)
            .expect("a live entry has a swap_cgroup map");
        // Nothing of the slots is left to find: no zswap page, no owner
        // record (the slots' last reference holds them meanwhile).
        debug_assert!(
            (0..u64::from(nr)).all(|i| entry.add(i).is_ok_and(|e| !self.zswap.contains(e)))
        );
        debug_assert!(
            !self.swap_cgroup.is_enabled() || matches!(self.swap_cgroup.lookup(entry), Ok(0))
        );
    }

    /// Drops a mapping's reference to the folio at `entry` without faulting
    /// it in (the mapping is freed).
    pub fn swap_free(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        let device = self.swapfiles.device(entry)?;
        self.drop_reference(&device, entry, nr, false)
    }

    /// Adds a reference for a second mapping of the same swapped folio.
    pub fn swap_dup(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.swapfiles.dup(entry, nr)
    }

    /// Reads the `nr` pages at `entry` without faulting them in (for
    /// checking what a device holds).
    pub fn peek(&self, entry: SwapEntry, nr: u32) -> Result<Vec<u8>, SwapError> {
        let cached = self.cache.shard(entry).get(&entry).cloned();
        if let Some(Ok(folio)) = cached.map(|slot| slot.wait()) {
            return Ok(folio.bytes().to_vec());
        }
        let mut out = vec![0u8; nr as usize * PAGE_BYTES];
        for (i, page) in out.chunks_exact_mut(PAGE_BYTES).enumerate() {
            let e = entry
                .add(i as u64)
                .map_err(|_| SwapError::BadEntry(entry))?;
            if !self.zswap.peek_page(e, page) {
                self.swapfiles.read_page(e, page)?;
            }
        }
        Ok(out)
    }

    /// Swaps off device `ty`: stops allocation on it and calls `unuse` for
    /// each slot still in use, which must fault it back in (or free it),
    /// and walks again until no slot is in use (`try_to_unuse`: a slot
    /// allocated just as swapoff began may be mapped after the walk passed
    /// it). If `unuse` fails the device stays on. A walk that makes no
    /// progress [`SWAPOFF_STALLED_WALKS`] times in a row gives up with
    /// [`SwapError::StillInUse`] (the kernel would wait for a signal).
    pub fn swapoff(
        &self,
        ty: u32,
        mut unuse: impl FnMut(SwapEntry) -> Result<(), SwapInError>,
    ) -> Result<(), SwapoffError> {
        let device = self
            .swapfiles
            .get(ty)
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        let mut stalled = 0;
        let mut entries = self.swapfiles.begin_swapoff(ty)?;
        loop {
            let before = device.inuse_pages();
            for &entry in &entries {
                // A folio's later slots are freed with its first one.
                if device.count(entry)? == 0 {
                    continue;
                }
                if let Err(e) = unuse(entry) {
                    self.swapfiles.abort_swapoff(ty);
                    return Err(SwapoffError::Unuse(e));
                }
            }
            match self.swapfiles.finish_swapoff(ty) {
                Ok(_) => break,
                Err(SwapError::StillInUse { pages }) => {
                    stalled = if pages < before { 0 } else { stalled + 1 };
                    if stalled >= SWAPOFF_STALLED_WALKS {
                        self.swapfiles.abort_swapoff(ty);
                        return Err(SwapError::StillInUse { pages }.into());
                    }
                    std::thread::yield_now();
                    entries = self.swapfiles.used_entries(ty)?;
                }
                Err(e) => {
                    self.swapfiles.abort_swapoff(ty);
                    return Err(e.into());
                }
            }
        }
        // Swapped off: no slot in use, so nothing is charged or recorded.
        debug_assert_eq!(device.inuse_pages(), 0);
        self.tree
            .uncharge_kernel(swap_tables_pages(device.nr_pages()));
        self.swap_cgroup.swapoff(ty)?;
        Ok(())
    }
}

/// What a read of a swapped folio goes by, from the caller's
/// [`Claim`](crate::swapfile::Claim) on its slots.
#[derive(Debug, Clone, Copy)]
struct ReadClaim {
    /// Every slot holds a zero page: nothing to read.
    all_zero: bool,
    /// The folio goes into the swap cache (counted `swapcached`).
    via_cache: bool,
}

/// Where a swapped-out folio's pages went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Wholly zero: only marked in the zero map.
    Zero,
    /// Compressed into zswap.
    Zswap,
    /// Written to the device.
    Device,
}

/// Machine memory taken for a swap area's tables, given back on drop
/// unless the area came on.
struct TablesCharge {
    tree: CgroupTree,
    pages: u64,
}

impl TablesCharge {
    /// The area came on: its tables stay charged until swapoff. (Not
    /// `mem::forget`: that would leak the tree reference with it.)
    fn keep(mut self) {
        self.pages = 0;
    }
}

impl Drop for TablesCharge {
    fn drop(&mut self) {
        if self.pages > 0 {
            self.tree.uncharge_kernel(self.pages);
        }
    }
}

/// Walks without progress after which swapoff gives up.
pub const SWAPOFF_STALLED_WALKS: u32 = 1000;

/// Why a swapoff failed; the device stays on.
#[derive(Debug, thiserror::Error)]
pub enum SwapoffError {
    /// The device side (no such device, pages stuck in use).
    #[error(transparent)]
    Swap(#[from] SwapError),
    /// Faulting a page back in failed (its cgroup cannot take it).
    #[error("a page could not come back: {0}")]
    Unuse(SwapInError),
    /// The device's swap_cgroup map was already gone.
    #[error(transparent)]
    SwapCgroup(#[from] SwapCgroupError),
}

impl SwapoffError {
    /// The errno swapoff(2) returns.
    pub fn errno(&self) -> Errno {
        match self {
            SwapoffError::Swap(e) => e.errno(),
            SwapoffError::Unuse(e) => e.errno(),
            SwapoffError::SwapCgroup(e) => e.errno(),
        }
    }
}

/// Pages of kernel tables a swap area of `nr_pages` costs the machine:
/// `swap_map` (a byte per slot), the zero bitmap (a bit), the swap_cgroup
/// map (two bytes) and a 24-byte `swap_cluster_info` per cluster.
pub fn swap_tables_pages(nr_pages: u64) -> u64 {
    let bytes = u128::from(nr_pages) * 3
        + u128::from(nr_pages).div_ceil(8)
        + u128::from(nr_pages).div_ceil(SWAPFILE_CLUSTER as u64 as u128) * 24;
    u64::try_from(bytes.div_ceil(u128::from(PAGE_BYTES as u64))).unwrap_or(u64::MAX)
}

impl fmt::Debug for SwapSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapSystem")
            .field("devices", &self.swapfiles.iter().collect::<Vec<_>>())
            .field("cached", &self.cache_len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::{MemcgEvent, test_tree};
    use crate::swapfile::{Fault, FaultyBackend};

    fn system() -> (CgroupTree, SwapSystem, Arc<MemCgroup>) {
        let tree = test_tree(1, 64);
        let sys = SwapSystem::new(&tree, Design::Memcg);
        let cg = tree.mkdir("/a").unwrap().memcg().unwrap();
        (tree, sys, cg)
    }

    fn filled(tree: &CgroupTree, cg: &Arc<MemCgroup>, nr: u32, byte: u8) -> Arc<Folio> {
        let f = Folio::new(tree, cg, nr, Gfp::Kernel).unwrap();
        f.bytes().fill(byte);
        Arc::new(f)
    }

    #[test]
    fn a_swapped_out_folio_leaves_a_shadow_its_swap_in_refaults_on() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let folio = filled(&tree, &cg, 1, 0x11);
        let [piece] = sys.swap_out_or_split(folio, &cg).try_into().unwrap();
        let entry = piece.outcome.unwrap();
        assert_eq!(sys.nr_shadows(), 1);
        let back = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
        assert_eq!(sys.nr_shadows(), 0, "taken by the swap-in");
        // The distance is the folio itself (1 page): more than an empty
        // working set (no file pages, and `get_nr_swap_pages` counts only
        // for the anon lists, empty too), so it refaults inactive.
        assert_eq!(cg.stat(MemcgStat::WorkingsetRefaultAnon), 1);
        assert_eq!(cg.stat(MemcgStat::WorkingsetActivateAnon), 0);
        drop(back);
        // A plain swap-out (not reclaim) keeps no shadow; a freed slot
        // takes its shadow with it.
        let folio = filled(&tree, &cg, 1, 0x22);
        let entry = sys.swap_out(&folio).unwrap();
        assert_eq!(sys.nr_shadows(), 0);
        sys.swap_free(entry, 1).unwrap();
        let folio = filled(&tree, &cg, 4, 0x33);
        let [piece] = sys.swap_out_or_split(folio, &cg).try_into().unwrap();
        assert_eq!(sys.nr_shadows(), 4, "one per slot");
        sys.swap_free(piece.outcome.unwrap(), 4).unwrap();
        assert_eq!(sys.nr_shadows(), 0);
    }

    #[test]
    fn zswap_takes_compressible_folios_before_the_device() {
        let (tree, sys, cg) = system();
        tree.set_charge_stock(false);
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        sys.zswap().set_enabled(true);
        let text = Folio::new(&tree, &cg, 4, Gfp::Kernel).unwrap();
        for (i, b) in text.bytes().iter_mut().enumerate() {
            *b = b"let x = 1;\n"[i % 11];
        }
        let want = text.bytes().to_vec();
        let [piece] = sys
            .swap_out_or_split(Arc::new(text), &cg)
            .try_into()
            .unwrap();
        let entry = piece.outcome.unwrap();
        assert_eq!(cg.vm_event(VmEvent::Zswpout), 4);
        assert_eq!(
            cg.vm_event(VmEvent::Pswpout),
            0,
            "the device was not written"
        );
        assert_eq!(cg.stat(MemcgStat::Zswapped), 4);
        let zswap_bytes = cg.stat(MemcgStat::ZswapBytes) as u64;
        assert!(zswap_bytes > 0 && zswap_bytes < 4 * 4096);
        assert_eq!(sys.peek(entry, 4).unwrap(), want);
        let back = sys.do_swap_page(entry, 4, &cg, Gfp::Kernel).unwrap();
        assert_eq!(back.bytes().to_vec(), want);
        assert_eq!(cg.vm_event(VmEvent::Zswpin), 4);
        assert_eq!(cg.vm_event(VmEvent::Pswpin), 0);
        assert_eq!(cg.stat(MemcgStat::ZswapBytes), 0);
        assert_eq!(sys.zswap().debug_counts().stored_pages, 0);
        drop(back);
        // Incompressible, with writeback off: it may not go to the device.
        cg.set_zswap_writeback(false);
        let random = filled(&tree, &cg, 1, 0);
        let mut x = 7u32;
        for b in random.bytes().iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *b = (x >> 16) as u8;
        }
        let [piece] = sys.swap_out_or_split(random, &cg).try_into().unwrap();
        assert!(matches!(
            piece.outcome,
            Err((_, SwapOutError::WritebackDisabled))
        ));
        assert_eq!(sys.zswap().debug_counts().reject_compress_poor, 1);
        assert_eq!(sys.swapfiles().get(0).unwrap().inuse_pages(), 0);
        assert_eq!(cg.swap().usage(), 0);
    }

    /// Swaps `n` single-page folios out by reclaim of `cg`, each half
    /// noise, half zeros (as test_zswap.c's writeback test writes): about
    /// 2:1, so the shrinker finds pages worth writing back (it scales its
    /// count by the saving). Returns each entry with the bytes written.
    fn swap_out_half_noise(
        tree: &CgroupTree,
        sys: &SwapSystem,
        cg: &Arc<MemCgroup>,
        n: u32,
    ) -> Vec<(SwapEntry, Vec<u8>)> {
        (0..n)
            .map(|seed| {
                let folio = Folio::new(tree, cg, 1, Gfp::Kernel).unwrap();
                let mut x = seed.wrapping_mul(2_654_435_761) | 1;
                for b in folio.bytes()[..2048].iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    *b = x as u8;
                }
                let want = folio.bytes().to_vec();
                let [piece] = sys
                    .swap_out_or_split(Arc::new(folio), cg)
                    .try_into()
                    .unwrap();
                (piece.outcome.unwrap(), want)
            })
            .collect()
    }

    #[test]
    fn zswap_writes_back_through_its_shrinker_and_at_its_limit() {
        let (tree, sys, cg) = system();
        tree.set_charge_stock(false);
        let sys = Arc::new(sys);
        sys.install_zswap_writeback();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let z = sys.zswap();
        z.set_enabled(true);
        let entries = swap_out_half_noise(&tree, &sys, &cg, 8);
        assert_eq!(z.debug_counts().stored_pages, 8);
        // The shrinker: off by default; on, a first pass only takes the
        // referenced marks (second chance), the next writes back.
        assert_eq!(crate::shrinker::shrink_slab(&tree, 0, &cg, 0).freed, 0);
        z.set_shrinker_enabled(true);
        crate::shrinker::shrink_slab(&tree, 0, &cg, 0);
        crate::shrinker::shrink_slab(&tree, 0, &cg, 0);
        let written = z.debug_counts().written_back_pages;
        assert!(written > 0, "{:?}", z.debug_counts());
        assert_eq!(cg.vm_event(VmEvent::Zswpwb), written);
        assert_eq!(z.debug_counts().stored_pages, 8 - written);
        // Every page reads back, from zswap or from the device.
        for (entry, want) in &entries {
            assert_eq!(&sys.peek(*entry, 1).unwrap(), want);
        }
        // At `memory.zswap.max` a store first writes one entry back.
        cg.set_zswap_max(0);
        z.set_shrinker_enabled(false);
        let folio = Folio::new(&tree, &cg, 1, Gfp::Kernel).unwrap();
        folio.bytes().fill(b'x');
        let [piece] = sys
            .swap_out_or_split(Arc::new(folio), &cg)
            .try_into()
            .unwrap();
        assert!(piece.outcome.is_ok(), "written to the device instead");
        for (entry, want) in entries {
            let back = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
            assert_eq!(back.bytes().to_vec(), want);
        }
        assert_eq!(cg.stat(MemcgStat::ZswapBytes), 0);
        assert_eq!(z.debug_counts().stored_pages, 0);
    }

    #[test]
    fn a_full_zswap_pool_writes_back_down_to_its_accept_threshold() {
        let (tree, sys, cg) = system();
        tree.set_charge_stock(false);
        tree.set_machine_pages(4096);
        let sys = Arc::new(sys);
        sys.install_zswap_writeback();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let z = sys.zswap();
        z.set_enabled(true);
        // 1% of 16 MiB: 40 pages of pool; accept below 36.
        z.set_max_pool_percent(1);
        let entries = swap_out_half_noise(&tree, &sys, &cg, 160);
        let c = z.debug_counts();
        assert!(c.pool_limit_hit > 0, "{c:?}");
        assert!(c.written_back_pages > 0, "the worker wrote back: {c:?}");
        assert!(c.pool_total_size <= 40 * 4096, "{c:?}");
        for (entry, want) in entries {
            let back = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
            assert_eq!(back.bytes().to_vec(), want);
        }
        assert_eq!(z.debug_counts().stored_pages, 0);
    }

    /// Any store refused while the pool is full queues the shrink worker
    /// (`zswap_store`'s `!ret && zswap_pool_reached_full`), one refused
    /// at a cgroup's `memory.zswap.max` too, and the worker writes back
    /// until the pool is under its accept threshold.
    #[test]
    fn any_store_refused_while_the_pool_is_full_queues_the_worker() {
        let (tree, sys, cg) = system();
        tree.set_charge_stock(false);
        tree.set_machine_pages(4096);
        let sys = Arc::new(sys);
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let z = sys.zswap();
        z.set_enabled(true);
        // 1% of 16 MiB: 40 pages of pool; accept at 36 or below. With no
        // writeback installed the worker writes nothing and the pool stays
        // full.
        z.set_max_pool_percent(1);
        let entries = swap_out_half_noise(&tree, &sys, &cg, 120);
        let c = z.debug_counts();
        assert!(
            c.pool_limit_hit > 0 && c.pool_total_size > 36 * 4096,
            "{c:?}"
        );
        assert_eq!(c.written_back_pages, 0);
        sys.install_zswap_writeback();
        let b = tree.mkdir("/b").unwrap().memcg().unwrap();
        b.set_zswap_max(0);
        // Each run gives up after 16 failures, and a fresh entry's first
        // look only takes its referenced mark: a few refused stores later
        // the worker reaches entries it can write back.
        for _ in 0..8 {
            let folio = Folio::new(&tree, &b, 1, Gfp::Kernel).unwrap();
            folio.bytes().fill(b'x');
            let [piece] = sys
                .swap_out_or_split(Arc::new(folio), &b)
                .try_into()
                .unwrap();
            sys.swap_free(piece.outcome.unwrap(), 1).unwrap();
        }
        let c = z.debug_counts();
        assert!(c.written_back_pages > 0, "{c:?}");
        assert!(c.pool_total_size <= 36 * 4096, "{c:?}");
        for (entry, want) in entries {
            let back = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
            assert_eq!(back.bytes().to_vec(), want);
        }
        assert_eq!(z.debug_counts().stored_pages, 0);
    }

    #[test]
    fn out_and_back_in_with_exact_accounting() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let folio = filled(&tree, &cg, 16, 0xab);
        assert_eq!(cg.memory().usage(), 16);
        let entry = sys.swap_out(&folio).unwrap();
        drop(folio);
        assert_eq!(
            (cg.memory().usage(), cg.swap().usage(), cg.id_pins()),
            (0, 16, 17)
        );
        assert_eq!(cg.vm_event(VmEvent::Pswpout), 16);
        let back = sys.do_swap_page(entry, 16, &cg, Gfp::Kernel).unwrap();
        assert!(back.bytes().iter().all(|&b| b == 0xab));
        assert_eq!(
            (cg.memory().usage(), cg.swap().usage(), cg.id_pins()),
            (16, 0, 1)
        );
        assert_eq!(
            (
                cg.vm_event(VmEvent::Pswpin),
                cg.vm_event(VmEvent::Pgmajfault)
            ),
            (16, 1)
        );
        assert_eq!(sys.swapfiles().get(0).unwrap().inuse_pages(), 0);
        assert_eq!((sys.cache_len(), cg.stat(MemcgStat::Swapcached)), (0, 0));
        drop(back);
        assert_eq!(cg.memory().usage(), 0);
    }

    #[test]
    fn zero_bits_only_for_wholly_zero_folios() {
        let (tree, sys, cg) = system();
        let ram = Arc::new(RamBackend::new(4 << 20).unwrap());
        sys.swapon("ram0", Box::new(Arc::clone(&ram)), None)
            .unwrap();
        // A 16-page folio whose first page is zero: written whole (F14).
        let mixed = filled(&tree, &cg, 16, 5);
        mixed.bytes()[..PAGE_BYTES].fill(0);
        let entry = sys.swap_out(&mixed).unwrap();
        drop(mixed);
        assert_eq!(ram.resident_bytes(), 16 * PAGE_BYTES as u64);
        assert_eq!(
            (
                cg.vm_event(VmEvent::Pswpout),
                cg.vm_event(VmEvent::SwpoutZero)
            ),
            (16, 0)
        );
        let back = sys.swap_in(entry, 16, &cg).unwrap();
        assert!(back.bytes()[..PAGE_BYTES].iter().all(|&b| b == 0));
        assert!(back.bytes()[PAGE_BYTES..].iter().all(|&b| b == 5));
        assert_eq!(
            (
                cg.vm_event(VmEvent::Pswpin),
                cg.vm_event(VmEvent::SwpinZero)
            ),
            (16, 0)
        );
        // A wholly zero folio is only marked.
        let zero = filled(&tree, &cg, 16, 0);
        let entry = sys.swap_out(&zero).unwrap();
        assert_eq!(
            ram.resident_bytes(),
            16 * PAGE_BYTES as u64,
            "nothing written"
        );
        assert_eq!(cg.vm_event(VmEvent::SwpoutZero), 16);
        sys.swap_free(entry, 16).unwrap();
    }

    #[test]
    fn swapoff_walks_again_until_the_device_is_empty() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let entries: Vec<_> = (0..3)
            .map(|_| sys.swap_out(&filled(&tree, &cg, 1, 5)).unwrap())
            .collect();
        // The first walk misses the last slot (as one allocated while
        // swapoff began would be): swapoff walks again (F20).
        let mut back = Vec::new();
        let mut walks = 0;
        sys.swapoff(0, |e| {
            if e == entries[2] {
                walks += 1;
                if walks == 1 {
                    return Ok(());
                }
            }
            sys.swap_in(e, 1, &cg).map(|f| back.push(f))
        })
        .unwrap();
        assert_eq!((walks, back.len()), (2, 3));
        assert!(sys.swapfiles().get(0).is_none());
    }

    #[test]
    fn ram_disks_and_swap_tables_take_machine_memory() {
        let (tree, sys, cg) = system();
        tree.set_machine_pages(1024);
        // 4 MiB of swap: the tables of 1024 slots fit in a page.
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        assert_eq!(tree.machine_used_pages(), swap_tables_pages(1024));
        assert_eq!(swap_tables_pages(1024), 1);
        // A RAM disk's written pages are the machine's too.
        let entry = sys.swap_out(&filled(&tree, &cg, 16, 9)).unwrap();
        assert_eq!(tree.machine_used_pages(), 1 + 16);
        // Charges past the machine fail, without memory cgroup events.
        let err = Folio::new(&tree, &cg, 1024, Gfp::Kernel).unwrap_err();
        assert!(matches!(
            err,
            ChargeError::MachineOutOfMemory { total_pages: 1024 }
        ));
        assert_eq!(cg.event(MemcgEvent::Max), 0);
        // A swap area whose tables do not fit is refused with ENOMEM, before
        // anything is built: no RAM disk table, no file.
        let err = sys.swapon_ram("ram1", 1 << 40, None).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert!(sys.swapfiles().by_name("ram1").is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swapfile");
        let err = sys.swapon_file(&path, 1 << 40, None).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert!(!path.exists(), "no file created");
        assert_eq!(tree.machine_used_pages(), 1 + 16, "nothing kept");
        sys.swap_free(entry, 16).unwrap();
        sys.swapoff(0, |_| Ok(())).unwrap();
        assert_eq!(
            tree.machine_used_pages(),
            0,
            "tables and disk pages given back"
        );
    }

    #[test]
    fn split_moves_the_charge() {
        let (tree, _sys, cg) = system();
        let big = filled(&tree, &cg, 16, 4);
        assert_eq!(cg.memory().usage(), 16);
        let pieces = Folio::split(big).unwrap();
        assert_eq!((pieces.len(), cg.memory().usage()), (16, 16));
        assert!(
            pieces
                .iter()
                .all(|p| p.nr() == 1 && p.bytes().iter().all(|&b| b == 4))
        );
        drop(pieces);
        assert_eq!(cg.memory().usage(), 0);
        let shared = filled(&tree, &cg, 16, 4);
        let other = Arc::clone(&shared);
        assert!(Folio::split(shared).is_err());
        drop(other);
    }

    #[test]
    fn shared_entries_are_read_once_and_freed_by_the_last_reference() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let entry = sys.swap_out(&filled(&tree, &cg, 1, 7)).unwrap();
        sys.swap_dup(entry, 1).unwrap();
        let a = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
        assert_eq!(
            cg.swap().usage(),
            1,
            "the second mapping still references the slot"
        );
        assert_eq!(sys.cache_len(), 1);
        let b = sys.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one read, shared");
        assert_eq!(
            (cg.swap().usage(), cg.memory().usage(), sys.cache_len()),
            (0, 1, 0)
        );
        assert_eq!(cg.vm_event(VmEvent::Pgmajfault), 1);
    }

    #[test]
    fn a_swap_system_lets_go_of_its_tree() {
        // Swap tables once leaked their tree reference on swapon
        // (`mem::forget`), and with it the machine's every frame.
        let (tree, sys, _cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        sys.swapon_ram("ram1", 4 << 20, None).unwrap();
        drop(sys);
        assert_eq!(tree.handles(), 1, "only ours is left");
    }

    #[test]
    fn a_freed_entry_is_refused_without_a_trace() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let entry = sys.swap_out(&filled(&tree, &cg, 1, 7)).unwrap();
        sys.swap_free(entry, 1).unwrap();
        for _ in 0..2 {
            assert!(matches!(
                sys.swap_free(entry, 1),
                Err(SwapError::BadEntry(_))
            ));
            assert!(matches!(
                sys.do_swap_page(entry, 1, &cg, Gfp::Kernel),
                Err(SwapInError::Swap(SwapError::BadEntry(_)))
            ));
        }
        sys.swapfiles().validate_idle();
        assert_eq!(sys.swapfiles().count(entry).unwrap(), 0);
        assert_eq!((cg.swap().usage(), sys.cache_len()), (0, 0));
    }

    #[test]
    fn write_errors_roll_everything_back() {
        let (tree, sys, cg) = system();
        let faulty = Arc::new(FaultyBackend::new(RamBackend::new(4 << 20).unwrap()));
        sys.swapon("faulty", Box::new(Arc::clone(&faulty)), None)
            .unwrap();
        let folio = filled(&tree, &cg, 4, 3);
        faulty.inject(Fault::Write, 1);
        assert!(matches!(sys.swap_out(&folio), Err(SwapOutError::Io(_))));
        assert_eq!(
            (cg.memory().usage(), cg.swap().usage(), cg.id_pins()),
            (4, 0, 1),
            "nothing lost"
        );
        assert_eq!(sys.swapfiles().get(0).unwrap().inuse_pages(), 0);
        assert!(
            folio.bytes().iter().all(|&b| b == 3),
            "still resident and intact"
        );
        assert!(sys.swap_out(&folio).is_ok(), "a retry works");
    }

    #[test]
    fn read_errors_leave_the_slot_for_a_retry() {
        let (tree, sys, cg) = system();
        let faulty = Arc::new(FaultyBackend::new(RamBackend::new(4 << 20).unwrap()));
        sys.swapon("faulty", Box::new(Arc::clone(&faulty)), None)
            .unwrap();
        let entry = sys.swap_out(&filled(&tree, &cg, 1, 9)).unwrap();
        faulty.inject(Fault::Read, 1);
        assert!(matches!(
            sys.swap_in(entry, 1, &cg),
            Err(SwapInError::Swap(SwapError::Io { .. }))
        ));
        assert_eq!(
            (cg.memory().usage(), cg.swap().usage()),
            (0, 1),
            "charge undone, slot kept"
        );
        let back = sys.swap_in(entry, 1, &cg).unwrap();
        assert!(back.bytes().iter().all(|&b| b == 9));
    }

    #[test]
    fn a_full_device_fails_cleanly_with_a_fail_event() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("tiny", 3 * 4096, None).unwrap();
        let kept: Vec<_> = (0..2)
            .map(|_| sys.swap_out(&filled(&tree, &cg, 1, 1)).unwrap())
            .collect();
        let folio = filled(&tree, &cg, 1, 1);
        assert!(matches!(sys.swap_out(&folio), Err(SwapOutError::Full)));
        assert_eq!(cg.event(MemcgEvent::SwapFail), 1);
        assert!(matches!(
            sys.swap_out(&filled(&tree, &cg, 16, 1)),
            Err(SwapOutError::NoContiguous(16))
        ));
        assert_eq!(
            cg.event(MemcgEvent::SwapFail),
            2,
            "a large folio without contiguous slots fails before its split (F9)"
        );
        for e in kept {
            sys.swap_free(e, 1).unwrap();
        }
        assert_eq!((cg.swap().usage(), cg.id_pins()), (0, 1));
    }

    #[test]
    fn swapoff_brings_pages_back_or_stays_on() {
        let (tree, sys, cg) = system();
        sys.swapon_ram("ram0", 4 << 20, None).unwrap();
        let entries: Vec<_> = (0..3)
            .map(|_| sys.swap_out(&filled(&tree, &cg, 1, 5)).unwrap())
            .collect();
        // The owner cannot take its pages back: swapoff fails, device stays.
        cg.memory().set_max(1).unwrap();
        let mut back = Vec::new();
        let err = sys
            .swapoff(0, |e| sys.swap_in(e, 1, &cg).map(|f| back.push(f)))
            .unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert!(sys.swapfiles().get(0).is_some(), "still on");
        assert_eq!(back.len(), 1);
        cg.memory()
            .set_max(crate::page_counter::PAGE_COUNTER_MAX)
            .unwrap();
        sys.swapoff(0, |e| sys.swap_in(e, 1, &cg).map(|f| back.push(f)))
            .unwrap();
        assert!(sys.swapfiles().get(0).is_none());
        assert_eq!(
            (back.len(), cg.swap().usage(), cg.memory().usage()),
            (3, 0, 3)
        );
        let _ = entries;
    }
}
