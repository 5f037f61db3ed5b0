//! Multi-threaded, seeded stress of zswap in the simulator: workers in
//! two small cgroups allocate compressible and incompressible mappings,
//! read them back (swap-ins from zswap and the device) and free them,
//! while a controller thread moves `memory.zswap.max`, toggles
//! `memory.zswap.writeback` and the shrinker, runs the shrinkers over the
//! cgroups (writing entries back to the device) and removes and recreates
//! a third cgroup whose entries are reparented. Every mapping verifies
//! before it is freed; at the end nothing is stored, charged or held.
//! Seeded (`MEMCG_STRESS_SEED`); the seed fixes each thread's choices.
#![cfg(not(loom))]

#[path = "../../memcg/tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use memcg::memcontrol::MemcgStat;
use memcg_sim::{Fill, Sim, SimConfig, SimError};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const GROUPS: [&str; 3] = ["/p/a", "/p/b", "/p/c"];
const ROUNDS: usize = 40;

/// What a worker's operation may fail with under memory pressure.
fn expected(e: &SimError) -> bool {
    matches!(e, SimError::Killed { .. } | SimError::NoSuchMapping(_))
        || e.errno() == memcg::Errno::ENOMEM
}

fn worker(sim: &Sim, t: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t as u64 * 0x9e37));
    let cgroup = GROUPS[t % 2];
    for round in 0..ROUNDS {
        let name = format!("w{t}r{round}");
        let fill = [Fill::Text, Fill::Half, Fill::Random, Fill::Sparse][rng.random_range(0..4)];
        let size = rng.random_range(16..96u64) * 4096;
        if let Err(e) = sim.alloc(cgroup, &name, size, 1, fill) {
            assert!(expected(&e), "seed {seed}: alloc: {e}");
            continue;
        }
        let touched = sim.touch(&name).map(drop);
        if let Err(e) = touched.and_then(|()| sim.verify(&name)) {
            assert!(expected(&e), "seed {seed}: {name}: {e}");
        }
        let _ = sim.free(&name);
    }
}

fn controller(sim: &Sim, seed: u64, stop: &AtomicBool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc0);
    let fs = sim.fs();
    let zswap = sim.swap().zswap();
    while !stop.load(Ordering::Relaxed) {
        let g = GROUPS[rng.random_range(0..2)];
        match rng.random_range(0..6) {
            0 => {
                let max = ["max", "0", "16K", "64K"][rng.random_range(0..4)];
                let _ = fs.write(&format!("{g}/memory.zswap.max"), max);
            }
            1 => {
                let on = ["0", "1", "1"][rng.random_range(0..3)];
                let _ = fs.write(&format!("{g}/memory.zswap.writeback"), on);
            }
            2 => zswap.set_shrinker_enabled(rng.random()),
            3 => {
                let memcg = fs.memcg(g).unwrap();
                memcg::shrinker::shrink_slab(fs.tree(), 0, &memcg, 0);
            }
            4 => {
                // A cgroup comes and goes: what it stored moves up.
                let _ = fs.mkdir("/p/c");
                let _ = sim.alloc("/p/c", "c", 32 * 4096, 1, Fill::Text);
                let _ = sim.free("c");
                let _ = fs.rmdir("/p/c");
            }
            _ => std::thread::yield_now(),
        }
    }
}

#[test]
fn zswap_under_churning_limits_loses_nothing() {
    let seed = common::stress_seed_or("stress_zswap", 0x25_a9);
    let sim = Sim::new(SimConfig {
        seed,
        mem_bytes: 256 << 20,
        charge_stock: false,
        ..SimConfig::default()
    });
    let fs = sim.fs();
    fs.write("/cgroup.subtree_control", "+memory").unwrap();
    fs.mkdir("/p").unwrap();
    fs.write("/p/cgroup.subtree_control", "+memory").unwrap();
    for g in &GROUPS[..2] {
        fs.mkdir(g).unwrap();
        fs.write(&format!("{g}/memory.max"), "256K").unwrap();
    }
    sim.swapon_ram(64 << 20, None).unwrap();
    sim.swap().zswap().set_enabled(true);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let control = s.spawn(|| controller(&sim, seed, &stop));
        let workers: Vec<_> = (0..3)
            .map(|t| {
                s.spawn({
                    let sim = &sim;
                    move || worker(sim, t, seed)
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        control.join().unwrap();
    });
    let z = sim.swap().zswap().debug_counts();
    eprintln!("stress_zswap: {z:?}");
    let root = fs.tree().root();
    let stored = root.vm_event(memcg::memcontrol::VmEvent::Zswpout);
    assert!(stored > 0, "seed {seed}: zswap was used");
    assert_eq!(z.stored_pages, 0, "seed {seed}: {z:?}");
    assert_eq!(z.pool_total_size, 0, "seed {seed}: {z:?}");
    for g in &GROUPS[..2] {
        let memcg = fs.memcg(g).unwrap();
        assert_eq!(memcg.stat(MemcgStat::ZswapBytes), 0, "seed {seed}: {g}");
        assert_eq!(memcg.stat(MemcgStat::Zswapped), 0, "seed {seed}: {g}");
        assert_eq!(memcg.memory().usage(), 0, "seed {seed}: {g}");
        assert_eq!(memcg.swap().usage(), 0, "seed {seed}: {g}");
    }
    assert!(
        sim.swap().swapfiles().iter().all(|d| d.inuse_pages() == 0),
        "seed {seed}: slots left"
    );
}
