//! The FUSE filesystem: requests from the kernel turned into calls on the
//! simulator, replies with the kernel's errnos.
//!
//! - Interface files (`CgroupFs::open`) and kernel files (`ProcFs::open`)
//!   are opened per `open(2)`, so per-descriptor state (a `memory.peak`
//!   reset) lives as long as the descriptor. A read at offset 0 renders
//!   the file afresh (as `seq_file` does); later offsets read from that
//!   rendering. Each `write(2)` is one write to the file, and its errno
//!   goes back to the writer (`echo: write error: Device or resource
//!   busy`).
//! - What an interface file needs beyond reading and writing comes from
//!   the library's file table (`OpenFile::props`), never from its name:
//!   whether `poll(2)` waits for the kernel's notification, whether the
//!   exited host processes are pruned before it is served, and whether it
//!   lists or takes pids (in the caller's pid namespace).
//! - Files of `--fs` mounts are read and written through the simulator's
//!   page cache, charged to the memory cgroup of the process making the
//!   request ([`HostProcs`]).
//! - Every file is opened with `FOPEN_DIRECT_IO`, so the host kernel caches
//!   nothing: every read reaches the simulator, and interface files, whose
//!   size is 0 as on cgroupfs, read to their end.
//!
//! Locking: the handle table's mutex is held only to insert, find or
//! remove a handle; each handle has its own mutex for its requests.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno as FuseErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenAccMode, OpenFlags, PollEvents, PollFlags, PollNotifier, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyPoll,
    ReplyWrite, Request, WriteFlags,
};
use memcg::Errno;
use memcg::cgroupfs::{Access, OpenFile, Tasks};
use memcg::procfs::{ProcFile, ProcFs};
use memcg::psi::PressurePoll;
use memcg_sim::{CurrentTask, Sim};

use super::fsfiles;
use super::host::HostProcs;
use super::owners::{Cred, Owners};
use super::pidns::{self, PidNs};
use super::tree::{self, Inodes, Node};

/// How long the kernel may cache a node's name and attributes. The
/// directories, interface files and kernel files: a second, since their
/// attributes never change and the kernel itself forgets a name removed
/// through the mount (a cgroup removed inside the simulator, by a
/// workload, may still resolve for up to a second; opening it then fails
/// with ENOENT). A `--fs` file: not at all, since its size changes under
/// the kernel's feet. Without caching, every path component of every
/// `open` costs a round trip (`cat memory.current` would cost seven).
fn ttl(_node: &Node) -> Duration {
    Duration::from_secs(1)
}

// The largest text one write to an interface file may carry (kernfs's
// `atomic_write_len` for cgroup files: a page; more is `E2BIG`).
use memcg::cgroupfs::MAX_WRITE_BYTES;

fn fuse_errno(errno: Errno) -> FuseErrno {
    FuseErrno::from_i32(errno as i32)
}

/// An open file.
pub(super) enum Handle {
    /// An interface file, and its last rendering.
    Cgroup {
        file: OpenFile,
        rendered: Option<Vec<u8>>,
        /// For a file the kernel notifies (`poll`able): its contents when
        /// opened or last read, to tell whether an event came since.
        seen: Option<String>,
        /// Who opened it: a migration written to it is checked against
        /// the opener's credentials, as the kernel's.
        opener: Cred,
    },
    /// A kernel file (its writer, if opened for writing), and its last
    /// rendering.
    Kernel {
        path: String,
        writer: Option<ProcFile>,
        rendered: Option<Vec<u8>>,
    },
    /// A file of a `--fs` mount.
    File(memcg::fs::File),
    /// A directory's entries as they were at `opendir`.
    Dir(Vec<(u64, FileType, String)>),
    /// A hidden file for the shim, rendered at open (`shim_files`).
    Shim(Vec<u8>),
}

/// What `poll(2)` on a pressure file (`memory.pressure`,
/// `/proc/pressure/memory`) reports, if `handle` is one (`consume` takes
/// a fired trigger's event in).
fn pressure_poll(sim: &Sim, handle: &Handle, consume: bool) -> Option<PressurePoll> {
    match handle {
        Handle::Cgroup { file, .. } => file.pressure_poll(consume),
        Handle::Kernel { path, writer, .. } => {
            sim.procfs().pressure_poll(path, writer.as_ref(), consume)
        }
        _ => None,
    }
}

/// Whether an event came to `handle`'s file since it was opened or last
/// read (`kernfs_generic_poll`'s `of->event != on->event`), or its
/// pressure trigger fired (looked at, not taken in).
fn event_pending(sim: &Sim, handle: &Handle) -> bool {
    if let Some(p) = pressure_poll(sim, handle, false) {
        return p.pri;
    }
    match handle {
        Handle::Cgroup {
            file,
            seen: Some(seen),
            ..
        } => file.read().is_ok_and(|now| now != *seen),
        _ => false,
    }
}

/// Pollers waiting for an event, by file handle: `poll(2)` on an events
/// file sleeps until [`Pollers::check`] (run every
/// [`super::POLL_CHECK_EVERY`]) sees its contents change and wakes it.
#[derive(Default)]
pub(crate) struct Pollers(Mutex<HashMap<u64, Poller>>);

/// A poller waiting: its open file and how to wake it.
type Poller = (Arc<Mutex<Handle>>, PollNotifier);

impl Pollers {
    /// Wakes the pollers whose files had an event.
    pub(crate) fn check(&self, sim: &Sim) {
        let waiting: Vec<(u64, Arc<Mutex<Handle>>)> = lock(&self.0)
            .iter()
            .map(|(&fh, (h, _))| (fh, Arc::clone(h)))
            .collect();
        for (fh, handle) in waiting {
            if event_pending(sim, &lock(&handle))
                && let Some((_, notifier)) = lock(&self.0).remove(&fh)
            {
                // A poller gone meanwhile is no error.
                let _ = notifier.notify();
            }
        }
    }
}

/// The filesystem a mount serves; see the module docs.
pub(crate) struct SimFs {
    sim: Arc<Sim>,
    host: Arc<HostProcs>,
    inodes: Arc<Inodes>,
    handles: Mutex<HashMap<u64, Arc<Mutex<Handle>>>>,
    pollers: Arc<Pollers>,
    next_fh: std::sync::atomic::AtomicU64,
    /// Owners and modes set on cgroup directories and files.
    owners: Owners,
    /// The time every node shows.
    mounted_at: SystemTime,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SimFs {
    pub(crate) fn new(sim: Arc<Sim>, host: Arc<HostProcs>) -> Self {
        Self {
            sim,
            host,
            inodes: Arc::new(Inodes::new()),
            handles: Mutex::new(HashMap::new()),
            pollers: Arc::default(),
            next_fh: std::sync::atomic::AtomicU64::new(1),
            owners: Owners::default(),
            mounted_at: SystemTime::now(),
        }
    }

    /// The pollers, for the thread that wakes them.
    pub(crate) fn pollers(&self) -> Arc<Pollers> {
        Arc::clone(&self.pollers)
    }

    /// The inode table, to tell which file an inode of the mount is.
    pub(crate) fn inodes(&self) -> Arc<Inodes> {
        Arc::clone(&self.inodes)
    }

    pub(super) fn sim(&self) -> &Sim {
        &self.sim
    }

    pub(super) fn inodes_ref(&self) -> &Inodes {
        &self.inodes
    }

    pub(super) fn host_ref(&self) -> &HostProcs {
        &self.host
    }

    /// The path and node of inode `ino`.
    fn node(&self, ino: INodeNo) -> Result<(String, Node), Errno> {
        let path = self.inodes.path(ino.0).ok_or(Errno::ENOENT)?;
        let node = tree::classify(&self.sim, &path).ok_or(Errno::ENOENT)?;
        Ok((path, node))
    }

    /// The path and node of `name` in directory `parent`.
    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<(String, Option<Node>), Errno> {
        let (dir, node) = self.node(parent)?;
        if !node.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        let path = tree::join(&dir, name);
        let child = tree::classify(&self.sim, &path);
        Ok((path, child))
    }

    fn attr(&self, ino: u64, node: &Node) -> FileAttr {
        let (kind, mut perm, size) = match node {
            Node::Dir | Node::Cgroup(_) | Node::Mount(_) => (FileType::Directory, 0o755, 0),
            Node::CgroupFile(path) => (
                FileType::RegularFile,
                self.sim.fs().file_mode(path).unwrap_or(0o444),
                0,
            ),
            Node::Kernel(path) => (FileType::RegularFile, ProcFs::mode(path), 0),
            Node::Shim(node) => node.attr(),
        };
        let (mut uid, mut gid) = (0, 0);
        if let Node::Cgroup(path) | Node::CgroupFile(path) = node
            && let Some(owned) = self.owners.get(path)
        {
            (uid, gid) = (owned.uid, owned.gid);
            perm = owned.perm.unwrap_or(perm);
        }
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid,
            gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Counts a lookup of `path` and replies with its entry.
    fn reply_entry(&self, path: &str, node: &Node, reply: ReplyEntry) {
        let ino = self.inodes.lookup(path);
        reply.entry(&ttl(node), &self.attr(ino, node), Generation(0));
    }

    fn add_handle(&self, handle: Handle) -> FileHandle {
        let fh = self
            .next_fh
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.handles).insert(fh, Arc::new(Mutex::new(handle)));
        FileHandle(fh)
    }

    /// Runs the request as the task of the process making it (the
    /// kernel's `current` in a system call): it runs in its cgroup's
    /// pressure, on its CPU, while served, and stalls there while its
    /// charges reclaim. Nothing for the kernel's own requests and the
    /// server's.
    fn as_requester(&self, req: &Request) -> Option<CurrentTask> {
        let task = self.host.task_of_thread(req.pid())?;
        Some(self.sim.run_as(&task))
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Mutex<Handle>>, Errno> {
        lock(&self.handles).get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    /// Opens `node` for `flags` as the process behind `req`.
    fn open_node(&self, req: &Request, node: &Node, flags: OpenFlags) -> Result<Handle, Errno> {
        let access = match flags.acc_mode() {
            OpenAccMode::O_RDONLY => Access::Read,
            OpenAccMode::O_WRONLY => Access::Write,
            OpenAccMode::O_RDWR => Access::ReadWrite,
        };
        match node {
            Node::CgroupFile(cg_path) => {
                let mut file = self.sim.fs().open(cg_path, access).map_err(|e| e.errno)?;
                // Real-time pressure triggers need CAP_SYS_RESOURCE, which
                // root has (the opener's credentials count).
                if req.uid() != 0 {
                    file.set_privileged(false);
                }
                let seen = match access {
                    Access::Write => None,
                    _ if file.props().notify => file.read().ok(),
                    _ => None,
                };
                Ok(Handle::Cgroup {
                    file,
                    rendered: None,
                    seen,
                    opener: Cred {
                        uid: req.uid(),
                        gid: req.gid(),
                    },
                })
            }
            Node::Kernel(path) => {
                let mut writer = self.sim.procfs().open(path, access)?;
                if req.uid() != 0
                    && let Some(w) = &mut writer
                {
                    w.drop_privileges();
                }
                Ok(Handle::Kernel {
                    path: path.clone(),
                    writer,
                    rendered: None,
                })
            }
            Node::Shim(node) => {
                super::shim_files::open(&self.host, req.pid(), node).map(Handle::Shim)
            }
            Node::Dir | Node::Cgroup(_) | Node::Mount(_) => Err(Errno::EISDIR),
        }
    }

    /// Bytes `offset..offset + size` of a rendering, rendered afresh at
    /// offset 0 or when there is none yet.
    fn rendered_slice(
        rendered: &mut Option<Vec<u8>>,
        offset: u64,
        size: u32,
        render: impl FnOnce() -> Result<String, Errno>,
    ) -> Result<Vec<u8>, Errno> {
        if offset == 0 || rendered.is_none() {
            *rendered = Some(render()?.into_bytes());
        }
        let bytes = rendered.as_deref().unwrap_or_default();
        let start = (offset as usize).min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    fn read_handle(
        &self,
        handle: &mut Handle,
        req: &Request,
        offset: u64,
        size: u32,
    ) -> Result<Vec<u8>, Errno> {
        match handle {
            Handle::Cgroup {
                file,
                rendered,
                seen,
                ..
            } => Self::rendered_slice(rendered, offset, size, || {
                // Contents that show which host processes live: the dead
                // ones are dropped first.
                let tasks = file.props().tasks;
                if offset == 0 && tasks != Tasks::None {
                    self.host.prune();
                }
                let text = file.read().map_err(|e| e.errno)?;
                if seen.is_some() {
                    // Reading takes the event in (`of->event` catches up).
                    *seen = Some(text.clone());
                }
                Ok(match (PidNs::of(req.pid()), tasks) {
                    (Some(ns), Tasks::Ids { .. }) => pidns::pids_as_seen(&ns, &text),
                    _ => text,
                })
            }),
            Handle::Kernel { path, rendered, .. } => {
                Self::rendered_slice(rendered, offset, size, || {
                    self.sim.procfs().read(path).unwrap_or(Err(Errno::ENOENT))
                })
            }
            Handle::File(file) => {
                let memcg = self.host.memcg_of_request(req.pid());
                let mut buf = vec![0; size as usize];
                let n = file
                    .read_at(&memcg, offset, &mut buf)
                    .map_err(|e| e.errno())?;
                buf.truncate(n);
                Ok(buf)
            }
            Handle::Shim(text) => {
                let start = (offset as usize).min(text.len());
                Ok(text[start..start.saturating_add(size as usize).min(text.len())].to_vec())
            }
            Handle::Dir(_) => Err(Errno::EISDIR),
        }
    }

    fn write_handle(
        &self,
        handle: &mut Handle,
        req: &Request,
        offset: u64,
        data: &[u8],
    ) -> Result<u32, Errno> {
        let text = || -> Result<&str, Errno> {
            if data.len() > MAX_WRITE_BYTES {
                return Err(Errno::E2BIG);
            }
            std::str::from_utf8(data).map_err(|_| Errno::EINVAL)
        };
        match handle {
            Handle::Cgroup { file, opener, .. } => {
                if data.len() > MAX_WRITE_BYTES {
                    return Err(Errno::E2BIG);
                }
                // The handler sees a C string (`kernfs_fop_write_iter`):
                // what follows a NUL is never looked at, UTF-8 or not.
                let value = data.split(|&b| b == 0).next().unwrap_or_default();
                let text = std::str::from_utf8(value).map_err(|_| Errno::EINVAL)?;
                match file.props().tasks {
                    Tasks::Ids { threadgroup: true } => {
                        let pid = self.procs_pid(req, text)?;
                        self.check_migration(*opener, file.path(), pid)?;
                        file.write(&pid.to_string()).map_err(|e| e.errno)?;
                    }
                    Tasks::Ids { threadgroup: false } => {
                        let pid = self.threads_pid(req, text)?;
                        self.check_migration(*opener, file.path(), pid)?;
                        file.write(&pid.to_string()).map_err(|e| e.errno)?;
                    }
                    Tasks::WritesAll => {
                        // Every process in the cgroup now, forks included.
                        self.host.prune();
                        file.write(text).map_err(|e| e.errno)?;
                    }
                    Tasks::None | Tasks::ShowsLive => file.write(text).map_err(|e| e.errno)?,
                }
            }
            Handle::Kernel { writer, .. } => {
                let writer = writer.as_ref().ok_or(Errno::EBADF)?;
                self.sim.procfs().write(writer, text()?)?;
            }
            Handle::File(file) => {
                let memcg = self.host.memcg_of_request(req.pid());
                file.write_at(&memcg, offset, data).map_err(|e| e.errno())?;
            }
            Handle::Dir(_) => return Err(Errno::EISDIR),
            // As procfs's read-only files: no write method.
            Handle::Shim(_) => return Err(Errno::EINVAL),
        }
        Ok(data.len() as u32)
    }

    /// The host process a `cgroup.procs` write names (`0`: the writer),
    /// made a task so that the move can find it.
    ///
    /// The pid is read as the kernel reads it ([`memcg::cgroupfs::task_id`]:
    /// decimal, `0x` hex or `0` octal; negative is `EINVAL`), in the
    /// writer's pid namespace; a thread id moves its whole process; a
    /// simulator task (a workload's) moves as it is. Before a host process
    /// moves, its unseen descendants are placed where they were forked, so
    /// they stay behind.
    fn procs_pid(&self, req: &Request, text: &str) -> Result<u32, Errno> {
        let pid = memcg::cgroupfs::task_id(text)?;
        if pid >= memcg_sim::PID_MAX_LIMIT {
            return self.sim.task(pid).map(|t| t.pid()).ok_or(Errno::ESRCH);
        }
        let task = if pid == 0 {
            self.host.task_of_thread(req.pid()).ok_or(Errno::ESRCH)?
        } else {
            self.host.task_to_move(Self::host_pid(req, pid)?)?
        };
        self.host.adopt_descendants_of(task.pid());
        Ok(task.pid())
    }

    /// Host pid of `pid` as the writer of `req` numbers it (its pid
    /// namespace's): `ESRCH` if it has no such pid.
    fn host_pid(req: &Request, pid: u32) -> Result<u32, Errno> {
        match PidNs::of(req.pid()) {
            Some(ns) => ns.host_pid(pid),
            None => Ok(pid),
        }
    }

    /// The task a `cgroup.threads` write names: the process of thread
    /// `tid` (`0`: the writer's), whose threads all share its cgroup, so
    /// the library's domain check gives the thread's answer. Parsed as
    /// [`SimFs::procs_pid`] parses; nothing moves, so nothing is adopted
    /// beyond the process itself. A pinned kernel thread is refused as for
    /// `cgroup.procs` (`cgroup_procs_write_start`, threadgroup or not).
    fn threads_pid(&self, req: &Request, text: &str) -> Result<u32, Errno> {
        let tid = memcg::cgroupfs::task_id(text)?;
        if tid >= memcg_sim::PID_MAX_LIMIT {
            return self.sim.task(tid).map(|t| t.pid()).ok_or(Errno::ESRCH);
        }
        let task = if tid == 0 {
            self.host.task_of_thread(req.pid()).ok_or(Errno::ESRCH)?
        } else {
            self.host.task_to_move(Self::host_pid(req, tid)?)?
        };
        Ok(task.pid())
    }

    /// Removes a cgroup. Busy with tasks, it may hold processes that
    /// exited since the last prune (a cgroup whose processes all exited is
    /// empty): those are dropped and the removal tried again.
    /// Task `pid` moving into the cgroup of `file_path` (its
    /// `cgroup.procs` or `cgroup.threads`), by a file `opener` opened.
    fn check_migration(&self, opener: Cred, file_path: &str, pid: u32) -> Result<(), Errno> {
        if opener.uid == 0 {
            return Ok(());
        }
        let dst = file_path.rsplit_once('/').map_or("/", |(dir, _)| dir);
        let src = self.sim.task(pid).map(|t| t.cgroup().path());
        let src = src.as_deref().unwrap_or("/");
        let perm = self.sim.fs().file_mode("/cgroup.procs").unwrap_or(0o644);
        self.owners.check_migration(opener, src, dst, perm)
    }

    fn rmdir_cgroup(&self, cg: &str) -> Result<(), Errno> {
        let result = self.rmdir_cgroup_once(cg);
        if result.is_ok() {
            self.owners.forget_under(cg);
        }
        result
    }

    fn rmdir_cgroup_once(&self, cg: &str) -> Result<(), Errno> {
        let fs = self.sim.fs();
        match fs.rmdir(cg) {
            Err(e)
                if e.errno == Errno::EBUSY
                    && fs
                        .read(&format!("{cg}/cgroup.procs"))
                        .is_ok_and(|p| !p.is_empty()) =>
            {
                self.host.prune();
                fs.rmdir(cg).map_err(|e| e.errno)
            }
            result => result.map_err(|e| e.errno),
        }
    }

    fn mkdir_node(&self, path: &str, parent: Option<&Node>) -> Result<Node, Errno> {
        match parent {
            Some(Node::Cgroup(cg)) => {
                let child = tree::join(cg, path.rsplit('/').next().unwrap_or(""));
                self.sim.fs().mkdir(&child).map_err(|e| e.errno)?;
                Ok(Node::Cgroup(child))
            }
            // The simulated filesystems are flat; the rest is fixed.
            _ => Err(Errno::EPERM),
        }
    }

    fn list_dir(&self, path: &str, node: &Node) -> Vec<(u64, FileType, String)> {
        let parent = match path.rsplit_once('/') {
            Some(("", _)) | None => "/".to_owned(),
            Some((dir, _)) => dir.to_owned(),
        };
        let mut entries = vec![
            (self.inodes.peek(path), FileType::Directory, ".".to_owned()),
            (
                self.inodes.peek(&parent),
                FileType::Directory,
                "..".to_owned(),
            ),
        ];
        for (name, is_dir) in tree::list(&self.sim, path, node) {
            let kind = if is_dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            entries.push((self.inodes.peek(&tree::join(path, &name)), kind, name));
        }
        entries
    }
}

impl Filesystem for SimFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        // `--fs` files are direct I/O and still mappable (and so
        // executable); a kernel without the flag (before 6.6) maps none.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if let Some(dir) = self.fs_node(parent) {
            return match self.fs_lookup(&dir, name) {
                Ok((ttl, attr)) => reply.entry(&ttl, &attr, Generation(0)),
                Err(e) => reply.error(fuse_errno(e)),
            };
        }
        match self.child(parent, name) {
            Ok((path, Some(node))) => self.reply_entry(&path, &node, reply),
            Ok((_, None)) => reply.error(FuseErrno::ENOENT),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(at) = self.fs_node(ino) {
            return match self.fs_getattr(&at) {
                Ok((ttl, attr)) => reply.attr(&ttl, &attr),
                Err(e) => reply.error(fuse_errno(e)),
            };
        }
        match self.node(ino) {
            Ok((_, node)) => reply.attr(&ttl(&node), &self.attr(ino.0, &node)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<fuser::TimeOrNow>,
        mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = if let Some(at) = self.fs_node(ino) {
            let _current = self.as_requester(req);
            let attr = fsfiles::set_attr(mode, uid, gid, atime, mtime);
            fh.map(|fh| self.handle(fh))
                .transpose()
                .and_then(|handle| self.fs_setattr(req, &at, handle, size, attr))
        } else {
            // `>` truncates: meaningless on interface and kernel files, as
            // on cgroupfs and procfs. A cgroup's directory and files keep
            // an owner and mode set (kernfs's `iattr`); the rest are fixed.
            self.node(ino).map(|(_, node)| {
                if let Node::Cgroup(path) | Node::CgroupFile(path) = &node {
                    let perm = mode.map(|m| (m & 0o7777) as u16);
                    self.owners.set(path, uid, gid, perm);
                }
                self.attr(ino.0, &node)
            })
        };
        match result {
            Ok(attr) => reply.attr(&Duration::ZERO, &attr),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        if let Some(dir) = self.fs_node(parent) {
            return match self.fs_mkdir(req, &dir, name, mode, umask) {
                Ok(attr) => reply.entry(
                    &fsfiles::fs_ttl(memcg::fs::FileKind::Directory),
                    &attr,
                    Generation(0),
                ),
                Err(e) => reply.error(fuse_errno(e)),
            };
        }
        let result = self.child(parent, name).and_then(|(path, existing)| {
            if existing.is_some() {
                return Err(Errno::EEXIST);
            }
            let parent_node = self.node(parent).ok().map(|(_, n)| n);
            let node = self.mkdir_node(&path, parent_node.as_ref())?;
            Ok((path, node))
        });
        match result {
            Ok((path, node)) => self.reply_entry(&path, &node, reply),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = if let Some(dir) = self.fs_node(parent) {
            self.fs_rmdir(&dir, name)
        } else {
            self.child(parent, name).and_then(|(_, node)| match node {
                Some(Node::Cgroup(cg)) => self.rmdir_cgroup(&cg),
                // A mount point is busy; the fixed directories cannot go.
                Some(Node::Mount(_)) => Err(Errno::EBUSY),
                Some(Node::Dir | Node::Shim(_)) => Err(Errno::EPERM),
                Some(_) => Err(Errno::ENOTDIR),
                None => Err(Errno::ENOENT),
            })
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = if let Some(dir) = self.fs_node(parent) {
            self.fs_unlink(&dir, name)
        } else {
            self.child(parent, name).and_then(|(_, node)| match node {
                // cgroupfs, procfs and sysfs files cannot be removed.
                Some(Node::CgroupFile(_) | Node::Kernel(_)) => Err(Errno::EPERM),
                Some(_) => Err(Errno::EISDIR),
                None => Err(Errno::ENOENT),
            })
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        // Links are made in `--fs` filesystems only, as on cgroupfs.
        let result = match self.fs_node(parent) {
            Some(dir) => self.fs_symlink(req, &dir, link_name, target),
            None => Err(Errno::EPERM),
        };
        match result {
            Ok(attr) => reply.entry(
                &fsfiles::fs_ttl(memcg::fs::FileKind::Symlink),
                &attr,
                Generation(0),
            ),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs_node(ino).map(|at| self.fs_readlink(&at)) {
            Some(Ok(target)) => reply.data(target.as_bytes()),
            Some(Err(e)) => reply.error(fuse_errno(e)),
            None => reply.error(FuseErrno::EINVAL),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let result = match (self.fs_node(ino), self.fs_node(newparent)) {
            (Some(at), Some(dir)) => self.fs_link(&at, &dir, newname),
            (Some(_), None) | (None, Some(_)) => Err(Errno::EXDEV),
            (None, None) => Err(Errno::EPERM),
        };
        match result {
            Ok(attr) => reply.entry(&Duration::ZERO, &attr, Generation(0)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        // Within one `--fs` filesystem; between two, or a `--fs` and the
        // rest, EXDEV (`mv` copies and removes). cgroup2 refuses renames
        // (`cgroup_rename`: EPERM), as do the fixed directories.
        let result = match (self.fs_node(parent), self.fs_node(newparent)) {
            (Some(dir), Some(new_dir)) => self.fs_rename(&dir, name, &new_dir, newname, flags),
            (Some(_), None) | (None, Some(_)) => Err(Errno::EXDEV),
            (None, None) => Err(Errno::EPERM),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: neither kernfs nor the simulated
        // filesystems make devices or pipes.
        let result = match self.fs_node(parent) {
            Some(dir) if mode & libc::S_IFMT == libc::S_IFREG => {
                let _current = self.as_requester(req);
                self.fs_create(req, &dir, name, mode, umask, libc::O_EXCL)
                    .map(|(attr, _)| attr)
            }
            _ => Err(Errno::EPERM),
        };
        match result {
            Ok(attr) => reply.entry(&Duration::ZERO, &attr, Generation(0)),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // The opener becomes a task (where fork put it), so that it lists
        // in its cgroup's `cgroup.procs` as it would on a real machine.
        let _current = self.as_requester(req);
        let result = match self.fs_node(ino) {
            Some(at) => self.fs_open(req, &at, flags.0),
            None => self
                .node(ino)
                .and_then(|(_, node)| self.open_node(req, &node, flags)),
        };
        match result {
            Ok(handle) => reply.opened(self.add_handle(handle), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _current = self.as_requester(req);
        // Files are made in `--fs` mounts only: cgroupfs, procfs and
        // sysfs create none (`O_CREAT` there is EACCES).
        let result = match self.fs_node(parent) {
            Some(dir) => self.fs_create(req, &dir, name, mode, umask, flags),
            None => Err(Errno::EACCES),
        };
        match result {
            Ok((attr, handle)) => {
                let fh = self.add_handle(handle);
                reply.created(
                    &Duration::ZERO,
                    &attr,
                    Generation(0),
                    fh,
                    FopenFlags::FOPEN_DIRECT_IO,
                );
            }
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _current = self.as_requester(req);
        let result = self
            .handle(fh)
            .and_then(|h| self.read_handle(&mut lock(&h), req, offset, size));
        match result {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _current = self.as_requester(req);
        let result = self
            .handle(fh)
            .and_then(|h| self.write_handle(&mut lock(&h), req, offset, data));
        match result {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: fuser::ReplyStatfs) {
        // A `--fs` filesystem shows its disk (a host directory: the
        // host's); the rest, like cgroupfs and procfs, nothing.
        match self.fs_node(ino).map(|at| self.fs_statfs(&at)) {
            Some(st) => reply.statfs(
                st.blocks,
                st.bfree,
                st.bfree,
                st.files,
                st.ffree,
                4096,
                memcg::fs::NAME_MAX as u32,
                4096,
            ),
            None => reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let result = match self.fs_node(ino) {
            Some(at) => self.fs_fsync(&at),
            None => Ok(()),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _current = self.as_requester(req);
        let result = self
            .handle(fh)
            .and_then(|h| self.fs_fallocate(req, &lock(&h), offset, length, mode));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.handles).remove(&fh.0);
        lock(&self.pollers.0).remove(&fh.0);
        reply.ok();
    }

    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        _events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) {
        let handle = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(fuse_errno(e)),
        };
        // kernfs: always readable and writable; an event since the last
        // read adds POLLERR and POLLPRI. A pressure file
        // (`psi_trigger_poll`): POLLPRI once per fired trigger, taken in
        // by this poll; POLLERR | POLLPRI without a trigger.
        let mut revents = PollEvents::POLLIN
            | PollEvents::POLLRDNORM
            | PollEvents::POLLOUT
            | PollEvents::POLLWRNORM;
        let pending = {
            let guard = lock(&handle);
            match pressure_poll(&self.sim, &guard, true) {
                Some(p) => {
                    if p.err {
                        revents |= PollEvents::POLLERR;
                    }
                    p.pri
                }
                None => {
                    let pending = event_pending(&self.sim, &guard);
                    if pending {
                        revents |= PollEvents::POLLERR;
                    }
                    pending
                }
            }
        };
        if pending {
            revents |= PollEvents::POLLPRI;
        } else if flags.contains(PollFlags::FUSE_POLL_SCHEDULE_NOTIFY) {
            lock(&self.pollers.0).insert(fh.0, (handle, ph));
        }
        reply.poll(revents);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let entries = match self.fs_node(ino) {
            Some(at) => self.fs_opendir(&at),
            None => match self.node(ino) {
                Ok((path, node)) if node.is_dir() => Ok(self.list_dir(&path, &node)),
                Ok(_) => Err(Errno::ENOTDIR),
                Err(e) => Err(e),
            },
        };
        match entries {
            Ok(entries) => {
                reply.opened(self.add_handle(Handle::Dir(entries)), FopenFlags::empty());
            }
            Err(e) => reply.error(fuse_errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let handle = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(fuse_errno(e)),
        };
        let mut guard = lock(&handle);
        // Offsets index the listing taken at `opendir`; reading from 0
        // again (`rewinddir`) takes a fresh one of a `--fs` directory.
        if offset == 0
            && let Some(Ok(fresh)) = self.fs_node(ino).map(|at| self.fs_list(&at))
        {
            *guard = Handle::Dir(fresh);
        }
        let Handle::Dir(entries) = &*guard else {
            return reply.error(FuseErrno::ENOTDIR);
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.handles).remove(&fh.0);
        if let Some(at) = self.fs_node(ino) {
            at.sb.releasedir(at.ino);
        }
        reply.ok();
    }
}
