//! Memory pressure (PSI) of every kind of task: simulated tasks, file
//! reads (readahead included) and writes made as a task of a cgroup (what
//! a FUSE request of a host process is), and kswapd in the root (v6.14
//! `try_charge_memcg`, `read_pages`, `balance_pgdat`). On a virtual clock
//! with reclaim's cost modelled, so the stall times are exact.

use std::sync::Arc;

use memcg::clock::{Clock, ReclaimCost, VirtualClock};
use memcg::fs::{FsSource, ReadCalls};
use memcg::memcontrol::{MemcgStat, VmEvent};
use memcg_sim::{Sim, SimConfig};

/// A machine of `mem_bytes` with memory enabled below the root, `/a`, a
/// host directory mounted at `/mnt`, and the measured reclaim costs on a
/// virtual clock.
fn machine(mem_bytes: u64, dir: &std::path::Path) -> (Sim, Arc<VirtualClock>) {
    let sim = Sim::new(SimConfig {
        mem_bytes,
        charge_stock: false,
        ..SimConfig::default()
    });
    let clock = Arc::new(VirtualClock::with_reclaim_cost(ReclaimCost::MEASURED));
    sim.fs().tree().set_clock(clock.clone());
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.fs().mkdir("/a").unwrap();
    sim.machine()
        .mount("/mnt", FsSource::Dir(dir.to_path_buf()))
        .unwrap();
    (sim, clock)
}

/// `total=` of both lines of a pressure file, µs.
fn totals(text: &str) -> (u64, u64) {
    let total = |line: &str| -> u64 {
        line.rsplit("total=")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let mut lines = text.lines();
    (total(lines.next().unwrap()), total(lines.next().unwrap()))
}

#[test]
fn page_cache_reclaim_of_a_file_write_stalls_its_cgroup() {
    // Before: a write made as a task of /a had no task, and its reclaim
    // at memory.max recorded nothing (qa M2: total=0 with 97299 pages
    // scanned).
    let dir = tempfile::tempdir().unwrap();
    let (sim, _clock) = machine(256 << 20, dir.path());
    sim.fs().write("/a/memory.max", "1M").unwrap();
    sim.write_file_with("/a", "/mnt/f", 8 << 20, |b| b.fill(7))
        .unwrap();
    let a = sim.fs().memcg("/a").unwrap();
    let scanned = a.vm_event(VmEvent::PgscanDirect);
    assert!(scanned > 1500, "{scanned} pages scanned");
    // A lone task: some = full = exactly what its scans cost.
    let expected = scanned * 1500 / 1000;
    let pressure = sim.fs().read("/a/memory.pressure").unwrap();
    assert_eq!(totals(&pressure), (expected, expected), "{pressure}");
    let machine = sim.fs().read("/memory.pressure").unwrap();
    assert_eq!(totals(&machine), (expected, expected), "{machine}");
    sim.remove_file("/mnt/f").unwrap();
}

#[test]
fn a_read_in_calls_whose_readahead_reclaims_stalls_its_cgroup() {
    // A read in dd-like calls (memcg sh's `read --bs`) brings the file in
    // by readahead, whose charges reclaim at memory.max: a stall of the
    // reading task. Before: it ran as no task, total=0.
    let dir = tempfile::tempdir().unwrap();
    let (sim, _clock) = machine(256 << 20, dir.path());
    sim.write_file_with("/a", "/mnt/f", 8 << 20, |b| b.fill(5))
        .unwrap();
    sim.machine().sync().unwrap();
    sim.machine().drop_caches(1).unwrap();
    sim.fs().write("/a/memory.max", "1M").unwrap();
    let calls = ReadCalls {
        bs: 4096,
        ..ReadCalls::default()
    };
    let read = sim.read_file_calls("/a", "/mnt/f", calls, |_| {}).unwrap();
    assert_eq!(read, 8 << 20);
    let a = sim.fs().memcg("/a").unwrap();
    assert_eq!(a.stat(MemcgStat::WorkingsetRefaultFile), 0, "no shadows");
    let scanned = a.vm_event(VmEvent::PgscanDirect);
    assert!(scanned > 1500, "{scanned} pages scanned");
    let expected = scanned * 1500 / 1000;
    let pressure = sim.fs().read("/a/memory.pressure").unwrap();
    assert_eq!(totals(&pressure), (expected, expected), "{pressure}");
    sim.remove_file("/mnt/f").unwrap();
}

#[test]
fn readahead_bringing_back_the_working_set_stalls_for_the_reads() {
    // Pages of the working set evicted and read back by readahead stall
    // their reader for the read (v6.14 read_pages' memstall for a batch
    // holding a PG_workingset folio): each costs a refault read, on top
    // of the reclaim its charges do.
    let dir = tempfile::tempdir().unwrap();
    let (sim, _clock) = machine(256 << 20, dir.path());
    sim.fs().write("/a/memory.max", "2M").unwrap();
    sim.write_file_with("/a", "/mnt/f", 1 << 20, |b| b.fill(1))
        .unwrap();
    sim.machine().sync().unwrap();
    // Read twice: active.
    for _ in 0..2 {
        sim.read_file("/a", "/mnt/f").unwrap();
    }
    sim.write_file_with("/a", "/mnt/g", 2 << 20, |b| b.fill(2))
        .unwrap();
    sim.machine().sync().unwrap();
    let a = sim.fs().memcg("/a").unwrap();
    let scanned_before = a.vm_event(VmEvent::PgscanDirect);
    let restored_before = a.stat(MemcgStat::WorkingsetRestoreFile);
    let (before, _) = totals(&sim.fs().read("/a/memory.pressure").unwrap());
    sim.read_file("/a", "/mnt/f").unwrap();
    let scanned = a.vm_event(VmEvent::PgscanDirect) - scanned_before;
    let restored = (a.stat(MemcgStat::WorkingsetRestoreFile) - restored_before) as u64;
    assert!(restored > 0, "working-set pages read back");
    let (some, full) = totals(&sim.fs().read("/a/memory.pressure").unwrap());
    assert_eq!(some, full, "a lone task");
    // 140 us per page read back, 1.5 us per page scanned; the totals are
    // whole microseconds.
    let expected = (scanned * 1500 + restored * 140_000) / 1000;
    assert!(
        (some - before).abs_diff(expected) <= 1,
        "{} for {expected} ({scanned} scanned, {restored} read back)",
        some - before
    );
    sim.remove_file("/mnt/f").unwrap();
    sim.remove_file("/mnt/g").unwrap();
}

#[test]
fn a_host_process_request_runs_as_its_task_in_its_cgroup() {
    // What the FUSE server does for a request of a host process: the
    // process's task runs the request; its stall counts in its cgroup.
    let dir = tempfile::tempdir().unwrap();
    let (sim, _clock) = machine(256 << 20, dir.path());
    sim.fs().mkdir("/b").unwrap();
    sim.fs().write("/b/memory.max", "1M").unwrap();
    let task = sim
        .adopt_task(std::process::id() + 1_000_000, "/b")
        .unwrap();
    {
        let _current = sim.run_as(&task);
        sim.write_file_with("/b", "/mnt/g", 4 << 20, |b| b.fill(1))
            .unwrap();
    }
    let (some_b, _) = totals(&sim.fs().read("/b/memory.pressure").unwrap());
    assert!(some_b > 0);
    let (some_a, _) = totals(&sim.fs().read("/a/memory.pressure").unwrap());
    assert_eq!(some_a, 0);
    sim.remove_file("/mnt/g").unwrap();
    sim.release_task(task.pid());
}

#[test]
fn kswapd_balancing_counts_in_the_root_only() {
    // Before: kswapd's reclaim was no stall at all (fidelity D9).
    let dir = tempfile::tempdir().unwrap();
    let (sim, clock) = machine(32 << 20, dir.path());
    let start = clock.now();
    sim.write_file_with("/a", "/mnt/f", 64 << 20, |b| b.fill(3))
        .unwrap();
    let root = sim.fs().tree().root();
    let kswapd = root.vm_event(VmEvent::PgscanKswapd);
    assert!(kswapd > 0, "kswapd ran");
    assert!(clock.now() > start);
    let a = sim.fs().memcg("/a").unwrap();
    let (root_some, root_full) = totals(&sim.fs().read("/memory.pressure").unwrap());
    let (a_some, _) = totals(&sim.fs().read("/a/memory.pressure").unwrap());
    if a.vm_event(VmEvent::PgscanDirect) == 0 {
        // Only kswapd reclaimed: its stall is the root's alone.
        assert_eq!(a_some, 0);
    }
    assert!(root_some > 0 && root_full > 0, "{root_some} {root_full}");
    sim.remove_file("/mnt/f").unwrap();
}

#[test]
fn a_trigger_fires_once_when_the_stall_in_its_window_crosses_its_threshold() {
    use memcg::cgroupfs::Access;
    use memcg::psi::PressurePoll;
    let dir = tempfile::tempdir().unwrap();
    let (sim, clock) = machine(256 << 20, dir.path());
    sim.fs().write("/a/memory.max", "1M").unwrap();
    // Events wait for a window to pass since boot (`last_event_time` 0).
    clock.advance(std::time::Duration::from_secs(1));
    let mut f = sim
        .fs()
        .open("/a/memory.pressure", Access::ReadWrite)
        .unwrap();
    // 1 ms of stall within 100 ms.
    f.write("some 1000 100000").unwrap();
    let quiet = PressurePoll::default();
    assert_eq!(f.pressure_poll(true), Some(quiet));
    // About 3 ms of reclaim (2048 pages scanned at 1.5 us).
    sim.write_file_with("/a", "/mnt/f", 8 << 20, |b| b.fill(7))
        .unwrap();
    // The real-time poller looks a jiffy after the stall began, then
    // every 10 ms: by 20 ms it has fired, once.
    clock.advance(std::time::Duration::from_millis(20));
    let fired = PressurePoll {
        pri: true,
        err: false,
    };
    assert_eq!(f.pressure_poll(false), Some(fired), "looked at, kept");
    assert_eq!(f.pressure_poll(true), Some(fired));
    assert_eq!(f.pressure_poll(true), Some(quiet), "taken in");
    // A window later with no stall: nothing more.
    clock.advance(std::time::Duration::from_millis(300));
    assert_eq!(f.pressure_poll(true), Some(quiet));
    drop(f);
    sim.remove_file("/mnt/f").unwrap();
}
