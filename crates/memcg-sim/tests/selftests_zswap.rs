//! Linux v6.14's zswap selftests (tools/testing/selftests/cgroup/
//! test_zswap.c) that need no zswap writeback, run against the simulator
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
//! Still to come with zswap writeback and its shrinker:
//! `test_zswap_writeback_enabled`, `test_zswap_writeback_disabled`,
//! `test_no_invasive_cgroup_shrink`, `test_no_kmem_bypass`.
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
