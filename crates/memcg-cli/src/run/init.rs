//! The init of `memcg run`'s pid namespace: pid 1 there, CMD's parent.
//!
//! The server forks it into a new pid namespace while still single
//! threaded, before anything is mounted or created; until the machine is
//! up it only listens on the channel ([`super::channel`]). At `Go` it
//! takes a mount namespace of its own (a copy of the server's, with the
//! machine's files bound), mounts the namespace's own procfs on `/proc`
//! (pids there are the namespace's) with the machine's `/proc` files bound
//! over it again, installs the sync filter ([`super::seccomp`]), answers
//! `Ready`, starts CMD and leaves the server's process group (so that
//! what kills that whole group leaves it to clean up; CMD stays in the
//! group, which may own the terminal).
//!
//! Then it reaps every process of the namespace (orphans come to it),
//! forwards to CMD each signal the server passes on, and when CMD ends
//! exits with CMD's status (128 + N for a signal N). The kernel then kills
//! whatever is left in the namespace. If the server dies instead (its end
//! of the channel closes: SIGKILL, a crash), the init kills everything in
//! the namespace, reaps it, removes the directories the server created
//! for `--fs`, and exits.
//!
//! The init is single-threaded: signals it takes (`SIGCHLD` and those a
//! group kill may send it) are blocked and read from a signalfd; the
//! ones sent to it directly are dropped (the server's are the ones that
//! reach CMD). CMD starts with no signal blocked.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::channel::{ToInit, ToServer};
use super::{c_path, last_os_error, seccomp};

/// How CMD is started: its environment's additions (the shim's), and the
/// shim's directory, which the init removes should the server die.
#[derive(Default)]
pub(super) struct Launch {
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) shim_dir: Option<PathBuf>,
}

/// The server's handle of the init.
pub(super) struct Init {
    pid: libc::pid_t,
    channel: UnixStream,
}

/// The signals the init reads from its signalfd.
fn init_signals() -> libc::sigset_t {
    signal_set(&[
        libc::SIGCHLD,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
    ])
}

/// A signal set of `signals`.
pub(super) fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: `sigemptyset` initialises the set; `sigaddset` of valid
    // signal numbers cannot fail.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

impl Init {
    /// Forks the init of a new pid namespace, to run `cmd` when told.
    /// Must be called while this process has a single thread.
    pub(super) fn start(cmd: Vec<OsString>, launch: Launch) -> anyhow::Result<Self> {
        let (server_end, init_end) = UnixStream::pair().context("the init's channel")?;
        let own_ns = File::open("/proc/self/ns/pid").context("/proc/self/ns/pid")?;
        // SAFETY: changes where this process's next child goes; undone
        // below (threads could not be made while it holds).
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            return Err(last_os_error("unshare(CLONE_NEWPID)"));
        }
        // SAFETY: single-threaded (the caller's contract), so the child
        // may go on running Rust code.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop((server_end, own_ns));
            let status = std::panic::catch_unwind(|| run(&init_end, cmd, &launch)).unwrap_or(1);
            // SAFETY: ending the forked child without running the
            // server's exit handlers.
            unsafe { libc::_exit(status) }
        }
        let forked = io::Error::last_os_error();
        // SAFETY: back to this process's own pid namespace for its
        // children (and threads, which need it).
        if unsafe { libc::setns(own_ns.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
            return Err(last_os_error("setns(CLONE_NEWPID)"));
        }
        if pid < 0 {
            return Err(forked).context("forking the init");
        }
        Ok(Self {
            pid,
            channel: server_end,
        })
    }

    /// Tells the init the server created `dir` (to remove it, should the
    /// server die).
    pub(super) fn created(&self, dir: &Path) -> anyhow::Result<()> {
        ToInit::Created(dir.to_owned())
            .send(&self.channel)
            .context("the init is gone")
    }

    /// Tells the init the machine is up; returns the sync listener it
    /// made, taken into this process (`None`: none, or the init failed,
    /// which [`Init::wait`] then tells).
    pub(super) fn go(&self, fuse_dev: u64) -> Option<OwnedFd> {
        ToInit::Go { fuse_dev }.send(&self.channel).ok()?;
        let Ok(Some(ToServer::Ready { listener })) = ToServer::receive(&self.channel) else {
            return None;
        };
        match seccomp::take_fd(self.pid, listener?) {
            Ok(fd) => Some(fd),
            Err(e) => {
                eprintln!(
                    "memcg run: warning: sync(2) and syncfs(2) will not reach the simulated \
                     filesystems (pidfd_getfd: {e})"
                );
                None
            }
        }
    }

    /// A second handle of the channel, to forward signals on.
    pub(super) fn forwarder(&self) -> io::Result<UnixStream> {
        self.channel.try_clone()
    }

    /// The machine could not be set up: closes the channel, so that the
    /// init removes what was made and ends, and waits for it.
    pub(super) fn abandon(self) {
        let Self { pid, channel } = self;
        drop(channel);
        Self::reap(pid);
    }

    /// Waits for the init to end: CMD's status (128 + N for a signal N, as
    /// for the init itself killed).
    pub(super) fn wait(self) -> i32 {
        Self::reap(self.pid)
    }

    /// Reaps the init: its status as a shell reports it.
    fn reap(pid: libc::pid_t) -> i32 {
        let mut status = 0;
        loop {
            // SAFETY: reaping our own child, which nothing else waits for.
            let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
            if rc >= 0 {
                return exit_status(status);
            }
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return 1;
            }
        }
    }
}

/// A `waitpid` status as a shell reports it.
fn exit_status(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// The init's life; returns its exit status.
fn run(channel: &UnixStream, cmd: Vec<OsString>, launch: &Launch) -> i32 {
    let signals = init_signals();
    // SAFETY: blocking signals of this single-threaded process.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut());
    }
    let mut created = Vec::new();
    let remove_made = |created: &[PathBuf]| {
        remove_created(created);
        if let Some(dir) = &launch.shim_dir {
            super::shim::remove(dir);
        }
    };
    let Some(fuse_dev) = wait_for_go(channel, &mut created) else {
        // The server failed or died before the machine was up.
        remove_made(&created);
        return 1;
    };
    let Some(listener) = enter_machine(fuse_dev) else {
        return 1;
    };
    let ready = ToServer::Ready {
        listener: listener.as_ref().map(AsRawFd::as_raw_fd),
    };
    if ready.send(channel).is_err() {
        remove_made(&created);
        return 1;
    }
    let cmd_pid = match spawn_cmd(&cmd, &launch.env) {
        Ok(pid) => pid,
        Err(status) => return status,
    };
    // SAFETY: this process leaves its group for one of its own; CMD,
    // forked already, stays in the server's.
    unsafe {
        libc::setpgid(0, 0);
    }
    let status = supervise(channel, cmd_pid, &signals);
    if status.is_none() {
        kill_everything();
        remove_made(&created);
    }
    // The listener stays open until now: the server took its copy.
    drop(listener);
    status.unwrap_or(128 + libc::SIGKILL)
}

/// Reads the server's messages until it says go (returning the FUSE
/// device to expect), recording the `--fs` directories it created;
/// `None` when the server failed or died first.
fn wait_for_go(channel: &UnixStream, created: &mut Vec<PathBuf>) -> Option<u64> {
    loop {
        match ToInit::receive(channel) {
            Ok(Some(ToInit::Created(dir))) => created.push(dir),
            Ok(Some(ToInit::Go { fuse_dev })) => return Some(fuse_dev),
            Ok(Some(ToInit::Signal(_))) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Enters the machine's namespaces and installs the sync(2)/syncfs(2)
/// filter: `Some` with its listener (`None` inside where the filter could
/// not be installed, with a warning), or `None` when the namespaces could
/// not be entered (said on stderr).
fn enter_machine(fuse_dev: u64) -> Option<Option<OwnedFd>> {
    let listener = match enter_own_namespaces(fuse_dev) {
        Ok(()) => seccomp::install_sync_filter(),
        Err(e) => {
            eprintln!("memcg run: {e:#}");
            return None;
        }
    };
    Some(match listener {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!(
                "memcg run: warning: sync(2) and syncfs(2) will not reach the simulated \
                 filesystems (seccomp user notification: {e})"
            );
            None
        }
    })
}

/// Starts CMD with no signal blocked; its pid, or the status to exit
/// with when it cannot start (1 for no CMD, 127 not found, 126 else).
fn spawn_cmd(cmd: &[OsString], env: &[(OsString, OsString)]) -> Result<libc::pid_t, i32> {
    let Some((program, args)) = cmd.split_first() else {
        return Err(1);
    };
    let mut command = std::process::Command::new(program);
    command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec, calling only
        // the async-signal-safe `sigemptyset` and `sigprocmask`.
        unsafe {
            command.pre_exec(|| {
                // CMD starts with no signal blocked (the init blocks the
                // ones it reads from its signalfd).
                let mut none = std::mem::zeroed::<libc::sigset_t>();
                libc::sigemptyset(&mut none);
                if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    match command.spawn() {
        Ok(child) => Ok(child.id() as libc::pid_t),
        Err(e) => {
            eprintln!("memcg run: {}: {e}", Path::new(program).display());
            Err(match e.kind() {
                io::ErrorKind::NotFound => 127,
                _ => 126,
            })
        }
    }
}

/// Reaps every child, forwards the server's signals to CMD, until CMD
/// ends (its status) or the server dies (`None`).
fn supervise(channel: &UnixStream, cmd_pid: libc::pid_t, signals: &libc::sigset_t) -> Option<i32> {
    // SAFETY: a new signalfd for signals blocked in this process.
    let sfd = unsafe { libc::signalfd(-1, signals, libc::SFD_CLOEXEC) };
    if sfd < 0 {
        eprintln!("memcg run: signalfd: {}", io::Error::last_os_error());
        return None;
    }
    // SAFETY: a new descriptor that no one else owns.
    let sfd = unsafe { OwnedFd::from_raw_fd(sfd) };
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: channel.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is valid for its length during the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
            continue;
        }
        if fds[0].revents != 0 {
            drain_signals(&sfd);
            if let Some(status) = reap(cmd_pid) {
                // CMD may have died because the server did (the shim's
                // agents kill their processes when it goes): then this
                // init cleans up, as for any death of the server.
                return (!server_gone(channel)).then_some(status);
            }
        }
        if fds[1].revents != 0 {
            match ToInit::receive(channel) {
                Ok(Some(ToInit::Signal(signal))) => {
                    // SAFETY: signalling CMD, our child (not yet reaped:
                    // its status is taken only here, in `reap`).
                    unsafe {
                        libc::kill(cmd_pid, signal);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }
}

/// Whether the server's end of `channel` is closed (without blocking or
/// taking a message).
fn server_gone(channel: &UnixStream) -> bool {
    let mut byte = [0u8; 1];
    // SAFETY: peeks at most one byte into `byte`.
    let n = unsafe {
        libc::recv(
            channel.as_raw_fd(),
            byte.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// Reads what the signalfd holds; `SIGCHLD` is acted on by reaping, the
/// others are dropped.
fn drain_signals(sfd: &OwnedFd) {
    let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
    // SAFETY: reading into a buffer of one `signalfd_siginfo`; the fd is
    // blocking, and was found readable.
    unsafe {
        libc::read(sfd.as_raw_fd(), info.as_mut_ptr().cast(), info.len());
    }
}

/// Reaps every child that ended; CMD's status if CMD was one of them.
fn reap(cmd_pid: libc::pid_t) -> Option<i32> {
    let mut cmd_status = None;
    loop {
        let mut status = 0;
        // SAFETY: reaping our own children.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return cmd_status;
        }
        if pid == cmd_pid {
            cmd_status = Some(exit_status(status));
        }
    }
}

/// The server is gone: kills every other process of the namespace and
/// reaps them all.
fn kill_everything() {
    // SAFETY: as pid 1, -1 is every other process of this namespace.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    let mut status = 0;
    // SAFETY: reaping our own children (orphans come to pid 1) until none
    // is left.
    while unsafe { libc::waitpid(-1, &mut status, 0) } > 0
        || io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
}

/// Removes the directories the server created, deepest first, each
/// unmounted first (it is a mount point of `--fs` where mounted).
fn remove_created(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        if let Ok(c_dir) = c_path(dir) {
            // SAFETY: a valid NUL-terminated path; failure is harmless.
            unsafe {
                libc::umount2(c_dir.as_ptr(), libc::MNT_DETACH);
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

/// `open_tree(2)`'s flag: a detached copy of the mount.
const OPEN_TREE_CLONE: libc::c_uint = 1;

/// `move_mount(2)`'s flag: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// A detached copy of the mount at `path` (`open_tree`), to attach
/// elsewhere later whatever happens to `path` meanwhile.
fn clone_mount(path: &str) -> anyhow::Result<OwnedFd> {
    let c_path = CString::new(path)?;
    // SAFETY: a valid NUL-terminated path; returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(last_os_error(&format!("open_tree({path})")));
    }
    // SAFETY: a new descriptor that no one else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Attaches the detached mount `tree` at `path` (`move_mount`).
fn attach_mount(tree: &OwnedFd, path: &str) -> anyhow::Result<()> {
    let (empty, c_path) = (CString::new("")?, CString::new(path)?);
    // SAFETY: valid NUL-terminated strings and an open mount descriptor.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            c_path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(last_os_error(&format!(
            "binding the machine's {path} over the pid namespace's"
        )));
    }
    Ok(())
}

/// A mount namespace of the init's own, with `/proc` the pid namespace's
/// procfs and the machine's `/proc` files (those bound from the mount of
/// device `fuse_dev`) bound over it again.
fn enter_own_namespaces(fuse_dev: u64) -> anyhow::Result<()> {
    // SAFETY: single-threaded; only this process moves.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(last_os_error("unshare(CLONE_NEWNS) for the init"));
    }
    let mut machine_files = Vec::new();
    for &path in super::BOUND.iter().filter(|p| p.starts_with("/proc/")) {
        if std::fs::metadata(path).is_ok_and(|m| m.dev() == fuse_dev) {
            machine_files.push((path, clone_mount(path)?));
        }
    }
    let proc_dir = CString::new("/proc")?;
    // The host's procfs (with the machine's files on it) goes; in a user
    // namespace it cannot (it is locked), and the new one covers it.
    // SAFETY: a valid NUL-terminated path.
    unsafe {
        libc::umount2(proc_dir.as_ptr(), libc::MNT_DETACH);
    }
    let proc_type = CString::new("proc")?;
    // SAFETY: valid NUL-terminated strings; procfs takes no data here.
    let rc = unsafe {
        libc::mount(
            proc_type.as_ptr(),
            proc_dir.as_ptr(),
            proc_type.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(last_os_error("mounting the pid namespace's /proc"));
    }
    for (path, tree) in &machine_files {
        attach_mount(tree, path)?;
    }
    Ok(())
}
