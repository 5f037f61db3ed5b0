//! Where a swap device keeps page contents: a RAM disk ([`RamBackend`],
//! the seed's `brd`), a preallocated file ([`FileBackend`]), and a wrapper
//! that injects I/O errors ([`FaultyBackend`]).
//!
//! A backend only stores pages by offset; which slots are in use, their
//! counts and the zero bitmap are the device's (the parent module's).
//! Invariant: a page reads back exactly what was last written at its
//! offset, or zeros if it never was.
//!
//! Locking: a RAM disk locks one page at a time; a file backend uses
//! positioned I/O and takes no lock. Callers never touch one slot from two
//! threads at once (a slot's contents belong to whoever holds its
//! reference), so no ordering between pages is needed.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use super::SwapError;
use crate::idr::ChunkedTable;
use crate::mm_types::{PAGE_SIZE, SWAPFILE_CLUSTER};
use crate::page_alloc::PageBuf;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, lock};

/// Where a swap device keeps page contents.
pub trait SwapBackend: Send + Sync {
    /// Pages of storage (slot 0 included).
    fn nr_pages(&self) -> u64;
    /// Reads page `offset` into `buf` (one page).
    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `buf` (one page) to page `offset`.
    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// What `/proc/swaps` shows as the type ("file" or "partition").
    fn kind(&self) -> &'static str;
    /// Whether reads and writes complete in the caller, with nothing to
    /// wait for (`SWP_SYNCHRONOUS_IO`: a RAM disk, zram).
    fn synchronous(&self) -> bool {
        false
    }
    /// Bytes of host memory the backend's own bookkeeping takes (not page
    /// contents).
    fn metadata_bytes(&self) -> u64 {
        0
    }
}

/// Memory of the simulated machine that a RAM disk's pages come from. The
/// kernel's `brd` takes them from the page allocator, outside any cgroup,
/// so they count against the machine, not against a memory cgroup.
pub trait MachinePages: Send + Sync {
    /// Takes one page of the machine for a swap-out's write (its bytes
    /// unspecified: the caller writes all of them), from the reclaim
    /// reserve if need be (`CgroupTree::charge_kernel_reclaim`); `None`
    /// when the machine has none left.
    fn take_page(&self) -> Option<PageBuf>;
    /// Gives a page back.
    fn give_back_page(&self, page: PageBuf);
}

/// One page of a RAM disk, allocated on its first write.
type RamPage = Option<PageBuf>;

/// A RAM disk: pages allocated on first write (`brd`). The table of page
/// pointers is itself allocated a cluster (512 pages) at a time, on the
/// first write into that cluster, so an idle disk of any size costs a few
/// bytes per cluster.
pub struct RamBackend {
    pages: ChunkedTable<Mutex<RamPage>, SWAPFILE_CLUSTER>,
    nr_pages: u64,
    /// Where new pages are charged, if anywhere.
    memory: Option<Arc<dyn MachinePages>>,
    /// Pages allocated so far (given back when the disk goes).
    allocated: AtomicU64,
}

impl RamBackend {
    /// A RAM disk of `size_bytes` (a multiple of the page size) whose pages
    /// are charged to nobody.
    pub fn new(size_bytes: u64) -> Result<Self, SwapError> {
        Self::build(size_bytes, None)
    }

    /// A RAM disk of `size_bytes` whose pages are taken from `memory` as
    /// they are first written (a write fails with `ENOMEM` when the machine
    /// has none left, as `brd` does).
    pub(crate) fn with_memory(
        size_bytes: u64,
        memory: Arc<dyn MachinePages>,
    ) -> Result<Self, SwapError> {
        Self::build(size_bytes, Some(memory))
    }

    fn build(size_bytes: u64, memory: Option<Arc<dyn MachinePages>>) -> Result<Self, SwapError> {
        let nr_pages = check_size(size_bytes)?;
        let pages = usize::try_from(nr_pages)
            .ok()
            .and_then(|n| ChunkedTable::try_new(n).ok())
            .ok_or(SwapError::NoMemory { pages: nr_pages })?;
        Ok(Self {
            pages,
            nr_pages,
            memory,
            allocated: AtomicU64::new(0),
        })
    }

    /// Bytes of page storage allocated so far.
    #[cfg(test)]
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed) * PAGE_SIZE
    }

    fn page(&self, offset: u64) -> io::Result<Option<&Mutex<RamPage>>> {
        if offset >= self.nr_pages {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        Ok(self.pages.get(offset as usize))
    }
}

impl SwapBackend for RamBackend {
    fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self.page(offset)?.map(|p| lock(p)).as_deref() {
            Some(Some(data)) => buf.copy_from_slice(data),
            _ => buf.fill(0),
        }
        Ok(())
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.page(offset)?;
        let page = self
            .pages
            .get_or_alloc(offset as usize)
            .ok_or(io::ErrorKind::InvalidInput)?;
        let mut slot = lock(page);
        if slot.is_none() {
            let page = match &self.memory {
                Some(memory) => memory.take_page().ok_or(io::ErrorKind::OutOfMemory)?,
                None => PageBuf::heap(1),
            };
            // Relaxed: a statistic; the page itself is under its lock.
            self.allocated.fetch_add(1, Ordering::Relaxed);
            *slot = Some(page);
        }
        slot.as_mut().expect("allocated above").copy_from_slice(buf);
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "partition"
    }

    fn synchronous(&self) -> bool {
        true
    }

    fn metadata_bytes(&self) -> u64 {
        self.pages.memory_bytes() as u64
    }
}

impl Drop for RamBackend {
    fn drop(&mut self) {
        let Some(memory) = &self.memory else { return };
        for (_, page) in self.pages.iter() {
            if let Some(page) = lock(page).take() {
                memory.give_back_page(page);
            }
        }
    }
}

/// A swap file on disk, preallocated, with positioned page I/O.
pub struct FileBackend {
    file: File,
    nr_pages: u64,
}

impl FileBackend {
    /// Opens `path` for swap: an existing file must hold at least
    /// `size_bytes`; a missing one is created with that size and
    /// preallocated.
    pub fn open(path: &Path, size_bytes: u64) -> Result<Self, SwapError> {
        let nr_pages = check_size(size_bytes)?;
        let path_err = |source| SwapError::Path {
            path: path.to_owned(),
            source,
        };
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(path_err)?;
        let actual = file.metadata().map_err(path_err)?.len();
        if existed && actual < size_bytes {
            return Err(SwapError::FileTooSmall {
                path: path.to_owned(),
                actual,
                wanted: size_bytes,
            });
        }
        if !existed && let Err(e) = preallocate(&file, size_bytes) {
            let _ = std::fs::remove_file(path);
            return Err(path_err(e));
        }
        Ok(Self { file, nr_pages })
    }
}

/// Reserves `len` bytes of disk for `file` (posix_fallocate where there is
/// one), so swap-out never meets ENOSPC from the file system.
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        use std::os::fd::AsRawFd;
        let len =
            libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `fd` is an open file descriptor owned by `file` for the
        // whole call; posix_fallocate has no memory-safety preconditions.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc == 0 {
            return Ok(());
        }
        // Some file systems cannot; fall back to a sparse file.
        if rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    file.set_len(len)
}

impl SwapBackend for FileBackend {
    fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_at(&self.file, buf, offset * PAGE_SIZE)
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        write_at(&self.file, buf, offset * PAGE_SIZE)
    }

    fn kind(&self) -> &'static str {
        "file"
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, pos)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, pos)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(file, buf, pos)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        pos += n as u64;
    }
    Ok(())
}

#[cfg(windows)]
fn write_at(file: &File, mut buf: &[u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, buf, pos)?;
        buf = &buf[n..];
        pos += n as u64;
    }
    Ok(())
}

/// The pages of a swap area of `size_bytes`: a whole number of pages, at
/// least a header and one slot.
pub(crate) fn check_size(size_bytes: u64) -> Result<u64, SwapError> {
    if !size_bytes.is_multiple_of(PAGE_SIZE) || size_bytes < 2 * PAGE_SIZE {
        return Err(SwapError::BadSize(size_bytes));
    }
    Ok(size_bytes / PAGE_SIZE)
}

/// An injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next writes fail with EIO.
    Write,
    /// The next reads fail with EIO.
    Read,
}

/// Wraps a backend and fails the next N reads or writes on request.
pub struct FaultyBackend<B> {
    inner: B,
    failing_writes: AtomicU64,
    failing_reads: AtomicU64,
}

impl<B: SwapBackend> FaultyBackend<B> {
    /// Wraps `inner`, failing nothing yet.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            failing_writes: AtomicU64::new(0),
            failing_reads: AtomicU64::new(0),
        }
    }

    /// Makes the next `count` operations of `kind` fail with EIO.
    pub fn inject(&self, kind: Fault, count: u64) {
        let counter = match kind {
            Fault::Write => &self.failing_writes,
            Fault::Read => &self.failing_reads,
        };
        counter.store(count, Ordering::Relaxed);
    }

    fn take(counter: &AtomicU64) -> bool {
        counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl<B: SwapBackend> SwapBackend for FaultyBackend<B> {
    fn nr_pages(&self) -> u64 {
        self.inner.nr_pages()
    }

    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if Self::take(&self.failing_reads) {
            return Err(io::Error::other("injected read error"));
        }
        self.inner.read_page(offset, buf)
    }

    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if Self::take(&self.failing_writes) {
            return Err(io::Error::other("injected write error"));
        }
        self.inner.write_page(offset, buf)
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn synchronous(&self) -> bool {
        self.inner.synchronous()
    }

    fn metadata_bytes(&self) -> u64 {
        self.inner.metadata_bytes()
    }
}

impl<B: SwapBackend> SwapBackend for Arc<B> {
    fn nr_pages(&self) -> u64 {
        (**self).nr_pages()
    }
    fn read_page(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_page(offset, buf)
    }
    fn write_page(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        (**self).write_page(offset, buf)
    }
    fn kind(&self) -> &'static str {
        (**self).kind()
    }
    fn synchronous(&self) -> bool {
        (**self).synchronous()
    }
    fn metadata_bytes(&self) -> u64 {
        (**self).metadata_bytes()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mm_types::PAGE_BYTES;

    #[test]
    fn file_backend_round_trips_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swapfile");
        let f = FileBackend::open(&path, 64 * PAGE_SIZE).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            64 * PAGE_SIZE,
            "sized"
        );
        let page: Vec<u8> = (0..PAGE_BYTES).map(|i| i as u8).collect();
        f.write_page(9, &page).unwrap();
        let mut back = vec![0u8; PAGE_BYTES];
        f.read_page(9, &mut back).unwrap();
        assert_eq!(back, page);
        drop(f);
        // Reused: an existing file at least as big.
        let again = FileBackend::open(&path, 32 * PAGE_SIZE).unwrap();
        again.read_page(9, &mut back).unwrap();
        assert_eq!(back, page);
    }

    #[test]
    fn faults_are_injected_once_each() {
        let faulty = Arc::new(FaultyBackend::new(RamBackend::new(64 * PAGE_SIZE).unwrap()));
        faulty.inject(Fault::Write, 1);
        assert!(faulty.write_page(1, &[1u8; PAGE_BYTES]).is_err());
        assert!(faulty.write_page(1, &[1u8; PAGE_BYTES]).is_ok());
        faulty.inject(Fault::Read, 2);
        let mut b = [0u8; PAGE_BYTES];
        assert!(faulty.read_page(1, &mut b).is_err());
        assert!(faulty.read_page(1, &mut b).is_err());
        assert!(faulty.read_page(1, &mut b).is_ok());
    }
}
