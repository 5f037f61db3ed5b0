//! Filesystems mounted in the simulated machine: the mount table, paths
//! under a mount resolved to a superblock and a file name, reads and
//! writes charged to a cgroup, `sync`, `drop_caches`, and the flushers
//! (inline, run by the tasks that wake them and by [`Sim::run_flushers`]
//! on the shell's clock; or, once [`Sim::start_flusher_threads`] is
//! called, a thread per mount).
//!
//! Each mount's superblock has one backing device ([`Superblock::bdi`]):
//! its flusher writes the mount's dirty pages back, and its `read_ahead_kb`
//! sizes the mount's readahead. The device is named as the kernel names
//! the device of a filesystem without a block device (`0:N`, the lowest
//! minor free, as `get_anon_bdev`): `/sys/class/bdi/0:N/read_ahead_kb`
//! ([`Sim::bdi_names`]).
//!
//! A read or write "as a task of a cgroup" runs as the task running on
//! the calling thread if there is one ([`Sim::run_as`]), else as a
//! short-lived task of that cgroup that nobody lists, the way a shell's
//! `cat` would: it runs, and stalls on reclaim, in the cgroup's pressure.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use memcg::Errno;
use memcg::fs::{FsError as VfsError, FsSource, ReadCalls, Superblock, drop_caches};

use crate::{Sim, SimError, lock};

/// The mount table: mount point → superblock and its device's minor.
#[derive(Default)]
pub(crate) struct Mounts {
    table: Mutex<BTreeMap<String, (Arc<Superblock>, u32)>>,
    /// Every mount's flusher has a thread of its own.
    flusher_threads: AtomicBool,
}

/// Why a mount-table operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    /// Something is mounted there already, or under it, or above it.
    #[error("{0}: a filesystem is mounted there, above it or below it")]
    Busy(String),
    /// Nothing is mounted there.
    #[error("{0}: not mounted")]
    NotMounted(String),
    /// A mount point must be an absolute path below `/`, outside the
    /// cgroup tree and `/proc`.
    #[error(
        "{0}: not a usable mount point (mount points are absolute paths below /, outside /sys/fs/cgroup and /proc, which the machine's own files take)"
    )]
    BadMountPoint(String),
    /// The path is not under a mount.
    #[error("{0}: no such file (not under a mount)")]
    NotAFile(String),
    /// The filesystem refused.
    #[error("{path}: {source}")]
    Vfs {
        /// The path.
        path: String,
        /// Why (boxed: it is large and rare).
        source: Box<VfsError>,
    },
}

impl MountError {
    /// The errno a system call would return.
    pub fn errno(&self) -> Errno {
        match self {
            MountError::Busy(_) => Errno::EBUSY,
            MountError::NotMounted(_) | MountError::BadMountPoint(_) => Errno::EINVAL,
            MountError::NotAFile(_) => Errno::ENOENT,
            MountError::Vfs { source, .. } => source.errno(),
        }
    }
}

/// Wraps a filesystem error with the path it happened on.
fn vfs(path: impl Into<String>) -> impl FnOnce(VfsError) -> SimError {
    let path = path.into();
    move |source| {
        MountError::Vfs {
            path,
            source: Box::new(source),
        }
        .into()
    }
}

/// `dir` without trailing slashes.
fn normalize(dir: &str) -> String {
    let trimmed = dir.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_owned()
    } else {
        trimmed.to_owned()
    }
}

impl Sim {
    /// Mounts a filesystem on `source` at `dir` (`mount`), its caches on
    /// list_lrus of the simulation's design.
    pub fn mount(&self, dir: &str, source: FsSource) -> Result<(), SimError> {
        let dir = normalize(dir);
        if !dir.starts_with('/')
            || dir == "/"
            || dir.starts_with("/sys/fs/cgroup")
            || dir.starts_with("/proc")
        {
            return Err(MountError::BadMountPoint(dir).into());
        }
        let mut table = lock(&self.inner.mounts.table);
        let overlaps = table.keys().any(|m| {
            *m == dir || dir.starts_with(&format!("{m}/")) || m.starts_with(&format!("{dir}/"))
        });
        if overlaps {
            return Err(MountError::Busy(dir).into());
        }
        let weak = Arc::downgrade(&self.inner);
        let swap = Arc::new(move || weak.upgrade().map(|i| i.swap_space()).unwrap_or_default());
        let sb = Superblock::mount(self.fs().tree(), source, self.inner.lru_design, swap)
            .map_err(vfs(dir.clone()))?;
        // Relaxed: a setting made before the machine is served.
        if self.inner.mounts.flusher_threads.load(Ordering::Relaxed) {
            sb.start_flusher_thread().map_err(vfs(dir.clone()))?;
        }
        let minor = (1..)
            .find(|m| table.values().all(|(_, used)| used != m))
            .expect("fewer mounts than minors");
        table.insert(dir, (sb, minor));
        Ok(())
    }

    /// Gives every mount's flusher, now and from now on, a thread of its
    /// own (a machine served on the real clock: the FUSE server), instead
    /// of running inline in the tasks that wake it.
    pub fn start_flusher_threads(&self) -> Result<(), SimError> {
        // Relaxed: see `mount`.
        self.inner
            .mounts
            .flusher_threads
            .store(true, Ordering::Relaxed);
        for (dir, sb) in self.mounts() {
            sb.start_flusher_thread().map_err(vfs(dir))?;
        }
        Ok(())
    }

    /// Runs the flushers' periodic writeback that came due on the machine's
    /// clock (`dirty_writeback_centisecs`, `dirty_expire_centisecs`): for a
    /// caller that moved simulated time on, as the shell's `sleep` does.
    pub fn run_flushers(&self) {
        memcg::page_writeback::run_due_flushers(self.fs().tree());
    }

    /// Unmounts `dir` (`umount`): `EBUSY` while a file is open.
    pub fn umount(&self, dir: &str) -> Result<(), SimError> {
        let dir = normalize(dir);
        let sb = lock(&self.inner.mounts.table)
            .get(&dir)
            .map(|(sb, _)| Arc::clone(sb))
            .ok_or_else(|| MountError::NotMounted(dir.clone()))?;
        sb.unmount().map_err(vfs(dir.clone()))?;
        lock(&self.inner.mounts.table).remove(&dir);
        Ok(())
    }

    /// The mounts, by mount point.
    pub fn mounts(&self) -> Vec<(String, Arc<Superblock>)> {
        lock(&self.inner.mounts.table)
            .iter()
            .map(|(d, (sb, _))| (d.clone(), Arc::clone(sb)))
            .collect()
    }

    /// The backing devices of the mounts, by mount point: their names in
    /// `/sys/class/bdi` (`0:N`).
    pub fn bdi_names(&self) -> Vec<(String, String)> {
        lock(&self.inner.mounts.table)
            .iter()
            .map(|(d, (_, minor))| (d.clone(), format!("0:{minor}")))
            .collect()
    }

    /// The superblock whose backing device is `bdi` (`0:N`).
    pub fn bdi(&self, bdi: &str) -> Option<Arc<Superblock>> {
        let minor: u32 = bdi.strip_prefix("0:")?.parse().ok()?;
        lock(&self.inner.mounts.table)
            .values()
            .find(|(_, m)| *m == minor)
            .map(|(sb, _)| Arc::clone(sb))
    }

    /// The superblock a path is under, and the rest of the path (`""` for
    /// the mount point itself).
    pub fn resolve_file(&self, path: &str) -> Option<(Arc<Superblock>, String)> {
        let path = normalize(path);
        lock(&self.inner.mounts.table)
            .iter()
            .find_map(|(dir, (sb, _))| {
                if path == *dir {
                    return Some((Arc::clone(sb), String::new()));
                }
                let rest = path.strip_prefix(dir.as_str())?.strip_prefix('/')?;
                Some((Arc::clone(sb), rest.to_owned()))
            })
    }

    fn file(&self, path: &str) -> Result<(Arc<Superblock>, String), SimError> {
        match self.resolve_file(path) {
            Some((sb, name)) if !name.is_empty() => Ok((sb, name)),
            _ => Err(MountError::NotAFile(path.to_owned()).into()),
        }
    }

    /// Writes `data` as the whole content of the file at `path`, as a task
    /// of `cgroup` would: page cache and slab are charged there.
    pub fn write_file(&self, cgroup: &str, path: &str, data: &[u8]) -> Result<(), SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let (sb, name) = self.file(path)?;
        sb.write(&memcg, &name, data).map_err(vfs(path.to_owned()))
    }

    /// Writes `size_bytes` as the whole content of the file at `path`, as a
    /// task of `cgroup` would, asking `produce` for the bytes in order.
    pub fn write_file_with(
        &self,
        cgroup: &str,
        path: &str,
        size_bytes: u64,
        produce: impl FnMut(&mut [u8]),
    ) -> Result<(), SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let (sb, name) = self.file(path)?;
        sb.write_with(&memcg, &name, size_bytes, produce)
            .map_err(vfs(path.to_owned()))
    }

    /// Reads the whole file at `path` as a task of `cgroup` would, handing
    /// it to `sink` in order; returns its size.
    pub fn read_file_with(
        &self,
        cgroup: &str,
        path: &str,
        sink: impl FnMut(&[u8]),
    ) -> Result<u64, SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let (sb, name) = self.file(path)?;
        sb.read_with(&memcg, &name, sink)
            .map_err(vfs(path.to_owned()))
    }

    /// Reads the file at `path` as a task of `cgroup` would, with the
    /// `read(2)` calls `calls` describes on one open file, handing what
    /// they return to `sink`; returns the bytes read.
    pub fn read_file_calls(
        &self,
        cgroup: &str,
        path: &str,
        calls: ReadCalls,
        sink: impl FnMut(&[u8]),
    ) -> Result<u64, SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let (sb, name) = self.file(path)?;
        sb.read_calls(&memcg, &name, calls, sink)
            .map_err(vfs(path.to_owned()))
    }

    /// Reads the whole file at `path` as a task of `cgroup` would.
    pub fn read_file(&self, cgroup: &str, path: &str) -> Result<Vec<u8>, SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let (sb, name) = self.file(path)?;
        sb.read(&memcg, &name).map_err(vfs(path.to_owned()))
    }

    /// Creates the file at `path` empty if it is missing, as a task of
    /// `cgroup` would, and extends it to `size_bytes` with a hole
    /// (`ftruncate`).
    pub fn extend_file(&self, cgroup: &str, path: &str, size_bytes: u64) -> Result<(), SimError> {
        let (sb, name) = self.file(path)?;
        if sb.size_of(&name).is_err() {
            self.write_file(cgroup, path, &[])?;
        }
        sb.extend(&name, size_bytes).map_err(vfs(path.to_owned()))
    }

    /// Removes the file at `path`.
    pub fn remove_file(&self, path: &str) -> Result<(), SimError> {
        let (sb, name) = self.file(path)?;
        sb.unlink(&name).map_err(vfs(path.to_owned()))
    }

    /// Writes every dirty page of every mount back and waits for it
    /// (`sync(2)`: each mount's `syncfs`); returns the pages written.
    pub fn sync(&self) -> Result<u64, SimError> {
        let mut written = 0;
        for (dir, sb) in self.mounts() {
            written += sb.sync().map_err(vfs(dir))?;
        }
        Ok(written)
    }

    /// `echo MODE > /proc/sys/vm/drop_caches` (1..=4, else `EINVAL`; 4
    /// only silences the kernel's log line, so it drops nothing): returns
    /// (pages dropped, slab objects freed).
    pub fn drop_caches(&self, mode: u32) -> Result<(u64, u64), Errno> {
        if !(1..=4).contains(&mode) {
            return Err(Errno::EINVAL);
        }
        let supers: Vec<Arc<Superblock>> = self.mounts().into_iter().map(|(_, sb)| sb).collect();
        Ok(drop_caches(self.fs().tree(), &supers, mode))
    }
}
