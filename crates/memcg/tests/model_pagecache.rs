//! Model-based test of the page cache and filesystem against a reference
//! (a map of file contents): random writes, reads, removals, syncs,
//! `drop_caches`, reclaim, rmdirs of the cgroups doing the I/O, time
//! passing on the virtual clock (the flusher's periodic writeback) and new
//! dirty limits (throttling and background writeback), for both list_lru
//! designs and both offline behaviours. After every step the contents read
//! back equal the model's, and the charges add up: the machine's pages are
//! exactly the cached file pages, the slab pages and the RAM disk's pages;
//! the slab bytes are exactly the cached dentries, inodes and the
//! radix-tree nodes of their page caches; the dirty pages are exactly those
//! the backing device's writebacks count, none in flight. At the end,
//! everything unmounted, nothing is charged anywhere, no writeback is left
//! and no cgroup is left dying.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use memcg::clock::VirtualClock;
use memcg::filemap::XA_NODE_BYTES;
use memcg::fs::{DENTRY_BYTES, FsError, FsSource, INODE_BYTES, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgMetadata, MemcgStat, ReclaimOptions};
use memcg::mm_types::PAGE_BYTES;
use memcg::page_writeback::run_due_flushers;
use memcg::vmscan::{SwapSpace, try_to_free_mem_cgroup_pages};
use proptest::prelude::*;

const FILES: u8 = 4;
const CGROUPS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Write {
        cg: usize,
        file: u8,
        len: usize,
        byte: u8,
    },
    Read {
        cg: usize,
        file: u8,
    },
    Remove {
        file: u8,
    },
    Sync,
    DropCaches(u32),
    Reclaim {
        cg: Option<usize>,
        nr: u64,
    },
    Rmdir {
        cg: usize,
    },
    /// Time passes on the virtual clock; the flusher runs what came due.
    Sleep {
        secs: u64,
    },
    /// `vm.dirty_bytes` and `vm.dirty_background_bytes`, in pages.
    DirtyLimits {
        pages: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let cg = 0..CGROUPS;
    let file = 0..FILES;
    prop_oneof![
        4 => (cg.clone(), file.clone(), 0usize..5 * PAGE_BYTES + 7, any::<u8>())
            .prop_map(|(cg, file, len, byte)| Op::Write { cg, file, len, byte }),
        5 => (cg.clone(), file.clone()).prop_map(|(cg, file)| Op::Read { cg, file }),
        1 => file.prop_map(|file| Op::Remove { file }),
        1 => Just(Op::Sync),
        2 => (1u32..=3).prop_map(Op::DropCaches),
        2 => (prop::option::of(cg.clone()), 1u64..64).prop_map(|(cg, nr)| Op::Reclaim { cg, nr }),
        1 => cg.prop_map(|cg| Op::Rmdir { cg }),
        1 => (1u64..40).prop_map(|secs| Op::Sleep { secs }),
        1 => (2u64..32).prop_map(|pages| Op::DirtyLimits { pages }),
    ]
}

/// The bytes of a file written with `len` and `byte` (varying per
/// position, so misplaced pages show).
fn contents(len: usize, byte: u8) -> Vec<u8> {
    (0..len)
        .map(|i| byte.wrapping_add((i / 97) as u8))
        .collect()
}

struct World {
    tree: CgroupTree,
    clock: Arc<VirtualClock>,
    sb: Arc<Superblock>,
    model: HashMap<u8, Vec<u8>>,
}

impl World {
    fn cgroup(&self, cg: usize) -> Arc<MemCgroup> {
        let path = format!("/c{cg}");
        self.tree
            .find(&path)
            .or_else(|_| self.tree.mkdir(&path).map(|c| c.memcg().unwrap()))
            .unwrap()
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Write {
                cg,
                file,
                len,
                byte,
            } => {
                let data = contents(len, byte);
                let memcg = self.cgroup(cg);
                self.sb.write(&memcg, &file.to_string(), &data).unwrap();
                self.model.insert(file, data);
            }
            Op::Read { cg, file } => {
                let memcg = self.cgroup(cg);
                match (
                    self.sb.read(&memcg, &file.to_string()),
                    self.model.get(&file),
                ) {
                    (Ok(got), Some(want)) => assert!(got == *want, "file {file} differs"),
                    (Err(FsError::NotFound { .. }), None) => {}
                    (got, want) => panic!("file {file}: {got:?} vs model {:?}", want.map(Vec::len)),
                }
            }
            Op::Remove { file } => {
                let removed = self.sb.unlink(&file.to_string());
                assert_eq!(removed.is_ok(), self.model.remove(&file).is_some());
            }
            Op::Sync => {
                self.sb.sync().unwrap();
            }
            Op::DropCaches(mode) => {
                drop_caches(&self.tree, std::slice::from_ref(&self.sb), mode);
            }
            Op::Reclaim { cg, nr } => {
                let target = match cg {
                    Some(cg) => self.cgroup(cg),
                    None => Arc::clone(self.tree.root()),
                };
                try_to_free_mem_cgroup_pages(
                    &self.tree,
                    &target,
                    nr,
                    &SwapSpace::default,
                    ReclaimOptions::default(),
                );
            }
            Op::Rmdir { cg } => {
                let _ = self.tree.rmdir(&format!("/c{cg}"));
            }
            Op::Sleep { secs } => {
                self.clock.advance(Duration::from_secs(secs));
                run_due_flushers(&self.tree);
            }
            Op::DirtyLimits { pages } => {
                self.tree
                    .set_dirty_bytes(pages * 2 * PAGE_BYTES as u64)
                    .unwrap();
                self.tree
                    .set_dirty_background_bytes(pages * PAGE_BYTES as u64)
                    .unwrap();
            }
        }
    }

    /// The charges add up (stock off: exact).
    fn check(&self) {
        let root = self.tree.root();
        let counts = self.sb.counts();
        let stat = |s| u64::try_from(root.stat(s)).unwrap();
        assert_eq!(stat(MemcgStat::File), counts.nr_cached_pages, "file pages");
        assert_eq!(
            stat(MemcgStat::FileDirty),
            counts.nr_dirty_pages,
            "dirty pages"
        );
        assert_eq!(
            stat(MemcgStat::FileWriteback),
            0,
            "nothing in flight at rest"
        );
        assert_eq!(
            self.sb.bdi().nr_dirty_pages(),
            counts.nr_dirty_pages,
            "the writebacks count every dirty page"
        );
        assert_eq!(
            self.sb.bdi().nr_dirty_inodes() == 0,
            counts.nr_dirty_pages == 0,
            "an inode with dirty pages is on a dirty list"
        );
        assert_eq!(
            stat(MemcgStat::SlabReclaimable),
            counts.nr_dentries * DENTRY_BYTES
                + counts.nr_inodes * INODE_BYTES
                + counts.nr_xa_nodes * XA_NODE_BYTES,
            "slab bytes"
        );
        assert_eq!(stat(MemcgStat::SlabUnreclaimable), 0, "no file is open");
        assert_eq!(
            self.tree.machine_used_pages(),
            counts.nr_cached_pages + stat(MemcgStat::Kernel) + counts.disk_pages,
            "machine pages"
        );
    }
}

fn run(ops: &[Op], design: LruDesign, reparent: bool) {
    let tree = CgroupTree::default();
    // Exact figures: no stock, and no memory cgroup metadata (the model
    // knows pages and slab objects only).
    tree.set_charge_stock(false);
    tree.set_memcg_metadata(MemcgMetadata::NONE);
    tree.set_reparent_lru_folios(reparent);
    tree.set_machine_pages(1 << 16);
    let clock = Arc::new(VirtualClock::default());
    tree.set_clock(clock.clone());
    let sb = Superblock::mount(
        &tree,
        FsSource::Ram {
            size_bytes: 16 << 20,
        },
        design,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    let mut world = World {
        tree,
        clock,
        sb,
        model: HashMap::new(),
    };
    for op in ops {
        world.apply(op);
        world.check();
    }
    for (file, want) in &world.model {
        let got = world.sb.read(world.tree.root(), &file.to_string()).unwrap();
        assert!(got == *want, "file {file} differs at the end");
    }
    world.sb.unmount().unwrap();
    assert_eq!(world.sb.bdi().nr_writebacks(), 0, "no writeback left");
    let World { tree, sb, .. } = world;
    drop(sb);
    for cg in 0..CGROUPS {
        let _ = tree.rmdir(&format!("/c{cg}"));
    }
    assert_eq!(
        tree.root_cgroup().nr_dying_descendants(),
        0,
        "no cgroup left dying"
    );
    assert_eq!(tree.machine_used_pages(), 0, "nothing left charged");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn page_cache_matches_the_model(
        ops in prop::collection::vec(op(), 1..60),
        legacy in any::<bool>(),
        reparent in any::<bool>(),
    ) {
        let design = if legacy { LruDesign::Legacy } else { LruDesign::Split };
        run(&ops, design, reparent);
    }
}
