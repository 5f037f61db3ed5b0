//! `sync(2)` and `syncfs(2)` of CMD's processes reaching the simulated
//! filesystems.
//!
//! The kernel never tells a FUSE server about them: it sends `FUSE_SYNCFS`
//! only to servers that ask for it, and only virtiofs does
//! (`fc->sync_fs`). So the init installs, before it starts CMD, a seccomp
//! filter that turns both system calls into user notifications
//! (`SECCOMP_RET_USER_NOTIF`), inherited by everything CMD starts. The
//! server receives them on the filter's listener, taken from the init
//! with `pidfd_getfd`, and before letting each call go on to the host
//! kernel (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`, so the host's own disks are
//! synced as asked) writes back, and waits for, what it names:
//!
//! - `sync()`: every simulated filesystem;
//! - `syncfs(fd)`: the simulated filesystem the file of `fd` is on
//!   (`/proc/PID/fd/N` of the caller, matched by device and inode against
//!   the mount's files), and nothing for a file elsewhere.
//!
//! The same filter fails `clone3(2)` with `ENOSYS`, as container runtimes
//! do: `CLONE_INTO_CGROUP` names a cgroup directory of the host kernel's
//! cgroupfs, and a directory of the simulated one is not (the host says
//! `EBADF`), while on `ENOSYS` glibc and programs that call `clone3`
//! themselves (the kernel's cgroup selftests, systemd) fall back to
//! `clone`/`fork` and a write to `cgroup.procs`, which the simulator
//! sees. (seccomp cannot read the flags behind `clone3`'s pointer, so it
//! is every `clone3` or none.)
//!
//! Writeback itself is the library's (`Superblock::sync`, `Machine::sync`),
//! as `fsync` over FUSE uses it. The filter installs with the init's
//! `CAP_SYS_ADMIN` (root, or root of `memcg run`'s user namespace), so
//! `no_new_privs` is not set and setuid programs in CMD work as usual.
//! Where the kernel has no user notification (before 5.5), CMD runs
//! without it and a warning says so.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use crate::fuse::FsView;

/// `AUDIT_ARCH_*` of the architecture this is built for: the filter
/// passes any other ABI's calls (their numbers differ) untouched.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xc000_00f3;

/// Offsets in `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The filter: this architecture's `sync` and `syncfs` notify the
/// listener, `clone3` fails with `ENOSYS`, everything else goes on.
fn sync_filter() -> Vec<libc::sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    vec![
        stmt(load, DATA_ARCH),
        jump_if_equal(AUDIT_ARCH, 1, 0),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(load, DATA_NR),
        jump_if_equal(libc::SYS_clone3 as u32, 4, 0),
        jump_if_equal(libc::SYS_sync as u32, 2, 0),
        jump_if_equal(libc::SYS_syncfs as u32, 1, 0),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(ret, libc::SECCOMP_RET_USER_NOTIF),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ]
}

/// Installs the filter on this (single-threaded) process, and so on
/// everything it starts after; returns its listener.
pub(super) fn install_sync_filter() -> io::Result<OwnedFd> {
    let filter = sync_filter();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `filter`, both alive for the call; the
    // kernel copies the program.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that no one else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Descriptor `fd` of process `pid`, duplicated into this one
/// (`pidfd_getfd`).
pub(super) fn take_fd(pid: libc::pid_t, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes a pid and flags; no memory is passed.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that no one else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: `pidfd_getfd` takes descriptors and flags; no memory.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// The server's thread answering the notifications; dropping it stops and
/// joins it.
pub(super) struct SyncServer {
    /// Closing it wakes the thread to stop.
    stop: Option<io::PipeWriter>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SyncServer {
    /// Answers the notifications of `listener` with writebacks of `view`'s
    /// filesystems.
    pub(super) fn start(listener: OwnedFd, view: Arc<FsView>) -> io::Result<Self> {
        let (stopped, stop) = io::pipe()?;
        let thread = std::thread::Builder::new()
            .name("memcg-sync".into())
            .spawn(move || serve(&listener, &OwnedFd::from(stopped), &view))?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for SyncServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Waits for a notification on `listener` or the end of `stopped`: true
/// for a notification.
fn wait(listener: &OwnedFd, stopped: &OwnedFd) -> bool {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stopped.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is valid for its length during the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if fds[1].revents != 0 {
            return false;
        }
        // POLLHUP alone: no process uses the filter any more.
        return fds[0].revents & libc::POLLIN != 0;
    }
}

/// The notification loop; see the module docs.
fn serve(listener: &OwnedFd, stopped: &OwnedFd, view: &FsView) {
    while wait(listener, stopped) {
        // SAFETY: all-zero is a valid `seccomp_notif`, and the kernel
        // requires it zeroed.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: `notif` is the struct this ioctl fills, alive for the
        // call.
        if unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif,
            )
        } < 0
        {
            match io::Error::last_os_error().raw_os_error() {
                // The caller died (or was interrupted) meanwhile.
                Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                _ => return,
            }
        }
        let nr = i64::from(notif.data.nr);
        let written = if nr == libc::SYS_sync {
            view.sync_all().map_err(|e| e.to_string())
        } else if nr == libc::SYS_syncfs {
            let fd = notif.data.args[0] as i32;
            match superblock_of(view, notif.pid, fd) {
                // Still the same call (the caller did not die and its pid
                // go to another) now that its descriptor was looked at.
                Some(sb) if id_valid(listener, notif.id) => sb.sync().map_err(|e| e.to_string()),
                _ => Ok(0),
            }
        } else {
            Ok(0)
        };
        if let Err(e) = written {
            eprintln!("memcg: writeback for a sync of process {}: {e}", notif.pid);
        }
        let mut resp = libc::seccomp_notif_resp {
            id: notif.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: `resp` is the struct this ioctl reads, alive for the
        // call. A caller that died meanwhile makes it fail harmlessly.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp,
            );
        }
    }
}

/// Whether notification `id` is still pending (its caller still waits).
fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads the `u64` id, alive for the call.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id,
        ) == 0
    }
}

/// The simulated filesystem descriptor `fd` of process `pid` is a file of.
fn superblock_of(view: &FsView, pid: u32, fd: i32) -> Option<Arc<memcg::fs::Superblock>> {
    let meta = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")).ok()?;
    view.superblock_of(meta.dev(), meta.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_notifies_sync_and_syncfs_of_this_architecture_only() {
        // A tiny interpreter for the filter's three instruction kinds.
        let run = |arch: u32, nr: u32| -> u32 {
            let filter = sync_filter();
            let mut acc = 0;
            let mut pc = 0;
            loop {
                let ins = filter[pc];
                let code = u32::from(ins.code);
                if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                    acc = if ins.k == DATA_ARCH { arch } else { nr };
                    pc += 1;
                } else if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
                    pc += 1 + usize::from(if acc == ins.k { ins.jt } else { ins.jf });
                } else {
                    return ins.k;
                }
            }
        };
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        assert_eq!(run(AUDIT_ARCH, libc::SYS_sync as u32), notify);
        assert_eq!(run(AUDIT_ARCH, libc::SYS_syncfs as u32), notify);
        assert_eq!(run(AUDIT_ARCH, libc::SYS_fsync as u32), allow);
        assert_eq!(run(AUDIT_ARCH, libc::SYS_write as u32), allow);
        assert_eq!(
            run(AUDIT_ARCH, libc::SYS_clone3 as u32),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(run(0x4000_0003, libc::SYS_sync as u32), allow, "i386");
    }
}
