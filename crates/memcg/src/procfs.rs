//! The kernel files outside the cgroup tree, one table for every front
//! end (fs/proc, kernel/sysctl.c and mm's sysctl tables, module
//! parameters, debugfs, mm/backing-dev.c's sysfs): zswap's module
//! parameters (`/sys/module/zswap/parameters/*`) and debugfs counters
//! (`/sys/kernel/debug/zswap/*`), `/proc/swaps`, `/proc/meminfo`,
//! `/proc/pressure/memory`, `/proc/sys/vm/swappiness`,
//! `/proc/sys/vm/min_free_kbytes`, the `/proc/sys/vm/dirty_*` writeback
//! settings, the write-only `/proc/sys/vm/drop_caches` (1, 2 or 3), each
//! mounted filesystem's `/sys/class/bdi/0:N/read_ahead_kb`, the anonymous
//! transparent huge page settings (`/sys/kernel/mm/transparent_hugepage/
//! enabled` and `hugepages-<size>kB/enabled`, [`crate::huge_memory`]), and the
//! process files `/proc/PID/*`. Read as the kernel prints them and
//! written with its checks (a number in range, or `EINVAL`; the vm
//! sysctls parsed as `proc_dointvec` and `proc_doulongvec_minmax` parse:
//! base 0, only the first of several values taken). A
//! write to `/proc/pressure/memory` makes a poll trigger for that open
//! file (`psi_write`, see [`crate::psi`]).
//!
//! # The table
//!
//! Each fixed file is one row of `FILES`: its path, its mode as the
//! kernel shows it, and its handler, which says what the front ends
//! would otherwise guess from the name: whether it reads, writes, or
//! refuses writes with which errno; that `/proc/pressure/memory` is a PSI
//! trigger file ([`ProcFs::pressure_poll`]). None of these files notifies
//! pollers the way cgroupfs's events files do. Two families are not fixed
//! rows:
//!
//! - the `read_ahead_kb` of each mounted filesystem's backing device, one
//!   per mount of the [`Machine`];
//! - `/proc/PID/*`, whose contents depend on the task: the machine owns
//!   no processes, so the process side serves them through [`PidFiles`]
//!   (the simulator's tasks: `oom_score_adj`, `oom_score`).
//!
//! [`ProcFs`] is the view the front ends (`memcg sh`, the FUSE server)
//! read: a machine and its process side.
//!
//! Locking: none of its own beyond a pressure file's trigger slot, whose
//! mutex is held for one write or poll of that open file.

use std::sync::Mutex;

use crate::cgroupfs::Access;
use crate::errno::Errno;
use crate::machine::Machine;
use crate::meminfo;
use crate::psi::{PressurePoll, TriggerSlot};

/// How a fixed file reads.
type Read = fn(&Machine) -> String;
/// How a fixed file takes a write.
type Write = fn(&Machine, &str) -> Result<(), Errno>;

/// What a fixed file reads and writes.
#[derive(Clone, Copy)]
enum Handler {
    /// Read-only. Opened for writing (as root), every write fails with
    /// the errno: `EIO` for a `/proc` file without a write method
    /// (`pde_write`), `EACCES` for a read-only debugfs counter
    /// (`simple_attr_write` without a setter).
    ReadOnly(Read, Errno),
    /// A setting: read and written.
    Setting(Read, Write),
    /// Write-only (mode 0200, so even root's reads are `EACCES`, as
    /// `sysctl_perm` checks the mode): `drop_caches`.
    WriteOnly(Write),
    /// `/proc/pressure/memory`: the machine's pressure; writes make a
    /// poll trigger per open file (`psi_write`, `psi_fop_poll`).
    Pressure,
}

/// One fixed file.
struct Spec {
    path: &'static str,
    /// The permission bits, as the kernel shows them.
    mode: u16,
    handler: Handler,
}

const ZSWAP_PARAMS: &str = "/sys/module/zswap/parameters/";
const BDI_DIR: &str = "/sys/class/bdi/";
const ZSWAP_DEBUG: &str = "/sys/kernel/debug/zswap/";
const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage/";

/// `hugepages-<SIZE>kB/enabled` of anonymous mTHP order `ORDER`.
macro_rules! mthp_enabled {
    ($size:literal, $order:literal) => {
        setting(
            concat!(
                "/sys/kernel/mm/transparent_hugepage/hugepages-",
                $size,
                "kB/enabled"
            ),
            |m| m.thp().read_order($order).unwrap_or_default(),
            |m, t| m.thp().write_order($order, t),
        )
    };
}

const fn read_only(path: &'static str, read: Read) -> Spec {
    Spec {
        path,
        mode: 0o444,
        handler: Handler::ReadOnly(read, Errno::EIO),
    }
}

/// A `vm.*` sysctl or a module parameter: 0644.
const fn setting(path: &'static str, read: Read, write: Write) -> Spec {
    Spec {
        path,
        mode: 0o644,
        handler: Handler::Setting(read, write),
    }
}

/// A read-only zswap debugfs counter (0444; `simple_attr_write` without
/// a setter: `EACCES`).
const fn counter(path: &'static str, read: Read) -> Spec {
    Spec {
        path,
        mode: 0o444,
        handler: Handler::ReadOnly(read, Errno::EACCES),
    }
}

fn line(v: impl std::fmt::Display) -> String {
    format!("{v}\n")
}

/// Every fixed file, in the order listings show them.
const FILES: &[Spec] = &[
    read_only("/proc/meminfo", |m| meminfo::render(m.tree(), m.swap())),
    read_only("/proc/swaps", |m| m.proc_swaps()),
    // Anyone may write a trigger (`proc_create(.., 0666, ..)`).
    Spec {
        path: "/proc/pressure/memory",
        mode: 0o666,
        handler: Handler::Pressure,
    },
    setting(
        "/proc/sys/vm/dirty_background_bytes",
        |m| line(m.tree().dirty_settings().dirty_background_bytes),
        |m, t| m.tree().set_dirty_background_bytes(proc_ulong(t)?),
    ),
    setting(
        "/proc/sys/vm/dirty_background_ratio",
        |m| line(m.tree().dirty_settings().dirty_background_ratio),
        |m, t| m.tree().set_dirty_background_ratio(proc_int(t)?),
    ),
    setting(
        "/proc/sys/vm/dirty_bytes",
        |m| line(m.tree().dirty_settings().dirty_bytes),
        |m, t| m.tree().set_dirty_bytes(proc_ulong(t)?),
    ),
    setting(
        "/proc/sys/vm/dirty_expire_centisecs",
        |m| line(m.tree().dirty_settings().dirty_expire_centisecs),
        |m, t| m.tree().set_dirty_expire_centisecs(proc_int(t)?),
    ),
    setting(
        "/proc/sys/vm/dirty_ratio",
        |m| line(m.tree().dirty_settings().dirty_ratio),
        |m, t| m.tree().set_dirty_ratio(proc_int(t)?),
    ),
    setting(
        "/proc/sys/vm/dirty_writeback_centisecs",
        |m| line(m.tree().dirty_settings().dirty_writeback_centisecs),
        |m, t| m.tree().set_dirty_writeback_centisecs(proc_int(t)?),
    ),
    Spec {
        path: "/proc/sys/vm/drop_caches",
        mode: 0o200,
        handler: Handler::WriteOnly(|m, t| {
            let mode = u32::try_from(proc_int(t)?).map_err(|_| Errno::EINVAL)?;
            m.drop_caches(mode).map(drop)
        }),
    },
    setting(
        "/proc/sys/vm/min_free_kbytes",
        |m| line(m.vm_min_free_kbytes()),
        |m, t| m.set_vm_min_free_kbytes(proc_int(t)?),
    ),
    setting(
        "/proc/sys/vm/swappiness",
        |m| line(m.vm_swappiness()),
        |m, t| {
            let v = u32::try_from(proc_int(t)?).map_err(|_| Errno::EINVAL)?;
            m.set_vm_swappiness(v)
        },
    ),
    setting(
        "/sys/kernel/mm/transparent_hugepage/enabled",
        |m| m.thp().read_enabled(),
        |m, t| m.thp().write_enabled(t),
    ),
    mthp_enabled!("16", 2),
    mthp_enabled!("32", 3),
    mthp_enabled!("64", 4),
    mthp_enabled!("128", 5),
    mthp_enabled!("256", 6),
    mthp_enabled!("512", 7),
    mthp_enabled!("1024", 8),
    mthp_enabled!("2048", 9),
    setting(
        "/sys/module/zswap/parameters/accept_threshold_percent",
        |m| line(m.swap().zswap().accept_threshold_percent()),
        // `zswap_accept_thr_param_set`: 1..=100.
        |m, t| match number(t)? {
            n @ 1..=100 => {
                m.swap().zswap().set_accept_threshold_percent(n);
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        },
    ),
    setting(
        "/sys/module/zswap/parameters/compressor",
        |m| line(m.swap().zswap().compressor()),
        // lz4 and zstd are built in: another name is not available
        // (`zswap_compressor_param_set`: `-ENOENT`).
        |m, t| {
            let compressor = crate::zswap::Compressor::from_name(t.trim()).ok_or(Errno::ENOENT)?;
            m.swap().zswap().set_compressor(compressor);
            Ok(())
        },
    ),
    setting(
        "/sys/module/zswap/parameters/enabled",
        |m| yn(m.swap().zswap().enabled()),
        |m, t| {
            m.swap().zswap().set_enabled(parse_bool(t)?);
            Ok(())
        },
    ),
    setting(
        "/sys/module/zswap/parameters/max_pool_percent",
        |m| line(m.swap().zswap().max_pool_percent()),
        |m, t| {
            m.swap().zswap().set_max_pool_percent(number(t)?);
            Ok(())
        },
    ),
    setting(
        "/sys/module/zswap/parameters/shrinker_enabled",
        |m| yn(m.swap().zswap().shrinker_enabled()),
        |m, t| {
            m.swap().zswap().set_shrinker_enabled(parse_bool(t)?);
            Ok(())
        },
    ),
    counter("/sys/kernel/debug/zswap/pool_limit_hit", |m| {
        line(m.swap().zswap().debug_counts().pool_limit_hit)
    }),
    counter("/sys/kernel/debug/zswap/pool_total_size", |m| {
        line(m.swap().zswap().debug_counts().pool_total_size)
    }),
    counter("/sys/kernel/debug/zswap/reject_alloc_fail", |m| {
        line(m.swap().zswap().debug_counts().reject_alloc_fail)
    }),
    // Paths the kernel has that nothing here can reach.
    counter("/sys/kernel/debug/zswap/reject_compress_fail", |_| line(0)),
    counter("/sys/kernel/debug/zswap/reject_compress_poor", |m| {
        line(m.swap().zswap().debug_counts().reject_compress_poor)
    }),
    counter("/sys/kernel/debug/zswap/reject_kmemcache_fail", |_| line(0)),
    counter("/sys/kernel/debug/zswap/reject_reclaim_fail", |m| {
        line(m.swap().zswap().debug_counts().reject_reclaim_fail)
    }),
    counter("/sys/kernel/debug/zswap/stored_pages", |m| {
        line(m.swap().zswap().debug_counts().stored_pages)
    }),
    counter("/sys/kernel/debug/zswap/written_back_pages", |m| {
        line(m.swap().zswap().debug_counts().written_back_pages)
    }),
];

/// The row of fixed file `path`.
fn spec(path: &str) -> Option<&'static Spec> {
    FILES.iter().find(|s| s.path == path)
}

/// A module parameter's unsigned number.
fn number(text: &str) -> Result<u32, Errno> {
    text.trim().parse::<u32>().map_err(|_| Errno::EINVAL)
}

/// `proc_dointvec`'s value: an int.
fn proc_int(text: &str) -> Result<i64, Errno> {
    let (negative, magnitude) = proc_get_long(text)?;
    let value = i64::try_from(magnitude).map_err(|_| Errno::EINVAL)?;
    Ok(if negative { -value } else { value })
}

/// `proc_doulongvec_minmax`'s value: an unsigned long (a `-` is
/// `EINVAL`).
fn proc_ulong(text: &str) -> Result<u64, Errno> {
    match proc_get_long(text)? {
        (true, _) => Err(Errno::EINVAL),
        (false, magnitude) => Ok(magnitude),
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

/// A bool parameter as the kernel prints it.
fn yn(on: bool) -> String {
    format!("{}\n", if on { 'Y' } else { 'N' })
}

/// `kstrtobool`: y/Y/1/on or n/N/0/off.
fn parse_bool(text: &str) -> Result<bool, Errno> {
    match text.trim() {
        "y" | "Y" | "1" | "on" | "yes" => Ok(true),
        "n" | "N" | "0" | "off" | "no" => Ok(false),
        _ => Err(Errno::EINVAL),
    }
}

/// The files of `/proc/PID/`, served by whatever owns the processes (the
/// simulator's tasks): their contents depend on the task, which the
/// machine does not know (fs/proc/base.c).
pub trait PidFiles {
    /// The contents of `/proc/PID/NAME`: `ENOENT` for no such task or
    /// file.
    fn read(&self, pid: u32, name: &str) -> Result<String, Errno>;

    /// Opens `/proc/PID/NAME` for writing: `ENOENT` for no such task or
    /// file. A file without a write method opens (as root) and refuses
    /// each write.
    fn open_for_write(&self, pid: u32, name: &str) -> Result<(), Errno>;

    /// Writes `text` to `/proc/PID/NAME`, opened for writing before.
    fn write(&self, pid: u32, name: &str, text: &str) -> Result<(), Errno>;
}

/// A kernel file opened for writing.
pub struct ProcFile {
    writer: Writer,
}

/// How an open file takes writes.
enum Writer {
    /// A fixed file's handler.
    Row(&'static Spec),
    /// `/sys/class/bdi/NAME/read_ahead_kb` of the backing device NAME.
    ReadAheadKb(String),
    /// `/proc/pressure/memory`: a poll trigger of the machine's pressure,
    /// one per open file.
    Pressure {
        slot: Mutex<TriggerSlot>,
        /// The opener has `CAP_SYS_RESOURCE` (real-time triggers).
        privileged: bool,
    },
    /// `/proc/PID/NAME`, through the process side.
    Pid { pid: u32, name: String },
}

impl ProcFile {
    /// The opener lacks `CAP_SYS_RESOURCE`: its pressure triggers need
    /// windows of a multiple of 2 s.
    pub fn drop_privileges(&mut self) {
        if let Writer::Pressure { privileged, .. } = &mut self.writer {
            *privileged = false;
        }
    }
}

/// Whether `path` is a kernel file's path (this module's to serve or to
/// refuse): anything under `/proc/`, zswap's parameters and debugfs
/// directory, `/sys/class/bdi/` and `/sys/kernel/mm/transparent_hugepage/`.
pub fn is_kernel_file(path: &str) -> bool {
    path.starts_with("/proc/")
        || path.starts_with(ZSWAP_PARAMS)
        || path.starts_with(ZSWAP_DEBUG)
        || path.starts_with(BDI_DIR)
        || path.starts_with(THP_DIR)
}

/// The backing device `path` is the `read_ahead_kb` of, if it is one.
fn bdi_of(path: &str) -> Option<&str> {
    path.strip_prefix(BDI_DIR)?.strip_suffix("/read_ahead_kb")
}

/// `/proc/PID/FILE` split into the pid and the file.
fn pid_file(path: &str) -> Option<(u32, &str)> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, file) = rest.split_once('/')?;
    Some((pid.parse().ok()?, file))
}

/// The kernel files of a machine and its process side: the table the
/// front ends read.
pub struct ProcFs<'a> {
    machine: &'a Machine,
    pids: &'a dyn PidFiles,
}

impl<'a> ProcFs<'a> {
    /// The files of `machine`, with `/proc/PID/*` from `pids`.
    pub fn new(machine: &'a Machine, pids: &'a dyn PidFiles) -> Self {
        Self { machine, pids }
    }

    /// Every file served now outside `/proc/PID/` (for listings): the
    /// fixed files and the mounts' devices.
    pub fn files(&self) -> Vec<String> {
        let fixed = FILES.iter().map(|s| s.path.to_owned());
        let bdi = self
            .machine
            .bdi_names()
            .into_iter()
            .map(|(_, bdi)| format!("{BDI_DIR}{bdi}/read_ahead_kb"));
        fixed.chain(bdi).collect()
    }

    /// Whether `path` is one of [`ProcFs::files`].
    pub fn serves(&self, path: &str) -> bool {
        spec(path).is_some() || bdi_of(path).is_some_and(|bdi| self.machine.bdi(bdi).is_some())
    }

    /// The permission bits of kernel file `path`, as the kernel shows
    /// them.
    pub fn mode(path: &str) -> u16 {
        match spec(path) {
            Some(s) => s.mode,
            None if bdi_of(path).is_some() => 0o644,
            None => 0o444,
        }
    }

    /// The contents of `path`, if it is a kernel file
    /// ([`is_kernel_file`]): `ENOENT` for one that does not exist (an
    /// unknown pid or file), `EACCES` for a write-only one.
    pub fn read(&self, path: &str) -> Option<Result<String, Errno>> {
        if !is_kernel_file(path) {
            return None;
        }
        let m = self.machine;
        Some(match spec(path).map(|s| s.handler) {
            Some(Handler::ReadOnly(read, _) | Handler::Setting(read, _)) => Ok(read(m)),
            Some(Handler::WriteOnly(_)) => Err(Errno::EACCES),
            Some(Handler::Pressure) => {
                let tree = m.tree();
                Ok(tree.memory_pressure(tree.root().cgroup()))
            }
            None if path.starts_with(BDI_DIR) => bdi_of(path)
                .and_then(|bdi| m.bdi(bdi))
                .map(|sb| line(sb.read_ahead_kb()))
                .ok_or(Errno::ENOENT),
            None => match pid_file(path) {
                Some((pid, name)) => self.pids.read(pid, name),
                None => Err(Errno::ENOENT),
            },
        })
    }

    /// Opens kernel file `path` for `access`: the writer if it writes
    /// ([`ProcFs::open_for_write`]), then `EACCES` for reading a file
    /// whose mode has no read bit (`drop_caches`: `sysctl_perm` checks the
    /// mode even for root).
    pub fn open(&self, path: &str, access: Access) -> Result<Option<ProcFile>, Errno> {
        let writer = match access {
            Access::Read => None,
            Access::Write | Access::ReadWrite => Some(self.open_for_write(path)?),
        };
        if access != Access::Write && Self::mode(path) & 0o444 == 0 {
            return Err(Errno::EACCES);
        }
        Ok(writer)
    }

    /// Opens `path` for writing: `EACCES` for a read-only file, `ENOENT`
    /// for one that does not exist.
    pub fn open_for_write(&self, path: &str) -> Result<ProcFile, Errno> {
        let writer = match spec(path) {
            Some(s) => match s.handler {
                Handler::Pressure => Writer::Pressure {
                    slot: Mutex::new(TriggerSlot::default()),
                    privileged: true,
                },
                _ => Writer::Row(s),
            },
            None if path.starts_with(BDI_DIR) => match bdi_of(path) {
                Some(bdi) if self.machine.bdi(bdi).is_some() => Writer::ReadAheadKb(bdi.to_owned()),
                _ => return Err(Errno::ENOENT),
            },
            None => match pid_file(path) {
                Some((pid, name)) => {
                    self.pids.open_for_write(pid, name)?;
                    Writer::Pid {
                        pid,
                        name: name.to_owned(),
                    }
                }
                None => return Err(Errno::ENOENT),
            },
        };
        Ok(ProcFile { writer })
    }

    /// Writes `text` to an opened kernel file.
    pub fn write(&self, file: &ProcFile, text: &str) -> Result<(), Errno> {
        let m = self.machine;
        match &file.writer {
            Writer::Row(s) => match s.handler {
                Handler::Setting(_, write) | Handler::WriteOnly(write) => write(m, text),
                Handler::ReadOnly(_, errno) => Err(errno),
                // Opens as `Writer::Pressure`.
                Handler::Pressure => Err(Errno::EINVAL),
            },
            Writer::ReadAheadKb(bdi) => write_read_ahead_kb(m, bdi, text),
            Writer::Pressure { slot, privileged } => write_pressure(m, slot, *privileged, text),
            Writer::Pid { pid, name } => self.pids.write(*pid, name, text),
        }
    }

    /// `poll(2)` on `path` (`psi_fop_poll`), with `file` its writer if it
    /// was opened for writing: `None` for a file that is no pressure
    /// file; `POLLERR | POLLPRI` for one opened read-only (no trigger).
    /// `consume` takes the event in.
    pub fn pressure_poll(
        &self,
        path: &str,
        file: Option<&ProcFile>,
        consume: bool,
    ) -> Option<PressurePoll> {
        let Handler::Pressure = spec(path)?.handler else {
            return None;
        };
        let no_trigger = PressurePoll {
            pri: true,
            err: true,
        };
        Some(match file.map(|f| &f.writer) {
            Some(Writer::Pressure { slot, .. }) => {
                let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                slot.poll(self.machine.tree(), consume)
            }
            _ => no_trigger,
        })
    }
}

/// `read_ahead_kb_store`: an unsigned decimal (`kstrtoul`: an optional
/// `+`, one trailing newline), `ERANGE` past 64 bits; `ENODEV` once the
/// device is gone.
fn write_read_ahead_kb(machine: &Machine, bdi: &str, text: &str) -> Result<(), Errno> {
    let digits = text.strip_suffix('\n').unwrap_or(text);
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Errno::EINVAL);
    }
    let kb: u64 = digits.parse().map_err(|_| Errno::ERANGE)?;
    let sb = machine.bdi(bdi).ok_or(Errno::ENODEV)?;
    sb.set_read_ahead_kb(kb);
    Ok(())
}

/// `psi_write`: an empty write is `EINVAL`; at most 32 bytes are looked
/// at, the last of them dropped (the kernel puts its NUL there, so an
/// `echo -n` loses its last digit), then the trigger is made on the
/// machine's pressure.
fn write_pressure(
    machine: &Machine,
    slot: &Mutex<TriggerSlot>,
    privileged: bool,
    text: &str,
) -> Result<(), Errno> {
    if text.is_empty() {
        return Err(Errno::EINVAL);
    }
    let bytes = &text.as_bytes()[..text.len().min(32) - 1];
    let text = String::from_utf8_lossy(bytes);
    let tree = machine.tree();
    let root = tree.root().cgroup();
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    slot.write(tree, root, &text, privileged)
        .map_err(|e| e.errno())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::MachineConfig;

    /// One task, pid 7, whose `oom_score_adj` is fixed.
    struct OneTask;

    impl PidFiles for OneTask {
        fn read(&self, pid: u32, name: &str) -> Result<String, Errno> {
            match (pid, name) {
                (7, "oom_score_adj") => Ok(line(-5)),
                _ => Err(Errno::ENOENT),
            }
        }

        fn open_for_write(&self, pid: u32, name: &str) -> Result<(), Errno> {
            match (pid, name) {
                (7, "oom_score_adj") => Ok(()),
                _ => Err(Errno::ENOENT),
            }
        }

        fn write(&self, _: u32, _: &str, _: &str) -> Result<(), Errno> {
            Err(Errno::EPERM)
        }
    }

    #[test]
    fn the_table_reads_writes_and_refuses_as_the_kernel() {
        let machine = Machine::new(MachineConfig {
            mem_bytes: 64 << 20,
            ..MachineConfig::default()
        });
        let fs = ProcFs::new(&machine, &OneTask);
        assert!(fs.files().iter().any(|p| p == "/proc/meminfo"));
        assert!(fs.serves("/proc/sys/vm/swappiness"));
        assert!(
            !fs.serves("/proc/7/oom_score_adj"),
            "pid files are not listed"
        );
        assert_eq!(fs.read("/a/memory.max"), None, "not a kernel file");
        assert_eq!(fs.read("/proc/nope"), Some(Err(Errno::ENOENT)));
        assert!(
            fs.read("/proc/meminfo")
                .unwrap()
                .unwrap()
                .starts_with("MemTotal:")
        );
        // drop_caches: write-only, even for root.
        assert_eq!(ProcFs::mode("/proc/sys/vm/drop_caches"), 0o200);
        assert_eq!(
            fs.read("/proc/sys/vm/drop_caches"),
            Some(Err(Errno::EACCES))
        );
        assert!(matches!(
            fs.open("/proc/sys/vm/drop_caches", Access::ReadWrite),
            Err(Errno::EACCES)
        ));
        let drop = fs.open("/proc/sys/vm/drop_caches", Access::Write).unwrap();
        assert_eq!(fs.write(&drop.unwrap(), "3\n"), Ok(()));
        // A setting and its checks.
        let swappiness = fs.open_for_write("/proc/sys/vm/swappiness").unwrap();
        assert_eq!(fs.write(&swappiness, "201"), Err(Errno::EINVAL));
        assert_eq!(fs.write(&swappiness, "100\n"), Ok(()));
        assert_eq!(fs.read("/proc/sys/vm/swappiness"), Some(Ok(line(100))));
        // Read-only files refuse writes with their own errno.
        let meminfo = fs.open_for_write("/proc/meminfo").unwrap();
        assert_eq!(fs.write(&meminfo, "1"), Err(Errno::EIO));
        let counter = fs
            .open_for_write("/sys/kernel/debug/zswap/stored_pages")
            .unwrap();
        assert_eq!(fs.write(&counter, "1"), Err(Errno::EACCES));
        // The process side serves /proc/PID.
        assert_eq!(fs.read("/proc/7/oom_score_adj"), Some(Ok(line(-5))));
        assert!(matches!(
            fs.open_for_write("/proc/8/oom_score_adj"),
            Err(Errno::ENOENT)
        ));
        let adj = fs.open_for_write("/proc/7/oom_score_adj").unwrap();
        assert_eq!(fs.write(&adj, "1"), Err(Errno::EPERM));
        // The PSI trigger file: POLLERR | POLLPRI without a trigger.
        let gone = PressurePoll {
            pri: true,
            err: true,
        };
        let path = "/proc/pressure/memory";
        assert_eq!(fs.pressure_poll(path, None, false), Some(gone));
        assert_eq!(fs.pressure_poll("/proc/meminfo", None, false), None);
        let trigger = fs.open_for_write(path).unwrap();
        assert_eq!(fs.write(&trigger, ""), Err(Errno::EINVAL));
        assert_eq!(fs.write(&trigger, "some 150000 1000000\n"), Ok(()));
        assert!(!fs.pressure_poll(path, Some(&trigger), false).unwrap().pri);
    }

    #[test]
    fn transparent_hugepage_files_set_the_anonymous_fault_orders() {
        let machine = Machine::new(MachineConfig::default());
        let fs = ProcFs::new(&machine, &OneTask);
        let dir = "/sys/kernel/mm/transparent_hugepage";
        let kb64 = format!("{dir}/hugepages-64kB/enabled");
        assert!(fs.serves(&format!("{dir}/enabled")));
        assert!(fs.serves(&format!("{dir}/hugepages-2048kB/enabled")));
        assert!(!fs.serves(&format!("{dir}/hugepages-8kB/enabled")));
        assert_eq!(ProcFs::mode(&kb64), 0o644);
        let file = fs.open_for_write(&kb64).unwrap();
        assert_eq!(fs.write(&file, "often"), Err(Errno::EINVAL));
        assert_eq!(fs.write(&file, "always\n"), Ok(()));
        assert_eq!(
            fs.read(&kb64),
            Some(Ok("[always] inherit madvise never\n".to_owned()))
        );
        assert_eq!(machine.thp().anon_fault_orders(), vec![9, 4]);
    }
}
