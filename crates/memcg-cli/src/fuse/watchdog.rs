//! `memcg mount`'s watchdog: a process that unmounts the mount if the
//! server dies without doing so (SIGKILL, a crash), as libfuse's
//! `auto_unmount` has `fusermount` do. Without it the kernel keeps a dead
//! mount (`Transport endpoint is not connected`) until someone unmounts it.
//!
//! The watchdog is forked before the server starts any thread (and
//! before it mounts), and holds neither the FUSE device nor the pipe's
//! writing end: it waits on the pipe. The server writes `done` after
//! unmounting itself. End of file without `done` means the server is
//! dying: the watchdog waits until it has exited (a pidfd of it, taken
//! before the fork, turns readable), when its FUSE device is closed and
//! its mount dead. Then, if the topmost mount at the directory is a memcg
//! mount made since the watchdog started (its mount id is new) and dead,
//! the watchdog unmounts it lazily; anything else there is left alone.
//! It sits in a process group of its own and ignores the terminal's and
//! `kill`'s usual signals, so that what kills the server's process group
//! (Ctrl-C, `kill -KILL -PGID`) leaves it to clean up.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use anyhow::Context;

/// The server's end of a running watchdog.
pub(crate) struct Watchdog {
    pid: libc::pid_t,
    to_watchdog: std::fs::File,
}

/// What the server writes when it unmounted itself.
const DONE: &[u8] = b"done\n";

impl Watchdog {
    /// Forks the watchdog of a mount about to be made at `dir` (absolute,
    /// resolved). Must be called while this process has a single thread.
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Self> {
        let before = super::mount_ids_at(dir)?;
        let (from_server, to_watchdog) = std::io::pipe().context("the watchdog's pipe")?;
        let server = pidfd_of_self().context("a pidfd of this process")?;
        // SAFETY: the process is single-threaded here (the caller's
        // contract), so the child may go on running Rust code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("forking the watchdog");
        }
        if pid == 0 {
            drop(to_watchdog);
            watch(OwnedFd::from(from_server), &server, dir, &before);
            // SAFETY: ending the forked child without running the
            // parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        drop(from_server);
        Ok(Self {
            pid,
            to_watchdog: std::fs::File::from(OwnedFd::from(to_watchdog)),
        })
    }

    /// The server unmounted itself: the watchdog ends without doing
    /// anything; waits for it.
    pub(crate) fn disarm(self) {
        let _ = (&self.to_watchdog).write_all(DONE);
        drop(self.to_watchdog);
        let mut status = 0;
        // SAFETY: reaping our own child, which nothing else waits for.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// A pidfd of this process (readable once it exited).
fn pidfd_of_self() -> std::io::Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes a pid and flags; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that no one else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Waits until the process of `pidfd` has exited.
fn wait_exited(pidfd: &OwnedFd) {
    let mut fd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid `pollfd` for the call's duration.
    while unsafe { libc::poll(&mut fd, 1, -1) } < 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
}

/// The watchdog's life: waits for the server to end; unmounts the dead
/// mount if it did not unmount it itself. `before`: the ids of the mounts
/// at `dir` when the server started.
fn watch(from_server: OwnedFd, server: &OwnedFd, dir: &Path, before: &[u64]) {
    // SAFETY: leaving the server's process group (never a session leader
    // here: it was just forked) and ignoring the signals that end the
    // server's group; it never execs anything that needs them.
    unsafe {
        libc::setpgid(0, 0);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    let mut said = Vec::new();
    // Until end of file: the server exited, one way or another.
    let _ = std::fs::File::from(from_server).read_to_end(&mut said);
    if said == DONE {
        return;
    }
    wait_exited(server);
    let made_since = super::mount_at(dir)
        .ok()
        .flatten()
        .is_some_and(|m| m.is_memcg() && !before.contains(&m.id));
    if made_since && super::is_dead_memcg_mount(dir).unwrap_or(false) {
        let _ = super::unmount_detached(dir);
    }
}
