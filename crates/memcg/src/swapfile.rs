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
//! A page of zeros is not written: its bit in the zero bitmap is set, and
//! reading it back fills zeros.
//!
//! # Locking
//!
//! Device list lock, then a cluster lock; never the other way round. Reads
//! and writes of page contents take no device lock: a slot's contents are
//! only touched by whoever holds a reference to it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::errno::Errno;
use crate::page_counter::PAGE_SIZE;
use crate::swap_cgroup::SWAPFILE_CLUSTER;
use crate::swapops::{MAX_SWAPFILES, SwapEntry};
use crate::sync::{Arc, ArcSlot, AtomicBool, AtomicU64, Mutex, Ordering, lock};

/// Bytes per page, as a `usize`.
pub const PAGE_BYTES: usize = PAGE_SIZE as usize;

/// The largest count a slot can reach (`SWAP_MAP_MAX`; the kernel chains
/// continuation pages beyond it, we refuse).
pub const SWAP_MAP_MAX: u8 = 0x3e;

/// Folio orders the allocator distinguishes (up to a whole cluster).
const NR_ORDERS: usize = SWAPFILE_CLUSTER.trailing_zeros() as usize + 1;

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
    #[error("swap size {0} bytes is not a multiple of 4096 of at least 8192")]
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
    /// A page could not be swapped back in during swapoff.
    #[error("swapoff: {0}")]
    Unuse(String),
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
            SwapError::FileTooSmall { .. } | SwapError::BadSize(_) | SwapError::NoSuchDevice(_) => {
                Errno::EINVAL
            }
            SwapError::BadEntry(_) => Errno::EINVAL,
            SwapError::AlreadyOn(_) => Errno::EBUSY,
            SwapError::TooManyDevices => Errno::EPERM,
            SwapError::TooManyRefs(_) => Errno::ENOMEM,
            SwapError::Io { .. } => Errno::EIO,
            SwapError::Unuse(_) => Errno::ENOMEM,
        }
    }
}

/// Where a swap device keeps page contents.
pub trait SwapBackend: Send + Sync {
    /// Pages of storage (slot 0 included).
    fn nr_pages(&self) -> u64;
    /// Reads page `offset` into `buf` (one page).
    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `buf` (one page) to page `offset`.
    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// What `/proc/swaps` shows as the type ("file" or "partition").
    fn kind(&self) -> &'static str;
}

/// One page of a RAM disk, allocated on its first write.
type RamPage = Option<Box<[u8]>>;

/// A RAM disk: pages allocated on first write (`brd`).
pub struct RamBackend {
    pages: Box<[Mutex<RamPage>]>,
}

impl RamBackend {
    /// A RAM disk of `size_bytes` (a multiple of the page size).
    pub fn new(size_bytes: u64) -> Result<Self, SwapError> {
        let nr_pages = check_size(size_bytes)?;
        Ok(Self {
            pages: (0..nr_pages).map(|_| Mutex::new(None)).collect(),
        })
    }

    /// Bytes of page storage allocated so far.
    pub fn resident_bytes(&self) -> u64 {
        self.pages.iter().filter(|p| lock(p).is_some()).count() as u64 * PAGE_SIZE
    }
}

impl SwapBackend for RamBackend {
    fn nr_pages(&self) -> u64 {
        self.pages.len() as u64
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let page = self
            .pages
            .get(offset as usize)
            .ok_or(io::ErrorKind::InvalidInput)?;
        match &*lock(page) {
            Some(data) => buf.copy_from_slice(data),
            None => buf.fill(0),
        }
        Ok(())
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let page = self
            .pages
            .get(offset as usize)
            .ok_or(io::ErrorKind::InvalidInput)?;
        let mut slot = lock(page);
        match &mut *slot {
            Some(data) => data.copy_from_slice(buf),
            None => *slot = Some(buf.into()),
        }
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "partition"
    }
}

/// A swap file on disk, preallocated, with positioned page I/O.
pub struct FileBackend {
    file: File,
    nr_pages: u64,
}

impl FileBackend {
    /// Opens `path` for swap: an existing file must hold at least
    /// `size_bytes`; a missing one is created with that size and
    /// preallocated.
    pub fn open(path: &Path, size_bytes: u64) -> Result<Self, SwapError> {
        let nr_pages = check_size(size_bytes)?;
        let path_err = |source| SwapError::Path {
            path: path.to_owned(),
            source,
        };
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(path_err)?;
        let actual = file.metadata().map_err(path_err)?.len();
        if existed && actual < size_bytes {
            return Err(SwapError::FileTooSmall {
                path: path.to_owned(),
                actual,
                wanted: size_bytes,
            });
        }
        if !existed && let Err(e) = preallocate(&file, size_bytes) {
            let _ = std::fs::remove_file(path);
            return Err(path_err(e));
        }
        Ok(Self { file, nr_pages })
    }
}

/// Reserves `len` bytes of disk for `file` (posix_fallocate where there is
/// one), so swap-out never meets ENOSPC from the file system.
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        use std::os::fd::AsRawFd;
        let len =
            libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `fd` is an open file descriptor owned by `file` for the
        // whole call; posix_fallocate has no memory-safety preconditions.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc == 0 {
            return Ok(());
        }
        // Some file systems cannot; fall back to a sparse file.
        if rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    file.set_len(len)
}

impl SwapBackend for FileBackend {
    fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_at(&self.file, buf, offset * PAGE_SIZE)
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        write_at(&self.file, buf, offset * PAGE_SIZE)
    }

    fn kind(&self) -> &'static str {
        "file"
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, pos)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, pos)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(file, buf, pos)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        pos += n as u64;
    }
    Ok(())
}

#[cfg(windows)]
fn write_at(file: &File, mut buf: &[u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, buf, pos)?;
        buf = &buf[n..];
        pos += n as u64;
    }
    Ok(())
}

fn check_size(size_bytes: u64) -> Result<u64, SwapError> {
    if !size_bytes.is_multiple_of(PAGE_SIZE) || size_bytes < 2 * PAGE_SIZE {
        return Err(SwapError::BadSize(size_bytes));
    }
    Ok(size_bytes / PAGE_SIZE)
}

/// An injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next writes fail with EIO.
    Write,
    /// The next reads fail with EIO.
    Read,
}

/// Wraps a backend and fails the next N reads or writes on request.
pub struct FaultyBackend<B> {
    inner: B,
    failing_writes: AtomicU64,
    failing_reads: AtomicU64,
}

impl<B: SwapBackend> FaultyBackend<B> {
    /// Wraps `inner`, failing nothing yet.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            failing_writes: AtomicU64::new(0),
            failing_reads: AtomicU64::new(0),
        }
    }

    /// A handle to inject faults after the backend is swapped on.
    pub fn injector(self: &Arc<Self>) -> Arc<Self> {
        Arc::clone(self)
    }

    /// Makes the next `count` operations of `kind` fail with EIO.
    pub fn inject(&self, kind: Fault, count: u64) {
        let counter = match kind {
            Fault::Write => &self.failing_writes,
            Fault::Read => &self.failing_reads,
        };
        counter.store(count, Ordering::Relaxed);
    }

    fn take(counter: &AtomicU64) -> bool {
        counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl<B: SwapBackend> SwapBackend for FaultyBackend<B> {
    fn nr_pages(&self) -> u64 {
        self.inner.nr_pages()
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if Self::take(&self.failing_reads) {
            return Err(io::Error::other("injected read error"));
        }
        self.inner.read_page(offset, buf)
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if Self::take(&self.failing_writes) {
            return Err(io::Error::other("injected write error"));
        }
        self.inner.write_page(offset, buf)
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

impl<B: SwapBackend> SwapBackend for Arc<B> {
    fn nr_pages(&self) -> u64 {
        (**self).nr_pages()
    }
    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_page(offset, buf)
    }
    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        (**self).write_page(offset, buf)
    }
    fn kind(&self) -> &'static str {
        (**self).kind()
    }
}

/// Bits of a per-cluster bitmap.
type ClusterBits = [u64; SWAPFILE_CLUSTER / 64];

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
}

impl Cluster {
    fn new() -> Self {
        Self {
            counts: [0; SWAPFILE_CLUSTER],
            zero: [0; SWAPFILE_CLUSTER / 64],
            cache: [0; SWAPFILE_CLUSTER / 64],
            used: 0,
            order: 0,
        }
    }

    fn slot_free(&self, i: usize) -> bool {
        self.counts[i] == 0 && !bit(&self.cache, i)
    }

    /// Returns slot `i`, which its last user just gave up, to the free pool.
    fn release(&mut self, i: usize) {
        set_bit(&mut self.zero, i, false);
        self.used -= 1;
    }

    /// The list a cluster belongs on after slots were freed.
    fn list_after_free(&self) -> OnList {
        if self.used == 0 {
            OnList::Free
        } else {
            OnList::Nonfull(usize::from(self.order))
        }
    }

    /// A naturally aligned free run of `1 << order` slots.
    fn find_run(&self, order: usize) -> Option<usize> {
        let n = 1 << order;
        (0..SWAPFILE_CLUSTER)
            .step_by(n)
            .find(|&start| (start..start + n).all(|i| self.slot_free(i)))
    }
}

/// Which list a cluster is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnList {
    Free,
    Nonfull(usize),
    Full,
}

/// The device's cluster lists (free, nonfull per order, full).
struct Lists {
    free: std::collections::VecDeque<u32>,
    nonfull: [Vec<u32>; NR_ORDERS],
    on: Vec<OnList>,
}

impl Lists {
    fn move_to(&mut self, ci: u32, to: OnList) {
        let from = self.on[ci as usize];
        if from == to {
            return;
        }
        match from {
            OnList::Free => self.free.retain(|&c| c != ci),
            OnList::Nonfull(o) => self.nonfull[o].retain(|&c| c != ci),
            OnList::Full => {}
        }
        match to {
            OnList::Free => self.free.push_back(ci),
            OnList::Nonfull(o) => self.nonfull[o].push(ci),
            OnList::Full => {}
        }
        self.on[ci as usize] = to;
    }
}

/// One swapped-on device (`swap_info_struct`).
pub struct SwapDevice {
    ty: u32,
    name: String,
    prio: i32,
    backend: Box<dyn SwapBackend>,
    nr_pages: u64,
    clusters: Box<[Mutex<Cluster>]>,
    lists: Mutex<Lists>,
    inuse_pages: AtomicU64,
    /// Cleared while swapoff runs: no new allocations.
    writable: AtomicBool,
}

impl SwapDevice {
    fn new(ty: u32, name: String, prio: i32, backend: Box<dyn SwapBackend>) -> Self {
        let nr_pages = backend.nr_pages();
        let nr_clusters = nr_pages.div_ceil(SWAPFILE_CLUSTER as u64) as usize;
        let clusters: Box<[Mutex<Cluster>]> = (0..nr_clusters)
            .map(|_| Mutex::new(Cluster::new()))
            .collect();
        // Slot 0 (the header) and slots past the end are never handed out:
        // mark them in use forever.
        let mut reserved = vec![0u16; nr_clusters];
        for slot in std::iter::once(0).chain(nr_pages..(nr_clusters * SWAPFILE_CLUSTER) as u64) {
            let (ci, i) = (
                slot as usize / SWAPFILE_CLUSTER,
                slot as usize % SWAPFILE_CLUSTER,
            );
            lock(&clusters[ci]).counts[i] = u8::MAX;
            reserved[ci] += 1;
        }
        let mut lists = Lists {
            free: std::collections::VecDeque::new(),
            nonfull: std::array::from_fn(|_| Vec::new()),
            on: vec![OnList::Free; nr_clusters],
        };
        for (ci, &r) in reserved.iter().enumerate() {
            let mut c = lock(&clusters[ci]);
            c.used = r;
            if r == 0 {
                lists.free.push_back(ci as u32);
            } else {
                // Partly reserved clusters serve single pages only.
                lists.on[ci] = OnList::Nonfull(0);
                lists.nonfull[0].push(ci as u32);
            }
        }
        Self {
            ty,
            name,
            prio,
            backend,
            nr_pages,
            clusters,
            lists: Mutex::new(lists),
            inuse_pages: AtomicU64::new(0),
            writable: AtomicBool::new(true),
        }
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
        self.prio
    }

    /// Pages of the device (slot 0 included).
    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Slots in use.
    pub fn inuse_pages(&self) -> u64 {
        self.inuse_pages.load(Ordering::Relaxed)
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

    /// Accounts `freed` slots just released from `entry`'s cluster, which
    /// now belongs on `to`. Runs under the list lock.
    fn account_freed(&self, lists: &mut Lists, entry: SwapEntry, freed: u32, to: OnList) {
        if freed == 0 {
            return;
        }
        let ci = (entry.swp_offset() as usize / SWAPFILE_CLUSTER) as u32;
        lists.move_to(ci, to);
        self.inuse_pages
            .fetch_sub(u64::from(freed), Ordering::Relaxed);
    }

    fn cluster_of(&self, entry: SwapEntry) -> Result<(&Mutex<Cluster>, usize), SwapError> {
        let off = entry.swp_offset();
        if entry.swp_type() != self.ty || off == 0 || off >= self.nr_pages {
            return Err(SwapError::BadEntry(entry));
        }
        Ok((
            &self.clusters[off as usize / SWAPFILE_CLUSTER],
            off as usize % SWAPFILE_CLUSTER,
        ))
    }

    /// Allocates a naturally aligned run of `1 << order` slots, each with a
    /// count of 1; `None` when no run is free.
    fn alloc(&self, order: usize) -> Option<SwapEntry> {
        if !self.writable.load(Ordering::Acquire) || order >= NR_ORDERS {
            return None;
        }
        let mut lists = lock(&self.lists);
        let candidates: Vec<u32> = lists.nonfull[order]
            .iter()
            .copied()
            .chain(lists.free.front().copied())
            .chain(if order == 0 {
                (1..NR_ORDERS)
                    .flat_map(|o| lists.nonfull[o].clone())
                    .collect()
            } else {
                Vec::new()
            })
            .collect();
        for ci in candidates {
            let mut c = lock(&self.clusters[ci as usize]);
            let was_free = lists.on[ci as usize] == OnList::Free;
            if was_free {
                c.order = order as u8;
            }
            let Some(start) = c.find_run(order) else {
                continue;
            };
            let n = 1usize << order;
            for i in start..start + n {
                c.counts[i] = 1;
            }
            c.used += n as u16;
            let to = if usize::from(c.used) == SWAPFILE_CLUSTER {
                OnList::Full
            } else if was_free {
                OnList::Nonfull(order)
            } else {
                lists.on[ci as usize]
            };
            drop(c);
            lists.move_to(ci, to);
            self.inuse_pages.fetch_add(n as u64, Ordering::Relaxed);
            let offset = ci as u64 * SWAPFILE_CLUSTER as u64 + start as u64;
            return SwapEntry::new(self.ty, offset).ok();
        }
        None
    }

    /// Changes the count of `nr` slots from `entry` by `delta` (+1 dup, −1
    /// put), freeing slots that reach zero outside the swap cache. Returns
    /// how many slots became free.
    fn adjust(&self, entry: SwapEntry, nr: u32, delta: i8) -> Result<u32, SwapError> {
        let mut lists = lock(&self.lists);
        let (cluster, start) = self.cluster_range(entry, nr)?;
        let mut c = lock(cluster);
        // Check every slot first: all or nothing.
        for i in start..start + nr as usize {
            let count = c.counts[i];
            let ok = match delta {
                1 => (1..SWAP_MAP_MAX).contains(&count),
                _ => count != 0 && count != u8::MAX,
            };
            if !ok {
                return Err(if delta == 1 && count >= SWAP_MAP_MAX && count != u8::MAX {
                    SwapError::TooManyRefs(entry)
                } else {
                    SwapError::BadEntry(entry)
                });
            }
        }
        let mut freed = 0;
        for i in start..start + nr as usize {
            c.counts[i] = c.counts[i].wrapping_add_signed(delta);
            if delta < 0 && c.slot_free(i) {
                c.release(i);
                freed += 1;
            }
        }
        let to = c.list_after_free();
        drop(c);
        self.account_freed(&mut lists, entry, freed, to);
        Ok(freed)
    }

    /// The reference count of one slot.
    pub fn count(&self, entry: SwapEntry) -> Result<u8, SwapError> {
        let (cluster, i) = self.cluster_of(entry)?;
        Ok(lock(cluster).counts[i])
    }

    /// Marks `nr` slots as held (or released) by the swap cache; releasing
    /// frees slots whose count is already zero. Returns how many were freed.
    fn set_cache(&self, entry: SwapEntry, nr: u32, held: bool) -> Result<u32, SwapError> {
        let mut lists = lock(&self.lists);
        let (cluster, start) = self.cluster_range(entry, nr)?;
        let mut c = lock(cluster);
        let mut freed = 0;
        for i in start..start + nr as usize {
            set_bit(&mut c.cache, i, held);
            if !held && c.counts[i] == 0 {
                c.release(i);
                freed += 1;
            }
        }
        let to = c.list_after_free();
        drop(c);
        self.account_freed(&mut lists, entry, freed, to);
        Ok(freed)
    }

    /// Writes one page (zero pages only set their bit).
    fn write(&self, entry: SwapEntry, page: &[u8]) -> Result<Stored, SwapError> {
        let (cluster, i) = self.cluster_of(entry)?;
        let zero = is_zero(page);
        if !zero {
            self.backend
                .write_page(entry.swp_offset(), page)
                .map_err(|source| SwapError::Io { entry, source })?;
        }
        set_bit(&mut lock(cluster).zero, i, zero);
        Ok(if zero {
            Stored::ZeroBit
        } else {
            Stored::Device
        })
    }

    /// Reads one page (zero pages are filled, not read).
    fn read(&self, entry: SwapEntry, page: &mut [u8]) -> Result<Stored, SwapError> {
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

    /// Every slot in use, as entries, in offset order.
    fn used_entries(&self) -> Vec<SwapEntry> {
        let mut out = Vec::new();
        for (ci, cluster) in self.clusters.iter().enumerate() {
            let c = lock(cluster);
            for (i, &count) in c.counts.iter().enumerate() {
                if count != 0 && count != u8::MAX {
                    let offset = (ci * SWAPFILE_CLUSTER + i) as u64;
                    out.extend(SwapEntry::new(self.ty, offset).ok());
                }
            }
        }
        out
    }
}

/// Where a page's contents live on a swap device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// All zeros: only the slot's zero bit is set; nothing was written.
    ZeroBit,
    /// Written to (or read from) the backend.
    Device,
}

/// Whether a page is all zeros.
pub fn is_zero(page: &[u8]) -> bool {
    // OR 64 bytes at a time: the inner fold has no early exit, so it
    // vectorises, while `all` still stops at the first non-zero chunk.
    let mut chunks = page.chunks_exact(64);
    chunks
        .by_ref()
        .all(|c| c.iter().fold(0, |acc, &b| acc | b) == 0)
        && chunks.remainder().iter().all(|&b| b == 0)
}

impl fmt::Debug for SwapDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapDevice")
            .field("ty", &self.ty)
            .field("name", &self.name)
            .field("prio", &self.prio)
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

/// The swap table (`swap_info[]`): every device, by type.
pub struct Swapfiles {
    devices: Box<[ArcSlot<SwapDevice>]>,
    swapon_mutex: Mutex<SwapTable>,
}

struct SwapTable {
    /// The next default priority (`least_priority`, counting down).
    least_priority: i32,
    /// Which equal-priority device to try first (round-robin).
    rotor: usize,
}

impl Default for Swapfiles {
    fn default() -> Self {
        Self {
            devices: (0..MAX_SWAPFILES).map(|_| ArcSlot::empty()).collect(),
            swapon_mutex: Mutex::new(SwapTable {
                least_priority: -1,
                rotor: 0,
            }),
        }
    }
}

impl Swapfiles {
    /// Swaps on `backend` under `name` with `prio` (or the next default,
    /// -2, -3, ...); returns its type. The caller then allocates the
    /// device's swap_cgroup map.
    pub fn swapon(
        &self,
        name: &str,
        backend: Box<dyn SwapBackend>,
        prio: Option<i32>,
    ) -> Result<Arc<SwapDevice>, SwapError> {
        let mut table = lock(&self.swapon_mutex);
        if self.iter().any(|d| d.name == name) {
            return Err(SwapError::AlreadyOn(name.to_owned()));
        }
        let ty = (0..self.devices.len())
            .find(|&t| self.devices[t].with(|d| d.is_none()))
            .ok_or(SwapError::TooManyDevices)?;
        let prio = prio.unwrap_or_else(|| {
            table.least_priority -= 1;
            table.least_priority
        });
        let device = Arc::new(SwapDevice::new(ty as u32, name.to_owned(), prio, backend));
        self.devices[ty].swap(Some(Arc::clone(&device)));
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

    /// Allocates `1 << order` slots on the highest-priority device with
    /// room (devices of equal priority take turns).
    pub fn alloc(&self, order: usize) -> Option<SwapEntry> {
        let mut devices: Vec<Arc<SwapDevice>> = self.iter().collect();
        if devices.is_empty() {
            return None;
        }
        let rotor = {
            let mut table = lock(&self.swapon_mutex);
            table.rotor = table.rotor.wrapping_add(1);
            table.rotor
        };
        let n = devices.len();
        devices.rotate_left(rotor % n);
        devices.sort_by_key(|d| std::cmp::Reverse(d.prio)); // stable: rotation breaks ties
        devices.iter().find_map(|d| d.alloc(order))
    }

    fn device(&self, entry: SwapEntry) -> Result<Arc<SwapDevice>, SwapError> {
        self.get(entry.swp_type()).ok_or(SwapError::BadEntry(entry))
    }

    /// Adds a reference to `nr` slots (`swap_duplicate`, a shared mapping).
    pub fn dup(&self, entry: SwapEntry, nr: u32) -> Result<(), SwapError> {
        self.device(entry)?.adjust(entry, nr, 1).map(drop)
    }

    /// Drops a reference to `nr` slots; returns how many became free
    /// (`swap_free_nr`). Swap accounting of freed slots is the caller's.
    pub fn put(&self, entry: SwapEntry, nr: u32) -> Result<u32, SwapError> {
        self.device(entry)?.adjust(entry, nr, -1)
    }

    /// Marks `nr` slots as held by the swap cache or not; returns how many
    /// slots releasing freed.
    pub fn set_cache(&self, entry: SwapEntry, nr: u32, held: bool) -> Result<u32, SwapError> {
        self.device(entry)?.set_cache(entry, nr, held)
    }

    /// Writes page `i` of a folio swapped to `entry`.
    pub fn write_page(&self, entry: SwapEntry, page: &[u8]) -> Result<Stored, SwapError> {
        self.device(entry)?.write(entry, page)
    }

    /// Reads the page at `entry`.
    pub fn read_page(&self, entry: SwapEntry, page: &mut [u8]) -> Result<Stored, SwapError> {
        self.device(entry)?.read(entry, page)
    }

    /// Stops allocation on `ty` (the first step of swapoff) and returns the
    /// slots still in use.
    pub fn begin_swapoff(&self, ty: u32) -> Result<Vec<SwapEntry>, SwapError> {
        let device = self
            .get(ty)
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        device.writable.store(false, Ordering::Release);
        Ok(device.used_entries())
    }

    /// Lets `ty` allocate again (a swapoff that failed).
    pub fn abort_swapoff(&self, ty: u32) {
        if let Some(d) = self.get(ty) {
            d.writable.store(true, Ordering::Release);
        }
    }

    /// Removes `ty` once it has no slot in use.
    pub fn finish_swapoff(&self, ty: u32) -> Result<Arc<SwapDevice>, SwapError> {
        let _table = lock(&self.swapon_mutex);
        let device = self
            .get(ty)
            .ok_or_else(|| SwapError::NoSuchDevice(ty.to_string()))?;
        if device.inuse_pages() != 0 {
            device.writable.store(true, Ordering::Release);
            return Err(SwapError::Unuse(format!(
                "{} pages still in use",
                device.inuse_pages()
            )));
        }
        self.devices[ty as usize].swap(None);
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
                prio: d.prio,
            })
            .collect()
    }

    /// `/proc/swaps` as text.
    pub fn proc_swaps(&self) -> String {
        let mut out = String::from("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
        for l in self.swaps() {
            out.push_str(&format!(
                "{:<40}{:<16}{:<16}{:<16}{}\n",
                l.filename, l.kind, l.size_kb, l.used_kb, l.prio
            ));
        }
        out
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

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
    }

    #[test]
    fn zero_pages_are_not_written_and_read_back_as_zeros() {
        let backend = Arc::new(RamBackend::new(64 * PAGE_SIZE).unwrap());
        let sf = Swapfiles::default();
        sf.swapon("ram0", Box::new(Arc::clone(&backend)), None)
            .unwrap();
        let (z, d) = (sf.alloc(0).unwrap(), sf.alloc(0).unwrap());
        sf.write_page(z, &[0u8; PAGE_BYTES]).unwrap();
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

    #[test]
    fn file_backend_round_trips_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swapfile");
        let f = FileBackend::open(&path, 64 * PAGE_SIZE).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            64 * PAGE_SIZE,
            "sized"
        );
        let page: Vec<u8> = (0..PAGE_BYTES).map(|i| i as u8).collect();
        f.write_page(9, &page).unwrap();
        let mut back = vec![0u8; PAGE_BYTES];
        f.read_page(9, &mut back).unwrap();
        assert_eq!(back, page);
        drop(f);
        // Reused: an existing file at least as big.
        let again = FileBackend::open(&path, 32 * PAGE_SIZE).unwrap();
        again.read_page(9, &mut back).unwrap();
        assert_eq!(back, page);
    }

    #[test]
    fn faults_are_injected_once_each() {
        let faulty = Arc::new(FaultyBackend::new(RamBackend::new(64 * PAGE_SIZE).unwrap()));
        faulty.inject(Fault::Write, 1);
        assert!(faulty.write_page(1, &[1u8; PAGE_BYTES]).is_err());
        assert!(faulty.write_page(1, &[1u8; PAGE_BYTES]).is_ok());
        faulty.inject(Fault::Read, 2);
        let mut b = [0u8; PAGE_BYTES];
        assert!(faulty.read_page(1, &mut b).is_err());
        assert!(faulty.read_page(1, &mut b).is_err());
        assert!(faulty.read_page(1, &mut b).is_ok());
    }
}
