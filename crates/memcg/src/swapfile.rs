//! Swap devices, slot allocation in clusters, and per-slot reference
//! counts (mm/swapfile.c, v6.14).
//!
//! A [`SwapDevice`] is backed by a real file (positioned reads and writes at
//! `offset × 4096`) or by RAM (pages allocated on first write, like the
//! seed's `brd` ramdisk), optionally wrapped by [`FaultyBackend`] to inject
//! I/O errors. Slot 0 is reserved (the swap header's page), so a device of
//! N pages has N − 1 usable slots.
//!
//! # Clusters and allocation
//!
//! Slots are grouped in clusters of [`SWAPFILE_CLUSTER`] (512). Each cluster
//! has its own lock around its slots' state: the reference count of every
//! slot (the kernel's `swap_map`), the zero bitmap, and the count of slots
//! in use. Clusters sit on one of three kinds of list (free, nonfull for a
//! given folio order, full), moved under the device's list lock. A folio of
//! 2^order pages gets a naturally aligned run inside a cluster dedicated to
//! that order; when no nonfull cluster of its order has room and no free
//! cluster is left, allocation fails and the caller splits the folio into
//! 4 KiB pages, as the kernel does. Order-0 allocations may also take
//! slots from other orders' clusters.
//!
//! # Reference counts
//!
//! A slot's count is the number of page-table references to it (the first
//! comes with allocation; `dup` adds one for a shared mapping); the slot is
//! free when the count reaches zero and the swap cache does not hold it.
//!
//! # Zero pages
//!
//! A folio that is zero as a whole is not written: its slots' bits in the
//! zero bitmap are set, and reading them back fills zeros. A folio with any
//! data is written whole, zero pages included (as the kernel's
//! `swap_writepage`).
//!
//! # Locking
//!
//! Device list lock, then a cluster lock; never the other way round. A
//! change that moves a cluster to another list holds both; one that leaves
//! it where it is (nearly every allocation, free, dup and cache change)
//! holds only the cluster lock, which is enough because each cluster knows
//! its list (`Cluster::listed`). So [`SwapDevice::validate`] may run while
//! others work. Each thread allocates first from its own current cluster
//! per order (`next`, the kernel's per-CPU cluster), so two threads do not
//! share a cluster's lock and counts; `inuse_pages` is a per-thread split
//! counter. Reads and writes of page contents take no device lock: a
//! slot's contents are only touched by whoever holds a reference to it.
//! The swap table's `swapon_mutex` serialises swapon, swapoff and priority
//! renumbering; allocation takes no table lock (the round-robin rotor is a
//! relaxed atomic hint).

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::PathBuf;

mod backend;

pub(crate) use backend::check_size;
pub use backend::{Fault, FaultyBackend, FileBackend, MachinePages, RamBackend, SwapBackend};

use crate::errno::Errno;
use crate::idr::{ChunkedTable, try_boxed_slice};
use crate::mm_types::{PAGE_SIZE, SWAPFILE_CLUSTER};
use crate::percpu::{NR_CPU_SLOTS, PerCpuCounter, this_cpu};
use crate::swapops::{MAX_SWAPFILES, SwapEntry};
use crate::sync::SlotGuard;
use crate::sync::{
    Arc, ArcSlot, AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Mutex, MutexGuard, Ordering, lock,
};

/// The largest count a slot can reach (`SWAP_MAP_MAX`; the kernel chains
/// continuation pages beyond it, we refuse).
pub const SWAP_MAP_MAX: u8 = 0x3e;

/// The count of a slot that is never handed out (`SWAP_MAP_BAD`): the
/// header page, and the tail of a last cluster past the end of the area.
pub const SWAP_MAP_BAD: u8 = 0x3f;

/// The highest priority `swapon -p` accepts (`SWAP_FLAG_PRIO_MASK`).
pub const MAX_SWAP_PRIO: i32 = 0x7fff;

/// Folio orders the allocator distinguishes (up to a whole cluster).
const NR_ORDERS: usize = SWAPFILE_CLUSTER.trailing_zeros() as usize + 1;

/// No current cluster (see `SwapDevice::next`).
const NO_CLUSTER: u32 = u32::MAX;

/// Why a swap operation failed. Nothing changed when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// The path does not exist or names a directory.
    #[error("{path}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// An existing file is smaller than the size asked for.
    #[error("{path}: file is {actual} bytes, smaller than the {wanted} bytes asked for")]
    FileTooSmall {
        /// The path.
        path: PathBuf,
        /// Its size.
        actual: u64,
        /// The size asked for.
        wanted: u64,
    },
    /// A size that is not a positive multiple of the page size, or too
    /// small to hold a header page and one slot.
    #[error("swap size {0} bytes: it must be a multiple of 4K, and at least 8K")]
    BadSize(u64),
    /// The same backing path is already swapped on.
    #[error("{0}: already in use as swap")]
    AlreadyOn(String),
    /// Every swap type is in use.
    #[error("too many swap devices (MAX_SWAPFILES is {MAX_SWAPFILES})")]
    TooManyDevices,
    /// No device with that type or name.
    #[error("{0}: not a swap device")]
    NoSuchDevice(String),
    /// A slot's reference count would pass [`SWAP_MAP_MAX`].
    #[error("swap entry {0:?} has too many references")]
    TooManyRefs(SwapEntry),
    /// The entry names no slot in use.
    #[error("swap entry {0:?} is not in use")]
    BadEntry(SwapEntry),
    /// The device returned an I/O error.
    #[error("swap I/O error at {entry:?}: {source}")]
    Io {
        /// The slot.
        entry: SwapEntry,
        /// What the device said.
        source: io::Error,
    },
    /// A priority outside `0..=MAX_SWAP_PRIO` (`SWAP_FLAG_PRIO_MASK`).
    #[error("swap priority {0} is not in 0..={MAX_SWAP_PRIO}")]
    BadPriority(i32),
    /// swapoff found slots still in use after faulting every page in.
    #[error("{pages} swap pages still in use")]
    StillInUse {
        /// Slots in use.
        pages: u64,
    },
    /// The device's tables do not fit in (simulated or real) memory
    /// (the kernel's `vzalloc` of `swap_map` failing).
    #[error(
        "no memory for the tables of a {pages}-page swap area (about 3 bytes per page: a larger machine, or a smaller area)"
    )]
    NoMemory {
        /// Pages of the area.
        pages: u64,
    },
}

impl SwapError {
    /// The errno swapon(2)/swapoff(2) or a fault would give.
    pub fn errno(&self) -> Errno {
        match self {
            SwapError::Path { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => Errno::ENOENT,
                io::ErrorKind::PermissionDenied => Errno::EACCES,
                _ => Errno::EINVAL,
            },
            SwapError::FileTooSmall { .. }
            | SwapError::BadSize(_)
            | SwapError::NoSuchDevice(_)
            | SwapError::BadPriority(_) => Errno::EINVAL,
            SwapError::StillInUse { .. } => Errno::EBUSY,
            SwapError::BadEntry(_) => Errno::EINVAL,
            SwapError::AlreadyOn(_) => Errno::EBUSY,
            SwapError::TooManyDevices => Errno::EPERM,
            SwapError::TooManyRefs(_) => Errno::ENOMEM,
            SwapError::Io { .. } => Errno::EIO,
            SwapError::NoMemory { .. } => Errno::ENOMEM,
        }
    }
}

/// Bits of a per-cluster bitmap (rounded up: loom's clusters have 4 slots).
type ClusterBits = [u64; SWAPFILE_CLUSTER.div_ceil(64)];

fn bit(bits: &ClusterBits, i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

fn set_bit(bits: &mut ClusterBits, i: usize, on: bool) {
    if on {
        bits[i / 64] |= 1 << (i % 64);
    } else {
        bits[i / 64] &= !(1 << (i % 64));
    }
}

/// One cluster's slot state (`swap_cluster_info` plus its part of
/// `swap_map`).
struct Cluster {
    /// Reference count per slot; 0 = free.
    counts: [u8; SWAPFILE_CLUSTER],
    /// Slots whose page is all zeros (not written).
    zero: ClusterBits,
    /// Slots held by the swap cache (`SWAP_HAS_CACHE`).
    cache: ClusterBits,
    /// Slots in use (count or cache).
    used: u16,
    /// The folio order this cluster serves while nonfull.
    order: u8,
    /// Where the next search for a free run starts (just past the last
    /// run taken), so filling a cluster is linear, not quadratic.
    scan_from: u16,
    /// The list it is on (a copy of `Lists::on`, written under both locks),
    /// so an operation holding only this lock knows whether it would move
    /// the cluster to another list.
    listed: OnList,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            counts: [0; SWAPFILE_CLUSTER],
            zero: [0; SWAPFILE_CLUSTER.div_ceil(64)],
            cache: [0; SWAPFILE_CLUSTER.div_ceil(64)],
            used: 0,
            order: 0,
            scan_from: 0,
            listed: OnList::Free,
        }
    }
}

impl Cluster {
    fn slot_free(&self, i: usize) -> bool {
        self.counts[i] == 0 && !bit(&self.cache, i)
    }

    /// Whether the cluster's own state agrees with itself: `used` counts
    /// exactly the slots with a count or the cache bit, every count is a
    /// reference count or [`SWAP_MAP_BAD`], and free or bad slots carry
    /// no zero or cache bit. Checked before and after every change in
    /// debug builds (O(cluster)), and by [`SwapDevice::validate`].
    fn is_consistent(&self) -> bool {
        let used = (0..SWAPFILE_CLUSTER)
            .filter(|&i| !self.slot_free(i))
            .count();
        let slots_ok = (0..SWAPFILE_CLUSTER).all(|i| match self.counts[i] {
            0 => !bit(&self.zero, i) || bit(&self.cache, i),
            SWAP_MAP_BAD => !bit(&self.zero, i) && !bit(&self.cache, i),
            count => count <= SWAP_MAP_MAX,
        });
        used == usize::from(self.used) && slots_ok
    }

    /// The list a cluster with this many slots in use belongs on, given
    /// the list it is on: free when empty, full when full, else nonfull.
    fn fits_list(&self, on: OnList) -> bool {
        match on {
            OnList::Free => self.used == 0,
            OnList::Full => usize::from(self.used) == SWAPFILE_CLUSTER,
            OnList::Nonfull(_) => self.used > 0 && usize::from(self.used) < SWAPFILE_CLUSTER,
        }
    }

    /// Returns slot `i`, which its last user just gave up, to the free pool.
    fn release(&mut self, i: usize) {
        set_bit(&mut self.zero, i, false);
        self.used -= 1;
    }

    /// Whether freeing `freed` slots moves the cluster to another list
    /// (emptied, or no longer full); only then is the list lock needed.
    fn free_moves_list(&self, freed: u32) -> bool {
        if freed == 0 {
            return false;
        }
        let left = u32::from(self.used) - freed;
        left == 0 || self.listed != OnList::Nonfull(self.order)
    }

    /// The list a cluster belongs on after slots were freed.
    fn list_after_free(&self) -> OnList {
        if self.used == 0 {
            OnList::Free
        } else {
            OnList::Nonfull(self.order)
        }
    }

    /// A naturally aligned free run of `1 << order` slots, searched from
    /// `scan_from` round the cluster.
    fn find_run(&self, order: usize) -> Option<usize> {
        let n = 1 << order;
        let from = usize::from(self.scan_from) / n * n;
        (from..SWAPFILE_CLUSTER)
            .step_by(n)
            .chain((0..from).step_by(n))
            .find(|&start| (start..start + n).all(|i| self.slot_free(i)))
    }

    /// Takes the run of `1 << order` slots at `start` (free, from
    /// `find_run`): each gets a count of 1 and, if `cached`, the swap cache
    /// bit.
    fn take_run(&mut self, start: usize, order: usize, cached: bool) {
        let n = 1usize << order;
        for i in start..start + n {
            // Freed slots lost their zero bit (`release`).
            debug_assert!(self.slot_free(i) && !bit(&self.zero, i));
            self.counts[i] = 1;
            set_bit(&mut self.cache, i, cached);
        }
        self.used += n as u16;
        self.scan_from = ((start + n) % SWAPFILE_CLUSTER) as u16;
    }
}

/// Which list a cluster is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnList {
    Free,
    /// Nonfull for the folio order it holds.
    Nonfull(u8),
    Full,
}

/// The device's cluster lists (free, nonfull per order, full).
///
/// The free list is the clusters never used yet, in order (`fresh`),
/// followed by clusters freed since (`freed`, oldest first): the kernel's
/// one free list as it is at swapon (every cluster, in order) with freed
/// clusters added at its tail, without an entry per cluster up front.
struct Lists {
    fresh: std::ops::Range<u32>,
    freed: std::collections::VecDeque<u32>,
    nonfull: [Vec<u32>; NR_ORDERS],
    on: Box<[OnList]>,
}

impl Lists {
    /// The head of the free list.
    fn free_front(&self) -> Option<u32> {
        if self.fresh.is_empty() {
            self.freed.front().copied()
        } else {
            Some(self.fresh.start)
        }
    }

    fn move_to(&mut self, ci: u32, to: OnList) {
        let from = self.on[ci as usize];
        if from == to {
            return;
        }
        match from {
            // Only an end of the fresh run leaves it: its head when
            // allocated, the partial last cluster when reserved at swapon.
            // (Test membership first: once the run is empty its bounds
            // may equal a freed cluster's number.)
            OnList::Free if self.fresh.contains(&ci) => {
                if self.fresh.start == ci {
                    self.fresh.start += 1;
                } else {
                    debug_assert_eq!(self.fresh.end, ci + 1, "only a fresh end leaves");
                    self.fresh.end -= 1;
                }
            }
            OnList::Free if self.freed.front() == Some(&ci) => {
                self.freed.pop_front();
            }
            OnList::Free => self.freed.retain(|&c| c != ci),
            OnList::Nonfull(o) => self.nonfull[usize::from(o)].retain(|&c| c != ci),
            OnList::Full => {}
        }
        match to {
            OnList::Free => self.freed.push_back(ci),
            OnList::Nonfull(o) => self.nonfull[usize::from(o)].push(ci),
            OnList::Full => {}
        }
        self.on[ci as usize] = to;
    }
}

/// One swapped-on device (`swap_info_struct`).
pub struct SwapDevice {
    ty: u32,
    name: String,
    /// Renumbered when a default-priority device before it goes.
    prio: AtomicI32,
    backend: Box<dyn SwapBackend>,
    /// The backend completes I/O in the caller (`SWP_SYNCHRONOUS_IO`).
    synchronous: bool,
    /// Pages used for swap (slot 0 included), at most [`MAX_SWAP_PAGES`].
    nr_pages: u64,
    /// The device's own size when that was larger (the area was truncated).
    truncated_from: Option<u64>,
    /// Allocated on first use, so an idle area costs a pointer per cluster.
    clusters: ChunkedTable<Mutex<Cluster>, 1>,
    lists: Mutex<Lists>,
    /// Slots in use (split per thread: every allocation and free counts).
    inuse_pages: PerCpuCounter,
    /// Per CPU slot and order, the cluster its allocations try first
    /// (`percpu_cluster->next[order]`); `NO_CLUSTER` when none. A hint:
    /// the cluster's own lock and state decide.
    next: [[AtomicU32; NR_ORDERS]; NR_CPU_SLOTS],
    /// Cleared while swapoff runs: no new allocations.
    writable: AtomicBool,
}

/// The largest swap area, in pages (slot 0 included): cluster numbers are
/// 32-bit here. The kernel truncates an area to its architecture's largest
/// swap offset (`arch_max_swapfile_size`: 2^50 pages on x86-64, less with
/// the L1TF mitigation) with a warning; we do the same with this limit.
pub const MAX_SWAP_PAGES: u64 = (u32::MAX as u64 + 1) * SWAPFILE_CLUSTER as u64;

/// The pages of an area of `size_pages` that are used: at most
/// [`MAX_SWAP_PAGES`] (`read_swap_header`'s "Truncating oversized swap
/// area"), and the size it was truncated from, if it was.
fn usable_pages(size_pages: u64) -> (u64, Option<u64>) {
    let nr_pages = size_pages.min(MAX_SWAP_PAGES);
    (nr_pages, (size_pages > nr_pages).then_some(size_pages))
}

impl SwapDevice {
    fn try_new(
        ty: u32,
        name: String,
        prio: i32,
        backend: Box<dyn SwapBackend>,
    ) -> Result<Self, SwapError> {
        let (nr_pages, truncated_from) = usable_pages(backend.nr_pages());
        let no_memory = || SwapError::NoMemory { pages: nr_pages };
        let nr_clusters = nr_pages.div_ceil(SWAPFILE_CLUSTER as u64) as usize;
        let clusters = ChunkedTable::try_new(nr_clusters).map_err(|_| no_memory())?;
        let on = try_boxed_slice(nr_clusters, || OnList::Free).map_err(|_| no_memory())?;
        let lists = Lists {
            fresh: 0..nr_clusters as u32,
            freed: std::collections::VecDeque::new(),
            nonfull: std::array::from_fn(|_| Vec::new()),
            on,
        };
        let device = Self {
            ty,
            name,
            prio: AtomicI32::new(prio),
            synchronous: backend.synchronous(),
            backend,
            nr_pages,
            truncated_from,
            clusters,
            lists: Mutex::new(lists),
            inuse_pages: PerCpuCounter::default(),
            next: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU32::new(NO_CLUSTER))),
            writable: AtomicBool::new(true),
        };
        // Slot 0 (the header) and slots past the end are never handed out:
        // they stay in use forever, and their clusters (the first and a
        // partial last) serve single pages only.
        let last_partial = !nr_pages.is_multiple_of(SWAPFILE_CLUSTER as u64);
        let reserved = std::iter::once(0).chain(if last_partial {
            nr_pages..(nr_clusters * SWAPFILE_CLUSTER) as u64
        } else {
            0..0
        });
        {
            let mut l = lock(&device.lists);
            for slot in reserved {
                let ci = slot as usize / SWAPFILE_CLUSTER;
                let mut c = device.cluster(ci);
                c.counts[slot as usize % SWAPFILE_CLUSTER] = SWAP_MAP_BAD;
                c.used += 1;
                c.listed = OnList::Nonfull(0);
                drop(c);
                l.move_to(ci as u32, OnList::Nonfull(0));
            }
        }
        Ok(device)
    }

    /// Cluster `ci`, allocated on first use, locked.
    fn cluster(&self, ci: usize) -> MutexGuard<'_, Cluster> {
        lock(self.cluster_cell(ci))
    }

    fn cluster_cell(&self, ci: usize) -> &Mutex<Cluster> {
        self.clusters
            .get_or_alloc(ci)
            .expect("cluster index below the device's cluster count")
    }

    /// The swap type (index in the swap table).
    pub fn ty(&self) -> u32 {
        self.ty
    }

    /// The name it was swapped on with (file path or ram name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its priority.
    pub fn prio(&self) -> i32 {
        // Relaxed: changed only under the swapon mutex; allocation order is
        // a policy, not a protocol.
        self.prio.load(Ordering::Relaxed)
    }

    /// The device's size in pages when the swap area was truncated to
    /// [`MAX_SWAP_PAGES`] (the kernel's "Truncating oversized swap area").
    pub fn truncated_from(&self) -> Option<u64> {
        self.truncated_from
    }

    /// Whether the device completes I/O in the caller (a RAM disk): a
    /// page with one reference is then read without the swap cache.
    pub fn synchronous(&self) -> bool {
        self.synchronous
    }

    /// Pages of the device (slot 0 included).
    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Bytes of host memory the device's bookkeeping takes: the cluster
    /// table and the clusters in use, the lists, and the backend's own
    /// tables (page contents excluded).
    pub fn metadata_bytes(&self) -> u64 {
        let lists = lock(&self.lists);
        let list_bytes = lists.on.len() * size_of::<OnList>()
            + lists.freed.capacity() * size_of::<u32>()
            + lists
                .nonfull
                .iter()
                .map(|l| l.capacity() * size_of::<u32>())
                .sum::<usize>();
        (self.clusters.memory_bytes() + list_bytes) as u64 + self.backend.metadata_bytes()
    }

    /// Whether new slots may be allocated on it (`SWP_WRITEOK`: on, and no
    /// swapoff under way).
    pub(crate) fn is_writable(&self) -> bool {
        // Acquire: pairs with the Release stores of swapon/swapoff.
        self.writable.load(Ordering::Acquire)
    }

    /// Slots in use.
    pub fn inuse_pages(&self) -> u64 {
        self.inuse_pages.sum()
    }

    /// The cluster holding the `nr` slots from `entry` and the first slot's
    /// index in it; a range crossing a cluster boundary is a bad entry.
    fn cluster_range(
        &self,
        entry: SwapEntry,
        nr: u32,
    ) -> Result<(&Mutex<Cluster>, usize), SwapError> {
        let (cluster, start) = self.cluster_of(entry)?;
        if start + nr as usize > SWAPFILE_CLUSTER {
            return Err(SwapError::BadEntry(entry));
        }
        Ok((cluster, start))
    }

    /// Changes the `nr` slots from `entry` in their cluster: `check` says,
    /// before anything changes, whether the change is allowed and how many
    /// slots it frees; `apply` makes it (freeing exactly those). The
    /// cluster lock alone suffices when the cluster stays on its list,
    /// which is nearly always; otherwise the list lock is taken first (the
    /// lock order) and `check` runs again on what is there by then.
    fn update<R>(
        &self,
        entry: SwapEntry,
        nr: u32,
        check: impl Fn(&Cluster, Range<usize>) -> Result<u32, SwapError>,
        apply: impl FnOnce(&mut Cluster, Range<usize>) -> R,
    ) -> Result<R, SwapError> {
        let (cell, start) = self.cluster_range(entry, nr)?;
        let slots = start..start + nr as usize;
        {
            let mut c = lock(cell);
            debug_assert!(c.is_consistent());
            let freed = check(&c, slots.clone())?;
            if !c.free_moves_list(freed) {
                let out = apply(&mut c, slots);
                debug_assert!(c.is_consistent() && c.fits_list(c.listed));
                drop(c);
                self.uncount_inuse(freed);
                return Ok(out);
            }
        }
        let mut lists = lock(&self.lists);
        let mut c = lock(cell);
        let freed = check(&c, slots.clone())?;
        let out = apply(&mut c, slots);
        if freed > 0 {
            let to = c.list_after_free();
            c.listed = to;
            lists.move_to((entry.swp_offset() as usize / SWAPFILE_CLUSTER) as u32, to);
        }
        debug_assert!(c.is_consistent() && c.fits_list(c.listed));
        drop(c);
        self.uncount_inuse(freed);
        Ok(out)
    }

    fn uncount_inuse(&self, freed: u32) {
        if freed > 0 {
            self.inuse_pages.sub(u64::from(freed));
        }
    }

    fn cluster_of(&self, entry: SwapEntry) -> Result<(&Mutex<Cluster>, usize), SwapError> {
        let off = entry.swp_offset();
        if entry.swp_type() != self.ty || off == 0 || off >= self.nr_pages {
            return Err(SwapError::BadEntry(entry));
        }
        Ok((
            self.cluster_cell(off as usize / SWAPFILE_CLUSTER),
            off as usize % SWAPFILE_CLUSTER,
        ))
    }

    /// Allocates a naturally aligned run of `1 << order` slots, each with a
    /// count of 1 and, if `cached`, the swap cache bit (a swap-out's folio
    /// goes into the swap cache at once); `None` when no run is free.
    fn alloc(&self, order: usize, cached: bool) -> Option<SwapEntry> {
        if !self.writable.load(Ordering::Acquire) || order >= NR_ORDERS {
            return None;
        }
        if let Some(entry) = self.alloc_from_next(order, cached) {
            return Some(entry);
        }
        let mut lists = lock(&self.lists);
        // Nonfull clusters of this order, then the free list's head, then
        // (single pages only) nonfull clusters of any order. Indexed, not
        // collected: `try_cluster` may move the one it fills.
        let mut tried = 0;
        while let Some(&ci) = lists.nonfull[order].get(tried) {
            if let Some(entry) = self.try_cluster(&mut lists, ci, order, cached) {
                return Some(entry);
            }
            tried += 1;
        }
        if let Some(ci) = lists.free_front()
            && let Some(entry) = self.try_cluster(&mut lists, ci, order, cached)
        {
            return Some(entry);
        }
        if order > 0 {
            return None;
        }
        for other in 1..NR_ORDERS {
            let mut tried = 0;
            while let Some(&ci) = lists.nonfull[other].get(tried) {
                if let Some(entry) = self.try_cluster(&mut lists, ci, order, cached) {
                    return Some(entry);
                }
                tried += 1;
            }
        }
        None
    }

    /// Allocates in this thread's current cluster of `order` under that
    /// cluster's lock alone, if it still serves the order and stays
    /// nonfull after (filling it moves it to the full list: the slow path
    /// does that).
    fn alloc_from_next(&self, order: usize, cached: bool) -> Option<SwapEntry> {
        // Relaxed: a hint (see `next`).
        let ci = self.next[this_cpu()][order].load(Ordering::Relaxed);
        if ci == NO_CLUSTER {
            return None;
        }
        let n = 1usize << order;
        let mut c = self.cluster(ci as usize);
        if c.listed != OnList::Nonfull(order as u8)
            || c.order != order as u8
            || usize::from(c.used) + n >= SWAPFILE_CLUSTER
        {
            return None;
        }
        debug_assert!(c.is_consistent());
        let start = c.find_run(order)?;
        c.take_run(start, order, cached);
        debug_assert!(c.is_consistent() && c.fits_list(c.listed));
        drop(c);
        self.inuse_pages.add(n as u64);
        let offset = u64::from(ci) * SWAPFILE_CLUSTER as u64 + start as u64;
        SwapEntry::new(self.ty, offset).ok()
    }

    /// Takes a run of `1 << order` slots in cluster `ci`, if it has one.
    fn try_cluster(
        &self,
        lists: &mut Lists,
        ci: u32,
        order: usize,
        cached: bool,
    ) -> Option<SwapEntry> {
        {
            let mut c = self.cluster(ci as usize);
            debug_assert!(c.is_consistent() && c.fits_list(lists.on[ci as usize]));
            debug_assert_eq!(c.listed, lists.on[ci as usize]);
            let was_free = lists.on[ci as usize] == OnList::Free;
            if was_free {
                c.order = order as u8;
            }
            let start = c.find_run(order)?;
            let n = 1usize << order;
            c.take_run(start, order, cached);
            let to = if usize::from(c.used) == SWAPFILE_CLUSTER {
                OnList::Full
            } else if was_free {
                OnList::Nonfull(order as u8)
            } else {
                lists.on[ci as usize]
            };
            c.listed = to;
            debug_assert!(c.is_consistent() && c.fits_list(to));
            drop(c);
            lists.move_to(ci, to);
            self.inuse_pages.add(n as u64);
            if to == OnList::Nonfull(order as u8) {
                // Relaxed: a hint (the cluster lock decides; see `next`).
                self.next[this_cpu()][order].store(ci, Ordering::Relaxed);
            }
            let offset = ci as u64 * SWAPFILE_CLUSTER as u64 + start as u64;
            SwapEntry::new(self.ty, offset).ok()
        }
    }

    /// Adds a reference to `nr` slots from `entry`, all or none.
    pub(crate) fn dup(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.change_refs(entry, nr, RefChange::Dup).map(drop)
    }

    /// Drops a reference to `nr` slots from `entry`, all or none, freeing
    /// slots that reach zero outside the swap cache. Returns how many
    /// slots became free.
    pub(crate) fn put(&self, entry: SwapEntry, nr: u32) -> Result<u32, SwapError> {
        self.change_refs(entry, nr, RefChange::Put)
    }

    fn change_refs(&self, entry: SwapEntry, nr: u32, change: RefChange) -> Result<u32, SwapError> {
        self.update(
            entry,
            nr,
            |c, slots| {
                // Check every slot first: all or nothing.
                if let Some(&count) = c.counts[slots.clone()]
                    .iter()
                    .find(|&&count| !change.allowed(count))
                {
                    return Err(change.refusal(entry, count));
                }
                Ok(match change {
                    RefChange::Dup => 0,
                    RefChange::Put => slots
                        .filter(|&i| c.counts[i] == 1 && !bit(&c.cache, i))
                        .count() as u32,
                })
            },
            |c, slots| {
                let mut freed = 0;
                for i in slots {
                    c.counts[i] = change.apply(c.counts[i]);
                    if change == RefChange::Put && c.slot_free(i) {
                        c.release(i);
                        freed += 1;
                    }
                }
                freed
            },
        )
    }

    /// Drops one reference to each of the `nr` slots from `entry` unless it
    /// is their last (`true`: dropped); the last is for
    /// [`SwapDevice::put_last`], once the caller has undone the slots'
    /// accounting while the reference still holds them. A last reference
    /// whose slots another holds in the swap cache (a read in flight that
    /// skipped the cache: `cache_owned` false) is refused: the mapping is
    /// being freed while it is faulted.
    pub(crate) fn put_unless_last(
        &self,
        entry: SwapEntry,
        nr: u32,
        cache_owned: bool,
    ) -> Result<bool, SwapError> {
        self.update(
            entry,
            nr,
            |c, slots| {
                live_slots(c, slots.clone(), entry)?;
                if c.counts[slots.start] == 1
                    && !cache_owned
                    && slots.clone().any(|i| bit(&c.cache, i))
                {
                    return Err(SwapError::BadEntry(entry));
                }
                Ok(0)
            },
            |c, slots| {
                if c.counts[slots.start] == 1 {
                    return false;
                }
                for i in slots {
                    c.counts[i] -= 1;
                }
                true
            },
        )
    }

    /// Drops the last reference to the `nr` slots from `entry` and the swap
    /// cache's hold on them, freeing them (one cluster operation for the
    /// kernel's put, swap-cache delete and `swap_range_free`).
    pub(crate) fn put_last(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.update(
            entry,
            nr,
            |c, slots| {
                if slots.clone().any(|i| c.counts[i] != 1) {
                    return Err(SwapError::BadEntry(entry));
                }
                Ok(nr)
            },
            |c, slots| {
                for i in slots {
                    c.counts[i] = 0;
                    set_bit(&mut c.cache, i, false);
                    c.release(i);
                }
            },
        )
    }

    /// The reference count of one slot.
    pub fn count(&self, entry: SwapEntry) -> Result<u8, SwapError> {
        let (cluster, i) = self.cluster_of(entry)?;
        Ok(lock(cluster).counts[i])
    }

    /// Claims the `nr` slots from `entry`, which mappings still reference,
    /// for a read (sets their cache bit, `swapcache_prepare`); says whether
    /// all of them hold zero pages (nothing to read) and whether the
    /// faulting mapping's is their only reference.
    pub(crate) fn claim_for_read(&self, entry: SwapEntry, nr: u32) -> Result<Claim, SwapError> {
        self.update(
            entry,
            nr,
            |c, slots| {
                live_slots(c, slots.clone(), entry)?;
                if slots.clone().any(|i| bit(&c.cache, i)) {
                    return Err(SwapError::BadEntry(entry));
                }
                Ok(0)
            },
            |c, slots| {
                let only_reference = c.counts[slots.start] == 1;
                let mut all_zero = true;
                for i in slots {
                    set_bit(&mut c.cache, i, true);
                    all_zero &= bit(&c.zero, i);
                }
                Claim {
                    all_zero,
                    only_reference,
                }
            },
        )
    }

    /// Releases the swap cache's hold on `nr` slots it holds, freeing those
    /// no mapping references any more. Returns how many were freed.
    pub(crate) fn uncache(&self, entry: SwapEntry, nr: u32) -> Result<u32, SwapError> {
        self.update(
            entry,
            nr,
            |c, slots| {
                if slots.clone().any(|i| !bit(&c.cache, i)) {
                    return Err(SwapError::BadEntry(entry));
                }
                Ok(slots.filter(|&i| c.counts[i] == 0).count() as u32)
            },
            |c, slots| {
                let mut freed = 0;
                for i in slots {
                    set_bit(&mut c.cache, i, false);
                    if c.counts[i] == 0 {
                        c.release(i);
                        freed += 1;
                    }
                }
                freed
            },
        )
    }

    /// Writes one page to a slot just allocated (whose zero bit is clear:
    /// `release` cleared it when the slot was last freed).
    pub(crate) fn write(&self, entry: SwapEntry, page: &[u8]) -> Result<(), SwapError> {
        let (_cluster, _i) = self.cluster_of(entry)?;
        debug_assert!(!bit(&lock(_cluster).zero, _i));
        self.backend
            .write_page(entry.swp_offset(), page)
            .map_err(|source| SwapError::Io { entry, source })
    }

    /// Marks the `nr` slots from `entry` as holding zero pages (nothing is
    /// written).
    pub(crate) fn mark_zero(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        let (cluster, start) = self.cluster_range(entry, nr)?;
        let mut c = lock(cluster);
        for i in start..start + nr as usize {
            set_bit(&mut c.zero, i, true);
        }
        Ok(())
    }

    /// Reads one page (zero pages are filled, not read).
    pub(crate) fn read(&self, entry: SwapEntry, page: &mut [u8]) -> Result<Stored, SwapError> {
        let (cluster, i) = self.cluster_of(entry)?;
        if bit(&lock(cluster).zero, i) {
            page.fill(0);
            return Ok(Stored::ZeroBit);
        }
        self.backend
            .read_page(entry.swp_offset(), page)
            .map_err(|source| SwapError::Io { entry, source })?;
        Ok(Stored::Device)
    }

    /// For tests and debugging: checks the device's invariants and panics
    /// naming the first one broken: each cluster is consistent, knows the
    /// list it is on, and is on the list its use says (the free list
    /// holding each free cluster once, a nonfull list each of its order
    /// once). O(device). Safe while other operations run: a change that
    /// moves a cluster holds the list lock, which this holds throughout,
    /// and one that does not keeps the cluster on a list that fits it.
    pub fn validate(&self) {
        self.check_invariants(false);
    }

    /// [`SwapDevice::validate`], and `inuse_pages` counts every slot in use
    /// but the reserved ones; call it with no operation in flight (the
    /// count is updated after a cluster's lock is dropped).
    pub fn validate_idle(&self) {
        self.check_invariants(true);
    }

    fn check_invariants(&self, idle: bool) {
        let lists = lock(&self.lists);
        let (mut used_slots, mut bad_slots) = (0u64, 0u64);
        for (ci, cluster) in self.clusters.iter() {
            let c = lock(cluster);
            let on = lists.on[ci];
            assert!(
                c.is_consistent(),
                "{}: cluster {ci} is inconsistent",
                self.name
            );
            assert!(
                c.fits_list(on),
                "{}: cluster {ci} ({} used) is on {on:?}",
                self.name,
                c.used
            );
            assert_eq!(
                c.listed, on,
                "{}: cluster {ci}'s own idea of its list",
                self.name
            );
            used_slots += u64::from(c.used);
            bad_slots += c.counts.iter().filter(|&&n| n == SWAP_MAP_BAD).count() as u64;
        }
        for (ci, &on) in lists.on.iter().enumerate() {
            let ci = ci as u32;
            let in_free = usize::from(lists.fresh.contains(&ci))
                + lists.freed.iter().filter(|&&c| c == ci).count();
            assert_eq!(
                in_free,
                usize::from(on == OnList::Free),
                "{}: free list and cluster {ci} ({on:?})",
                self.name
            );
            for (order, list) in lists.nonfull.iter().enumerate() {
                let listed = list.iter().filter(|&&c| c == ci).count();
                let expected = usize::from(on == OnList::Nonfull(order as u8));
                assert_eq!(
                    listed, expected,
                    "{}: nonfull[{order}] and cluster {ci} ({on:?})",
                    self.name
                );
            }
        }
        assert!(
            !idle || used_slots - bad_slots == self.inuse_pages(),
            "{}: inuse_pages against the clusters",
            self.name
        );
    }

    /// Every slot in use, as entries, in offset order.
    fn used_entries(&self) -> Vec<SwapEntry> {
        let mut out = Vec::new();
        for (ci, cluster) in self.clusters.iter() {
            let c = lock(cluster);
            for (i, &count) in c.counts.iter().enumerate() {
                if count != 0 && count != SWAP_MAP_BAD {
                    let offset = (ci * SWAPFILE_CLUSTER + i) as u64;
                    out.extend(SwapEntry::new(self.ty, offset).ok());
                }
            }
        }
        out
    }
}

/// A change to slots' reference counts (the kernel's `__swap_duplicate`
/// and `swap_entries_put_nr`, one entry point each over one checked path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefChange {
    /// One more reference (a mapping shared by fork, a swap-cache user).
    Dup,
    /// One reference fewer.
    Put,
}

impl RefChange {
    /// Whether a slot with `count` references can take the change: a dup
    /// needs a slot in use below [`SWAP_MAP_MAX`], a put one in use.
    fn allowed(self, count: u8) -> bool {
        match self {
            RefChange::Dup => (1..SWAP_MAP_MAX).contains(&count),
            RefChange::Put => count != 0 && count != SWAP_MAP_BAD,
        }
    }

    fn apply(self, count: u8) -> u8 {
        match self {
            RefChange::Dup => count + 1,
            RefChange::Put => count - 1,
        }
    }

    /// The error for a slot the change is not [`allowed`](Self::allowed) on.
    fn refusal(self, entry: SwapEntry, count: u8) -> SwapError {
        match self {
            RefChange::Dup if count == SWAP_MAP_MAX => SwapError::TooManyRefs(entry),
            _ => SwapError::BadEntry(entry),
        }
    }
}

/// What [`SwapDevice::claim_for_read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    /// Every slot holds a zero page: nothing to read.
    pub(crate) all_zero: bool,
    /// The slots have one reference: the faulting mapping's.
    pub(crate) only_reference: bool,
}

/// Checks that every slot in `slots` is in use by a mapping (a count of
/// 1..=[`SWAP_MAP_MAX`]); a free or never-handed-out slot is a bad entry.
fn live_slots(c: &Cluster, mut slots: Range<usize>, entry: SwapEntry) -> Result<(), SwapError> {
    if slots.any(|i| !(1..=SWAP_MAP_MAX).contains(&c.counts[i])) {
        return Err(SwapError::BadEntry(entry));
    }
    Ok(())
}

/// Where a page's contents live on a swap device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// All zeros: only the slot's zero bit is set; nothing was written.
    ZeroBit,
    /// Written to (or read from) the backend.
    Device,
}

/// Whether a page (or folio) is all zeros.
pub fn is_zero(page: &[u8]) -> bool {
    // OR eight bytes at a time over 1 KiB blocks: the inner fold has no
    // early exit, so it vectorises into a streaming read, while `all`
    // still stops at the first block with a set byte. (Measured: 64-byte
    // blocks of byte-wise ORs ran at about a third of the read bandwidth.)
    // A page with data usually shows it in its first word: stop there, as
    // the kernel's `memchr_inv` would, before streaming a block.
    if page
        .get(..8)
        .is_some_and(|first| first.iter().any(|&b| b != 0))
    {
        return false;
    }
    let mut blocks = page.chunks_exact(1024);
    blocks.by_ref().all(|block| {
        block.chunks_exact(8).fold(0u64, |acc, w| {
            acc | u64::from_ne_bytes(w.try_into().expect("8 bytes"))
        }) == 0
    }) && blocks.remainder().iter().all(|&b| b == 0)
}

impl fmt::Debug for SwapDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapDevice")
            .field("ty", &self.ty)
            .field("name", &self.name)
            .field("prio", &self.prio())
            .field("nr_pages", &self.nr_pages)
            .field("inuse", &self.inuse_pages())
            .finish()
    }
}

/// One line of `/proc/swaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapsLine {
    /// The file path or device name.
    pub filename: String,
    /// "file" or "partition".
    pub kind: &'static str,
    /// Usable size in KiB.
    pub size_kb: u64,
    /// Used in KiB.
    pub used_kb: u64,
    /// Priority.
    pub prio: i32,
}

/// A device held for one operation ([`Swapfiles::device`]).
pub(crate) struct DeviceRef(SlotGuard<SwapDevice>);

impl std::ops::Deref for DeviceRef {
    type Target = SwapDevice;

    fn deref(&self) -> &SwapDevice {
        self.0.get().expect("checked when taken")
    }
}

/// The swap table (`swap_info[]`): every device, by type.
pub struct Swapfiles {
    devices: Box<[ArcSlot<SwapDevice>]>,
    /// Every device in allocation order, rebuilt under `swapon_mutex`
    /// whenever a device comes, goes or changes priority, so allocation
    /// reads one list and takes no table lock (`swap_avail_heads`).
    avail: ArcSlot<AvailList>,
    swapon_mutex: Mutex<SwapTable>,
    /// Which equal-priority device to try first (round-robin). A hint
    /// only: allocation takes no lock for it.
    rotor: AtomicUsize,
}

struct SwapTable {
    /// The next default priority (`least_priority`, counting down).
    least_priority: i32,
}

/// The devices in allocation order: highest priority first, equal
/// priorities in type order (the rotor picks where each group starts).
struct AvailList {
    /// Every device with its position in type order and its priority when
    /// the list was built, sorted by priority (highest first), then type.
    devices: Vec<AvailDevice>,
}

struct AvailDevice {
    pos: usize,
    prio: i32,
    device: Arc<SwapDevice>,
}

impl AvailList {
    fn of(devices: impl Iterator<Item = Arc<SwapDevice>>) -> Self {
        let mut devices: Vec<AvailDevice> = devices
            .enumerate()
            .map(|(pos, device)| AvailDevice {
                pos,
                prio: device.prio(),
                device,
            })
            .collect();
        devices.sort_by_key(|d| (std::cmp::Reverse(d.prio), d.pos));
        Self { devices }
    }

    /// Allocates on the first device with room, trying each group of
    /// equal priority from the first device at or after `rotor` (in type
    /// order, wrapping): devices of equal priority take turns.
    fn alloc(&self, rotor: usize, order: usize, cached: bool) -> Option<SwapEntry> {
        let rotor = rotor % self.devices.len().max(1);
        let mut rest = &self.devices[..];
        while let Some(first) = rest.first() {
            let len = rest.iter().take_while(|d| d.prio == first.prio).count();
            let (group, tail) = rest.split_at(len);
            let start = group.partition_point(|d| d.pos < rotor);
            let found = (0..len)
                .map(|k| &group[(start + k) % len].device)
                .find_map(|d| d.alloc(order, cached));
            if found.is_some() {
                return found;
            }
            rest = tail;
        }
        None
    }
}

impl Default for Swapfiles {
    fn default() -> Self {
        Self {
            devices: (0..MAX_SWAPFILES).map(|_| ArcSlot::empty()).collect(),
            avail: ArcSlot::empty(),
            swapon_mutex: Mutex::new(SwapTable { least_priority: -1 }),
            rotor: AtomicUsize::new(0),
        }
    }
}

impl Swapfiles {
    /// Swaps on `backend` under `name` with `prio` (`0..=`[`MAX_SWAP_PRIO`],
    /// or the next default, -2, -3, ...); returns the device. The caller
    /// then allocates the device's swap_cgroup map. An area larger than
    /// [`MAX_SWAP_PAGES`] is truncated ([`SwapDevice::truncated_from`]).
    pub fn swapon(
        &self,
        name: &str,
        backend: Box<dyn SwapBackend>,
        prio: Option<i32>,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        if let Some(p) = prio.filter(|p| !(0..=MAX_SWAP_PRIO).contains(p)) {
            return Err(SwapError::BadPriority(p));
        }
        let mut table = lock(&self.swapon_mutex);
        if self.iter().any(|d| d.name == name) {
            return Err(SwapError::AlreadyOn(name.to_owned()));
        }
        let ty = (0..self.devices.len())
            .find(|&t| self.devices[t].with(|d| d.is_none()))
            .ok_or(SwapError::TooManyDevices)?;
        let device = SwapDevice::try_new(
            ty as u32,
            name.to_owned(),
            prio.unwrap_or(table.least_priority - 1),
            backend,
        )?;
        if prio.is_none() {
            table.least_priority -= 1;
        }
        let device = Arc::new(device);
        self.devices[ty].swap(Some(Arc::clone(&device)));
        self.rebuild_avail(&table);
        Ok(device)
    }

    /// The device of type `ty`.
    pub fn get(&self, ty: u32) -> Option<Arc<SwapDevice>> {
        self.devices.get(ty as usize)?.load_full()
    }

    /// The device named `name`.
    pub fn by_name(&self, name: &str) -> Option<Arc<SwapDevice>> {
        self.iter().find(|d| d.name == name)
    }

    /// Every device, in type order.
    pub fn iter(&self) -> impl Iterator<Item = Arc<SwapDevice>> + '_ {
        self.devices.iter().filter_map(|d| d.load_full())
    }

    /// Slots of every writable device (`total_swap_pages`) and of those the
    /// free ones (`get_nr_swap_pages`), read from the allocation list: no
    /// table lock, no reference taken (reclaim and refaults ask often).
    pub fn space_pages(&self) -> (u64, u64) {
        self.avail.with(|avail| {
            avail.map_or((0, 0), |avail| {
                avail
                    .devices
                    .iter()
                    .map(|d| &d.device)
                    .filter(|d| d.is_writable())
                    .fold((0, 0), |(total, free), d| {
                        let slots = d.nr_pages() - 1;
                        (total + slots, free + slots.saturating_sub(d.inuse_pages()))
                    })
            })
        })
    }

    /// Allocates `1 << order` slots on the highest-priority device with
    /// room (devices of equal priority take turns).
    pub fn alloc(&self, order: usize) -> Option<SwapEntry> {
        self.alloc_slots(order, false)
    }

    /// [`Swapfiles::alloc`], the slots also held by the swap cache (a
    /// swap-out: the folio is added to the swap cache as it is allocated).
    pub(crate) fn alloc_cached(&self, order: usize) -> Option<SwapEntry> {
        self.alloc_slots(order, true)
    }

    fn alloc_slots(&self, order: usize, cached: bool) -> Option<SwapEntry> {
        // Relaxed: the rotor only spreads allocations; no other memory is
        // published through it (pairs with nothing).
        let rotor = self.rotor.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        self.avail.with(|avail| avail?.alloc(rotor, order, cached))
    }

    /// Rebuilds the allocation order (under `swapon_mutex`, which `_table`
    /// proves is held).
    fn rebuild_avail(&self, _table: &MutexGuard<'_, SwapTable>) {
        self.avail.swap(Some(Arc::new(AvailList::of(self.iter()))));
    }

    /// The device an entry is on (`get_swap_device`): resolve it once per
    /// operation and call its methods. Held by a guard, not a counted
    /// reference: every swap-in and swap-out takes one, and a count would
    /// make all threads write the device's one line.
    pub(crate) fn device(&self, entry: SwapEntry) -> Result<DeviceRef, SwapError> {
        let guard = self
            .devices
            .get(entry.swp_type() as usize)
            .ok_or(SwapError::BadEntry(entry))?
            .load();
        if guard.get().is_none() {
            return Err(SwapError::BadEntry(entry));
        }
        Ok(DeviceRef(guard))
    }

    /// [`SwapDevice::validate`] on every device.
    pub fn validate(&self) {
        for device in self.iter() {
            device.validate();
        }
    }

    /// [`SwapDevice::validate_idle`] on every device.
    pub fn validate_idle(&self) {
        for device in self.iter() {
            device.validate_idle();
        }
    }

    /// The reference count of the slot at `entry` (`swap_count`): 0 when
    /// free, [`SWAP_MAP_BAD`] for a slot never handed out.
    pub fn count(&self, entry: SwapEntry) -> Result<u8, SwapError> {
        self.device(entry)?.count(entry)
    }

    /// Adds a reference to `nr` slots (`swap_duplicate`, a shared mapping).
    pub(crate) fn dup(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.device(entry)?.dup(entry, nr)
    }

    /// Drops a reference to `nr` slots; returns how many became free
    /// (`swap_free_nr`). Swap accounting of freed slots is the caller's.
    pub fn put(&self, entry: SwapEntry, nr: u32) -> Result<u32, SwapError> {
        self.device(entry)?.put(entry, nr)
    }

    /// Marks `nr` slots as held by the swap cache or not; returns how many
    /// slots releasing freed.
    #[cfg(test)]
    pub(crate) fn set_cache(
        &self,
        entry: SwapEntry,
        nr: u32,
        held: bool,
    ) -> Result<u32, SwapError> {
        let device = self.device(entry)?;
        if held {
            device.claim_for_read(entry, nr).map(|_| 0)
        } else {
            device.uncache(entry, nr)
        }
    }

    /// Writes one page to the slot `entry` (clearing its zero bit).
    pub fn write_page(&self, entry: SwapEntry, page: &[u8]) -> Result<(), SwapError> {
        self.device(entry)?.write(entry, page)
    }

    /// Marks the `nr` slots from `entry` as zero pages instead of writing
    /// them: the kernel does this for a folio that is zero as a whole
    /// (`swap_zeromap_folio_set`); a folio with any data is written whole.
    pub(crate) fn mark_zero(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.device(entry)?.mark_zero(entry, nr)
    }

    /// Reads the page at `entry`.
    pub fn read_page(&self, entry: SwapEntry, page: &mut [u8]) -> Result<Stored, SwapError> {
        self.device(entry)?.read(entry, page)
    }

    /// Starts swapping off `ty` (`swapoff` before `try_to_unuse`): stops
    /// allocation on it and, for a default-priority device, moves every
    /// device after it one priority up and gives the priority back (the
    /// kernel does this before the unuse walk and does not undo it if the
    /// walk fails). Returns the slots in use. A device already being
    /// swapped off is refused (`EINVAL`, not an active swap area).
    pub(crate) fn begin_swapoff(&self, ty: u32) -> Result<Vec<SwapEntry>, SwapError> {
        let mut table = lock(&self.swapon_mutex);
        let device = self
            .get(ty)
            .filter(|d| d.writable.load(Ordering::Acquire))
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        device.writable.store(false, Ordering::Release);
        let prio = device.prio();
        if prio < 0 {
            for d in self.iter().filter(|d| d.prio() < prio) {
                d.prio.fetch_add(1, Ordering::Relaxed);
            }
            table.least_priority += 1;
        }
        self.rebuild_avail(&table);
        Ok(device.used_entries())
    }

    /// The slots of `ty` still in use (a later walk of a swapoff).
    pub(crate) fn used_entries(&self, ty: u32) -> Result<Vec<SwapEntry>, SwapError> {
        let device = self
            .get(ty)
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        Ok(device.used_entries())
    }

    /// Lets `ty` allocate again (a swapoff that failed), with the priority
    /// it had; the others keep their new ones (`reinsert_swap_info`).
    pub(crate) fn abort_swapoff(&self, ty: u32) {
        if let Some(d) = self.get(ty) {
            d.writable.store(true, Ordering::Release);
        }
    }

    /// Removes `ty`, which [`Swapfiles::begin_swapoff`] started to take
    /// off, once no slot is in use; otherwise fails with
    /// [`SwapError::StillInUse`] and leaves it off for allocation (the
    /// caller walks again, or calls [`Swapfiles::abort_swapoff`]).
    pub(crate) fn finish_swapoff(&self, ty: u32) -> Result<Arc<SwapDevice>, SwapError> {
        let _table = lock(&self.swapon_mutex);
        let device = self
            .get(ty)
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        debug_assert!(
            !device.writable.load(Ordering::Acquire),
            "begin_swapoff first"
        );
        if device.inuse_pages() != 0 {
            return Err(SwapError::StillInUse {
                pages: device.inuse_pages(),
            });
        }
        self.devices[ty as usize].swap(None);
        self.rebuild_avail(&_table);
        Ok(device)
    }

    /// The `/proc/swaps` lines.
    pub fn swaps(&self) -> Vec<SwapsLine> {
        self.iter()
            .map(|d| SwapsLine {
                filename: d.name.clone(),
                kind: d.backend.kind(),
                size_kb: (d.nr_pages - 1) * PAGE_SIZE / 1024,
                used_kb: d.inuse_pages() * PAGE_SIZE / 1024,
                prio: d.prio(),
            })
            .collect()
    }

    /// `/proc/swaps` as the kernel's `swap_show` prints it: the path with
    /// blanks and backslashes escaped as octal, padded to 40 columns, then
    /// tab-separated fields (an extra tab after numbers below 10000000).
    pub fn proc_swaps(&self) -> String {
        let mut out = String::from("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
        for l in self.swaps() {
            let path = escape_path(&l.filename);
            let pad = 40usize.saturating_sub(path.len()).max(1);
            let tab_if_short = |n: u64| if n < 10_000_000 { "\t" } else { "" };
            // swap_show prints "file\t" (a tab more) or "partition".
            let kind = if l.kind == "file" { "file\t" } else { l.kind };
            out.push_str(&format!(
                "{path}{:pad$}{}\t{}\t{}{}\t{}{}\n",
                "",
                kind,
                l.size_kb,
                tab_if_short(l.size_kb),
                l.used_kb,
                tab_if_short(l.used_kb),
                l.prio
            ));
        }
        out
    }
}

/// Escapes space, tab, newline and backslash as `\ooo`, as `seq_file_path`
/// does for `/proc/swaps`.
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mm_types::PAGE_BYTES;

    fn ram(pages: u64) -> Box<dyn SwapBackend> {
        Box::new(RamBackend::new(pages * PAGE_SIZE).unwrap())
    }

    #[test]
    fn allocates_aligned_runs_and_frees_them() {
        let sf = Swapfiles::default();
        let d = sf
            .swapon("ram0", ram(4 * SWAPFILE_CLUSTER as u64), None)
            .unwrap();
        assert_eq!((d.ty(), d.prio()), (0, -2));
        let big = sf.alloc(4).unwrap();
        assert_eq!(big.swp_offset() % 16, 0, "naturally aligned");
        assert_ne!(big.swp_offset() / 512, 0, "not in the header's cluster");
        let small = sf.alloc(0).unwrap();
        assert_eq!(
            small.swp_offset(),
            1,
            "order 0 first fills the header's cluster"
        );
        assert_eq!(d.inuse_pages(), 17);
        assert_eq!(sf.put(big, 16).unwrap(), 16);
        assert_eq!(sf.put(small, 1).unwrap(), 1);
        assert_eq!(d.inuse_pages(), 0);
        assert!(sf.put(small, 1).is_err(), "double free refused");
        sf.validate_idle();
    }

    #[test]
    fn a_freed_cluster_next_to_the_used_up_fresh_run_leaves_the_free_list() {
        // Two clusters: the header's, and one that is used up, freed and
        // taken again once the fresh run is empty. Its number then equals
        // the empty run's end, which once left it on the free list too.
        let sf = Swapfiles::default();
        let d = sf
            .swapon("ram0", ram(2 * SWAPFILE_CLUSTER as u64), None)
            .unwrap();
        let order = SWAPFILE_CLUSTER.trailing_zeros() as usize;
        for _ in 0..3 {
            let e = sf.alloc(order).unwrap();
            d.validate_idle();
            assert_eq!(
                sf.put(e, SWAPFILE_CLUSTER as u32).unwrap(),
                SWAPFILE_CLUSTER as u32
            );
            d.validate_idle();
        }
        assert_eq!(d.inuse_pages(), 0);
    }

    #[test]
    fn large_allocations_fail_when_no_cluster_can_take_them() {
        let sf = Swapfiles::default();
        sf.swapon("ram0", ram(2 * SWAPFILE_CLUSTER as u64), None)
            .unwrap();
        // One free cluster: 32 runs of 16 slots; the header's cluster is order 0.
        let runs: Vec<_> = (0..32).map(|_| sf.alloc(4).unwrap()).collect();
        assert!(sf.alloc(4).is_none(), "the caller must split the folio");
        assert!(
            sf.alloc(0).is_some(),
            "single pages still fit in the header cluster"
        );
        for r in runs {
            sf.put(r, 16).unwrap();
        }
        assert!(sf.alloc(4).is_some());
        sf.validate_idle();
    }

    #[test]
    fn counts_dup_and_the_cache_keep_slots() {
        let sf = Swapfiles::default();
        sf.swapon("ram0", ram(1024), None).unwrap();
        let e = sf.alloc(0).unwrap();
        sf.dup(e, 1).unwrap();
        assert_eq!(sf.get(0).unwrap().count(e).unwrap(), 2);
        assert_eq!(sf.put(e, 1).unwrap(), 0);
        sf.set_cache(e, 1, true).unwrap();
        assert_eq!(sf.put(e, 1).unwrap(), 0, "the swap cache still holds it");
        assert_eq!(sf.get(0).unwrap().inuse_pages(), 1);
        assert_eq!(
            sf.set_cache(e, 1, false).unwrap(),
            1,
            "released by the cache: free"
        );
        assert_eq!(sf.get(0).unwrap().inuse_pages(), 0);
        let e = sf.alloc(0).unwrap();
        for _ in 0..SWAP_MAP_MAX {
            let _ = sf.dup(e, 1);
        }
        assert!(matches!(sf.dup(e, 1), Err(SwapError::TooManyRefs(_))));
        sf.validate_idle();
    }

    #[test]
    fn zero_pages_are_not_written_and_read_back_as_zeros() {
        let backend = Arc::new(RamBackend::new(64 * PAGE_SIZE).unwrap());
        let sf = Swapfiles::default();
        sf.swapon("ram0", Box::new(Arc::clone(&backend)), None)
            .unwrap();
        let (z, d) = (sf.alloc(0).unwrap(), sf.alloc(0).unwrap());
        sf.mark_zero(z, 1).unwrap();
        sf.write_page(d, &[7u8; PAGE_BYTES]).unwrap();
        assert_eq!(
            backend.resident_bytes(),
            PAGE_SIZE,
            "only the data page was stored"
        );
        let mut buf = [1u8; PAGE_BYTES];
        sf.read_page(z, &mut buf).unwrap();
        assert!(is_zero(&buf));
        sf.read_page(d, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
        sf.validate_idle();
    }

    #[test]
    fn priorities_order_allocation() {
        let sf = Swapfiles::default();
        sf.swapon("low", ram(64), None).unwrap();
        sf.swapon("high", ram(64), Some(5)).unwrap();
        for _ in 0..10 {
            assert_eq!(sf.alloc(0).unwrap().swp_type(), 1, "higher priority first");
        }
        let text = sf.proc_swaps();
        assert!(text.starts_with("Filename"));
        assert!(text.contains("high") && text.contains("-2"));
        assert_eq!(sf.swaps()[0].size_kb, 63 * 4);
        sf.validate_idle();
    }

    #[test]
    fn proc_swaps_is_tab_separated_with_escaped_paths() {
        let sf = Swapfiles::default();
        sf.swapon("/tmp/my swap\\file", ram(64), None).unwrap();
        let backend = Box::new(RamBackend::new(4096 * 4_000_000).unwrap());
        sf.swapon("/dev/ram1", backend, Some(7)).unwrap();
        let text = sf.proc_swaps();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority");
        // 21 bytes escaped: padded with spaces to column 40.
        assert_eq!(
            lines[1],
            format!(
                "/tmp/my\\040swap\\134file{}partition\t252\t\t0\t\t-2",
                " ".repeat(17)
            )
        );
        // A size of 10000000 KiB or more gets no second tab.
        assert_eq!(
            lines[2],
            format!("/dev/ram1{}partition\t15999996\t0\t\t7", " ".repeat(31))
        );
        let file = FileBackend::open(
            &tempfile::tempdir().unwrap().path().join("f"),
            64 * PAGE_SIZE,
        )
        .unwrap();
        sf.swapon("f", Box::new(file), None).unwrap();
        assert!(
            sf.proc_swaps().contains("file\t\t252\t\t0\t\t-3"),
            "{}",
            sf.proc_swaps()
        );
    }

    #[test]
    fn swapoff_renumbers_default_priorities_after_it() {
        let sf = Swapfiles::default();
        for name in ["a", "b", "c"] {
            sf.swapon(name, ram(64), None).unwrap();
        }
        sf.swapon("p", ram(64), Some(3)).unwrap();
        sf.begin_swapoff(1).unwrap();
        sf.finish_swapoff(1).unwrap();
        let prios: Vec<(String, i32)> = sf
            .swaps()
            .into_iter()
            .map(|l| (l.filename, l.prio))
            .collect();
        assert_eq!(prios, [("a".into(), -2), ("c".into(), -3), ("p".into(), 3)]);
        sf.swapon("d", ram(64), None).unwrap();
        assert_eq!(sf.get(1).unwrap().prio(), -4, "the next default after -3");
        assert!(matches!(
            sf.swapon("e", ram(64), Some(MAX_SWAP_PRIO + 1)),
            Err(SwapError::BadPriority(_))
        ));
    }

    #[test]
    fn huge_areas_cost_little_until_used() {
        let sf = Swapfiles::default();
        // 1 TiB: 2^28 slots. The kernel's tables would be ~800 MiB; ours
        // are a pointer or two per cluster until a cluster is used.
        let d = sf
            .swapon("ram0", Box::new(RamBackend::new(1 << 40).unwrap()), None)
            .unwrap();
        assert!(d.metadata_bytes() < 64 << 20, "{}", d.metadata_bytes());
        let e = sf.alloc(0).unwrap();
        sf.write_page(e, &[3u8; PAGE_BYTES]).unwrap();
        assert!(d.metadata_bytes() < 64 << 20);
        sf.put(e, 1).unwrap();
        // Sizes no table could hold fail cleanly.
        assert!(matches!(
            RamBackend::new(1 << 62).map(|b| sf.swapon("big", Box::new(b), None)),
            Err(SwapError::NoMemory { .. }) | Ok(Err(SwapError::NoMemory { .. }))
        ));
    }

    #[test]
    fn oversized_areas_are_truncated_to_the_largest_offset() {
        assert_eq!(usable_pages(1 << 20), (1 << 20, None));
        assert_eq!(usable_pages(MAX_SWAP_PAGES), (MAX_SWAP_PAGES, None));
        assert_eq!(
            usable_pages(MAX_SWAP_PAGES + 5),
            (MAX_SWAP_PAGES, Some(MAX_SWAP_PAGES + 5))
        );
        assert_eq!(usable_pages(u64::MAX), (MAX_SWAP_PAGES, Some(u64::MAX)));
    }

    #[test]
    fn bad_input_is_refused_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            RamBackend::new(4095),
            Err(SwapError::BadSize(4095))
        ));
        assert_eq!(RamBackend::new(4096).err().unwrap().errno(), Errno::EINVAL);
        let missing_dir = dir.path().join("nope/swapfile");
        assert_eq!(
            FileBackend::open(&missing_dir, 1 << 20)
                .err()
                .unwrap()
                .errno(),
            Errno::ENOENT
        );
        let small = dir.path().join("small");
        std::fs::write(&small, [0u8; 8192]).unwrap();
        assert!(matches!(
            FileBackend::open(&small, 1 << 20),
            Err(SwapError::FileTooSmall { .. })
        ));
        assert_eq!(
            std::fs::metadata(&small).unwrap().len(),
            8192,
            "nothing half-done"
        );
        let sf = Swapfiles::default();
        sf.swapon("ram0", ram(64), None).unwrap();
        assert_eq!(
            sf.swapon("ram0", ram(64), None).err().unwrap().errno(),
            Errno::EBUSY
        );
        for i in 1..MAX_SWAPFILES {
            sf.swapon(&format!("ram{i}"), ram(64), None).unwrap();
        }
        assert!(matches!(
            sf.swapon("one-too-many", ram(64), None),
            Err(SwapError::TooManyDevices)
        ));
    }
}
