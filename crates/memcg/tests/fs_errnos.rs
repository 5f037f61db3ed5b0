//! The library filesystem's refusals, with the kernel's errnos, where going
//! through FUSE would be too slow (`EMLINK` takes [`MAX_LINKS`] links) or
//! a regression wants the smallest reproducer; the rest is checked through
//! a real mount (`crates/memcg-cli/tests/fs_fuzz.rs`).

mod common;

use std::sync::Arc;

use memcg::errno::Errno;
use memcg::fs::{FsSource, MAX_LINKS, Owner, ROOT_INO, Superblock};
use memcg::memcontrol::{CgroupTree, MemCgroup};

fn ram(tree: &CgroupTree, size_bytes: u64) -> Arc<Superblock> {
    common::ram_fs(tree, size_bytes)
}

fn setup(size_bytes: u64) -> (CgroupTree, Arc<MemCgroup>, Arc<Superblock>) {
    let t = CgroupTree::default();
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let sb = ram(&t, size_bytes);
    (t, a, sb)
}

fn errno<T: std::fmt::Debug>(r: Result<T, memcg::fs::FsError>) -> Errno {
    r.unwrap_err().errno()
}

#[test]
fn link_past_max_links_is_emlink_and_so_is_mkdir() {
    let (_t, a, sb) = setup(64 << 20);
    let f = sb
        .create_at(&a, ROOT_INO, "f", Owner::root(0o644), true)
        .unwrap();
    let d = sb.mkdir_at(ROOT_INO, "d", Owner::root(0o755)).unwrap();
    for i in 1..MAX_LINKS {
        sb.link_at(f.ino(), d.ino, &i.to_string()).unwrap();
    }
    assert_eq!(sb.stat(f.ino()).unwrap().nlink, MAX_LINKS);
    assert_eq!(errno(sb.link_at(f.ino(), d.ino, "one-more")), Errno::EMLINK);
    // One name fewer, one link more.
    sb.unlink_at(d.ino, "1").unwrap();
    sb.link_at(f.ino(), d.ino, "one-more").unwrap();
    // A directory's nlink counts its subdirectories: 2 + MAX_LINKS - 2.
    for i in 0..MAX_LINKS - 2 {
        sb.mkdir_at(d.ino, &format!("s{i}"), Owner::root(0o755))
            .unwrap();
    }
    assert_eq!(sb.stat(d.ino).unwrap().nlink, MAX_LINKS);
    let mkdir = sb.mkdir_at(d.ino, "one-more-dir", Owner::root(0o755));
    assert_eq!(errno(mkdir), Errno::EMLINK);
}

#[test]
fn a_symlink_removed_frees_no_space_it_never_took() {
    // Regression: a symbolic link's size (its target's length) was taken
    // off the disk's used pages when its last name went, though it was
    // never added: `ln -s x l; rm l` underflowed (a panic in a debug
    // build, every later write `ENOSPC` in a release one).
    let (_t, a, sb) = setup(1 << 20);
    sb.symlink_at(ROOT_INO, "l", "x", Owner::root(0o777))
        .unwrap();
    sb.unlink_at(ROOT_INO, "l").unwrap();
    let f = sb
        .create_at(&a, ROOT_INO, "f", Owner::root(0o644), true)
        .unwrap();
    f.write_at(&a, 0, b"still room").unwrap();
    assert_eq!(sb.space_pages(), (Some(256), 1));
}

#[test]
fn a_full_disk_is_enospc_and_keeps_what_was_written() {
    let (_t, a, sb) = setup(64 << 10);
    let f = sb
        .create_at(&a, ROOT_INO, "f", Owner::root(0o644), true)
        .unwrap();
    let data: Vec<u8> = (0..60 << 10).map(|i| (i % 251) as u8).collect();
    f.write_at(&a, 0, &data).unwrap();
    assert_eq!(
        errno(f.write_at(&a, 60 << 10, &[1; 8 << 10])),
        Errno::ENOSPC
    );
    assert_eq!(errno(f.set_len(1 << 20)), Errno::ENOSPC);
    let g = sb
        .create_at(&a, ROOT_INO, "g", Owner::root(0o644), true)
        .unwrap();
    assert_eq!(errno(g.write_at(&a, 0, &[2; 8 << 10])), Errno::ENOSPC);
    assert_eq!(f.size_bytes(), 60 << 10);
    let mut back = vec![0; 60 << 10];
    assert_eq!(f.read_at(&a, 0, &mut back).unwrap(), 60 << 10);
    assert_eq!(back, data);
    // Room again once a file goes.
    drop(f);
    sb.unlink_at(ROOT_INO, "f").unwrap();
    g.write_at(&a, 0, &[2; 8 << 10]).unwrap();
}

#[test]
fn names_and_kinds_refused_with_the_kernels_errnos() {
    let (_t, a, sb) = setup(1 << 20);
    let long = "n".repeat(256);
    let root = Owner::root(0o755);
    assert_eq!(
        errno(sb.mkdir_at(ROOT_INO, &long, root)),
        Errno::ENAMETOOLONG
    );
    let create = sb.create_at(&a, ROOT_INO, &long, root, false);
    assert_eq!(errno(create), Errno::ENAMETOOLONG);
    sb.mkdir_at(ROOT_INO, &"n".repeat(255), root).unwrap();
    let d = sb.mkdir_at(ROOT_INO, "d", root).unwrap();
    let f = sb.create_at(&a, d.ino, "f", root, true).unwrap();
    assert_eq!(errno(sb.rmdir_at(ROOT_INO, "d")), Errno::ENOTEMPTY);
    assert_eq!(errno(sb.unlink_at(ROOT_INO, "d")), Errno::EISDIR);
    assert_eq!(errno(sb.rmdir_at(d.ino, "f")), Errno::ENOTDIR);
    assert_eq!(errno(sb.mkdir_at(d.ino, "f", root)), Errno::EEXIST);
    let excl = sb.create_at(&a, d.ino, "f", root, true);
    assert_eq!(errno(excl), Errno::EEXIST);
    assert_eq!(errno(sb.link_at(d.ino, ROOT_INO, "dl")), Errno::EPERM);
    assert_eq!(errno(sb.readlink(f.ino())), Errno::EINVAL);
}

#[test]
fn exchange_of_a_hard_linked_file_with_a_directory_holding_its_other_name() {
    // Regression (fs_fuzz seed 16): the check that a directory does not
    // move into itself looked at the file's first name, inside the
    // directory, not at where it was renamed from: `EINVAL`, where tmpfs
    // exchanges them.
    let (_t, a, sb) = setup(1 << 20);
    let root = Owner::root(0o755);
    let d = sb.mkdir_at(ROOT_INO, "d", root).unwrap();
    let p = sb.mkdir_at(ROOT_INO, "p", root).unwrap();
    let f = sb.create_at(&a, d.ino, "a", root, true).unwrap();
    sb.link_at(f.ino(), p.ino, "f").unwrap();
    sb.rename_at(p.ino, "f", ROOT_INO, "d", memcg::fs::RenameMode::Exchange)
        .unwrap();
    assert_eq!(sb.lookup_at(ROOT_INO, "d").unwrap().ino, f.ino());
    assert_eq!(sb.lookup_at(p.ino, "f").unwrap().ino, d.ino);
    assert_eq!(sb.lookup_at(d.ino, "a").unwrap().ino, f.ino());
    assert_eq!(sb.stat(p.ino).unwrap().nlink, 3, "p holds directory d now");
    // Still refused: a directory exchanged with a name inside it.
    let inner = sb.mkdir_at(d.ino, "inner", root).unwrap();
    let into = sb.rename_at(d.ino, "inner", p.ino, "f", memcg::fs::RenameMode::Exchange);
    assert_eq!(errno(into), Errno::EINVAL);
    assert_eq!(sb.lookup_at(d.ino, "inner").unwrap().ino, inner.ino);
}

#[test]
fn renames_and_links_in_a_host_directory_stay_in_it() {
    // Regression (fs_fuzz, host directory): a rename's target and a link's
    // source were host paths relative to the server's working directory,
    // not to the host directory: `mv d/x d/y` was ENOENT, and `mv a b` at
    // the top moved the file out of the host directory into the cwd.
    let tmp = tempfile::tempdir().unwrap();
    let host = tmp.path().to_path_buf();
    std::fs::create_dir_all(host.join("d")).unwrap();
    std::fs::write(host.join("a"), "a").unwrap();
    std::fs::write(host.join("d/x"), "x").unwrap();
    std::fs::write(host.join("d/y"), "y").unwrap();
    let t = CgroupTree::default();
    let sb = common::mount_fs(&t, FsSource::Dir(host.clone()));
    let d = sb.lookup_at(ROOT_INO, "d").unwrap().ino;
    let replace = memcg::fs::RenameMode::Replace;
    sb.rename_at(d, "x", d, "y", replace).unwrap();
    sb.rename_at(ROOT_INO, "a", ROOT_INO, "b", replace).unwrap();
    let b = sb.lookup_at(ROOT_INO, "b").unwrap().ino;
    sb.link_at(b, d, "b2").unwrap();
    let read = |p: &str| std::fs::read_to_string(host.join(p)).ok();
    assert_eq!(read("d/y").as_deref(), Some("x"));
    assert_eq!(read("d/x"), None);
    assert_eq!(read("b").as_deref(), Some("a"));
    assert_eq!(read("d/b2").as_deref(), Some("a"));
    assert_eq!(read("a"), None);
    sb.unmount().unwrap();
}
