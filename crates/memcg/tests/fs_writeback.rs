//! Dirty page cache end to end: the writer throttled at its memory
//! cgroup's dirty threshold with background writeback behind it, reclaim
//! that never writes a file page (it activates dirty folios, wakes the
//! flushers, and frees them once written and rotated), the periodic
//! writeback of expired data on a virtual clock, sync, and a flusher
//! thread.
#![cfg(not(loom))]

use std::sync::Arc;
use std::time::Duration;

use memcg::clock::VirtualClock;
use memcg::fs::{FsSource, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::lruvec::LruList;
use memcg::machine::Machine;
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgStat, VmEvent};
use memcg::page_writeback::run_due_flushers;
use memcg::vmscan::SwapSpace;

const PAGE: u64 = 4096;

/// A tree on a virtual clock with a machine of `mem_pages` (its reclaim
/// the machine's), and a RAM disk of 128M.
fn machine(mem_pages: u64) -> (Arc<Machine>, Arc<VirtualClock>, Arc<Superblock>) {
    let machine = Machine::with_tree(CgroupTree::default());
    let t = machine.tree().clone();
    t.set_charge_stock(false);
    t.set_machine_pages(mem_pages);
    let clock = Arc::new(VirtualClock::default());
    t.set_clock(clock.clone());
    let sb = Superblock::mount(
        &t,
        FsSource::Ram {
            size_bytes: 128 << 20,
        },
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    (machine, clock, sb)
}

fn byte(i: u64) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 12) as u8
}

/// Writes `size` bytes of the pattern to `name` as a task of `memcg`, 64K
/// at a time, calling `each` after every write.
fn write_pattern(
    sb: &Superblock,
    memcg: &Arc<MemCgroup>,
    name: &str,
    size: u64,
    mut each: impl FnMut(),
) {
    let file = sb.open_file(memcg, name, true).unwrap();
    let mut offset = 0;
    while offset < size {
        let len = (size - offset).min(64 << 10);
        let chunk: Vec<u8> = (offset..offset + len).map(byte).collect();
        file.write_at(memcg, offset, &chunk).unwrap();
        offset += len;
        each();
    }
}

fn assert_reads_back(sb: &Superblock, memcg: &Arc<MemCgroup>, name: &str, size: u64) {
    let mut offset = 0u64;
    sb.read_with(memcg, name, |chunk| {
        for (i, &b) in chunk.iter().enumerate() {
            assert_eq!(b, byte(offset + i as u64), "byte {}", offset + i as u64);
        }
        offset += chunk.len() as u64;
    })
    .unwrap();
    assert_eq!(offset, size);
}

fn dirty(memcg: &MemCgroup) -> u64 {
    (memcg.stat(MemcgStat::FileDirty) + memcg.stat(MemcgStat::FileWriteback)) as u64
}

/// R2: `memory.max` 20M, a 40M file written through a RAM disk. The
/// writer is held to its memory cgroup's dirty threshold (20% of a domain
/// of about 20M), background writeback cleaning behind it; every byte
/// reads back; sync and drop_caches leave nothing.
#[test]
fn a_writer_is_held_to_its_memcg_domains_dirty_threshold() {
    let (machine, _clock, sb) = machine(64 << 10);
    let t = machine.tree().clone();
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    // /a's own structures, charged to the root while /a lives.
    let metadata_pages = t.machine_used_pages();
    a.memory().set_max((20 << 20) / PAGE).unwrap();
    let (mut max_dirty, mut max_thresh) = (0, 0);
    write_pattern(&sb, &a, "f", 40 << 20, || {
        let m = t.dirty_limits(&a).memcg.unwrap();
        max_dirty = max_dirty.max(dirty(&a));
        max_thresh = max_thresh.max(m.thresh);
        // A balance comes every few pages: never far past the threshold.
        assert!(dirty(&a) <= m.thresh + 32, "{} dirty, {m:?}", dirty(&a));
    });
    assert!(max_thresh <= (20 << 20) / PAGE / 5, "{max_thresh}");
    assert!(
        max_dirty > max_thresh / 2,
        "the writer ran up to the freerun ceiling: {max_dirty}"
    );
    assert!(
        sb.counts().disk_pages > (20 << 20) / PAGE,
        "written back as it went"
    );
    assert!(a.vm_event(VmEvent::PgstealDirect) > 0);
    assert_reads_back(&sb, &a, "f", 40 << 20);
    sb.sync().unwrap();
    assert_eq!(dirty(&a), 0);
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    assert_eq!(a.stat(MemcgStat::File), 0);
    assert_eq!(sb.bdi().nr_writebacks(), 0, "no writeback left pinning /a");
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(a.memory().usage(), 0);
    assert_eq!(t.machine_used_pages(), metadata_pages);
}

/// D3: a memory cgroup without a limit dirties 4M, then reclaim brings
/// it down to 1M (as a lower `memory.max` would). Reclaim never writes a
/// file page: the dirty folios it meets are activated (`pgactivate`), a
/// batch that was all dirty wakes the flushers, which write everything and
/// rotate the marked folios back; only then are they freed. Every byte
/// reads back.
#[test]
fn reclaim_activates_dirty_folios_and_frees_them_once_the_flusher_wrote_them() {
    let (machine, _clock, sb) = machine(64 << 10);
    let t = machine.tree().clone();
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    write_pattern(&sb, &a, "f", 1024 * PAGE, || {});
    assert_eq!(
        dirty(&a),
        1024,
        "no limit: no throttle, and under the global background"
    );
    assert_eq!(sb.counts().disk_pages, 0);
    let opts = memcg::memcontrol::ReclaimOptions::default();
    let mut rounds = 0;
    while a.memory().usage() > 256 {
        let disk_before = sb.counts().disk_pages;
        let steal_before = a.vm_event(VmEvent::PgstealDirect);
        memcg::vmscan::try_to_free_mem_cgroup_pages(&t, &a, 32, &SwapSpace::default, opts);
        let freed = a.vm_event(VmEvent::PgstealDirect) - steal_before;
        // Nothing was freed that had not reached the disk.
        assert!(
            sb.counts().disk_pages >= freed + disk_before.min(steal_before),
            "round {rounds}"
        );
        rounds += 1;
        assert!(rounds < 100, "reclaim made no progress");
    }
    assert!(
        a.vm_event(VmEvent::Pgactivate) > 0,
        "dirty folios met were activated"
    );
    assert_eq!(dirty(&a), 0, "the flushers, woken, wrote everything");
    assert_eq!(sb.counts().disk_pages, 1024);
    assert_eq!(
        a.lruvec().size(LruList::ActiveFile),
        0,
        "rotated back: {:?}",
        a.lruvec()
    );
    assert_reads_back(&sb, &a, "f", 1024 * PAGE);
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(a.memory().usage(), 0);
}

/// A folio reclaim marked goes to the inactive list's oldest end when its
/// writeback ends, and the same reclaim goes on to free it.
#[test]
fn the_end_of_writeback_rotates_a_marked_folio_to_the_inactive_tail() {
    let (machine, _clock, sb) = machine(64 << 10);
    let t = machine.tree().clone();
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    write_pattern(&sb, &a, "f", 64 * PAGE, || {});
    assert_eq!(dirty(&a), 64);
    // The first batch (at priority 6: one folio) is all dirty: activated,
    // the flusher woken; it writes all 64 and rotates that one back.
    let opts = memcg::memcontrol::ReclaimOptions::default();
    let freed = memcg::vmscan::try_to_free_mem_cgroup_pages(&t, &a, 32, &SwapSpace::default, opts);
    assert!(freed >= 32, "{freed}");
    assert_eq!(a.vm_event(VmEvent::Pgactivate), 1);
    assert_eq!(dirty(&a), 0);
    assert_eq!(a.lruvec().size(LruList::ActiveFile), 0, "{:?}", a.lruvec());
    assert_reads_back(&sb, &a, "f", 64 * PAGE);
    sb.unmount().unwrap();
}

/// `dirty_expire_centisecs` on the virtual clock: data below the
/// background threshold stays dirty until it is 30 s old, then the
/// periodic writeback (every 5 s) takes it.
#[test]
fn data_dirty_for_the_expire_interval_is_written_by_the_periodic_writeback() {
    let (machine, clock, sb) = machine(64 << 10);
    let t = machine.tree().clone();
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    write_pattern(&sb, &a, "f", 16 * PAGE, || {});
    assert_eq!(dirty(&a), 16);
    clock.advance(Duration::from_secs(29));
    run_due_flushers(&t);
    assert_eq!(dirty(&a), 16, "not 30 s old yet");
    clock.advance(Duration::from_secs(10));
    run_due_flushers(&t);
    assert_eq!(dirty(&a), 0, "written at the first period after 30 s");
    assert_eq!(sb.counts().disk_pages, 16);
    // A shorter expiry takes effect from the next period.
    t.set_dirty_expire_centisecs(100).unwrap();
    write_pattern(&sb, &a, "g", 4 * PAGE, || {});
    clock.advance(Duration::from_secs(6));
    run_due_flushers(&t);
    assert_eq!(dirty(&a), 0);
    // No periodic writeback at all.
    t.set_dirty_writeback_centisecs(0).unwrap();
    write_pattern(&sb, &a, "h", 4 * PAGE, || {});
    clock.advance(Duration::from_secs(3600));
    run_due_flushers(&t);
    assert_eq!(dirty(&a), 4);
    assert_eq!(sb.sync().unwrap(), 4);
    sb.unmount().unwrap();
}

/// Global domain (the root's writer): background writeback starts as soon
/// as the machine's dirty pages pass the background threshold (here in
/// bytes) and takes them back under it.
#[test]
fn background_writeback_starts_at_the_background_threshold() {
    let (machine, _clock, sb) = machine(64 << 10);
    let t = machine.tree().clone();
    t.set_dirty_bytes(400 * PAGE).unwrap();
    t.set_dirty_background_bytes(100 * PAGE).unwrap();
    let root = Arc::clone(t.root());
    let mut max_dirty = 0;
    write_pattern(&sb, &root, "f", 2000 * PAGE, || {
        max_dirty = max_dirty.max(dirty(&root));
    });
    // Balanced every few pages (`dirty_poll_interval` of the room left):
    // never far past the background threshold, nowhere near the
    // threshold.
    assert!(max_dirty <= 100 + 32, "{max_dirty}");
    assert!(sb.counts().disk_pages >= 2000 - 132);
    sb.sync().unwrap();
    sb.unmount().unwrap();
}

/// A flusher thread does the same work on its own: the writer only kicks
/// it, and sync waits for it.
#[test]
fn a_flusher_thread_writes_back_in_the_background() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    t.set_machine_pages(64 << 10);
    let sb = Superblock::mount(
        &t,
        FsSource::Ram {
            size_bytes: 64 << 20,
        },
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    sb.start_flusher_thread().unwrap();
    t.set_dirty_background_bytes(2 * PAGE).unwrap();
    let root = Arc::clone(t.root());
    write_pattern(&sb, &root, "f", 256 * PAGE, || {});
    // The thread was kicked past the background threshold; wait for it
    // (a bound, not a timing: it has a few pages to copy).
    let clock = t.clock();
    let start = clock.now();
    while sb.counts().disk_pages == 0 && clock.now() - start < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(sb.counts().disk_pages > 0, "background writeback ran");
    sb.sync().unwrap();
    assert_eq!(dirty(&root), 0);
    assert_reads_back(&sb, &root, "f", 256 * PAGE);
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(t.machine_used_pages(), 0);
}
