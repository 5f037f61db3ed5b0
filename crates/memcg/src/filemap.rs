//! The page cache of one file (mm/filemap.c, mm/truncate.c, the
//! page-cache half of mm/vmscan.c's `__remove_mapping`, v6.14).
//!
//! # What it does
//!
//! An [`AddressSpace`] maps page indices of a file to cached folios, or
//! to the [`Shadow`] an evicted folio left behind. A read
//! ([`AddressSpace::read`], `filemap_read`) goes through its open file's
//! readahead state: a page not in the cache starts synchronous readahead
//! (`readahead.rs`), which brings in a window of pages around it, and a
//! page marked `PG_readahead` starts the next window ahead of the reader.
//! Each page brought in is a folio charged to the reading task's memory
//! cgroup (`filemap_add_folio` + `mem_cgroup_charge`), filled from the
//! file's [`Backing`] store, and put on that cgroup's file LRU, inactive
//! and not accessed, or active straight away if a shadow says it was
//! evicted recently (`workingset_refault`). A read marks each folio it
//! copies from accessed (`folio_mark_accessed`: referenced, then active),
//! except the first when the read starts in the page where the previous
//! read of the same open file ended (`pos_same_folio`). A write brings in
//! the pages it writes the same way, without readahead, and marks each
//! folio dirty (`file_dirty`, `folio_account_dirtied`): the inode's first
//! dirty page puts it on the dirty list of a writeback of its backing
//! device ([`Bdi`], the memory cgroup charged for that page's), and after
//! each page the writing task is balanced against its dirty limits
//! (`balance_dirty_pages`, in `page_writeback.rs`). Dirty folios are
//! written back only by the device's flusher (`writeback.rs`), a chunk at
//! a time from where the last writeback stopped
//! ([`AddressSpace::writeback`] for an fsync): `file_writeback` while in
//! flight, and at the end of the write a folio reclaim had marked
//! (`PG_reclaim`) moves to the inactive list's oldest end
//! (`folio_end_writeback`).
//!
//! Reclaim reaches a folio through its LRU entry, whose [`Rmap`] is the
//! mapping: the mapping, locked without waiting, drops the folio if it is
//! clean and nobody else holds it (`folio_ref_freeze`), leaving a shadow.
//! A dirty folio or one under writeback is never written or dropped by
//! reclaim: it goes back to reclaim, which activates it for the flusher
//! (`shrink_folio_list`). `drop_caches` ([`AddressSpace::invalidate`])
//! drops every clean unused folio and the shadows, leaving no shadows for
//! what it dropped (`mapping_try_invalidate`); removing the file
//! ([`AddressSpace::truncate`]) drops everything, once writes in flight
//! are done (`folio_wait_writeback`).
//!
//! The entries sit in radix-tree nodes (`xarray.rs`), 576-byte slab
//! objects charged (`slab_reclaimable`) to the task whose insertion needed
//! them, before it takes the mapping's lock (`xas_nomem`). A leaf holding
//! only shadows goes on the machine's shadow-node list, whose shrinker
//! frees it with its shadows (`workingset.rs`). The inode may be reclaimed
//! only while the mapping is shrinkable (`mapping_shrinkable`: nothing
//! cached, or a lone shadow at index 0, kept in the tree's head); the
//! mapping tells its [`MappingHost`] whenever entries leave and it is.
//!
//! # Invariants
//!
//! - An index holds at most one folio; a folio is in at most one mapping,
//!   at its own [`Folio::index`], and charged to one memory cgroup as a
//!   `File` page for as long as it lives.
//! - A truncated mapping holds nothing and takes nothing in.
//! - Its nodes are exactly those its indices need; each holds one charge of
//!   [`XA_NODE_BYTES`]; a leaf is on the shadow-node list exactly while it
//!   holds only shadows.
//! - The mapping's dirty and writeback counts are the pages of its folios
//!   so marked; while it has a dirty page it is on one writeback's dirty
//!   list, whose dirty count includes them, and on none otherwise.
//!
//! # Locking
//!
//! One mutex per mapping (`i_pages`' xa lock), taken to look up, insert,
//! evict, dirty and start or end a folio's writeback; never held while
//! charging (a charge may reclaim this very mapping, and reclaim may run a
//! flusher), while writing to the backing store, or while copying a read's
//! bytes. A reader copies from a folio it holds a reference to, which keeps
//! reclaim from evicting it: reclaim evicts only a folio whose references
//! are the mapping's and the reclaimer's own. Truncation waits for writes
//! in flight on the mapping's condvar. Lock order: the mapping, then a
//! folio's bytes, then the backing device's lock (a leaf); the mapping,
//! then the shadow-node list (the shadow shrinker, coming from the list,
//! only tries the mapping's lock).

mod writeback;

use std::collections::BTreeMap;

use crate::clock::Work;
use crate::errno::Errno;
use crate::folio::Folio;
use crate::list_lru::{ItemGuard, Walked};
use crate::lruvec::{self, FolioRef, Rmap, RmapOutcome};
use crate::memcontrol::{CgroupTree, ChargeError, Gfp, MemCgroup, MemcgStat, ObjCgroup, SlabKind};
use crate::mm_types::{PAGE_BYTES, PAGE_SIZE};
use crate::readahead::{self, FileRaState, RaMapping};
use crate::sync::{Arc, Condvar, Mutex, MutexGuard, lock};
use crate::vmscan::SwapSpace;
use crate::workingset::{self, Shadow, ShadowNodes, ShadowOwner};
pub use crate::xarray::XA_NODE_BYTES;
use crate::xarray::{self, XaNode, XaNodes};
pub use writeback::Bdi;
#[cfg(not(loom))]
pub use writeback::FlusherThread;
use writeback::Wb;

/// Why a page-cache operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilemapError {
    /// The page could not be charged (`ENOMEM`).
    #[error("page cache charge failed: {0}")]
    Charge(#[from] ChargeError),
    /// The backing store failed.
    #[error("backing store: {0}")]
    Backing(#[from] BackingError),
}

impl FilemapError {
    /// The errno a system call would return.
    pub fn errno(&self) -> Errno {
        match self {
            FilemapError::Charge(_) => Errno::ENOMEM,
            FilemapError::Backing(e) => e.errno(),
        }
    }
}

/// Why a backing store refused a page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackingError {
    /// No space left on the device (`ENOSPC`).
    #[error("no space left on the device")]
    NoSpace,
    /// The device is gone (unmounted) or the host file failed (`EIO`).
    #[error("I/O error: {0:?}")]
    Io(std::io::ErrorKind),
}

impl BackingError {
    /// The errno a system call would return.
    pub fn errno(&self) -> Errno {
        match self {
            BackingError::NoSpace => Errno::ENOSPC,
            BackingError::Io(_) => Errno::EIO,
        }
    }
}

/// Where a file's bytes live when they are not cached (the block device
/// or the host file).
pub trait Backing: Send + Sync {
    /// Reads page `index` into `buf` (one page): zeros for a hole.
    fn read_page(&self, index: u64, buf: &mut [u8]) -> Result<(), BackingError>;
    /// Writes one page at `index`.
    fn write_page(&self, index: u64, buf: &[u8]) -> Result<(), BackingError>;
    /// Cuts the file to `size_bytes`: pages beyond go, the last page's
    /// tail reads as zeros.
    fn truncate(&self, size_bytes: u64) -> Result<(), BackingError>;
}

/// The inode owning a mapping, told when entries leave a mapping that is
/// then shrinkable ([`AddressSpace::is_shrinkable`]: `inode_add_lru` from
/// the page cache's deletion paths and the shadow-node shrinker), so an
/// unused inode can go on its LRU.
pub trait MappingHost: Send + Sync {
    /// The mapping is shrinkable now: no folios, and no shadows but a lone
    /// one at index 0. Called with no lock of the mapping held.
    fn mapping_shrinkable(&self);
}

/// What [`AddressSpace::add_folio`] goes on with once the insertion's
/// nodes are charged.
enum ForInsert<'a> {
    /// The mapping's lock, the shadow the folio replaces, the nodes'
    /// charges.
    Locked(MutexGuard<'a, Pages>, Option<Shadow>, Vec<Arc<ObjCgroup>>),
    /// Nothing to insert: the folio for the caller.
    Done(Arc<Folio>),
}

/// What an index of the cache holds.
enum Slot {
    Folio(Arc<Folio>),
    Shadow(Shadow),
}

/// The indices of a file, locked.
#[derive(Default)]
struct Pages {
    slots: BTreeMap<u64, Slot>,
    /// Folios among `slots` (`nrpages`).
    nr_folios: u64,
    /// The radix-tree nodes holding `slots`, and their charges.
    nodes: XaNodes,
    /// Truncated for good: takes nothing in.
    dead: bool,
    /// Pages of dirty folios (`PAGECACHE_TAG_DIRTY`).
    nr_dirty: u64,
    /// Pages under writeback.
    nr_writeback: u64,
    /// While it has dirty pages: the writeback they belong to and the
    /// inode's place on its dirty list (`inode->i_wb`, `i_io_list`).
    dirty_on: Option<(Arc<Wb>, u64)>,
    /// Where the next cyclic writeback starts (`writeback_index`).
    writeback_index: u64,
    /// A writeback's error, until a sync reports it (`mapping_set_error`).
    error: Option<BackingError>,
}

impl Pages {
    /// `mapping_shrinkable`: nothing cached, or only a shadow at index 0,
    /// which the tree keeps in its head, out of the shadow shrinker's
    /// reach (so the inode shrinker may take it).
    fn shrinkable(&self) -> bool {
        match self.slots.len() {
            0 => true,
            1 => matches!(self.slots.get(&0), Some(Slot::Shadow(_))),
            _ => false,
        }
    }
}

/// The page cache of one file (`struct address_space`).
pub struct AddressSpace {
    tree: CgroupTree,
    backing: Arc<dyn Backing>,
    /// Its backing device, whose flusher writes its dirty pages.
    bdi: Arc<Bdi>,
    /// The swap space, for refault distances (`get_nr_swap_pages`).
    swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    pages: Mutex<Pages>,
    /// Signalled under `pages` when a folio's writeback ends
    /// (`folio_wake_bit(PG_writeback)`).
    writeback_done: Condvar,
    /// Itself, as reclaim's owner of its folios.
    me: std::sync::Weak<AddressSpace>,
    /// Its inode, if it wants to hear of the mapping becoming shrinkable
    /// (which holds no strong reference back).
    host: Mutex<Option<Arc<dyn MappingHost>>>,
    /// The machine's shadow-node list, where its leaves holding only
    /// shadows go.
    shadow_nodes: Arc<ShadowNodes>,
}

impl std::fmt::Debug for AddressSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressSpace")
            .field("nr_folios", &self.nr_folios())
            .finish_non_exhaustive()
    }
}

impl AddressSpace {
    /// An empty cache for a file stored in `backing`, on a backing device
    /// of its own.
    pub fn new(
        tree: &CgroupTree,
        backing: Arc<dyn Backing>,
        swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    ) -> Arc<Self> {
        Self::with_bdi(tree, backing, swap, Bdi::new(tree))
    }

    /// An empty cache for a file stored in `backing` on the backing device
    /// `bdi` (its filesystem's).
    pub(crate) fn with_bdi(
        tree: &CgroupTree,
        backing: Arc<dyn Backing>,
        swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
        bdi: Arc<Bdi>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            tree: tree.clone(),
            backing,
            bdi,
            swap,
            pages: Mutex::new(Pages::default()),
            writeback_done: Condvar::new(),
            me: me.clone(),
            host: Mutex::new(None),
            shadow_nodes: ShadowNodes::of(tree),
        })
    }

    /// Tells `host` whenever entries leave the mapping and it is then
    /// shrinkable.
    pub(crate) fn set_host(&self, host: Arc<dyn MappingHost>) {
        *lock(&self.host) = Some(host);
    }

    fn notify_shrinkable(&self) {
        let host = lock(&self.host).clone();
        if let Some(host) = host {
            host.mapping_shrinkable();
        }
    }

    /// Folios cached (`mapping->nrpages`).
    pub fn nr_folios(&self) -> u64 {
        lock(&self.pages).nr_folios
    }

    /// Dirty pages cached.
    pub(crate) fn nr_dirty(&self) -> u64 {
        lock(&self.pages).nr_dirty
    }

    /// Shadow entries kept.
    pub fn nr_shadows(&self) -> u64 {
        let pages = lock(&self.pages);
        pages.slots.len() as u64 - pages.nr_folios
    }

    /// Whether nothing, not even a shadow, is cached (`mapping_empty`).
    pub fn is_empty(&self) -> bool {
        lock(&self.pages).slots.is_empty()
    }

    /// Whether its inode may be reclaimed as far as the page cache goes
    /// (`mapping_shrinkable`): nothing cached, or only a shadow at index 0.
    /// Shadows elsewhere keep it until the shadow-node shrinker frees them.
    pub fn is_shrinkable(&self) -> bool {
        lock(&self.pages).shrinkable()
    }

    /// Radix-tree nodes holding its entries (`xarray.rs`).
    pub fn nr_nodes(&self) -> usize {
        lock(&self.pages).nodes.len()
    }

    /// Puts leaf `leaf` on the shadow-node list if it holds only shadows,
    /// or takes it off if it no longer does (`workingset_update_node`).
    fn update_leaf(&self, pages: &mut Pages, leaf: u64) {
        let (mut count, mut shadows) = (0, 0);
        for slot in pages
            .slots
            .range(xarray::node_range((0, leaf)))
            .map(|(_, s)| s)
        {
            count += 1;
            shadows += u32::from(matches!(slot, Slot::Shadow(_)));
        }
        let Some(node) = pages.nodes.leaf_mut(leaf) else {
            return;
        };
        match (count > 0 && count == shadows, node.shadow_item) {
            (true, None) => {
                let owner: std::sync::Weak<dyn ShadowOwner> = self.me.clone();
                node.shadow_item = self.shadow_nodes.add(&node.objcg.memcg(), owner, leaf);
            }
            (false, Some(item)) => {
                self.shadow_nodes.del(item, &node.objcg.memcg());
                node.shadow_item = None;
            }
            _ => {}
        }
    }

    /// After the entries at `removed` left `pages`: frees the nodes that
    /// emptied (off the shadow-node list) and updates the leaves left.
    /// Returns the freed nodes' charges, for [`AddressSpace::uncharge_nodes`]
    /// once the lock is dropped.
    fn nodes_removed(&self, pages: &mut Pages, removed: &[u64]) -> Vec<Arc<ObjCgroup>> {
        let p = &mut *pages;
        let gone = p.nodes.remove(&p.slots, removed.iter().copied());
        let freed = self.unlist(gone);
        let leaves: std::collections::BTreeSet<u64> =
            removed.iter().map(|&i| xarray::leaf_of(i)).collect();
        for leaf in leaves {
            self.update_leaf(pages, leaf);
        }
        freed
    }

    /// Takes freed nodes off the shadow-node list; returns their charges.
    fn unlist(&self, gone: Vec<(xarray::NodeKey, XaNode)>) -> Vec<Arc<ObjCgroup>> {
        gone.into_iter()
            .map(|(_, node)| {
                if let Some(item) = node.shadow_item {
                    self.shadow_nodes.del(item, &node.objcg.memcg());
                }
                node.objcg
            })
            .collect()
    }

    /// Gives freed nodes' bytes back (`xa_node_free`).
    fn uncharge_nodes(&self, charges: Vec<Arc<ObjCgroup>>) {
        for objcg in charges {
            self.tree
                .uncharge_slab(&objcg, XA_NODE_BYTES, SlabKind::Reclaimable);
        }
    }

    fn rmap(&self) -> std::sync::Weak<dyn Rmap> {
        self.me.clone()
    }

    /// Reads up to `buf.len()` bytes at `offset` of a file of `i_size`
    /// bytes through the open file whose readahead state is `ra`
    /// (`filemap_read`); returns how many (0 at or past the end). Missing
    /// pages, and the readahead window around them, are brought in
    /// charged to `memcg`. Each folio read is marked accessed, except the
    /// first when the read starts in the folio where the previous read
    /// through `ra` ended (two `read()`s within one page mark it once). An
    /// error after some bytes were read ends the read short.
    pub fn read(
        &self,
        memcg: &Arc<MemCgroup>,
        ra: &mut FileRaState,
        offset: u64,
        buf: &mut [u8],
        i_size: u64,
    ) -> Result<usize, FilemapError> {
        let count = buf.len() as u64;
        let mut last_pos = ra.prev_pos_raw();
        let mut done = 0;
        let mut error = None;
        while done < count && offset + done < i_size {
            let pos = offset + done;
            let batch = match self.get_pages(memcg, ra, pos, count - done, i_size) {
                Ok(batch) => batch,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            let end_offset = i_size.min(offset + count);
            if !pos_same_page(pos, last_pos - 1) {
                folio_mark_accessed(&batch[0]);
            }
            for (i, folio) in batch.iter().enumerate() {
                let pos = offset + done;
                if end_offset < folio.index() * PAGE_SIZE {
                    break;
                }
                if i > 0 {
                    folio_mark_accessed(folio);
                }
                let in_page = (pos % PAGE_SIZE) as usize;
                let len = ((end_offset - pos) as usize).min(PAGE_BYTES - in_page);
                let at = done as usize;
                buf[at..at + len].copy_from_slice(&folio.bytes()[in_page..in_page + len]);
                done += len as u64;
                last_pos = i64::try_from(offset + done).unwrap_or(i64::MAX);
            }
        }
        ra.set_prev_pos_raw(last_pos);
        match error {
            Some(e) if done == 0 => Err(e),
            _ => Ok(done as usize),
        }
    }

    /// The folios from `pos` on for a read of `count` more bytes
    /// (`filemap_get_pages`): at least one, contiguous, up to a batch,
    /// ending at a folio marked for readahead if they reach one. A miss
    /// runs synchronous readahead, and if that did not bring the page in
    /// (its charge failed), the page is read alone with a full charge
    /// (`filemap_create_folio`); reaching a marked folio runs asynchronous
    /// readahead.
    fn get_pages(
        &self,
        memcg: &Arc<MemCgroup>,
        ra: &mut FileRaState,
        pos: u64,
        count: u64,
        i_size: u64,
    ) -> Result<Vec<Arc<Folio>>, FilemapError> {
        let index = pos / PAGE_SIZE;
        let last_index = (pos + count).div_ceil(PAGE_SIZE);
        let ractl = Ractl {
            mapping: self,
            memcg,
        };
        let mut batch = self.read_batch(index, last_index - 1);
        if batch.is_empty() {
            readahead::page_cache_sync_ra(&ractl, ra, index, last_index - index, i_size);
            batch = self.read_batch(index, last_index - 1);
        }
        if batch.is_empty() {
            return Ok(vec![self.get_folio(memcg, index, true, false)?]);
        }
        if let Some(last) = batch.last().filter(|f| f.test_readahead()) {
            let req_count = last_index - last.index();
            readahead::page_cache_async_ra(&ractl, ra, last, req_count, i_size);
        }
        Ok(batch)
    }

    /// The cached folios from `index` to at most `max`, contiguous, at most
    /// [`READ_BATCH`], stopping after one marked for readahead
    /// (`filemap_get_read_batch`).
    fn read_batch(&self, index: u64, max: u64) -> Vec<Arc<Folio>> {
        let pages = lock(&self.pages);
        let mut batch = Vec::new();
        for (at, slot) in pages.slots.range(index..=max) {
            let Slot::Folio(folio) = slot else {
                break;
            };
            if *at != index + batch.len() as u64 {
                break;
            }
            batch.push(Arc::clone(folio));
            if batch.len() == READ_BATCH || folio.test_readahead() {
                break;
            }
        }
        batch
    }

    /// Writes `data` at `offset` through the cache (`generic_perform_write`)
    /// as a task of `memcg`: the folios are charged to `memcg` if not
    /// cached, and left dirty; a write neither marks them accessed nor
    /// counts a refault. After each page the task is balanced against its
    /// dirty limits, and may sleep there (`balance_dirty_pages_ratelimited`).
    pub fn write(
        &self,
        memcg: &Arc<MemCgroup>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), FilemapError> {
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let (index, in_page) = (pos / PAGE_SIZE, (pos % PAGE_SIZE) as usize);
            let len = (PAGE_BYTES - in_page).min(data.len() - done);
            // A whole page overwritten needs no read of the old bytes.
            let folio = self.get_folio(memcg, index, len < PAGE_BYTES, true)?;
            // A buffered write does not mark the folio accessed
            // (`FGP_WRITEBEGIN` has no `FGP_ACCESSED`).
            let mut pages = lock(&self.pages);
            if !pages.dead && !is_cached(&pages, &folio) {
                // Truncated away and back meanwhile: look it up again, as
                // `write_begin` does when the locked folio lost its mapping.
                continue;
            }
            folio.bytes()[in_page..in_page + len].copy_from_slice(&data[done..done + len]);
            if !pages.dead && folio.mark_dirty() {
                self.account_dirtied(&mut pages, &folio);
                crate::page_writeback::account_task_dirtied(u64::from(folio.nr()));
            }
            drop(pages);
            drop(folio);
            done += len;
            self.bdi.balance(memcg);
        }
        Ok(())
    }

    /// `folio_account_dirtied` under the mapping lock: `folio`, cached
    /// here, just became dirty. The inode's first dirty page puts it on a
    /// writeback's list: that of the memory cgroup charged for the page.
    fn account_dirtied(&self, pages: &mut Pages, folio: &Folio) {
        let nr = u64::from(folio.nr());
        pages.nr_dirty += nr;
        if pages.dirty_on.is_none() {
            let memcg = Arc::clone(&folio.memcg());
            pages.dirty_on = Some(self.bdi.inode_dirtied(&memcg, self.me.clone()));
        }
        if let Some((wb, _)) = &pages.dirty_on {
            wb.add_reclaimable(nr as i64);
        }
    }

    /// `nr` dirty pages stopped being dirty without being written (they
    /// went, or their writeback started): the counts follow, and the inode
    /// leaves its writeback's list with its last dirty page.
    fn account_cleaned(&self, pages: &mut Pages, nr: u64) {
        pages.nr_dirty -= nr;
        if let Some((wb, seq)) = &pages.dirty_on {
            wb.add_reclaimable(-(nr as i64));
            if pages.nr_dirty == 0 {
                self.bdi.inode_cleaned(wb, *seq);
                pages.dirty_on = None;
            }
        }
    }

    /// The folio at `index`, brought in if missing: filled from the
    /// backing store if `fill`, else zeroed. A read (`!write`) that finds
    /// a shadow is a refault; a write only replaces the shadow
    /// (`filemap_add_folio` skips refaults for `__GFP_WRITE`).
    fn get_folio(
        &self,
        memcg: &Arc<MemCgroup>,
        index: u64,
        fill: bool,
        write: bool,
    ) -> Result<Arc<Folio>, FilemapError> {
        self.add_folio(memcg, index, fill, write, Gfp::Kernel, false)
    }

    /// [`AddressSpace::get_folio`] charging with `gfp`; a folio it adds
    /// is marked for readahead if `ra_mark` (`folio_set_readahead`).
    fn add_folio(
        &self,
        memcg: &Arc<MemCgroup>,
        index: u64,
        fill: bool,
        write: bool,
        gfp: Gfp,
        ra_mark: bool,
    ) -> Result<Arc<Folio>, FilemapError> {
        let shadow = match lock(&self.pages).slots.get(&index) {
            Some(Slot::Folio(folio)) => return Ok(Arc::clone(folio)),
            Some(Slot::Shadow(shadow)) if !write => Some(*shadow),
            _ => None,
        };
        let folio = Arc::new(self.new_filled_folio(memcg, index, fill, gfp, shadow)?);
        let (mut pages, shadow, mut charged) =
            match self.lock_for_insert(memcg, index, write, gfp, &folio)? {
                ForInsert::Locked(pages, shadow, charged) => (pages, shadow, charged),
                ForInsert::Done(folio) => return Ok(folio),
            };
        if ra_mark {
            folio.set_readahead();
        }
        let p = &mut *pages;
        if p.slots
            .insert(index, Slot::Folio(Arc::clone(&folio)))
            .is_none()
        {
            for leaf in p.nodes.insert(&p.slots, index, &mut charged) {
                self.update_leaf(&mut pages, leaf);
            }
        }
        pages.nr_folios += 1;
        self.update_leaf(&mut pages, xarray::leaf_of(index));
        drop(pages);
        self.uncharge_nodes(charged);
        if let Some(shadow) = shadow {
            let swap_free = || (self.swap)().free_pages;
            workingset::workingset_refault(&self.tree, &folio, &shadow, &swap_free);
        }
        lruvec::folio_add_lru(&folio, self.rmap());
        Ok(folio)
    }

    /// A new folio for `index`, charged to `memcg` with `gfp`, filled from
    /// the backing store if `fill` (a memory stall when `shadow` is of a
    /// page of the working set), else zeroed. No lock held.
    fn new_filled_folio(
        &self,
        memcg: &Arc<MemCgroup>,
        index: u64,
        fill: bool,
        gfp: Gfp,
        shadow: Option<Shadow>,
    ) -> Result<Folio, FilemapError> {
        let folio = Folio::new_file(&self.tree, memcg, 1, index, gfp)?;
        let swap_free = || (self.swap)().free_pages;
        // Reading back a page of the working set is a memory stall
        // (`filemap_read_folio` on a folio `workingset_refault` marked;
        // readahead's `read_pages` stalls over the I/O of a batch holding
        // one: here over each such page's read, the only reads that take
        // modelled time on a virtual clock).
        let stalls = shadow.is_some_and(|s| {
            s.workingset() && workingset::workingset_test_recent(&self.tree, &s, true, &swap_free)
        });
        {
            let mut bytes = folio.bytes();
            if fill {
                let _stall = stalls.then(|| self.tree.memstall(false)).flatten();
                if stalls {
                    self.tree.clock().work(Work::RefaultRead(1));
                }
                self.backing.read_page(index, &mut bytes)?;
            } else {
                bytes.fill(0);
            }
        }
        Ok(folio)
    }

    /// The mapping locked with the nodes inserting `folio` at `index`
    /// needs already charged (the shadow it replaces, unless a `write`),
    /// or [`ForInsert::Done`] with the folio the caller gets: another
    /// task's, found there meanwhile, or `folio` itself if the mapping
    /// was truncated meanwhile.
    fn lock_for_insert(
        &self,
        memcg: &Arc<MemCgroup>,
        index: u64,
        write: bool,
        gfp: Gfp,
        folio: &Arc<Folio>,
    ) -> Result<ForInsert<'_>, FilemapError> {
        // Nodes the insertion needs, charged beforehand to the inserting
        // task with the lock dropped (`xas_nomem`): a charge may reclaim.
        let mut charged = Vec::new();
        loop {
            let pages = lock(&self.pages);
            let shadow = match pages.slots.get(&index) {
                // Another task brought it in meanwhile: use theirs.
                Some(Slot::Folio(theirs)) => {
                    let theirs = Arc::clone(theirs);
                    drop(pages);
                    self.uncharge_nodes(charged);
                    return Ok(ForInsert::Done(theirs));
                }
                Some(Slot::Shadow(shadow)) => (!write).then_some(*shadow),
                None => None,
            };
            if pages.dead {
                // Truncated meanwhile: the caller gets the bytes, the cache
                // keeps nothing.
                drop(pages);
                self.uncharge_nodes(charged);
                return Ok(ForInsert::Done(Arc::clone(folio)));
            }
            let needed = match pages.slots.contains_key(&index) {
                true => 0,
                false => pages.nodes.needed(&pages.slots, index).len(),
            };
            if charged.len() >= needed {
                return Ok(ForInsert::Locked(pages, shadow, charged));
            }
            drop(pages);
            let objcg = memcg.obj_cgroup();
            while charged.len() < needed {
                let node = XA_NODE_BYTES;
                let kind = SlabKind::Reclaimable;
                if let Err(e) = self.tree.charge_slab(&objcg, node, kind, gfp) {
                    self.uncharge_nodes(charged);
                    return Err(e.into());
                }
                charged.push(Arc::clone(&objcg));
            }
        }
    }

    /// Writes every dirty folio back and waits (`filemap_write_and_wait`,
    /// an fsync), through the backing device's flusher; returns the pages
    /// written, or the error of this or an earlier writeback of the file.
    pub fn writeback(&self) -> Result<u64, FilemapError> {
        Ok(self.bdi.sync(Some(self.me.clone()))?)
    }

    /// `do_writepages` for the flusher: writes up to `nr_to_write` pages of
    /// dirty folios in index order, from where the last cyclic writeback
    /// stopped and round to it (`cyclic`, `range_cyclic`) or from the
    /// start; returns the pages written and the first error, which stops
    /// the writeback, leaves its folio dirty and is kept for the next sync
    /// to report.
    fn writepages(&self, nr_to_write: u64, cyclic: bool) -> (u64, Result<(), BackingError>) {
        let start = if cyclic {
            lock(&self.pages).writeback_index
        } else {
            0
        };
        let (mut next, mut wrapped, mut written) = (start, false, 0);
        while written < nr_to_write {
            let Some((folio, wb, bytes)) =
                self.start_writeback(&mut next, &mut wrapped, start, cyclic)
            else {
                break;
            };
            let result = self.backing.write_page(folio.index(), &bytes);
            self.end_writeback(&folio, &wb, result.clone());
            if let Err(e) = result {
                return (written, Err(e));
            }
            written += u64::from(folio.nr());
        }
        (written, Ok(()))
    }

    /// Takes the next dirty folio at or after `next` (and, once `wrapped`,
    /// before `start`) and starts its writeback
    /// (`folio_clear_dirty_for_io` + `folio_start_writeback`): returns it,
    /// the writeback its pages are counted on meanwhile, and its bytes.
    fn start_writeback(
        &self,
        next: &mut u64,
        wrapped: &mut bool,
        start: u64,
        cyclic: bool,
    ) -> Option<(Arc<Folio>, Arc<Wb>, Vec<u8>)> {
        let mut pages = lock(&self.pages);
        if pages.dead {
            return None;
        }
        let found = loop {
            let end = if *wrapped { start } else { u64::MAX };
            let found = pages
                .slots
                .range(*next..end)
                .find_map(|(_, slot)| match slot {
                    Slot::Folio(f) if f.is_dirty() => Some(Arc::clone(f)),
                    _ => None,
                });
            match found {
                Some(folio) => break folio,
                None if cyclic && !*wrapped && start > 0 => {
                    *wrapped = true;
                    *next = 0;
                }
                None => return None,
            }
        };
        *next = found.index() + 1;
        if cyclic {
            pages.writeback_index = *next;
        }
        let nr = u64::from(found.nr());
        let (wb, _) = pages.dirty_on.clone()?;
        found.start_writeback();
        self.account_cleaned(&mut pages, nr);
        pages.nr_writeback += nr;
        wb.add_writeback(nr as i64);
        let bytes = found.bytes().to_vec();
        Some((found, wb, bytes))
    }

    /// `folio_end_writeback`: the write of `folio` (counted on `wb`) ended
    /// with `result`; waiters are woken. A failed write leaves the folio
    /// dirty again and the error for the next sync; a written folio that
    /// reclaim marked moves to the inactive list's oldest end
    /// (`folio_rotate_reclaimable`).
    fn end_writeback(&self, folio: &Arc<Folio>, wb: &Wb, result: Result<(), BackingError>) {
        let nr = u64::from(folio.nr());
        let mut pages = lock(&self.pages);
        folio.end_writeback();
        pages.nr_writeback -= nr;
        wb.add_writeback(-(nr as i64));
        if let Err(e) = result {
            if !pages.dead && is_cached(&pages, folio) && folio.mark_dirty() {
                self.account_dirtied(&mut pages, folio);
            }
            pages.error.get_or_insert(e);
        }
        self.writeback_done.notify_all();
        drop(pages);
        if folio.lru().test_clear_reclaim() {
            lruvec::folio_rotate_reclaimable(folio);
        }
    }

    /// Takes the error a writeback left (`file_check_and_advance_wb_err`).
    fn take_error(&self) -> Result<(), BackingError> {
        lock(&self.pages).error.take().map_or(Ok(()), Err)
    }

    /// Waits until no folio `pred` picks is under writeback
    /// (`folio_wait_writeback`), the lock released meanwhile.
    fn wait_on_writeback<'a>(
        &'a self,
        mut pages: MutexGuard<'a, Pages>,
        pred: impl Fn(&Pages) -> bool,
    ) -> MutexGuard<'a, Pages> {
        while pages.nr_writeback > 0 && pred(&pages) {
            pages = self
                .writeback_done
                .wait(pages)
                .unwrap_or_else(|p| p.into_inner());
        }
        pages
    }

    /// Drops every clean folio nobody holds, and every shadow
    /// (`invalidate_mapping_pages`, for `drop_caches`); returns the pages
    /// dropped.
    pub fn invalidate(&self) -> u64 {
        let mut dropped = Vec::new();
        let mut kept = Vec::new();
        let mut pages = lock(&self.pages);
        let mut nr_dropped = 0;
        let mut removed = Vec::new();
        pages.slots.retain(|&index, slot| match slot {
            Slot::Shadow(_) => {
                removed.push(index);
                false
            }
            Slot::Folio(f) if !f.is_dirty() && !f.is_writeback() && Arc::strong_count(f) == 1 => {
                nr_dropped += 1;
                dropped.push(Arc::clone(f));
                removed.push(index);
                false
            }
            Slot::Folio(f) => {
                kept.push(Arc::clone(f));
                true
            }
        });
        pages.nr_folios -= nr_dropped;
        let freed_nodes = self.nodes_removed(&mut pages, &removed);
        let shrinkable = pages.shrinkable();
        drop(pages);
        // Freed (and uncharged) here, outside the lock.
        drop(dropped);
        self.uncharge_nodes(freed_nodes);
        for folio in &kept {
            lruvec::deactivate_file_folio(folio);
        }
        if shrinkable && !removed.is_empty() {
            self.notify_shrinkable();
        }
        nr_dropped
    }

    /// Drops everything, dirty folios included, and takes nothing in from
    /// now on (`truncate_inode_pages_final`, the file removed or evicted
    /// after its data was written back), once writes in flight are done.
    pub fn truncate(&self) {
        let (slots, freed_nodes) = {
            let mut pages = lock(&self.pages);
            pages.dead = true;
            let mut pages = self.wait_on_writeback(pages, |_| true);
            pages.nr_folios = 0;
            let nr_dirty = pages.nr_dirty;
            self.account_cleaned(&mut pages, nr_dirty);
            let nodes = pages.nodes.take_all();
            (std::mem::take(&mut pages.slots), self.unlist(nodes))
        };
        self.uncharge_nodes(freed_nodes);
        for slot in slots.into_values() {
            if let Slot::Folio(folio) = slot {
                folio.clear_dirty();
            }
        }
    }

    /// Cuts the file to `size_bytes` (`truncate_setsize` shrinking a
    /// file): cached pages and shadows beyond go, the tail of a cached last
    /// page is zeroed, and the backing store is cut too.
    pub(crate) fn truncate_to(&self, size_bytes: u64) -> Result<(), FilemapError> {
        let first_gone = size_bytes.div_ceil(PAGE_SIZE);
        let (dropped, freed_nodes, shrinkable) = {
            // Writes in flight of the pages that go, and of a partial last
            // page (whose old tail they carry), end first.
            let pages = lock(&self.pages);
            let mut pages = self.wait_on_writeback(pages, |pages| {
                pages
                    .slots
                    .range(size_bytes / PAGE_SIZE..)
                    .any(|(_, s)| matches!(s, Slot::Folio(f) if f.is_writeback()))
            });
            let gone = pages.slots.split_off(&first_gone);
            let nr = gone
                .values()
                .filter(|s| matches!(s, Slot::Folio(_)))
                .count() as u64;
            pages.nr_folios -= nr;
            let nr_dirty: u64 = gone
                .values()
                .filter_map(|s| match s {
                    Slot::Folio(f) if f.is_dirty() => Some(u64::from(f.nr())),
                    _ => None,
                })
                .sum();
            self.account_cleaned(&mut pages, nr_dirty);
            let in_page = (size_bytes % PAGE_SIZE) as usize;
            if in_page > 0
                && let Some(Slot::Folio(last)) = pages.slots.get(&(size_bytes / PAGE_SIZE))
            {
                last.bytes()[in_page..PAGE_BYTES].fill(0);
            }
            let removed: Vec<u64> = gone.keys().copied().collect();
            let freed_nodes = self.nodes_removed(&mut pages, &removed);
            (gone, freed_nodes, pages.shrinkable())
        };
        self.uncharge_nodes(freed_nodes);
        let removed_any = !dropped.is_empty();
        for slot in dropped.into_values() {
            if let Slot::Folio(folio) = slot {
                folio.clear_dirty();
            }
        }
        if shrinkable && removed_any {
            self.notify_shrinkable();
        }
        self.backing.truncate(size_bytes)?;
        Ok(())
    }

    /// The folio at `index`, if cached (for tests and checks).
    pub fn folio(&self, index: u64) -> Option<Arc<Folio>> {
        match lock(&self.pages).slots.get(&index) {
            Some(Slot::Folio(f)) => Some(Arc::clone(f)),
            _ => None,
        }
    }

    /// Evicts a clean `folio` under the mapping lock: it is replaced by its
    /// shadow (`__remove_mapping`).
    fn evict_locked<'a>(
        &'a self,
        mut pages: MutexGuard<'a, Pages>,
        folio: Arc<Folio>,
        target: &MemCgroup,
    ) -> RmapOutcome {
        let shadow = workingset::workingset_eviction(&folio, target);
        pages.slots.insert(folio.index(), Slot::Shadow(shadow));
        pages.nr_folios -= 1;
        self.update_leaf(&mut pages, xarray::leaf_of(folio.index()));
        let shrinkable = pages.shrinkable();
        drop(pages);
        if shrinkable {
            self.notify_shrinkable();
        }
        RmapOutcome::Reclaimed {
            nr_pages: u64::from(folio.nr()),
        }
    }
}

/// Whether `folio` is the one cached at its index.
fn is_cached(pages: &Pages, folio: &Arc<Folio>) -> bool {
    matches!(pages.slots.get(&folio.index()), Some(Slot::Folio(f)) if Arc::ptr_eq(f, folio))
}

/// Folios a read takes at a time (`PAGEVEC_SIZE`).
const READ_BATCH: usize = 31;

/// Whether byte positions `a` and `b` (`loff_t`, `b` may be -1 or less
/// for "no previous read") fall in the same page (`pos_same_folio` for
/// single-page folios).
fn pos_same_page(a: u64, b: i64) -> bool {
    let shift = PAGE_SIZE.trailing_zeros();
    i64::try_from(a).is_ok_and(|a| a >> shift == b >> shift)
}

/// A mapping and the memory cgroup its readahead charges
/// (`struct readahead_control`).
struct Ractl<'a> {
    mapping: &'a AddressSpace,
    memcg: &'a Arc<MemCgroup>,
}

impl RaMapping for Ractl<'_> {
    fn prev_miss(&self, index: u64, max_scan: u64) -> u64 {
        let pages = lock(&self.mapping.pages);
        let mut at = index;
        for n in 0..max_scan {
            if n > 0 {
                at = at.wrapping_sub(1);
            }
            if !matches!(pages.slots.get(&at), Some(Slot::Folio(_))) {
                break;
            }
        }
        at
    }

    fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
        let pages = lock(&self.mapping.pages);
        for n in 0..max_scan {
            let at = index.wrapping_add(n);
            if !matches!(pages.slots.get(&at), Some(Slot::Folio(_))) {
                return at;
            }
            if at == 0 {
                return 0;
            }
        }
        index.wrapping_add(max_scan)
    }

    fn read_pages(&self, index: u64, nr: u64, mark: Option<u64>) {
        // The window's folios stay held until it is all in, as the
        // kernel's stay locked until their I/O completes: reclaim cannot
        // take them back to make room for the rest of the window.
        let mut window = Vec::new();
        for i in 0..nr {
            if lock(&self.mapping.pages).dead {
                return;
            }
            let ra_mark = mark == Some(i);
            match self
                .mapping
                .add_folio(self.memcg, index + i, true, false, Gfp::NoRetry, ra_mark)
            {
                Ok(folio) => window.push(folio),
                // A failed charge or read ends readahead quietly; the read
                // that needs the page tries again on its own.
                Err(_) => return,
            }
        }
    }
}

/// A `read()` of a page-cache folio (`folio_mark_accessed`,
/// mm/swap.c): the first marks it referenced; the next, while it is
/// inactive, activates it (`pgactivate`, and the workingset clock ages:
/// `workingset_activation`).
pub(crate) fn folio_mark_accessed(folio: &Arc<Folio>) {
    if !lruvec::folio_test_set_referenced(folio, true) {
        return;
    }
    if lruvec::folio_activate(folio) {
        lruvec::folio_test_set_referenced(folio, false);
        workingset::workingset_activation(folio);
    }
}

impl Rmap for AddressSpace {
    fn reclaim(
        &self,
        folio: Arc<Folio>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> RmapOutcome {
        let Ok(pages) = self.pages.try_lock() else {
            return RmapOutcome::Busy(folio);
        };
        if !is_cached(&pages, &folio) {
            return RmapOutcome::Gone;
        }
        // Under writeback: back to reclaim before its references are
        // looked at (`shrink_folio_list`'s writeback case).
        if folio.is_writeback() {
            return RmapOutcome::Writeback(folio);
        }
        match references(&folio) {
            FolioRef::Reclaim | FolioRef::ReclaimClean => {}
            referenced => return RmapOutcome::Referenced(folio, referenced),
        }
        // Reclaim writes no file page: the flusher will.
        if folio.is_dirty() {
            return RmapOutcome::Dirty(folio);
        }
        // The mapping's reference and ours: anyone else (a reader copying)
        // keeps it (`folio_ref_freeze` fails).
        if Arc::strong_count(&folio) > 2 {
            return RmapOutcome::Busy(folio);
        }
        self.evict_locked(pages, folio, target)
    }
}

impl ShadowOwner for AddressSpace {
    fn isolate_shadow_node<'g>(
        &self,
        leaf: u64,
        guard: ItemGuard<'g>,
        freed_bytes: &mut u64,
    ) -> Walked<'g> {
        // Coming from the list: the mapping's lock only if free
        // (`xa_trylock`).
        let mut pages = match self.pages.try_lock() {
            Ok(pages) => pages,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Walked::Skip(guard),
        };
        let item = guard.item();
        let Some(node) = pages
            .nodes
            .leaf_mut(leaf)
            .filter(|node| node.shadow_item == Some(item))
        else {
            return Walked::Skip(guard);
        };
        let (list, isolated) = guard.isolate();
        drop(list);
        node.shadow_item = None;
        let memcg = node.objcg.memcg();
        self.shadow_nodes.release(item);
        // Only shadows: deleting them frees the node (`xa_delete_node`).
        let removed: Vec<u64> = pages
            .slots
            .range(xarray::node_range((0, leaf)))
            .map(|(&index, _)| index)
            .collect();
        for index in &removed {
            pages.slots.remove(index);
        }
        let freed = self.nodes_removed(&mut pages, &removed);
        memcg.mod_stat(MemcgStat::WorkingsetNodereclaim, 1);
        let shrinkable = pages.shrinkable();
        drop(pages);
        *freed_bytes += freed.len() as u64 * XA_NODE_BYTES;
        self.uncharge_nodes(freed);
        if shrinkable {
            self.notify_shrinkable();
        }
        Walked::RemovedRetry(isolated)
    }
}

impl Drop for AddressSpace {
    /// A mapping let go without [`AddressSpace::truncate`]: its dirty
    /// pages leave its writeback's counts and list, and its nodes leave the
    /// shadow-node list and give their charges back.
    fn drop(&mut self) {
        let nodes = {
            let mut pages = lock(&self.pages);
            let nr_dirty = pages.nr_dirty;
            self.account_cleaned(&mut pages, nr_dirty);
            pages.nodes.take_all()
        };
        let freed = self.unlist(nodes);
        self.uncharge_nodes(freed);
    }
}
