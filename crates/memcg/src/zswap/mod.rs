//! zswap: a compressed cache in front of the swap devices (mm/zswap.c,
//! v6.14): store, load and invalidate, the pool and its limits, the
//! entries' list_lru, the shrinker and writeback.
//!
//! # What it does
//!
//! When reclaim swaps a folio out, [`Zswap::store`] compresses each page
//! (LZ4 with `lz4_flex` by default, or zstd, [`Compressor`]) and keeps it
//! in a size-class pool (`zpool.rs`) indexed by the page's swap slot; the
//! device is not written. A page that does not compress to a page or less
//! is refused (`reject_compress_poor`) and goes to the device.
//!
//! Deviation: v6.14's default compressor (`CONFIG_ZSWAP_COMPRESSOR_DEFAULT`)
//! is `lzo`, the crypto API's `lzo1x_1_compress`. Its Rust ports (`rust-lzo`,
//! `lzo1x`) are GPL-2.0, which this MIT/Apache-2.0 library cannot link; the
//! MIT ports (`lzokay`, `lzokay-native`) compress like `lzo1x_999`, a
//! slower, denser level than the kernel's, so they would give LZO's name
//! without its sizes. LZ4, a fast LZ77 codec of the same family as
//! `lzo1x_1`, stands in: `zswap`/`zswapped` bytes, `memory.zswap.current`
//! and the pool's size differ from a kernel's by the two codecs' ratios.
//!
//! The store
//! is all or nothing for a folio. A swap-in takes a stored page back and
//! drops it ([`Zswap::load_page`]: exclusive loads); a freed slot drops its
//! page ([`Zswap::invalidate`]). Once zswap has ever been enabled
//! ([`Zswap::never_enabled`] false), swap-ins bring single pages back, as
//! v6.14's cannot load a large folio from zswap, unless the machine option
//! [`Zswap::large_folio_loads`] (beyond v6.14) is on.
//!
//! # Accounting and limits
//!
//! A stored page's compressed bytes are charged to the memory cgroup of
//! the folio through its object cgroup (`obj_cgroup_charge_zswap`:
//! reclaim's own charge, forced past the limits and raising `max` where
//! it passes one, counting `zswap` bytes and a `zswapped` page; the charge
//! follows the object cgroup to the parent at offline). A store is refused
//! when the cgroup or an ancestor is at its `memory.zswap.max`
//! (`obj_cgroup_may_zswap`) and no entry of that cgroup could first be
//! written back (`shrink_memcg`), and while the pool is full: at
//! `max_pool_percent` of the machine it refuses stores (`pool_limit_hit`)
//! until it is back under `accept_threshold_percent` of that
//! (`zswap_check_limits`). Every store refused while the pool is full
//! queues the shrink worker, which writes entries back round-robin over
//! the cgroups until it is; the kernel runs it on a workqueue, here the
//! task that queued it runs it once its store is done (so seeded runs stay
//! deterministic). zswap is off until enabled, as the kernel's default
//! (`CONFIG_ZSWAP_DEFAULT_ON=n`).
//!
//! Units: `zswapped` ([`MemcgStat::Zswapped`]) counts pages stored,
//! `zswap` ([`MemcgStat::ZswapBytes`]) their compressed bytes, and
//! `memory.zswap.max` ([`MemCgroup::zswap_max`]) is kept in pages and
//! compared with those bytes in whole pages (`obj_cgroup_may_zswap`).
//!
//! ```
//! use memcg::folio::Folio;
//! use memcg::list_lru::LruDesign;
//! use memcg::memcontrol::{CgroupTree, Gfp, MemcgStat, VmEvent};
//! use memcg::mm_types::PAGE_BYTES;
//! use memcg::swapops::SwapEntry;
//! use memcg::zswap::Zswap;
//!
//! let tree = CgroupTree::default();
//! let a = tree.mkdir("/a")?.memcg().unwrap();
//! let zswap = Zswap::new(&tree, LruDesign::Split);
//! zswap.set_enabled(true); // off by default, as in the kernel
//!
//! // A page of a's, swapped out to slot 7 of swap type 0.
//! let text: Vec<u8> = b"zswap keeps it compressed. ".iter().copied().cycle().take(PAGE_BYTES).collect();
//! let folio = Folio::new(&tree, &a, 1, Gfp::Kernel)?;
//! folio.bytes().copy_from_slice(&text);
//! let slot = SwapEntry::new(0, 7)?;
//! zswap.store(&folio, slot)?;
//! drop(folio); // swapped out: the page itself is freed
//! assert_eq!(a.stat(MemcgStat::Zswapped), 1); // pages
//! let compressed = a.stat(MemcgStat::ZswapBytes); // bytes, charged to a
//! assert!(0 < compressed && compressed < PAGE_BYTES as i64);
//! assert_eq!(a.vm_event(VmEvent::Zswpout), 1);
//!
//! // Swap-in: the page comes back and leaves zswap.
//! let mut page = vec![0; PAGE_BYTES];
//! assert!(zswap.load_page(slot, &mut page));
//! assert_eq!(page, text);
//! assert_eq!((a.stat(MemcgStat::Zswapped), a.stat(MemcgStat::ZswapBytes)), (0, 0));
//! assert!(!zswap.load_page(slot, &mut page), "loads are exclusive");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Writeback
//!
//! Every entry sits on its cgroup's list of a memcg-aware list_lru
//! (reparented with the cgroup). The zswap shrinker (only with
//! `shrinker_enabled`, and not where `memory.zswap.writeback` is 0 up the
//! hierarchy) walks a cgroup's list: an entry still marked referenced
//! (every entry is, when stored) loses the mark and gets another round;
//! the others are written back to the device by the installed
//! [`ZswapWriteback`] (the swap system: through the swap cache) and freed,
//! counting `zswpwb`. A store over `memory.zswap.max` first writes one
//! entry of its cgroup back (`shrink_memcg`). The shrinker's count spares
//! as many entries as the cgroup read folios back from a swap device
//! since its last count (`nr_disk_swapins`).
//!
//! # Locking
//!
//! The entries are sharded maps by swap cluster, each shard a mutex held
//! to insert, take or drop entries; the pool has a lock per size class.
//! Lock order: a list_lru list, then the item table or an entry shard
//! (the shrinker's walk); no shard or item lock is held while a list is
//! taken. The writeback runs with the list unlocked.
//! A slot's entry changes only under its folio's ownership (swap-out
//! holds the folio, swap-in the slot's claim, invalidate the last
//! reference), as the kernel's xarray entries do under the folio lock.

mod compress;
mod zpool;

use rustc_hash::FxHashMap;

use crate::folio::Folio;
use crate::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign, Walked};
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgStat, ObjCgroup, VmEvent};
use crate::mm_types::{PAGE_BYTES, PAGE_SIZE, SWAPFILE_CLUSTER};
use crate::page_counter::PAGE_COUNTER_MAX;
use crate::shrinker::{
    ShrinkControl, ShrinkCount, ShrinkScan, Shrinker, ShrinkerHandle, register_shrinker,
};
use crate::swapops::SwapEntry;
use crate::sync::{
    Arc, AtomicBool, AtomicU8, AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering, lock,
};
use compress::Codecs;
pub use compress::Compressor;
use zpool::Pool;
pub use zpool::{Handle, PoolError};

/// Entry shards.
const SHARDS: usize = 64;
/// Entries the list_lru can name at once (few under loom, which models
/// every slot of the list_lru's tables in each execution).
const MAX_ENTRIES: u32 = if cfg!(loom) { 64 } else { 1 << 22 };

/// Why a store was refused (the page goes to the swap device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreReject {
    /// zswap is off (`enabled` N).
    #[error("zswap is disabled")]
    Disabled,
    /// The cgroup or an ancestor is at its `memory.zswap.max`.
    #[error("at memory.zswap.max")]
    CgroupLimit,
    /// The pool is full (`pool_limit_hit`).
    #[error("the zswap pool is full")]
    PoolLimit,
    /// A page did not compress to a page or less (`reject_compress_poor`).
    #[error("a page did not compress")]
    CompressPoor,
    /// The pool had no memory for it (`reject_alloc_fail`).
    #[error("no memory in the pool")]
    AllocFail,
}

/// zswap's tunables (`/sys/module/zswap/parameters/*`).
#[derive(Debug)]
struct Params {
    enabled: AtomicBool,
    /// `enabled` was set at some point (`zswap_ever_enabled`, never
    /// cleared).
    ever_enabled: AtomicBool,
    /// A machine option beyond v6.14: swap-ins may bring a large folio
    /// back whole, loading its pages from zswap one by one.
    large_folio_loads: AtomicBool,
    /// 0: LZ4, 1: zstd.
    compressor: AtomicU8,
    max_pool_percent: AtomicU32,
    accept_threshold_percent: AtomicU32,
    shrinker_enabled: AtomicBool,
}

/// zswap's counters (`/sys/kernel/debug/zswap/*`).
#[derive(Debug, Default)]
pub struct DebugCounts {
    /// Pages stored now.
    pub stored_pages: u64,
    /// Bytes of the pool's pages (`pool_total_size`).
    pub pool_total_size: u64,
    /// Pages written back to the swap device.
    pub written_back_pages: u64,
    /// Stores refused: a page did not compress.
    pub reject_compress_poor: u64,
    /// Stores refused: the pool had no memory.
    pub reject_alloc_fail: u64,
    /// Stores refused: writeback to make room failed.
    pub reject_reclaim_fail: u64,
    /// Times the pool was found full.
    pub pool_limit_hit: u64,
}

#[derive(Debug, Default)]
struct Counters {
    stored_pages: AtomicU64,
    written_back_pages: AtomicU64,
    reject_compress_poor: AtomicU64,
    reject_alloc_fail: AtomicU64,
    reject_reclaim_fail: AtomicU64,
    pool_limit_hit: AtomicU64,
}

/// One stored page (`struct zswap_entry`).
struct Entry {
    handle: Handle,
    length: u32,
    objcg: Arc<ObjCgroup>,
    /// Its name on the list_lru.
    item: ItemId,
    /// Second chance: set at store, cleared by the shrinker's first look.
    referenced: bool,
    /// What compressed it (entries keep their pool's compressor when the
    /// parameter changes).
    compressor: Compressor,
    /// Stored as is, not compressed (an incompressible page, 7.3).
    raw: bool,
}

/// Why writing an entry back failed (`zswap_writeback_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WritebackError {
    /// A folio of the slot is in the swap cache, or a fault is reading it
    /// (`-EEXIST`: the shrinker stops, it is into the warm part).
    #[error("the slot's folio is in the swap cache")]
    Exists,
    /// The entry went meanwhile (loaded or invalidated).
    #[error("the entry is gone")]
    Gone,
    /// No writeback path installed, or the device write failed.
    #[error("the swap device could not take it")]
    Io,
}

/// Why `shrink_memcg` wrote nothing back.
enum ShrinkFail {
    /// No entry to try (none on its list, writeback off, or dying):
    /// `-ENOENT`, not a failure for the shrink worker.
    NoCandidate,
    /// Entries were there but none could be written back (`-EAGAIN`).
    Failed,
}

/// Where zswap writes entries back: the swap devices, through the swap
/// cache (`SwapSystem::zswap_writeback`, installed by its owner).
pub trait ZswapWriteback: Send + Sync {
    /// Writes the page stored at `slot` to its device and drops the entry
    /// ([`Zswap::take_for_writeback`]).
    fn writeback(&self, slot: SwapEntry) -> Result<(), WritebackError>;
}

/// List_lru item ids, and the slot each names.
#[derive(Default)]
struct Items {
    slots: Vec<Option<SwapEntry>>,
    free: Vec<ItemId>,
}

/// The compressed cache of one machine (its swap devices share it).
pub struct Zswap {
    tree: CgroupTree,
    params: Params,
    pool: Pool,
    /// Reusable compressor state (`compress.rs`).
    codecs: Codecs,
    entries: Box<[Mutex<FxHashMap<SwapEntry, Entry>>]>,
    /// Every entry, on its cgroup's list (`zswap_list_lru`).
    lru: ListLru,
    items: Mutex<Items>,
    writeback: Mutex<Option<Arc<dyn ZswapWriteback>>>,
    shrinker: Mutex<Option<ShrinkerHandle>>,
    /// Where the shrink worker stopped (`zswap_next_shrink`): a serial.
    next_shrink: Mutex<Option<u64>>,
    /// `zswap_pool_reached_full`: refusing until under the threshold.
    pool_full: AtomicBool,
    /// The shrink worker is queued (`queue_work(shrink_wq)`; queuing it
    /// again while queued does nothing).
    shrink_queued: AtomicBool,
    /// The shrink worker is running (one run at a time, as one work item).
    shrink_running: AtomicBool,
    counts: Counters,
}

impl std::fmt::Debug for Zswap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zswap")
            .field("counts", &self.debug_counts())
            .finish_non_exhaustive()
    }
}

impl Zswap {
    /// zswap over `tree`'s machine, off (`enabled` N), with the kernel's
    /// default tunables, its entries on list_lrus of `design`; its
    /// shrinker is registered with the tree.
    pub fn new(tree: &CgroupTree, design: LruDesign) -> Arc<Self> {
        let lru = ListLru::new(
            tree,
            ListLruConfig {
                memcg_aware: true,
                max_items: MAX_ENTRIES,
                design,
            },
        )
        .expect("a shrinker id for zswap");
        let id = lru.shrinker_id();
        let zswap = Arc::new(Self {
            tree: tree.clone(),
            params: Params {
                enabled: AtomicBool::new(false),
                ever_enabled: AtomicBool::new(false),
                large_folio_loads: AtomicBool::new(false),
                compressor: AtomicU8::new(0),
                max_pool_percent: AtomicU32::new(20),
                accept_threshold_percent: AtomicU32::new(90),
                shrinker_enabled: AtomicBool::new(false),
            },
            pool: Pool::new(tree),
            codecs: Codecs::default(),
            entries: (0..SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            pool_full: AtomicBool::new(false),
            shrink_queued: AtomicBool::new(false),
            shrink_running: AtomicBool::new(false),
            counts: Counters::default(),
            lru,
            items: Mutex::new(Items::default()),
            writeback: Mutex::new(None),
            shrinker: Mutex::new(None),
            next_shrink: Mutex::new(None),
        });
        let shrinker = Arc::new(ZswapShrinker(Arc::downgrade(&zswap)));
        *lock(&zswap.shrinker) = Some(register_shrinker(tree, shrinker, id));
        zswap
    }

    /// Installs where entries are written back to.
    pub(crate) fn set_writeback(&self, writeback: Arc<dyn ZswapWriteback>) {
        *lock(&self.writeback) = Some(writeback);
    }

    /// Whether stores are taken (`enabled`).
    pub fn enabled(&self) -> bool {
        // Relaxed: a tunable; a store racing a change may go either way.
        self.params.enabled.load(Ordering::Relaxed)
    }

    /// Turns zswap on or off; entries stored stay until loaded or freed.
    pub fn set_enabled(&self, on: bool) {
        // Relaxed: see `enabled`.
        self.params.enabled.store(on, Ordering::Relaxed);
        if on {
            self.params.ever_enabled.store(true, Ordering::Relaxed);
        }
    }

    /// Whether zswap has never been on (`zswap_never_enabled`): until it
    /// has, no page can be in zswap and a swap-in may bring a large folio
    /// back whole; from then on v6.14 swaps in single pages only, as
    /// `zswap_load` cannot fill a large folio.
    pub fn never_enabled(&self) -> bool {
        // Relaxed: a tunable (see `enabled`).
        !self.params.ever_enabled.load(Ordering::Relaxed)
    }

    /// Whether swap-ins may bring large folios back whole although zswap
    /// was enabled, loading their pages from zswap one by one: a machine
    /// option beyond v6.14 (off by default; mainline's zswap could not load
    /// large folios).
    pub fn large_folio_loads(&self) -> bool {
        // Relaxed: a tunable (see `enabled`).
        self.params.large_folio_loads.load(Ordering::Relaxed)
    }

    /// Sets [`Zswap::large_folio_loads`].
    pub fn set_large_folio_loads(&self, on: bool) {
        // Relaxed: a tunable (see `enabled`).
        self.params.large_folio_loads.store(on, Ordering::Relaxed);
    }

    /// The compressor's name (`compressor`).
    pub fn compressor(&self) -> &'static str {
        self.current_compressor().name()
    }

    fn current_compressor(&self) -> Compressor {
        // Relaxed: a tunable; a store racing a change may use either.
        match self.params.compressor.load(Ordering::Relaxed) {
            1 => Compressor::Zstd,
            _ => Compressor::Lz4,
        }
    }

    /// Chooses the compressor for new entries (`compressor`); entries
    /// stored keep theirs.
    pub fn set_compressor(&self, compressor: Compressor) {
        let value = match compressor {
            Compressor::Lz4 => 0,
            Compressor::Zstd => 1,
        };
        self.params.compressor.store(value, Ordering::Relaxed);
    }

    /// `max_pool_percent`.
    pub fn max_pool_percent(&self) -> u32 {
        self.params.max_pool_percent.load(Ordering::Relaxed)
    }

    /// Sets `max_pool_percent`.
    pub fn set_max_pool_percent(&self, percent: u32) {
        self.params
            .max_pool_percent
            .store(percent, Ordering::Relaxed);
    }

    /// `accept_threshold_percent`.
    pub fn accept_threshold_percent(&self) -> u32 {
        self.params.accept_threshold_percent.load(Ordering::Relaxed)
    }

    /// Sets `accept_threshold_percent`.
    pub fn set_accept_threshold_percent(&self, percent: u32) {
        self.params
            .accept_threshold_percent
            .store(percent, Ordering::Relaxed);
    }

    /// `shrinker_enabled`: whether the zswap shrinker writes entries back
    /// under memory pressure (off by default, as the kernel's Kconfig).
    pub fn shrinker_enabled(&self) -> bool {
        self.params.shrinker_enabled.load(Ordering::Relaxed)
    }

    /// Sets `shrinker_enabled`.
    pub fn set_shrinker_enabled(&self, on: bool) {
        self.params.shrinker_enabled.store(on, Ordering::Relaxed);
    }

    /// The debugfs counters.
    pub fn debug_counts(&self) -> DebugCounts {
        let c = &self.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DebugCounts {
            stored_pages: get(&c.stored_pages),
            pool_total_size: self.pool.nr_pages() * PAGE_SIZE,
            written_back_pages: get(&c.written_back_pages),
            reject_compress_poor: get(&c.reject_compress_poor),
            reject_alloc_fail: get(&c.reject_alloc_fail),
            reject_reclaim_fail: get(&c.reject_reclaim_fail),
            pool_limit_hit: get(&c.pool_limit_hit),
        }
    }

    fn shard(&self, entry: SwapEntry) -> MutexGuard<'_, FxHashMap<SwapEntry, Entry>> {
        let cluster = entry.val() / SWAPFILE_CLUSTER as u64;
        let h = cluster.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        lock(&self.entries[h as usize % SHARDS])
    }

    /// `obj_cgroup_may_zswap`: no level below the root at its
    /// `memory.zswap.max` (0 refuses outright).
    fn may_zswap(memcg: &MemCgroup) -> bool {
        memcg
            .self_and_ancestors()
            .filter(|m| !m.is_root())
            .all(|m| {
                let max = m.zswap_max();
                if max == PAGE_COUNTER_MAX {
                    return true;
                }
                let stored =
                    u64::try_from(m.stat(crate::memcontrol::MemcgStat::ZswapBytes)).unwrap_or(0);
                max > 0 && stored / PAGE_SIZE < max
            })
    }

    /// `zswap_check_limits`: whether the pool is full, with the
    /// hysteresis of the accept threshold.
    fn pool_is_full(&self) -> bool {
        let max_pages = self.tree.machine_pages() * u64::from(self.max_pool_percent()) / 100;
        let accept_pages = max_pages * u64::from(self.accept_threshold_percent()) / 100;
        let pages = self.pool.nr_pages();
        if pages >= max_pages {
            self.counts.pool_limit_hit.fetch_add(1, Ordering::Relaxed);
            // Relaxed: a hint; a store racing the change may go either way.
            self.pool_full.store(true, Ordering::Relaxed);
        } else if self.pool_full.load(Ordering::Relaxed) && pages <= accept_pages {
            self.pool_full.store(false, Ordering::Relaxed);
        }
        self.pool_full.load(Ordering::Relaxed)
    }

    /// `zswap_store`: compresses and keeps every page of `folio`, swapped
    /// out to the slots from `entry`, or none of them. Counts `zswpout`.
    /// A refused store (zswap being on) queues the shrink worker while the
    /// pool is full, and drops any stale pages of those slots, so that
    /// what goes to the device is what a swap-in reads. A queued worker
    /// then runs (`Zswap::run_shrink_work`).
    pub fn store(&self, folio: &Folio, entry: SwapEntry) -> Result<(), StoreReject> {
        let stored = self.try_store(folio, entry);
        if let Err(reject) = stored {
            // Relaxed: a hint, as `zswap_pool_reached_full` is.
            if reject != StoreReject::Disabled && self.pool_full.load(Ordering::Relaxed) {
                self.shrink_queued.store(true, Ordering::Relaxed);
            }
            self.invalidate(entry, folio.nr());
        }
        self.run_shrink_work();
        stored
    }

    /// Runs the shrink worker if it is queued (the kernel's `shrink_wq`).
    /// The kernel runs it on a workqueue, concurrently with the task that
    /// queued it; here that task runs it once its store is done, as a
    /// worker with a CPU to spare would, which keeps seeded runs and
    /// `memcg sh` deterministic. One run at a time: a task that finds it
    /// running leaves its queued work to that run, which looks again
    /// before it ends.
    fn run_shrink_work(&self) {
        // Acquire pairs with the Release below: a run sees what the run
        // before it left (the round-robin cursor is under its own lock).
        while self.shrink_queued.swap(false, Ordering::Acquire) {
            if self
                .shrink_running
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                // Relaxed: the running worker's loop looks again.
                self.shrink_queued.store(true, Ordering::Relaxed);
                return;
            }
            self.shrink_worker();
            // Release: pairs with the Acquire of the next run's claim.
            self.shrink_running.store(false, Ordering::Release);
        }
    }

    fn try_store(&self, folio: &Folio, entry: SwapEntry) -> Result<(), StoreReject> {
        if !self.enabled() {
            return Err(StoreReject::Disabled);
        }
        let memcg = folio.memcg();
        if !Self::may_zswap(&memcg) && self.shrink_memcg(&memcg).is_err() {
            // Over `memory.zswap.max`, and no entry of the cgroup could be
            // written back to make room.
            return Err(StoreReject::CgroupLimit);
        }
        if self.pool_is_full() {
            return Err(StoreReject::PoolLimit);
        }
        let objcg = memcg.obj_cgroup();
        let bytes = folio.bytes();
        let mut stored = Vec::with_capacity(folio.nr() as usize);
        for (i, page) in bytes.chunks_exact(PAGE_BYTES).enumerate() {
            let slot = entry.add(i as u64).expect("a folio's slots are in range");
            match self.store_page(page, &objcg, slot) {
                Ok(e) => stored.push(e),
                Err(reject) => {
                    for e in stored {
                        self.free_entry(e);
                    }
                    return Err(reject);
                }
            }
            debug_assert_eq!(stored.len(), i + 1);
        }
        drop(bytes);
        let nr = u64::from(folio.nr());
        for (i, e) in stored.into_iter().enumerate() {
            let slot = entry.add(i as u64).expect("a folio's slots are in range");
            let item = e.item;
            let old = self.shard(slot).insert(slot, e);
            if let Some(old) = old {
                // A stale entry of a reused slot (`xa_store` returning one).
                self.counts.stored_pages.fetch_sub(1, Ordering::Relaxed);
                self.free_entry(old);
            }
            let _ = self.lru.add(item, 0, &memcg);
        }
        self.counts.stored_pages.fetch_add(nr, Ordering::Relaxed);
        memcg.count_vm_event(VmEvent::Zswpout, nr);
        Ok(())
    }

    /// Compresses one page into a new entry for `slot` (not yet in the
    /// map nor on the list, so no walker can see it).
    fn store_page(
        &self,
        page: &[u8],
        objcg: &Arc<ObjCgroup>,
        slot: SwapEntry,
    ) -> Result<Entry, StoreReject> {
        let compressor = self.current_compressor();
        // 7.3 stores a page that does not compress below a page as is,
        // while its cgroup may write back (`zswap_compress`).
        let keep_raw = self.tree.behaviour().zswap_store_incompressible
            && objcg.memcg().zswap_writeback_enabled();
        let (handle, length, raw) = self
            .codecs
            .compress(compressor, page, |compressed| {
                match compressed.filter(|c| !keep_raw || c.len() < PAGE_BYTES) {
                    Some(c) => Ok((self.pool.alloc(c)?, c.len() as u32, false)),
                    None if keep_raw => Ok((self.pool.alloc(page)?, PAGE_BYTES as u32, true)),
                    None => Err(PoolError::TooBig(PAGE_BYTES + 1)),
                }
            })
            .map_err(|e| match e {
                PoolError::TooBig(_) => {
                    self.counts
                        .reject_compress_poor
                        .fetch_add(1, Ordering::Relaxed);
                    StoreReject::CompressPoor
                }
                PoolError::NoMemory => {
                    self.counts
                        .reject_alloc_fail
                        .fetch_add(1, Ordering::Relaxed);
                    StoreReject::AllocFail
                }
            })?;
        let Some(item) = self.alloc_item(slot) else {
            self.pool.free(handle);
            self.counts
                .reject_alloc_fail
                .fetch_add(1, Ordering::Relaxed);
            return Err(StoreReject::AllocFail);
        };
        self.tree.charge_zswap(objcg, u64::from(length));
        Ok(Entry {
            handle,
            length,
            objcg: Arc::clone(objcg),
            item,
            referenced: true,
            compressor,
            raw,
        })
    }

    /// A list item for the entry of `slot`.
    fn alloc_item(&self, slot: SwapEntry) -> Option<ItemId> {
        let mut items = lock(&self.items);
        if let Some(item) = items.free.pop() {
            debug_assert!(items.slots[item as usize].is_none());
            items.slots[item as usize] = Some(slot);
            return Some(item);
        }
        let item = ItemId::try_from(items.slots.len())
            .ok()
            .filter(|&i| i < MAX_ENTRIES)?;
        items.slots.push(Some(slot));
        Some(item)
    }

    /// Frees an entry taken out of the map (`zswap_entry_free`): off its
    /// list, its object and charge released.
    fn free_entry(&self, e: Entry) {
        let _ = self.lru.del(e.item, 0, &e.objcg.memcg());
        {
            let mut items = lock(&self.items);
            items.slots[e.item as usize] = None;
            items.free.push(e.item);
        }
        self.pool.free(e.handle);
        self.tree.uncharge_zswap(&e.objcg, u64::from(e.length));
    }

    /// Takes the entry of `slot` for writeback: decompresses it into `page`
    /// and frees it, counting `zswpwb` on its cgroup and a written-back
    /// page; false if there is none. The caller holds the slot (swap cache
    /// bit) and writes `page` to the device.
    pub fn take_for_writeback(&self, slot: SwapEntry, page: &mut [u8]) -> bool {
        self.take(slot, page, |e| {
            self.counts
                .written_back_pages
                .fetch_add(1, Ordering::Relaxed);
            e.objcg.memcg().count_vm_event(VmEvent::Zswpwb, 1);
        })
    }

    /// Takes the entry of `slot` out (exclusive), decompresses it into
    /// `page`, lets `count` count what became of it, and frees it; false
    /// if there is none.
    fn take(&self, slot: SwapEntry, page: &mut [u8], count: impl FnOnce(&Entry)) -> bool {
        let Some(e) = self.shard(slot).remove(&slot) else {
            return false;
        };
        let decompressed = self.read_entry(&e, page);
        assert!(decompressed, "a stored page decompresses to a page");
        self.counts.stored_pages.fetch_sub(1, Ordering::Relaxed);
        count(&e);
        self.free_entry(e);
        true
    }

    /// Puts back an entry a failed device write had taken (the page is
    /// stored again as it was).
    pub(crate) fn restore_after_failed_writeback(
        &self,
        slot: SwapEntry,
        page: &[u8],
        memcg: &Arc<MemCgroup>,
    ) {
        let objcg = memcg.obj_cgroup();
        if let Ok(e) = self.store_page(page, &objcg, slot) {
            let item = e.item;
            self.shard(slot).insert(slot, e);
            self.counts.stored_pages.fetch_add(1, Ordering::Relaxed);
            self.counts
                .written_back_pages
                .fetch_sub(1, Ordering::Relaxed);
            let _ = self.lru.add(item, 0, memcg);
        }
    }

    /// `shrink_memcg`: writes back one entry of `memcg`'s own list (a
    /// store over `memory.zswap.max` makes room so). Fails if writeback is
    /// off up its hierarchy, it is dying (its list went to its parent), or
    /// nothing could be written back.
    fn shrink_memcg(&self, memcg: &MemCgroup) -> Result<(), ShrinkFail> {
        if !memcg.zswap_writeback_enabled() || memcg.is_dying() {
            return Err(ShrinkFail::NoCandidate);
        }
        if self.lru.count_one(0, memcg).unwrap_or(0) == 0 {
            return Err(ShrinkFail::NoCandidate);
        }
        match self.shrink_list(memcg, 1) {
            0 => Err(ShrinkFail::Failed),
            _ => Ok(()),
        }
    }

    /// `shrink_worker`: the pool hit its limit; write entries back,
    /// one per memory cgroup in turn (round-robin over online ones, from
    /// where the last run stopped), until the pool is back under the
    /// accept threshold, giving up after `MAX_RECLAIM_RETRIES` failures: a
    /// cgroup whose writeback failed, or a whole walk that found no cgroup
    /// with an entry to try. Each success frees an entry, so the run ends.
    fn shrink_worker(&self) {
        const MAX_RECLAIM_RETRIES: u32 = 16;
        let max_pages = self.tree.machine_pages() * u64::from(self.max_pool_percent()) / 100;
        let threshold = max_pages * u64::from(self.accept_threshold_percent()) / 100;
        let memcgs: Vec<Arc<MemCgroup>> = crate::vmscan::all_memcgs(&self.tree)
            .into_iter()
            .filter(|m| !m.is_dying())
            .collect();
        if memcgs.is_empty() {
            return;
        }
        let mut cursor = lock(&self.next_shrink);
        let (mut failures, mut attempts) = (0, 0);
        let mut i = memcgs
            .iter()
            .position(|m| Some(m.serial()) == *cursor)
            .map_or(0, |p| p + 1);
        while self.pool.nr_pages() > threshold {
            if i >= memcgs.len() {
                // A whole walk: with no candidate found in it, a failure.
                i = 0;
                if attempts == 0 {
                    failures += 1;
                    if failures == MAX_RECLAIM_RETRIES {
                        break;
                    }
                }
                attempts = 0;
                continue;
            }
            let memcg = &memcgs[i];
            *cursor = Some(memcg.serial());
            i += 1;
            match self.shrink_memcg(memcg) {
                Err(ShrinkFail::NoCandidate) => {}
                Ok(()) => attempts += 1,
                Err(ShrinkFail::Failed) => {
                    attempts += 1;
                    failures += 1;
                    if failures == MAX_RECLAIM_RETRIES {
                        break;
                    }
                }
            }
        }
    }

    /// `list_lru_walk_one` with `shrink_memcg_cb` over `memcg`'s list:
    /// a referenced entry loses its mark and rotates (second chance);
    /// another is written back. Returns the entries written back.
    fn shrink_list(&self, memcg: &MemCgroup, nr_to_walk: u64) -> u64 {
        let Some(writeback) = lock(&self.writeback).clone() else {
            return 0;
        };
        let mut written = 0;
        let mut budget = usize::try_from(nr_to_walk).unwrap_or(usize::MAX);
        let _ = self.lru.walk_one(0, memcg, &mut budget, |item, guard| {
            let Some(slot) = lock(&self.items).slots[item as usize] else {
                return Walked::Skip(guard);
            };
            {
                let mut shard = self.shard(slot);
                let Some(e) = shard.get_mut(&slot).filter(|e| e.item == item) else {
                    return Walked::Skip(guard);
                };
                if std::mem::take(&mut e.referenced) {
                    return Walked::Rotate(guard);
                }
            }
            // Unlocked for the write; a written-back entry leaves the list
            // as it is freed.
            drop(guard);
            match writeback.writeback(slot) {
                Ok(()) => {
                    written += 1;
                    Walked::Retry
                }
                Err(WritebackError::Exists) => {
                    self.counts
                        .reject_reclaim_fail
                        .fetch_add(1, Ordering::Relaxed);
                    Walked::Stop
                }
                Err(_) => {
                    self.counts
                        .reject_reclaim_fail
                        .fetch_add(1, Ordering::Relaxed);
                    Walked::Retry
                }
            }
        });
        written
    }

    /// `zswap_load` for one page: if `slot` holds a stored page, takes it
    /// (exclusive), decompresses it into `page`, counts `zswpin` on the
    /// entry's owner (its object cgroup's memory cgroup: the cgroup that
    /// stored it, or the ancestor it was reparented to, whoever faults the
    /// page in) and returns true.
    pub fn load_page(&self, slot: SwapEntry, page: &mut [u8]) -> bool {
        !self.is_empty()
            && self.take(slot, page, |e| {
                e.objcg.memcg().count_vm_event(VmEvent::Zswpin, 1);
            })
    }

    /// A folio charged to `memcg` was read back from a swap device, not
    /// from zswap (`zswap_folio_swapin`): the zswap shrinker spares that
    /// many more of the cgroup's entries at its next count.
    pub(crate) fn folio_swapin(memcg: &MemCgroup) {
        // Relaxed: a heuristic count, consumed by the shrinker's update.
        memcg
            .lruvec()
            .zswap_nr_disk_swapins
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Whether anything is stored at all: while nothing is, the per-slot
    /// paths need not look (no lock on every swap-in and slot free while
    /// zswap is unused). An entry being stored is not counted yet, but
    /// only its slot's owner, who is storing it, could look for it.
    fn is_empty(&self) -> bool {
        // Relaxed: see above; the slot's owner orders its own store.
        self.counts.stored_pages.load(Ordering::Relaxed) == 0
    }

    /// Whether `slot` holds a stored page.
    pub fn contains(&self, slot: SwapEntry) -> bool {
        !self.is_empty() && self.shard(slot).contains_key(&slot)
    }

    /// Copies the stored page of `slot` into `page` without taking it (for
    /// checks of what a slot holds); false if it has none.
    pub fn peek_page(&self, slot: SwapEntry, page: &mut [u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        let shard = self.shard(slot);
        let Some(e) = shard.get(&slot) else {
            return false;
        };
        self.read_entry(e, page)
    }

    /// Decompresses (or, stored as is, copies) entry `e` into `page`.
    fn read_entry(&self, e: &Entry, page: &mut [u8]) -> bool {
        self.pool.read(e.handle, e.length as usize, |stored| {
            if e.raw {
                page.copy_from_slice(stored);
                return true;
            }
            self.codecs.decompress(e.compressor, stored, page)
        })
    }

    /// `zswap_invalidate`: the `nr` slots from `entry` are being freed;
    /// their stored pages go.
    pub fn invalidate(&self, entry: SwapEntry, nr: u32) {
        if self.is_empty() {
            return;
        }
        let mut shard = self.shard(entry);
        if shard.is_empty() {
            return;
        }
        let gone: Vec<Entry> = (0..u64::from(nr))
            .filter_map(|i| entry.add(i).ok())
            .filter_map(|slot| shard.remove(&slot))
            .collect();
        drop(shard);
        self.counts
            .stored_pages
            .fetch_sub(gone.len() as u64, Ordering::Relaxed);
        for e in gone {
            self.free_entry(e);
        }
    }
}

/// zswap's shrinker (`zswap_shrinker_count`, `zswap_shrinker_scan`):
/// memcg-aware, only when `shrinker_enabled` and writeback is on for the
/// cgroup. It counts the list less the folios the cgroup read back from a
/// swap device since the last count (disk swap-in protection: had the
/// list been that much shorter, those reads would have come from zswap),
/// scaled by the compression ratio (better compression, fewer pages worth
/// writing back). It never reports an empty list as `SHRINK_EMPTY`, so the
/// cgroup's shrinker bit stays set.
struct ZswapShrinker(std::sync::Weak<Zswap>);

impl Shrinker for ZswapShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
        let Some(z) = self.0.upgrade() else {
            return ShrinkCount::Objects(0);
        };
        if !z.shrinker_enabled() || !sc.memcg.zswap_writeback_enabled() {
            return ShrinkCount::Objects(0);
        }
        let stat = |s| u64::try_from(sc.memcg.stat(s)).unwrap_or(0);
        let nr_backing = stat(MemcgStat::ZswapBytes) / PAGE_SIZE;
        let nr_stored = stat(MemcgStat::Zswapped);
        if nr_stored == 0 {
            return ShrinkCount::Objects(0);
        }
        let nr_freeable = z.lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) as u64;
        if nr_freeable == 0 {
            return ShrinkCount::Objects(0);
        }
        // Consume up to `nr_freeable` of the disk swap-ins; the rest stay
        // for the next count. Relaxed: a heuristic count that orders no
        // other memory (the update is one read-modify-write, as the
        // kernel's cmpxchg loop).
        let swapins = &sc.memcg.lruvec().zswap_nr_disk_swapins;
        let mut protected = 0;
        let _ = swapins.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
            protected = cur.min(nr_freeable);
            Some(cur - protected)
        });
        let nr_freeable = nr_freeable - protected;
        ShrinkCount::Objects(mul_frac(nr_freeable, nr_backing, nr_stored))
    }

    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
        let Some(z) = self.0.upgrade() else {
            return ShrinkScan::Stop;
        };
        if !z.shrinker_enabled() || !sc.memcg.zswap_writeback_enabled() {
            sc.nr_scanned = 0;
            return ShrinkScan::Stop;
        }
        ShrinkScan::Freed(z.shrink_list(&sc.memcg, sc.nr_to_scan))
    }
}

/// `mult_frac`: `x * numer / denom` without overflowing the product.
fn mul_frac(x: u64, numer: u64, denom: u64) -> u64 {
    let (quot, rem) = (x / denom, x % denom);
    quot * numer + rem * numer / denom
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::Gfp;
    use crate::memcontrol::test_tree;

    fn text_folio(tree: &CgroupTree, memcg: &Arc<MemCgroup>, seed: u8) -> Folio {
        let folio = Folio::new(tree, memcg, 1, Gfp::Kernel).unwrap();
        for (i, b) in folio.bytes().iter_mut().enumerate() {
            *b = b"fn main() { let x = 42; }\n"[i % 26].wrapping_add(seed % 3);
        }
        folio
    }

    #[test]
    fn a_stored_page_is_charged_loaded_once_and_freed() {
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        let folio = text_folio(&t, &a, 1);
        let entry = SwapEntry::new(0, 8).unwrap();
        assert_eq!(z.store(&folio, entry), Err(StoreReject::Disabled));
        z.set_enabled(true);
        z.store(&folio, entry).unwrap();
        let bytes = a.stat(MemcgStat::ZswapBytes);
        assert!(bytes > 0 && bytes < 4096, "{bytes}");
        assert_eq!(a.stat(MemcgStat::Zswapped), 1);
        assert_eq!(a.vm_event(VmEvent::Zswpout), 1);
        assert_eq!(z.debug_counts().stored_pages, 1);
        let mut page = vec![0; PAGE_BYTES];
        assert!(z.load_page(entry, &mut page));
        assert_eq!(&page[..], &folio.bytes()[..]);
        assert!(!z.load_page(entry, &mut page), "exclusive");
        assert_eq!(a.stat(MemcgStat::ZswapBytes), 0);
        assert_eq!(a.vm_event(VmEvent::Zswpin), 1);
        drop(folio);
        assert_eq!(a.memory().usage(), 0);
        assert_eq!(z.debug_counts().pool_total_size, 0);
    }

    #[test]
    fn entries_keep_their_compressor_when_it_changes() {
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        let lz4 = text_folio(&t, &a, 1);
        z.store(&lz4, SwapEntry::new(0, 1).unwrap()).unwrap();
        z.set_compressor(Compressor::Zstd);
        assert_eq!(z.compressor(), "zstd");
        let zstd = text_folio(&t, &a, 2);
        z.store(&zstd, SwapEntry::new(0, 2).unwrap()).unwrap();
        let mut page = vec![0; PAGE_BYTES];
        for (slot, folio) in [(1, &lz4), (2, &zstd)] {
            assert!(z.load_page(SwapEntry::new(0, slot).unwrap(), &mut page));
            assert_eq!(&page[..], &folio.bytes()[..], "slot {slot}");
        }
        assert_eq!(Compressor::from_name("lzo"), None);
    }

    /// A page of xorshift bytes: no compressor shrinks it.
    fn random_folio(t: &CgroupTree, memcg: &Arc<MemCgroup>) -> Folio {
        let folio = Folio::new(t, memcg, 1, Gfp::Kernel).unwrap();
        let mut x = 0x9e37_79b9_u32;
        for b in folio.bytes().iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        folio
    }

    /// 7.3 stores an incompressible page as is (counted in
    /// `zswap_incomp`) while its cgroup may write back, and refuses it
    /// when it may not; 6.14 refuses it.
    #[test]
    fn incompressible_pages_are_kept_as_is_on_7_3() {
        use crate::memcontrol::TreeConfig;
        use crate::profile::KernelVersion;
        let t = CgroupTree::new(TreeConfig {
            behaviour: KernelVersion::V7_3.behaviour(),
            ..TreeConfig::default()
        });
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        let random = random_folio(&t, &a);
        let entry = SwapEntry::new(0, 1).unwrap();
        z.store(&random, entry).unwrap();
        assert_eq!(a.stat(MemcgStat::ZswapIncomp), 1);
        assert_eq!(a.stat(MemcgStat::ZswapBytes), PAGE_SIZE as i64);
        let mut page = vec![0; PAGE_BYTES];
        assert!(z.load_page(entry, &mut page));
        assert_eq!(&page[..], &random.bytes()[..]);
        assert_eq!(a.stat(MemcgStat::ZswapIncomp), 0);
        a.set_zswap_writeback(false);
        assert_eq!(z.store(&random, entry), Err(StoreReject::CompressPoor));
        assert_eq!(a.stat(MemcgStat::ZswapIncomp), 0);
    }

    #[test]
    fn incompressible_pages_and_limits_refuse() {
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        let random = random_folio(&t, &a);
        let entry = SwapEntry::new(0, 1).unwrap();
        assert_eq!(z.store(&random, entry), Err(StoreReject::CompressPoor));
        assert_eq!(z.debug_counts().reject_compress_poor, 1);
        a.set_zswap_max(0);
        let text = text_folio(&t, &a, 0);
        assert_eq!(z.store(&text, entry), Err(StoreReject::CgroupLimit));
        a.set_zswap_max(PAGE_COUNTER_MAX);
        z.set_max_pool_percent(0);
        assert_eq!(z.store(&text, entry), Err(StoreReject::PoolLimit));
        assert_eq!(z.debug_counts().pool_limit_hit, 1);
        z.set_max_pool_percent(20);
        z.store(&text, entry).unwrap();
        z.invalidate(entry, 1);
        assert_eq!(z.debug_counts().stored_pages, 0);
        assert_eq!(a.stat(MemcgStat::ZswapBytes), 0);
    }

    fn count(z: &Arc<Zswap>, memcg: &Arc<MemCgroup>) -> ShrinkCount {
        let shrinker = ZswapShrinker(Arc::downgrade(z));
        shrinker.count_objects(&ShrinkControl {
            nid: 0,
            memcg: Arc::clone(memcg),
            nr_to_scan: 0,
            nr_scanned: 0,
            reclaimed_pages: 0,
        })
    }

    /// `zswap_shrinker_count` subtracts the cgroup's folios read back
    /// from a swap device since the last count, and consumes them.
    #[test]
    fn the_shrinker_spares_as_many_entries_as_came_back_from_disk() {
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        z.set_shrinker_enabled(true);
        // Half noise, half zeros: about 2K each compressed, so the ten
        // take about five pages.
        for slot in 1..=10 {
            let folio = Folio::new(&t, &a, 1, Gfp::Kernel).unwrap();
            let mut x = 0x9e37_79b9_u32 + slot as u32;
            for b in &mut folio.bytes()[..PAGE_BYTES / 2] {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            z.store(&folio, SwapEntry::new(0, slot).unwrap()).unwrap();
        }
        let nr_backing = a.stat(MemcgStat::ZswapBytes) as u64 / PAGE_SIZE;
        assert!(nr_backing >= 4, "{nr_backing}");
        let scaled = |n: u64| ShrinkCount::Objects(mul_frac(n, nr_backing, 10));
        for _ in 0..4 {
            Zswap::folio_swapin(&a);
        }
        assert_eq!(count(&z, &a), scaled(10 - 4));
        assert_eq!(count(&z, &a), scaled(10), "consumed");
        for _ in 0..25 {
            Zswap::folio_swapin(&a);
        }
        assert_eq!(count(&z, &a), ShrinkCount::Objects(0));
        assert_eq!(count(&z, &a), ShrinkCount::Objects(0), "15 left");
        assert_eq!(count(&z, &a), scaled(10 - 5));
        z.invalidate(SwapEntry::new(0, 1).unwrap(), 10);
    }

    /// An empty list counts 0, never `SHRINK_EMPTY`: the cgroup keeps its
    /// shrinker bit.
    #[test]
    fn an_empty_list_keeps_the_shrinker_bit() {
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/b").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        z.set_shrinker_enabled(true);
        let id = z.lru.shrinker_id().unwrap();
        for (memcg, slot) in [(&a, 1), (&b, 2)] {
            let folio = text_folio(&t, memcg, 0);
            z.store(&folio, SwapEntry::new(0, slot).unwrap()).unwrap();
        }
        let mut page = vec![0; PAGE_BYTES];
        assert!(z.load_page(SwapEntry::new(0, 1).unwrap(), &mut page));
        assert_eq!(count(&z, &a), ShrinkCount::Objects(0));
        crate::shrinker::shrink_slab(&t, 0, &a, 0);
        assert!(a.shrinker_bit(0, id));
        z.invalidate(SwapEntry::new(0, 2).unwrap(), 1);
    }

    /// A store's charge is reclaim's own (`PF_MEMALLOC`): forced past
    /// `memory.max`, it raises `max` there, as `try_charge_memcg`'s
    /// `force:` path does; under the limit it raises nothing.
    #[test]
    fn a_forced_zswap_charge_over_the_limit_raises_max() {
        use crate::memcontrol::MemcgEvent;
        let t = test_tree(1, 8);
        t.set_charge_stock(false);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let z = Zswap::new(&t, LruDesign::Split);
        z.set_enabled(true);
        let (s1, s2) = (SwapEntry::new(0, 1).unwrap(), SwapEntry::new(0, 2).unwrap());
        let folio = text_folio(&t, &a, 1);
        z.store(&folio, s1).unwrap();
        assert_eq!(a.memory().usage(), 2, "the folio and the entry's page");
        assert_eq!(a.event(MemcgEvent::Max), 0);
        z.invalidate(s1, 1);
        a.memory().set_max(1).unwrap();
        z.store(&folio, s2).unwrap();
        assert_eq!(a.memory().usage(), 2, "forced past memory.max");
        assert_eq!(a.event(MemcgEvent::Max), 1);
        drop(folio);
        z.invalidate(s2, 1);
        assert_eq!(a.memory().usage(), 0);
    }
}
