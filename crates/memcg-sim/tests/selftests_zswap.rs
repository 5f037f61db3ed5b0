//! Linux v6.14's zswap selftests (tools/testing/selftests/cgroup/
//! test_zswap.c), run against the simulator through the cgroup v2 files,
//! with zswap enabled as the selftest's `main` requires.
//!
//! The selftests' processes write one byte every 4095 bytes
//! (`allocate_bytes`): here a mapping filled [`Fill::Sparse`] (one
//! non-zero byte per page), which compresses as well and is not a zero
//! page either. `allocate_and_read_bytes` reads every page back: here
//! [`Sim::touch`] and [`Sim::verify`].
//!
//! # Sizes
//!
//! As in `selftests_memcontrol.rs` (`cgroup_util::Scale`): each port runs
//! at a default scale, every size divided by it, and
//! `MEMCG_SELFTEST_SCALE=N` runs the scalable ones at `N` (1: the
//! kernel's sizes: about 30 s of CPU in a debug build for the others, and
//! `test_no_kmem_bypass` on a 1 GiB machine, 47 s and 645 MB of host
//! memory). The scaled ones compress and decompress every page in a
//! debug build.
//!
//! | v6.14 test | default scale | why | debug CPU at 1:1 (at the default) |
//! |---|---|---|---|
//! | test_zswap_usage | 1:1 | | 0.4 s |
//! | test_swapin_nozswap | 1:4 | 32M swapped out and back | 6.7 s (1.7 s) |
//! | test_zswapin | 1:4 | 32M through zswap and back | 8.5 s (1.5 s) |
//! | test_zswap_writeback_enabled | 1:1 | | 2.2 s |
//! | test_zswap_writeback_disabled | 1:4 | 16 fruitless reclaim passes over every page | 9.0 s (3.1 s) |
//! | test_no_kmem_bypass | 1:16 | its sizes are fractions of the machine (the kernel's: at most 5e9 bytes); 1 GiB here at 1:1, 64M by default, 55% of it held and pushed to zswap | 47 s, 645 MB resident (2.7 s) |
//! | test_no_invasive_cgroup_shrink | 1:1 always | scaled down, its allocation ends before a store over `memory.zswap.max` writes back (see the test) | 1.9 s |
//!
//! (CPU seconds: user time of each test alone,
//! `target/debug/deps/selftests_zswap-* --exact NAME`, on the 2-vCPU
//! development VM while other builds ran.)
#![cfg(not(loom))]

mod cgroup_util;

use cgroup_util::*;
use memcg::mm_types::PAGE_SIZE;
use memcg_sim::{Fill, Sim, SimConfig, SimError};

/// The simulated machine of `cgroup_util::sim`, zswap on.
fn zswap_sim() -> Sim {
    let sim = sim();
    sim.swap().zswap().set_enabled(true);
    sim
}

/// `get_zswpout`.
fn get_zswpout(sim: &Sim, cgroup: &str) -> i64 {
    cg_read_key_long(sim, cgroup, "memory.stat", "zswpout ")
}

/// `cg_run(cgroup, allocate_bytes, size)`: touch and exit.
fn allocate_bytes(sim: &Sim, cgroup: &str, size: i64) -> Result<(), SimError> {
    let name = proc_name(cgroup, "allocate_bytes");
    sim.alloc(cgroup, &name, size as u64, 1, Fill::Sparse)?;
    sim.free(&name)
}

/// `cg_run(cgroup, allocate_and_read_bytes, size)`: touch, read every
/// page back (swapping in), check, exit.
fn allocate_and_read_bytes(sim: &Sim, cgroup: &str, size: i64) -> Result<(), SimError> {
    let name = proc_name(cgroup, "allocate_and_read_bytes");
    sim.alloc(cgroup, &name, size as u64, 1, Fill::Sparse)?;
    sim.touch(&name)?;
    sim.verify(&name)?;
    sim.free(&name)
}

/// Port of `test_zswap_usage`: pages pushed out of a small cgroup go to
/// zswap.
#[test]
fn test_zswap_usage() {
    let mb = Scale::or_env(1);
    let sim = zswap_sim();
    let test_group = cg_name("", "no_shrink_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &mb.MB(1).to_string()),
        0
    );
    let zswpout_before = get_zswpout(&sim, &test_group);
    assert!(zswpout_before >= 0);
    allocate_bytes(&sim, &test_group, mb.MB(4)).unwrap();
    let zswpout_after = get_zswpout(&sim, &test_group);
    assert!(
        zswpout_after > zswpout_before,
        "zswpout does not increase after test program"
    );
}

/// Port of `test_swapin_nozswap`: with `memory.zswap.max` 0 pages swap,
/// but none goes to zswap.
#[test]
fn test_swapin_nozswap() {
    let mb = Scale::or_env(4);
    let sim = zswap_sim();
    let test_group = cg_name("", "no_zswap_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &mb.MB(8).to_string()),
        0
    );
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "0"), 0);
    allocate_and_read_bytes(&sim, &test_group, mb.MB(32)).unwrap();
    let swap_peak = cg_read_long(&sim, &test_group, "memory.swap.peak");
    assert!(
        swap_peak >= mb.MB(24),
        "at least 24MB of memory should be swapped out: {swap_peak}"
    );
    assert_eq!(
        get_zswpout(&sim, &test_group),
        0,
        "zswapout > 0 when memory.zswap.max = 0"
    );
}

/// Port of `test_zswapin`: pages pushed to zswap come back from it.
#[test]
fn test_zswapin() {
    let mb = Scale::or_env(4);
    let sim = zswap_sim();
    let test_group = cg_name("", "zswapin_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &mb.MB(8).to_string()),
        0
    );
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "max"), 0);
    allocate_and_read_bytes(&sim, &test_group, mb.MB(32)).unwrap();
    let zswpin = cg_read_key_long(&sim, &test_group, "memory.stat", "zswpin ");
    assert!(
        zswpin >= mb.MB(24) / 4096,
        "at least 24MB should be brought back from zswap: {zswpin} pages"
    );
}

/// `attempt_writeback` run in `cgroup`: 4M of half-filled pages reclaimed
/// into zswap, read back, then `memory.zswap.max` set to half of what
/// they took and a second reclaim: with writeback it must succeed (zswap
/// writes entries back to make room), without it fail with `-EAGAIN`.
fn attempt_writeback(sim: &Sim, cgroup: &str, wb_enabled: bool, mb: Scale) -> bool {
    let memsize = mb.MB(4);
    let name = proc_name(cgroup, "attempt_writeback");
    sim.alloc(cgroup, &name, memsize as u64, 1, Fill::Half)
        .unwrap();
    let ok = (|| {
        if cg_write(sim, cgroup, "memory.reclaim", &memsize.to_string()) != 0 {
            return false;
        }
        let zswap_usage = cg_read_long(sim, cgroup, "memory.zswap.current");
        // zswpin: every page back, and as written.
        sim.touch(&name).unwrap();
        sim.verify(&name).unwrap();
        if cg_write(
            sim,
            cgroup,
            "memory.zswap.max",
            &(zswap_usage / 2).to_string(),
        ) != 0
        {
            return false;
        }
        let ret = cg_write(sim, cgroup, "memory.reclaim", &memsize.to_string());
        if wb_enabled {
            ret == 0
        } else {
            ret == -(memcg::Errno::EAGAIN.code())
        }
    })();
    sim.free(&name).unwrap();
    ok
}

/// `test_zswap_writeback_one`: no writeback before, some after exactly
/// when writeback is enabled.
fn test_zswap_writeback_one(sim: &Sim, cgroup: &str, wb: bool, mb: Scale) {
    assert_eq!(cg_read_key_long(sim, cgroup, "memory.stat", "zswpwb "), 0);
    assert!(attempt_writeback(sim, cgroup, wb, mb), "{cgroup}: wb {wb}");
    let zswpwb_after = cg_read_key_long(sim, cgroup, "memory.stat", "zswpwb ");
    assert_eq!(
        wb,
        zswpwb_after != 0,
        "zswpwb_after is {zswpwb_after} while wb is {wb}"
    );
}

/// Port of `test_zswap_writeback`: the group's `memory.zswap.writeback`
/// rules, and a child's 1 cannot override its parent's 0.
fn test_zswap_writeback(wb: bool, mb: Scale) {
    let sim = zswap_sim();
    assert!(cg_read_strcmp(&sim, "", "memory.zswap.writeback", "1\n"));
    let test_group = cg_name("", "zswap_writeback_test");
    cg_create(&sim, &test_group);
    let wb_value = if wb { "1" } else { "0" };
    assert_eq!(
        cg_write(&sim, &test_group, "memory.zswap.writeback", wb_value),
        0
    );
    test_zswap_writeback_one(&sim, &test_group, wb, mb);
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "max"), 0);
    assert_eq!(
        cg_write(&sim, &test_group, "cgroup.subtree_control", "+memory"),
        0
    );
    let child = cg_name(&test_group, "zswap_writeback_test_child");
    cg_create(&sim, &child);
    assert_eq!(cg_write(&sim, &child, "memory.zswap.writeback", "1"), 0);
    test_zswap_writeback_one(&sim, &child, wb, mb);
}

/// Port of `test_zswap_writeback_enabled`.
#[test]
fn test_zswap_writeback_enabled() {
    test_zswap_writeback(true, Scale::or_env(1));
}

/// Port of `test_zswap_writeback_disabled`.
#[test]
fn test_zswap_writeback_disabled() {
    test_zswap_writeback(false, Scale::or_env(4));
}

/// `MB(x)` unscaled: the kernel's own size.
fn kernel_mb(x: i64) -> i64 {
    x << 20
}

/// `setup_test_group_1M`.
fn setup_test_group_1m(sim: &Sim, name: &str) -> String {
    let group = cg_name("", name);
    cg_create(sim, &group);
    assert_eq!(cg_write(sim, &group, "memory.max", "1M"), 0);
    group
}

/// Port of `test_no_invasive_cgroup_shrink`: a store over one cgroup's
/// `memory.zswap.max` writes back that cgroup's entries only.
///
/// At the selftest's own sizes, not scaled: `memory.zswap.max` is in
/// pages (10K is 2), and every entry is stored with its second-chance
/// `referenced` bit set, so a store over the limit writes back only once
/// the rejected stores before it have rotated every entry once. Scaled
/// down 8 times, the 10M allocation ends before that; 10M is cheap.
#[test]
fn test_no_invasive_cgroup_shrink() {
    let sim = zswap_sim();
    let wb_group = setup_test_group_1m(&sim, "per_memcg_wb_test1");
    assert_eq!(cg_write(&sim, &wb_group, "memory.zswap.max", "10K"), 0);
    let control_group = setup_test_group_1m(&sim, "per_memcg_wb_test2");

    // The test process enters control_group and keeps its 10M alive.
    let control = proc_name(&control_group, "control_allocation");
    sim.alloc(
        &control_group,
        &control,
        kernel_mb(10) as u64,
        1,
        Fill::Sparse,
    )
    .unwrap();
    assert!(cg_read_key_long(&sim, &control_group, "memory.stat", "zswapped") >= 1);

    allocate_bytes(&sim, &wb_group, kernel_mb(10)).unwrap();

    let wb_count = cg_read_key_long(&sim, &wb_group, "memory.stat", "zswpwb");
    let control_count = cg_read_key_long(&sim, &control_group, "memory.stat", "zswpwb");
    assert!(
        wb_count > 0 && control_count == 0,
        "zswpwb: wb_group {wb_count}, control_group {control_count}"
    );
    sim.free(&control).unwrap();
}

/// Port of `test_no_kmem_bypass`: pages that kswapd pushes to zswap are
/// charged to the cgroup that owns them (commit cd08d80ecdac, "mm:
/// correctly charge compressed memory to its memcg").
///
/// As the selftest: on a machine of at most 5e9 bytes, `min_free_kbytes`
/// low while a child in the test cgroup touches `totalram - high + 5%`
/// (55% of the machine: `min_free_kb_high * 1000` is half of it) and
/// pauses; then `min_free_kbytes` raised to `totalram / 2000` KiB (half
/// the machine), so less than the low watermark is free, and the test
/// process (in the root) touches and frees `totalram / 20` up to 20
/// times. Each of those allocations wakes kswapd (the allocator's slow
/// path), which reclaims towards the high watermark and pushes the
/// child's pages to zswap; below the min watermark the allocation also
/// reclaims directly, as the kernel's does. Pass once zswap holds more
/// than `totalram / 5` bytes of pages, at most a quarter of them not
/// charged to the cgroup (the selftest's own check). The port also checks
/// that kswapd did reclaim from the cgroup (`pgsteal_kswapd`), so that it
/// keeps testing the kernel's path. The selftest's `usleep(100000)`
/// after each allocation gives kswapd its time; here kswapd runs inline
/// in the allocating task, before its allocation returns
/// (`watermark.rs`).
#[test]
fn test_no_kmem_bypass() {
    let machine = Scale::or_env(16);
    let totalram: i64 = machine.MB(1024);
    assert!(totalram <= 5_000_000_000);
    let sim = Sim::new(SimConfig {
        seed: 0x5e1f_7e57,
        mem_bytes: totalram as u64,
        ..SimConfig::default()
    });
    assert_eq!(cg_write(&sim, "", "cgroup.subtree_control", "+memory"), 0);
    sim.swapon_ram(totalram as u64, None).unwrap();
    sim.swap().zswap().set_enabled(true);
    let min_free_kb_original = sim.machine().vm_min_free_kbytes() as i64;
    let min_free_kb_high = totalram / 2000;
    let min_free_kb_low = totalram / 500_000;
    let page_mask = !(PAGE_SIZE as i64 - 1);
    let target_alloc_bytes =
        ((totalram - min_free_kb_high * 1000) + totalram * 5 / 100) & page_mask;
    let stored_pages_threshold = (totalram / 5 / 4096) as u64;
    let trigger_allocation_size = (totalram / 20) & page_mask;

    let test_group = cg_name("", "kmem_bypass_test");
    sim.machine()
        .set_vm_min_free_kbytes(min_free_kb_low)
        .unwrap();
    cg_create(&sim, &test_group);
    let child = proc_name(&test_group, "no_kmem_bypass_child");
    sim.alloc(
        &test_group,
        &child,
        target_alloc_bytes as u64,
        1,
        Fill::Sparse,
    )
    .unwrap();

    // Try to wake up kswapd and let it push child memory to zswap.
    sim.machine()
        .set_vm_min_free_kbytes(min_free_kb_high)
        .unwrap();
    let mut passed = None;
    for i in 0..20 {
        let trigger = proc_name("", &format!("trigger_allocation{i}"));
        if sim
            .alloc(
                "",
                &trigger,
                trigger_allocation_size as u64,
                1,
                Fill::Sparse,
            )
            .is_err()
        {
            break;
        }
        sim.free(&trigger).unwrap();
        let stored_pages = sim.swap().zswap().debug_counts().stored_pages;
        // If memory was pushed to zswap, verify it belongs to memcg.
        if stored_pages > stored_pages_threshold {
            let zswapped = cg_read_key_long(&sim, &test_group, "memory.stat", "zswapped ");
            let delta = (stored_pages * 4096) as i64 - zswapped;
            passed = Some(delta < (stored_pages * 4096 / 4) as i64);
            break;
        }
    }
    sim.machine()
        .set_vm_min_free_kbytes(min_free_kb_original)
        .unwrap();
    assert_eq!(
        passed,
        Some(true),
        "zswap never held {stored_pages_threshold} pages, or held others' pages"
    );
    let by_kswapd = cg_read_key_long(&sim, &test_group, "memory.stat", "pgsteal_kswapd ");
    assert!(by_kswapd > 0, "kswapd reclaimed nothing from the cgroup");
    sim.free(&child).unwrap();
}
