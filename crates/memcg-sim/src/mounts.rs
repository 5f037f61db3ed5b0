//! Files on the machine's mounts read and written as a task: a read or
//! write "as a task of a cgroup" runs as the task running on the calling
//! thread if there is one ([`Sim::run_as`]), else as a short-lived task of
//! that cgroup that nobody lists, the way a shell's `cat` would: it runs,
//! and stalls on reclaim, in the cgroup's pressure. The mount table itself
//! is the machine's ([`memcg::machine::Machine::mount`]).

use std::sync::Arc;

use memcg::fs::{FsError as VfsError, ReadCalls, Superblock};
use memcg::machine::MountError;

use crate::{Sim, SimError};

/// Wraps a filesystem error with the path it happened on.
fn vfs(path: impl Into<String>) -> impl FnOnce(VfsError) -> SimError {
    let path = path.into();
    move |source| MountError::vfs(path, source).into()
}

impl Sim {
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

    /// The superblock of the file at `path` and the file's name in it.
    fn file(&self, path: &str) -> Result<(Arc<Superblock>, String), SimError> {
        Ok(self.machine().file(path)?)
    }
}
