//! `memcg run -- CMD`: runs an unmodified program against the simulated
//! machine, its files at their real paths, and takes down everything it
//! started when it ends, however it ends.
//!
//! Three processes, in namespaces of their own:
//!
//! - this one, the server: it moves into a private mount namespace (as
//!   root `unshare(CLONE_NEWNS)`; otherwise with a user namespace too,
//!   where the kernel allows FUSE mounts in one) and forks the init
//!   ([`init`]) into a new pid namespace, both while it still has a single
//!   thread. Then it serves the machine over FUSE and binds its files over
//!   the real ones: `/sys/fs/cgroup`, `/proc/meminfo`, `/proc/swaps`,
//!   `/proc/pressure/memory`, the `/proc/sys/vm` files, zswap's
//!   parameters, each `--fs` directory (made if missing) and, with `--fs`,
//!   `/sys/class/bdi` (the `--fs` filesystems' devices, whose
//!   `read_ahead_kb` sets their readahead);
//! - the init, pid 1 of the new pid namespace, which starts CMD in a mount
//!   namespace of its own (the server's binds, and the pid namespace's
//!   own `/proc` with the machine's files bound over it again);
//! - CMD (pid 2 there) and everything it starts, which see the simulated
//!   machine; nothing outside does.
//!
//! The machine is mounted on a private tmpfs laid over a directory that is
//! no bind target (the temporary directory, usually), only long enough to
//! bind its files; then the tmpfs is detached, so no mount point is ever
//! made on the host. The `/sys/fs/cgroup` bind is then made `nosuid,nodev,
//! noexec`, as systemd mounts cgroup2. CMD is started with the shim
//! preloaded ([`shim`]). Bind targets are opened before the tmpfs goes on and
//! bound through their descriptors (`/proc/self/fd/N`).
//!
//! Ending: when CMD exits, the init exits with its status and the kernel
//! kills what is left in the pid namespace; the server unmounts, removes
//! the `--fs` directories it made and exits with that status (128 + N if
//! a signal N ended CMD). SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to this
//! process are forwarded to CMD (through the init), which decides; those
//! the terminal sends (Ctrl-C: `SI_KERNEL`) reach CMD directly, as they
//! reach the whole foreground process group, and are not forwarded again.
//! If the server dies (SIGKILL, a crash), its end of the init's channel
//! closes: the init kills everything in the namespace and removes the
//! `--fs` directories the server made; the mounts die with their
//! namespaces. If the init is killed, the kernel kills the namespace and
//! the server cleans up as when CMD exits. Only both killed at once (by
//! separate SIGKILLs: the init leaves the process group) leaves the `--fs`
//! directories made (empty) behind.

mod anon;
mod channel;
mod init;
mod notify;
mod seccomp;
mod shim;

use std::ffi::{CString, OsString};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::fuse::{self, MachineSpec, Mounted};
use crate::served::Workloads;
use channel::ToInit;
use init::Init;

/// The machine's files bound over the host's, when the host has them.
const BOUND: &[&str] = &[
    "/sys/fs/cgroup",
    "/proc/meminfo",
    "/proc/swaps",
    "/proc/pressure/memory",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/vm/swappiness",
    "/proc/sys/vm/min_free_kbytes",
    "/proc/sys/vm/dirty_ratio",
    "/proc/sys/vm/dirty_background_ratio",
    "/proc/sys/vm/dirty_bytes",
    "/proc/sys/vm/dirty_background_bytes",
    "/proc/sys/vm/dirty_expire_centisecs",
    "/proc/sys/vm/dirty_writeback_centisecs",
    "/sys/module/zswap/parameters",
    "/sys/kernel/mm/transparent_hugepage",
];

pub(super) fn c_path(path: &Path) -> anyhow::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{}: a path with a NUL byte", path.display()))
}

pub(super) fn last_os_error(what: &str) -> anyhow::Error {
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

pub(super) fn bind(source: &Path, target: &Path) -> anyhow::Result<()> {
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

/// Makes the bind mount at `target` `nosuid,nodev,noexec`, as systemd
/// mounts cgroup2 (so `statvfs` and the mount tables say so); a failure
/// leaves it as it was.
fn make_noexec(target: &Path) {
    let Ok(t) = c_path(target) else {
        return;
    };
    let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: a valid NUL-terminated path; a remount of a bind takes no
    // source, type or data.
    unsafe {
        libc::mount(
            std::ptr::null(),
            t.as_ptr(),
            std::ptr::null(),
            flags | libc::MS_NOEXEC,
            std::ptr::null(),
        );
    }
}

fn unmount_lazily(target: &Path) {
    if let Ok(t) = c_path(target) {
        // SAFETY: a valid NUL-terminated path; failure is harmless here.
        unsafe {
            libc::umount2(t.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// The bind mounts and directories made for CMD in the server's mount
/// namespace; undone on drop.
#[derive(Default)]
struct Binds {
    mounted: Vec<PathBuf>,
    created: Vec<PathBuf>,
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

/// A bind target, opened before anything is mounted near it.
struct Target {
    path: PathBuf,
    /// `O_PATH`: the target itself, whatever is mounted over its parents
    /// later.
    file: File,
}

impl Target {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .with_context(|| format!("{}: cannot bind the machine's over it", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// The path that names the target through its descriptor.
    fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// The bind targets: the machine's files where the host has them, each
/// `--fs` directory, made (with its missing parents, each told to the
/// init) where missing, and with `--fs` the machine's `/sys/class/bdi`.
fn targets(spec: &MachineSpec, init: &Init, binds: &mut Binds) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for path in BOUND {
        if Path::new(path).exists() {
            targets.push(Target::open(Path::new(path))?);
        } else {
            eprintln!("memcg run: this host has no {path}; the machine's is not bound there");
        }
    }
    for fs in &spec.fs {
        let target = Path::new(&fs.dir);
        let missing: Vec<PathBuf> = target
            .ancestors()
            .take_while(|dir| !dir.exists())
            .map(Path::to_path_buf)
            .collect();
        for dir in missing.into_iter().rev() {
            std::fs::create_dir(&dir)
                .with_context(|| format!("creating {} for --fs", dir.display()))?;
            binds.created.push(dir.clone());
            init.created(&dir)?;
        }
        targets.push(Target::open(target)?);
    }
    // The --fs filesystems' devices: their read_ahead_kb sets readahead.
    let bdi = Path::new("/sys/class/bdi");
    if !spec.fs.is_empty() && bdi.exists() {
        targets.push(Target::open(bdi)?);
    }
    Ok(targets)
}

/// Where the machine is mounted for a moment: a private tmpfs laid over a
/// directory no target is.
struct Scratch {
    /// The tmpfs's root (`O_PATH`), to detach it by.
    root: File,
    dir: PathBuf,
}

/// Directories the scratch tmpfs may cover, in order of preference.
fn scratch_candidates() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    dirs.extend(["/tmp", "/mnt", "/run", "/dev"].map(PathBuf::from));
    dirs
}

impl Scratch {
    fn mount(targets: &[Target]) -> anyhow::Result<Self> {
        let taken: Vec<PathBuf> = targets
            .iter()
            .filter_map(|t| std::fs::canonicalize(&t.path).ok())
            .collect();
        let dir = scratch_candidates()
            .into_iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .find(|d| d.is_dir() && !taken.contains(d))
            .context("no directory to mount the machine on for a moment")?;
        let (tmpfs, target) = (CString::new("tmpfs")?, c_path(&dir)?);
        let options = CString::new("mode=0700,size=64k")?;
        // SAFETY: valid NUL-terminated strings for the call's duration.
        let rc = unsafe {
            libc::mount(
                tmpfs.as_ptr(),
                target.as_ptr(),
                tmpfs.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(last_os_error(&format!(
                "mounting a private tmpfs on {}",
                dir.display()
            )));
        }
        let root = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&dir);
        let scratch = Self {
            root: match root {
                Ok(root) => root,
                Err(e) => {
                    unmount_lazily(&dir);
                    return Err(e).context("the private tmpfs");
                }
            },
            dir,
        };
        std::fs::create_dir(scratch.machine_dir()).context("the private tmpfs")?;
        Ok(scratch)
    }

    /// Where the machine goes.
    fn machine_dir(&self) -> PathBuf {
        self.dir.join("memcg-machine")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // By its descriptor: whatever was bound over the directory's path
        // meanwhile stays.
        unmount_lazily(&PathBuf::from(format!(
            "/proc/self/fd/{}",
            self.root.as_raw_fd()
        )));
    }
}

/// The machine as CMD sees it: mounted, bound, its workloads running.
/// Dropping it stops the workloads, unmounts, and removes what was made.
struct Machine {
    // Dropped in this order.
    _workloads: Workloads,
    _binds: Binds,
    mounted: Mounted,
}

impl Machine {
    fn set_up(spec: &MachineSpec, init: &Init) -> anyhow::Result<Self> {
        let sim = fuse::build_machine(spec)?;
        let mut binds = Binds::default();
        let targets = targets(spec, init, &mut binds)?;
        let scratch = Scratch::mount(&targets)?;
        let machine_dir = scratch.machine_dir();
        let mut mounted = fuse::serve_at(Arc::clone(&sim), &machine_dir)?;
        for target in &targets {
            let rel = target.path.strip_prefix("/").unwrap_or(&target.path);
            bind(&machine_dir.join(rel), &target.fd_path()).with_context(|| {
                format!("bind-mounting the machine's {}", target.path.display())
            })?;
            binds.mounted.push(target.path.clone());
        }
        drop(scratch);
        // By its path: the top mount there is the bind just made.
        let cgroup = Path::new("/sys/fs/cgroup");
        if binds.mounted.iter().any(|p| p == cgroup) {
            make_noexec(cgroup);
        }
        mounted.mount_point_detached();
        let workloads = Workloads::start(&sim, &spec.workloads)?;
        Ok(Self {
            _workloads: workloads,
            _binds: binds,
            mounted,
        })
    }
}

/// The signals forwarded to CMD.
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Blocks [`FORWARDED`] in this thread (and so in every thread and child
/// made after); [`forward_signals`] takes them.
fn block_forwarded() {
    let set = init::signal_set(&FORWARDED);
    // SAFETY: blocking signals of the calling thread; no memory but the
    // set is passed.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// A thread that passes each [`FORWARDED`] signal sent to this process on
/// to the init for CMD; not those the terminal sent (`SI_KERNEL`), which
/// the whole foreground process group, CMD included, got already. It
/// lives as long as the process.
fn forward_signals(to_init: UnixStream) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("memcg-signals".into())
        .spawn(move || {
            let set = init::signal_set(&FORWARDED);
            loop {
                // SAFETY: all-zero is a valid `siginfo_t` to fill.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: waits for a signal of `set`, blocked in every
                // thread, filling `info`.
                let signal = unsafe { libc::sigwaitinfo(&set, &mut info) };
                if signal < 0 || info.si_code == libc::SI_KERNEL {
                    continue;
                }
                // The init gone, the process ends soon.
                let _ = ToInit::Signal(signal).send(&to_init);
            }
        })?;
    Ok(())
}

/// inotify on the machine's events files (`notify.rs`); `None`, said, if
/// its thread cannot start.
fn start_notifier(machine: &Machine) -> Option<notify::EventsNotifier> {
    let sim = Arc::clone(machine.mounted.view().sim());
    match notify::EventsNotifier::start(sim, "/sys/fs/cgroup") {
        Ok(n) => Some(n),
        Err(e) => {
            eprintln!("memcg run: warning: no inotify events on the events files: {e}");
            None
        }
    }
}

/// Runs `memcg run`; returns CMD's exit status.
pub(crate) fn main(spec: &MachineSpec, cmd: &[OsString], anon: bool) -> anyhow::Result<i32> {
    if cmd.is_empty() {
        bail!("memcg run: no command given (memcg run [OPTIONS] -- CMD ARGS...)");
    }
    block_forwarded();
    enter_private_namespace()?;
    shim::warn_if_static(&cmd[0]);
    let shim = match shim::ShimFile::write(spec) {
        Ok(shim) => Some(shim),
        Err(e) => {
            eprintln!("memcg run: warning: CMD runs without the shim: {e:#}");
            None
        }
    };
    let mut env = shim.as_ref().map(|s| s.env(spec)).unwrap_or_default();
    let anon_dir = shim.as_ref().filter(|_| anon).map(|s| s.dir().to_owned());
    if let Some(dir) = &anon_dir {
        env.push((
            anon::SOCKET_ENV.into(),
            anon::AnonServer::socket_path(dir).into_os_string(),
        ));
    }
    let launch = init::Launch {
        env,
        shim_dir: shim.as_ref().map(|s| s.dir().to_owned()),
    };
    let init = Init::start(cmd.to_vec(), launch)?;
    let machine = match Machine::set_up(spec, &init) {
        Ok(machine) => machine,
        Err(e) => {
            init.abandon();
            return Err(e);
        }
    };
    // Listening before CMD starts: its first process connects at once.
    let anon_server = match &anon_dir {
        Some(dir) => match anon::AnonServer::start(dir, machine.mounted.view()) {
            Ok(server) => Some(server),
            Err(e) => {
                eprintln!("memcg run: warning: CMD's anonymous memory stays the host's: {e}");
                None
            }
        },
        None => None,
    };
    let notifier = start_notifier(&machine);
    let sync_server = match init.go(machine.mounted.dev()) {
        Some(listener) => Some(seccomp::SyncServer::start(
            listener,
            machine.mounted.view(),
        )?),
        None => None,
    };
    forward_signals(init.forwarder()?)?;
    let status = init.wait();
    drop(sync_server);
    drop(notifier);
    drop(anon_server);
    drop(machine);
    drop(shim);
    Ok(status)
}
