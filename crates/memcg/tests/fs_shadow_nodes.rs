//! Shadow entries after reclaim, end to end (fidelity D17): an inode whose
//! page cache holds only shadows is not reclaimable by the superblock
//! shrinker (`mapping_shrinkable`, `inode_lru_isolate`), except for a lone
//! shadow at index 0; its shadows go when the shadow-node shrinker frees
//! their radix-tree nodes (`count_shadow_nodes`, `shadow_lru_isolate`),
//! which counts `workingset_nodereclaim` and keeps a memory cgroup's
//! shadow nodes to an eighth of its own pages; the nodes are charged to
//! whoever inserted the entries that needed them.

use std::sync::Arc;

use memcg::filemap::XA_NODE_BYTES;
use memcg::fs::{DENTRY_BYTES, FsSource, INODE_BYTES, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgStat, ReclaimOptions};
use memcg::vmscan::{SwapSpace, try_to_free_mem_cgroup_pages};
use memcg::workingset::{max_shadow_nodes, nr_shadow_nodes};

const PAGE: usize = 4096;

fn setup() -> (CgroupTree, Arc<MemCgroup>, Arc<Superblock>) {
    let t = CgroupTree::default();
    // Exact figures: no pages in charge stocks, and no memory cgroup's
    // own structures charged to its parent (both on by default).
    t.set_charge_stock(false);
    t.set_memcg_metadata_bytes(0);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = Superblock::mount(
        &t,
        FsSource::Ram {
            size_bytes: 256 << 20,
        },
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    (t, a, sb)
}

/// Writes `pages` pages of `name` as `memcg`, writes them back, and
/// reclaims every file page of `memcg` (leaving shadows).
fn evicted_file(t: &CgroupTree, memcg: &Arc<MemCgroup>, sb: &Superblock, name: &str, pages: usize) {
    sb.write(memcg, name, &vec![3; pages * PAGE]).unwrap();
    sb.sync().unwrap();
    while memcg.stat(MemcgStat::File) > 0 {
        let freed = try_to_free_mem_cgroup_pages(
            t,
            memcg,
            1 << 20,
            &SwapSpace::default,
            ReclaimOptions::default(),
        );
        assert!(freed > 0, "clean page cache reclaims");
    }
}

/// `memcg`'s slab bytes other than `sb`'s cached dentries and inodes
/// (all charged to it in these tests): its radix-tree nodes.
fn node_bytes(memcg: &MemCgroup, sb: &Superblock) -> u64 {
    let counts = sb.counts();
    let vfs = counts.nr_dentries * DENTRY_BYTES + counts.nr_inodes * INODE_BYTES;
    memcg.stat(MemcgStat::SlabReclaimable) as u64 - vfs
}

fn shadows(sb: &Superblock, name: &str) -> u64 {
    sb.mapping(name).map_or(0, |m| m.nr_shadows())
}

#[test]
fn an_inode_holding_only_shadows_stays_with_its_shadows() {
    let (t, a, sb) = setup();
    // Enough of /a's own page cache that its two shadow nodes are within
    // its limit (an eighth of its pages): the shadow shrinker keeps them.
    sb.write(&a, "keep", &vec![1; 64 * PAGE]).unwrap();
    sb.sync().unwrap();
    sb.read(&a, "keep").unwrap();
    evicted_file(&t, &a, &sb, "f", 128);
    // Reclaim took only the older file's pages? Bring "keep" back.
    sb.read(&a, "keep").unwrap();
    assert_eq!(shadows(&sb, "f"), 128);
    assert_eq!(nr_shadow_nodes(&t, &a), 2, "two leaves of shadows");
    assert!(nr_shadow_nodes(&t, &a) <= max_shadow_nodes(&a));
    assert!(!sb.mapping("f").unwrap().is_shrinkable());
    // The slab shrinkers, twice (the first pass clears the dentries'
    // referenced marks): the dentries go, "f"'s inode stays with its
    // shadows (not shrinkable), as does "keep"'s (it has pages).
    for _ in 0..3 {
        drop_caches(&t, std::slice::from_ref(&sb), 2);
    }
    assert_eq!(sb.counts().nr_dentries, 0);
    assert_eq!(sb.counts().nr_inodes, 2);
    assert_eq!(shadows(&sb, "f"), 128, "the shadows survive");
    assert_eq!(a.stat(MemcgStat::WorkingsetNodereclaim), 0);
    // Refaults still find them.
    let refaults = a.stat(MemcgStat::WorkingsetRefaultFile);
    sb.read(&a, "f").unwrap();
    assert_eq!(a.stat(MemcgStat::WorkingsetRefaultFile) - refaults, 128);
}

#[test]
fn a_lone_shadow_at_index_zero_goes_with_its_inode() {
    let (t, a, sb) = setup();
    // Held open while its page is evicted, so the inode stays to look at.
    sb.write(&a, "one", &[7; PAGE]).unwrap();
    let file = sb.open_file(&a, "one", false).unwrap();
    evicted_file(&t, &a, &sb, "other", 1);
    let mapping = sb.mapping("one").unwrap();
    assert_eq!(mapping.nr_shadows(), 1);
    assert_eq!(mapping.nr_nodes(), 0, "kept in the tree's head");
    assert!(mapping.is_shrinkable());
    drop((mapping, file));
    for _ in 0..3 {
        drop_caches(&t, std::slice::from_ref(&sb), 2);
    }
    assert_eq!(sb.counts().nr_inodes, 0, "the inode shrinker took it");
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn the_shadow_shrinker_frees_nodes_beyond_an_eighth_of_the_pages() {
    let (t, a, sb) = setup();
    // 64 leaves of shadows (4096 pages), charged to /a, the writer.
    evicted_file(&t, &a, &sb, "big", 4096);
    assert_eq!(nr_shadow_nodes(&t, &a), 64);
    let nodes = sb.mapping("big").unwrap().nr_nodes() as u64;
    assert_eq!(nodes, 65, "64 leaves and their parent");
    assert_eq!(node_bytes(&a, &sb), nodes * XA_NODE_BYTES);
    // /a's own pages: 256 of another file, plus its slab: room for about
    // 33 shadow nodes.
    sb.write(&a, "keep", &vec![1; 256 * PAGE]).unwrap();
    sb.sync().unwrap();
    let max = max_shadow_nodes(&a);
    assert!((32..64).contains(&max), "{max}");
    // Memory pressure runs the shrinkers: nodes beyond the limit go.
    for _ in 0..20 {
        drop_caches(&t, std::slice::from_ref(&sb), 2);
    }
    let left = nr_shadow_nodes(&t, &a);
    let freed = a.stat(MemcgStat::WorkingsetNodereclaim) as u64;
    assert!(freed > 0, "workingset_nodereclaim moves");
    assert_eq!(left + freed, 64);
    assert!(left <= max_shadow_nodes(&a), "{left} left, max {max}");
    assert_eq!(
        shadows(&sb, "big"),
        left * 64,
        "each freed node's 64 shadows went"
    );
    // The freed nodes' bytes went back.
    let nodes = sb.mapping("big").map_or(0, |m| m.nr_nodes()) as u64;
    let keep_nodes = sb.mapping("keep").unwrap().nr_nodes() as u64;
    assert_eq!(node_bytes(&a, &sb), (nodes + keep_nodes) * XA_NODE_BYTES);
    // drop_caches 1 clears the rest (invalidate drops shadows and clean
    // pages); then both inodes are shrinkable and the slab shrinker takes
    // them.
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    for _ in 0..3 {
        drop_caches(&t, std::slice::from_ref(&sb), 2);
    }
    assert_eq!(nr_shadow_nodes(&t, &a), 0);
    assert_eq!(sb.counts().nr_inodes, 0);
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn nodes_are_charged_to_whoever_inserted_and_move_to_the_parent_at_rmdir() {
    let (t, a, sb) = setup();
    let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
    // /a/b writes 128 pages: 2 leaves and a root node, all /a/b's.
    sb.write(&b, "f", &vec![5; 128 * PAGE]).unwrap();
    assert_eq!(
        b.stat(MemcgStat::SlabReclaimable) as u64,
        DENTRY_BYTES + INODE_BYTES + 3 * XA_NODE_BYTES
    );
    // /a extends it: the new leaf is /a's.
    let file = sb.open_file(&a, "f", false).unwrap();
    file.write_at(&a, 128 * PAGE as u64, &[6; PAGE]).unwrap();
    drop(file);
    let a_own = a.stat(MemcgStat::SlabReclaimable) - b.stat(MemcgStat::SlabReclaimable);
    assert_eq!(a_own as u64, XA_NODE_BYTES);
    sb.sync().unwrap();
    drop(b);
    t.rmdir("/a/b").unwrap();
    assert_eq!(
        a.stat(MemcgStat::SlabReclaimable) as u64,
        DENTRY_BYTES + INODE_BYTES + 4 * XA_NODE_BYTES
    );
    sb.unlink("f").unwrap();
    for _ in 0..3 {
        drop_caches(&t, std::slice::from_ref(&sb), 3);
    }
    assert_eq!(a.memory().usage(), 0);
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(t.machine_used_pages(), 0);
}
