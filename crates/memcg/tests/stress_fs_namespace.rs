//! Stress: threads renaming, linking, unlinking, making and removing
//! directories, and writing and reading through open files in one small
//! namespace at once; the namespace's invariants (`Superblock::validate`)
//! hold after every round, every byte read back is one some writer wrote,
//! and once everything is closed and removed nothing is left: no node,
//! no disk page, no page-cache charge. `MEMCG_STRESS_SEED` replays a run
//! (the seed is printed), `MEMCG_STRESS_OPS` scales it.

mod common;

use std::sync::Arc;

use memcg::fs::{Owner, ROOT_INO, RenameMode, Superblock};
use memcg::memcontrol::{CgroupTree, MemcgStat};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const THREADS: u64 = 4;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One random operation on directories `dirs` (inode numbers; a removed
/// one gives errors, which are fine); bytes written are all `fill`.
fn one_op(
    sb: &Superblock,
    m: &Arc<memcg::memcontrol::MemCgroup>,
    dirs: &[u64],
    rng: &mut ChaCha8Rng,
    fill: u8,
) {
    let dir = dirs[rng.random_range(0..dirs.len())];
    let other = dirs[rng.random_range(0..dirs.len())];
    let name = NAMES[rng.random_range(0..NAMES.len())];
    let new_name = NAMES[rng.random_range(0..NAMES.len())];
    let owner = Owner::root(0o644);
    match rng.random_range(0..9) {
        0 | 1 => {
            if let Ok(f) = sb.create_at(m, dir, name, owner, false) {
                let len = rng.random_range(0..20_000);
                let _ = f.write_at(m, rng.random_range(0..8192), &vec![fill; len]);
            }
        }
        2 => {
            if let Ok(st) = sb.lookup_at(dir, name)
                && let Ok(f) = sb.open_ino(m, st.ino)
            {
                let mut buf = vec![0; 30_000];
                let n = f.read_at(m, 0, &mut buf).unwrap_or(0);
                // Holes read as zeros; written bytes are some writer's.
                assert!(
                    buf[..n]
                        .iter()
                        .all(|&b| b == 0 || (1..=THREADS as u8).contains(&b))
                );
                let _ = f.set_len(rng.random_range(0..10_000));
            }
        }
        3 => {
            let _ = sb.unlink_at(dir, name);
        }
        4 => {
            let mode = [
                RenameMode::Replace,
                RenameMode::NoReplace,
                RenameMode::Exchange,
            ][rng.random_range(0..3)];
            let _ = sb.rename_at(dir, name, other, new_name, mode);
        }
        5 => {
            if let Ok(st) = sb.lookup_at(dir, name) {
                let _ = sb.link_at(st.ino, other, new_name);
            }
        }
        6 => {
            let _ = sb.mkdir_at(dir, name, Owner::root(0o755));
        }
        7 => {
            let _ = sb.rmdir_at(dir, name);
        }
        _ => {
            let _ = sb.symlink_at(dir, name, new_name, owner);
        }
    }
}

/// Removes everything under directory `dir`.
fn clear(sb: &Superblock, dir: u64) {
    for entry in sb.readdir(dir).unwrap() {
        if entry.kind == memcg::fs::FileKind::Directory {
            clear(sb, entry.ino);
            sb.rmdir_at(dir, &entry.name).unwrap();
        } else {
            sb.unlink_at(dir, &entry.name).unwrap();
        }
    }
}

#[test]
fn concurrent_namespace_changes_keep_the_invariants_and_leak_nothing() {
    let seed = common::stress_seed("stress_fs_namespace");
    let ops = env("MEMCG_STRESS_OPS", 3000);
    let t = CgroupTree::default();
    let m = Arc::clone(t.root());
    let sb = common::ram_fs(&t, 64 << 20);
    let top: Vec<u64> = (0..3)
        .map(|i| {
            sb.mkdir_at(ROOT_INO, &format!("d{i}"), Owner::root(0o755))
                .unwrap()
                .ino
        })
        .collect();
    let mut dirs = top.clone();
    dirs.push(ROOT_INO);
    for round in 0..4 {
        std::thread::scope(|s| {
            for thread in 0..THREADS {
                let (sb, m, dirs) = (&sb, &m, &dirs);
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (round << 8) ^ thread);
                    for _ in 0..ops / 4 / THREADS {
                        one_op(sb, m, dirs, &mut rng, thread as u8 + 1);
                    }
                });
            }
        });
        sb.validate();
    }
    clear(&sb, ROOT_INO);
    sb.validate();
    let counts = sb.counts();
    assert_eq!((counts.nr_files, counts.disk_pages), (0, 0), "seed {seed}");
    assert_eq!(m.stat(MemcgStat::File), 0, "seed {seed}: page cache left");
    sb.unmount().unwrap();
}
