//! Open files with positional reads and writes (`pread`/`pwrite`,
//! `ftruncate`, `fallocate`), for callers that keep a file open across
//! many calls: the FUSE server, where each request comes from a process of
//! its own cgroup.
//!
//! A [`File`] is the handle of one `open`: it holds the dentry and inode
//! (and the `struct file` charge) until dropped, as a file descriptor
//! does; the file it reads and writes stays, with its bytes, while it is
//! open, even once its last name is removed. Each read or write names the
//! memory cgroup of the task making it, so page-cache misses are charged
//! to whoever caused them, as in the kernel, not to whoever opened the
//! file.
//!
//! Locking: writes and truncates of a superblock's files are serialised by
//! its `resize` lock (so a space check and its size update are one step);
//! a write's pages go through the file's page cache (its own lock); the
//! size is updated under the namespace lock after the pages are written,
//! so a reader never sees a size past written pages.

use super::dcache::{Create, OpenFile};
use super::namei::{Owner, Stat};
use super::{FsError, Superblock, touch};
use crate::memcontrol::MemCgroup;
use crate::readahead::FileRaState;
use crate::sync::{Arc, lock};

/// One open file; closed on drop.
pub struct File {
    sb: Arc<Superblock>,
    /// `Some` until dropped.
    open: Option<OpenFile>,
}

/// What `fallocate(2)` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallocate {
    /// Reserves the range, growing the file over it (mode 0).
    Allocate,
    /// Reserves the range, the size kept (`FALLOC_FL_KEEP_SIZE`).
    KeepSize,
    /// Zeroes the range, the size kept (`FALLOC_FL_PUNCH_HOLE |
    /// FALLOC_FL_KEEP_SIZE`).
    PunchHole,
}

impl Superblock {
    /// Opens `path` (from the root) as a task of `memcg` would
    /// (`open(2)`): its dentry, inode and open file are charged to `memcg`
    /// if not cached. `create` makes a missing file (`O_CREAT`, owned by
    /// root, mode 0644); without it a missing file is `ENOENT`.
    pub fn open_file(
        &self,
        memcg: &Arc<MemCgroup>,
        path: &str,
        create: bool,
    ) -> Result<File, FsError> {
        let open = self.open(memcg, path, create)?;
        self.wrap(open)
    }

    /// Opens `name` in directory `parent`, making it if missing with
    /// `owner` (`open(2)` with `O_CREAT`; `exclusive`: `O_EXCL`, an
    /// existing name is `EEXIST`).
    pub fn create_at(
        &self,
        memcg: &Arc<MemCgroup>,
        parent: u64,
        name: &str,
        owner: Owner,
        exclusive: bool,
    ) -> Result<File, FsError> {
        let create = Create { owner, exclusive };
        let open = self.open_at(memcg, &(parent, name.to_owned()), Some(create))?;
        self.wrap(open)
    }

    /// Opens node `ino` by one of its names (FUSE's `open`, which names
    /// the inode only). A node whose names are all gone is `ENOENT`.
    pub fn open_ino(&self, memcg: &Arc<MemCgroup>, ino: u64) -> Result<File, FsError> {
        let key = lock(&self.ns)
            .node(ino)?
            .names
            .first()
            .cloned()
            .ok_or(FsError::Stale { ino })?;
        let open = self.open_at(memcg, &key, None)?;
        if open.ino != ino {
            // Renamed over meanwhile: the name is another file's now.
            self.close(open);
            return Err(FsError::Stale { ino });
        }
        self.wrap(open)
    }

    fn wrap(&self, open: OpenFile) -> Result<File, FsError> {
        let Some(sb) = self.me.upgrade() else {
            self.close(open);
            return Err(FsError::Busy { nr_open: 0 });
        };
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

    /// Its inode number.
    pub fn ino(&self) -> u64 {
        self.open().ino
    }

    /// Its attributes now.
    pub fn stat(&self) -> Result<Stat, FsError> {
        self.sb.stat(self.ino())
    }

    /// Its size now (another handle may have changed it).
    pub fn size_bytes(&self) -> u64 {
        lock(&self.sb.ns).size_of(self.ino())
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
        let end = self.end_of(offset, data.len() as u64)?;
        let _resizing = lock(&self.sb.resize);
        let old_size = self.size_bytes();
        if end > old_size {
            self.sb.reserve_space(old_size, end)?;
        }
        self.open().mapping.write(memcg, offset, data)?;
        let mut ns = lock(&self.sb.ns);
        if end > ns.size_of(self.ino()) {
            ns.set_size(self.ino(), end);
        }
        touch(&mut ns, self.ino());
        Ok(())
    }

    /// `offset + len`, or `EFBIG` past what a file can hold.
    fn end_of(&self, offset: u64, len: u64) -> Result<u64, FsError> {
        offset
            .checked_add(len)
            .filter(|end| *end <= i64::MAX as u64)
            .ok_or(FsError::TooLarge {
                name: format!("#{}", self.ino()),
                size_bytes: u64::MAX,
            })
    }

    /// Sets the size (`ftruncate`): a smaller size drops the pages past it,
    /// a larger one leaves a hole that reads as zeros.
    pub fn set_len(&self, size_bytes: u64) -> Result<(), FsError> {
        self.end_of(size_bytes, 0)?;
        let _resizing = lock(&self.sb.resize);
        let old_size = self.size_bytes();
        if size_bytes > old_size {
            self.sb.reserve_space(old_size, size_bytes)?;
        } else if size_bytes < old_size {
            self.open().mapping.truncate_to(size_bytes)?;
        }
        let mut ns = lock(&self.sb.ns);
        ns.set_size(self.ino(), size_bytes);
        touch(&mut ns, self.ino());
        Ok(())
    }

    /// `fallocate(2)` of `len` bytes at `offset`: `ENOSPC` if the disk
    /// cannot hold the file at its new size. A punched hole is written as
    /// zeros through the page cache (charged to `memcg`), not freed.
    pub fn fallocate(
        &self,
        memcg: &Arc<MemCgroup>,
        mode: Fallocate,
        offset: u64,
        len: u64,
    ) -> Result<(), FsError> {
        let end = self.end_of(offset, len)?;
        match mode {
            Fallocate::Allocate if end > self.size_bytes() => self.set_len(end),
            Fallocate::Allocate => Ok(()),
            Fallocate::KeepSize => {
                let _resizing = lock(&self.sb.resize);
                let size = self.size_bytes();
                self.sb.reserve_space(size, end.max(size))
            }
            Fallocate::PunchHole => {
                let end = end.min(self.size_bytes());
                let zeros = vec![0; super::IO_CHUNK_BYTES];
                let mut at = offset;
                while at < end {
                    let n = (end - at).min(zeros.len() as u64) as usize;
                    self.write_at(memcg, at, &zeros[..n])?;
                    at += n as u64;
                }
                Ok(())
            }
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
        f.debug_struct("File").field("ino", &self.ino()).finish()
    }
}
