//! On-demand readahead: how many pages a buffered read brings into the page
//! cache beyond what it asked for (mm/readahead.c, v6.14).
//!
//! # What it does
//!
//! Every open file has a [`FileRaState`] (`struct file_ra_state`): the
//! current window (`start`, `size` pages, the last `async_size` of which
//! are read ahead of need), the device's `ra_pages` as it was at open
//! (`read_ahead_kb` / 4, 32 pages by default), and `prev_pos`, the byte
//! after the end of the previous read. A read (`filemap.rs`) calls in:
//!
//! - `page_cache_sync_ra` when the page it needs is not cached. At the
//!   start of the file, for a read larger than the window, or right after
//!   the previous read (`index - prev_index <= 1`) it opens the initial
//!   window: `get_init_ra_size` of the request (a 1-page read gets 4 pages
//!   when `ra_pages` is 32, 2 pages get 4, 3–4 get 8, up to the maximum),
//!   the pages past the request being the async part. Otherwise the pages
//!   cached just before tell whether this is a stream: if fewer than the
//!   request, it is a random read and only the request is read, leaving the
//!   window alone; else the window covers that history plus the request
//!   (doubled if the file is cached from its start), with an async part of
//!   one page. With `ra_pages` 0 only the page itself is read
//!   (`force_page_cache_ra`).
//! - `page_cache_async_ra` when it reads a page marked `PG_readahead`:
//!   the mark is cleared, and if the page is where the window's async part
//!   starts the window moves on, growing (`get_next_ra_size`: ×4 while
//!   under 1/16 of the maximum, ×2 up to half, then the maximum), all of it
//!   async; a marked page elsewhere (interleaved streams) sizes the new
//!   window from the cached run after it.
//!
//! Either way the window is read by `do_page_cache_ra`: cut at the page
//! holding the last byte of the file (never past the end), pages already
//! cached skipped, and the first page of the async part, if brought in,
//! marked `PG_readahead`. The mapping brings each page in charged to the
//! reader's memory cgroup with `__GFP_NORETRY` ([`Gfp::NoRetry`]: reclaim,
//! but no retries and no OOM kill), on the inactive list and not marked
//! accessed, a shadow found there counting as a refault; the first page it
//! cannot bring in ends the window quietly, and the read itself then
//! allocates the page it needs with the full effort of an ordinary charge.
//!
//! Files have no large folios here (as ext4 in v6.14), so
//! `page_cache_ra_order` always takes its single-page fallback. Not
//! modelled: `FMODE_RANDOM` (`POSIX_FADV_RANDOM`), `blk_cgroup_congested`,
//! mmap fault readahead, and the `PG_readahead`/`PG_reclaim` bit sharing
//! (a folio under writeback would not trigger async readahead).
//!
//! # Invariants
//!
//! - Readahead never brings in a page at or past the end of the file, nor
//!   more than the window's size in one call.
//! - A failed readahead charge leaves nothing charged and fails no read.
//!
//! # Locking
//!
//! None of its own. A [`FileRaState`] belongs to its open file: the caller
//! passes it by `&mut` (the kernel updates `f_ra` without a lock; racing
//! readers of one open file may lose each other's updates, which costs only
//! readahead accuracy, here too). The mapping takes its own lock for each
//! look-up and insertion.
//!
//! [`Gfp::NoRetry`]: crate::memcontrol::Gfp::NoRetry

use crate::folio::Folio;
use crate::mm_types::PAGE_SIZE;

/// `read_ahead_kb` of a new device (`VM_READAHEAD_PAGES`: 128K).
pub(crate) const DEFAULT_READ_AHEAD_KB: u64 = 128;

/// Pages per KiB shift (`PAGE_SHIFT - 10`).
const KB_SHIFT: u32 = PAGE_SIZE.trailing_zeros() - 10;

/// `bdi->io_pages` of a device with no request-size limit of its own
/// (`bdi_init`: `VM_READAHEAD_PAGES`): how far a read larger than the
/// window may extend it.
const BDI_IO_PAGES: u64 = DEFAULT_READ_AHEAD_KB >> KB_SHIFT;

/// Pages `force_page_cache_ra` reads per step (2M).
const FORCE_RA_CHUNK_PAGES: u64 = (2 << 20) / PAGE_SIZE;

/// `ra_pages` for `read_ahead_kb` (`read_ahead_kb_store`: KiB rounded
/// down to whole pages).
pub(crate) fn ra_pages_of_kb(read_ahead_kb: u64) -> u64 {
    read_ahead_kb >> KB_SHIFT
}

/// `read_ahead_kb` as read back for `ra_pages`.
pub(crate) fn kb_of_ra_pages(ra_pages: u64) -> u64 {
    ra_pages.saturating_mul(1 << KB_SHIFT)
}

/// The readahead state of one open file (`struct file_ra_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRaState {
    start: u64,
    size: u64,
    async_size: u64,
    ra_pages: u64,
    /// The byte after the previous read (`loff_t`: -1 before any).
    prev_pos: i64,
}

impl FileRaState {
    /// The state of a file opened on a device whose readahead is
    /// `ra_pages` (`file_ra_state_init`).
    pub fn new(ra_pages: u64) -> Self {
        Self {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages,
            prev_pos: -1,
        }
    }

    /// The first page of the current window.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Pages in the current window.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Pages at the end of the window read ahead of need.
    pub fn async_size(&self) -> u64 {
        self.async_size
    }

    /// The most pages a window holds (`read_ahead_kb` at open, in pages).
    #[cfg(test)]
    pub(crate) fn ra_pages(&self) -> u64 {
        self.ra_pages
    }

    /// The byte after the end of the previous read, if any.
    pub fn prev_pos(&self) -> Option<u64> {
        u64::try_from(self.prev_pos).ok()
    }

    /// The previous read's end as `filemap_read` keeps it (`loff_t`).
    pub(crate) fn prev_pos_raw(&self) -> i64 {
        self.prev_pos
    }

    /// Records where a read ended.
    pub(crate) fn set_prev_pos_raw(&mut self, pos: i64) {
        self.prev_pos = pos;
    }
}

/// What readahead needs of a file's page cache.
pub(crate) trait RaMapping {
    /// The first index at or below `index` holding no folio, looking at
    /// most `max_scan` pages; `u64::MAX` if the scan went below 0; the
    /// last index looked at if all were cached (`page_cache_prev_miss`).
    fn prev_miss(&self, index: u64, max_scan: u64) -> u64;
    /// The first index at or above `index` holding no folio, looking at
    /// most `max_scan` pages; `index + max_scan` if all were cached, 0 if
    /// the scan wrapped (`page_cache_next_miss`).
    fn next_miss(&self, index: u64, max_scan: u64) -> u64;
    /// Brings in the pages of `index..index + nr` not cached, in order,
    /// marking the one at offset `mark` `PG_readahead` if it brings that
    /// one in, and stopping at the first it cannot
    /// (`page_cache_ra_unbounded`).
    fn read_pages(&self, index: u64, nr: u64, mark: Option<u64>);
}

/// The initial window for a read of `size` pages (`get_init_ra_size`).
pub(crate) fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.max(1).next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

/// The window after one of `cur` pages (`get_next_ra_size`).
pub(crate) fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// The largest window for a request of `req_size` pages: a request
/// larger than `ra_pages` may go up to the device's I/O size
/// (`ractl_max_pages`).
fn ractl_max_pages(ra: &FileRaState, req_size: u64) -> u64 {
    if req_size > ra.ra_pages && BDI_IO_PAGES > ra.ra_pages {
        req_size.min(BDI_IO_PAGES)
    } else {
        ra.ra_pages
    }
}

/// A read needs page `index`, which is not cached, and `req_count` pages
/// from there (`page_cache_sync_ra`): brings in a window, the request
/// alone, or (readahead off) the page alone.
pub(crate) fn page_cache_sync_ra(
    mapping: &impl RaMapping,
    ra: &mut FileRaState,
    index: u64,
    req_count: u64,
    i_size: u64,
) {
    if ra.ra_pages == 0 {
        force_page_cache_ra(mapping, ra, index, 1, i_size);
        return;
    }
    let max_pages = ractl_max_pages(ra, req_count);
    let prev_index = (ra.prev_pos as u64) >> PAGE_SIZE.trailing_zeros();
    // The start of the file, a read larger than the window, or the page
    // right after (or the same page as) the previous read's end.
    if index == 0 || req_count > max_pages || index.wrapping_sub(prev_index) <= 1 {
        ra.start = index;
        ra.size = get_init_ra_size(req_count, max_pages);
        ra.async_size = if ra.size > req_count {
            ra.size - req_count
        } else {
            ra.size >> 1
        };
    } else {
        // The pages cached just before: what a stream leaves behind.
        let miss = mapping.prev_miss(index - 1, max_pages);
        let mut contig_count = index.wrapping_sub(miss).wrapping_sub(1);
        if contig_count <= req_count {
            // A random read: the request only, the state left alone.
            do_page_cache_ra(mapping, index, req_count, 0, i_size);
            return;
        }
        // Cached from the start of the file: a whole-file read.
        if miss == u64::MAX {
            contig_count = contig_count.saturating_mul(2);
        }
        ra.start = index;
        ra.size = contig_count.saturating_add(req_count).min(max_pages);
        ra.async_size = 1;
    }
    do_page_cache_ra(mapping, ra.start, ra.size, ra.async_size, i_size);
}

/// A read reached `folio`, marked `PG_readahead`, needing `req_count`
/// pages from it (`page_cache_async_ra`): clears the mark and reads the
/// next window ahead.
pub(crate) fn page_cache_async_ra(
    mapping: &impl RaMapping,
    ra: &mut FileRaState,
    folio: &Folio,
    req_count: u64,
    i_size: u64,
) {
    if ra.ra_pages == 0 {
        return;
    }
    folio.clear_readahead();
    let index = folio.index();
    let max_pages = ractl_max_pages(ra, req_count);
    let expected = ra.start.wrapping_add(ra.size).wrapping_sub(ra.async_size);
    if index == expected {
        // The mark this window set: a stream; move on and grow.
        ra.start = ra.start.wrapping_add(ra.size);
        ra.size = get_next_ra_size(ra.size, max_pages);
        ra.async_size = ra.size;
    } else {
        // Someone else's mark (interleaved reads): the cached run after
        // it is about the old async size.
        let start = mapping.next_miss(index + 1, max_pages);
        if start == 0 || start - index > max_pages {
            return;
        }
        ra.start = start;
        ra.size = get_next_ra_size(start - index + req_count, max_pages);
        ra.async_size = ra.size;
    }
    do_page_cache_ra(mapping, ra.start, ra.size, ra.async_size, i_size);
}

/// Reads `nr_to_read` pages from `index` with no readahead logic, in 2M
/// steps, at most the larger of the window and the device's I/O size
/// (`force_page_cache_ra`).
fn force_page_cache_ra(
    mapping: &impl RaMapping,
    ra: &FileRaState,
    mut index: u64,
    nr_to_read: u64,
    i_size: u64,
) {
    let mut left = nr_to_read.min(BDI_IO_PAGES.max(ra.ra_pages));
    while left > 0 {
        let chunk = left.min(FORCE_RA_CHUNK_PAGES);
        do_page_cache_ra(mapping, index, chunk, 0, i_size);
        index += chunk;
        left -= chunk;
    }
}

/// Reads `nr_to_read` pages from `index`, cut at the page holding the
/// file's last byte, marking the one `lookahead` pages before the end of
/// the request (`do_page_cache_ra`).
fn do_page_cache_ra(
    mapping: &impl RaMapping,
    index: u64,
    nr_to_read: u64,
    lookahead: u64,
    i_size: u64,
) {
    if i_size == 0 {
        return;
    }
    let end_index = (i_size - 1) / PAGE_SIZE;
    if index > end_index {
        return;
    }
    let nr = nr_to_read.min(end_index - index + 1);
    // No async part, or one cut off by the end of the file: no mark.
    let mark = (1..=nr).contains(&lookahead).then(|| nr - lookahead);
    mapping.read_pages(index, nr, mark);
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use super::*;
    use crate::memcontrol::Gfp;

    /// A page cache of indices, recording what readahead asked for.
    #[derive(Default)]
    struct Cache {
        cached: RefCell<BTreeSet<u64>>,
        marked: RefCell<BTreeSet<u64>>,
        calls: RefCell<Vec<(u64, u64, Option<u64>)>>,
    }

    impl RaMapping for Cache {
        fn prev_miss(&self, index: u64, max_scan: u64) -> u64 {
            let cached = self.cached.borrow();
            let mut at = index;
            for n in 0..max_scan {
                if n > 0 {
                    at = at.wrapping_sub(1);
                }
                if !cached.contains(&at) {
                    break;
                }
            }
            at
        }

        fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
            let cached = self.cached.borrow();
            (index..index + max_scan)
                .find(|i| !cached.contains(i))
                .unwrap_or(index + max_scan)
        }

        fn read_pages(&self, index: u64, nr: u64, mark: Option<u64>) {
            self.calls.borrow_mut().push((index, nr, mark));
            for i in 0..nr {
                if self.cached.borrow_mut().insert(index + i) && Some(i) == mark {
                    self.marked.borrow_mut().insert(index + i);
                }
            }
        }
    }

    const MB: u64 = 1 << 20;

    #[test]
    fn the_initial_window_follows_the_kernel_table() {
        // ra_pages 32 (128K): 1-2 pages -> 4, 3-4 -> 8, 5-8 -> 16, more -> 32.
        let sizes: Vec<u64> = (1..=9).map(|n| get_init_ra_size(n, 32)).collect();
        assert_eq!(sizes, [4, 4, 8, 8, 16, 16, 16, 16, 32]);
        assert_eq!(get_init_ra_size(64, 32), 32);
        // A large window: x4 up to max/32, x2 up to max/4.
        assert_eq!(get_init_ra_size(1, 512), 4);
        assert_eq!(get_init_ra_size(16, 512), 64);
        assert_eq!(get_init_ra_size(128, 512), 256);
        assert_eq!(get_init_ra_size(129, 512), 512);
    }

    #[test]
    fn the_window_ramps_up_to_the_maximum() {
        let mut cur = 4;
        let mut seen = vec![cur];
        while cur < 32 {
            cur = get_next_ra_size(cur, 32);
            seen.push(cur);
        }
        assert_eq!(seen, [4, 8, 16, 32]);
        assert_eq!(get_next_ra_size(1, 32), 4, "x4 below max/16");
        assert_eq!(get_next_ra_size(32, 32), 32);
    }

    #[test]
    fn a_first_one_page_read_brings_four_pages_and_marks_the_second() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(ra_pages_of_kb(DEFAULT_READ_AHEAD_KB));
        assert_eq!(ra.ra_pages(), 32);
        page_cache_sync_ra(&cache, &mut ra, 0, 1, 100 * MB);
        assert_eq!(*cache.calls.borrow(), [(0, 4, Some(1))]);
        assert_eq!((ra.start(), ra.size(), ra.async_size()), (0, 4, 3));
        assert_eq!(*cache.marked.borrow(), BTreeSet::from([1]));
    }

    #[test]
    fn never_past_the_end_of_the_file() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(32);
        // 100 bytes: one page, though the window is 4.
        page_cache_sync_ra(&cache, &mut ra, 0, 1, 100);
        assert_eq!(*cache.calls.borrow(), [(0, 1, None)]);
        // An empty file, or a page past the end: nothing.
        page_cache_sync_ra(&cache, &mut ra, 0, 1, 0);
        page_cache_sync_ra(&cache, &mut ra, 5, 1, 4 * 4096);
        assert_eq!(cache.calls.borrow().len(), 1);
    }

    #[test]
    fn readahead_off_reads_the_page_alone() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(ra_pages_of_kb(0));
        page_cache_sync_ra(&cache, &mut ra, 0, 16, 100 * MB);
        assert_eq!(*cache.calls.borrow(), [(0, 1, None)]);
        assert!(cache.marked.borrow().is_empty());
    }

    /// A sequential reader of `req` pages per read, as `filemap_read`
    /// drives readahead: sync on a miss, async on a marked page.
    fn stream(cache: &Cache, ra: &mut FileRaState, req: u64, reads: u64, i_size: u64) {
        let tree = crate::memcontrol::CgroupTree::default();
        for n in 0..reads {
            let index = n * req;
            for i in index..index + req {
                if !cache.cached.borrow().contains(&i) {
                    page_cache_sync_ra(cache, ra, i, index + req - i, i_size);
                }
                if cache.marked.borrow_mut().remove(&i) {
                    let folio = Folio::new_file(&tree, tree.root(), 1, i, Gfp::Kernel).unwrap();
                    folio.set_readahead();
                    page_cache_async_ra(cache, ra, &folio, index + req - i, i_size);
                    assert!(!folio.test_readahead(), "the mark is cleared");
                }
            }
            ra.set_prev_pos_raw(((index + req) * PAGE_SIZE) as i64);
        }
    }

    #[test]
    fn a_stream_of_one_page_reads_grows_the_window_async() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(32);
        stream(&cache, &mut ra, 1, 40, 100 * MB);
        // 4 pages (mark at 1), then windows of 8, 16, 32, 32 started by
        // the marks at their first page.
        assert_eq!(
            *cache.calls.borrow(),
            [
                (0, 4, Some(1)),
                (4, 8, Some(0)),
                (12, 16, Some(0)),
                (28, 32, Some(0)),
                (60, 32, Some(0)),
            ]
        );
    }

    #[test]
    fn a_large_read_is_capped_at_the_window() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(32);
        // 64K reads (16 pages): 32 pages, the second half async.
        page_cache_sync_ra(&cache, &mut ra, 0, 16, 100 * MB);
        assert_eq!(*cache.calls.borrow(), [(0, 32, Some(16))]);
        // A 1M read: the window, half of it async.
        let cache = Cache::default();
        let mut ra = FileRaState::new(32);
        page_cache_sync_ra(&cache, &mut ra, 0, 256, 100 * MB);
        assert_eq!(*cache.calls.borrow(), [(0, 32, Some(16))]);
    }

    #[test]
    fn a_random_read_reads_the_request_and_leaves_the_window() {
        let cache = Cache::default();
        let mut ra = FileRaState::new(32);
        page_cache_sync_ra(&cache, &mut ra, 0, 1, 100 * MB);
        ra.set_prev_pos_raw(4096);
        let before = ra;
        // Far away, with nothing cached before it.
        page_cache_sync_ra(&cache, &mut ra, 1000, 2, 100 * MB);
        assert_eq!(cache.calls.borrow()[1], (1000, 2, None));
        assert_eq!(ra, before, "the state is left alone");
    }

    #[test]
    fn cached_history_before_a_miss_opens_a_window() {
        let cache = Cache::default();
        // Pages 100..110 cached (another reader's stream), then a read at
        // 110 by a file whose previous read was elsewhere.
        cache.cached.borrow_mut().extend(100..110);
        let mut ra = FileRaState::new(32);
        ra.set_prev_pos_raw(7 * 4096);
        page_cache_sync_ra(&cache, &mut ra, 110, 1, 100 * MB);
        // prev_miss(109, 32) finds 99: 10 pages of history, + 1 requested.
        assert_eq!(*cache.calls.borrow(), [(110, 11, Some(10))]);
        assert_eq!((ra.size(), ra.async_size()), (11, 1));
    }

    #[test]
    fn history_from_the_start_of_the_file_doubles() {
        let cache = Cache::default();
        cache.cached.borrow_mut().extend(0..5);
        let mut ra = FileRaState::new(32);
        ra.set_prev_pos_raw(100 * 4096);
        page_cache_sync_ra(&cache, &mut ra, 5, 1, 100 * MB);
        // 5 pages back to index 0: doubled to 10, + 1.
        assert_eq!((ra.start(), ra.size(), ra.async_size()), (5, 11, 1));
    }

    #[test]
    fn read_ahead_kb_rounds_to_pages() {
        assert_eq!(ra_pages_of_kb(130), 32);
        assert_eq!(kb_of_ra_pages(ra_pages_of_kb(130)), 128);
        assert_eq!(ra_pages_of_kb(3), 0);
    }
}
