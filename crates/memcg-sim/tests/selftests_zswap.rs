//! Linux v6.14's zswap selftests (tools/testing/selftests/cgroup/
//! test_zswap.c), run against the simulator
//! through the cgroup v2 files, with zswap enabled as the selftest's
//! `main` requires. Sizes are scaled as in `selftests_memcontrol.rs`
//! (`cgroup_util`).
//!
//! The selftests' processes write one byte every 4095 bytes
//! (`allocate_bytes`): here a mapping filled [`Fill::Sparse`] (one
//! non-zero byte per page), which compresses as well and is not a zero
//! page either. `allocate_and_read_bytes` reads every page back: here
//! [`Sim::touch`] and [`Sim::verify`].
//!
//! Still to come: `test_no_invasive_cgroup_shrink` and
//! `test_no_kmem_bypass` (global reclaim at the machine's size with the
//! pool's shrink worker).
#![cfg(not(loom))]

mod cgroup_util;

use cgroup_util::*;
use memcg_sim::{Fill, Sim, SimError};

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
    let sim = zswap_sim();
    let test_group = cg_name("", "no_shrink_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &MB(1).to_string()),
        0
    );
    let zswpout_before = get_zswpout(&sim, &test_group);
    assert!(zswpout_before >= 0);
    allocate_bytes(&sim, &test_group, MB(4)).unwrap();
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
    let sim = zswap_sim();
    let test_group = cg_name("", "no_zswap_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &MB(8).to_string()),
        0
    );
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "0"), 0);
    allocate_and_read_bytes(&sim, &test_group, MB(32)).unwrap();
    let swap_peak = cg_read_long(&sim, &test_group, "memory.swap.peak");
    assert!(
        swap_peak >= MB(24),
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
    let sim = zswap_sim();
    let test_group = cg_name("", "zswapin_test");
    cg_create(&sim, &test_group);
    assert_eq!(
        cg_write(&sim, &test_group, "memory.max", &MB(8).to_string()),
        0
    );
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "max"), 0);
    allocate_and_read_bytes(&sim, &test_group, MB(32)).unwrap();
    let zswpin = cg_read_key_long(&sim, &test_group, "memory.stat", "zswpin ");
    assert!(
        zswpin >= MB(24) / 4096,
        "at least 24MB should be brought back from zswap: {zswpin} pages"
    );
}

/// `attempt_writeback` run in `cgroup`: 4M of half-filled pages reclaimed
/// into zswap, read back, then `memory.zswap.max` set to half of what
/// they took and a second reclaim: with writeback it must succeed (zswap
/// writes entries back to make room), without it fail with `-EAGAIN`.
fn attempt_writeback(sim: &Sim, cgroup: &str, wb_enabled: bool) -> bool {
    let memsize = MB(4);
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
fn test_zswap_writeback_one(sim: &Sim, cgroup: &str, wb: bool) {
    assert_eq!(cg_read_key_long(sim, cgroup, "memory.stat", "zswpwb "), 0);
    assert!(attempt_writeback(sim, cgroup, wb), "{cgroup}: wb {wb}");
    let zswpwb_after = cg_read_key_long(sim, cgroup, "memory.stat", "zswpwb ");
    assert_eq!(
        wb,
        zswpwb_after != 0,
        "zswpwb_after is {zswpwb_after} while wb is {wb}"
    );
}

/// Port of `test_zswap_writeback`: the group's `memory.zswap.writeback`
/// rules, and a child's 1 cannot override its parent's 0.
fn test_zswap_writeback(wb: bool) {
    let sim = zswap_sim();
    assert!(cg_read_strcmp(&sim, "", "memory.zswap.writeback", "1\n"));
    let test_group = cg_name("", "zswap_writeback_test");
    cg_create(&sim, &test_group);
    let wb_value = if wb { "1" } else { "0" };
    assert_eq!(
        cg_write(&sim, &test_group, "memory.zswap.writeback", wb_value),
        0
    );
    test_zswap_writeback_one(&sim, &test_group, wb);
    assert_eq!(cg_write(&sim, &test_group, "memory.zswap.max", "max"), 0);
    assert_eq!(
        cg_write(&sim, &test_group, "cgroup.subtree_control", "+memory"),
        0
    );
    let child = cg_name(&test_group, "zswap_writeback_test_child");
    cg_create(&sim, &child);
    assert_eq!(cg_write(&sim, &child, "memory.zswap.writeback", "1"), 0);
    test_zswap_writeback_one(&sim, &child, wb);
}

/// Port of `test_zswap_writeback_enabled`.
#[test]
fn test_zswap_writeback_enabled() {
    test_zswap_writeback(true);
}

/// Port of `test_zswap_writeback_disabled`.
#[test]
fn test_zswap_writeback_disabled() {
    test_zswap_writeback(false);
}
