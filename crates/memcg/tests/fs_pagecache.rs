//! The page cache and filesystem end to end: contents, charges, slab,
//! shrinker, drop_caches, dying cgroups and the 2026 reparenting.

use std::sync::Arc;

use memcg::filemap::XA_NODE_BYTES;
use memcg::fs::{DENTRY_BYTES, FsSource, INODE_BYTES, Superblock, drop_caches};
use memcg::list_lru::LruDesign;
use memcg::memcontrol::{CgroupTree, MemcgStat};
use memcg::vmscan::SwapSpace;

fn ram(tree: &CgroupTree, design: LruDesign) -> Arc<Superblock> {
    Superblock::mount(
        tree,
        FsSource::Ram {
            size_bytes: 64 << 20,
        },
        design,
        Arc::new(SwapSpace::default),
    )
    .unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn bytes_read_back_and_charges_follow_the_reader() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let b = t.mkdir("/b").unwrap().memcg().unwrap();
    // The two cgroups' own metadata, charged to the root.
    let metadata_pages = t.machine_used_pages();
    let sb = ram(&t, LruDesign::Split);
    let data = pattern(38893, 7);
    sb.write(&a, "f", &data).unwrap();
    assert_eq!(a.stat(MemcgStat::File), 10);
    assert_eq!(a.stat(MemcgStat::FileDirty), 10);
    assert_eq!(sb.sync().unwrap(), 10);
    assert_eq!(a.stat(MemcgStat::FileDirty), 0);
    assert_eq!(sb.read(&b, "f").unwrap(), data, "cached pages");
    assert_eq!(b.stat(MemcgStat::File), 0, "hits charge nobody");
    // Slab: one dentry, one inode, and the radix-tree node holding the
    // file's pages, charged to the creator.
    assert_eq!(
        a.stat(MemcgStat::SlabReclaimable) as u64,
        DENTRY_BYTES + INODE_BYTES + XA_NODE_BYTES
    );
    assert_eq!(drop_caches(&t, std::slice::from_ref(&sb), 1).0, 10);
    assert_eq!(a.stat(MemcgStat::File), 0);
    assert_eq!(sb.read(&b, "f").unwrap(), data, "from the RAM disk");
    assert_eq!(b.stat(MemcgStat::File), 10, "misses charge the reader");
    // Used again since it went on the LRU (DCACHE_REFERENCED): the first
    // drop only clears the mark, as the kernel's (drop twice to empty).
    assert_eq!(drop_caches(&t, std::slice::from_ref(&sb), 3).1, 0);
    let (_, objects) = drop_caches(&t, std::slice::from_ref(&sb), 3);
    assert_eq!(objects, 2, "the dentry, then its inode");
    assert_eq!(a.stat(MemcgStat::SlabReclaimable), 0);
    assert_eq!(a.memory().usage(), 0);
    assert_eq!(b.memory().usage(), 0);
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(t.machine_used_pages(), metadata_pages);
}

#[test]
fn a_removed_cgroup_with_page_cache_lingers_until_its_pages_go() {
    for (reparent, design) in [
        (false, LruDesign::Split),
        (true, LruDesign::Split),
        (false, LruDesign::Legacy),
    ] {
        let t = CgroupTree::default();
        t.set_charge_stock(false);
        t.set_reparent_lru_folios(reparent);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        let sb = ram(&t, design);
        let data = pattern(5 * 4096, 1);
        sb.write(&c, "x", &data).unwrap();
        sb.sync().unwrap();
        drop(c);
        t.rmdir("/p/c").unwrap();
        let dying = t.root_cgroup().nr_dying_descendants();
        assert_eq!(dying, usize::from(!reparent), "reparent={reparent}");
        // Slab (the dentry, the inode and the pages' radix-tree node)
        // went to the parent at offline either way.
        assert_eq!(
            p.stat(MemcgStat::SlabReclaimable) as u64,
            DENTRY_BYTES + INODE_BYTES + XA_NODE_BYTES
        );
        assert_eq!(p.stat(MemcgStat::File), 5);
        assert_eq!(sb.read(&p, "x").unwrap(), data);
        drop_caches(&t, std::slice::from_ref(&sb), 3);
        drop_caches(&t, std::slice::from_ref(&sb), 3);
        assert_eq!(t.root_cgroup().nr_dying_descendants(), 0);
        assert_eq!(p.memory().usage(), 0, "{:?}", p.slab_charge());
        sb.unmount().unwrap();
    }
}

#[test]
fn reclaim_drops_clean_cache_and_refaults_activate() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = ram(&t, LruDesign::Split);
    let data = pattern(64 * 4096, 3);
    sb.write(&a, "big", &data).unwrap();
    sb.sync().unwrap();
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    sb.read(&a, "big").unwrap();
    let before = a.memory().usage();
    let no_swap = SwapSpace::default;
    let opts = memcg::memcontrol::ReclaimOptions::default();
    let freed = memcg::vmscan::try_to_free_mem_cgroup_pages(&t, &a, 32, &no_swap, opts);
    assert!(freed >= 32, "{freed}");
    assert_eq!(a.memory().usage(), before - freed);
    // The evicted pages come back as refaults (distance within the
    // working set when the active list is big enough: here it is empty,
    // so none activates).
    assert_eq!(sb.read(&a, "big").unwrap(), data);
    assert_eq!(
        a.stat(MemcgStat::WorkingsetRefaultFile) as u64,
        freed,
        "{:?}",
        a.lruvec()
    );
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn a_host_directory_holds_the_files_bytes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old"), b"kept from before the mount").unwrap();
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = Superblock::mount(
        &t,
        FsSource::Dir(dir.path().to_owned()),
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    assert_eq!(sb.read(&a, "old").unwrap(), b"kept from before the mount");
    let data = pattern(3 * 4096 + 100, 9);
    sb.write(&a, "new", &data).unwrap();
    assert_eq!(sb.sync().unwrap(), 4);
    assert_eq!(
        std::fs::read(dir.path().join("new")).unwrap(),
        data,
        "on the host, trimmed to size"
    );
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    assert_eq!(sb.read(&a, "new").unwrap(), data, "read back from the host");
    sb.unlink("new").unwrap();
    assert!(!dir.path().join("new").exists());
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn an_inode_with_page_cache_stays_off_its_lru_until_the_pages_go() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = ram(&t, LruDesign::Split);
    sb.write(&a, "f", &pattern(3 * 4096, 1)).unwrap();
    sb.sync().unwrap();
    // Slab only: the dentry goes, its inode keeps its pages and stays
    // cached, off the LRU (`mapping_shrinkable` is false).
    drop_caches(&t, std::slice::from_ref(&sb), 2);
    drop_caches(&t, std::slice::from_ref(&sb), 2);
    let c = sb.counts();
    assert_eq!((c.nr_dentries, c.nr_inodes, c.nr_unused), (0, 1, 0));
    assert_eq!(a.stat(MemcgStat::File), 3, "page cache untouched");
    // The pages go: the mapping tells the inode, which goes on the LRU and
    // then to the shrinker.
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    assert_eq!(sb.counts().nr_unused, 1);
    drop_caches(&t, std::slice::from_ref(&sb), 2);
    assert_eq!(sb.counts().nr_inodes, 0);
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn drop_caches_deactivates_what_it_cannot_drop() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = ram(&t, LruDesign::Split);
    sb.write(&a, "f", &pattern(2 * 4096, 2)).unwrap();
    sb.sync().unwrap();
    sb.read(&a, "f").unwrap();
    sb.read(&a, "f").unwrap();
    assert_eq!(a.stat(MemcgStat::ActiveFile), 2, "read twice: active");
    // Dirty again: drop_caches keeps the pages but deactivates them.
    sb.write(&a, "f", &pattern(2 * 4096, 3)).unwrap();
    drop_caches(&t, std::slice::from_ref(&sb), 1);
    assert_eq!(a.stat(MemcgStat::File), 2);
    assert_eq!(a.stat(MemcgStat::ActiveFile), 0);
    assert_eq!(a.vm_event(memcg::memcontrol::VmEvent::Pgdeactivate), 2);
    sb.sync().unwrap();
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    drop_caches(&t, std::slice::from_ref(&sb), 3);
    assert_eq!(a.memory().usage(), 0);
}

#[test]
fn unlinking_a_file_whose_dentry_was_pruned_evicts_its_inode_and_pages() {
    // The VFS looks a name up before unlinking it, so an inode kept
    // cached by its page cache after the shrinker took its dentry still
    // reaches its final iput: its pages, dirty ones too, go with it.
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = ram(&t, LruDesign::Split);
    sb.write(&a, "obj", &pattern(6 * 4096, 2)).unwrap();
    assert_eq!(a.stat(MemcgStat::FileDirty), 6);
    drop_caches(&t, std::slice::from_ref(&sb), 2);
    assert_eq!(sb.counts().nr_dentries, 0, "the shrinker took the dentry");
    assert_eq!(sb.counts().nr_inodes, 1, "its dirty pages keep the inode");
    sb.unlink("obj").unwrap();
    assert_eq!(sb.counts().nr_inodes, 0);
    assert_eq!(a.stat(MemcgStat::FileDirty), 0);
    assert_eq!(a.stat(MemcgStat::File), 0);
    assert_eq!(a.memory().usage(), 0, "nothing left charged");
}

#[test]
fn open_files_read_and_write_anywhere_charged_to_each_caller() {
    let t = CgroupTree::default();
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let b = t.mkdir("/b").unwrap().memcg().unwrap();
    // The two cgroups' own metadata, charged to the root.
    let metadata_pages = t.machine_used_pages();
    let sb = Superblock::mount(
        &t,
        FsSource::Ram {
            size_bytes: 16 * 4096,
        },
        LruDesign::Split,
        Arc::new(SwapSpace::default),
    )
    .unwrap();
    let file = sb.open_file(&a, "f", true).unwrap();
    assert_eq!(file.size_bytes(), 0);
    // A write past the end leaves a hole that reads as zeros.
    file.write_at(&a, 3 * 4096 + 10, b"tail").unwrap();
    assert_eq!(file.size_bytes(), 3 * 4096 + 14);
    file.write_at(&b, 5, b"head").unwrap();
    let mut buf = vec![0xffu8; 16];
    assert_eq!(file.read_at(&b, 0, &mut buf).unwrap(), 16);
    assert_eq!(&buf[..9], b"\0\0\0\0\0head");
    assert_eq!(
        file.read_at(&b, 3 * 4096 + 12, &mut buf).unwrap(),
        2,
        "short at the end"
    );
    assert_eq!(&buf[..2], b"il");
    assert_eq!(
        file.read_at(&b, 1 << 20, &mut buf).unwrap(),
        0,
        "past the end"
    );
    // Each page is charged to whoever brought it in.
    assert_eq!(a.stat(MemcgStat::File), 1);
    assert_eq!(b.stat(MemcgStat::File), 1);
    // The disk's 16 pages are a limit at write time; nothing is written.
    let err = file.write_at(&a, 15 * 4096, &[1; 4097]).unwrap_err();
    assert_eq!(err.errno(), memcg::Errno::ENOSPC);
    assert_eq!(file.size_bytes(), 3 * 4096 + 14);
    // Truncation drops the pages past the new end.
    file.set_len(4096).unwrap();
    assert_eq!(file.size_bytes(), 4096);
    assert_eq!(a.stat(MemcgStat::File) + b.stat(MemcgStat::File), 1);
    // Two handles growing one file at once never pass the disk's size.
    let other = sb.open_file(&b, "f", false).unwrap();
    std::thread::scope(|s| {
        for (handle, memcg) in [(&file, &a), (&other, &b)] {
            s.spawn(move || {
                for i in 0..32u64 {
                    let _ = handle.write_at(memcg, i * 2048, &[7; 2048]);
                }
            });
        }
    });
    assert!(file.size_bytes() <= 16 * 4096);
    drop((file, other));
    sb.unlink("f").unwrap();
    sb.unmount().unwrap();
    drop(sb);
    assert_eq!(a.memory().usage() + b.memory().usage(), 0);
    assert_eq!(t.machine_used_pages(), metadata_pages);
}
