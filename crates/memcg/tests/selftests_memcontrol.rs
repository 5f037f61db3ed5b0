//! Acceptance scenarios from tools/testing/selftests/cgroup/test_memcontrol.c
//! that need only accounting, run through the cgroup v2 interface
//! (`CgroupFs`), with charges standing in for the selftests' allocations.
#![cfg(not(loom))]

use memcg::SwapEntry;
use memcg::cgroupfs::{Access, CgroupFs};
use memcg::errno::Errno;
use memcg::memcontrol::Gfp;
use memcg::memcontrol::{ChargeKind, MemcgEvent};
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::{Design, SwapCgroup};

const MB: u64 = 1 << 20;

fn fs_with_memory() -> CgroupFs {
    let fs = CgroupFs::default();
    fs.write("/cgroup.subtree_control", "+memory").unwrap();
    fs
}

fn read_u64(fs: &CgroupFs, path: &str) -> u64 {
    fs.read(path).unwrap().trim().parse().unwrap()
}

/// The value of `key` in a flat keyed file (`memory.events`).
fn key(fs: &CgroupFs, path: &str, key: &str) -> u64 {
    fs.read(path)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{path} has no {key}"))
}

/// test_memcg_subtree_control: a child of a cgroup with `+memory` has the
/// controller; a child of one without does not.
#[test]
fn test_memcg_subtree_control() {
    let fs = CgroupFs::default();
    fs.mkdir("/memcg_test_0").unwrap();
    fs.write("/memcg_test_0/cgroup.subtree_control", "+memory")
        .unwrap_err();
    fs.write("/cgroup.subtree_control", "+memory").unwrap();
    fs.write("/memcg_test_0/cgroup.subtree_control", "+memory")
        .unwrap();
    fs.mkdir("/memcg_test_0/memcg_test_1").unwrap();
    assert!(
        fs.read("/memcg_test_0/memcg_test_1/cgroup.controllers")
            .unwrap()
            .contains("memory")
    );

    fs.mkdir("/memcg_test_1").unwrap();
    fs.mkdir("/memcg_test_1/memcg_test_1").unwrap();
    assert!(
        !fs.read("/memcg_test_1/memcg_test_1/cgroup.controllers")
            .unwrap()
            .contains("memory")
    );
    assert_eq!(
        fs.read("/memcg_test_1/memcg_test_1/memory.current")
            .unwrap_err()
            .errno,
        Errno::ENOENT
    );
}

/// test_memcg_current_peak, ported with charges standing in for the
/// selftest's `cg_run` allocations (a child that allocates, then exits):
/// memory.peak per open file, reset by a write to that file only.
#[test]
fn test_memcg_current_peak() {
    let fs = fs_with_memory();
    fs.mkdir("/memcg_test").unwrap();
    let cg = fs.memcg("/memcg_test").unwrap();
    let t = fs.tree();
    // cg_run(alloc_anon_50M_check) / cg_run(alloc_pagecache_50M_check).
    let run_50m = |kind| {
        t.try_charge(&cg, 50 * MB / PAGE_SIZE, kind, Gfp::Kernel)
            .unwrap();
        assert!(read_u64(&fs, "/memcg_test/memory.current") >= 50 * MB);
        t.uncharge(&cg, 50 * MB / PAGE_SIZE, kind);
    };
    assert_eq!(read_u64(&fs, "/memcg_test/memory.current"), 0);
    assert_eq!(read_u64(&fs, "/memcg_test/memory.peak"), 0);
    run_50m(ChargeKind::Anon);
    assert!(read_u64(&fs, "/memcg_test/memory.peak") >= 50 * MB);

    let open = || {
        fs.open("/memcg_test/memory.peak", Access::ReadWrite)
            .unwrap()
    };
    let (mut fd, mut fd2, mut fd3, mut fd4) = (open(), open(), open(), open());
    for f in [&mut fd, &mut fd2, &mut fd3] {
        f.write("reset\n").unwrap();
    }
    // Make sure a completely independent read isn't affected by our FD-local
    // reset above.
    assert!(read_u64(&fs, "/memcg_test/memory.peak") >= 50 * MB);
    drop(fd2);
    fd4.write("reset\n").unwrap();
    let peak: u64 = fd.read().unwrap().trim().parse().unwrap();
    assert!(peak <= 30 * MB, "{peak}");
    run_50m(ChargeKind::File);
    assert!(read_u64(&fs, "/memcg_test/memory.peak") >= 50 * MB);
    // Make sure everything is back to normal.
    for f in [&fd, &fd4] {
        let peak: u64 = f.read().unwrap().trim().parse().unwrap();
        assert!(peak >= 50 * MB, "{peak}");
    }
    drop((fd, fd3, fd4));
}

/// test_memcg_max / test_memcg_oom_events: with nothing reclaimable, a
/// charge past memory.max fails; `max` and `oom` are raised on the cgroup
/// over its limit and, hierarchically, on its ancestors (below the root),
/// while `.local` counts only the cgroup itself.
#[test]
fn charge_past_max_raises_max_and_oom_up_the_hierarchy() {
    let fs = fs_with_memory();
    fs.mkdir("/parent").unwrap();
    fs.write("/parent/cgroup.subtree_control", "+memory")
        .unwrap();
    fs.mkdir("/parent/child").unwrap();
    let child = fs.memcg("/parent/child").unwrap();
    fs.write("/parent/child/memory.max", "30M").unwrap();
    fs.tree()
        .try_charge(&child, 20 * MB / PAGE_SIZE, ChargeKind::Anon, Gfp::Kernel)
        .unwrap();
    let err = fs
        .tree()
        .try_charge(&child, 20 * MB / PAGE_SIZE, ChargeKind::Anon, Gfp::Kernel)
        .unwrap_err();
    assert_eq!(err.errno(), Errno::ENOMEM);
    assert_eq!(
        read_u64(&fs, "/parent/child/memory.current"),
        20 * MB,
        "the failed charge left nothing"
    );

    assert!(key(&fs, "/parent/child/memory.events", "max") > 0);
    // 5120 pages: more than PAGE_ALLOC_COSTLY_ORDER, so no OOM (v6.14's
    // mem_cgroup_oom returns before MEMCG_OOM); a 4K charge then does.
    assert_eq!(key(&fs, "/parent/child/memory.events", "oom"), 0);
    fs.tree()
        .try_charge(&child, 10 * MB / PAGE_SIZE, ChargeKind::Anon, Gfp::Kernel)
        .unwrap();
    assert_eq!(
        fs.tree()
            .try_charge(&child, 1, ChargeKind::Anon, Gfp::Kernel)
            .unwrap_err()
            .errno(),
        Errno::ENOMEM
    );
    assert_eq!(key(&fs, "/parent/child/memory.events", "oom"), 1);
    assert_eq!(key(&fs, "/parent/child/memory.events.local", "oom"), 1);
    assert_eq!(key(&fs, "/parent/memory.events", "oom"), 1, "hierarchical");
    assert_eq!(key(&fs, "/parent/memory.events.local", "oom"), 0, "local");
    assert_eq!(
        key(&fs, "/parent/memory.events", "max"),
        key(&fs, "/parent/child/memory.events", "max")
    );
    assert_eq!(
        key(&fs, "/parent/child/memory.events", "oom_kill"),
        0,
        "no tasks to kill"
    );
}

/// Writing memory.max below usage is accepted (the kernel then reclaims and,
/// with nothing reclaimable and nothing to kill, raises `oom`), unlike the
/// page counter's own set_max, which refuses with EBUSY.
#[test]
fn memory_max_below_usage_is_accepted() {
    let fs = fs_with_memory();
    fs.mkdir("/memcg_test").unwrap();
    let cg = fs.memcg("/memcg_test").unwrap();
    fs.tree()
        .try_charge(&cg, 40 * MB / PAGE_SIZE, ChargeKind::File, Gfp::Kernel)
        .unwrap();
    assert_eq!(
        cg.memory()
            .set_max(30 * MB / PAGE_SIZE)
            .unwrap_err()
            .errno(),
        Errno::EBUSY
    );
    fs.write("/memcg_test/memory.max", "30M").unwrap();
    assert_eq!(read_u64(&fs, "/memcg_test/memory.max"), 30 * MB);
    assert_eq!(
        read_u64(&fs, "/memcg_test/memory.current"),
        40 * MB,
        "nothing reclaimable"
    );
    assert_eq!(key(&fs, "/memcg_test/memory.events", "oom"), 1);
    // Further charges fail until usage drops below the limit.
    assert!(
        fs.tree()
            .try_charge(&cg, 1, ChargeKind::File, Gfp::Kernel)
            .is_err()
    );
    fs.tree()
        .uncharge(&cg, 40 * MB / PAGE_SIZE, ChargeKind::File);
    fs.tree()
        .try_charge(&cg, 1, ChargeKind::File, Gfp::Kernel)
        .unwrap();
}

/// test_memcg_swap_max: a swap charge past memory.swap.max is refused with
/// `max` and `fail` swap events, and nothing stays charged or recorded.
#[test]
fn swap_max_refuses_swap_charges() {
    let fs = fs_with_memory();
    fs.mkdir("/memcg_test").unwrap();
    let cg = fs.memcg("/memcg_test").unwrap();
    fs.write("/memcg_test/memory.swap.max", "8K").unwrap();
    let swap = SwapCgroup::new(Design::Memcg);
    swap.swapon(0, 1024).unwrap();
    let e0 = SwapEntry::new(0, 0).unwrap();
    fs.tree().swapout_charge(&cg, &swap, e0, 2).unwrap();
    let e2 = SwapEntry::new(0, 2).unwrap();
    assert_eq!(
        fs.tree()
            .swapout_charge(&cg, &swap, e2, 1)
            .unwrap_err()
            .errno(),
        Errno::ENOMEM
    );
    assert_eq!(read_u64(&fs, "/memcg_test/memory.swap.current"), 8192);
    assert_eq!(
        fs.read("/memcg_test/memory.swap.events").unwrap(),
        "high 0\nmax 1\nfail 1\n"
    );
    assert_eq!(swap.lookup(e2).unwrap(), 0, "not recorded");
    fs.tree().swap_uncharge(&swap, e0, 2).unwrap();
    assert_eq!(read_u64(&fs, "/memcg_test/memory.swap.current"), 0);
    assert_eq!(read_u64(&fs, "/memcg_test/memory.swap.peak"), 8192);
    assert_eq!(cg.event(MemcgEvent::SwapFail), 1);
}

/// rmdir of a cgroup whose swap entries are still recorded: the id stays
/// pinned (the cgroup counts as dying in the parent's cgroup.stat) until the
/// last slot is freed, which uncharges the dead cgroup and releases the id.
#[test]
fn rmdir_with_recorded_swap_keeps_the_id_pinned() {
    let fs = fs_with_memory();
    fs.mkdir("/memcg_test").unwrap();
    let cg = fs.memcg("/memcg_test").unwrap();
    let id = cg.id();
    let swap = SwapCgroup::new(Design::Memcg);
    swap.swapon(0, 1024).unwrap();
    let (a, b) = (
        SwapEntry::new(0, 0).unwrap(),
        SwapEntry::new(0, 16).unwrap(),
    );
    fs.tree().swapout_charge(&cg, &swap, a, 16).unwrap();
    fs.tree().swapout_charge(&cg, &swap, b, 1).unwrap();
    fs.rmdir("/memcg_test").unwrap();
    assert_eq!(
        fs.read("/cgroup.stat").unwrap(),
        "nr_descendants 0\nnr_subsys_memory 1\nnr_dying_descendants 1\nnr_dying_subsys_memory 1\n"
    );
    assert!(fs.tree().lookup(id).is_some(), "id still resolves");
    assert_eq!(fs.tree().swap_uncharge(&swap, a, 16).unwrap(), id);
    assert!(fs.tree().lookup(id).is_some(), "one slot left");
    assert_eq!(cg.swap().usage(), 1);
    fs.tree().swap_uncharge(&swap, b, 1).unwrap();
    assert!(
        fs.tree().lookup(id).is_none(),
        "released with the last slot"
    );
    assert_eq!(cg.swap().usage(), 0);
    drop(cg);
    assert_eq!(
        fs.read("/cgroup.stat").unwrap(),
        "nr_descendants 0\nnr_subsys_memory 1\nnr_dying_descendants 0\nnr_dying_subsys_memory 0\n",
        "released once the test's own reference went"
    );
    // Teardown invariant: every counter at zero, only the root's id in use.
    assert_eq!(
        fs.tree().root().memory().usage() + fs.tree().root().swap().usage(),
        0
    );
    assert_eq!(fs.tree().ids_in_use(), 1);
}
