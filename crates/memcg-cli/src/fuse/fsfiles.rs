//! The `--fs` filesystems over FUSE: whole trees (directories, regular
//! files, hard and symbolic links) served from the library's superblocks
//! (`memcg::fs`), every page read or written charged as page cache to the
//! memory cgroup of the process making the request.
//!
//! A node inside a `--fs` filesystem has a FUSE inode number made from its
//! mount's device minor and its own inode number ([`fs_fuse_ino`], bit 62
//! set: the path table's numbers never reach it, its hashed listing
//! numbers have bit 63), so renames and hard links keep their identity as
//! on a real filesystem; the mount point itself keeps its number from the
//! path table and stands for the filesystem's root directory.
//!
//! Regular files are opened `FOPEN_DIRECT_IO` (every read and write
//! reaches the simulator) with `FUSE_DIRECT_IO_ALLOW_MMAP`, so they can
//! be mapped (MAP_PRIVATE and MAP_SHARED) and executed: the host kernel
//! then fills the mapping's pages with reads through the simulator
//! (charged to the faulting process's cgroup as page cache, once) and
//! keeps its own copy of them, which the simulator does not see or
//! reclaim; a shared mapping's writes come back as writes when the host
//! writes them back. Extended attributes are not supported (`EOPNOTSUPP`,
//! as a filesystem built without them). The kernel checks permissions
//! (`default_permissions`) against the owners and modes kept here.
//!
//! Locking: none of its own: each call goes to the superblock, whose
//! namespace lock makes every name change atomic.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{FileAttr, FileType, INodeNo, RenameFlags, Request, TimeOrNow};
use memcg::Errno;
use memcg::fs::{
    DirEntry, Fallocate, FileKind, Owner, ROOT_INO, RenameMode, SetAttr, Stat, Superblock,
};

use super::fs::{Handle, SimFs};
use super::tree::{self, Node};

/// Bit 62: a FUSE inode number of a node inside a `--fs` filesystem.
const FS_TAG: u64 = 1 << 62;
/// Bits of the node's own inode number in [`fs_fuse_ino`].
const FS_INO_BITS: u32 = 40;

/// The FUSE inode number of node `ino` of the filesystem with device
/// minor `minor` (not its root: the mount point's own number).
fn fs_fuse_ino(minor: u32, ino: u64) -> u64 {
    FS_TAG | (u64::from(minor) << FS_INO_BITS) | ino
}

/// The (minor, inode) of a FUSE inode number inside a `--fs`.
pub(super) fn decode(fuse_ino: u64) -> Option<(u32, u64)> {
    if fuse_ino & (1 << 63) != 0 || fuse_ino & FS_TAG == 0 {
        return None;
    }
    let minor = ((fuse_ino & !FS_TAG) >> FS_INO_BITS) as u32;
    Some((minor, fuse_ino & ((1 << FS_INO_BITS) - 1)))
}

/// How long the kernel may cache a node's entry and attributes: a
/// regular file's size changes under the kernel's feet (a workload of the
/// simulator writing it), so not at all; directories and links a second.
pub(super) fn fs_ttl(kind: FileKind) -> Duration {
    match kind {
        FileKind::Regular => Duration::ZERO,
        _ => Duration::from_secs(1),
    }
}

/// A node of a `--fs` filesystem as a request names it.
#[derive(Clone)]
pub(super) struct FsNode {
    pub(super) sb: Arc<Superblock>,
    pub(super) minor: u32,
    pub(super) ino: u64,
    /// The mount point (for the root's FUSE number and its parent).
    pub(super) mount_dir: String,
}

fn fs_errno(e: memcg::fs::FsError) -> Errno {
    e.errno()
}

/// A name as the library takes it (names that are not UTF-8: `EINVAL`).
fn name_str(name: &OsStr) -> Result<&str, Errno> {
    name.to_str().ok_or(Errno::EINVAL)
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Regular => FileType::RegularFile,
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
    }
}

fn time_of(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl SimFs {
    /// The `--fs` node a FUSE inode is, if it is one (the mount point is
    /// the root directory).
    pub(super) fn fs_node(&self, ino: INodeNo) -> Option<FsNode> {
        let machine = self.sim().machine();
        if let Some((minor, fs_ino)) = decode(ino.0) {
            let sb = machine.bdi(&format!("0:{minor}"))?;
            let mount_dir = machine
                .bdi_names()
                .into_iter()
                .find(|(_, name)| *name == format!("0:{minor}"))?
                .0;
            return Some(FsNode {
                sb,
                minor,
                ino: fs_ino,
                mount_dir,
            });
        }
        let path = self.inodes_ref().path(ino.0)?;
        let Some(Node::Mount(dir)) = tree::classify(self.sim(), &path) else {
            return None;
        };
        let minor = machine
            .bdi_names()
            .into_iter()
            .find(|(d, _)| *d == dir)?
            .1
            .strip_prefix("0:")?
            .parse()
            .ok()?;
        Some(FsNode {
            sb: machine.resolve_file(&dir)?.0,
            minor,
            ino: ROOT_INO,
            mount_dir: dir,
        })
    }

    /// The FUSE inode number of node `ino` of `at`'s filesystem.
    fn fuse_ino_of(&self, at: &FsNode, ino: u64) -> u64 {
        if ino == ROOT_INO {
            self.inodes_ref().peek(&at.mount_dir)
        } else {
            fs_fuse_ino(at.minor, ino)
        }
    }

    /// The FUSE attributes of `stat`.
    pub(super) fn fs_attr(&self, at: &FsNode, stat: &Stat) -> FileAttr {
        FileAttr {
            ino: INodeNo(self.fuse_ino_of(at, stat.ino)),
            size: stat.size_bytes,
            blocks: stat.size_bytes.div_ceil(4096) * 8,
            atime: stat.atime,
            mtime: stat.mtime,
            ctime: stat.ctime,
            crtime: stat.ctime,
            kind: file_type(stat.kind),
            perm: stat.perm as u16,
            nlink: stat.nlink,
            uid: stat.uid,
            gid: stat.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// `lookup` of `name` in directory `dir`: its TTL and attributes.
    pub(super) fn fs_lookup(
        &self,
        dir: &FsNode,
        name: &OsStr,
    ) -> Result<(Duration, FileAttr), Errno> {
        let stat = dir
            .sb
            .lookup_at(dir.ino, name_str(name)?)
            .map_err(fs_errno)?;
        Ok((fs_ttl(stat.kind), self.fs_attr(dir, &stat)))
    }

    pub(super) fn fs_getattr(&self, at: &FsNode) -> Result<(Duration, FileAttr), Errno> {
        let stat = at.sb.stat(at.ino).map_err(fs_errno)?;
        Ok((fs_ttl(stat.kind), self.fs_attr(at, &stat)))
    }

    /// `setattr`: a size through the open file `fh` names (or one opened
    /// for it), then owner, mode and times.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fs_setattr(
        &self,
        req: &Request,
        at: &FsNode,
        handle: Option<Arc<std::sync::Mutex<Handle>>>,
        size: Option<u64>,
        attr: SetAttr,
    ) -> Result<FileAttr, Errno> {
        if let Some(size) = size {
            let memcg = self.host_ref().memcg_of_request(req.pid());
            match handle {
                Some(handle) => match &*super::fs::lock(&handle) {
                    Handle::File(file) => file.set_len(size).map_err(fs_errno)?,
                    _ => return Err(Errno::EBADF),
                },
                None => {
                    let file = at.sb.open_ino(&memcg, at.ino).map_err(fs_errno)?;
                    file.set_len(size).map_err(fs_errno)?;
                }
            }
        }
        let stat = if attr == SetAttr::default() {
            at.sb.stat(at.ino)
        } else {
            at.sb.setattr(at.ino, attr)
        }
        .map_err(fs_errno)?;
        Ok(self.fs_attr(at, &stat))
    }

    /// The owner of a node `req` makes with `mode`, less `umask`.
    fn owner(req: &Request, mode: u32, umask: u32) -> Owner {
        Owner {
            uid: req.uid(),
            gid: req.gid(),
            perm: mode & !umask & 0o7777,
        }
    }

    pub(super) fn fs_mkdir(
        &self,
        req: &Request,
        dir: &FsNode,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<FileAttr, Errno> {
        let owner = Self::owner(req, mode, umask);
        let stat = dir
            .sb
            .mkdir_at(dir.ino, name_str(name)?, owner)
            .map_err(fs_errno)?;
        Ok(self.fs_attr(dir, &stat))
    }

    pub(super) fn fs_symlink(
        &self,
        req: &Request,
        dir: &FsNode,
        name: &OsStr,
        target: &std::path::Path,
    ) -> Result<FileAttr, Errno> {
        let target = target.to_str().ok_or(Errno::EINVAL)?;
        let owner = Self::owner(req, 0o777, 0);
        let stat = dir
            .sb
            .symlink_at(dir.ino, name_str(name)?, target, owner)
            .map_err(fs_errno)?;
        Ok(self.fs_attr(dir, &stat))
    }

    pub(super) fn fs_readlink(&self, at: &FsNode) -> Result<String, Errno> {
        at.sb.readlink(at.ino).map_err(fs_errno)
    }

    pub(super) fn fs_link(
        &self,
        at: &FsNode,
        dir: &FsNode,
        name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        if at.minor != dir.minor {
            return Err(Errno::EXDEV);
        }
        let stat = dir
            .sb
            .link_at(at.ino, dir.ino, name_str(name)?)
            .map_err(fs_errno)?;
        Ok(self.fs_attr(dir, &stat))
    }

    pub(super) fn fs_unlink(&self, dir: &FsNode, name: &OsStr) -> Result<(), Errno> {
        dir.sb.unlink_at(dir.ino, name_str(name)?).map_err(fs_errno)
    }

    pub(super) fn fs_rmdir(&self, dir: &FsNode, name: &OsStr) -> Result<(), Errno> {
        dir.sb.rmdir_at(dir.ino, name_str(name)?).map_err(fs_errno)
    }

    /// `rename` within one filesystem (`EXDEV` across two: `mv` copies);
    /// `RENAME_WHITEOUT` is overlayfs's and not supported.
    pub(super) fn fs_rename(
        &self,
        dir: &FsNode,
        name: &OsStr,
        new_dir: &FsNode,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if dir.minor != new_dir.minor {
            return Err(Errno::EXDEV);
        }
        let mode = if flags.is_empty() {
            RenameMode::Replace
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            RenameMode::NoReplace
        } else if flags == RenameFlags::RENAME_EXCHANGE {
            RenameMode::Exchange
        } else {
            return Err(Errno::EINVAL);
        };
        dir.sb
            .rename_at(
                dir.ino,
                name_str(name)?,
                new_dir.ino,
                name_str(new_name)?,
                mode,
            )
            .map_err(fs_errno)
    }

    /// `open` of a regular file (`O_TRUNC` cuts it).
    pub(super) fn fs_open(&self, req: &Request, at: &FsNode, flags: i32) -> Result<Handle, Errno> {
        let memcg = self.host_ref().memcg_of_request(req.pid());
        let file = at.sb.open_ino(&memcg, at.ino).map_err(fs_errno)?;
        if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
            file.set_len(0).map_err(fs_errno)?;
        }
        Ok(Handle::File(file))
    }

    /// `create`: opens `name` in `dir`, made if missing (`O_EXCL`: must
    /// be).
    pub(super) fn fs_create(
        &self,
        req: &Request,
        dir: &FsNode,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<(FileAttr, Handle), Errno> {
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let memcg = self.host_ref().memcg_of_request(req.pid());
        let owner = Self::owner(req, mode, umask);
        let exclusive = flags & libc::O_EXCL != 0;
        let file = dir
            .sb
            .create_at(&memcg, dir.ino, name_str(name)?, owner, exclusive)
            .map_err(fs_errno)?;
        if flags & libc::O_TRUNC != 0 {
            file.set_len(0).map_err(fs_errno)?;
        }
        let stat = file.stat().map_err(fs_errno)?;
        Ok((self.fs_attr(dir, &stat), Handle::File(file)))
    }

    /// `fallocate(2)` modes: 0, `KEEP_SIZE`, `PUNCH_HOLE | KEEP_SIZE`;
    /// the rest `EOPNOTSUPP`.
    pub(super) fn fs_fallocate(
        &self,
        req: &Request,
        handle: &Handle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let Handle::File(file) = handle else {
            return Err(Errno::EBADF);
        };
        let mode = match mode {
            0 => Fallocate::Allocate,
            libc::FALLOC_FL_KEEP_SIZE => Fallocate::KeepSize,
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                Fallocate::PunchHole
            }
            _ => return Err(Errno::EOPNOTSUPP),
        };
        if length == 0 {
            return Err(Errno::EINVAL);
        }
        let memcg = self.host_ref().memcg_of_request(req.pid());
        file.fallocate(&memcg, mode, offset, length)
            .map_err(fs_errno)
    }

    /// `opendir`: the listing, and the directory held until
    /// `releasedir` (removed meanwhile, it still answers, empty).
    pub(super) fn fs_opendir(&self, at: &FsNode) -> Result<Vec<(u64, FileType, String)>, Errno> {
        let entries = self.fs_list(at)?;
        at.sb.opendir(at.ino).map_err(fs_errno)?;
        Ok(entries)
    }

    /// The entries of directory `at`, `.` and `..` first.
    pub(super) fn fs_list(&self, at: &FsNode) -> Result<Vec<(u64, FileType, String)>, Errno> {
        let entries: Vec<DirEntry> = at.sb.readdir(at.ino).map_err(fs_errno)?;
        let me = self.fuse_ino_of(at, at.ino);
        let parent = if at.ino == ROOT_INO {
            let up = match at.mount_dir.rsplit_once('/') {
                Some(("", _)) | None => "/".to_owned(),
                Some((dir, _)) => dir.to_owned(),
            };
            self.inodes_ref().peek(&up)
        } else {
            let p = at.sb.parent_of(at.ino).map_err(fs_errno)?;
            self.fuse_ino_of(at, p)
        };
        let mut out = vec![
            (me, FileType::Directory, ".".to_owned()),
            (parent, FileType::Directory, "..".to_owned()),
        ];
        out.extend(
            entries
                .into_iter()
                .map(|e| (self.fuse_ino_of(at, e.ino), file_type(e.kind), e.name)),
        );
        Ok(out)
    }

    /// `statfs` of a `--fs`: its disk's blocks and inodes.
    pub(super) fn fs_statfs(&self, at: &FsNode) -> memcg::fs::StatFs {
        at.sb.statfs()
    }

    /// `fsync`/`fdatasync`: that file's dirty pages only, as the kernel's.
    pub(super) fn fs_fsync(&self, at: &FsNode) -> Result<(), Errno> {
        at.sb.fsync_ino(at.ino).map(drop).map_err(fs_errno)
    }
}

/// The settable attributes of a FUSE `setattr`.
pub(super) fn set_attr(
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
) -> SetAttr {
    SetAttr {
        perm: mode.map(|m| m & 0o7777),
        uid,
        gid,
        atime: atime.map(time_of),
        mtime: mtime.map(time_of),
    }
}
