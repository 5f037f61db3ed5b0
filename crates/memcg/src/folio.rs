//! A folio: a run of `nr` pages with real bytes, anonymous memory or page
//! cache, and the charge that comes with them (the kernel's `struct folio`,
//! reduced to what reclaim, swap and the page cache need).
//!
//! Invariants: a folio holds `nr * PAGE_SIZE` bytes and, until it is split,
//! `nr` pages of charge of its kind (`Anon` or `File`) on its memory
//! cgroup; dropping it uncharges exactly what it still holds, so a folio
//! cannot leak or double its charge. Splitting moves the charge page by
//! page to the pieces. A dirty page-cache folio counts in `file_dirty`
//! until it is cleaned or freed.
//!
//! The memory cgroup of a folio changes only when the tree reparents LRU
//! folios at offline (the 2026 behaviour, `lruvec::reparent_lruvec`),
//! which moves the charge with it under both memory cgroups' LRU locks;
//! readers load it without a lock ([`Folio::memcg`], the kernel's
//! `folio_memcg` under RCU).
//!
//! Locking: the bytes sit behind the folio's own mutex, taken only to copy
//! pages in or out; the charge fields never change after creation except
//! in [`Folio::split`], which owns the folio.

use std::fmt;
use std::ops::Deref;

use crate::lruvec::{self, FolioLru};
use crate::memcontrol::{CgroupTree, ChargeError, ChargeKind, Gfp, MemCgroup, MemcgStat};
use crate::mm_types::PAGE_BYTES;
use crate::page_alloc::PageBuf;
use crate::sync::{Arc, ArcSlot, AtomicBool, Mutex, MutexGuard, Ordering, SlotGuard, lock};

/// What a folio holds (`folio_is_file_lru`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolioKind {
    /// Anonymous memory: swapped out by reclaim.
    Anon,
    /// Page cache: dropped by reclaim once clean.
    File,
}

/// A folio: `nr` pages of real bytes, charged to a cgroup for as long as it
/// lives (dropping it uncharges).
pub struct Folio {
    data: Mutex<PageBuf>,
    nr: u32,
    kind: FolioKind,
    /// Its first page's index in its file (`folio->index`; 0 for anon).
    index: u64,
    /// Pages this folio will uncharge when dropped (0 once split).
    charged: u32,
    /// The memory cgroup charged; it also leads to the machine's frames
    /// the bytes go back to, so a folio holds no reference to the tree.
    /// Changed only by LRU reparenting (module docs).
    memcg: ArcSlot<MemCgroup>,
    /// `PG_dirty`: written and not yet written back (page cache only).
    dirty: AtomicBool,
    /// `PG_readahead`: reading it starts the next readahead window
    /// (page cache only; `readahead.rs`).
    readahead: AtomicBool,
    /// `PG_writeback`: its bytes are on their way to the backing store.
    writeback: AtomicBool,
    /// Its place on the memory cgroup's LRU lists (`lruvec.rs`).
    lru: FolioLru,
}

/// A folio's memory cgroup, loaded (see [`Folio::memcg`]).
pub struct FolioMemcg(SlotGuard<MemCgroup>);

impl Deref for FolioMemcg {
    type Target = Arc<MemCgroup>;

    fn deref(&self) -> &Arc<MemCgroup> {
        self.0.arc().expect("a folio always has a memory cgroup")
    }
}

impl Folio {
    /// A zeroed anonymous folio of `nr` pages charged to `memcg` (which
    /// must belong to `tree`) with the effort `gfp` allows (an mTHP fault
    /// charges large folios with [`Gfp::NoReclaim`] and falls back to
    /// single pages when that fails).
    pub fn new(
        tree: &CgroupTree,
        memcg: &Arc<MemCgroup>,
        nr: u32,
        gfp: Gfp,
    ) -> Result<Self, ChargeError> {
        tree.try_charge(memcg, u64::from(nr), ChargeKind::Anon, gfp)?;
        Ok(Self::adopt(Arc::clone(memcg), nr))
    }

    /// A page-cache folio of `nr` pages charged to `memcg`, its bytes left
    /// for the caller to fill whole (`filemap_alloc_folio` +
    /// `mem_cgroup_charge`), with the effort `gfp` allows (readahead
    /// charges with [`Gfp::NoRetry`]).
    pub(crate) fn new_file(
        tree: &CgroupTree,
        memcg: &Arc<MemCgroup>,
        nr: u32,
        index: u64,
        gfp: Gfp,
    ) -> Result<Self, ChargeError> {
        tree.try_charge(memcg, u64::from(nr), ChargeKind::File, gfp)?;
        let mut folio = Self::with_buffer(Arc::clone(memcg), nr, FolioKind::File, false);
        folio.index = index;
        Ok(folio)
    }

    /// A zeroed folio whose charge was already made to `memcg` (a swap-in
    /// charged before it reads).
    pub(crate) fn adopt(memcg: Arc<MemCgroup>, nr: u32) -> Self {
        Self::with_buffer(memcg, nr, FolioKind::Anon, true)
    }

    /// [`Folio::adopt`] for a caller that fills every byte itself (a read
    /// from swap): a reused buffer is not zeroed first.
    pub(crate) fn adopt_to_fill(memcg: Arc<MemCgroup>, nr: u32) -> Self {
        Self::with_buffer(memcg, nr, FolioKind::Anon, false)
    }

    fn with_buffer(memcg: Arc<MemCgroup>, nr: u32, kind: FolioKind, zeroed: bool) -> Self {
        Self {
            data: Mutex::new(memcg.page_allocator().alloc(nr, zeroed)),
            nr,
            kind,
            index: 0,
            charged: nr,
            memcg: ArcSlot::new(memcg),
            dirty: AtomicBool::new(false),
            readahead: AtomicBool::new(false),
            writeback: AtomicBool::new(false),
            lru: FolioLru::default(),
        }
    }

    /// An anonymous folio of `nr` pages charged to `memcg` whose bytes live
    /// elsewhere: in a host process's page that the simulator accounts
    /// (`memcg run`'s anonymous memory). It holds no frame until
    /// [`Folio::backed_bytes`] gives it one to copy the page into on its
    /// way to swap; the charge is the same as [`Folio::new`]'s.
    pub fn new_unbacked(
        tree: &CgroupTree,
        memcg: &Arc<MemCgroup>,
        nr: u32,
        gfp: Gfp,
    ) -> Result<Self, ChargeError> {
        tree.try_charge(memcg, u64::from(nr), ChargeKind::Anon, gfp)?;
        Ok(Self::unbacked_taking_charge(memcg, nr))
    }

    /// A large anonymous folio of `nr` pages charged to `memcg` as one
    /// (one charge, with the effort `gfp` allows: an mTHP fault), split
    /// at once into `nr` single-page folios like [`Folio::new_unbacked`]'s,
    /// each holding one page of the charge: the host process's pages are
    /// filled as the folio, then aged and reclaimed page by page.
    pub fn new_unbacked_split(
        tree: &CgroupTree,
        memcg: &Arc<MemCgroup>,
        nr: u32,
        gfp: Gfp,
    ) -> Result<Vec<Self>, ChargeError> {
        tree.try_charge(memcg, u64::from(nr), ChargeKind::Anon, gfp)?;
        Ok((0..nr)
            .map(|_| Self::unbacked_taking_charge(memcg, 1))
            .collect())
    }

    /// An unbacked anonymous folio of `nr` pages that owns `nr` pages
    /// already charged to `memcg`.
    fn unbacked_taking_charge(memcg: &Arc<MemCgroup>, nr: u32) -> Self {
        // A one-page frame, given back at once: no frame until swap-out.
        let mut folio = Self::with_buffer(Arc::clone(memcg), 1, FolioKind::Anon, false);
        folio.release_bytes();
        folio.nr = nr;
        folio.charged = nr;
        folio
    }

    /// Its bytes, locked, with a frame taken first if it has none (a folio
    /// made by [`Folio::new_unbacked`], or one whose bytes went back with
    /// [`Folio::release_bytes`]): the caller fills every byte.
    pub fn backed_bytes(&self) -> MutexGuard<'_, PageBuf> {
        let mut data = lock(&self.data);
        if data.is_empty() {
            *data = self.memcg().page_allocator().alloc(self.nr, false);
        }
        debug_assert_eq!(data.len(), self.nr as usize * PAGE_BYTES);
        data
    }

    /// Gives its frame back, keeping the charge: its bytes now live in the
    /// host process that mapped them (a swap-in copied them there).
    pub fn release_bytes(&self) {
        let buf = std::mem::replace(&mut *lock(&self.data), PageBuf::empty());
        self.memcg().page_allocator().free(buf);
    }

    /// Splits a large anonymous folio into single-page folios with the
    /// same bytes, moving its charge to them (no page is charged twice, as
    /// the kernel's `split_folio`). Fails, returning the folio, if it is
    /// shared.
    pub fn split(folio: Arc<Folio>) -> Result<Vec<Arc<Folio>>, Arc<Folio>> {
        debug_assert_eq!(folio.kind, FolioKind::Anon, "only anon folios split");
        let mut folio = Arc::try_unwrap(folio)?;
        folio.charged = 0;
        let memcg = Arc::clone(&folio.memcg());
        let bytes = folio.bytes();
        Ok(bytes
            .chunks_exact(PAGE_BYTES)
            .map(|page| {
                let piece = Folio::adopt_to_fill(Arc::clone(&memcg), 1);
                piece.bytes().copy_from_slice(page);
                Arc::new(piece)
            })
            .collect())
    }

    /// Pages in the folio.
    pub fn nr(&self) -> u32 {
        self.nr
    }

    /// Its first page's index in its file (page cache).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Anonymous memory or page cache.
    pub fn kind(&self) -> FolioKind {
        self.kind
    }

    /// Whether it is page cache (`folio_is_file_lru`).
    pub(crate) fn is_file(&self) -> bool {
        self.kind == FolioKind::File
    }

    /// The memory cgroup its memory is charged to (`folio_memcg`).
    pub fn memcg(&self) -> FolioMemcg {
        FolioMemcg(self.memcg.load())
    }

    /// Reclaim's state of the folio.
    pub(crate) fn lru(&self) -> &FolioLru {
        &self.lru
    }

    /// Whether it holds data not yet written back (`folio_test_dirty`).
    pub(crate) fn is_dirty(&self) -> bool {
        // Relaxed: set and cleared under the owning mapping's lock (and
        // the bytes lock).
        self.dirty.load(Ordering::Relaxed)
    }

    /// Marks a page-cache folio written (`folio_mark_dirty`); true if it
    /// was clean. Counts `file_dirty`. Its mapping accounts the rest
    /// (`filemap.rs`), so only it marks.
    pub(crate) fn mark_dirty(&self) -> bool {
        !self.set_dirty(true)
    }

    /// Clears the dirty mark of a folio leaving its mapping
    /// (`folio_cancel_dirty`); true if it was dirty.
    pub(crate) fn clear_dirty(&self) -> bool {
        self.set_dirty(false)
    }

    /// Sets the dirty mark, counting the change in `file_dirty` of the
    /// folio's memory cgroup; returns the old mark. Under the bytes lock,
    /// so that LRU reparenting, which moves the folio and its `file_dirty`
    /// under that lock too, sees either the old mark or the new one with
    /// its count on the same side.
    fn set_dirty(&self, dirty: bool) -> bool {
        let _bytes = lock(&self.data);
        // Relaxed: the bytes lock orders it.
        let was = self.dirty.swap(dirty, Ordering::Relaxed);
        if was != dirty {
            let delta = if dirty { 1 } else { -1 } * i64::from(self.nr);
            self.memcg().mod_stat(MemcgStat::FileDirty, delta);
        }
        was
    }

    /// Whether reading it starts the next readahead window
    /// (`folio_test_readahead`).
    pub fn test_readahead(&self) -> bool {
        // Relaxed: a hint. Set before the folio is published under its
        // mapping's lock (which orders it for readers of the mapping) and
        // cleared by whichever reader triggers the window; two readers
        // both seeing it start the same window, as in the kernel.
        self.readahead.load(Ordering::Relaxed)
    }

    /// Marks it as the trigger of the next readahead window
    /// (`folio_set_readahead`), before it is added to its mapping.
    pub(crate) fn set_readahead(&self) {
        // Relaxed: see `test_readahead`.
        self.readahead.store(true, Ordering::Relaxed);
    }

    /// Clears the readahead mark (`folio_clear_readahead`).
    pub(crate) fn clear_readahead(&self) {
        // Relaxed: see `test_readahead`.
        self.readahead.store(false, Ordering::Relaxed);
    }

    /// Whether it is being written back (`folio_test_writeback`).
    pub(crate) fn is_writeback(&self) -> bool {
        // Relaxed: set and cleared under the owning mapping's lock (and
        // the bytes lock).
        self.writeback.load(Ordering::Relaxed)
    }

    /// Starts writeback of a dirty folio (`folio_clear_dirty_for_io` +
    /// `folio_start_writeback`): the dirty mark becomes the writeback mark,
    /// `file_dirty` becomes `file_writeback`. False, changing nothing, if
    /// it was not dirty.
    pub(crate) fn start_writeback(&self) -> bool {
        let _bytes = lock(&self.data);
        // Relaxed: the bytes lock orders both marks.
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return false;
        }
        self.writeback.store(true, Ordering::Relaxed);
        let nr = i64::from(self.nr);
        let memcg = self.memcg();
        memcg.mod_stat(MemcgStat::FileDirty, -nr);
        memcg.mod_stat(MemcgStat::FileWriteback, nr);
        true
    }

    /// Ends its writeback (`folio_end_writeback`'s flag and count); true if
    /// it was under writeback.
    pub(crate) fn end_writeback(&self) -> bool {
        let _bytes = lock(&self.data);
        // Relaxed: the bytes lock orders it.
        let was = self.writeback.swap(false, Ordering::Relaxed);
        if was {
            self.memcg()
                .mod_stat(MemcgStat::FileWriteback, -i64::from(self.nr));
        }
        was
    }

    /// Moves the folio to `memcg` (LRU reparenting; the caller holds both
    /// LRU locks and moves the charge); returns whether it was dirty and
    /// whether it was under writeback.
    pub(crate) fn reparent_to(&self, memcg: Arc<MemCgroup>) -> (bool, bool) {
        let _bytes = lock(&self.data);
        drop(self.memcg.swap(Some(memcg)));
        (self.is_dirty(), self.is_writeback())
    }

    /// Its bytes (`nr * 4096`), locked.
    pub fn bytes(&self) -> MutexGuard<'_, PageBuf> {
        lock(&self.data)
    }

    fn charge_kind(&self) -> ChargeKind {
        match self.kind {
            FolioKind::Anon => ChargeKind::Anon,
            FolioKind::File => ChargeKind::File,
        }
    }
}

impl Drop for Folio {
    fn drop(&mut self) {
        lruvec::folio_freed(self);
        self.clear_dirty();
        self.end_writeback();
        let memcg = self.memcg();
        if self.charged > 0 {
            memcg.uncharge_pages(u64::from(self.charged), self.charge_kind());
        }
        let buf = std::mem::replace(&mut *lock(&self.data), PageBuf::empty());
        memcg.page_allocator().free(buf);
    }
}

impl fmt::Debug for Folio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folio")
            .field("nr", &self.nr)
            .field("kind", &self.kind)
            .field("memcg", &self.memcg().path())
            .finish_non_exhaustive()
    }
}
