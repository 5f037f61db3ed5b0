//! The namespace of a superblock: directories, names, hard and symbolic
//! links, owners, modes and times (fs/namei.c's operations as a
//! filesystem such as tmpfs carries them out, mm/shmem.c's directory
//! operations, fs/libfs.c's `simple_rename`).
//!
//! # What it does
//!
//! Every object of the filesystem is a node of [`Namespace::nodes`], by
//! inode number: a regular file (its bytes on the disk, read and written
//! through its page cache), a directory (its entries, name to inode
//! number) or a symbolic link (its target). [`ROOT_INO`] is the root
//! directory. The operations here change names only; the page cache and
//! the dentry and inode caches are the other files' business, told when a
//! name goes ([`Superblock::drop_name`]) or moves.
//!
//! On a host directory every change of a name, owner, mode or time is
//! made on the host at once, before it is made here (so a refusal by the
//! host changes nothing): only file contents wait for writeback.
//!
//! # Invariants
//!
//! - Each entry of a directory names a node; a node's `names` are exactly
//!   the entries naming it; a regular file's or symlink's `nlink` is the
//!   number of its names; a directory has one name (the root none) and
//!   `nlink` 2 + its subdirectories, or, removed while open, no name and
//!   `nlink` 0 until its last close.
//! - A node without names stays while a file is open on it
//!   (`nr_open`); its last close removes it and its bytes.
//! - `used_pages` is the sum over regular files of their sizes in pages.
//!
//! # Locking
//!
//! Everything here runs under the superblock's namespace lock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use super::{FsError, Namespace, Superblock};
use crate::errno::Errno;
use crate::mm_types::PAGE_SIZE;
use crate::sync::lock;

/// The inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// The most names a file, or subdirectories a directory, may have
/// (`s_max_links`, as ext4's `EXT4_LINK_MAX`): one more is `EMLINK`.
pub const MAX_LINKS: u32 = 65_000;
/// Nodes a filesystem may hold (each costs host memory the simulated
/// machine does not account): one more is `ENOSPC`.
pub const MAX_NODES: usize = 1 << 20;
/// Bytes a symbolic link's target may take (`PATH_MAX`).
pub const SYMLINK_MAX: usize = 4095;
/// Bytes a directory's size grows by per entry (tmpfs's
/// `BOGO_DIRENT_SIZE`).
const BOGO_DIRENT_BYTES: u64 = 20;

/// A key of the dentry cache: a name in a directory.
pub(super) type DKey = (u64, String);

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
}

/// A node's attributes (`struct kstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its inode number.
    pub ino: u64,
    /// What it is.
    pub kind: FileKind,
    /// Its size: a file's bytes, a link's target length, a directory's
    /// entries times 20 (as tmpfs counts).
    pub size_bytes: u64,
    /// Its hard links.
    pub nlink: u32,
    /// Permission bits, with set-id and sticky bits (`mode & 07777`).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime: SystemTime,
    /// Last change of contents.
    pub mtime: SystemTime,
    /// Last change of the node.
    pub ctime: SystemTime,
}

/// Who makes a node, and with what permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Permission bits (the umask already applied).
    pub perm: u32,
}

impl Owner {
    /// Root's, with `perm`.
    pub fn root(perm: u32) -> Self {
        Self {
            uid: 0,
            gid: 0,
            perm,
        }
    }
}

/// What `setattr` changes (a size change goes through an open file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New access time.
    pub atime: Option<SystemTime>,
    /// New modification time.
    pub mtime: Option<SystemTime>,
}

/// How a rename treats an existing target (`renameat2` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameMode {
    /// Replaces it (no flags).
    Replace,
    /// Refuses it: `EEXIST` (`RENAME_NOREPLACE`).
    NoReplace,
    /// Swaps the two names, both of which must exist (`RENAME_EXCHANGE`).
    Exchange,
}

/// An entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name.
    pub name: String,
    /// The node it names.
    pub ino: u64,
    /// What that is.
    pub kind: FileKind,
}

/// A filesystem's space (`statfs`), in 4 KiB blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Blocks in all.
    pub blocks: u64,
    /// Blocks free.
    pub bfree: u64,
    /// Nodes in all.
    pub files: u64,
    /// Nodes free.
    pub ffree: u64,
}

/// What a node holds.
#[derive(Debug, Clone)]
pub(super) enum Body {
    File,
    Dir { entries: BTreeMap<String, u64> },
    Symlink { target: String },
}

/// A node as the disk records it (the on-disk inode).
#[derive(Debug, Clone)]
pub(super) struct Meta {
    pub(super) body: Body,
    /// A regular file's size.
    pub(super) size_bytes: u64,
    pub(super) nlink: u32,
    pub(super) perm: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) atime: SystemTime,
    pub(super) mtime: SystemTime,
    pub(super) ctime: SystemTime,
    /// Where it is named: (directory, name).
    pub(super) names: Vec<DKey>,
    /// Files open on it.
    pub(super) nr_open: u32,
}

impl Meta {
    pub(super) fn new(body: Body, owner: Owner) -> Self {
        let now = SystemTime::now();
        let nlink = if matches!(body, Body::Dir { .. }) {
            2
        } else {
            1
        };
        Self {
            size_bytes: match &body {
                Body::Symlink { target } => target.len() as u64,
                _ => 0,
            },
            body,
            nlink,
            perm: owner.perm & 0o7777,
            uid: owner.uid,
            gid: owner.gid,
            atime: now,
            mtime: now,
            ctime: now,
            names: Vec::new(),
            nr_open: 0,
        }
    }

    pub(super) fn kind(&self) -> FileKind {
        match self.body {
            Body::File => FileKind::Regular,
            Body::Dir { .. } => FileKind::Directory,
            Body::Symlink { .. } => FileKind::Symlink,
        }
    }

    fn is_dir(&self) -> bool {
        matches!(self.body, Body::Dir { .. })
    }

    fn entries(&self) -> Option<&BTreeMap<String, u64>> {
        match &self.body {
            Body::Dir { entries } => Some(entries),
            _ => None,
        }
    }

    fn stat(&self, ino: u64) -> Stat {
        let size_bytes = match &self.body {
            Body::Dir { entries } => (entries.len() as u64 + 2) * BOGO_DIRENT_BYTES,
            _ => self.size_bytes,
        };
        Stat {
            ino,
            kind: self.kind(),
            size_bytes,
            nlink: self.nlink,
            perm: self.perm,
            uid: self.uid,
            gid: self.gid,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }
}

/// Pages a file of `bytes` takes.
pub(super) fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE)
}

/// A name a directory may hold: `ENAMETOOLONG` past `NAME_MAX`, `EINVAL`
/// for an empty name, `.`, `..`, or one with `/` or NUL.
pub(super) fn check_name(name: &str) -> Result<(), FsError> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\0')
        || name.len() > super::NAME_MAX
    {
        return Err(FsError::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

impl Namespace {
    pub(super) fn node(&self, ino: u64) -> Result<&Meta, FsError> {
        self.nodes.get(&ino).ok_or(FsError::Stale { ino })
    }

    pub(super) fn node_mut(&mut self, ino: u64) -> Result<&mut Meta, FsError> {
        self.nodes.get_mut(&ino).ok_or(FsError::Stale { ino })
    }

    /// The entries of directory `ino` (`ENOTDIR` if it is none).
    fn dir(&self, ino: u64) -> Result<&BTreeMap<String, u64>, FsError> {
        self.node(ino)?.entries().ok_or(FsError::NotDir {
            name: format!("#{ino}"),
        })
    }

    fn dir_mut(&mut self, ino: u64) -> Result<&mut BTreeMap<String, u64>, FsError> {
        match &mut self.node_mut(ino)?.body {
            Body::Dir { entries } => Ok(entries),
            _ => Err(FsError::NotDir {
                name: format!("#{ino}"),
            }),
        }
    }

    /// `ENOENT` if directory `ino` was removed (open still: nothing can
    /// be made or moved in it).
    fn check_live_dir(&self, ino: u64, name: &str) -> Result<(), FsError> {
        if self.dir(ino).is_ok() && self.node(ino)?.nlink == 0 {
            return Err(FsError::NotFound {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// A directory lost its name: it goes, unless open (then with its
    /// last close, [`Superblock::releasedir`]).
    fn drop_dir(&mut self, ino: u64) {
        match self.nodes.get_mut(&ino) {
            Some(meta) if meta.nr_open > 0 => meta.nlink = 0,
            _ => {
                self.nodes.remove(&ino);
            }
        }
    }

    /// The node `name` names in directory `parent`.
    pub(super) fn child(&self, parent: u64, name: &str) -> Result<u64, FsError> {
        check_name(name)?;
        self.dir(parent)?
            .get(name)
            .copied()
            .ok_or_else(|| FsError::NotFound {
                name: name.to_owned(),
            })
    }

    /// The directory and last name of `path` (`a/b/c`: the node of `a/b`,
    /// and `c`), from the root, following no symbolic link.
    pub(super) fn resolve_parent(&self, path: &str) -> Result<(u64, String), FsError> {
        let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let last = parts.pop().ok_or_else(|| FsError::InvalidName {
            name: path.to_owned(),
        })?;
        let mut dir = ROOT_INO;
        for part in parts {
            dir = self.child(dir, part)?;
            if !self.node(dir)?.is_dir() {
                return Err(FsError::NotDir {
                    name: part.to_owned(),
                });
            }
        }
        Ok((dir, last.to_owned()))
    }

    /// The node of `path` from the root.
    pub(super) fn resolve(&self, path: &str) -> Result<u64, FsError> {
        let (dir, name) = self.resolve_parent(path)?;
        self.child(dir, &name)
    }

    /// The path of node `ino` from the root (its first name's).
    pub(super) fn path_of(&self, ino: u64) -> Option<PathBuf> {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT_INO {
            let (parent, name) = self.nodes.get(&at)?.names.first()?;
            parts.push(name.as_str());
            at = *parent;
            if parts.len() > MAX_NODES {
                return None;
            }
        }
        Some(parts.iter().rev().collect())
    }

    /// Adds a new node named `name` in `parent`.
    fn insert(&mut self, parent: u64, name: &str, mut meta: Meta) -> Result<u64, FsError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(FsError::NoNodes { max: MAX_NODES });
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let is_dir = meta.is_dir();
        meta.names.push((parent, name.to_owned()));
        self.nodes.insert(ino, meta);
        self.dir_mut(parent)?.insert(name.to_owned(), ino);
        let now = SystemTime::now();
        let dir = self.node_mut(parent)?;
        dir.mtime = now;
        dir.ctime = now;
        if is_dir {
            dir.nlink += 1;
        }
        Ok(ino)
    }

    /// Takes entry `name` out of `parent` (the node's link count and names
    /// follow); returns the node, removed from the table if it has no
    /// name left and no open file.
    fn remove_entry(&mut self, parent: u64, name: &str) -> Result<u64, FsError> {
        let ino = self
            .dir_mut(parent)?
            .remove(name)
            .ok_or_else(|| FsError::NotFound {
                name: name.to_owned(),
            })?;
        let now = SystemTime::now();
        let meta = self.node_mut(ino)?;
        let is_dir = meta.is_dir();
        meta.names.retain(|(p, n)| !(*p == parent && n == name));
        if !is_dir {
            meta.nlink -= 1;
        }
        meta.ctime = now;
        let dir = self.node_mut(parent)?;
        dir.mtime = now;
        dir.ctime = now;
        if is_dir {
            dir.nlink -= 1;
        }
        Ok(ino)
    }

    /// [`Namespace::insert`] of a node read from a host directory: the
    /// directory's times stay the host's.
    pub(super) fn insert_scanned(
        &mut self,
        parent: u64,
        name: &str,
        meta: Meta,
    ) -> Result<u64, FsError> {
        let dir = self.node(parent)?;
        let (mtime, ctime) = (dir.mtime, dir.ctime);
        let ino = self.insert(parent, name, meta)?;
        let dir = self.node_mut(parent)?;
        (dir.mtime, dir.ctime) = (mtime, ctime);
        Ok(ino)
    }

    /// Adds entry `name` in `parent` for existing node `ino`.
    pub(super) fn add_entry(&mut self, parent: u64, name: &str, ino: u64) -> Result<(), FsError> {
        self.dir_mut(parent)?.insert(name.to_owned(), ino);
        let now = SystemTime::now();
        let meta = self.node_mut(ino)?;
        let is_dir = meta.is_dir();
        meta.names.push((parent, name.to_owned()));
        if !is_dir {
            meta.nlink += 1;
        }
        meta.ctime = now;
        let dir = self.node_mut(parent)?;
        dir.mtime = now;
        dir.ctime = now;
        if is_dir {
            dir.nlink += 1;
        }
        Ok(())
    }

    /// Whether `ino` is `dir` or inside it.
    fn is_within(&self, mut ino: u64, dir: u64) -> bool {
        for _ in 0..=MAX_NODES {
            if ino == dir {
                return true;
            }
            match self.nodes.get(&ino).and_then(|m| m.names.first()) {
                Some((parent, _)) if ino != ROOT_INO => ino = *parent,
                _ => return false,
            }
        }
        false
    }
}

impl Superblock {
    /// The attributes of node `ino` (`getattr`).
    pub fn stat(&self, ino: u64) -> Result<Stat, FsError> {
        Ok(lock(&self.ns).node(ino)?.stat(ino))
    }

    /// The attributes of `name` in directory `parent` (`lookup`).
    pub fn lookup_at(&self, parent: u64, name: &str) -> Result<Stat, FsError> {
        let ns = lock(&self.ns);
        let ino = ns.child(parent, name)?;
        Ok(ns.node(ino)?.stat(ino))
    }

    /// The attributes of `path` from the root.
    pub fn stat_path(&self, path: &str) -> Result<Stat, FsError> {
        let ns = lock(&self.ns);
        let ino = ns.resolve(path)?;
        Ok(ns.node(ino)?.stat(ino))
    }

    /// The entries of directory `ino`, by name (`readdir`, without `.`
    /// and `..`).
    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, FsError> {
        let ns = lock(&self.ns);
        let entries = ns.dir(ino)?;
        Ok(entries
            .iter()
            .map(|(name, &child)| DirEntry {
                name: name.clone(),
                ino: child,
                kind: ns.nodes.get(&child).map_or(FileKind::Regular, Meta::kind),
            })
            .collect())
    }

    /// The parent directory of directory `ino` (the root's is itself).
    pub fn parent_of(&self, ino: u64) -> Result<u64, FsError> {
        let ns = lock(&self.ns);
        Ok(ns.node(ino)?.names.first().map_or(ROOT_INO, |(p, _)| *p))
    }

    /// Makes directory `name` in `parent` (`mkdir`).
    pub fn mkdir_at(&self, parent: u64, name: &str, owner: Owner) -> Result<Stat, FsError> {
        let mut ns = lock(&self.ns);
        self.check_new(&ns, parent, name)?;
        if ns.node(parent)?.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks {
                name: name.to_owned(),
            });
        }
        self.disk
            .host_op(&ns, parent, Some(name), |path| host::mkdir(path, owner))?;
        let meta = Meta::new(
            Body::Dir {
                entries: BTreeMap::new(),
            },
            owner,
        );
        let ino = ns.insert(parent, name, meta)?;
        Ok(ns.node(ino)?.stat(ino))
    }

    /// Makes symbolic link `name` in `parent` to `target` (`symlink`).
    pub fn symlink_at(
        &self,
        parent: u64,
        name: &str,
        target: &str,
        owner: Owner,
    ) -> Result<Stat, FsError> {
        if target.is_empty() || target.len() > SYMLINK_MAX || target.contains('\0') {
            return Err(FsError::InvalidName {
                name: target.to_owned(),
            });
        }
        let mut ns = lock(&self.ns);
        self.check_new(&ns, parent, name)?;
        self.disk
            .host_op(&ns, parent, Some(name), |path| host::symlink(target, path))?;
        let body = Body::Symlink {
            target: target.to_owned(),
        };
        let ino = ns.insert(
            parent,
            name,
            Meta::new(
                body,
                Owner {
                    perm: 0o777,
                    ..owner
                },
            ),
        )?;
        Ok(ns.node(ino)?.stat(ino))
    }

    /// The target of symbolic link `ino` (`readlink`; `EINVAL` for
    /// anything else).
    pub fn readlink(&self, ino: u64) -> Result<String, FsError> {
        match &lock(&self.ns).node(ino)?.body {
            Body::Symlink { target } => Ok(target.clone()),
            _ => Err(FsError::NotSymlink { ino }),
        }
    }

    /// Makes a regular file `name` in `parent` (the first half of
    /// `O_CREAT`); an existing name is `EEXIST`.
    pub(super) fn mknod_locked(
        &self,
        ns: &mut Namespace,
        parent: u64,
        name: &str,
        owner: Owner,
    ) -> Result<u64, FsError> {
        self.check_new(ns, parent, name)?;
        self.disk
            .host_op(ns, parent, Some(name), |path| host::create(path, owner))?;
        ns.insert(parent, name, Meta::new(Body::File, owner))
    }

    /// `EEXIST` if `parent` holds `name`; `ENOTDIR` if it is no directory.
    fn check_new(&self, ns: &Namespace, parent: u64, name: &str) -> Result<(), FsError> {
        check_name(name)?;
        ns.check_live_dir(parent, name)?;
        if ns.dir(parent)?.contains_key(name) {
            return Err(FsError::Exists {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Links node `ino` as `name` in `parent` (`link`): `EPERM` for a
    /// directory, `EMLINK` past [`MAX_LINKS`].
    pub fn link_at(&self, ino: u64, parent: u64, name: &str) -> Result<Stat, FsError> {
        let mut ns = lock(&self.ns);
        self.check_new(&ns, parent, name)?;
        let meta = ns.node(ino)?;
        if meta.is_dir() {
            return Err(FsError::LinkDir { ino });
        }
        if meta.nlink == 0 {
            return Err(FsError::NotFound {
                name: name.to_owned(),
            });
        }
        if meta.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks {
                name: name.to_owned(),
            });
        }
        let from = ns.path_of(ino).map(|p| self.disk.host_path(&p));
        self.disk.host_op(&ns, parent, Some(name), |path| {
            host::link(from.as_deref(), path)
        })?;
        ns.add_entry(parent, name, ino)?;
        Ok(ns.node(ino)?.stat(ino))
    }

    /// Removes name `name` of a non-directory from `parent` (`unlink`):
    /// `EISDIR` for a directory. The node goes with its last name unless a
    /// file is open on it, then with its last close.
    pub fn unlink_at(&self, parent: u64, name: &str) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let ino = ns.child(parent, name)?;
        if ns.node(ino)?.is_dir() {
            return Err(FsError::IsDir {
                name: name.to_owned(),
            });
        }
        self.disk.host_op(&ns, parent, Some(name), host::unlink)?;
        ns.remove_entry(parent, name)?;
        let gone = self.drop_name(&mut ns, (parent, name.to_owned()), ino);
        drop(ns);
        self.discard(gone);
        Ok(())
    }

    /// Removes empty directory `name` from `parent` (`rmdir`):
    /// `ENOTDIR` for anything else, `ENOTEMPTY` if it holds entries.
    pub fn rmdir_at(&self, parent: u64, name: &str) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let ino = ns.child(parent, name)?;
        let entries = ns.node(ino)?.entries().ok_or_else(|| FsError::NotDir {
            name: name.to_owned(),
        })?;
        if !entries.is_empty() {
            return Err(FsError::NotEmpty {
                name: name.to_owned(),
            });
        }
        self.disk.host_op(&ns, parent, Some(name), host::rmdir)?;
        ns.remove_entry(parent, name)?;
        ns.drop_dir(ino);
        Ok(())
    }

    /// `opendir` of directory `ino`: a directory removed while open
    /// stays (no names, no entries, `nlink` 0) until its last close.
    pub fn opendir(&self, ino: u64) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let meta = ns.node_mut(ino)?;
        if !meta.is_dir() {
            return Err(FsError::NotDir {
                name: format!("#{ino}"),
            });
        }
        meta.nr_open += 1;
        Ok(())
    }

    /// `releasedir` of directory `ino` ([`Superblock::opendir`]).
    pub fn releasedir(&self, ino: u64) {
        let mut ns = lock(&self.ns);
        let Some(meta) = ns.nodes.get_mut(&ino) else {
            return;
        };
        meta.nr_open = meta.nr_open.saturating_sub(1);
        if meta.nr_open == 0 && meta.nlink == 0 {
            ns.nodes.remove(&ino);
        }
    }

    /// Changes owner, mode or times of node `ino` (`chmod`, `chown`,
    /// `utimensat`); the change time becomes now.
    pub fn setattr(&self, ino: u64, attr: SetAttr) -> Result<Stat, FsError> {
        let mut ns = lock(&self.ns);
        let path = ns.path_of(ino);
        if let Some(path) = path.filter(|_| self.disk.is_host()) {
            self.disk.host_op_path(&path, |p| host::setattr(p, attr))?;
        }
        let meta = ns.node_mut(ino)?;
        if let Some(perm) = attr.perm {
            meta.perm = perm & 0o7777;
        }
        if let Some(uid) = attr.uid {
            meta.uid = uid;
        }
        if let Some(gid) = attr.gid {
            meta.gid = gid;
        }
        if let Some(atime) = attr.atime {
            meta.atime = atime;
        }
        if let Some(mtime) = attr.mtime {
            meta.mtime = mtime;
        }
        meta.ctime = SystemTime::now();
        Ok(meta.stat(ino))
    }

    /// The filesystem's space and nodes (`statfs`); a host directory's
    /// are the host filesystem's.
    pub fn statfs(&self) -> StatFs {
        let ns = lock(&self.ns);
        let files = MAX_NODES as u64;
        let ffree = files - ns.nodes.len() as u64;
        match self.disk.capacity_pages() {
            Some(blocks) => StatFs {
                blocks,
                bfree: blocks.saturating_sub(ns.used_pages),
                files,
                ffree,
            },
            None => {
                let (blocks, bfree) = self.disk.host_space().unwrap_or((0, 0));
                StatFs {
                    blocks,
                    bfree,
                    files,
                    ffree,
                }
            }
        }
    }
}

impl Namespace {
    /// Checks the invariants of the module docs, and that every cached
    /// dentry names the node it says; panics with the first broken one.
    fn validate(&self) {
        let mut used_pages = 0;
        for (&ino, meta) in &self.nodes {
            for (parent, name) in &meta.names {
                let entries = self.nodes[parent]
                    .entries()
                    .expect("a name is in a directory");
                assert_eq!(entries.get(name), Some(&ino), "{parent}/{name} names {ino}");
            }
            match &meta.body {
                Body::Dir { .. } if meta.names.is_empty() && ino != ROOT_INO => {
                    assert!(
                        meta.nlink == 0 && meta.nr_open > 0,
                        "removed dir {ino} open"
                    );
                }
                Body::Dir { entries } => {
                    let subdirs =
                        entries.values().filter(|c| self.nodes[c].is_dir()).count() as u32;
                    assert_eq!(meta.nlink, 2 + subdirs, "directory {ino}'s links");
                    assert_eq!(
                        meta.names.len(),
                        usize::from(ino != ROOT_INO),
                        "{ino}'s names"
                    );
                    for (name, child) in entries {
                        let names = &self.nodes[child].names;
                        assert!(names.contains(&(ino, name.clone())), "{ino}/{name} back");
                    }
                }
                _ => {
                    assert_eq!(meta.nlink as usize, meta.names.len(), "{ino}'s links");
                    assert!(
                        meta.nlink > 0 || meta.nr_open > 0,
                        "{ino} nameless and closed"
                    );
                }
            }
            if matches!(meta.body, Body::File) {
                used_pages += pages(meta.size_bytes);
            }
        }
        assert_eq!(used_pages, self.used_pages, "used pages");
        for ((parent, name), dentry) in &self.dcache {
            let entries = self.nodes[parent].entries().expect("a dentry's directory");
            assert_eq!(
                entries.get(name),
                Some(&dentry.ino),
                "dentry {parent}/{name}"
            );
        }
        let open: u64 = self
            .nodes
            .values()
            .filter(|m| matches!(m.body, Body::File))
            .map(|m| u64::from(m.nr_open))
            .sum();
        assert_eq!(open, self.nr_open, "open files");
    }
}

impl Superblock {
    /// Checks the namespace's invariants (names and entries agree, link
    /// counts, the space in use, the dentry cache), panicking on the
    /// first broken one: for tests and stress runs.
    pub fn validate(&self) {
        lock(&self.ns).validate();
    }
}

/// The rename of [`Superblock::rename_at`], checked and then carried out.
impl Superblock {
    /// Renames `name` in `parent` to `new_name` in `new_parent`
    /// (`renameat2`): over an existing target per `mode`. The kernel's
    /// refusals: `EINVAL` moving a directory into itself, `ENOTDIR` a
    /// directory over a non-directory, `EISDIR` the reverse, `ENOTEMPTY`
    /// over a directory with entries, `EEXIST` with `NoReplace`, `ENOENT`
    /// for a missing target with `Exchange`. Renaming a name to itself, or
    /// to another name of the same file, does nothing.
    pub fn rename_at(
        &self,
        parent: u64,
        name: &str,
        new_parent: u64,
        new_name: &str,
        mode: RenameMode,
    ) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let ino = ns.child(parent, name)?;
        check_name(new_name)?;
        ns.dir(new_parent)?;
        ns.check_live_dir(new_parent, new_name)?;
        let target = ns.dir(new_parent)?.get(new_name).copied();
        let to = (new_parent, new_name);
        self.check_rename(&ns, (parent, ino), to, target, mode)?;
        if target == Some(ino) {
            return Ok(());
        }
        let new_path = ns
            .path_of(new_parent)
            .map(|p| self.disk.host_path(&p.join(new_name)));
        self.disk.host_op(&ns, parent, Some(name), |old| {
            host::rename(old, new_path.as_deref(), mode)
        })?;
        if mode == RenameMode::Exchange {
            let other = target.expect("checked: the target exists");
            ns.remove_entry(parent, name)?;
            ns.remove_entry(new_parent, new_name)?;
            ns.add_entry(new_parent, new_name, ino)?;
            ns.add_entry(parent, name, other)?;
            self.move_dentry(
                &mut ns,
                (parent, name.to_owned()),
                (new_parent, new_name.to_owned()),
                true,
            );
            return Ok(());
        }
        let mut gone = None;
        if let Some(old) = target {
            ns.remove_entry(new_parent, new_name)?;
            if ns.node(old)?.is_dir() {
                ns.drop_dir(old);
            } else {
                gone = self.drop_name(&mut ns, (new_parent, new_name.to_owned()), old);
            }
        }
        ns.remove_entry(parent, name)?;
        ns.add_entry(new_parent, new_name, ino)?;
        self.move_dentry(
            &mut ns,
            (parent, name.to_owned()),
            (new_parent, new_name.to_owned()),
            false,
        );
        drop(ns);
        self.discard(gone);
        Ok(())
    }

    /// The kernel's refusals of a rename of node `ino`, named in directory
    /// `parent`, to `new_name` in `new_parent` (naming `target`).
    fn check_rename(
        &self,
        ns: &Namespace,
        (parent, ino): (u64, u64),
        (new_parent, new_name): (u64, &str),
        target: Option<u64>,
        mode: RenameMode,
    ) -> Result<(), FsError> {
        let named = || new_name.to_owned();
        let is_dir = ns.node(ino)?.is_dir();
        if is_dir && ns.is_within(new_parent, ino) {
            return Err(FsError::IntoItself { name: named() });
        }
        let Some(target) = target else {
            if mode == RenameMode::Exchange {
                return Err(FsError::NotFound { name: named() });
            }
            if is_dir && ns.node(new_parent)?.nlink >= MAX_LINKS {
                return Err(FsError::TooManyLinks { name: named() });
            }
            return Ok(());
        };
        match mode {
            RenameMode::NoReplace => return Err(FsError::Exists { name: named() }),
            RenameMode::Exchange => {
                // The directory the source is named in (not its first
                // name's: a hard-linked file may have one inside the
                // target).
                let other = ns.node(target)?;
                if other.is_dir() && ns.is_within(parent, target) {
                    return Err(FsError::IntoItself { name: named() });
                }
                return Ok(());
            }
            RenameMode::Replace => {}
        }
        let other = ns.node(target)?;
        match (is_dir, other.entries()) {
            (true, None) => Err(FsError::NotDir { name: named() }),
            (false, Some(_)) => Err(FsError::IsDir { name: named() }),
            (true, Some(entries)) if !entries.is_empty() => {
                Err(FsError::NotEmpty { name: named() })
            }
            _ => Ok(()),
        }
    }
}

/// The host side of a host directory's namespace changes.
pub(super) mod host {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    use super::{Owner, RenameMode, SetAttr};

    type Io = std::io::Result<()>;

    fn cstr(path: &Path) -> std::io::Result<CString> {
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn check(rc: libc::c_int) -> Io {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Owner and group of a new host node (as root; otherwise the host
    /// keeps the server's own, and the simulated node says the caller's).
    fn chown(path: &Path, owner: Owner) -> Io {
        let c = cstr(path)?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        let rc = unsafe { libc::lchown(c.as_ptr(), owner.uid, owner.gid) };
        match check(rc) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()),
            other => other,
        }
    }

    pub(crate) fn mkdir(path: &Path, owner: Owner) -> Io {
        std::fs::DirBuilder::new().mode(owner.perm).create(path)?;
        chown(path, owner)
    }

    pub(crate) fn create(path: &Path, owner: Owner) -> Io {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(owner.perm)
            .open(path)?;
        chown(path, owner)
    }

    pub(crate) fn symlink(target: &str, path: &Path) -> Io {
        std::os::unix::fs::symlink(target, path)
    }

    pub(crate) fn link(from: Option<&Path>, path: &Path) -> Io {
        let from = from.ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        std::fs::hard_link(from, path)
    }

    pub(crate) fn unlink(path: &Path) -> Io {
        std::fs::remove_file(path)
    }

    pub(crate) fn rmdir(path: &Path) -> Io {
        std::fs::remove_dir(path)
    }

    pub(crate) fn rename(old: &Path, new: Option<&Path>, mode: RenameMode) -> Io {
        let new = new.ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        let flags = match mode {
            RenameMode::Replace => 0,
            RenameMode::NoReplace => libc::RENAME_NOREPLACE,
            RenameMode::Exchange => libc::RENAME_EXCHANGE,
        };
        let (o, n) = (cstr(old)?, cstr(new)?);
        // SAFETY: both paths are NUL-terminated and outlive the call.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                o.as_ptr(),
                libc::AT_FDCWD,
                n.as_ptr(),
                flags,
            )
        };
        check(rc)
    }

    pub(crate) fn setattr(path: &Path, attr: SetAttr) -> Io {
        if let Some(perm) = attr.perm {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
        }
        if attr.uid.is_some() || attr.gid.is_some() {
            let c = cstr(path)?;
            let (uid, gid) = (attr.uid.unwrap_or(u32::MAX), attr.gid.unwrap_or(u32::MAX));
            // SAFETY: `c` is NUL-terminated; -1 (u32::MAX) leaves an id.
            check(unsafe { libc::lchown(c.as_ptr(), uid, gid) })?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            let times = [timespec(attr.atime), timespec(attr.mtime)];
            let c = cstr(path)?;
            // SAFETY: `c` is NUL-terminated and `times` holds two entries.
            check(unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })?;
        }
        Ok(())
    }

    fn timespec(time: Option<std::time::SystemTime>) -> libc::timespec {
        match time.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()) {
            Some(d) => libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
        }
    }
}

impl FsError {
    /// A failed host system call as an error.
    pub(super) fn host(e: &std::io::Error) -> Self {
        FsError::Host {
            errno: Errno::from_io(e),
        }
    }
}
