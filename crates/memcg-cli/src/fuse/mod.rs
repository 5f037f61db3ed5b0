//! The simulator as a real filesystem (`memcg mount`, and under `memcg
//! run`): one simulated machine served over FUSE, so that any program —
//! bash, Python, a controller — drives it through the files it would use
//! on a real machine.
//!
//! Under the mount point: the cgroup v2 hierarchy at `sys/fs/cgroup`, the
//! library's kernel files (`memcg::procfs`, as `memcg sh` has them) at
//! their paths (`proc/meminfo`,
//! `proc/pressure/memory`, `proc/sys/vm/drop_caches`,
//! `sys/module/zswap/parameters/*`, ...), and each `--fs` filesystem at its
//! own path, its files read and written through the simulated page cache.
//! Host processes become simulated tasks (`host.rs`); the tree and its
//! inode numbers are in `tree.rs`; the request handlers in `fs.rs`.
//!
//! A mount is a [`Mounted`] guard: dropping it unmounts (lazily, so a
//! process still inside cannot keep the mount alive) and joins the server.

mod fs;
mod fsfiles;
mod host;
mod owners;
mod pidns;
mod shim_files;
pub(crate) mod tree;
mod watchdog;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use memcg::fs::{FsSource, Superblock};
use memcg_sim::{PID_MAX_LIMIT, Sim, SimConfig};

pub(crate) use host::HostProcs;

/// `--fs DIR=ram:SIZE`, `--fs DIR=dir:HOSTDIR` (or `DIR=HOSTDIR`): a
/// filesystem of the
/// simulated machine.
#[derive(Debug, Clone)]
pub(crate) struct FsSpec {
    /// Where it is mounted in the machine (and, under `memcg run`, on the
    /// host).
    pub(crate) dir: String,
    pub(crate) source: FsSource,
}

impl std::str::FromStr for FsSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (dir, source) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected DIR=ram:SIZE or DIR=dir:HOSTDIR"))?;
        if !dir.starts_with('/') || dir.trim_end_matches('/').is_empty() {
            return Err(format!(
                "{dir:?}: the directory must be an absolute path below /"
            ));
        }
        let source = match source.strip_prefix("ram:") {
            Some(size) => {
                let size_bytes =
                    memcg::cgroupfs::memparse(size).map_err(|_| crate::size_help(size))?;
                if size_bytes < MIN_RAM_DISK_BYTES {
                    return Err(format!(
                        "ram:{size}: a RAM disk needs at least 64K (16 pages)"
                    ));
                }
                FsSource::Ram { size_bytes }
            }
            None => {
                let host = source.strip_prefix("dir:").unwrap_or(source);
                if !host.starts_with('/') {
                    return Err(format!(
                        "{source:?}: expected ram:SIZE or dir:HOSTDIR (an absolute path)"
                    ));
                }
                FsSource::Dir(PathBuf::from(host))
            }
        };
        Ok(Self {
            dir: dir.trim_end_matches('/').to_owned(),
            source,
        })
    }
}

/// The smallest `--fs DIR=ram:SIZE`.
const MIN_RAM_DISK_BYTES: u64 = 64 << 10;

/// What a mounted machine is built from.
#[derive(Debug, Clone)]
pub(crate) struct MachineSpec {
    pub(crate) config: SimConfig,
    pub(crate) fs: Vec<FsSpec>,
    /// A RAM swap device of this many bytes, if any.
    pub(crate) swap_bytes: Option<u64>,
    /// Workloads to run in the background.
    pub(crate) workloads: Vec<crate::served::WorkloadSpec>,
}

/// Builds the simulated machine: host pids stay below `PID_MAX_LIMIT`, so
/// the simulator's own tasks are numbered from there.
pub(crate) fn build_machine(spec: &MachineSpec) -> anyhow::Result<Arc<Sim>> {
    let sim = Sim::new(SimConfig {
        first_pid: PID_MAX_LIMIT,
        ..spec.config
    });
    // Served on the real clock: each filesystem's flusher is a thread.
    sim.machine()
        .start_flusher_threads()
        .context("starting the flusher threads")?;
    for (i, fs) in spec.fs.iter().enumerate() {
        if spec.fs[..i].iter().any(|other| other.dir == fs.dir) {
            bail!("--fs {}: given twice", fs.dir);
        }
        if let FsSource::Dir(host) = &fs.source
            && let Err(e) = std::fs::read_dir(host)
        {
            bail!("--fs {}={}: {}", fs.dir, host.display(), e);
        }
        sim.machine()
            .mount(&fs.dir, fs.source.clone())
            .with_context(|| format!("--fs {}", fs.dir))?;
    }
    if let Some(bytes) = spec.swap_bytes {
        sim.swapon_ram(bytes, None).context("--swap")?;
    }
    Ok(Arc::new(sim))
}

/// Why a mount could not be made, in words a user can act on.
fn check_mountable(dir: &Path) -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!(
            "/dev/fuse is missing: FUSE is not available here (load the `fuse` module, or \
             give the container the device)"
        );
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        bail!(
            "cannot open /dev/fuse: {e} (it must be readable and writable by this user; most \
             distributions make it mode 0666)"
        );
    }
    let meta =
        std::fs::metadata(dir).with_context(|| format!("{}: cannot mount there", dir.display()))?;
    if !meta.is_dir() {
        bail!("{}: not a directory", dir.display());
    }
    if is_mount_point(dir)? {
        bail!(
            "{}: busy: something is mounted there already",
            dir.display()
        );
    }
    Ok(())
}

/// Whether `dir` is a mount point (listed in `/proc/self/mountinfo`).
pub(crate) fn is_mount_point(dir: &Path) -> anyhow::Result<bool> {
    let dir = std::fs::canonicalize(dir)?;
    Ok(mount_at(&dir)?.is_some())
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, PartialEq, Eq)]
struct MountInfo {
    /// The mount's id (field 1).
    id: u64,
    /// The filesystem type and source (`fuse` or `fuse.memcg`, and
    /// `memcg`, for ours).
    fstype: String,
    source: String,
}

impl MountInfo {
    /// Whether it is a memcg mount (of any server).
    fn is_memcg(&self) -> bool {
        (self.fstype == "fuse" || self.fstype == "fuse.memcg") && self.source == "memcg"
    }
}

/// Parses a `/proc/self/mountinfo` line: (mount point, what is there).
fn parse_mountinfo(line: &str) -> Option<(String, MountInfo)> {
    let (fields, rest) = line.split_once(" - ")?;
    let fields: Vec<&str> = fields.split(' ').collect();
    let mut rest = rest.split(' ');
    Some((
        unescape_mount_path(fields.get(4)?),
        MountInfo {
            id: fields.first()?.parse().ok()?,
            fstype: rest.next()?.to_owned(),
            source: unescape_mount_path(rest.next()?),
        },
    ))
}

/// The mounts at `path` (absolute, resolved), bottom to top.
fn mounts_at(path: &Path) -> anyhow::Result<Vec<MountInfo>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let path = path.as_os_str().to_string_lossy();
    Ok(info
        .lines()
        .filter_map(parse_mountinfo)
        .filter(|(at, _)| *at == path)
        .map(|(_, mount)| mount)
        .collect())
}

/// The topmost mount at `path` (absolute, resolved), if any.
fn mount_at(path: &Path) -> anyhow::Result<Option<MountInfo>> {
    Ok(mounts_at(path)?.pop())
}

/// The ids of the mounts at `path` (absolute, resolved).
fn mount_ids_at(path: &Path) -> anyhow::Result<Vec<u64>> {
    Ok(mounts_at(path)?.into_iter().map(|m| m.id).collect())
}

/// `/proc/self/mountinfo` writes space, tab, newline and backslash as
/// octal escapes.
fn unescape_mount_path(text: &str) -> String {
    text.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// `dir` made absolute with its parent resolved, not itself: a dead mount
/// at `dir` cannot be resolved (`ENOTCONN`).
fn absolute_unresolved(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = std::path::absolute(dir)?;
    match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => Ok(std::fs::canonicalize(parent)
            .with_context(|| format!("{}: cannot mount there", dir.display()))?
            .join(name)),
        _ => Ok(dir),
    }
}

/// Lazily unmounts `dir` (`umount -l`), as root directly, else through
/// the setuid `fusermount3`/`fusermount` (`-u -z`).
fn unmount_detached(dir: &Path) -> std::io::Result<()> {
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid NUL-terminated path for the call's duration.
    if unsafe { libc::umount2(c_dir.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(err);
    }
    for helper in ["fusermount3", "fusermount"] {
        if std::process::Command::new(helper)
            .args(["-u", "-z", "--"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return Ok(());
        }
    }
    Err(err)
}

/// Whether what is mounted at `dir` is a memcg mount whose server is gone:
/// `statfs`, which always asks the server (a `stat` may be answered from
/// the kernel's attribute cache), fails with `ENOTCONN` (or
/// `ECONNABORTED`, for a request waiting when the server's device
/// closed).
fn is_dead_memcg_mount(dir: &Path) -> anyhow::Result<bool> {
    if !mount_at(dir)?.is_some_and(|m| m.is_memcg()) {
        return Ok(false);
    }
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: all-zero is a valid `statfs` to fill.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a buffer for the call.
    if unsafe { libc::statfs(c_dir.as_ptr(), &mut buf) } == 0 {
        return Ok(false);
    }
    Ok(matches!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOTCONN | libc::ECONNABORTED)
    ))
}

/// A `memcg mount` killed before its watchdog could unmount (both
/// SIGKILLed at once) leaves a dead mount at `dir`: unmounts it, saying
/// so; anything else there is left alone.
fn recover_dead_mount(dir: &Path) -> anyhow::Result<()> {
    if !is_dead_memcg_mount(dir)? {
        return Ok(());
    }
    unmount_detached(dir).with_context(|| {
        format!(
            "{}: a memcg mount whose server died is there and could not be unmounted; \
             `umount -l {}` (or `fusermount -u -z {}`) removes it",
            dir.display(),
            dir.display(),
            dir.display()
        )
    })?;
    eprintln!(
        "memcg: {}: unmounted a memcg mount whose server had died",
        dir.display()
    );
    Ok(())
}

/// What a mount's server knows of the files of its mount, for a host
/// process's `syncfs(2)` (`memcg run`): which simulated filesystem a file
/// of the mount is on.
pub(crate) struct FsView {
    sim: Arc<Sim>,
    host: Arc<HostProcs>,
    inodes: Arc<tree::Inodes>,
    /// The mount's device (`st_dev` of its files).
    dev: u64,
}

impl FsView {
    /// The simulator served.
    pub(crate) fn sim(&self) -> &Arc<Sim> {
        &self.sim
    }

    /// The host processes it knows as tasks.
    pub(crate) fn host_procs(&self) -> &Arc<HostProcs> {
        &self.host
    }

    /// The simulated filesystem that file `ino` of device `dev` is on (or
    /// is the root of): `None` for a file of no `--fs` filesystem (an
    /// interface file, a directory of the tree) or of another mount.
    pub(crate) fn superblock_of(&self, dev: u64, ino: u64) -> Option<Arc<Superblock>> {
        if dev != self.dev {
            return None;
        }
        if let Some((minor, _)) = fsfiles::decode(ino) {
            return self.sim.machine().bdi(&format!("0:{minor}"));
        }
        let path = self.inodes.path(ino)?;
        match tree::classify(&self.sim, &path)? {
            tree::Node::Mount(path) => self.sim.machine().resolve_file(&path).map(|(sb, _)| sb),
            _ => None,
        }
    }

    /// Writes back every simulated filesystem (`sync(2)`).
    pub(crate) fn sync_all(&self) -> Result<u64, memcg_sim::SimError> {
        Ok(self.sim.machine().sync()?)
    }
}

/// A mounted machine; dropping it unmounts.
pub(crate) struct Mounted {
    /// Where it is mounted; `None` once the mount point was detached by
    /// its user (`memcg run`, which keeps only bind mounts of it).
    dir: Option<PathBuf>,
    view: Arc<FsView>,
    session: Option<fuser::BackgroundSession>,
    stop_pruner: Arc<AtomicBool>,
    pruner: Option<std::thread::JoinHandle<()>>,
}

/// How often host processes that exited are dropped (so that
/// `cgroup.events` and `cgroup.procs` stay current without a reader).
pub(crate) const PRUNE_EVERY: Duration = Duration::from_millis(500);

/// How long an unmount waits for the server to stop when a process still
/// holds one of its files open.
const SERVER_STOP_WAIT: Duration = Duration::from_millis(500);

/// How often pollers of events files are checked for an event.
pub(crate) const POLL_CHECK_EVERY: Duration = Duration::from_millis(50);

/// Keeps the server's heap in one glibc malloc arena. glibc gives each
/// thread that allocates while another holds an arena one of its own, and
/// each arena keeps the free memory of the most it ever held: under cgroup
/// churn (10000 made and removed at a time) the four FUSE threads' arenas
/// took the server from 81 MB to 158 MB of RSS in eight rounds, where one
/// arena stays at 84 MB. Small allocations still go through each thread's
/// cache (tcache) without the arena's lock. A no-op on other C libraries.
fn one_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `mallopt` only sets an allocator parameter; it is called
    // before the server's threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Serves `sim` at `dir` (`memcg mount`) until the returned guard is
/// dropped: refused where something is mounted already.
pub(crate) fn mount(sim: Arc<Sim>, dir: &Path) -> anyhow::Result<Mounted> {
    check_mountable(dir)?;
    serve_at(sim, dir)
}

/// Serves `sim` at `dir`, mounted or not, until the returned guard is
/// dropped (`memcg run`, at a mount point of its private namespace).
pub(crate) fn serve_at(sim: Arc<Sim>, dir: &Path) -> anyhow::Result<Mounted> {
    one_malloc_arena();
    let host = HostProcs::new(Arc::clone(&sim));
    let fs = fs::SimFs::new(Arc::clone(&sim), Arc::clone(&host));
    let pollers = fs.pollers();
    let inodes = fs.inodes();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("memcg".into()),
        fuser::MountOption::Subtype("memcg".into()),
        // The kernel checks the modes and owners (all root's), as it does
        // on cgroupfs: other users may read the machine, not change it
        // (nor, through `cgroup.procs` and `cgroup.kill`, kill anything).
        fuser::MountOption::DefaultPermissions,
    ];
    // Any user's processes may use it, as anyone may read /sys/fs/cgroup.
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(4);
    config.clone_fd = true;
    let session = fuser::spawn_mount2(fs, dir, &config).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (mounting needs root, or a user namespace: `memcg run` makes one)"
            }
            _ => "",
        };
        anyhow::anyhow!("{}: mount failed: {e}{hint}", dir.display())
    })?;
    let dev = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir).map(|m| m.dev())
    };
    let stop_pruner = Arc::new(AtomicBool::new(false));
    let pruner = {
        let stop = Arc::clone(&stop_pruner);
        let (sim, host) = (Arc::clone(&sim), Arc::clone(&host));
        std::thread::Builder::new()
            .name("memcg-prune".into())
            .spawn(move || background(&sim, &host, &pollers, &stop))?
    };
    let mounted = Mounted {
        dir: Some(dir.to_owned()),
        view: Arc::new(FsView {
            sim,
            host,
            inodes,
            dev: *dev.as_ref().unwrap_or(&0),
        }),
        session: Some(session),
        stop_pruner,
        pruner: Some(pruner),
    };
    dev.with_context(|| format!("{}: the mount did not come up", dir.display()))?;
    Ok(mounted)
}

/// The machine's housekeeping while mounted: drops exited host
/// processes and fires the pressure triggers whose windows ended
/// (writeback is the filesystems' flusher threads').
fn background(sim: &Sim, host: &HostProcs, pollers: &fs::Pollers, stop: &AtomicBool) {
    let checks_per_round = (PRUNE_EVERY.as_millis() / POLL_CHECK_EVERY.as_millis()).max(1);
    while !stop.load(Ordering::Relaxed) {
        host.prune();
        for _ in 0..checks_per_round {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            pollers.check(sim);
            std::thread::sleep(POLL_CHECK_EVERY);
        }
    }
}

impl Mounted {
    /// Whether the server stopped on its own (someone unmounted it).
    pub(crate) fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// The mount's device (`st_dev` of its files).
    pub(crate) fn dev(&self) -> u64 {
        self.view.dev
    }

    /// What the server knows of the mount's files.
    pub(crate) fn view(&self) -> Arc<FsView> {
        Arc::clone(&self.view)
    }

    /// The mount point was detached by the caller (only bind mounts of the
    /// machine remain): nothing is unmounted at its path on drop.
    pub(crate) fn mount_point_detached(&mut self) {
        self.dir = None;
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Lazy: processes still using the mount cannot keep it (or us)
        // alive; the server sees the device close and ends.
        if let Some(dir) = &self.dir
            && let Ok(dir) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        {
            // SAFETY: `dir` is a valid NUL-terminated path for the call's
            // duration; a failure (already unmounted) is harmless.
            unsafe {
                libc::umount2(dir.as_ptr(), libc::MNT_DETACH);
            }
        }
        if let Some(session) = self.session.take() {
            // A process may still hold a file of the mount open, which
            // keeps the connection (and the server) alive after the
            // detach: abort it (fusectl, where mounted: the connection's
            // number is the mount's device minor), and in any case stop
            // waiting after a while (the connection dies with this
            // process).
            let connection = libc::minor(self.view.dev);
            let _ = std::fs::write(format!("/sys/fs/fuse/connections/{connection}/abort"), "1");
            let deadline = std::time::Instant::now() + SERVER_STOP_WAIT;
            while !session.guard.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if session.guard.is_finished() {
                let _ = session.join();
            } else {
                // Joining would wait for the holder; dropping would join.
                std::mem::forget(session);
            }
        }
        self.stop_pruner.store(true, Ordering::Relaxed);
        if let Some(pruner) = self.pruner.take() {
            let _ = pruner.join();
        }
        // As at a filesystem's unmount: dirty pages are written back, so
        // a host directory (`--fs DIR=dir:HOSTDIR`) gets its contents.
        if let Err(e) = self.view.sync_all() {
            eprintln!("memcg: writing back the --fs filesystems at unmount: {e}");
        }
    }
}

/// `memcg mount DIR`: serves until interrupted (SIGINT, SIGTERM, SIGHUP)
/// or unmounted from outside, then unmounts. A dead memcg mount found at
/// `DIR` (its server SIGKILLed with its watchdog) is unmounted first; a
/// watchdog unmounts `DIR` if this process dies without doing so.
pub(crate) fn run_mount(dir: &Path, spec: &MachineSpec) -> anyhow::Result<()> {
    recover_dead_mount(&absolute_unresolved(dir)?)?;
    let dir = &std::fs::canonicalize(dir)
        .with_context(|| format!("{}: cannot mount there", dir.display()))?;
    // Forked before any thread starts.
    let watchdog = watchdog::Watchdog::start(dir)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let sim = build_machine(spec)?;
    let mounted = mount(Arc::clone(&sim), dir)?;
    let workloads = crate::served::Workloads::start(&sim, &spec.workloads)?;
    eprintln!(
        "memcg: a simulated machine at {} ({}/sys/fs/cgroup); Ctrl-C or `umount {}` stops it",
        dir.display(),
        dir.display(),
        dir.display()
    );
    while !stop.load(Ordering::Relaxed) && !mounted.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(workloads);
    drop(mounted);
    watchdog.disarm();
    eprintln!("memcg: unmounted {}", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_specs_parse_or_say_why_not() {
        let ram: FsSpec = "/tmp/test-fs=ram:16G".parse().unwrap();
        assert_eq!(ram.dir, "/tmp/test-fs");
        assert!(matches!(ram.source, FsSource::Ram { size_bytes } if size_bytes == 16 << 30));
        let dir: FsSpec = "/data/=/srv/data".parse().unwrap();
        assert_eq!(dir.dir, "/data");
        assert!(matches!(dir.source, FsSource::Dir(ref p) if p == Path::new("/srv/data")));
        for bad in [
            "tmp=ram:1G",
            "/tmp",
            "/x=ram:lots",
            "/x=relative",
            "/=ram:1M",
        ] {
            assert!(bad.parse::<FsSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn mountinfo_paths_unescape() {
        assert_eq!(unescape_mount_path("/a\\040b\\134c"), "/a b\\c");
    }

    #[test]
    fn mountinfo_lines_parse() {
        let line = "612 35 0:84 / /tmp/a\\040b rw,nosuid,nodev,relatime shared:327 - fuse \
                    memcg rw,user_id=0,group_id=0,default_permissions,allow_other";
        let (at, mount) = parse_mountinfo(line).unwrap();
        assert_eq!(at, "/tmp/a b");
        assert_eq!(
            mount,
            MountInfo {
                id: 612,
                fstype: "fuse".to_owned(),
                source: "memcg".to_owned(),
            }
        );
        assert!(mount.is_memcg());
        assert_eq!(parse_mountinfo("garbage"), None);
    }
}
