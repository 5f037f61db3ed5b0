//! `memcg run -- CMD`: runs an unmodified program against the simulated
//! machine, its files at their real paths.
//!
//! The process first moves into a private mount namespace (as root:
//! `unshare(CLONE_NEWNS)`; otherwise with a user namespace too, where the
//! kernel allows FUSE mounts in one), before it starts any thread. There it
//! mounts the machine over FUSE in a temporary directory and bind-mounts
//! the machine's files over the real ones: `/sys/fs/cgroup`,
//! `/proc/meminfo`, `/proc/swaps`, `/proc/pressure/memory`, the
//! `/proc/sys/vm` files, zswap's parameters, and each `--fs` directory.
//! CMD runs as a child in that namespace, so it (and everything it starts)
//! sees the simulated machine, and nothing outside does. When CMD exits,
//! everything is unmounted and CMD's status is returned (128 + N if a
//! signal N ended it). CMD is killed if this process dies (even by
//! SIGKILL), so the namespace dies with it and even a crash leaves no
//! mount behind on the host; only empty directories may stay after a
//! SIGKILL: the temporary mount point and any `--fs` directory this
//! command had to create (both are removed on every other exit).

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};

use crate::fuse::{self, MachineSpec};
use crate::served::Workloads;

/// The machine's files bound over the host's, when the host has them.
const BOUND: &[&str] = &[
    "/sys/fs/cgroup",
    "/proc/meminfo",
    "/proc/swaps",
    "/proc/pressure/memory",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/vm/swappiness",
    "/proc/sys/vm/min_free_kbytes",
    "/sys/module/zswap/parameters",
];

fn c_path(path: &Path) -> anyhow::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{}: a path with a NUL byte", path.display()))
}

fn last_os_error(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::last_os_error())
}

/// Moves this (still single-threaded) process into a private mount
/// namespace whose mounts do not propagate back to the host.
fn enter_private_namespace() -> anyhow::Result<()> {
    // SAFETY: `geteuid` has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // SAFETY: `unshare` changes only this process's namespaces; no
        // thread exists yet, so all of the process moves.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(last_os_error("unshare(CLONE_NEWNS)"));
        }
    } else {
        enter_user_namespace()?;
    }
    let none = CString::new("none")?;
    let slash = CString::new("/")?;
    // SAFETY: valid NUL-terminated strings for the call's duration; a
    // null data pointer is allowed for a propagation change.
    let made_private = unsafe {
        libc::mount(
            none.as_ptr(),
            slash.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if made_private != 0 {
        return Err(last_os_error("making the mount namespace private"));
    }
    Ok(())
}

/// An unprivileged user: a user namespace where this user is root, with a
/// mount namespace in it.
fn enter_user_namespace() -> anyhow::Result<()> {
    // SAFETY: `getuid`/`getgid` have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: as in `enter_private_namespace`: single-threaded here.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!(
            "memcg run needs root, or unprivileged user namespaces (unshare: {e}; see \
             /proc/sys/kernel/unprivileged_userns_clone and user.max_user_namespaces)"
        );
    }
    std::fs::write("/proc/self/setgroups", "deny").context("/proc/self/setgroups")?;
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).context("uid_map")?;
    std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).context("gid_map")?;
    Ok(())
}

fn bind(source: &Path, target: &Path) -> anyhow::Result<()> {
    let (s, t) = (c_path(source)?, c_path(target)?);
    // SAFETY: valid NUL-terminated paths; a bind mount takes no data.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(last_os_error(&format!(
            "bind-mounting the machine's {} over it",
            target.display()
        )));
    }
    Ok(())
}

fn unmount_lazily(target: &Path) {
    if let Ok(t) = c_path(target) {
        // SAFETY: a valid NUL-terminated path; failure is harmless here.
        unsafe {
            libc::umount2(t.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// The bind mounts and directories made for CMD; undone on drop.
#[derive(Default)]
struct Binds {
    mounted: Vec<PathBuf>,
    created: Vec<PathBuf>,
}

impl Binds {
    /// Binds the machine's `path` (under `root`) over the host's.
    fn add(&mut self, root: &Path, path: &str, create: bool) -> anyhow::Result<()> {
        let target = PathBuf::from(path);
        if !target.exists() {
            if !create {
                eprintln!("memcg run: this host has no {path}; the machine's is not bound there");
                return Ok(());
            }
            // Every missing directory down to it, to remove them all after.
            let missing: Vec<PathBuf> = target
                .ancestors()
                .take_while(|dir| !dir.exists())
                .map(Path::to_path_buf)
                .collect();
            std::fs::create_dir_all(&target)
                .with_context(|| format!("creating {path} for --fs"))?;
            self.created.extend(missing.into_iter().rev());
        }
        bind(&root.join(path.trim_start_matches('/')), &target)?;
        self.mounted.push(target);
        Ok(())
    }
}

impl Drop for Binds {
    fn drop(&mut self) {
        for target in self.mounted.drain(..).rev() {
            unmount_lazily(&target);
        }
        for dir in self.created.drain(..).rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Runs `memcg run`; returns CMD's exit status.
pub(crate) fn main(spec: &MachineSpec, cmd: &[OsString]) -> anyhow::Result<i32> {
    let Some((program, args)) = cmd.split_first() else {
        bail!("memcg run: no command given (memcg run [OPTIONS] -- CMD ARGS...)");
    };
    enter_private_namespace()?;
    let sim = fuse::build_machine(spec)?;
    let dir = tempfile::Builder::new().prefix("memcg-run-").tempdir()?;
    let mounted = fuse::mount(Arc::clone(&sim), dir.path())?;
    let mut binds = Binds::default();
    for path in BOUND {
        binds.add(dir.path(), path, false)?;
    }
    for fs in &spec.fs {
        binds.add(dir.path(), &fs.dir, true)?;
    }
    let workloads = Workloads::start(&sim, &spec.workloads)?;
    // The terminal's Ctrl-C goes to CMD, which decides; this process waits
    // for it (a handler, not SIG_IGN, so CMD does not inherit ignoring it).
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGQUIT] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))?;
    }
    let mut command = std::process::Command::new(program);
    command.args(args);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec, calling only
        // `prctl` and `getppid`, which are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                // CMD dies with this process (even SIGKILLed), and with it
                // the namespace and its mounts.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Already gone before the prctl took effect: go too.
                if libc::getppid() == 1 {
                    libc::_exit(137);
                }
                Ok(())
            });
        }
    }
    let status = command.status();
    drop(workloads);
    drop(binds);
    drop(mounted);
    match status {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            Ok(status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(1))
        }
        Err(e) => {
            let name = Path::new(program).display();
            eprintln!("memcg run: {name}: {e}");
            Ok(match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            })
        }
    }
}
