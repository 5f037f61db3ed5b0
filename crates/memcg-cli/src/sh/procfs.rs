//! The kernel files outside the cgroup tree that `memcg sh` knows: zswap's
//! module parameters (`/sys/module/zswap/parameters/*`) and debugfs
//! counters (`/sys/kernel/debug/zswap/*`), and the `/proc` files
//! `/proc/swaps`, `/proc/meminfo`,
//! `/proc/pressure/memory`, `/proc/sys/vm/swappiness`,
//! `/proc/sys/vm/min_free_kbytes`, the `/proc/sys/vm/dirty_*` writeback
//! settings and
//! `/proc/PID/oom_score_adj` and the read-only `/proc/PID/oom_score`, and
//! the write-only
//! `/proc/sys/vm/drop_caches` (1, 2 or 3), and each mounted filesystem's
//! `/sys/class/bdi/0:N/read_ahead_kb`, read as the
//! kernel prints them and written with its checks (a number in range, or
//! `EINVAL`; the `dirty_*` ones parsed as `proc_dointvec` and
//! `proc_doulongvec_minmax` parse). A write to `/proc/pressure/memory`
//! makes a poll trigger for that open file (`psi_write`, see `memcg::psi`).

use std::sync::Mutex;

use memcg::Errno;
use memcg::psi::{PressurePoll, TriggerSlot};
use memcg_sim::Sim;

/// A writable `/proc` file, opened.
pub(crate) enum ProcFile {
    /// `/proc/sys/vm/swappiness` (0..=200).
    Swappiness,
    /// `/proc/sys/vm/min_free_kbytes` (an int, at least 0).
    MinFreeKbytes,
    /// `/proc/PID/oom_score_adj` (-1000..=1000).
    OomScoreAdj(u32),
    /// A `/proc/sys/vm/dirty_*` setting.
    Dirty(DirtySysctl),
    /// `/proc/sys/vm/drop_caches` (1..=3; mode 0200: reads get `EACCES`).
    DropCaches,
    /// A zswap module parameter.
    Zswap(ZswapParam),
    /// `/sys/class/bdi/NAME/read_ahead_kb` of the backing device NAME.
    ReadAheadKb(String),
    /// `/proc/pressure/memory`: a poll trigger of the machine's pressure,
    /// one per open file.
    Pressure {
        slot: Mutex<TriggerSlot>,
        /// The opener has `CAP_SYS_RESOURCE` (real-time triggers).
        privileged: bool,
    },
    /// A file that opens for writing (as root) but refuses every write
    /// with this errno: `EIO` for a `/proc` file without a write method
    /// (`pde_write`), `EACCES` for a read-only debugfs counter
    /// (`simple_attr_write` without a setter), `EINVAL` for
    /// `/proc/PID/oom_score` (a pid file with no write method).
    Refusing(Errno),
}

/// The `vm.dirty_*` sysctls (mm/page-writeback.c's table).
#[derive(Debug, Clone, Copy)]
pub(crate) enum DirtySysctl {
    BackgroundRatio,
    BackgroundBytes,
    Ratio,
    Bytes,
    WritebackCentisecs,
    ExpireCentisecs,
}

impl DirtySysctl {
    fn of(path: &str) -> Option<Self> {
        Some(match path.strip_prefix("/proc/sys/vm/")? {
            "dirty_background_ratio" => Self::BackgroundRatio,
            "dirty_background_bytes" => Self::BackgroundBytes,
            "dirty_ratio" => Self::Ratio,
            "dirty_bytes" => Self::Bytes,
            "dirty_writeback_centisecs" => Self::WritebackCentisecs,
            "dirty_expire_centisecs" => Self::ExpireCentisecs,
            _ => return None,
        })
    }

    fn read(self, sim: &Sim) -> String {
        let s = sim.fs().tree().dirty_settings();
        match self {
            Self::BackgroundRatio => format!("{}\n", s.dirty_background_ratio),
            Self::BackgroundBytes => format!("{}\n", s.dirty_background_bytes),
            Self::Ratio => format!("{}\n", s.dirty_ratio),
            Self::Bytes => format!("{}\n", s.dirty_bytes),
            Self::WritebackCentisecs => format!("{}\n", s.dirty_writeback_centisecs),
            Self::ExpireCentisecs => format!("{}\n", s.dirty_expire_centisecs),
        }
    }

    /// Parses `text` as the setting's handler does and sets it: the ratios
    /// and centiseconds are ints (`proc_dointvec`), the byte counts
    /// unsigned longs (`proc_doulongvec_minmax`: a `-` is `EINVAL`).
    fn write(self, sim: &Sim, text: &str) -> Result<(), Errno> {
        let tree = sim.fs().tree();
        let (negative, magnitude) = proc_get_long(text)?;
        let int = || {
            let value = i64::try_from(magnitude).map_err(|_| Errno::EINVAL)?;
            Ok(if negative { -value } else { value })
        };
        let ulong = || {
            if negative {
                Err(Errno::EINVAL)
            } else {
                Ok(magnitude)
            }
        };
        match self {
            Self::BackgroundRatio => tree.set_dirty_background_ratio(int()?),
            Self::BackgroundBytes => tree.set_dirty_background_bytes(ulong()?),
            Self::Ratio => tree.set_dirty_ratio(int()?),
            Self::Bytes => tree.set_dirty_bytes(ulong()?),
            Self::WritebackCentisecs => tree.set_dirty_writeback_centisecs(int()?),
            Self::ExpireCentisecs => tree.set_dirty_expire_centisecs(int()?),
        }
    }
}

/// `proc_get_long` for a write: blanks skipped, an optional `-`, a number
/// in base 0 (`0x` hex, a leading `0` octal), then a blank or the end
/// (what follows is ignored, as the kernel takes only the first value of
/// a one-value setting); anything else, or an overflow, is `EINVAL`.
/// Returns whether it was negative, and its magnitude.
fn proc_get_long(text: &str) -> Result<(bool, u64), Errno> {
    let text = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(Errno::EINVAL);
    }
    let (radix, body) = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) if hex.starts_with(|c: char| c.is_ascii_hexdigit()) => (16, hex),
        _ if digits.starts_with('0') => (8, digits),
        _ => (10, digits),
    };
    let len = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    let (number, rest) = body.split_at(len);
    if !(rest.is_empty() || rest.starts_with([' ', '\t', '\n'])) {
        return Err(Errno::EINVAL);
    }
    let magnitude = u64::from_str_radix(number, radix).map_err(|_| Errno::EINVAL)?;
    Ok((negative, magnitude))
}

impl ProcFile {
    /// The opener lacks `CAP_SYS_RESOURCE`: its pressure triggers need
    /// windows of a multiple of 2 s.
    pub(crate) fn drop_privileges(&mut self) {
        if let ProcFile::Pressure { privileged, .. } = self {
            *privileged = false;
        }
    }

    /// `poll(2)` on `/proc/pressure/memory` opened for writing
    /// (`psi_fop_poll`); `None` for another file. `consume` takes the
    /// event in.
    pub(crate) fn pressure_poll(&self, sim: &Sim, consume: bool) -> Option<PressurePoll> {
        let ProcFile::Pressure { slot, .. } = self else {
            return None;
        };
        let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        Some(slot.poll(sim.fs().tree(), consume))
    }
}

/// zswap's writable module parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ZswapParam {
    Enabled,
    Compressor,
    MaxPoolPercent,
    AcceptThresholdPercent,
    ShrinkerEnabled,
}

const ZSWAP_PARAMS: &str = "/sys/module/zswap/parameters/";
const BDI_DIR: &str = "/sys/class/bdi/";
const ZSWAP_DEBUG: &str = "/sys/kernel/debug/zswap/";

/// Every file this module serves outside `/proc/PID/` (for listings).
pub(crate) const KERNEL_FILES: &[&str] = &[
    "/proc/meminfo",
    "/proc/swaps",
    "/proc/pressure/memory",
    "/proc/sys/vm/dirty_background_bytes",
    "/proc/sys/vm/dirty_background_ratio",
    "/proc/sys/vm/dirty_bytes",
    "/proc/sys/vm/dirty_expire_centisecs",
    "/proc/sys/vm/dirty_ratio",
    "/proc/sys/vm/dirty_writeback_centisecs",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/vm/min_free_kbytes",
    "/proc/sys/vm/swappiness",
    "/sys/module/zswap/parameters/accept_threshold_percent",
    "/sys/module/zswap/parameters/compressor",
    "/sys/module/zswap/parameters/enabled",
    "/sys/module/zswap/parameters/max_pool_percent",
    "/sys/module/zswap/parameters/shrinker_enabled",
    "/sys/kernel/debug/zswap/pool_limit_hit",
    "/sys/kernel/debug/zswap/pool_total_size",
    "/sys/kernel/debug/zswap/reject_alloc_fail",
    "/sys/kernel/debug/zswap/reject_compress_fail",
    "/sys/kernel/debug/zswap/reject_compress_poor",
    "/sys/kernel/debug/zswap/reject_kmemcache_fail",
    "/sys/kernel/debug/zswap/reject_reclaim_fail",
    "/sys/kernel/debug/zswap/stored_pages",
    "/sys/kernel/debug/zswap/written_back_pages",
];

/// The backing device `path` is the `read_ahead_kb` of, if it is one.
fn bdi_of(path: &str) -> Option<&str> {
    path.strip_prefix(BDI_DIR)?.strip_suffix("/read_ahead_kb")
}

/// The `read_ahead_kb` files of the mounted filesystems' devices.
fn bdi_files(sim: &Sim) -> impl Iterator<Item = String> {
    sim.machine()
        .bdi_names()
        .into_iter()
        .map(|(_, bdi)| format!("{BDI_DIR}{bdi}/read_ahead_kb"))
}

/// Every file this module serves now outside `/proc/PID/` (for
/// listings): [`KERNEL_FILES`] and the mounts' devices.
pub(crate) fn kernel_files(sim: &Sim) -> Vec<String> {
    let fixed = KERNEL_FILES.iter().map(|p| (*p).to_owned());
    fixed.chain(bdi_files(sim)).collect()
}

/// Whether `path` is one of [`kernel_files`].
pub(crate) fn serves(sim: &Sim, path: &str) -> bool {
    KERNEL_FILES.contains(&path) || bdi_of(path).is_some_and(|bdi| sim.machine().bdi(bdi).is_some())
}

/// The permission bits of kernel file `path`, as the kernel shows them.
pub(crate) fn mode(path: &str) -> u16 {
    match path {
        p if bdi_of(p).is_some() => 0o644,
        "/proc/sys/vm/drop_caches" => 0o200,
        "/proc/sys/vm/min_free_kbytes" | "/proc/sys/vm/swappiness" => 0o644,
        p if DirtySysctl::of(p).is_some() => 0o644,
        // zswap's parameters are 0644; debugfs counters 0444.
        p if p.starts_with(ZSWAP_PARAMS) => 0o644,
        // Anyone may write a trigger (`proc_create(.., 0666, ..)`).
        "/proc/pressure/memory" => 0o666,
        _ => 0o444,
    }
}

/// Whether `path` is one of the files this module serves.
pub(crate) fn is_kernel_file(path: &str) -> bool {
    path.starts_with("/proc/")
        || path.starts_with(ZSWAP_PARAMS)
        || path.starts_with(ZSWAP_DEBUG)
        || path.starts_with(BDI_DIR)
}

fn zswap_param(name: &str) -> Option<ZswapParam> {
    Some(match name {
        "enabled" => ZswapParam::Enabled,
        "compressor" => ZswapParam::Compressor,
        "max_pool_percent" => ZswapParam::MaxPoolPercent,
        "accept_threshold_percent" => ZswapParam::AcceptThresholdPercent,
        "shrinker_enabled" => ZswapParam::ShrinkerEnabled,
        _ => return None,
    })
}

/// A bool parameter as the kernel prints it.
fn yn(on: bool) -> String {
    format!("{}\n", if on { 'Y' } else { 'N' })
}

/// A zswap parameter or debugfs counter.
fn read_zswap(sim: &Sim, path: &str) -> Option<Result<String, Errno>> {
    let z = sim.swap().zswap();
    if let Some(name) = path.strip_prefix(ZSWAP_PARAMS) {
        return Some(match zswap_param(name) {
            Some(ZswapParam::Enabled) => Ok(yn(z.enabled())),
            Some(ZswapParam::Compressor) => Ok(format!("{}\n", z.compressor())),
            Some(ZswapParam::MaxPoolPercent) => Ok(format!("{}\n", z.max_pool_percent())),
            Some(ZswapParam::AcceptThresholdPercent) => {
                Ok(format!("{}\n", z.accept_threshold_percent()))
            }
            Some(ZswapParam::ShrinkerEnabled) => Ok(yn(z.shrinker_enabled())),
            None => Err(Errno::ENOENT),
        });
    }
    let name = path.strip_prefix(ZSWAP_DEBUG)?;
    let c = z.debug_counts();
    let value = match name {
        "pool_total_size" => c.pool_total_size,
        "stored_pages" => c.stored_pages,
        "written_back_pages" => c.written_back_pages,
        "reject_compress_poor" => c.reject_compress_poor,
        "reject_alloc_fail" => c.reject_alloc_fail,
        "reject_reclaim_fail" => c.reject_reclaim_fail,
        "pool_limit_hit" => c.pool_limit_hit,
        // Paths the kernel has that nothing here can reach.
        "reject_compress_fail" | "reject_kmemcache_fail" => 0,
        _ => return Some(Err(Errno::ENOENT)),
    };
    Some(Ok(format!("{value}\n")))
}

/// `kstrtobool`: y/Y/1/on or n/N/0/off.
fn parse_bool(text: &str) -> Result<bool, Errno> {
    match text.trim() {
        "y" | "Y" | "1" | "on" | "yes" => Ok(true),
        "n" | "N" | "0" | "off" | "no" => Ok(false),
        _ => Err(Errno::EINVAL),
    }
}

fn write_zswap(sim: &Sim, param: ZswapParam, text: &str) -> Result<(), Errno> {
    let z = sim.swap().zswap();
    let number = || text.trim().parse::<u32>().map_err(|_| Errno::EINVAL);
    match param {
        ZswapParam::Enabled => z.set_enabled(parse_bool(text)?),
        ZswapParam::ShrinkerEnabled => z.set_shrinker_enabled(parse_bool(text)?),
        // lz4 and zstd are built in: another name is not available
        // (`zswap_compressor_param_set`: `-ENOENT`).
        ZswapParam::Compressor => {
            let compressor =
                memcg::zswap::Compressor::from_name(text.trim()).ok_or(Errno::ENOENT)?;
            z.set_compressor(compressor);
        }
        ZswapParam::MaxPoolPercent => z.set_max_pool_percent(number()?),
        // `zswap_accept_thr_param_set`: 1..=100.
        ZswapParam::AcceptThresholdPercent => match number()? {
            n @ 1..=100 => z.set_accept_threshold_percent(n),
            _ => return Err(Errno::EINVAL),
        },
    }
    Ok(())
}

/// `/proc/PID/FILE` split into the pid and the file.
fn pid_file(path: &str) -> Option<(u32, &str)> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, file) = rest.split_once('/')?;
    Some((pid.parse().ok()?, file))
}

/// The contents of `path`, if it is a `/proc` file (`ENOENT` for one that
/// does not exist: an unknown pid or file).
pub(crate) fn read(sim: &Sim, path: &str) -> Option<Result<String, Errno>> {
    if let Some(result) = read_zswap(sim, path) {
        return Some(result);
    }
    if path.starts_with(BDI_DIR) {
        return Some(
            bdi_of(path)
                .and_then(|bdi| sim.machine().bdi(bdi))
                .map(|sb| format!("{}\n", sb.read_ahead_kb()))
                .ok_or(Errno::ENOENT),
        );
    }
    if !path.starts_with("/proc/") {
        return None;
    }
    if let Some(setting) = DirtySysctl::of(path) {
        return Some(Ok(setting.read(sim)));
    }
    Some(match path {
        "/proc/swaps" => Ok(sim.machine().proc_swaps()),
        "/proc/meminfo" => Ok(sim.proc_meminfo()),
        "/proc/sys/vm/swappiness" => Ok(format!("{}\n", sim.machine().vm_swappiness())),
        "/proc/sys/vm/min_free_kbytes" => Ok(format!("{}\n", sim.machine().vm_min_free_kbytes())),
        "/proc/sys/vm/drop_caches" => Err(Errno::EACCES),
        "/proc/pressure/memory" => {
            let tree = sim.fs().tree();
            Ok(tree.memory_pressure(tree.root().cgroup()))
        }
        _ => match pid_file(path) {
            Some((pid, "oom_score_adj")) => sim
                .task(pid)
                .map(|t| format!("{}\n", t.oom_score_adj()))
                .ok_or(Errno::ENOENT),
            Some((pid, "oom_score")) => sim
                .oom_score(pid)
                .map(|points| format!("{points}\n"))
                .ok_or(Errno::ENOENT),
            _ => Err(Errno::ENOENT),
        },
    })
}

/// Opens `path` under `/proc` for writing: `EACCES` for a read-only file,
/// `ENOENT` for one that does not exist.
pub(crate) fn open_for_write(sim: &Sim, path: &str) -> Result<ProcFile, Errno> {
    if path == "/proc/sys/vm/swappiness" {
        return Ok(ProcFile::Swappiness);
    }
    if path == "/proc/sys/vm/drop_caches" {
        return Ok(ProcFile::DropCaches);
    }
    if path == "/proc/sys/vm/min_free_kbytes" {
        return Ok(ProcFile::MinFreeKbytes);
    }
    if let Some(setting) = DirtySysctl::of(path) {
        return Ok(ProcFile::Dirty(setting));
    }
    if let Some(name) = path.strip_prefix(ZSWAP_PARAMS) {
        return zswap_param(name).map(ProcFile::Zswap).ok_or(Errno::ENOENT);
    }
    if path.starts_with(BDI_DIR) {
        return match bdi_of(path) {
            Some(bdi) if sim.machine().bdi(bdi).is_some() => {
                Ok(ProcFile::ReadAheadKb(bdi.to_owned()))
            }
            _ => Err(Errno::ENOENT),
        };
    }
    if path.starts_with(ZSWAP_DEBUG) {
        return match read_zswap(sim, path) {
            Some(Ok(_)) => Ok(ProcFile::Refusing(Errno::EACCES)),
            _ => Err(Errno::ENOENT),
        };
    }
    if path == "/proc/pressure/memory" {
        return Ok(ProcFile::Pressure {
            slot: Mutex::new(TriggerSlot::default()),
            privileged: true,
        });
    }
    match pid_file(path) {
        Some((pid, "oom_score_adj")) if sim.task(pid).is_some() => Ok(ProcFile::OomScoreAdj(pid)),
        Some((pid, "oom_score")) if sim.task(pid).is_some() => {
            Ok(ProcFile::Refusing(Errno::EINVAL))
        }
        Some(_) => Err(Errno::ENOENT),
        None if read(sim, path).is_some_and(|r| r.is_ok()) => Ok(ProcFile::Refusing(Errno::EIO)),
        None => Err(Errno::ENOENT),
    }
}

/// Writes `text` to an opened `/proc` file.
pub(crate) fn write(sim: &Sim, file: &ProcFile, text: &str) -> Result<(), Errno> {
    match file {
        ProcFile::Zswap(param) => return write_zswap(sim, *param, text),
        ProcFile::Refusing(errno) => return Err(*errno),
        ProcFile::ReadAheadKb(bdi) => return write_read_ahead_kb(sim, bdi, text),
        ProcFile::Dirty(setting) => return setting.write(sim, text),
        ProcFile::Pressure { slot, privileged } => {
            return write_pressure(sim, slot, *privileged, text);
        }
        _ => {}
    }
    let value: i64 = text.trim().parse().map_err(|_| Errno::EINVAL)?;
    match file {
        ProcFile::Swappiness => {
            let v = u32::try_from(value).map_err(|_| Errno::EINVAL)?;
            sim.machine().set_vm_swappiness(v)
        }
        ProcFile::MinFreeKbytes => sim.machine().set_vm_min_free_kbytes(value),
        ProcFile::Zswap(_)
        | ProcFile::Refusing(_)
        | ProcFile::ReadAheadKb(_)
        | ProcFile::Dirty(_)
        | ProcFile::Pressure { .. } => {
            unreachable!("handled above")
        }
        ProcFile::DropCaches => {
            let mode = u32::try_from(value).map_err(|_| Errno::EINVAL)?;
            sim.machine().drop_caches(mode).map(drop)
        }
        ProcFile::OomScoreAdj(pid) => {
            let task = sim.task(*pid).ok_or(Errno::ESRCH)?;
            let v = i32::try_from(value).map_err(|_| Errno::EINVAL)?;
            task.set_oom_score_adj(v)
        }
    }
}

/// `read_ahead_kb_store`: an unsigned decimal (`kstrtoul`: an optional
/// `+`, one trailing newline), `ERANGE` past 64 bits; `ENODEV` once the
/// device is gone.
fn write_read_ahead_kb(sim: &Sim, bdi: &str, text: &str) -> Result<(), Errno> {
    let digits = text.strip_suffix('\n').unwrap_or(text);
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Errno::EINVAL);
    }
    let kb: u64 = digits.parse().map_err(|_| Errno::ERANGE)?;
    let sb = sim.machine().bdi(bdi).ok_or(Errno::ENODEV)?;
    sb.set_read_ahead_kb(kb);
    Ok(())
}

/// `psi_write`: an empty write is `EINVAL`; at most 32 bytes are looked
/// at, the last of them dropped (the kernel puts its NUL there, so an
/// `echo -n` loses its last digit), then the trigger is made on the
/// machine's pressure.
fn write_pressure(
    sim: &Sim,
    slot: &Mutex<TriggerSlot>,
    privileged: bool,
    text: &str,
) -> Result<(), Errno> {
    if text.is_empty() {
        return Err(Errno::EINVAL);
    }
    let bytes = &text.as_bytes()[..text.len().min(32) - 1];
    let text = String::from_utf8_lossy(bytes);
    let tree = sim.fs().tree();
    let root = tree.root().cgroup();
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    slot.write(tree, root, &text, privileged)
        .map_err(|e| e.errno())
}
