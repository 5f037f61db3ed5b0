//! The filesystem's namespace: directories, renames, links, files removed
//! while open, attributes and the kernel's errnos; on a RAM disk and on a
//! host directory (whose tree must follow every change).

mod common;

use std::sync::Arc;

use memcg::Errno;
use memcg::fs::{FileKind, FsSource, MAX_LINKS, Owner, ROOT_INO, RenameMode, SetAttr, Superblock};
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgStat};

fn ram(tree: &CgroupTree) -> Arc<Superblock> {
    common::ram_fs(tree, 4 << 20)
}

fn root_memcg(tree: &CgroupTree) -> Arc<MemCgroup> {
    Arc::clone(tree.root())
}

const DIR: Owner = Owner {
    uid: 0,
    gid: 0,
    perm: 0o755,
};
const FILE: Owner = Owner {
    uid: 1000,
    gid: 100,
    perm: 0o640,
};

fn errno<T: std::fmt::Debug>(r: Result<T, memcg::fs::FsError>) -> Errno {
    r.unwrap_err().errno()
}

#[test]
fn directories_nest_and_refuse_what_the_kernel_refuses() {
    let t = CgroupTree::default();
    let sb = ram(&t);
    let a = sb.mkdir_at(ROOT_INO, "a", DIR).unwrap();
    let b = sb.mkdir_at(a.ino, "b", DIR).unwrap();
    assert_eq!(sb.stat(a.ino).unwrap().nlink, 3, "2 + one subdirectory");
    let m = root_memcg(&t);
    sb.write(&m, "a/b/f", b"deep").unwrap();
    assert_eq!(sb.read(&m, "a/b/f").unwrap(), b"deep");
    assert_eq!(errno(sb.mkdir_at(a.ino, "b", DIR)), Errno::EEXIST);
    assert_eq!(errno(sb.rmdir_at(ROOT_INO, "a")), Errno::ENOTEMPTY);
    assert_eq!(errno(sb.unlink_at(ROOT_INO, "a")), Errno::EISDIR);
    assert_eq!(errno(sb.rmdir_at(b.ino, "f")), Errno::ENOTDIR);
    let long = "x".repeat(256);
    assert_eq!(
        errno(sb.mkdir_at(ROOT_INO, &long, DIR)),
        Errno::ENAMETOOLONG
    );
    assert_eq!(errno(sb.mkdir_at(ROOT_INO, "..", DIR)), Errno::EINVAL);
    assert_eq!(
        errno(sb.rename_at(ROOT_INO, "a", b.ino, "x", RenameMode::Replace)),
        Errno::EINVAL,
        "a directory into itself"
    );
    let names: Vec<String> = sb
        .readdir(b.ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["f"]);
    sb.unlink("a/b/f").unwrap();
    sb.rmdir_at(a.ino, "b").unwrap();
    assert_eq!(sb.stat(a.ino).unwrap().nlink, 2);
    sb.rmdir_at(ROOT_INO, "a").unwrap();
    assert_eq!(sb.counts().nr_files, 0);
}

#[test]
fn renames_replace_refuse_or_exchange() {
    let t = CgroupTree::default();
    let sb = ram(&t);
    let m = root_memcg(&t);
    sb.write(&m, "x", b"x").unwrap();
    sb.write(&m, "y", b"y").unwrap();
    let d = sb.mkdir_at(ROOT_INO, "d", DIR).unwrap();
    assert_eq!(
        errno(sb.rename_at(ROOT_INO, "x", ROOT_INO, "y", RenameMode::NoReplace)),
        Errno::EEXIST
    );
    sb.rename_at(ROOT_INO, "x", ROOT_INO, "y", RenameMode::Exchange)
        .unwrap();
    assert_eq!(sb.read(&m, "x").unwrap(), b"y");
    assert_eq!(sb.read(&m, "y").unwrap(), b"x");
    assert_eq!(
        errno(sb.rename_at(ROOT_INO, "x", ROOT_INO, "z", RenameMode::Exchange)),
        Errno::ENOENT
    );
    assert_eq!(
        errno(sb.rename_at(ROOT_INO, "x", ROOT_INO, "d", RenameMode::Replace)),
        Errno::EISDIR
    );
    assert_eq!(
        errno(sb.rename_at(ROOT_INO, "d", ROOT_INO, "x", RenameMode::Replace)),
        Errno::ENOTDIR
    );
    sb.rename_at(ROOT_INO, "x", d.ino, "moved", RenameMode::Replace)
        .unwrap();
    sb.rename_at(ROOT_INO, "y", d.ino, "moved", RenameMode::Replace)
        .unwrap();
    assert_eq!(sb.read(&m, "d/moved").unwrap(), b"x");
    assert_eq!(sb.counts().nr_files, 1, "the file renamed over is gone");
    assert_eq!(sb.counts().disk_pages, 0, "never written back");
}

#[test]
fn links_share_a_file_and_the_last_close_frees_it() {
    let t = CgroupTree::default();
    let sb = ram(&t);
    let m = root_memcg(&t);
    let f = sb.create_at(&m, ROOT_INO, "f", FILE, true).unwrap();
    f.write_at(&m, 0, &[7; 10000]).unwrap();
    assert_eq!(
        errno(sb.create_at(&m, ROOT_INO, "f", FILE, true)),
        Errno::EEXIST
    );
    let st = f.stat().unwrap();
    assert_eq!((st.uid, st.gid, st.perm, st.nlink), (1000, 100, 0o640, 1));
    sb.link_at(f.ino(), ROOT_INO, "g").unwrap();
    sb.symlink_at(ROOT_INO, "s", "g", FILE).unwrap();
    assert_eq!(sb.lookup_at(ROOT_INO, "s").unwrap().kind, FileKind::Symlink);
    assert_eq!(
        sb.readlink(sb.lookup_at(ROOT_INO, "s").unwrap().ino)
            .unwrap(),
        "g"
    );
    assert_eq!(f.stat().unwrap().nlink, 2);
    let d = sb.mkdir_at(ROOT_INO, "d", DIR).unwrap();
    assert_eq!(errno(sb.link_at(d.ino, ROOT_INO, "dl")), Errno::EPERM);
    sb.unlink("f").unwrap();
    sb.unlink("g").unwrap();
    assert_eq!(f.size_bytes(), 10000, "open: still there");
    let mut buf = vec![0; 10000];
    assert_eq!(f.read_at(&m, 0, &mut buf).unwrap(), 10000);
    assert!(buf.iter().all(|&b| b == 7));
    f.write_at(&m, 10000, b"more").unwrap();
    sb.sync().unwrap();
    assert!(sb.counts().disk_pages > 0);
    assert!(m.stat(MemcgStat::File) > 0);
    drop(f);
    assert_eq!(sb.counts().nr_files, 0);
    assert_eq!(sb.counts().disk_pages, 0, "the last close freed the disk");
    assert_eq!(m.stat(MemcgStat::File), 0, "and the page cache");
}

#[test]
fn hard_links_stop_at_max_links() {
    let t = CgroupTree::default();
    let sb = ram(&t);
    let m = root_memcg(&t);
    let f = sb.create_at(&m, ROOT_INO, "f", FILE, true).unwrap();
    for i in 1..MAX_LINKS {
        sb.link_at(f.ino(), ROOT_INO, &format!("l{i}")).unwrap();
    }
    assert_eq!(
        errno(sb.link_at(f.ino(), ROOT_INO, "one-more")),
        Errno::EMLINK
    );
}

#[test]
fn sizes_times_and_space() {
    let t = CgroupTree::default();
    let sb = ram(&t);
    let m = root_memcg(&t);
    let f = sb.create_at(&m, ROOT_INO, "f", FILE, false).unwrap();
    f.write_at(&m, 0, &[1; 8192]).unwrap();
    f.set_len(100).unwrap();
    f.set_len(5000).unwrap();
    let mut buf = vec![9; 5000];
    assert_eq!(f.read_at(&m, 0, &mut buf).unwrap(), 5000);
    assert!(buf[..100].iter().all(|&b| b == 1) && buf[100..].iter().all(|&b| b == 0));
    let epoch = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    let st = sb
        .setattr(
            f.ino(),
            SetAttr {
                perm: Some(0o600),
                mtime: Some(epoch),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!((st.perm, st.mtime), (0o600, epoch));
    let fs = sb.statfs();
    assert_eq!(fs.blocks, 1024);
    assert_eq!(fs.bfree, 1022, "5000 bytes take two blocks");
    // A write past the disk's size is ENOSPC and loses nothing written.
    let big = vec![3; (4 << 20) + 4096];
    assert_eq!(errno(f.write_at(&m, 0, &big)), Errno::ENOSPC);
    assert_eq!(f.size_bytes(), 5000);
    assert_eq!(f.read_at(&m, 0, &mut buf).unwrap(), 5000);
    assert!(buf[..100].iter().all(|&b| b == 1));
}

#[test]
fn a_host_directory_follows_every_change() {
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir(host.path().join("src")).unwrap();
    std::fs::write(host.path().join("src/main.c"), b"int main;").unwrap();
    std::os::unix::fs::symlink("src/main.c", host.path().join("link")).unwrap();
    let t = CgroupTree::default();
    let sb = common::mount_fs(&t, FsSource::Dir(host.path().to_path_buf()));
    let m = root_memcg(&t);
    assert_eq!(sb.read(&m, "src/main.c").unwrap(), b"int main;");
    let link = sb.lookup_at(ROOT_INO, "link").unwrap();
    assert_eq!(sb.readlink(link.ino).unwrap(), "src/main.c");
    let obj = sb.mkdir_at(ROOT_INO, "obj", DIR).unwrap();
    let f = sb.create_at(&m, obj.ino, "main.o", FILE, true).unwrap();
    f.write_at(&m, 0, b"object").unwrap();
    assert_eq!(
        std::fs::read(host.path().join("obj/main.o")).unwrap(),
        b"",
        "not yet written back"
    );
    sb.rename_at(obj.ino, "main.o", ROOT_INO, "a.out", RenameMode::Replace)
        .unwrap();
    sb.sync().unwrap();
    assert_eq!(std::fs::read(host.path().join("a.out")).unwrap(), b"object");
    drop(f);
    sb.unlink("a.out").unwrap();
    assert!(!host.path().join("a.out").exists());
    // The host directory going away: clean errors, no panic.
    std::fs::remove_dir_all(host.path().join("obj")).unwrap();
    assert_eq!(errno(sb.mkdir_at(obj.ino, "x", DIR)), Errno::ENOENT);
}
