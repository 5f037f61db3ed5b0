//! A folio: a run of `nr` pages of anonymous memory with real bytes, and
//! the charge that comes with them (the kernel's `struct folio`, reduced to
//! what reclaim and swap need).
//!
//! Invariants: a folio holds `nr * PAGE_SIZE` bytes and, until it is split,
//! `nr` pages of `Anon` charge on its memory cgroup; dropping it uncharges
//! exactly what it still holds, so a folio cannot leak or double its
//! charge. Splitting moves the charge page by page to the pieces.
//!
//! Locking: the bytes sit behind the folio's own mutex, taken only to copy
//! pages in or out; the charge fields never change after creation except
//! in [`Folio::split`], which owns the folio.

use std::fmt;

use crate::memcontrol::{CgroupTree, ChargeError, ChargeKind, Gfp, MemCgroup};
use crate::mm_types::PAGE_BYTES;
use crate::page_alloc::PageBuf;
use crate::sync::{Arc, Mutex, MutexGuard, lock};
use crate::vmscan::{self, FolioLru};

/// A folio of anonymous memory: `nr` pages of real bytes, charged to a
/// cgroup for as long as it lives (dropping it uncharges).
pub struct Folio {
    data: Mutex<PageBuf>,
    nr: u32,
    /// Pages this folio will uncharge when dropped (0 once split).
    charged: u32,
    /// The memory cgroup charged; it also leads to the machine's frames
    /// the bytes go back to, so a folio holds no reference to the tree.
    memcg: Arc<MemCgroup>,
    /// Its place on the memory cgroup's LRU lists (`vmscan.rs`).
    lru: FolioLru,
}

impl Folio {
    /// A zeroed folio of `nr` pages charged to `memcg` (which must belong
    /// to `tree`).
    pub fn new(tree: &CgroupTree, memcg: &Arc<MemCgroup>, nr: u32) -> Result<Self, ChargeError> {
        Self::new_gfp(tree, memcg, nr, Gfp::Kernel)
    }

    /// [`Folio::new`], charged with the effort `gfp` allows (an mTHP fault
    /// charges large folios with [`Gfp::NoReclaim`] and falls back to
    /// single pages when that fails).
    pub fn new_gfp(
        tree: &CgroupTree,
        memcg: &Arc<MemCgroup>,
        nr: u32,
        gfp: Gfp,
    ) -> Result<Self, ChargeError> {
        tree.try_charge_gfp(memcg, u64::from(nr), ChargeKind::Anon, gfp)?;
        Ok(Self::adopt(Arc::clone(memcg), nr))
    }

    /// A zeroed folio whose charge was already made to `memcg` (a swap-in
    /// charged before it reads).
    pub(crate) fn adopt(memcg: Arc<MemCgroup>, nr: u32) -> Self {
        Self::with_buffer(memcg, nr, true)
    }

    /// [`Folio::adopt`] for a caller that fills every byte itself (a read
    /// from swap): a reused buffer is not zeroed first.
    pub(crate) fn adopt_to_fill(memcg: Arc<MemCgroup>, nr: u32) -> Self {
        Self::with_buffer(memcg, nr, false)
    }

    fn with_buffer(memcg: Arc<MemCgroup>, nr: u32, zeroed: bool) -> Self {
        Self {
            data: Mutex::new(memcg.page_allocator().alloc(nr, zeroed)),
            nr,
            charged: nr,
            memcg,
            lru: FolioLru::default(),
        }
    }

    /// Splits a large folio into single-page folios with the same bytes,
    /// moving its charge to them (no page is charged twice, as the kernel's
    /// `split_folio`). Fails, returning the folio, if it is shared.
    pub fn split(folio: Arc<Folio>) -> Result<Vec<Arc<Folio>>, Arc<Folio>> {
        let mut folio = Arc::try_unwrap(folio)?;
        folio.charged = 0;
        let bytes = folio.bytes();
        Ok(bytes
            .chunks_exact(PAGE_BYTES)
            .map(|page| {
                let piece = Folio::adopt_to_fill(Arc::clone(&folio.memcg), 1);
                piece.bytes().copy_from_slice(page);
                Arc::new(piece)
            })
            .collect())
    }

    /// Pages in the folio.
    pub fn nr(&self) -> u32 {
        self.nr
    }

    /// The cgroup its memory is charged to.
    pub fn memcg(&self) -> &Arc<MemCgroup> {
        &self.memcg
    }

    /// Reclaim's state of the folio.
    pub(crate) fn lru(&self) -> &FolioLru {
        &self.lru
    }

    /// Its bytes (`nr * 4096`), locked.
    pub fn bytes(&self) -> MutexGuard<'_, PageBuf> {
        lock(&self.data)
    }
}

impl Drop for Folio {
    fn drop(&mut self) {
        vmscan::folio_freed(self);
        if self.charged > 0 {
            self.memcg
                .uncharge_pages(u64::from(self.charged), ChargeKind::Anon);
        }
        let buf = std::mem::replace(&mut *lock(&self.data), PageBuf::empty());
        self.memcg.page_allocator().free(buf);
    }
}

impl fmt::Debug for Folio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folio")
            .field("nr", &self.nr)
            .field("memcg", &self.memcg.path())
            .finish_non_exhaustive()
    }
}
