//! Filesystems mounted in the machine: the mount table, paths under a
//! mount resolved to a superblock and a file name, `sync`, `drop_caches`,
//! and the flushers (inline, run by the tasks that wake them and by
//! [`Machine::run_flushers`] on the caller's clock; or, once
//! [`Machine::start_flusher_threads`] is called, a thread per mount).
//!
//! Each mount's superblock has one backing device ([`Superblock::bdi`]):
//! its flusher writes the mount's dirty pages back, and its `read_ahead_kb`
//! sizes the mount's readahead. The device is named as the kernel names
//! the device of a filesystem without a block device (`0:N`, the lowest
//! minor free, as `get_anon_bdev`): `/sys/class/bdi/0:N/read_ahead_kb`
//! ([`Machine::bdi_names`]).
//!
//! Reading and writing files is a task's doing: the process side (the
//! simulator) resolves a path with [`Machine::file`] and charges the
//! superblock's reads and writes to its task's memory cgroup.
//!
//! Locking: the table is behind one mutex, held for a lookup, an insertion
//! or a removal only (a mount's superblock is built under it, so two
//! mounts at one point cannot both succeed).

use std::collections::BTreeMap;

use super::Machine;
use crate::errno::Errno;
use crate::fs::{FsError as VfsError, FsSource, Superblock, drop_caches};
use crate::list_lru::LruDesign;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering, lock};

/// The mount table: mount point → superblock and its device's minor.
pub(super) struct Mounts {
    table: Mutex<BTreeMap<String, (Arc<Superblock>, u32)>>,
    /// Every mount's flusher has a thread of its own.
    flusher_threads: AtomicBool,
    /// The list_lru design of the mounts' dentry and inode caches.
    lru_design: LruDesign,
}

impl Mounts {
    /// An empty table; mounts' caches will be on `lru_design` list_lrus.
    pub(super) fn new(lru_design: LruDesign) -> Self {
        Self {
            table: Mutex::new(BTreeMap::new()),
            flusher_threads: AtomicBool::new(false),
            lru_design,
        }
    }
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

    /// A filesystem error on `path`.
    pub fn vfs(path: impl Into<String>, source: VfsError) -> Self {
        MountError::Vfs {
            path: path.into(),
            source: Box::new(source),
        }
    }
}

/// Wraps a filesystem error with the path it happened on.
fn vfs(path: impl Into<String>) -> impl FnOnce(VfsError) -> MountError {
    let path = path.into();
    move |source| MountError::vfs(path, source)
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

impl Machine {
    /// Mounts a filesystem on `source` at `dir` (`mount`), its caches on
    /// list_lrus of the machine's design.
    pub fn mount(&self, dir: &str, source: FsSource) -> Result<(), MountError> {
        let dir = normalize(dir);
        if !dir.starts_with('/')
            || dir == "/"
            || dir.starts_with("/sys/fs/cgroup")
            || dir.starts_with("/proc")
        {
            return Err(MountError::BadMountPoint(dir));
        }
        let mut table = lock(&self.mounts.table);
        let overlaps = table.keys().any(|m| {
            *m == dir || dir.starts_with(&format!("{m}/")) || m.starts_with(&format!("{dir}/"))
        });
        if overlaps {
            return Err(MountError::Busy(dir));
        }
        let weak = Arc::downgrade(&self.swap);
        let swap = Arc::new(move || weak.upgrade().map(|s| s.swap_space()).unwrap_or_default());
        let sb = Superblock::mount(self.tree(), source, self.mounts.lru_design, swap)
            .map_err(vfs(dir.clone()))?;
        // Relaxed: a setting made before the machine is served.
        if self.mounts.flusher_threads.load(Ordering::Relaxed) {
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
    pub fn start_flusher_threads(&self) -> Result<(), MountError> {
        // Relaxed: see `mount`.
        self.mounts.flusher_threads.store(true, Ordering::Relaxed);
        for (dir, sb) in self.mounts() {
            sb.start_flusher_thread().map_err(vfs(dir))?;
        }
        Ok(())
    }

    /// Runs the flushers' periodic writeback that came due on the machine's
    /// clock (`dirty_writeback_centisecs`, `dirty_expire_centisecs`): for a
    /// caller that moved simulated time on, as the shell's `sleep` does.
    pub fn run_flushers(&self) {
        crate::page_writeback::run_due_flushers(self.tree());
    }

    /// Unmounts `dir` (`umount`): `EBUSY` while a file is open.
    pub fn umount(&self, dir: &str) -> Result<(), MountError> {
        let dir = normalize(dir);
        let sb = lock(&self.mounts.table)
            .get(&dir)
            .map(|(sb, _)| Arc::clone(sb))
            .ok_or_else(|| MountError::NotMounted(dir.clone()))?;
        sb.unmount().map_err(vfs(dir.clone()))?;
        lock(&self.mounts.table).remove(&dir);
        Ok(())
    }

    /// The mounts, by mount point.
    pub fn mounts(&self) -> Vec<(String, Arc<Superblock>)> {
        lock(&self.mounts.table)
            .iter()
            .map(|(d, (sb, _))| (d.clone(), Arc::clone(sb)))
            .collect()
    }

    /// The backing devices of the mounts, by mount point: their names in
    /// `/sys/class/bdi` (`0:N`).
    pub fn bdi_names(&self) -> Vec<(String, String)> {
        lock(&self.mounts.table)
            .iter()
            .map(|(d, (_, minor))| (d.clone(), format!("0:{minor}")))
            .collect()
    }

    /// The superblock whose backing device is `bdi` (`0:N`).
    pub fn bdi(&self, bdi: &str) -> Option<Arc<Superblock>> {
        let minor: u32 = bdi.strip_prefix("0:")?.parse().ok()?;
        lock(&self.mounts.table)
            .values()
            .find(|(_, m)| *m == minor)
            .map(|(sb, _)| Arc::clone(sb))
    }

    /// The superblock a path is under, and the rest of the path (`""` for
    /// the mount point itself).
    pub fn resolve_file(&self, path: &str) -> Option<(Arc<Superblock>, String)> {
        let path = normalize(path);
        lock(&self.mounts.table).iter().find_map(|(dir, (sb, _))| {
            if path == *dir {
                return Some((Arc::clone(sb), String::new()));
            }
            let rest = path.strip_prefix(dir.as_str())?.strip_prefix('/')?;
            Some((Arc::clone(sb), rest.to_owned()))
        })
    }

    /// The superblock of the file at `path` and the file's name in it
    /// (`NotAFile` for a mount point or a path under none).
    pub fn file(&self, path: &str) -> Result<(Arc<Superblock>, String), MountError> {
        match self.resolve_file(path) {
            Some((sb, name)) if !name.is_empty() => Ok((sb, name)),
            _ => Err(MountError::NotAFile(path.to_owned())),
        }
    }

    /// Writes every dirty page of every mount back and waits for it
    /// (`sync(2)`: each mount's `syncfs`); returns the pages written.
    pub fn sync(&self) -> Result<u64, MountError> {
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
        Ok(drop_caches(self.tree(), &supers, mode))
    }
}
