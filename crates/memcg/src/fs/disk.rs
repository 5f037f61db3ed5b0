//! Where a filesystem's bytes live: a RAM disk (drivers/block/brd.c) or a
//! directory of the host, read and written with real file I/O.
//!
//! A RAM disk allocates a page of the machine's frames on the first write
//! to it and keeps it until the file is removed or the disk unmounted;
//! those pages are the kernel's (charged to no cgroup, counted against the
//! machine). A host directory keeps each file as a host file of the same
//! name.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

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
    /// The backing store of file `ino` (`name` on a host directory).
    pub(crate) fn backing(
        self: &Arc<Self>,
        ino: u64,
        name: &str,
    ) -> Result<Arc<dyn Backing>, BackingError> {
        Ok(match &**self {
            Disk::Ram(_) => Arc::new(RamFile {
                disk: Arc::clone(self),
                ino,
            }),
            Disk::Dir(dir) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(dir.join(name))
                    .map_err(|e| BackingError::Io(e.kind()))?;
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

    /// Removes file `ino`'s stored bytes.
    pub(crate) fn remove(&self, ino: u64, name: &str) -> Result<(), BackingError> {
        match self {
            Disk::Ram(ram) => {
                ram.discard(ino);
                Ok(())
            }
            Disk::Dir(dir) => {
                std::fs::remove_file(dir.join(name)).map_err(|e| BackingError::Io(e.kind()))
            }
        }
    }
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

impl Disk {
    /// Trims a host file to the file's size (whole pages were written).
    pub(crate) fn set_size(&self, name: &str, size_bytes: u64) -> Result<(), BackingError> {
        match self {
            Disk::Ram(_) => Ok(()),
            Disk::Dir(dir) => std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join(name))
                .and_then(|f| f.set_len(size_bytes))
                .map_err(|e| BackingError::Io(e.kind())),
        }
    }
}
