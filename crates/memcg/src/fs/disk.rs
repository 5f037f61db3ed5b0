//! Where a filesystem's bytes live: a RAM disk (drivers/block/brd.c) or a
//! directory of the host, read and written with real file I/O.
//!
//! A RAM disk allocates a page of the machine's frames on the first write
//! to it and keeps it until the file is removed or the disk unmounted;
//! those pages are the kernel's (charged to no cgroup, counted against the
//! machine). A host directory keeps each node as the host node at the same
//! path: its tree is read when mounted ([`scan_host_tree`]), every change
//! of a name or attribute is made on the host at once (`namei.rs`), and
//! each cached file's bytes go through a host file descriptor opened when
//! its inode is cached (so a rename, or the removal of its last name, does
//! not cut it off).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::namei::{Body, MAX_NODES, Meta, Owner, ROOT_INO};
use super::{FsError, Namespace};
use crate::filemap::{Backing, BackingError};
use crate::memcontrol::CgroupTree;
use crate::mm_types::{PAGE_BYTES, PAGE_SIZE};
use crate::page_alloc::PageBuf;
use crate::sync::{Arc, Mutex, lock};

/// A filesystem's storage.
pub(crate) enum Disk {
    Ram(RamDisk),
    Dir(PathBuf),
}

/// A brd-like RAM disk: pages by (inode, index), allocated on first write.
pub(crate) struct RamDisk {
    tree: CgroupTree,
    size_pages: u64,
    pages: Mutex<HashMap<(u64, u64), PageBuf>>,
}

impl RamDisk {
    pub(crate) fn new(tree: &CgroupTree, size_bytes: u64) -> Self {
        Self {
            tree: tree.clone(),
            size_pages: size_bytes / PAGE_SIZE,
            pages: Mutex::new(HashMap::new()),
        }
    }

    /// Pages in use.
    pub(crate) fn used_pages(&self) -> u64 {
        lock(&self.pages).len() as u64
    }

    /// Frees every page of `ino` (the file is gone).
    pub(crate) fn discard(&self, ino: u64) {
        let freed: Vec<PageBuf> = {
            let mut pages = lock(&self.pages);
            let keys: Vec<_> = pages.keys().filter(|(i, _)| *i == ino).copied().collect();
            keys.into_iter().filter_map(|k| pages.remove(&k)).collect()
        };
        self.release(freed);
    }

    fn release(&self, freed: Vec<PageBuf>) {
        let n = freed.len() as u64;
        for buf in freed {
            self.tree.free_pages(buf);
        }
        self.tree.uncharge_kernel(n);
    }
}

impl Drop for RamDisk {
    fn drop(&mut self) {
        let freed: Vec<PageBuf> = std::mem::take(&mut *lock(&self.pages))
            .into_values()
            .collect();
        self.release(freed);
    }
}

impl Disk {
    /// The backing store of file `ino` (at `path` in a host directory).
    pub(crate) fn backing(
        self: &Arc<Self>,
        ino: u64,
        path: Option<&Path>,
    ) -> Result<Arc<dyn Backing>, FsError> {
        Ok(match &**self {
            Disk::Ram(_) => Arc::new(RamFile {
                disk: Arc::clone(self),
                ino,
            }),
            Disk::Dir(dir) => {
                let path = path.ok_or(FsError::Stale { ino })?;
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(dir.join(path))
                    .map_err(|e| FsError::host(&e))?;
                Arc::new(HostFile { file })
            }
        })
    }

    /// Pages the disk can hold (`None`: a host directory, as big as the
    /// host's filesystem).
    pub(crate) fn capacity_pages(&self) -> Option<u64> {
        match self {
            Disk::Ram(ram) => Some(ram.size_pages),
            Disk::Dir(_) => None,
        }
    }

    /// Whether it is a host directory.
    pub(crate) fn is_host(&self) -> bool {
        matches!(self, Disk::Dir(_))
    }

    /// Makes a change on the host for a host directory (nothing for a RAM
    /// disk): `op` gets the host path of `name` in directory `parent` (of
    /// `parent` itself without a name).
    pub(crate) fn host_op(
        &self,
        ns: &Namespace,
        parent: u64,
        name: Option<&str>,
        op: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<(), FsError> {
        if !self.is_host() {
            return Ok(());
        }
        let dir = ns.path_of(parent).ok_or(FsError::Stale { ino: parent })?;
        let path = match name {
            Some(name) => dir.join(name),
            None => dir,
        };
        self.host_op_path(&path, op)
    }

    /// [`Disk::host_op`] at `path` below the host directory.
    pub(crate) fn host_op_path(
        &self,
        path: &Path,
        op: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<(), FsError> {
        match self {
            Disk::Ram(_) => Ok(()),
            Disk::Dir(dir) => op(&dir.join(path)).map_err(|e| FsError::host(&e)),
        }
    }

    /// Where `path` (below the root) is on the host (a RAM disk: nowhere,
    /// `path` as it is).
    pub(crate) fn host_path(&self, path: &Path) -> PathBuf {
        match self {
            Disk::Ram(_) => path.to_path_buf(),
            Disk::Dir(dir) => dir.join(path),
        }
    }

    /// A host directory's filesystem: (blocks, free blocks), in pages.
    pub(crate) fn host_space(&self) -> Option<(u64, u64)> {
        let Disk::Dir(dir) = self else {
            return None;
        };
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: a zeroed statvfs is a valid value to be overwritten.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is NUL-terminated and `st` is a valid out pointer.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let scale = |n: u64| n * st.f_frsize / PAGE_SIZE;
        Some((scale(st.f_blocks), scale(st.f_bavail)))
    }
}

/// The tree of host directory `dir` as a namespace: its directories,
/// regular files and symbolic links with their owners, modes and times
/// (other kinds, and names that are not UTF-8, are left out). More than
/// [`MAX_NODES`] nodes is `ENOSPC`.
pub(crate) fn scan_host_tree(dir: &Path) -> Result<Namespace, FsError> {
    let root = std::fs::metadata(dir).map_err(|e| FsError::host(&e))?;
    if !root.is_dir() {
        return Err(FsError::NotDir {
            name: dir.display().to_string(),
        });
    }
    let mut ns = Namespace::new(owner_of(&root));
    set_times(ns.node_mut(ROOT_INO)?, &root);
    let mut todo = vec![(ROOT_INO, dir.to_path_buf())];
    let mut linked: HashMap<(u64, u64), u64> = HashMap::new();
    while let Some((ino, path)) = todo.pop() {
        for entry in std::fs::read_dir(&path).map_err(|e| FsError::host(&e))? {
            let entry = entry.map_err(|e| FsError::host(&e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let meta = entry.metadata().map_err(|e| FsError::host(&e))?;
            let body = if meta.is_dir() {
                Body::Dir {
                    entries: BTreeMap::new(),
                }
            } else if meta.is_file() {
                Body::File
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).map_err(|e| FsError::host(&e))?;
                let Ok(target) = target.into_os_string().into_string() else {
                    continue;
                };
                Body::Symlink { target }
            } else {
                continue;
            };
            let is_dir = meta.is_dir();
            let host_ino = (meta.dev(), meta.ino());
            if let Some(&same) = linked.get(&host_ino) {
                ns.add_entry(ino, &name, same)?;
                continue;
            }
            let child = add_scanned(&mut ns, ino, &name, body, &meta)?;
            if meta.is_file() && meta.nlink() > 1 {
                linked.insert(host_ino, child);
            }
            if is_dir {
                todo.push((child, entry.path()));
            }
        }
    }
    Ok(ns)
}

/// Adds one scanned host node.
fn add_scanned(
    ns: &mut Namespace,
    parent: u64,
    name: &str,
    body: Body,
    host: &std::fs::Metadata,
) -> Result<u64, FsError> {
    if ns.nodes.len() >= MAX_NODES {
        return Err(FsError::NoNodes { max: MAX_NODES });
    }
    let is_file = matches!(body, Body::File);
    let mut meta = Meta::new(body, owner_of(host));
    set_times(&mut meta, host);
    let ino = ns.insert_scanned(parent, name, meta)?;
    if is_file {
        ns.set_size(ino, host.len());
    }
    Ok(ino)
}

fn owner_of(meta: &std::fs::Metadata) -> Owner {
    Owner {
        uid: meta.uid(),
        gid: meta.gid(),
        perm: meta.mode() & 0o7777,
    }
}

fn set_times(meta: &mut Meta, host: &std::fs::Metadata) {
    let at = |secs: i64, nsecs: i64| {
        std::time::UNIX_EPOCH
            + std::time::Duration::new(secs.max(0) as u64, nsecs.clamp(0, 999_999_999) as u32)
    };
    meta.atime = at(host.atime(), host.atime_nsec());
    meta.mtime = at(host.mtime(), host.mtime_nsec());
    meta.ctime = at(host.ctime(), host.ctime_nsec());
}

/// One file on a RAM disk.
struct RamFile {
    disk: Arc<Disk>,
    ino: u64,
}

impl RamFile {
    fn ram(&self) -> &RamDisk {
        match &*self.disk {
            Disk::Ram(ram) => ram,
            Disk::Dir(_) => unreachable!("a RamFile is on a RAM disk"),
        }
    }
}

impl Backing for RamFile {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        match lock(&self.ram().pages).get(&(self.ino, index)) {
            Some(page) => buf.copy_from_slice(&page[..PAGE_BYTES]),
            None => buf.fill(0),
        }
        Ok(())
    }

    /// A page first written is charged and allocated with the disk's lock
    /// dropped: the charge may reclaim, and reclaim may run a flusher
    /// writing to this very disk.
    fn write_page(&self, index: u64, buf: &[u8]) -> Result<(), BackingError> {
        let ram = self.ram();
        let key = (self.ino, index);
        {
            let mut pages = lock(&ram.pages);
            if let Some(page) = pages.get_mut(&key) {
                page[..PAGE_BYTES].copy_from_slice(buf);
                return Ok(());
            }
            if pages.len() as u64 >= ram.size_pages {
                return Err(BackingError::NoSpace);
            }
        }
        ram.tree
            .charge_kernel(1)
            .map_err(|_| BackingError::Io(std::io::ErrorKind::OutOfMemory))?;
        let mut page = ram.tree.alloc_pages(1, false);
        page[..PAGE_BYTES].copy_from_slice(buf);
        let mut pages = lock(&ram.pages);
        // Written or filled up meanwhile (another file's writeback): the
        // new page goes back.
        let result = if let Some(existing) = pages.get_mut(&key) {
            existing[..PAGE_BYTES].copy_from_slice(buf);
            Ok(())
        } else if pages.len() as u64 >= ram.size_pages {
            Err(BackingError::NoSpace)
        } else {
            pages.insert(key, page);
            return Ok(());
        };
        drop(pages);
        ram.release(vec![page]);
        result
    }

    fn truncate(&self, size_bytes: u64) -> Result<(), BackingError> {
        let ram = self.ram();
        let first_gone = size_bytes.div_ceil(PAGE_SIZE);
        let freed: Vec<PageBuf> = {
            let mut pages = lock(&ram.pages);
            let keys: Vec<_> = pages
                .keys()
                .filter(|(ino, index)| *ino == self.ino && *index >= first_gone)
                .copied()
                .collect();
            let in_page = (size_bytes % PAGE_SIZE) as usize;
            if in_page > 0
                && let Some(last) = pages.get_mut(&(self.ino, size_bytes / PAGE_SIZE))
            {
                last[in_page..PAGE_BYTES].fill(0);
            }
            keys.into_iter().filter_map(|k| pages.remove(&k)).collect()
        };
        ram.release(freed);
        Ok(())
    }
}

/// One file in a host directory.
struct HostFile {
    file: std::fs::File,
}

impl Backing for HostFile {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        buf.fill(0);
        let mut done = 0;
        while done < buf.len() {
            match self
                .file
                .read_at(&mut buf[done..], index * PAGE_SIZE + done as u64)
            {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BackingError::Io(e.kind())),
            }
        }
        Ok(())
    }

    fn write_page(&self, index: u64, buf: &[u8]) -> Result<(), BackingError> {
        self.file
            .write_all_at(buf, index * PAGE_SIZE)
            .map_err(|e| BackingError::Io(e.kind()))
    }

    fn truncate(&self, size_bytes: u64) -> Result<(), BackingError> {
        self.file
            .set_len(size_bytes)
            .map_err(|e| BackingError::Io(e.kind()))
    }
}
