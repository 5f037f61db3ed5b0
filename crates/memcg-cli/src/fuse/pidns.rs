//! Pids as the process asking sees them: pid namespaces.
//!
//! The server runs in its own pid namespace (the host's) and FUSE gives it
//! each request's thread id there, while `memcg run` starts CMD in a pid
//! namespace of its own, where CMD is pid 2. As the kernel does, a pid
//! written to `cgroup.procs` is read in the writer's namespace
//! (`find_task_by_vpid`: `ESRCH` for one it cannot see), and `cgroup.procs`
//! lists each process as the reader's namespace numbers it
//! (`task_pid_vnr`: 0 for one it cannot see). A reader or writer in the
//! server's own namespace needs no translation, which is all of
//! `memcg mount`'s.
//!
//! Translation uses the nsfs ioctls `NS_GET_PID_FROM_PIDNS` and
//! `NS_GET_PID_IN_PIDNS` on `/proc/TID/ns/pid` (Linux 6.11 on). An older
//! kernel answers `ENOTTY`; then the `NSpid` lines of `/proc/PID/status`
//! are used (a process's pid at each level, from the server's namespace
//! down), the namespace at a level being found with `NS_GET_PARENT`.
//!
//! No state is kept: every translation asks the kernel, so a namespace
//! or pid that went away is never mistaken for another.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;

use memcg::Errno;

/// The pid namespace a request came from, when it is not the server's.
pub(crate) struct PidNs {
    /// `/proc/TID/ns/pid` of the asking thread.
    file: File,
    /// The namespace's inode number (which namespace it is).
    ino: u64,
    /// How many levels below the server's namespace it is (at least 1).
    level: usize,
}

/// The inode number of `/proc/self/ns/pid`: the server's pid namespace.
fn own_ns_ino() -> Option<u64> {
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// A process's pids at each level, from the server's namespace down
/// (`NSpid` of `/proc/PID/status`).
fn ns_pids(pid: u32) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().map(|p| p.parse().ok()).collect()
}

/// An nsfs ioctl taking and returning a pid; `Err(errno)` on failure.
fn ns_pid_ioctl(file: &File, request: libc::Ioctl, pid: u32) -> Result<u32, i32> {
    let arg = libc::c_ulong::from(pid);
    // SAFETY: the pid-translation ioctls take their argument by value and
    // return a pid or -1; `file` is an open nsfs file.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), request, arg) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    u32::try_from(rc).map_err(|_| libc::EIO)
}

/// The inode number of the pid namespace `up` levels above `file`'s.
fn ancestor_ino(file: &File, up: usize) -> Option<u64> {
    let mut owned: Option<File> = None;
    for _ in 0..up {
        let fd = owned.as_ref().unwrap_or(file).as_raw_fd();
        // SAFETY: `NS_GET_PARENT` takes no argument and returns a new fd
        // (or -1), which is owned from here on.
        let parent = unsafe { libc::ioctl(fd, libc::NS_GET_PARENT) };
        if parent < 0 {
            return None;
        }
        // SAFETY: `parent` is a new fd no one else owns.
        owned = Some(unsafe { File::from_raw_fd(parent) });
    }
    owned
        .as_ref()
        .unwrap_or(file)
        .metadata()
        .ok()
        .map(|m| m.ino())
}

impl PidNs {
    /// The pid namespace of thread `tid` (a host thread id), or `None`
    /// when it is the server's own (or the thread is gone: its request
    /// is then read as the server's).
    pub(crate) fn of(tid: u32) -> Option<Self> {
        if tid == 0 {
            return None;
        }
        let file = File::open(format!("/proc/{tid}/ns/pid")).ok()?;
        let ino = file.metadata().ok()?.ino();
        if Some(ino) == own_ns_ino() {
            return None;
        }
        let level = ns_pids(tid)?.len().checked_sub(1).filter(|&l| l > 0)?;
        Some(Self { file, ino, level })
    }

    /// The host pid of `pid` as this namespace numbers it: `ESRCH` if it
    /// has no such pid.
    pub(crate) fn host_pid(&self, pid: u32) -> Result<u32, Errno> {
        match ns_pid_ioctl(&self.file, libc::NS_GET_PID_FROM_PIDNS, pid) {
            Ok(host) => Ok(host),
            Err(libc::ENOTTY) => self.host_pid_by_status(pid).ok_or(Errno::ESRCH),
            Err(_) => Err(Errno::ESRCH),
        }
    }

    /// Host pid `pid` as this namespace numbers it: 0 if it cannot see it.
    pub(crate) fn local_pid(&self, pid: u32) -> u32 {
        match ns_pid_ioctl(&self.file, libc::NS_GET_PID_IN_PIDNS, pid) {
            Ok(local) => local,
            Err(libc::ENOTTY) => self.local_pid_by_status(pid).unwrap_or(0),
            Err(_) => 0,
        }
    }

    /// Whether host process `pid`, whose pids are `pids`, is in this
    /// namespace or one below it.
    fn contains(&self, pid: u32, pids: &[u32]) -> bool {
        let Some(depth) = pids.len().checked_sub(1).filter(|&d| d >= self.level) else {
            return false;
        };
        File::open(format!("/proc/{pid}/ns/pid"))
            .ok()
            .and_then(|f| ancestor_ino(&f, depth - self.level))
            == Some(self.ino)
    }

    /// [`PidNs::local_pid`] without the nsfs ioctls.
    fn local_pid_by_status(&self, pid: u32) -> Option<u32> {
        let pids = ns_pids(pid)?;
        self.contains(pid, &pids).then(|| pids[self.level])
    }

    /// [`PidNs::host_pid`] without the nsfs ioctls: every thread on the
    /// host is looked at.
    fn host_pid_by_status(&self, pid: u32) -> Option<u32> {
        let numbered = |dir: &str| -> Vec<u32> {
            std::fs::read_dir(dir)
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        numbered("/proc")
            .into_iter()
            .flat_map(|p| numbered(&format!("/proc/{p}/task")))
            .find(|&tid| {
                ns_pids(tid).is_some_and(|pids| {
                    pids.get(self.level) == Some(&pid) && self.contains(tid, &pids)
                })
            })
    }
}

/// `cgroup.procs` (or `cgroup.threads`) text as the reader in `ns` sees
/// it: each host pid as `ns` numbers it. The simulator's own tasks (pids
/// from `PID_MAX_LIMIT`, which no namespace numbers) are left as they are.
pub(crate) fn pids_as_seen(ns: &PidNs, text: &str) -> String {
    text.lines()
        .map(|line| match line.trim().parse::<u32>() {
            Ok(pid) if pid < memcg_sim::PID_MAX_LIMIT => format!("{}\n", ns.local_pid(pid)),
            _ => format!("{line}\n"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `sleep` in a pid namespace of its own (as pid 1), made with
    /// util-linux `unshare`; `None` where that cannot be done here.
    fn sleeper_in_a_new_namespace() -> Option<(std::process::Child, u32)> {
        // SAFETY: `geteuid` has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let child = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "sleep", "30"])
            .spawn()
            .ok()?;
        // Its forked child is the sleeper, pid 1 in the new namespace.
        for _ in 0..200 {
            let children = std::fs::read_to_string(format!(
                "/proc/{}/task/{}/children",
                child.id(),
                child.id()
            ))
            .unwrap_or_default();
            if let Some(sleeper) = children.split_whitespace().find_map(|c| c.parse().ok())
                && ns_pids(sleeper).is_some_and(|p| p.len() == 2)
            {
                return Some((child, sleeper));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    #[test]
    fn pids_translate_both_ways_with_and_without_the_nsfs_ioctls() {
        assert!(PidNs::of(std::process::id()).is_none(), "the server's own");
        let Some((mut unshare, sleeper)) = sleeper_in_a_new_namespace() else {
            eprintln!("skipped: needs root and util-linux unshare");
            return;
        };
        let ns = PidNs::of(sleeper).expect("a namespace of its own");
        assert_eq!(ns.level, 1);
        // By the status files, as on a kernel before 6.11.
        assert_eq!(ns.local_pid_by_status(sleeper), Some(1));
        assert_eq!(ns.local_pid_by_status(std::process::id()), None);
        assert_eq!(ns.host_pid_by_status(1), Some(sleeper));
        assert_eq!(ns.host_pid_by_status(2), None);
        // By whichever this kernel offers: the same answers.
        assert_eq!(ns.local_pid(sleeper), 1);
        assert_eq!(ns.local_pid(std::process::id()), 0);
        assert_eq!(ns.host_pid(1), Ok(sleeper));
        assert_eq!(ns.host_pid(2), Err(Errno::ESRCH));
        let shown = pids_as_seen(
            &ns,
            &format!("{}\n{sleeper}\n4194305\n", std::process::id()),
        );
        assert_eq!(shown, "0\n1\n4194305\n");
        unshare.kill().unwrap();
        unshare.wait().unwrap();
    }
}
