//! Open files with positional reads and writes (`pread`/`pwrite`,
//! `ftruncate`), for callers that keep a file open across many calls: the
//! FUSE server, where each request comes from a process of its own cgroup.
//!
//! A [`File`] is the handle of one `open`: it holds the dentry and inode
//! (and the `struct file` charge) until dropped, as a file descriptor
//! does. Each read or write names the memory cgroup of the task making it,
//! so page-cache misses are charged to whoever caused them, as in the
//! kernel, not to whoever opened the file.
//!
//! Locking: writes and truncates of a superblock's files are serialised by
//! its `resize` lock (so a space check and its size update are one step);
//! a write's pages go through the file's page cache (its own lock); the
//! size is updated under the namespace lock after the pages are written,
//! so a reader never sees a size past written pages.

use super::dcache::OpenFile;
use super::{FsError, Superblock};
use crate::memcontrol::MemCgroup;
use crate::readahead::FileRaState;
use crate::sync::{Arc, lock};

/// One open file; closed on drop.
pub struct File {
    sb: Arc<Superblock>,
    /// `Some` until dropped.
    open: Option<OpenFile>,
}

impl Superblock {
    /// Opens `name` as a task of `memcg` would (`open(2)`): its dentry,
    /// inode and open file are charged to `memcg` if not cached. `create`
    /// makes a missing file (`O_CREAT`); without it a missing file is
    /// `ENOENT`.
    pub fn open_file(
        &self,
        memcg: &Arc<MemCgroup>,
        name: &str,
        create: bool,
    ) -> Result<File, FsError> {
        let sb = self.me.upgrade().ok_or(FsError::NotFound {
            name: name.to_owned(),
        })?;
        let open = self.open(memcg, name, create)?;
        Ok(File {
            sb,
            open: Some(open),
        })
    }
}

impl File {
    fn open(&self) -> &OpenFile {
        self.open.as_ref().expect("a File is open until dropped")
    }

    /// Its name in the mount.
    pub fn name(&self) -> &str {
        &self.open().name
    }

    /// Its size now (another handle may have changed it); 0 once it is
    /// unlinked (a simplification: the kernel keeps an unlinked file's
    /// size and bytes until its last close).
    pub fn size_bytes(&self) -> u64 {
        let open = self.open();
        lock(&self.sb.ns)
            .files
            .get(&open.name)
            .filter(|meta| meta.ino == open.ino)
            .map_or(0, |meta| meta.size_bytes)
    }

    /// Reads at most `buf.len()` bytes at `offset` (`pread`), bringing
    /// missing pages, and the readahead window around them, in charged to
    /// `memcg`; returns how many (0 at or past the end). Readahead follows
    /// this open file's own reads (`f_ra`).
    pub fn read_at(
        &self,
        memcg: &Arc<MemCgroup>,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, FsError> {
        let open = self.open();
        let size = self.size_bytes();
        let mut ra = *lock(&open.ra);
        let read = open.mapping.read(memcg, &mut ra, offset, buf, size);
        *lock(&open.ra) = ra;
        Ok(read?)
    }

    /// Its readahead state now (`f_ra`).
    pub fn ra_state(&self) -> FileRaState {
        *lock(&self.open().ra)
    }

    /// Writes `data` at `offset` (`pwrite`) through the page cache, new
    /// pages charged to `memcg`; the file grows to cover it. A disk without
    /// room for the new size is `ENOSPC`, and nothing is written.
    pub fn write_at(
        &self,
        memcg: &Arc<MemCgroup>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), FsError> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| FsError::TooLarge {
                name: self.name().to_owned(),
                size_bytes: u64::MAX,
            })?;
        let _resizing = lock(&self.sb.resize);
        let old_size = self.size_bytes();
        if end > old_size {
            self.sb.reserve_space(old_size, end)?;
        }
        self.open().mapping.write(memcg, offset, data)?;
        self.set_size_at_least(end);
        Ok(())
    }

    /// Sets the size (`ftruncate`): a smaller size drops the pages past it,
    /// a larger one leaves a hole that reads as zeros.
    pub fn set_len(&self, size_bytes: u64) -> Result<(), FsError> {
        let _resizing = lock(&self.sb.resize);
        let old_size = self.size_bytes();
        if size_bytes > old_size {
            self.sb.reserve_space(old_size, size_bytes)?;
        } else if size_bytes < old_size {
            self.open().mapping.truncate_to(size_bytes)?;
        }
        self.update_size(|_| size_bytes);
        Ok(())
    }

    fn set_size_at_least(&self, size_bytes: u64) {
        self.update_size(|size| size.max(size_bytes));
    }

    /// Changes the size of this file (not of a file made under its name
    /// after it was unlinked).
    fn update_size(&self, f: impl FnOnce(u64) -> u64) {
        let open = self.open();
        if let Some(meta) = lock(&self.sb.ns)
            .files
            .get_mut(&open.name)
            .filter(|meta| meta.ino == open.ino)
        {
            meta.size_bytes = f(meta.size_bytes);
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.sb.close(open);
        }
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("name", &self.name()).finish()
    }
}
