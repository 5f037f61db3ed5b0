//! Readahead and read accessed-marking through open files, end to end:
//! the window a first small read brings in (4 pages, as booted 6.12 and
//! 7.3 kernels charge), the async mark that moves it on, `read_ahead_kb`,
//! the end of the file, `memory.max`, refaults, and the one mark per page
//! of consecutive reads (`filemap_read`'s `pos_same_folio`).

use std::sync::Arc;

use memcg::fs::{FsSource, ReadCalls, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::lruvec::LruList;
use memcg::machine::Machine;
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgEvent, MemcgStat, VmEvent};
use memcg::vmscan::SwapSpace;

const PAGE: u64 = 4096;

/// A tree without charge stock in a machine (for its reclaim), `/a`, and
/// a RAM disk holding `pages` pages of file `f`, written back and dropped
/// from the cache.
fn cold_file(pages: u64) -> (Arc<Machine>, Arc<MemCgroup>, Arc<Superblock>) {
    let machine = Machine::with_tree(CgroupTree::default());
    let t = machine.tree().clone();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = Superblock::mount(
        &t,
        FsSource::Ram {
            size_bytes: 64 << 20,
        },
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    let data: Vec<u8> = (0..pages * PAGE).map(|i| (i % 251) as u8).collect();
    sb.write(&t.root().clone(), "f", &data).unwrap();
    sb.sync().unwrap();
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    assert_eq!(sb.counts().nr_cached_pages, 0);
    (machine, a, sb)
}

fn file_pages(memcg: &MemCgroup) -> i64 {
    memcg.stat(MemcgStat::File)
}

#[test]
fn a_first_small_read_charges_the_initial_window_of_four_pages() {
    let (_t, a, sb) = cold_file(256);
    let file = sb.open_file(&a, "f", false).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(file.read_at(&a, 0, &mut byte).unwrap(), 1);
    // get_init_ra_size(1 page, 32) = 4: pages 0-3, the last 3 async.
    assert_eq!(file_pages(&a), 4);
    let ra = file.ra_state();
    assert_eq!((ra.start(), ra.size(), ra.async_size()), (0, 4, 3));
    assert_eq!(ra.prev_pos(), Some(1));
    // Page 1 starts the next window; the readahead pages sit on the
    // inactive list, not accessed (only page 0 was read).
    assert!(sb.folio("f", 1).unwrap().test_readahead());
    assert_eq!(a.lruvec().size(LruList::InactiveFile), 4);
    // Reading on into page 1 hits the mark: the window moves on, twice as
    // large (get_next_ra_size(4) = 8), all of it async.
    let mut buf = vec![0u8; PAGE as usize];
    assert_eq!(file.read_at(&a, PAGE, &mut buf).unwrap(), PAGE as usize);
    assert!(!sb.folio("f", 1).unwrap().test_readahead());
    assert_eq!(file_pages(&a), 12);
    let ra = file.ra_state();
    assert_eq!((ra.start(), ra.size(), ra.async_size()), (4, 8, 8));
    assert!(sb.folio("f", 4).unwrap().test_readahead());
    let at = |i: u64| ((PAGE + i) % 251) as u8;
    assert_eq!(buf[..3], [at(0), at(1), at(2)]);
}

#[test]
fn read_ahead_kb_sets_the_window_for_files_opened_after() {
    let (_t, a, sb) = cold_file(256);
    assert_eq!(sb.read_ahead_kb(), 128);
    let before = sb.open_file(&a, "f", false).unwrap();
    sb.set_read_ahead_kb(0);
    assert_eq!(sb.read_ahead_kb(), 0);
    let off = sb.open_file(&a, "f", false).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    // Readahead off: the page read alone, however large the request.
    off.read_at(&a, 100 * PAGE, &mut buf[..1]).unwrap();
    assert_eq!(file_pages(&a), 1);
    // The file opened before keeps its 128K window.
    before.read_at(&a, 0, &mut buf[..1]).unwrap();
    assert_eq!(file_pages(&a), 5);
    // Rounded down to pages: 130K is 32 pages, read back as 128.
    sb.set_read_ahead_kb(130);
    assert_eq!(sb.read_ahead_kb(), 128);
}

#[test]
fn a_larger_read_ahead_kb_scales_the_initial_window() {
    let (_t, a, sb) = cold_file(256);
    // A 16K read at the start gets 4 x 4 pages of 512K's 128-page
    // maximum (get_init_ra_size: x4 up to max/32), where 128K's 32-page
    // maximum gives 2 x 4 (x2 up to max/4).
    sb.set_read_ahead_kb(512);
    let file = sb.open_file(&a, "f", false).unwrap();
    let mut buf = vec![0u8; 4 * PAGE as usize];
    file.read_at(&a, 0, &mut buf).unwrap();
    assert_eq!(file_pages(&a), 16);
    let ra = file.ra_state();
    assert_eq!((ra.start(), ra.size(), ra.async_size()), (0, 16, 12));
}

#[test]
fn readahead_never_reads_past_the_end_of_the_file() {
    let (machine, a, sb) = cold_file(3);
    let t = machine.tree().clone();
    let calls = ReadCalls {
        offset: 0,
        bs: 1,
        count: Some(1),
    };
    assert_eq!(sb.read_calls(&a, "f", calls, |_| {}).unwrap(), 1);
    assert_eq!(file_pages(&a), 3, "the 4-page window cut at the end");
    // A 100-byte file: one page, whatever the request.
    sb.write(&a, "small", &[7; 100]).unwrap();
    sb.sync().unwrap();
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    assert_eq!(file_pages(&a), 0);
    assert_eq!(sb.read(&a, "small").unwrap(), [7; 100]);
    assert_eq!(file_pages(&a), 1);
}

#[test]
fn a_readahead_charge_over_memory_max_stops_quietly() {
    let (_t, a, sb) = cold_file(256);
    let file = sb.open_file(&a, "f", false).unwrap();
    // Room for two pages of page cache.
    let usage = a.memory().usage();
    a.memory().set_max(usage + 2).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(file.read_at(&a, 0, &mut byte).unwrap(), 1);
    // The window's third page did not fit: reclaim found nothing it could
    // take (the window's pages are held until it is in), and readahead
    // stopped without an OOM.
    assert_eq!(file_pages(&a), 2);
    assert!(a.event(MemcgEvent::Max) > 0);
    assert_eq!(a.event(MemcgEvent::Oom), 0);
    assert_eq!(a.event(MemcgEvent::OomKill), 0);
    // Reading on still works, page by page as room allows.
    let mut buf = vec![0u8; 8 * PAGE as usize];
    assert_eq!(file.read_at(&a, 0, &mut buf).unwrap(), buf.len());
    assert!(a.memory().usage() <= usage + 2);
    assert_eq!(a.event(MemcgEvent::Oom), 0);
}

#[test]
fn readahead_of_evicted_pages_counts_refaults() {
    let (machine, a, sb) = cold_file(64);
    let t = machine.tree().clone();
    sb.read(&a, "f").unwrap();
    assert_eq!(file_pages(&a), 64);
    let freed = memcg::vmscan::try_to_free_mem_cgroup_pages(
        &t,
        &a,
        64,
        &SwapSpace::default,
        memcg::memcontrol::ReclaimOptions::default(),
    );
    assert!(freed >= 64, "{freed}");
    assert_eq!(file_pages(&a), 0);
    let file = sb.open_file(&a, "f", false).unwrap();
    let mut byte = [0u8; 1];
    file.read_at(&a, 0, &mut byte).unwrap();
    // The 4 pages readahead brought back each found its shadow.
    assert_eq!(file_pages(&a), 4);
    assert_eq!(a.stat(MemcgStat::WorkingsetRefaultFile), 4);
}

#[test]
fn two_reads_within_one_page_mark_it_accessed_once() {
    let (_t, a, sb) = cold_file(8);
    let file = sb.open_file(&a, "f", false).unwrap();
    let mut buf = [0u8; 100];
    file.read_at(&a, 0, &mut buf).unwrap();
    file.read_at(&a, 100, &mut buf).unwrap();
    // Page 0: referenced by the first read only; still inactive.
    assert_eq!(a.lruvec().size(LruList::ActiveFile), 0);
    assert_eq!(a.vm_event(VmEvent::Pgactivate), 0);
    // A read that starts in the next page marks that one; page 0 was the
    // previous read's last page, so a read starting there again does not
    // mark it a second time either.
    file.read_at(&a, 4000, &mut buf).unwrap();
    assert_eq!(a.lruvec().size(LruList::ActiveFile), 0);
    // Another open file has no previous read: its read of page 0 is a
    // second access, which activates it.
    let other = sb.open_file(&a, "f", false).unwrap();
    other.read_at(&a, 0, &mut buf).unwrap();
    assert_eq!(a.lruvec().size(LruList::ActiveFile), 1);
    assert_eq!(a.vm_event(VmEvent::Pgactivate), 1);
}
