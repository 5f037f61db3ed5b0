//! Stress test of the page cache and filesystem: readers in short-lived
//! cgroups (made, used, removed: dying while their page cache lasts), a
//! writer rewriting and removing its own files, and a thread running
//! `drop_caches`, reclaim and `sync`, all at once under a tight
//! `memory.max`, for both list_lru designs and both offline behaviours,
//! with the flusher inline (run by whoever wakes it) or on its own thread,
//! its background writeback kept busy by a low background threshold.
//! Every byte read is checked against what was written; at the end, with
//! everything unmounted and removed, nothing is charged and no cgroup is
//! left dying. Seeded: a failing run prints its seed
//! (`MEMCG_STRESS_SEED` replays it).
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use memcg::fs::{FsSource, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::machine::Machine;
use memcg::memcontrol::{CgroupTree, ReclaimOptions};
use memcg::vmscan::{SwapSpace, try_to_free_mem_cgroup_pages};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SHARED_FILES: usize = 16;
const OPS_PER_THREAD: usize = 1500;
const READERS: usize = 2;

fn shared_contents(i: usize) -> Vec<u8> {
    (0..(i % 5 + 1) * 9000)
        .map(|b| (b as u8) ^ (i as u8))
        .collect()
}

fn reader(tree: &CgroupTree, sb: &Superblock, t: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ t as u64);
    let mut generation = 0;
    let mut path = format!("/p/r{t}_{generation}");
    let mut memcg = tree.mkdir(&path).unwrap().memcg().unwrap();
    for op in 0..OPS_PER_THREAD {
        if op % 16 == 15 {
            // Leave the cgroup behind: it dies, pinned by its page cache
            // (v6.14) or emptied into /p (reparenting).
            drop(memcg);
            tree.rmdir(&path).unwrap();
            generation += 1;
            path = format!("/p/r{t}_{generation}");
            memcg = tree.mkdir(&path).unwrap().memcg().unwrap();
        }
        let i = rng.random_range(0..SHARED_FILES);
        let got = sb
            .read(&memcg, &format!("s{i}"))
            .unwrap_or_else(|e| panic!("seed {seed}: reading s{i}: {e}; {:?}", tree.find("/p")));
        assert!(got == shared_contents(i), "shared file {i} differs");
    }
    drop(memcg);
    tree.rmdir(&path).unwrap();
}

fn writer(tree: &CgroupTree, sb: &Superblock, seed: u64) -> HashMap<String, Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x77);
    let memcg = tree.mkdir("/p/w").unwrap().memcg().unwrap();
    let mut model = HashMap::new();
    for _ in 0..OPS_PER_THREAD {
        let name = format!("w{}", rng.random_range(0..6));
        match rng.random_range(0..10) {
            0 => {
                let removed = sb.unlink(&name).is_ok();
                assert_eq!(removed, model.remove(&name).is_some());
            }
            1..=4 => {
                let len = rng.random_range(0..30000);
                let byte: u8 = rng.random();
                let data: Vec<u8> = (0..len)
                    .map(|i| byte.wrapping_add((i / 61) as u8))
                    .collect();
                sb.write(&memcg, &name, &data).unwrap();
                model.insert(name, data);
            }
            _ => {
                if let Some(want) = model.get(&name) {
                    let got = sb.read(&memcg, &name).unwrap();
                    assert!(got == *want, "{name} differs");
                }
            }
        }
    }
    drop(memcg);
    tree.rmdir("/p/w").unwrap();
    model
}

fn chaos(tree: &CgroupTree, sb: &Arc<Superblock>, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc4a05);
    for _ in 0..OPS_PER_THREAD / 4 {
        match rng.random_range(0..4) {
            0 => {
                drop_caches(tree, std::slice::from_ref(sb), rng.random_range(1..=3));
            }
            1 => {
                sb.sync().unwrap();
            }
            _ => {
                let target = tree.find("/p").unwrap();
                try_to_free_mem_cgroup_pages(
                    tree,
                    &target,
                    rng.random_range(1..128),
                    &SwapSpace::default,
                    ReclaimOptions::default(),
                );
            }
        }
        std::thread::yield_now();
    }
}

fn run(design: LruDesign, reparent: bool, flusher_thread: bool, seed: u64) {
    // The machine's reclaim takes the page cache back under the limit.
    let machine = Machine::with_tree(CgroupTree::default());
    let tree = machine.tree().clone();
    tree.set_dirty_background_bytes(16 * 4096).unwrap();
    tree.set_reparent_lru_folios(reparent);
    tree.set_machine_pages(1 << 16);
    // Exact charges: a per-thread stock of 64 pages per thread would take
    // most of the tight limit below.
    tree.set_charge_stock(false);
    let sb = Superblock::mount(
        &tree,
        FsSource::Ram {
            size_bytes: 32 << 20,
        },
        design,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    if flusher_thread {
        sb.start_flusher_thread().unwrap();
    }
    for i in 0..SHARED_FILES {
        sb.write(tree.root(), &format!("s{i}"), &shared_contents(i))
            .unwrap();
    }
    sb.sync().unwrap();
    drop_caches(&tree, std::slice::from_ref(&sb), 1);
    tree.mkdir("/p").unwrap().memcg().unwrap();
    // Tight: the shared files alone are ~110 pages, the writer's up to ~45.
    tree.find("/p").unwrap().memory().set_max(128).unwrap();
    let model = std::thread::scope(|s| {
        for t in 0..READERS {
            let (tree, sb) = (&tree, &sb);
            s.spawn(move || reader(tree, sb, t, seed));
        }
        let (t2, sb2) = (&tree, &sb);
        s.spawn(move || chaos(t2, sb2, seed));
        writer(&tree, &sb, seed)
    });
    for (name, want) in &model {
        assert!(
            sb.read(tree.root(), name).unwrap() == *want,
            "{name} at the end"
        );
    }
    for i in 0..SHARED_FILES {
        assert!(sb.read(tree.root(), &format!("s{i}")).unwrap() == shared_contents(i));
    }
    assert!(
        tree.reclaim_counts().calls > 0,
        "the limit made charges reclaim"
    );
    sb.unmount().unwrap();
    assert_eq!(sb.bdi().nr_writebacks(), 0, "seed {seed}: writeback left");
    drop(sb);
    tree.rmdir("/p").unwrap();
    assert_eq!(
        tree.root_cgroup().nr_dying_descendants(),
        0,
        "seed {seed}: dying left"
    );
    assert_eq!(
        tree.machine_used_pages(),
        0,
        "seed {seed}: pages left charged"
    );
}

#[test]
fn readers_writers_reclaim_drop_caches_and_rmdir_balance() {
    let seed = common::stress_seed("stress_pagecache");
    for design in [LruDesign::Split, LruDesign::Legacy] {
        for reparent in [false, true] {
            run(design, reparent, reparent, seed);
        }
    }
}
