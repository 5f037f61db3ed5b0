//! The machine's page frames: a buddy allocator with per-thread caches
//! (mm/page_alloc.c: `free_area[order]` lists with buddy merging, and the
//! per-CPU page lists in front of them).
//!
//! Folios and RAM-disk pages take their bytes here. Frames live in chunks
//! of [`CHUNK_PAGES`] pages (2 MiB, one block of [`MAX_ORDER`]), taken from
//! the host once, asked to be backed by a transparent huge page, and kept:
//! a frame freed by one folio is the next folio's or RAM-disk page's, with
//! no host allocator call, no first-touch fault and no layout lottery. The
//! issue-10 profile measured 2-4x on 4 KiB random swap-in from reuse alone.
//! A freed block merges with its buddy, so the frames a swap-out frees as
//! 64 KiB folios serve the RAM disk's 4 KiB pages, as they would in the
//! kernel.
//!
//! Invariants: chunks never exceed the machine's size (rounded up to a
//! chunk), so the simulator never holds more host memory for frames than
//! the machine it simulates; a request the chunks cannot meet (the machine
//! is fragmented or full of frames in use) gets a plain host buffer, which
//! its charge already bounds. A free block's head frame records its order
//! and sits on exactly one free list; frames of blocks in use record none.
//! Two blocks handed out never overlap.
//!
//! Locking: the zone (chunks and free lists) is one mutex. Each thread
//! has a home shard of per-order caches (the per-CPU lists) that it fills
//! from, and empties into, the zone in batches, so a page's allocation
//! and free usually take one uncontended shard lock. A cache lock is never
//! held while taking the zone lock... except in `refill`/`drain`, which
//! take the shard lock first, then the zone lock: the only nesting, always
//! in that order.
//!
//! Under loom every request gets a host buffer: the allocator would only
//! add interleavings that have nothing to do with the models.

use std::ops::{Deref, DerefMut};

use crate::mm_types::PAGE_BYTES;
#[cfg(not(loom))]
use crate::percpu::{NR_CPU_SLOTS, this_cpu};
use crate::sync::{AtomicU64, Ordering};
#[cfg(not(loom))]
use crate::sync::{Mutex, lock};

/// The largest block: 512 pages (2 MiB, a PMD-sized THP, the largest
/// anonymous folio).
pub const MAX_ORDER: usize = 9;

/// Pages per chunk taken from the host: one block of [`MAX_ORDER`].
pub const CHUNK_PAGES: usize = 1 << MAX_ORDER;

#[cfg(not(loom))]
const CHUNK_BYTES: usize = CHUNK_PAGES * PAGE_BYTES;

/// Per-thread cache shards: one per CPU slot.
#[cfg(not(loom))]
const SHARDS: usize = NR_CPU_SLOTS;

/// Pages a shard caches per order before it gives half back to the zone
/// (the per-CPU list's `high`), and moves per refill (its `batch`).
#[cfg(not(loom))]
const PCP_HIGH_PAGES: usize = 1024;
#[cfg(not(loom))]
const PCP_BATCH_PAGES: usize = 128;

/// Fully free chunks kept when the machine has no size set; beyond them a
/// chunk that becomes free goes back to the host (128 MiB).
#[cfg(not(loom))]
const KEEP_FREE_CHUNKS_UNBOUNDED: usize = 64;

/// No frame: the end of a free list, or a frame heading no free block.
#[cfg(not(loom))]
const NONE: u32 = u32::MAX;
#[cfg(not(loom))]
const NOT_FREE: u8 = u8::MAX;

/// A block of `2^order` pages of the machine, or a plain host buffer when
/// the frames could not serve the request. Dereferences to its bytes.
///
/// A frame block must go back through the allocator that gave it
/// (`PageAllocator::free`); its holders (folios, RAM disks) hold the
/// cgroup tree that owns the allocator, so the frames outlive the block.
pub struct PageBuf {
    repr: Repr,
}

enum Repr {
    #[cfg(not(loom))]
    Frame {
        ptr: std::ptr::NonNull<u8>,
        frame: u32,
        order: u8,
    },
    Heap(Box<[u8]>),
}

// SAFETY: a frame block is owned exclusively by its `PageBuf`, like a
// `Box<[u8]>`: no other `PageBuf` covers its bytes, and the allocator
// touches them again only after the block is given back.
unsafe impl Send for PageBuf {}
// SAFETY: as for `Send`; `&PageBuf` only gives `&[u8]`.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// A zeroed host buffer of `nr_pages` pages (for a RAM disk or folio
    /// with no machine behind it).
    pub fn heap(nr_pages: usize) -> Self {
        Self {
            repr: Repr::Heap(vec![0u8; nr_pages * PAGE_BYTES].into_boxed_slice()),
        }
    }

    /// Its pages.
    pub fn nr_pages(&self) -> usize {
        self.len() / PAGE_BYTES
    }

    /// An empty buffer, left behind where one was moved out.
    pub(crate) fn empty() -> Self {
        Self {
            repr: Repr::Heap(Box::default()),
        }
    }
}

impl Deref for PageBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.repr {
            #[cfg(not(loom))]
            // SAFETY: `ptr` addresses `PAGE_BYTES << order` bytes inside a
            // live chunk (chunks are freed only with the allocator, which
            // the holder keeps alive, or once wholly free), initialised
            // (chunks are allocated zeroed), and owned by this block alone.
            Repr::Frame { ptr, order, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), PAGE_BYTES << order)
            },
            Repr::Heap(buf) => buf,
        }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.repr {
            #[cfg(not(loom))]
            // SAFETY: as in `deref`, and `&mut self` makes the access
            // exclusive.
            Repr::Frame { ptr, order, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), PAGE_BYTES << *order)
            },
            Repr::Heap(buf) => buf,
        }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        debug_assert!(
            !matches!(self.repr, Repr::Frame { .. }),
            "a frame block dropped instead of freed: its frames leak"
        );
    }
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuf")
            .field("nr_pages", &self.nr_pages())
            .finish_non_exhaustive()
    }
}

/// The frames of one machine; see the module docs.
pub(crate) struct PageAllocator {
    #[cfg(not(loom))]
    zone: Mutex<Zone>,
    #[cfg(not(loom))]
    shards: [Shard; SHARDS],
    /// The machine's size in pages: the chunks grow up to it (`u64::MAX`:
    /// no size set).
    limit_pages: AtomicU64,
}

impl Default for PageAllocator {
    fn default() -> Self {
        Self {
            #[cfg(not(loom))]
            zone: Mutex::default(),
            #[cfg(not(loom))]
            shards: Default::default(),
            limit_pages: AtomicU64::new(u64::MAX),
        }
    }
}

impl PageAllocator {
    /// Sets the machine's size, which the chunks may grow up to.
    pub(crate) fn set_limit(&self, limit_pages: u64) {
        // Relaxed: a bound read at each chunk's growth; no data rides on it.
        self.limit_pages.store(limit_pages, Ordering::Relaxed);
    }

    fn limit(&self) -> u64 {
        // Relaxed: see `set_limit`.
        self.limit_pages.load(Ordering::Relaxed)
    }

    /// A block of `nr_pages` pages (zeroed if `zeroed`; a reused block
    /// holds its last user's bytes otherwise). Sizes that are not a power
    /// of two up to `2^MAX_ORDER` get a host buffer.
    pub(crate) fn alloc(&self, nr_pages: u32, zeroed: bool) -> PageBuf {
        self.alloc_within(nr_pages, zeroed, self.limit())
    }

    fn alloc_within(&self, nr_pages: u32, zeroed: bool, limit_pages: u64) -> PageBuf {
        #[cfg(not(loom))]
        if let Some(order) = order_of(nr_pages)
            && let Some(mut buf) = self.alloc_block(order, limit_pages)
        {
            if zeroed {
                buf.fill(0);
            }
            return buf;
        }
        let _ = (zeroed, limit_pages);
        PageBuf::heap(nr_pages as usize)
    }

    /// Gives a block back (a host buffer is simply freed); wholly free
    /// chunks beyond what the machine may hold go back to the host.
    pub(crate) fn free(&self, buf: PageBuf) {
        self.free_within(buf, self.limit());
    }

    fn free_within(&self, mut buf: PageBuf, limit_pages: u64) {
        match std::mem::replace(&mut buf.repr, Repr::Heap(Box::default())) {
            #[cfg(not(loom))]
            Repr::Frame { ptr, frame, order } => self.free_block(frame, ptr, order, limit_pages),
            Repr::Heap(_) => {}
        }
        let _ = limit_pages;
    }

    /// Takes chunks from the host, and writes them so their host pages are
    /// faulted in, until at least `nr_pages` are free (within the
    /// machine's size): the simulated machine's memory is then real memory
    /// before anything is timed on it.
    pub(crate) fn prefault(&self, nr_pages: u64) {
        self.prefault_within(nr_pages, self.limit());
    }

    fn prefault_within(&self, nr_pages: u64, limit_pages: u64) {
        #[cfg(not(loom))]
        {
            let mut zone = lock(&self.zone);
            while zone.free_pages < nr_pages && zone.grow(limit_pages).is_some() {
                let newest = zone.heads[MAX_ORDER];
                zone.chunks[split(newest).0]
                    .as_ref()
                    .expect("just grown")
                    .prefault();
            }
        }
        #[cfg(loom)]
        let _ = (nr_pages, limit_pages);
    }

    /// Pages in chunks (in use or free), and of those, free.
    pub(crate) fn frame_pages(&self) -> (u64, u64) {
        #[cfg(not(loom))]
        {
            let cached: u64 = self
                .shards
                .iter()
                .map(|s| lock(&s.0).iter().map(|c| c.pages as u64).sum::<u64>())
                .sum();
            let zone = lock(&self.zone);
            (zone.chunk_pages(), zone.free_pages + cached)
        }
        #[cfg(loom)]
        (0, 0)
    }
}

#[cfg(not(loom))]
impl PageAllocator {
    fn alloc_block(&self, order: usize, limit_pages: u64) -> Option<PageBuf> {
        let shard = &self.shards[this_cpu()];
        let mut cache = lock(&shard.0);
        if cache[order].frames.is_empty() {
            split_cached(&mut cache, order);
        }
        if cache[order].frames.is_empty() {
            // Refill a batch under the zone lock (shard, then zone).
            let mut zone = lock(&self.zone);
            let want = (PCP_BATCH_PAGES >> order).max(1);
            let batch: Vec<u32> = (0..want)
                .map_while(|_| zone.alloc(order, limit_pages))
                .collect();
            // Pushed last first, so they pop in the order the zone gave
            // them: ascending addresses within a split chunk, which the
            // CPU's prefetchers follow best when the folios are used in
            // allocation order.
            for &frame in batch.iter().rev() {
                let ptr = zone.frame_ptr(frame);
                cache[order].push(frame, ptr, order);
            }
        }
        let (frame, ptr) = cache[order].pop(order)?;
        Some(PageBuf {
            repr: Repr::Frame {
                ptr,
                frame,
                order: order as u8,
            },
        })
    }

    fn free_block(&self, frame: u32, ptr: std::ptr::NonNull<u8>, order: u8, limit_pages: u64) {
        let order = usize::from(order);
        let shard = &self.shards[this_cpu()];
        let mut cache = lock(&shard.0);
        cache[order].push(frame, ptr, order);
        if cache[order].pages > PCP_HIGH_PAGES {
            // Give half back (shard, then zone), where it can merge.
            let mut zone = lock(&self.zone);
            while cache[order].pages > PCP_HIGH_PAGES / 2 {
                let (frame, _) = cache[order].pop(order).expect("over high");
                zone.free(frame, order, limit_pages);
            }
        }
    }
}

impl Drop for PageAllocator {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        {
            let zone = self.zone.get_mut().unwrap_or_else(|p| p.into_inner());
            zone.release_all();
        }
    }
}

impl std::fmt::Debug for PageAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (chunk_pages, free_pages) = self.frame_pages();
        f.debug_struct("PageAllocator")
            .field("chunk_pages", &chunk_pages)
            .field("free_pages", &free_pages)
            .finish()
    }
}

/// The order of a block of `nr_pages`, if frames can serve it.
#[cfg(not(loom))]
fn order_of(nr_pages: u32) -> Option<usize> {
    let order = nr_pages.trailing_zeros() as usize;
    (nr_pages.is_power_of_two() && order <= MAX_ORDER).then_some(order)
}

/// One thread shard's cached blocks, by order, on its own cache line.
#[cfg(not(loom))]
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<[PcpList; MAX_ORDER + 1]>);

/// Refills the empty cache of `order` by splitting the most recently freed
/// cached block of the next larger order that has one: its memory is the
/// likeliest to be in the CPU's caches (a swap-out frees 64 KiB folios
/// while the RAM disk asks for 4 KiB pages), and it spares a zone trip.
#[cfg(not(loom))]
fn split_cached(cache: &mut [PcpList; MAX_ORDER + 1], order: usize) {
    let Some(larger) = (order + 1..=MAX_ORDER).find(|&o| !cache[o].frames.is_empty()) else {
        return;
    };
    let (frame, ptr) = cache[larger].pop(larger).expect("not empty");
    // Pushed last to first, so the block's first piece is popped first.
    for k in (0..1u32 << (larger - order)).rev() {
        let offset = (k as usize) << order;
        // SAFETY: `offset` pages lie inside the block of `larger` at `ptr`.
        let piece = unsafe { ptr.add(offset * PAGE_BYTES) };
        cache[order].push(frame + (k << order), piece, order);
    }
}

/// Cached free blocks of one order: frame numbers with their addresses
/// (kept as integers: the list only stores them; a `PageBuf` made from
/// one owns the block again).
#[cfg(not(loom))]
#[derive(Default)]
struct PcpList {
    frames: Vec<(u32, usize)>,
    pages: usize,
}

#[cfg(not(loom))]
impl PcpList {
    fn push(&mut self, frame: u32, ptr: std::ptr::NonNull<u8>, order: usize) {
        self.frames.push((frame, ptr.as_ptr() as usize));
        self.pages += 1 << order;
    }

    fn pop(&mut self, order: usize) -> Option<(u32, std::ptr::NonNull<u8>)> {
        let (frame, addr) = self.frames.pop()?;
        self.pages -= 1 << order;
        let ptr = std::ptr::NonNull::new(addr as *mut u8).expect("a frame's address");
        Some((frame, ptr))
    }
}

/// One chunk of frames: its memory and per-frame buddy state.
#[cfg(not(loom))]
struct Chunk {
    base: std::ptr::NonNull<u8>,
    /// Per frame: the order of the free block it heads, or `NOT_FREE`.
    free_order: Box<[u8; CHUNK_PAGES]>,
    /// Per frame heading a free block: its neighbours on that order's
    /// free list (global frame numbers).
    next: Box<[u32; CHUNK_PAGES]>,
    prev: Box<[u32; CHUNK_PAGES]>,
}

#[cfg(not(loom))]
impl Chunk {
    /// A zeroed chunk from the host (see [`host_chunk`]).
    fn new() -> Option<Self> {
        Some(Self {
            base: host_chunk::alloc()?,
            free_order: Box::new([NOT_FREE; CHUNK_PAGES]),
            next: Box::new([NONE; CHUNK_PAGES]),
            prev: Box::new([NONE; CHUNK_PAGES]),
        })
    }

    /// Writes every page once, so later use takes no host page fault.
    fn prefault(&self) {
        for page in 0..CHUNK_PAGES {
            // SAFETY: `page * PAGE_BYTES` lies inside the chunk; the chunk
            // is wholly free (just taken from the host), so no block of it
            // is borrowed, and writing a zero over zeroed memory changes
            // nothing a later reader could see.
            unsafe { self.base.add(page * PAGE_BYTES).write_volatile(0) };
        }
    }
}

#[cfg(not(loom))]
impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: no block of the chunk is in use: the zone drops a chunk
        // only when it is wholly free, or with the allocator, after every
        // holder of its blocks (they keep the allocator alive).
        unsafe { host_chunk::free(self.base) };
    }
}

// SAFETY: a chunk's memory is owned by the zone (and, block by block, by
// the `PageBuf`s handed out), not tied to a thread.
#[cfg(not(loom))]
unsafe impl Send for Chunk {}

/// Chunks of host memory: zeroed, [`CHUNK_BYTES`] long and aligned, so a
/// chunk can be backed by one transparent huge page (its first touch is
/// one fault, not 512, and its pages take one TLB entry).
#[cfg(not(loom))]
mod host_chunk {
    use super::CHUNK_BYTES;
    use std::ptr::NonNull;

    /// A chunk straight from the kernel: an anonymous mapping (zeroed by
    /// the kernel, faulted in on first touch) trimmed to 2 MiB alignment
    /// and advised to use a huge page.
    #[cfg(target_os = "linux")]
    pub(super) fn alloc() -> Option<NonNull<u8>> {
        let len = 2 * CHUNK_BYTES;
        // SAFETY: an anonymous private mapping at an address the kernel
        // picks; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(CHUNK_BYTES);
        // SAFETY: both ranges lie inside the mapping just made and are
        // ours alone; unmapping them leaves exactly the aligned chunk.
        unsafe {
            if aligned > start {
                libc::munmap(raw, aligned - start);
            }
            let tail = start + len - (aligned + CHUNK_BYTES);
            if tail > 0 {
                libc::munmap((aligned + CHUNK_BYTES) as *mut libc::c_void, tail);
            }
            // A hint; its failure changes nothing but speed.
            libc::madvise(
                aligned as *mut libc::c_void,
                CHUNK_BYTES,
                libc::MADV_HUGEPAGE,
            );
        }
        NonNull::new(aligned as *mut u8)
    }

    /// Unmaps a chunk from [`alloc`].
    ///
    /// # Safety
    /// `base` came from [`alloc`] and nothing borrows its memory any more.
    #[cfg(target_os = "linux")]
    pub(super) unsafe fn free(base: NonNull<u8>) {
        // SAFETY: by the contract, `base..base + CHUNK_BYTES` is our
        // mapping and unused.
        unsafe { libc::munmap(base.as_ptr().cast(), CHUNK_BYTES) };
    }

    #[cfg(not(target_os = "linux"))]
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(CHUNK_BYTES, CHUNK_BYTES).expect("a valid layout")
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn alloc() -> Option<NonNull<u8>> {
        // SAFETY: the layout has a non-zero size.
        NonNull::new(unsafe { std::alloc::alloc_zeroed(layout()) })
    }

    /// # Safety
    /// `base` came from [`alloc`] and nothing borrows its memory any more.
    #[cfg(not(target_os = "linux"))]
    pub(super) unsafe fn free(base: NonNull<u8>) {
        // SAFETY: by the contract, allocated with this layout and unused.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout()) };
    }
}

/// The chunks and their buddy free lists.
#[cfg(not(loom))]
struct Zone {
    /// Chunks by number; `None` where one went back to the host (its
    /// number is reused).
    chunks: Vec<Option<Chunk>>,
    /// Head of each order's free list (global frame numbers).
    heads: [u32; MAX_ORDER + 1],
    /// Pages on the free lists.
    free_pages: u64,
}

#[cfg(not(loom))]
impl Default for Zone {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            heads: [NONE; MAX_ORDER + 1],
            free_pages: 0,
        }
    }
}

#[cfg(not(loom))]
impl Zone {
    fn free_pages_of(&self, order: usize) -> u64 {
        let mut pages = 0;
        let mut at = self.heads[order];
        while at != NONE {
            pages += 1 << order;
            let page = split(at).1;
            at = self.chunks[split(at).0]
                .as_ref()
                .expect("a live chunk")
                .next[page];
        }
        pages
    }

    fn chunk_pages(&self) -> u64 {
        (self.chunks.iter().flatten().count() * CHUNK_PAGES) as u64
    }

    fn frame_ptr(&self, frame: u32) -> std::ptr::NonNull<u8> {
        let (chunk, page) = split(frame);
        let base = self.chunks[chunk].as_ref().expect("a live chunk").base;
        // SAFETY: `page < CHUNK_PAGES`, so the offset stays inside the
        // chunk's allocation.
        unsafe { base.add(page * PAGE_BYTES) }
    }

    fn chunk(&mut self, frame: u32) -> &mut Chunk {
        self.chunks[split(frame).0]
            .as_mut()
            .expect("a frame of a live chunk")
    }

    /// A free block of `order`, splitting a larger one or taking a new
    /// chunk (while the chunks stay within `limit_pages`) if need be.
    fn alloc(&mut self, order: usize, limit_pages: u64) -> Option<u32> {
        let from = (order..=MAX_ORDER).find(|&o| self.heads[o] != NONE);
        let mut at = match from {
            Some(o) => o,
            None => {
                self.grow(limit_pages)?;
                MAX_ORDER
            }
        };
        let frame = self.pop(at);
        // Split down, freeing the upper halves (`expand`).
        while at > order {
            at -= 1;
            self.push(at, frame + (1 << at));
        }
        Some(frame)
    }

    /// Frees the block of `order` at `frame`, merging it with its free
    /// buddies; a chunk that becomes wholly free beyond what the machine
    /// keeps goes back to the host.
    fn free(&mut self, mut frame: u32, mut order: usize, limit_pages: u64) {
        while order < MAX_ORDER {
            let buddy = frame ^ (1 << order);
            if self.chunk(buddy).free_order[split(buddy).1] != order as u8 {
                break;
            }
            self.remove(order, buddy);
            frame = frame.min(buddy);
            order += 1;
        }
        if order == MAX_ORDER && self.beyond_keep(limit_pages) {
            self.chunks[split(frame).0] = None;
            return;
        }
        self.push(order, frame);
    }

    /// Whether the chunks hold more than the machine may: over its size,
    /// or (a machine of no set size) more wholly free chunks than kept.
    fn beyond_keep(&self, limit_pages: u64) -> bool {
        if self.chunk_pages() > limit_pages.max(CHUNK_PAGES as u64) {
            return true;
        }
        // Wholly free chunks are the ones on the top order's list.
        let free_chunks = self.free_pages_of(MAX_ORDER) / CHUNK_PAGES as u64;
        limit_pages == u64::MAX && free_chunks >= KEEP_FREE_CHUNKS_UNBOUNDED as u64
    }

    /// Takes a new chunk from the host as one free block of `MAX_ORDER`.
    fn grow(&mut self, limit_pages: u64) -> Option<()> {
        if self.chunk_pages() + CHUNK_PAGES as u64 > limit_pages.max(CHUNK_PAGES as u64) {
            return None;
        }
        let chunk = Chunk::new()?;
        let index = match self.chunks.iter().position(Option::is_none) {
            Some(i) => {
                self.chunks[i] = Some(chunk);
                i
            }
            None => {
                self.chunks.push(Some(chunk));
                self.chunks.len() - 1
            }
        };
        let frame = u32::try_from(index * CHUNK_PAGES).ok()?;
        self.push(MAX_ORDER, frame);
        Some(())
    }

    fn push(&mut self, order: usize, frame: u32) {
        let head = self.heads[order];
        let page = split(frame).1;
        let chunk = self.chunk(frame);
        debug_assert_eq!(chunk.free_order[page], NOT_FREE, "freed twice");
        chunk.free_order[page] = order as u8;
        chunk.next[page] = head;
        chunk.prev[page] = NONE;
        if head != NONE {
            let head_page = split(head).1;
            self.chunk(head).prev[head_page] = frame;
        }
        self.heads[order] = frame;
        self.free_pages += 1 << order;
    }

    fn pop(&mut self, order: usize) -> u32 {
        let frame = self.heads[order];
        self.remove(order, frame);
        frame
    }

    fn remove(&mut self, order: usize, frame: u32) {
        let page = split(frame).1;
        let chunk = self.chunk(frame);
        debug_assert_eq!(chunk.free_order[page], order as u8);
        let (next, prev) = (chunk.next[page], chunk.prev[page]);
        chunk.free_order[page] = NOT_FREE;
        if prev == NONE {
            self.heads[order] = next;
        } else {
            let prev_page = split(prev).1;
            self.chunk(prev).next[prev_page] = next;
        }
        if next != NONE {
            let next_page = split(next).1;
            self.chunk(next).prev[next_page] = prev;
        }
        self.free_pages -= 1 << order;
    }

    /// Drops every chunk (the allocator is going away).
    fn release_all(&mut self) {
        self.chunks.clear();
    }
}

/// A global frame number as (chunk, page in chunk).
#[cfg(not(loom))]
fn split(frame: u32) -> (usize, usize) {
    (frame as usize / CHUNK_PAGES, frame as usize % CHUNK_PAGES)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const ANY: u64 = u64::MAX;

    fn is_frame(buf: &PageBuf) -> bool {
        matches!(buf.repr, Repr::Frame { .. })
    }

    #[test]
    fn blocks_are_reused_and_zeroed_when_asked() {
        let pages = PageAllocator::default();
        let mut a = pages.alloc_within(16, true, ANY);
        assert!(is_frame(&a) && a.len() == 16 * PAGE_BYTES);
        a.fill(7);
        let addr = a.as_ptr();
        pages.free_within(a, ANY);
        let b = pages.alloc_within(16, false, ANY);
        assert_eq!(b.as_ptr(), addr, "the freed block, from the thread's cache");
        assert_eq!(b[0], 7, "not zeroed unless asked");
        pages.free_within(b, ANY);
        let c = pages.alloc_within(16, true, ANY);
        assert!(c.iter().all(|&x| x == 0));
        pages.free_within(c, ANY);
        // A page after a freed 64 KiB block: the block's first page.
        let d = pages.alloc_within(16, false, ANY);
        let addr = d.as_ptr();
        pages.free_within(d, ANY);
        let e = pages.alloc_within(1, false, ANY);
        assert_eq!(e.as_ptr(), addr, "split from the cached larger block");
        pages.free_within(e, ANY);
    }

    #[test]
    fn buddies_merge_back_into_whole_chunks() {
        let zone = &mut Zone::default();
        let limit = CHUNK_PAGES as u64;
        let blocks: Vec<u32> = (0..CHUNK_PAGES)
            .map(|_| zone.alloc(0, limit).unwrap())
            .collect();
        assert_eq!(zone.alloc(0, limit), None, "the machine is one chunk");
        assert_eq!(zone.free_pages, 0);
        for frame in blocks.into_iter().rev() {
            zone.free(frame, 0, limit);
        }
        assert_eq!(zone.free_pages, CHUNK_PAGES as u64);
        assert_ne!(zone.heads[MAX_ORDER], NONE, "merged into one block");
        assert!((0..MAX_ORDER).all(|o| zone.heads[o] == NONE));
        // A 64 KiB block and a page come out of it without overlap.
        let big = zone.alloc(4, limit).unwrap();
        let page = zone.alloc(0, limit).unwrap();
        assert!(page >= big + 16 || page < big);
    }

    #[test]
    fn chunks_stay_within_the_machine_and_misfits_get_host_buffers() {
        let pages = PageAllocator::default();
        let limit = 2 * CHUNK_PAGES as u64;
        let held: Vec<PageBuf> = (0..3)
            .map(|_| pages.alloc_within(512, false, limit))
            .collect();
        assert_eq!(held.iter().filter(|b| is_frame(b)).count(), 2);
        assert_eq!(pages.frame_pages().0, limit);
        for buf in held {
            pages.free_within(buf, limit);
        }
        let odd = pages.alloc_within(3, true, limit);
        assert!(!is_frame(&odd) && odd.len() == 3 * PAGE_BYTES);
        pages.free_within(odd, limit);
    }

    #[test]
    fn prefaulting_grows_free_frames_within_the_machine() {
        let pages = PageAllocator::default();
        pages.prefault_within(600, 4 * CHUNK_PAGES as u64);
        assert_eq!(pages.frame_pages(), (1024, 1024), "whole chunks");
        pages.prefault_within(10_000, 4 * CHUNK_PAGES as u64);
        assert_eq!(
            pages.frame_pages().0,
            4 * CHUNK_PAGES as u64,
            "no more than the machine"
        );
        let buf = pages.alloc_within(512, true, ANY);
        assert!(is_frame(&buf) && buf.iter().all(|&b| b == 0));
        pages.free_within(buf, ANY);
    }

    #[test]
    fn wholly_free_chunks_beyond_the_machine_go_back() {
        let zone = &mut Zone::default();
        let limit = 2 * CHUNK_PAGES as u64;
        let (a, b) = (
            zone.alloc(MAX_ORDER, limit).unwrap(),
            zone.alloc(MAX_ORDER, limit).unwrap(),
        );
        assert_eq!(zone.chunk_pages(), limit);
        // The machine shrank to one chunk: the first freed goes back.
        zone.free(a, MAX_ORDER, CHUNK_PAGES as u64);
        assert_eq!(zone.chunk_pages(), CHUNK_PAGES as u64);
        zone.free(b, MAX_ORDER, CHUNK_PAGES as u64);
        assert_eq!(
            (zone.chunk_pages(), zone.free_pages),
            (CHUNK_PAGES as u64, CHUNK_PAGES as u64)
        );
        // Unbounded machines keep a few free chunks, not every one.
        let held: Vec<u32> = (0..KEEP_FREE_CHUNKS_UNBOUNDED + 4)
            .map(|_| zone.alloc(MAX_ORDER, u64::MAX).unwrap())
            .collect();
        for frame in held {
            zone.free(frame, MAX_ORDER, u64::MAX);
        }
        assert_eq!(
            zone.free_pages,
            (KEEP_FREE_CHUNKS_UNBOUNDED * CHUNK_PAGES) as u64
        );
    }

    #[test]
    fn threads_take_and_give_without_overlap() {
        let pages = PageAllocator::default();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let pages = &pages;
                s.spawn(move || {
                    for round in 0..200 {
                        let order = (round % 5) as u32;
                        let mut held: Vec<PageBuf> = (0..8)
                            .map(|_| pages.alloc_within(1 << order, false, ANY))
                            .collect();
                        for buf in &mut held {
                            buf.fill(t);
                        }
                        for buf in held {
                            assert!(buf.iter().all(|&b| b == t), "another thread wrote here");
                            pages.free_within(buf, ANY);
                        }
                    }
                });
            }
        });
        let (chunks, free) = pages.frame_pages();
        assert_eq!(chunks, free, "every frame came back");
    }
}
