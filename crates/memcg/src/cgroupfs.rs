//! The cgroup v2 interface files of the memory controller and the cgroup
//! core: paths, file names, value parsing and formatting, per-open state
//! and errno, as the kernel has them (kernel/cgroup/cgroup.c,
//! mm/memcontrol.c, v6.14).
//!
//! [`CgroupFs`] is a facade over a [`CgroupTree`] in the
//! [`MemoryController::SubtreeControl`] mode of a cgroup v2 mount: `mkdir`,
//! `rmdir`, `open` (then [`OpenFile::read`] / [`OpenFile::write`], release
//! on drop), one-shot `read` and `write`, `ls`. Paths are absolute from the
//! cgroup root; a leading `/sys/fs/cgroup` is accepted.
//!
//! # Files
//!
//! Every cgroup has `cgroup.controllers`, `cgroup.subtree_control`,
//! `cgroup.procs`, `cgroup.threads`, `cgroup.stat`,
//! `cgroup.max.descendants`, `cgroup.max.depth`, `cgroup.pressure` and,
//! while that reads 1, `memory.pressure`; every one but the root has
//! `cgroup.events`, `cgroup.freeze`, `cgroup.kill` and `cgroup.type`
//! (`CFTYPE_NOT_ON_ROOT`).
//!
//! `cgroup.freeze` freezes the subtree's tasks (see the freezer in
//! `memcontrol`), and `frozen` in `cgroup.events` reads 1 once they all
//! stopped. `cgroup.threads` lists thread ids (a simulated task is one
//! thread, its pid); every cgroup is a domain (`cgroup.type` reads
//! `domain`; threaded cgroups are not modelled, so writing `threaded` is
//! `EOPNOTSUPP`), and a thread written to another domain's
//! `cgroup.threads` is refused with `EOPNOTSUPP` as v6.14 refuses it.
//! `cgroup.stat` prints `nr_subsys_memory` and `nr_dying_subsys_memory`,
//! the lines v6.14 prints for each controller bound to the hierarchy (the
//! memory controller is the only one here). A cgroup with a memory cgroup (the root, and the children
//! of cgroups with `+memory` in their subtree control) has the memory
//! files: on the root only `memory.stat`, `memory.numa_stat`,
//! `memory.reclaim` and `memory.zswap.writeback`, as in the kernel.
//!
//! Beyond its handler, the table says of each file what front ends would
//! otherwise guess from its name ([`FileProps`], [`OpenFile::props`]):
//! whether the kernel notifies its pollers (`cgroup_file_notify`: the
//! events files), and what it has to do with the cgroup's tasks
//! ([`Tasks`]: lists or takes task ids, shows whether tasks live, acts on
//! all of them). `memory.pressure`'s poll triggers are its handler's
//! ([`OpenFile::pressure_poll`]).
//!
//! # Values
//!
//! Limits are written as bytes with an optional `K`/`M`/`G`/`T`/`P`/`E`
//! suffix (powers of 1024; `0x` and leading-`0` octal prefixes as the
//! kernel's `memparse`, wrapping on overflow as it does) or `max`,
//! surrounding whitespace ignored, and rounded *down* to whole 4 KiB pages
//! (`page_counter_memparse`). They read back as bytes, or `max` for the
//! unlimited value.
//!
//! Every write reaches its handler as kernfs hands it over
//! (`kernfs_fop_write_iter`): at most a page ([`MAX_WRITE_BYTES`], else
//! `E2BIG`), and as a C string, so an embedded NUL ends the value (`1M\0`
//! is `1M`; `\0` is the empty string, which `memory.max` reads as 0).
//! Handlers strip what the kernel's `isspace` matches (`strstrip`: ASCII
//! spaces, tabs, newlines, `\v`, `\f`, `\r`), and integers parse as
//! `kstrtoint(.., 0, ..)` does: `0x` hex, leading-`0` octal, `ERANGE` for
//! a number that does not fit an `int` (`cgroup.kill`, `cgroup.freeze`,
//! `memory.oom.group`, ...), except where the kernel turns every failure
//! into `EINVAL` (`cgroup.procs`). Paths are absolute (`EINVAL` for a
//! relative one); repeated and trailing slashes are ignored.
//!
//! # Per-open state
//!
//! `memory.peak` and `memory.swap.peak` keep state per open file: a
//! descriptor never written shows the peak since the cgroup was created; a
//! write (of anything) resets the peak *that descriptor* shows to the
//! current usage, leaving every other reader's view alone.
//!
//! `memory.pressure` takes one poll trigger per open file
//! (`some|full THRESHOLD_US WINDOW_US`, see [`crate::psi`]), destroyed at
//! release; [`OpenFile::pressure_poll`] is its `poll(2)`. Writing 0 to
//! `cgroup.pressure` hides the file and releases its open files: their
//! triggers go, reads fail with `ENODEV` while it is hidden, writes and
//! polls (`POLLERR | POLLPRI`) for good, as after a removal.
//!
//! # Errors
//!
//! As the kernel returns them: at open, `ENOENT` for a missing cgroup or
//! file to read, `EACCES` for naming a new file to write (cgroupfs creates
//! none), `EISDIR` for a directory; at write, `EINVAL` for a value that
//! does not parse or a file without a write handler (the open succeeds,
//! as for root on a kernel: permission bits are the VFS's business, and
//! this API acts as root), `ERANGE`
//! for a negative limit, `EBUSY` (busy cgroup, no memory cgroup ids left),
//! `EAGAIN` (`memory.reclaim` without progress), `ESRCH` (no such task),
//! `EOPNOTSUPP`.

use std::fmt;
use std::fmt::Write as _;

use crate::cgroup::{CGROUP_LIMIT_MAX, Cgroup, CgroupError, MemoryController};
use crate::errno::Errno;
use crate::memcontrol::{
    CgroupTree, MemCgroup, MemcgEvent, MemcgStat, PeakWatcher, TreeConfig, VmEvent,
};
use crate::mm_types::PAGE_SIZE;
use crate::page_counter::{PAGE_COUNTER_MAX, PageCounter};
use crate::profile::{Behaviour, StatLayout};
use crate::psi::{PressurePoll, TriggerError, TriggerSlot};
use crate::sync::{Arc, lock};
use crate::vmscan::SWAPPINESS_ANON_ONLY;

/// Controllers the kernel knows but this hierarchy does not provide:
/// enabling one is `ENOENT` (not available), not `EINVAL` (unknown).
const OTHER_CONTROLLERS: [&str; 8] = [
    "cpuset",
    "cpu",
    "io",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
    "perf_event",
];

/// The most one `write(2)` to an interface file may carry (kernfs's
/// `atomic_write_len` for cgroup files: `PAGE_SIZE`).
pub const MAX_WRITE_BYTES: usize = PAGE_SIZE as usize;

/// A failed cgroupfs operation: the errno a program would see, the path,
/// and a readable explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// What `errno` would be.
    pub errno: Errno,
    /// The path operated on.
    pub path: String,
    /// Why, in words.
    pub detail: String,
}

impl FsError {
    fn new(errno: Errno, path: &str, detail: impl Into<String>) -> Self {
        Self {
            errno,
            path: path.to_owned(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.path, self.errno, self.detail)
    }
}

impl std::error::Error for FsError {}

fn from_cgroup(path: &str, e: CgroupError) -> FsError {
    FsError::new(e.errno(), path, e.to_string())
}

/// A memory value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a size (bytes with an optional K, M, G, T, P or E suffix, or \"max\")")]
pub struct BadSize {
    /// The text given.
    pub text: String,
}

/// Parses a memory value as `page_counter_memparse` does: `max`, or bytes
/// with an optional suffix; returns whole pages (rounded down, capped at
/// [`PAGE_COUNTER_MAX`]).
#[cfg(test)]
pub(crate) fn parse_pages(text: &str) -> Result<u64, BadSize> {
    parse_pages_as(text, Behaviour::default())
}

/// [`parse_pages`] with `memparse` as the kernel of `behaviour` has it
/// ([`Behaviour::memparse_saturates`]: on 7.3 `16E` is `max`).
pub(crate) fn parse_pages_as(text: &str, behaviour: Behaviour) -> Result<u64, BadSize> {
    let s = strstrip(text);
    if s == "max" {
        return Ok(PAGE_COUNTER_MAX);
    }
    let bytes = match memparse_prefix_as(s, behaviour.memparse_saturates) {
        (bytes, "") => bytes,
        _ => return Err(BadSize { text: s.to_owned() }),
    };
    Ok((bytes / PAGE_SIZE).min(PAGE_COUNTER_MAX))
}

/// The kernel's `memparse` followed by the check that nothing is left
/// (`*end != '\0'` is EINVAL): an unsigned number in base 0 and an optional
/// binary suffix. As `simple_strtoull` does, base 16 needs `0x` followed by
/// a hex digit (`"0x"` alone is an octal 0 with `x` left over, so it is
/// refused), a leading `0` means octal, and digits and suffix shifts wrap
/// modulo 2^64 (`16E` is 0). An empty string is 0.
pub fn memparse(s: &str) -> Result<u64, BadSize> {
    match memparse_prefix(s) {
        (value, "") => Ok(value),
        _ => Err(BadSize { text: s.to_owned() }),
    }
}

/// `memparse` itself: the value of the longest prefix that parses, and the
/// rest of the text (the kernel's `*retptr`).
fn memparse_prefix(s: &str) -> (u64, &str) {
    memparse_prefix_as(s, false)
}

/// `memparse` of the kernel whose [`Behaviour::memparse_saturates`] is
/// `saturate`: with it (7.3), a suffix counts only after at least one
/// digit, and digits past `u64::MAX` or a shift that loses bits give
/// `u64::MAX`; without (6.12, v6.14), a bare suffix is 0 and both wrap.
fn memparse_prefix_as(s: &str, saturate: bool) -> (u64, &str) {
    let bytes = s.as_bytes();
    let (digits, radix) = match bytes {
        [b'0', x, h, ..] if x.eq_ignore_ascii_case(&b'x') && h.is_ascii_hexdigit() => (&s[2..], 16),
        [b'0', ..] => (s, 8),
        _ => (s, 10),
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let (number, rest) = digits.split_at(end);
    let mut value: u64 = 0;
    for c in number.chars() {
        let d = u64::from(c.to_digit(radix).expect("checked digit"));
        // Where sizes saturate (7.3), so do the digits: `simple_strtoull`
        // stops at `ULLONG_MAX` (`_parse_integer_limit`); before, it wraps.
        value = if saturate {
            value.saturating_mul(u64::from(radix)).saturating_add(d)
        } else {
            value.wrapping_mul(u64::from(radix)).wrapping_add(d)
        };
    }
    let shift = match rest.as_bytes().first() {
        Some(b'k' | b'K') => 10,
        Some(b'm' | b'M') => 20,
        Some(b'g' | b'G') => 30,
        Some(b't' | b'T') => 40,
        Some(b'p' | b'P') => 50,
        Some(b'e' | b'E') => 60,
        _ => return (value, rest),
    };
    if !saturate {
        return (value << shift, &rest[1..]);
    }
    if number.is_empty() {
        return (value, rest);
    }
    match value.checked_shl(shift).filter(|v| v >> shift == value) {
        Some(v) => (v, &rest[1..]),
        None => (u64::MAX, &rest[1..]),
    }
}

/// `strstrip`: the text without the leading and trailing bytes the
/// kernel's `isspace` matches (ASCII space, `\t`, `\n`, `\v`, `\f`,
/// `\r`; unlike `str::trim`, no other Unicode space).
pub(crate) fn strstrip(text: &str) -> &str {
    text.trim_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
}

/// Why `kstrtoint` refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KstrtoError {
    /// No digits, or something after them (`EINVAL`).
    Invalid,
    /// Does not fit (`ERANGE`).
    Range,
}

/// `_kstrtoull`: an unsigned number in base 0 (`0x` followed by a hex
/// digit is hex, a leading `0` octal, else decimal), optionally followed
/// by one newline and nothing else. Overflow is `Range` even when
/// something invalid follows the digits, as `_parse_integer` flags it
/// before the rest is looked at.
fn kstrtoull(s: &str) -> Result<u64, KstrtoError> {
    let bytes = s.as_bytes();
    let (digits, radix) = match bytes {
        [b'0', x, h, ..] if x.eq_ignore_ascii_case(&b'x') && h.is_ascii_hexdigit() => (&s[2..], 16),
        [b'0', ..] => (s, 8),
        _ => (s, 10),
    };
    let mut value: u64 = 0;
    let mut overflow = false;
    let mut used = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        match value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        used += 1;
    }
    if overflow {
        return Err(KstrtoError::Range);
    }
    if used == 0 {
        return Err(KstrtoError::Invalid);
    }
    match &digits[used..] {
        "" | "\n" => Ok(value),
        _ => Err(KstrtoError::Invalid),
    }
}

/// `kstrtoint(buf, 0, &v)`: an `i32` in base 0 with an optional sign
/// (`-`, or `+` as `kstrtoull` skips one); `Range` when it does not fit.
fn kstrtoint_raw(s: &str) -> Result<i32, KstrtoError> {
    let wide = match s.strip_prefix('-') {
        Some(magnitude) => {
            let m = kstrtoull(magnitude)?;
            0i64.checked_sub_unsigned(m).ok_or(KstrtoError::Range)?
        }
        None => {
            let m = kstrtoull(s.strip_prefix('+').unwrap_or(s))?;
            i64::try_from(m).map_err(|_| KstrtoError::Range)?
        }
    };
    i32::try_from(wide).map_err(|_| KstrtoError::Range)
}

/// `kstrtoint(strstrip(buf), 0, &v)` with the kernel's errno: `EINVAL` if
/// it does not parse, `ERANGE` if it does not fit an `int`.
fn kstrtoint(text: &str) -> Result<i32, WriteError> {
    let s = strstrip(text);
    kstrtoint_raw(s).map_err(|e| match e {
        KstrtoError::Invalid => WriteError::new(Errno::EINVAL, format!("{s:?} is not an integer")),
        KstrtoError::Range => WriteError::new(Errno::ERANGE, format!("{s:?} is out of range")),
    })
}

/// Formats pages as `memory.max` reads back: bytes, or `max`.
pub(crate) fn format_pages(pages: u64) -> String {
    if pages >= PAGE_COUNTER_MAX {
        "max".to_owned()
    } else {
        (pages * PAGE_SIZE).to_string()
    }
}

/// A writer's refusal: the errno the `write(2)` returns, and why in words.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WriteError {
    errno: Errno,
    detail: String,
}

impl WriteError {
    fn new(errno: Errno, detail: impl Into<String>) -> Self {
        Self {
            errno,
            detail: detail.into(),
        }
    }
}

type CoreRead = fn(&CgroupFs, &Arc<Cgroup>) -> String;
type CoreWrite = fn(&CgroupFs, &Arc<Cgroup>, &str) -> Result<(), WriteError>;
type MemRead = fn(&CgroupFs, &Arc<MemCgroup>) -> String;
type MemWrite = fn(&CgroupFs, &Arc<MemCgroup>, &str) -> Result<(), WriteError>;

/// What a file reads and writes.
#[derive(Clone, Copy)]
enum Handler {
    /// A cgroup core file, on the cgroup itself; `read` is `None` for a
    /// write-only file (`cgroup.kill`).
    Core {
        read: Option<CoreRead>,
        write: Option<CoreWrite>,
    },
    /// A memory controller file, on the cgroup's memory cgroup; `read` is
    /// `None` for a write-only file (`memory.reclaim`).
    Memory {
        read: Option<MemRead>,
        write: Option<MemWrite>,
    },
    /// A `*.peak` file, with per-open state.
    Peak(PeakOf),
    /// `memory.pressure`: reads the cgroup's pressure, takes a poll
    /// trigger per open file.
    Pressure,
}

/// Which cgroups have a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every cgroup.
    All,
    /// Every cgroup but the root (`CFTYPE_NOT_ON_ROOT`).
    NotOnRoot,
    /// Cgroups with a memory cgroup, the root too.
    Memory,
    /// Non-root cgroups with a memory cgroup.
    MemoryNotOnRoot,
    /// Every cgroup whose pressure accounting is on (`CFTYPE_PRESSURE`:
    /// `cgroup.pressure` 0 hides the file).
    Pressure,
}

/// What a file has to do with its cgroup's tasks, beyond its handler:
/// what a front end whose tasks stand for host processes (the FUSE
/// server) settles before serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tasks {
    /// Nothing.
    None,
    /// Reads show whether tasks live in the subtree (`cgroup.events`'
    /// `populated`).
    ShowsLive,
    /// Lists task ids, as the reader's pid namespace numbers them, and
    /// takes one written, as the writer's numbers it (0: the writer).
    /// `threadgroup` (`__cgroup_procs_write`'s): the id names its whole
    /// process (`cgroup.procs`), else the thread (`cgroup.threads`).
    Ids {
        /// The id moves the thread's whole process.
        threadgroup: bool,
    },
    /// A write acts on every task in the cgroup now, forks included
    /// (`cgroup.kill`, `cgroup.freeze`).
    WritesAll,
}

/// What the kernel's file table says of a file beyond how it reads and
/// writes, for front ends to act on instead of matching names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileProps {
    /// The kernel wakes pollers when it changes (`cgroup_file_notify`: the
    /// cftypes with a `file_offset`, the events files); `poll(2)` reports
    /// `POLLERR | POLLPRI` after a change not yet read.
    pub notify: bool,
    /// What it has to do with the cgroup's tasks.
    pub tasks: Tasks,
}

impl FileProps {
    /// A file with neither notification nor tasks.
    const PLAIN: Self = Self {
        notify: false,
        tasks: Tasks::None,
    };
}

/// One interface file.
struct FileSpec {
    name: &'static str,
    scope: Scope,
    handler: Handler,
    props: FileProps,
}

impl FileSpec {
    fn visible_in(&self, cg: &Cgroup) -> bool {
        match self.scope {
            Scope::All => true,
            Scope::NotOnRoot => !cg.is_root(),
            Scope::Memory => cg.memcg().is_some(),
            Scope::MemoryNotOnRoot => cg.memcg().is_some() && !cg.is_root(),
            Scope::Pressure => cg.psi().enabled(),
        }
    }

    fn readable(&self) -> bool {
        match self.handler {
            Handler::Core { read, .. } => read.is_some(),
            Handler::Memory { read, .. } => read.is_some(),
            Handler::Peak(_) | Handler::Pressure => true,
        }
    }

    fn writable(&self) -> bool {
        match self.handler {
            Handler::Core { write, .. } => write.is_some(),
            Handler::Memory { write, .. } => write.is_some(),
            Handler::Peak(_) | Handler::Pressure => true,
        }
    }
}

fn line(v: impl fmt::Display) -> String {
    format!("{v}\n")
}

const fn core(
    name: &'static str,
    scope: Scope,
    read: CoreRead,
    write: Option<CoreWrite>,
) -> FileSpec {
    FileSpec {
        name,
        scope,
        handler: Handler::Core {
            read: Some(read),
            write,
        },
        props: FileProps::PLAIN,
    }
}

const fn mem(name: &'static str, scope: Scope, read: MemRead, write: Option<MemWrite>) -> FileSpec {
    FileSpec {
        name,
        scope,
        handler: Handler::Memory {
            read: Some(read),
            write,
        },
        props: FileProps::PLAIN,
    }
}

/// `spec` with `props`.
const fn with(props: FileProps, spec: FileSpec) -> FileSpec {
    FileSpec { props, ..spec }
}

/// The props of an events file (`cgroup_file_notify`).
const NOTIFY: FileProps = FileProps {
    notify: true,
    tasks: Tasks::None,
};

/// The props of a file on the cgroup's tasks.
const fn tasks(tasks: Tasks) -> FileProps {
    FileProps {
        notify: false,
        tasks,
    }
}

/// Every interface file.
const FILES: &[FileSpec] = &[
    core(
        "cgroup.controllers",
        Scope::All,
        |_, cg| line(if cg.memory_enabled() { "memory" } else { "" }),
        None,
    ),
    core(
        "cgroup.subtree_control",
        Scope::All,
        |_, cg| line(if cg.subtree_memory() { "memory" } else { "" }),
        Some(write_subtree_control),
    ),
    with(
        tasks(Tasks::Ids { threadgroup: true }),
        core("cgroup.procs", Scope::All, read_procs, Some(write_procs)),
    ),
    with(
        tasks(Tasks::Ids { threadgroup: false }),
        core(
            "cgroup.threads",
            Scope::All,
            |fs, cg| ids_text(&fs.tree.threads(cg)),
            Some(write_threads),
        ),
    ),
    core("cgroup.stat", Scope::All, read_cgroup_stat, None),
    FileSpec {
        name: "memory.pressure",
        scope: Scope::Pressure,
        handler: Handler::Pressure,
        props: FileProps::PLAIN,
    },
    core(
        "cgroup.pressure",
        Scope::All,
        |_, cg| line(u8::from(cg.psi().enabled())),
        Some(write_cgroup_pressure),
    ),
    FileSpec {
        name: "cgroup.kill",
        scope: Scope::NotOnRoot,
        handler: Handler::Core {
            read: None,
            write: Some(write_kill),
        },
        props: tasks(Tasks::WritesAll),
    },
    with(
        FileProps {
            notify: true,
            tasks: Tasks::ShowsLive,
        },
        core(
            "cgroup.events",
            Scope::NotOnRoot,
            |fs, cg| {
                format!(
                    "populated {}\nfrozen {}\n",
                    u8::from(fs.tree.populated(cg)),
                    u8::from(cg.is_frozen())
                )
            },
            None,
        ),
    ),
    with(
        tasks(Tasks::WritesAll),
        core(
            "cgroup.freeze",
            Scope::NotOnRoot,
            |_, cg| line(u8::from(cg.freeze_requested())),
            Some(write_freeze),
        ),
    ),
    core(
        "cgroup.type",
        Scope::NotOnRoot,
        |_, _| line("domain"),
        Some(write_cgroup_type),
    ),
    core(
        "cgroup.max.descendants",
        Scope::All,
        |_, cg| format_limit(cg.max_descendants()),
        Some(|_, cg, v| parse_limit(v).map(|max| cg.set_max_descendants(max))),
    ),
    core(
        "cgroup.max.depth",
        Scope::All,
        |_, cg| format_limit(cg.max_depth()),
        Some(|_, cg, v| parse_limit(v).map(|max| cg.set_max_depth(max))),
    ),
    mem(
        "memory.current",
        Scope::MemoryNotOnRoot,
        |_, m| line(m.memory().usage() * PAGE_SIZE),
        None,
    ),
    FileSpec {
        name: "memory.peak",
        scope: Scope::MemoryNotOnRoot,
        handler: Handler::Peak(PeakOf::Memory),
        props: FileProps::PLAIN,
    },
    mem(
        "memory.min",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.memory().min())),
        Some(|fs, m, v| write_pages(fs, v, |p| m.memory().set_min(p))),
    ),
    mem(
        "memory.low",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.memory().low())),
        Some(|fs, m, v| write_pages(fs, v, |p| m.memory().set_low(p))),
    ),
    mem(
        "memory.high",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.memory().high())),
        Some(|fs, m, v| write_pages(fs, v, |p| fs.tree.set_memory_high(m, p))),
    ),
    mem(
        "memory.max",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.memory().max())),
        Some(|fs, m, v| {
            write_pages(fs, v, |p| {
                fs.tree.set_memory_max(m, p);
            })
        }),
    ),
    with(
        NOTIFY,
        mem(
            "memory.events",
            Scope::MemoryNotOnRoot,
            |fs, m| events_text(m, EventsFile::Memory, fs.tree.behaviour()),
            None,
        ),
    ),
    with(
        NOTIFY,
        mem(
            "memory.events.local",
            Scope::MemoryNotOnRoot,
            |fs, m| events_text(m, EventsFile::MemoryLocal, fs.tree.behaviour()),
            None,
        ),
    ),
    mem(
        "memory.stat",
        Scope::Memory,
        |fs, m| stat_text(m, fs.tree.behaviour().stat_layout),
        None,
    ),
    mem(
        "memory.numa_stat",
        Scope::Memory,
        |fs, m| numa_stat_text(m, fs.tree.nr_nodes()),
        None,
    ),
    mem(
        "memory.oom.group",
        Scope::MemoryNotOnRoot,
        |_, m| line(u8::from(m.oom_group())),
        Some(|_, m, v| parse_bool(v).map(|on| m.set_oom_group(on))),
    ),
    FileSpec {
        name: "memory.reclaim",
        scope: Scope::Memory,
        handler: Handler::Memory {
            read: None,
            write: Some(write_reclaim),
        },
        props: FileProps::PLAIN,
    },
    mem(
        "memory.swap.current",
        Scope::MemoryNotOnRoot,
        |_, m| line(m.swap().usage() * PAGE_SIZE),
        None,
    ),
    mem(
        "memory.swap.high",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.swap().high())),
        Some(|fs, m, v| write_pages(fs, v, |p| m.swap().set_high(p))),
    ),
    mem(
        "memory.swap.max",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.swap().max())),
        Some(|fs, m, v| {
            write_pages(fs, v, |p| {
                m.swap().force_max(p);
            })
        }),
    ),
    FileSpec {
        name: "memory.swap.peak",
        scope: Scope::MemoryNotOnRoot,
        handler: Handler::Peak(PeakOf::Swap),
        props: FileProps::PLAIN,
    },
    with(
        NOTIFY,
        mem(
            "memory.swap.events",
            Scope::MemoryNotOnRoot,
            |fs, m| events_text(m, EventsFile::Swap, fs.tree.behaviour()),
            None,
        ),
    ),
    mem(
        "memory.zswap.current",
        Scope::MemoryNotOnRoot,
        |_, m| line(m.stat(MemcgStat::ZswapBytes).max(0)),
        None,
    ),
    mem(
        "memory.zswap.max",
        Scope::MemoryNotOnRoot,
        |_, m| line(format_pages(m.zswap_max())),
        Some(|fs, m, v| write_pages(fs, v, |p| m.set_zswap_max(p))),
    ),
    mem(
        "memory.zswap.writeback",
        Scope::Memory,
        |_, m| line(u8::from(m.zswap_writeback())),
        Some(|_, m, v| parse_bool(v).map(|on| m.set_zswap_writeback(on))),
    ),
];

/// A `page_counter_memparse` value written to a limit file, parsed as the
/// tree's kernel does.
fn write_pages(fs: &CgroupFs, value: &str, set: impl FnOnce(u64)) -> Result<(), WriteError> {
    set(parse_pages_as(value, fs.tree.behaviour())
        .map_err(|e| WriteError::new(Errno::EINVAL, e.to_string()))?);
    Ok(())
}

/// `0` or `1` through `kstrtoint` (`memory.oom.group`,
/// `memory.zswap.writeback`).
fn parse_bool(value: &str) -> Result<bool, WriteError> {
    match kstrtoint(value)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(WriteError::new(
            Errno::EINVAL,
            format!("{v} is neither 0 nor 1"),
        )),
    }
}

/// `cgroup.max.descendants` / `cgroup.max.depth`: `max`, or a
/// non-negative `int` (`ERANGE` when negative).
fn parse_limit(value: &str) -> Result<u32, WriteError> {
    if strstrip(value) == "max" {
        return Ok(CGROUP_LIMIT_MAX);
    }
    let v = kstrtoint(value)?;
    u32::try_from(v).map_err(|_| WriteError::new(Errno::ERANGE, format!("{v} is negative")))
}

fn format_limit(limit: u32) -> String {
    if limit >= CGROUP_LIMIT_MAX {
        line("max")
    } else {
        line(limit)
    }
}

/// The three event files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventsFile {
    /// `memory.events`: the memory events, hierarchical (local under
    /// `memory_localevents`).
    Memory,
    /// `memory.events.local`: the memory events of this cgroup alone.
    MemoryLocal,
    /// `memory.swap.events`: the swap events, hierarchical.
    Swap,
}

/// An event file's text: one `name count` line per event it shows
/// (`sock_throttled` only where [`Behaviour::sock_throttled_event`]).
fn events_text(m: &MemCgroup, file: EventsFile, behaviour: Behaviour) -> String {
    let swap = file == EventsFile::Swap;
    let mut out = String::new();
    let shown = |e: &MemcgEvent| {
        e.is_swap() == swap && (*e != MemcgEvent::SockThrottled || behaviour.sock_throttled_event)
    };
    for e in MemcgEvent::ALL.into_iter().filter(shown) {
        let n = match file {
            EventsFile::MemoryLocal => m.event_local(e),
            EventsFile::Memory | EventsFile::Swap => m.event(e),
        };
        let _ = writeln!(out, "{} {n}", e.name());
    }
    out
}

/// A page state's value as `memory.stat` prints it.
fn stat_value(m: &MemCgroup, s: MemcgStat) -> u64 {
    u64::try_from(m.stat(s)).unwrap_or(0) * s.unit().bytes()
}

/// The reclaim counters 7.3 prints among the page states, just before
/// `pgpromote_success` (after `pgdemote_*`), rather than as vm events.
const RECLAIM_STATS_7_3: [VmEvent; 9] = [
    VmEvent::PgstealKswapd,
    VmEvent::PgstealDirect,
    VmEvent::PgstealKhugepaged,
    VmEvent::PgstealProactive,
    VmEvent::PgscanKswapd,
    VmEvent::PgscanDirect,
    VmEvent::PgscanKhugepaged,
    VmEvent::PgscanProactive,
    VmEvent::Pgrefill,
];

/// Whether `layout`'s `memory.stat` has a line for page state `s`.
fn stat_shown(s: MemcgStat, layout: StatLayout) -> bool {
    match s {
        MemcgStat::ZswapIncomp | MemcgStat::PgdemoteProactive => layout == StatLayout::V7_3,
        _ => s.key().is_some(),
    }
}

/// Whether `layout`'s `memory.stat` prints `e` among its vm events (the
/// tail after `pgscan`/`pgsteal`).
fn vm_event_shown(e: VmEvent, layout: StatLayout) -> bool {
    match e {
        VmEvent::PgscanProactive | VmEvent::PgstealProactive => false,
        VmEvent::Pswpin | VmEvent::Pswpout => layout != StatLayout::V6_12,
        _ if RECLAIM_STATS_7_3.contains(&e) => layout != StatLayout::V7_3,
        _ => true,
    }
}

/// `memory.stat` in `layout`'s key list (`memcg_stat_format`): the page
/// states (with the `slab` sum after `slab_unreclaimable`; on 7.3 the
/// reclaim counters before `pgpromote_success`), the `pgscan`/`pgsteal`
/// totals, the vm events.
fn stat_text(m: &MemCgroup, layout: StatLayout) -> String {
    let mut out = String::new();
    for &s in MemcgStat::ALL {
        let Some(key) = s.key().filter(|_| stat_shown(s, layout)) else {
            continue;
        };
        if s == MemcgStat::PgpromoteSuccess && layout == StatLayout::V7_3 {
            for e in RECLAIM_STATS_7_3 {
                let _ = writeln!(out, "{} {}", e.key(), m.vm_event(e));
            }
        }
        let _ = writeln!(out, "{key} {}", stat_value(m, s));
        if s == MemcgStat::SlabUnreclaimable {
            let slab = stat_value(m, MemcgStat::SlabReclaimable)
                + stat_value(m, MemcgStat::SlabUnreclaimable);
            let _ = writeln!(out, "slab {slab}");
        }
    }
    let sum = |events: [VmEvent; 4]| events.iter().map(|&e| m.vm_event(e)).sum::<u64>();
    let pgscan = sum([
        VmEvent::PgscanKswapd,
        VmEvent::PgscanDirect,
        VmEvent::PgscanKhugepaged,
        VmEvent::PgscanProactive,
    ]);
    let pgsteal = sum([
        VmEvent::PgstealKswapd,
        VmEvent::PgstealDirect,
        VmEvent::PgstealKhugepaged,
        VmEvent::PgstealProactive,
    ]);
    let _ = writeln!(out, "pgscan {pgscan}\npgsteal {pgsteal}");
    for &e in VmEvent::ALL {
        if vm_event_shown(e, layout) {
            let _ = writeln!(out, "{} {}", e.key(), m.vm_event(e));
        }
    }
    out
}

/// Page states `memory.numa_stat` has no line for (memory cgroup items,
/// not node ones).
const NOT_PER_NODE: [MemcgStat; 7] = [
    MemcgStat::Kernel,
    MemcgStat::Percpu,
    MemcgStat::Sock,
    MemcgStat::Vmalloc,
    MemcgStat::ZswapBytes,
    MemcgStat::Zswapped,
    MemcgStat::ZswapIncomp,
];

/// `memory.numa_stat`: the node-level page states, `key N0=v N1=v`. The
/// statistics are not kept per node, so node 0 carries them all.
fn numa_stat_text(m: &MemCgroup, nr_nodes: usize) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: u64| {
        out.push_str(key);
        for nid in 0..nr_nodes {
            let v = if nid == 0 { value } else { 0 };
            let _ = write!(out, " N{nid}={v}");
        }
        out.push('\n');
    };
    for &s in MemcgStat::ALL {
        let Some(key) = s.key() else { continue };
        if NOT_PER_NODE.contains(&s) || s == MemcgStat::PgdemoteProactive {
            continue;
        }
        line(key, stat_value(m, s));
        // numa_stat prints hugetlb whatever memory_hugetlb_accounting says.
        if s == MemcgStat::SlabUnreclaimable {
            line("hugetlb", 0);
        }
    }
    out
}

fn read_procs(fs: &CgroupFs, cg: &Arc<Cgroup>) -> String {
    ids_text(&fs.tree.procs(cg))
}

/// One pid or tid a line.
fn ids_text(ids: &[u32]) -> String {
    ids.iter().map(|id| format!("{id}\n")).collect()
}

/// `cgroup.threads` (`cgroup_threads_write`): a thread stays within its
/// domain; with no threaded cgroups modelled, only its own cgroup takes
/// it (see [`CgroupTree::attach_thread`]).
fn write_threads(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    let tid = parse_task_id(value)?;
    fs.tree.attach_thread(tid, cg).map_err(|errno| {
        let why = match errno {
            Errno::EBUSY => "it has controllers in cgroup.subtree_control (no internal processes)",
            Errno::ESRCH => "no such thread",
            Errno::EOPNOTSUPP => {
                "a thread moves only within its threaded subtree, and no cgroup is threaded"
            }
            _ => "refused",
        };
        WriteError::new(
            errno,
            format!("cannot move thread {tid} to {}: {why}", cg.path()),
        )
    })
}

/// `cgroup.freeze` (`cgroup_freeze_write`): `kstrtoint`, then 0 or 1
/// (another number is `ERANGE`).
fn write_freeze(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    let freeze = match kstrtoint(value)? {
        0 => false,
        1 => true,
        v => {
            return Err(WriteError::new(
                Errno::ERANGE,
                format!("{v}: cgroup.freeze takes 0 or 1"),
            ));
        }
    };
    fs.tree
        .set_freeze(cg, freeze)
        .map_err(|e| WriteError::new(e.errno(), e.to_string()))
}

/// The pid or tid a `cgroup.procs` or `cgroup.threads` write names
/// (`cgroup_procs_write_start`): `kstrtoint(strstrip(buf), 0, ..)`, and
/// any failure or a negative number is `EINVAL`; 0 names the writer.
pub fn task_id(value: &str) -> Result<u32, Errno> {
    kstrtoint_raw(strstrip(value))
        .ok()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or(Errno::EINVAL)
}

fn parse_task_id(value: &str) -> Result<u32, WriteError> {
    task_id(value)
        .map_err(|errno| WriteError::new(errno, format!("{:?} is not a pid", strstrip(value))))
}

fn write_procs(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    let pid = parse_task_id(value)?;
    fs.tree.attach(pid, cg).map_err(|errno| {
        let why = match errno {
            Errno::EBUSY => "it has controllers in cgroup.subtree_control (no internal processes)",
            Errno::ESRCH => "no such task",
            _ => "refused",
        };
        WriteError::new(
            errno,
            format!("cannot move task {pid} to {}: {why}", cg.path()),
        )
    })
}

/// `cgroup.kill` (`cgroup_kill_write`): `kstrtoint`, then `1` kills every
/// task of the subtree and another number is `ERANGE`.
fn write_kill(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    if kstrtoint(value)? != 1 {
        return Err(WriteError::new(Errno::ERANGE, "only 1 kills".to_owned()));
    }
    fs.tree.kill_tasks(cg);
    Ok(())
}

/// `cgroup.stat` as v6.14 prints it for a hierarchy with the memory
/// controller alone.
fn read_cgroup_stat(_: &CgroupFs, cg: &Arc<Cgroup>) -> String {
    format!(
        "nr_descendants {}\nnr_subsys_memory {}\nnr_dying_descendants {}\nnr_dying_subsys_memory {}\n",
        cg.nr_descendants(),
        cg.nr_subsys_memory(),
        cg.nr_dying_descendants(),
        cg.nr_dying_subsys_memory()
    )
}

/// `cgroup.pressure` (`cgroup_pressure_write`): `0` switches the
/// cgroup's pressure accounting off (hiding `memory.pressure`, whose
/// triggers go), `1` on; another number is `ERANGE`.
fn write_cgroup_pressure(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    let on = match kstrtoint(value)? {
        0 => false,
        1 => true,
        v => {
            return Err(WriteError::new(
                Errno::ERANGE,
                format!("{v}: only 0 (off) or 1 (on)"),
            ));
        }
    };
    fs.tree.set_psi_enabled(cg, on);
    Ok(())
}

fn write_cgroup_type(_: &CgroupFs, _: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    match strstrip(value) {
        "threaded" => Err(WriteError::new(
            Errno::EOPNOTSUPP,
            "threaded cgroups are not simulated".to_owned(),
        )),
        other => Err(WriteError::new(
            Errno::EINVAL,
            format!("{other:?}: only \"threaded\" can be written"),
        )),
    }
}

fn write_subtree_control(fs: &CgroupFs, cg: &Arc<Cgroup>, value: &str) -> Result<(), WriteError> {
    // Validate every token before applying any, as the kernel does; a later
    // token for the same controller overrides an earlier one. Tokens are
    // separated by spaces alone (`strsep(&buf, " ")`).
    let mut change = None;
    for token in strstrip(value).split(' ').filter(|t| !t.is_empty()) {
        let name = token.get(1..).unwrap_or("");
        let known = name == "memory";
        if !known && !OTHER_CONTROLLERS.contains(&name) {
            return Err(WriteError::new(
                Errno::EINVAL,
                format!("{token:?} names no controller"),
            ));
        }
        let enable = match token.as_bytes()[0] {
            b'+' => true,
            b'-' => false,
            _ => {
                return Err(WriteError::new(
                    Errno::EINVAL,
                    format!("{token:?}: controllers are written as +name or -name"),
                ));
            }
        };
        if !known {
            // Never enabled here: disabling it is a no-op, enabling it
            // finds it missing from the parent's controllers.
            if !enable {
                continue;
            }
            return Err(WriteError::new(
                Errno::ENOENT,
                format!("the {name} controller is not available in this hierarchy"),
            ));
        }
        change = Some(enable);
    }
    if let Some(enable) = change {
        fs.tree
            .set_subtree_memory(cg, enable)
            .map_err(|e| WriteError::new(e.errno(), e.to_string()))?;
    }
    Ok(())
}

/// `memory.reclaim`: `SIZE [swappiness=N]` (and `swappiness=max`, anon
/// only, where [`Behaviour::reclaim_swappiness_max`]); reclaims in batches of a
/// quarter of what is left, failing with `EAGAIN` after
/// `MAX_RECLAIM_RETRIES` fruitless tries (`memory_reclaim`).
fn write_reclaim(fs: &CgroupFs, m: &Arc<MemCgroup>, value: &str) -> Result<(), WriteError> {
    let text = strstrip(value);
    let behaviour = fs.tree.behaviour();
    let (bytes, rest) = memparse_prefix_as(text, behaviour.memparse_saturates);
    if rest.len() == text.len() {
        return Err(WriteError::new(
            Errno::EINVAL,
            format!("{text:?} does not start with a size"),
        ));
    }
    let mut swappiness = None;
    for token in strstrip(rest).split(' ').filter(|t| !t.is_empty()) {
        if behaviour.reclaim_swappiness_max && token == "swappiness=max" {
            swappiness = Some(SWAPPINESS_ANON_ONLY);
            continue;
        }
        // match_int: base 0, so 0x and octal too.
        let value = token
            .strip_prefix("swappiness=")
            .and_then(|v| kstrtoint(v).ok())
            .filter(|v| (0..=200).contains(v))
            .ok_or_else(|| {
                let expected = if behaviour.reclaim_swappiness_max {
                    "swappiness=0..200 or swappiness=max"
                } else {
                    "swappiness=0..200"
                };
                WriteError::new(Errno::EINVAL, format!("{token:?}: expected {expected}"))
            })?;
        swappiness = Some(value as u32);
    }
    debug_assert!(swappiness.is_none_or(|v| v <= SWAPPINESS_ANON_ONLY));
    fs.tree
        .reclaim_proactive(m, bytes / PAGE_SIZE, swappiness)
        .map_err(|errno| {
            WriteError::new(
                errno,
                format!("could not reclaim {bytes} bytes from {}", m.path()),
            )
        })
}

/// `(directory, last name)` of an absolute `path`, trailing slashes
/// ignored (the root directory is `/`); `None` for a relative path or the
/// root itself.
fn split_dir(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.trim_end_matches('/').rsplit_once('/')?;
    if !path.starts_with('/') {
        return None;
    }
    let dir = if dir.is_empty() { "/" } else { dir };
    (!name.is_empty()).then_some((dir, name))
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `O_RDONLY`.
    Read,
    /// `O_WRONLY` (what `>` and `>>` open with).
    Write,
    /// `O_RDWR`.
    ReadWrite,
}

impl Access {
    fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }

    fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
}

/// Which counter a `*.peak` file shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeakOf {
    Memory,
    Swap,
}

impl PeakOf {
    fn counter(self, m: &MemCgroup) -> &PageCounter {
        match self {
            PeakOf::Memory => m.memory(),
            PeakOf::Swap => m.swap(),
        }
    }
}

/// What an open file is on.
enum Target {
    Cgroup(Arc<Cgroup>),
    Memcg(Arc<MemCgroup>),
}

/// An open interface file (`kernfs_open_file`): reads and writes go to the
/// cgroup (or memory cgroup) it was opened in, and files with per-open
/// state keep it here. Dropping it is `release`.
pub struct OpenFile {
    fs: CgroupFs,
    target: Target,
    spec: &'static FileSpec,
    path: String,
    access: Access,
    /// A `*.peak` descriptor's own peak, once it was written.
    peak: Option<Arc<PeakWatcher>>,
    /// A pressure file's trigger, once written.
    trigger: TriggerSlot,
    /// The opener may make real-time triggers (`CAP_SYS_RESOURCE`).
    privileged: bool,
    /// A pressure file: its cgroup's switch-off count when opened (a
    /// switch-off since released the file).
    pressure_epoch: u64,
}

impl OpenFile {
    /// The path it was opened at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the file table says of the file beyond reading and writing
    /// (whether the kernel notifies pollers, what it has to do with
    /// tasks).
    pub fn props(&self) -> FileProps {
        self.spec.props
    }

    /// Whether the opener may make real-time triggers on a pressure file
    /// (`CAP_SYS_RESOURCE` in the opener's credentials; on by default, as
    /// this API acts as root): without it a trigger's window must be a
    /// multiple of 2 s.
    pub fn set_privileged(&mut self, privileged: bool) {
        self.privileged = privileged;
    }

    /// `poll(2)` on a pressure file (`psi_trigger_poll`): `None` for any
    /// other file. `consume` takes a fired trigger's event in, as a poll
    /// does; without it the event is only looked at. A file released
    /// (its cgroup removed, or its accounting switched off) reports
    /// `POLLERR | POLLPRI`, as kernfs does.
    pub fn pressure_poll(&self, consume: bool) -> Option<PressurePoll> {
        let Handler::Pressure = self.spec.handler else {
            return None;
        };
        let Target::Cgroup(cg) = &self.target else {
            return None;
        };
        if self.pressure_gone(cg) {
            return Some(PressurePoll {
                pri: true,
                err: true,
            });
        }
        Some(self.trigger.poll(&self.fs.tree, consume))
    }

    /// Whether a pressure file was released: its cgroup removed, or its
    /// accounting switched off since it was opened (kernfs drained it).
    fn pressure_gone(&self, cg: &Cgroup) -> bool {
        cg.is_removed() || cg.psi().switch_offs() != self.pressure_epoch
    }

    /// Reads the whole file.
    pub fn read(&self) -> Result<String, FsError> {
        let text = self.read_text()?;
        // Every cgroup file's text is whole lines (seq_file shows).
        debug_assert!(
            text.is_empty() || text.ends_with('\n'),
            "{}: {text:?} does not end a line",
            self.path
        );
        Ok(text)
    }

    /// The text [`OpenFile::read`] returns, from the file's handler.
    fn read_text(&self) -> Result<String, FsError> {
        if !self.access.reads() {
            return Err(FsError::new(
                Errno::EBADF,
                &self.path,
                "not open for reading",
            ));
        }
        match (&self.target, self.spec.handler) {
            (Target::Cgroup(cg), Handler::Pressure) => {
                // kernfs: no read while the file is hidden or removed.
                if cg.is_removed() || !cg.psi().enabled() {
                    return Err(FsError::new(
                        Errno::ENODEV,
                        &self.path,
                        "the pressure file is gone (cgroup removed or cgroup.pressure 0)",
                    ));
                }
                Ok(self.fs.tree.memory_pressure(cg))
            }
            (
                Target::Cgroup(cg),
                Handler::Core {
                    read: Some(read), ..
                },
            ) => {
                self.check_live(cg)?;
                Ok(read(&self.fs, cg))
            }
            (
                Target::Memcg(m),
                Handler::Memory {
                    read: Some(read), ..
                },
            ) => {
                self.check_online(m)?;
                Ok(read(&self.fs, m))
            }
            (Target::Memcg(m), Handler::Peak(which)) => {
                self.check_online(m)?;
                Ok(self.peak_show(m, which))
            }
            _ => Err(FsError::new(
                Errno::EINVAL,
                &self.path,
                "the file is write-only",
            )),
        }
    }

    /// Writes `value` in one `write(2)`, as kernfs passes it on
    /// (`kernfs_fop_write_iter`): more than a page is `E2BIG` (cgroup
    /// files' `atomic_write_len`), and the handler sees a C string, so
    /// whatever follows an embedded NUL is ignored (`"1M\0junk"` is
    /// `1M`, `"\0"` the empty string).
    pub fn write(&mut self, value: &str) -> Result<(), FsError> {
        if !self.access.writes() {
            return Err(FsError::new(
                Errno::EBADF,
                &self.path,
                "not open for writing",
            ));
        }
        if value.len() > MAX_WRITE_BYTES {
            return Err(FsError::new(
                Errno::E2BIG,
                &self.path,
                format!(
                    "{} bytes in one write; cgroup files take at most {MAX_WRITE_BYTES}",
                    value.len()
                ),
            ));
        }
        let value = value.split('\0').next().unwrap_or_default();
        debug_assert!(!value.contains('\0') && value.len() <= MAX_WRITE_BYTES);
        let result = match (&self.target, self.spec.handler) {
            (Target::Cgroup(cg), Handler::Core { write: Some(w), .. }) => {
                self.check_live(cg)?;
                w(&self.fs, cg, value)
            }
            (Target::Memcg(m), Handler::Memory { write: Some(w), .. }) => {
                self.check_online(m)?;
                w(&self.fs, m, value)
            }
            (Target::Memcg(m), Handler::Peak(which)) => {
                self.check_online(m)?;
                let m = Arc::clone(m);
                self.peak_write(&m, which);
                Ok(())
            }
            (Target::Cgroup(cg), Handler::Pressure) => {
                let cg = Arc::clone(cg);
                let result = if self.pressure_gone(&cg) {
                    Err(TriggerError::Gone)
                } else {
                    self.trigger
                        .write(&self.fs.tree, &cg, value, self.privileged)
                };
                result.map_err(|e| WriteError::new(e.errno(), e.to_string()))
            }
            // `cgroup_file_write` with no write method.
            _ => Err(WriteError::new(
                Errno::EINVAL,
                "the file has no write handler".to_owned(),
            )),
        };
        result.map_err(|e| FsError::new(e.errno, &self.path, e.detail))
    }

    /// A file of a removed cgroup is gone (kernfs: `ENODEV` once the node
    /// is deactivated).
    fn check_live(&self, cg: &Cgroup) -> Result<(), FsError> {
        if cg.is_removed() {
            return Err(FsError::new(
                Errno::ENODEV,
                &self.path,
                "the cgroup was removed",
            ));
        }
        Ok(())
    }

    /// A file of a memory cgroup gone offline is gone (kernfs: `ENODEV`).
    fn check_online(&self, m: &MemCgroup) -> Result<(), FsError> {
        if m.is_dying() {
            return Err(FsError::new(
                Errno::ENODEV,
                &self.path,
                "the memory cgroup went offline",
            ));
        }
        Ok(())
    }

    /// `peak_show`: a descriptor never written shows the peak since the
    /// cgroup was created; one written shows its own value or the local
    /// peak since the latest reset through any descriptor, whichever is
    /// higher.
    fn peak_show(&self, m: &MemCgroup, which: PeakOf) -> String {
        let counter = which.counter(m);
        let pages = match &self.peak {
            None => counter.watermark(),
            Some(w) => w.value().max(counter.local_watermark()),
        };
        line(pages * PAGE_SIZE)
    }

    /// `peak_write`: whatever is written, the local peak restarts at the
    /// current usage, every other written descriptor's value is raised to
    /// it, and it becomes this descriptor's value.
    fn peak_write(&mut self, m: &MemCgroup, which: PeakOf) {
        let mut watchers = lock(m.peak_watchers(which == PeakOf::Swap));
        // A written descriptor is on its counter's list exactly once.
        debug_assert!(
            self.peak.as_ref().is_none_or(|mine| {
                watchers.iter().filter(|w| Arc::ptr_eq(w, mine)).count() == 1
            })
        );
        let usage = which.counter(m).reset_local_watermark();
        for w in watchers.iter() {
            if usage > w.value() {
                w.set(usage);
            }
        }
        let mine = self.peak.get_or_insert_with(|| {
            let w = Arc::new(PeakWatcher::default());
            watchers.push(Arc::clone(&w));
            w
        });
        mine.set(usage);
        // No written descriptor shows less than the peak restarted here.
        debug_assert!(watchers.iter().all(|w| w.value() >= usage));
        debug_assert_eq!(mine.value(), usage);
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        let (Target::Memcg(m), Handler::Peak(which), Some(mine)) =
            (&self.target, self.spec.handler, &self.peak)
        else {
            return;
        };
        let mut watchers = lock(m.peak_watchers(which == PeakOf::Swap));
        let before = watchers.len();
        watchers.retain(|w| !Arc::ptr_eq(w, mine));
        // It was listed once (peak_write), and now is not.
        debug_assert_eq!(watchers.len() + 1, before);
    }
}

impl fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenFile")
            .field("path", &self.path)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

/// A directory entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Whether it is a cgroup (directory) rather than a file.
    pub is_dir: bool,
}

/// The cgroup v2 interface over a [`CgroupTree`]; see the module docs.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    tree: CgroupTree,
}

impl Default for CgroupFs {
    fn default() -> Self {
        Self::new(TreeConfig::default())
    }
}

impl CgroupFs {
    /// A fresh cgroup v2 hierarchy with only the root cgroup and the memory
    /// controller enabled nowhere yet (`config.memory` is ignored: a mount
    /// is always [`MemoryController::SubtreeControl`]).
    pub fn new(config: TreeConfig) -> Self {
        Self {
            tree: CgroupTree::new(TreeConfig {
                memory: MemoryController::SubtreeControl,
                ..config
            }),
        }
    }

    /// The interface over an existing tree.
    pub fn with_tree(tree: CgroupTree) -> Self {
        Self { tree }
    }

    /// The tree underneath.
    pub fn tree(&self) -> &CgroupTree {
        &self.tree
    }

    /// Creates a cgroup (`mkdir`).
    pub fn mkdir(&self, path: &str) -> Result<Arc<Cgroup>, FsError> {
        if self.split_file(path).is_some() {
            return Err(FsError::new(
                Errno::EEXIST,
                path,
                "a file of that name exists",
            ));
        }
        self.tree.mkdir(path).map_err(|e| from_cgroup(path, e))
    }

    /// Creates a cgroup and any missing parents (`mkdir -p`).
    pub fn mkdir_p(&self, path: &str) -> Result<Arc<Cgroup>, FsError> {
        self.tree.mkdir_p(path).map_err(|e| from_cgroup(path, e))
    }

    /// Removes a cgroup (`rmdir`).
    pub fn rmdir(&self, path: &str) -> Result<(), FsError> {
        if self.split_file(path).is_some() {
            return Err(FsError::new(Errno::ENOTDIR, path, "not a directory"));
        }
        self.tree.rmdir(path).map_err(|e| from_cgroup(path, e))
    }

    /// The cgroup at `path`.
    pub fn cgroup(&self, path: &str) -> Result<Arc<Cgroup>, FsError> {
        self.tree
            .find_cgroup(path)
            .map_err(|e| from_cgroup(path, e))
    }

    /// The memory cgroup of the cgroup at `path` (`ENOENT` when the
    /// controller is not on there).
    pub fn memcg(&self, path: &str) -> Result<Arc<MemCgroup>, FsError> {
        self.tree.find(path).map_err(|e| from_cgroup(path, e))
    }

    /// Splits `path` into the cgroup holding a file and the file's spec,
    /// if its last component names an interface file there.
    fn split_file(&self, path: &str) -> Option<(Arc<Cgroup>, &'static FileSpec)> {
        let (dir, name) = split_dir(path)?;
        let spec = FILES.iter().find(|f| f.name == name)?;
        let cg = self.tree.find_cgroup(dir).ok()?;
        spec.visible_in(&cg).then_some((cg, spec))
    }

    /// Opens the file at `path` for `access`, failing as `open(2)` on
    /// cgroupfs does for root: `ENOENT` for a missing cgroup, or a missing
    /// file to read; `EACCES` for writing a name that is no file (cgroupfs
    /// creates none); `EISDIR` for a directory. A read-only file opens for
    /// writing; the write fails (`EINVAL`).
    pub fn open(&self, path: &str, access: Access) -> Result<OpenFile, FsError> {
        if let Some((cg, spec)) = self.split_file(path) {
            // No permission check here beyond the caller's (as root, as
            // `memcg sh` runs): the cgroup kernfs root has no
            // KERNFS_ROOT_EXTRA_OPEN_PERM_CHECK, so opening a read-only
            // file for writing succeeds and the write fails (EINVAL).
            debug_assert!(spec.visible_in(&cg));
            let pressure_epoch = cg.psi().switch_offs();
            let target = match spec.handler {
                Handler::Core { .. } | Handler::Pressure => Target::Cgroup(cg),
                // A concurrent `-memory` may have taken it since.
                Handler::Memory { .. } | Handler::Peak(_) => match cg.memcg() {
                    Some(m) => Target::Memcg(m),
                    None => {
                        return Err(FsError::new(
                            Errno::ENOENT,
                            path,
                            "the memory controller went off there",
                        ));
                    }
                },
            };
            return Ok(OpenFile {
                fs: self.clone(),
                target,
                spec,
                path: path.to_owned(),
                access,
                peak: None,
                trigger: TriggerSlot::default(),
                privileged: true,
                pressure_epoch,
            });
        }
        if self.tree.find_cgroup(path).is_ok() {
            return Err(FsError::new(Errno::EISDIR, path, "is a cgroup directory"));
        }
        let (cg, name) = match split_dir(path) {
            Some((dir, name)) => match self.tree.find_cgroup(dir) {
                Ok(cg) => (cg, name),
                Err(e) => return Err(from_cgroup(path, e)),
            },
            // Not the root (a directory, found above): a relative path.
            None => return Err(FsError::new(Errno::EINVAL, path, "not an absolute path")),
        };
        let detail = if FILES.iter().any(|f| f.name == name) {
            if name.starts_with("memory.") && cg.memcg().is_none() {
                format!(
                    "{name} needs the memory controller: enable it in the parent's cgroup.subtree_control"
                )
            } else {
                format!("{name} does not exist in {}", cg.path())
            }
        } else {
            format!("no file {name:?} in this cgroup")
        };
        let errno = if access.writes() {
            // O_CREAT on a kernfs directory, which has no `create`.
            Errno::EACCES
        } else {
            Errno::ENOENT
        };
        Err(FsError::new(errno, path, detail))
    }

    /// The permission bits of the interface file at `path` as cgroupfs
    /// shows them (`cgroup_file_mode`: 0444 if it reads, plus 0200 if it
    /// writes), or `None` if no such file is there.
    pub fn file_mode(&self, path: &str) -> Option<u16> {
        let (_, spec) = self.split_file(path)?;
        let reads = if spec.readable() { 0o444 } else { 0 };
        Some(reads | if spec.writable() { 0o200 } else { 0 })
    }

    /// Reads an interface file through a fresh open (as `cat` does).
    pub fn read(&self, path: &str) -> Result<String, FsError> {
        self.open(path, Access::Read)?.read()
    }

    /// Writes an interface file through a fresh open, as `echo value >
    /// file` does (`value` may carry the trailing newline).
    pub fn write(&self, path: &str, value: &str) -> Result<(), FsError> {
        self.open(path, Access::Write)?.write(value)
    }

    /// The entries of a cgroup directory, sorted by name.
    pub fn ls(&self, path: &str) -> Result<Vec<Entry>, FsError> {
        let cg = self.cgroup(path)?;
        let mut entries: Vec<Entry> = FILES
            .iter()
            .filter(|f| f.visible_in(&cg))
            .map(|f| Entry {
                name: f.name.to_owned(),
                is_dir: false,
            })
            .chain(cg.children().into_iter().map(|c| Entry {
                name: c.name().to_owned(),
                is_dir: true,
            }))
            .collect();
        entries.sort();
        Ok(entries)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::ChargeKind;
    use crate::memcontrol::Gfp;

    /// An interface whose `memory.current` shows exactly the pages charged
    /// (no charge stock).
    fn exact_fs() -> CgroupFs {
        let fs = CgroupFs::default();
        fs.tree().set_charge_stock(false);
        fs
    }

    #[test]
    fn memparse_like_the_kernel() {
        assert_eq!(memparse("4096"), Ok(4096));
        assert_eq!(memparse("30M"), Ok(30 << 20));
        assert_eq!(memparse("1k"), Ok(1024));
        assert_eq!(memparse("2G"), Ok(2 << 30));
        assert_eq!(memparse("0x10"), Ok(16));
        assert_eq!(memparse("010"), Ok(8), "leading 0 is octal");
        assert_eq!(memparse(""), Ok(0), "simple_strtoull of nothing");
        // Digits and shifts wrap modulo 2^64, as simple_strtoull and
        // memparse's shifts do.
        assert_eq!(memparse("99999999999999999999999"), Ok(200376420520689663));
        assert_eq!(memparse("18446744073709551616"), Ok(0));
        assert_eq!(memparse("16E"), Ok(0));
        assert_eq!(memparse("17E"), Ok(1 << 60));
        // "0x" without a hex digit is an octal 0 followed by "x".
        assert!(memparse("0x").is_err());
        assert!(memparse("0xg").is_err());
        assert_eq!(memparse("0XfF"), Ok(255));
        assert_eq!(memparse("0x10k"), Ok(16 << 10));
        assert!(memparse("09").is_err(), "9 is not octal");
        assert!(memparse("12X").is_err());
        assert!(memparse("-1").is_err());
        assert!(memparse("1 M").is_err());
        assert!(memparse("1KB").is_err());
        assert_eq!(
            parse_pages("99999999999999999999999"),
            Ok(200376420520689663 / 4096)
        );
        assert!(parse_pages("1.5G").is_err());
        assert_eq!(parse_pages(" max\n"), Ok(PAGE_COUNTER_MAX));
        assert_eq!(parse_pages("4097\n"), Ok(1), "rounds down");
        assert_eq!(parse_pages("4095"), Ok(0));
        assert_eq!(parse_pages("15E"), Ok(PAGE_COUNTER_MAX), "clamped");
        assert_eq!(format_pages(PAGE_COUNTER_MAX), "max");
        assert_eq!(format_pages(3), "12288");
    }

    /// The table's props name the files the kernel notifies and those on
    /// the cgroup's tasks, and an open file carries its file's.
    #[test]
    fn props_name_the_notified_and_task_files() {
        let named = |pred: fn(&FileProps) -> bool| -> Vec<&str> {
            FILES
                .iter()
                .filter(|f| pred(&f.props))
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(
            named(|p| p.notify),
            [
                "cgroup.events",
                "memory.events",
                "memory.events.local",
                "memory.swap.events"
            ]
        );
        assert_eq!(
            named(|p| p.tasks != Tasks::None),
            [
                "cgroup.procs",
                "cgroup.threads",
                "cgroup.kill",
                "cgroup.events",
                "cgroup.freeze"
            ]
        );
        let fs = CgroupFs::default();
        fs.mkdir("/a").unwrap();
        let props = |path: &str| fs.open(path, Access::Read).unwrap().props();
        assert_eq!(
            props("/cgroup.procs").tasks,
            Tasks::Ids { threadgroup: true }
        );
        assert_eq!(
            props("/a/cgroup.threads").tasks,
            Tasks::Ids { threadgroup: false }
        );
        assert_eq!(props("/a/cgroup.kill").tasks, Tasks::WritesAll);
        assert!(props("/a/cgroup.events").notify);
        assert_eq!(props("/memory.stat"), FileProps::PLAIN);
    }

    #[test]
    fn kstrtoint_like_the_kernel() {
        assert_eq!(kstrtoint(" 1\n"), Ok(1));
        assert_eq!(kstrtoint("0x1"), Ok(1));
        assert_eq!(kstrtoint("010"), Ok(8));
        assert_eq!(kstrtoint("-5"), Ok(-5));
        assert_eq!(kstrtoint("+5"), Ok(5));
        assert_eq!(kstrtoint("-0"), Ok(0));
        assert_eq!(kstrtoint("-2147483648"), Ok(i32::MIN));
        for invalid in [
            "x",
            "",
            "+",
            "-",
            "--1",
            "-+1",
            "0x",
            "0xg",
            "08",
            "1 2",
            "1\u{2003}",
        ] {
            assert_eq!(
                kstrtoint(invalid).unwrap_err().errno,
                Errno::EINVAL,
                "{invalid:?}"
            );
        }
        for range in [
            "4294967296",
            "2147483648",
            "-2147483649",
            "18446744073709551615",
            "99999999999999999999999",
            // Overflow is found before what follows the digits.
            "99999999999999999999999x",
        ] {
            assert_eq!(
                kstrtoint(range).unwrap_err().errno,
                Errno::ERANGE,
                "{range:?}"
            );
        }
    }

    /// qa minor 2: `cgroup.kill` parses with `kstrtoint` (base 0), so an
    /// overflow is `ERANGE` (it was `EINVAL`) and `0x1` kills.
    #[test]
    fn cgroup_kill_parses_like_kstrtoint() {
        let fs = exact_fs();
        fs.mkdir("/a").unwrap();
        for range in [
            "99999999999999999999999",
            "18446744073709551615",
            "010",
            "-1",
            "2",
        ] {
            assert_eq!(
                fs.write("/a/cgroup.kill", range).unwrap_err().errno,
                Errno::ERANGE,
                "{range:?}"
            );
        }
        for invalid in ["", "x", "1 1", "1.0"] {
            assert_eq!(
                fs.write("/a/cgroup.kill", invalid).unwrap_err().errno,
                Errno::EINVAL,
                "{invalid:?}"
            );
        }
        for kills in ["1", " 1\n", "0x1", "+1", "01"] {
            fs.write("/a/cgroup.kill", kills).unwrap();
        }
        // cgroup.procs: any kstrtoint failure, or a negative pid, is EINVAL;
        // hex and octal name pids.
        for invalid in ["99999999999999999999999", "-1", "x", ""] {
            assert_eq!(
                fs.write("/a/cgroup.procs", invalid).unwrap_err().errno,
                Errno::EINVAL,
                "{invalid:?}"
            );
        }
        for no_task in ["0x10", "020", "-0"] {
            assert_eq!(
                fs.write("/a/cgroup.procs", no_task).unwrap_err().errno,
                Errno::ESRCH,
                "{no_task:?}"
            );
        }
    }

    /// qa minor 3: kernfs hands a write to its handler as a C string
    /// (`buf[len] = '\0'`), so an embedded NUL ends the value: `1M\0` is
    /// 1M and `\0` is the empty string, for every interface file.
    #[test]
    fn an_embedded_nul_ends_the_value_of_every_file() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        fs.write("/a/memory.max", "1M\0").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), "1048576\n");
        fs.write("/a/memory.max", "2M\0junk\n").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), "2097152\n");
        fs.write("/a/memory.max", "\0").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), "0\n", "memparse of \"\"");
        // Every file answers a value followed by a NUL and junk as it
        // answers the value alone.
        let values = [
            "1", "0", "max", "1M", "+memory", "x", "", " 2 ", "threaded", "0x1",
        ];
        for f in FILES.iter().filter(|f| f.writable()) {
            for v in values {
                let path = format!("/a/{}", f.name);
                let reset = || {
                    for (file, value) in [
                        ("memory.max", "max"),
                        ("memory.high", "max"),
                        ("memory.low", "0"),
                        ("memory.min", "0"),
                        ("memory.swap.max", "max"),
                        ("memory.swap.high", "max"),
                        ("memory.zswap.max", "max"),
                        ("memory.oom.group", "0"),
                        ("memory.zswap.writeback", "1"),
                        ("cgroup.max.depth", "max"),
                        ("cgroup.max.descendants", "max"),
                        ("cgroup.freeze", "0"),
                    ] {
                        fs.write(&format!("/a/{file}"), value).unwrap();
                    }
                };
                reset();
                let plain = fs.write(&path, v).map_err(|e| e.errno);
                let after_plain = fs.read(&path).ok();
                reset();
                let nul = fs
                    .write(&path, &format!("{v}\0x y\u{2003}"))
                    .map_err(|e| e.errno);
                assert_eq!(nul, plain, "{path} {v:?}");
                assert_eq!(fs.read(&path).ok(), after_plain, "{path} {v:?}");
            }
        }
    }

    /// kernfs refuses a write of more than a page with `E2BIG`.
    #[test]
    fn a_write_over_a_page_is_e2big() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        let long = format!("{}\n", "1".repeat(MAX_WRITE_BYTES));
        assert_eq!(
            fs.write("/a/memory.max", &long).unwrap_err().errno,
            Errno::E2BIG
        );
        let page = format!("{:>width$}", "1M", width = MAX_WRITE_BYTES);
        fs.write("/a/memory.max", &page).unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), "1048576\n");
    }

    /// `strstrip` strips the kernel's `isspace` bytes only, and
    /// `cgroup.subtree_control` splits on spaces alone (`strsep(" ")`).
    #[test]
    fn values_are_stripped_and_split_as_the_kernel_does() {
        let fs = exact_fs();
        fs.mkdir("/a").unwrap();
        fs.write("/cgroup.subtree_control", "\t+memory\r\n")
            .unwrap();
        assert_eq!(fs.read("/cgroup.subtree_control").unwrap(), "memory\n");
        assert_eq!(
            fs.write("/cgroup.subtree_control", "-memory\t+memory")
                .unwrap_err()
                .errno,
            Errno::EINVAL,
            "a tab separates no tokens"
        );
        fs.write("/cgroup.subtree_control", "-memory  +memory")
            .unwrap();
        assert_eq!(
            fs.write("/a/memory.max", "1M\u{a0}").unwrap_err().errno,
            Errno::EINVAL,
            "no Unicode space is stripped"
        );
        assert_eq!(
            fs.write("/a/memory.max", "\u{2003}1M").unwrap_err().errno,
            Errno::EINVAL
        );
    }

    /// qa minor 9: paths are absolute (a relative one used to name a child
    /// of the root silently); trailing and repeated slashes are ignored,
    /// as the VFS ignores them, so `mkdir /x/` makes `/x` and, made, is
    /// `EEXIST` as mkdir(2) of an existing directory is.
    #[test]
    fn relative_paths_are_einval_and_trailing_slashes_ignored() {
        let fs = exact_fs();
        let t = fs.tree();
        assert_eq!(t.mkdir("relative").unwrap_err().errno(), Errno::EINVAL);
        assert_eq!(t.mkdir("relative").unwrap_err().errno(), Errno::EINVAL);
        assert_eq!(t.mkdir_p("a/b").unwrap_err().errno(), Errno::EINVAL);
        assert!(t.find_cgroup("").unwrap().is_root(), "\"\" names the root");
        assert!(matches!(
            t.rmdir("relative").unwrap_err(),
            CgroupError::RelativePath { .. }
        ));
        assert!(t.find_cgroup("/relative").is_err(), "nothing was made");
        assert_eq!(fs.mkdir("relative").unwrap_err().errno, Errno::EINVAL);
        assert_eq!(fs.read("cgroup.procs").unwrap_err().errno, Errno::EINVAL);
        assert_eq!(
            fs.write("cgroup.procs", "1").unwrap_err().errno,
            Errno::EINVAL
        );
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        t.mkdir("/tenants/").unwrap().memcg().unwrap();
        assert_eq!(t.find("/tenants").unwrap().path(), "/tenants");
        assert_eq!(t.mkdir("/tenants/").unwrap_err().errno(), Errno::EEXIST);
        assert_eq!(t.mkdir("/tenants//").unwrap_err().errno(), Errno::EEXIST);
        t.mkdir("//tenants//a//").unwrap();
        assert_eq!(
            t.find_cgroup("/sys/fs/cgroup/tenants/a/").unwrap().path(),
            "/tenants/a"
        );
        assert!(fs.mkdir_p("/tenants/a/b/").is_ok());
        assert!(
            t.find_cgroup("/sys/fs/cgroupx").is_err(),
            "not the mount point"
        );
        t.rmdir("/tenants/a/b/").unwrap();
        t.rmdir("/tenants/a/").unwrap();
        t.rmdir("/tenants").unwrap();
        assert_eq!(t.mkdir("/").unwrap_err().errno(), Errno::EEXIST);
    }

    #[test]
    fn subtree_control_gates_memory_files() {
        let fs = exact_fs();
        fs.mkdir("/a").unwrap();
        assert_eq!(fs.read("/a/cgroup.controllers").unwrap(), "\n");
        assert_eq!(fs.read("/a/memory.max").unwrap_err().errno, Errno::ENOENT);
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        assert_eq!(fs.read("/a/cgroup.controllers").unwrap(), "memory\n");
        assert_eq!(fs.read("/a/memory.max").unwrap(), "max\n");
        assert_eq!(
            fs.read("/memory.max").unwrap_err().errno,
            Errno::ENOENT,
            "not on root"
        );
        assert!(fs.read("/memory.stat").unwrap().starts_with("anon 0\n"));
        // A child without +memory of its own: -memory is allowed, and the
        // child's memory files go with its memory cgroup (v6.14).
        fs.write("/cgroup.subtree_control", "-memory").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap_err().errno, Errno::ENOENT);
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.write("/a/cgroup.subtree_control", "+memory").unwrap();
        assert_eq!(
            fs.write("/cgroup.subtree_control", "-memory")
                .unwrap_err()
                .errno,
            Errno::EBUSY,
            "/a has memory in its own subtree control"
        );
        assert_eq!(
            fs.write("/cgroup.subtree_control", "+cpu")
                .unwrap_err()
                .errno,
            Errno::ENOENT
        );
        for bad in ["+bogus", "memory", "+", "-"] {
            assert_eq!(
                fs.write("/cgroup.subtree_control", bad).unwrap_err().errno,
                Errno::EINVAL,
                "{bad}"
            );
        }
        fs.mkdir("/b").unwrap();
        fs.mkdir("/b/c").unwrap();
        fs.write("/cgroup.subtree_control", "-memory +memory")
            .unwrap();
        assert_eq!(
            fs.write("/b/c/cgroup.subtree_control", "+memory")
                .unwrap_err()
                .errno,
            Errno::ENOENT,
            "/b has no memory in its subtree control"
        );
    }

    #[test]
    fn values_round_trip_in_bytes() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        fs.write("/a/memory.max", "30M\n").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), format!("{}\n", 30 << 20));
        fs.write("/a/memory.high", "10001").unwrap();
        assert_eq!(fs.read("/a/memory.high").unwrap(), "8192\n");
        fs.write("/a/memory.low", "max").unwrap();
        assert_eq!(fs.read("/a/memory.low").unwrap(), "max\n");
        let err = fs.write("/a/memory.max", "lots").unwrap_err();
        assert_eq!(err.errno, Errno::EINVAL);
        assert_eq!(
            fs.read("/a/memory.max").unwrap(),
            format!("{}\n", 30 << 20),
            "unchanged"
        );
        assert_eq!(
            fs.write("/a/memory.max", "0x").unwrap_err().errno,
            Errno::EINVAL
        );
        fs.write("/a/memory.max", "16E").unwrap();
        assert_eq!(fs.read("/a/memory.max").unwrap(), "0\n", "16E wraps to 0");
        assert_eq!(
            fs.write("/a/memory.current", "0").unwrap_err().errno,
            Errno::EINVAL,
            "no write handler: opens (for root), the write fails"
        );
        assert_eq!(fs.file_mode("/a/memory.current"), Some(0o444));
        assert_eq!(fs.file_mode("/a/memory.max"), Some(0o644));
        assert_eq!(fs.file_mode("/a/cgroup.kill"), Some(0o200));
        assert_eq!(fs.file_mode("/a/memory.pressure"), Some(0o644));
        assert_eq!(
            fs.write("/a/memory.nope", "0").unwrap_err().errno,
            Errno::EACCES,
            "cgroupfs creates no file"
        );
        assert_eq!(fs.read("/a").unwrap_err().errno, Errno::EISDIR);
        assert_eq!(fs.write("/a", "x").unwrap_err().errno, Errno::EISDIR);
        assert_eq!(fs.read("/a/nope").unwrap_err().errno, Errno::ENOENT);
        assert_eq!(fs.rmdir("/a/memory.max").unwrap_err().errno, Errno::ENOTDIR);
        assert_eq!(
            fs.write("/a/cgroup.procs", "42").unwrap_err().errno,
            Errno::ESRCH
        );
        assert_eq!(
            fs.write("/a/cgroup.procs", "x").unwrap_err().errno,
            Errno::EINVAL
        );
    }

    #[test]
    fn peak_resets_only_the_writers_descriptor() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        let a = fs.memcg("/a").unwrap();
        let t = fs.tree();
        t.try_charge(&a, 8, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.uncharge(&a, 6, ChargeKind::Anon);
        let mut fd = fs.open("/a/memory.peak", Access::ReadWrite).unwrap();
        assert_eq!(fd.read().unwrap(), "32768\n", "never written: global peak");
        fd.write("reset").unwrap();
        assert_eq!(fd.read().unwrap(), "8192\n", "reset to usage");
        // An independent open still sees the global peak (the selftest's
        // "completely independent read isn't affected by our FD-local reset").
        assert_eq!(fs.read("/a/memory.peak").unwrap(), "32768\n");
        // The written descriptor follows usage up from its reset.
        t.try_charge(&a, 3, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(fd.read().unwrap(), "20480\n");
        // A reset through another descriptor restarts the shared local peak
        // and raises this one's value only if usage is above it: the peak
        // of 5 pages between the two resets is lost, as in the kernel.
        t.uncharge(&a, 4, ChargeKind::Anon);
        let mut other = fs.open("/a/memory.peak", Access::Write).unwrap();
        other.write("x").unwrap();
        assert_eq!(fd.read().unwrap(), "8192\n", "its own reset value");
        assert_eq!(other.read().unwrap_err().errno, Errno::EBADF, "write-only");
        drop(other);
        drop(fd);
        assert!(lock(a.peak_watchers(false)).is_empty(), "released");
        assert_eq!(
            fs.read("/a/memory.peak").unwrap(),
            "32768\n",
            "global peak kept"
        );
        t.uncharge(&a, 1, ChargeKind::Anon);
    }

    #[test]
    fn current_events_stat_and_cgroup_files() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        let a = fs.memcg("/a").unwrap();
        fs.tree()
            .try_charge(&a, 3, ChargeKind::Anon, Gfp::Kernel)
            .unwrap();
        assert_eq!(fs.read("/a/memory.current").unwrap(), "12288\n");
        fs.tree().uncharge(&a, 2, ChargeKind::Anon);
        assert_eq!(fs.read("/a/memory.current").unwrap(), "4096\n");
        let stat = fs.read("/memory.stat").unwrap();
        assert!(stat.contains("anon 4096\n"));
        let keys: Vec<&str> = stat.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(keys.len(), 37 + 1 + 2 + 27, "every v6.14 key: {keys:?}");
        assert_eq!(&keys[..3], ["anon", "file", "kernel"]);
        let at = |k: &str| keys.iter().position(|&x| x == k).unwrap();
        assert_eq!(at("slab"), at("slab_unreclaimable") + 1);
        assert_eq!(at("pgscan") + 2, at("pswpin"));
        assert_eq!(keys.last(), Some(&"numa_hint_faults"));
        let numa = fs.read("/a/memory.numa_stat").unwrap();
        assert!(numa.starts_with("anon N0=4096\nfile N0=0\nkernel_stack N0=0\n"));
        assert_eq!(
            fs.read("/a/memory.events").unwrap(),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
        );
        assert_eq!(
            fs.read("/a/memory.swap.events").unwrap(),
            "high 0\nmax 0\nfail 0\n"
        );
        let names: Vec<String> = fs.ls("/").unwrap().into_iter().map(|e| e.name).collect();
        for on_root in [
            "a",
            "memory.stat",
            "memory.numa_stat",
            "memory.reclaim",
            "memory.zswap.writeback",
            "cgroup.max.depth",
        ] {
            assert!(names.contains(&on_root.to_owned()), "{on_root}");
        }
        for not_on_root in [
            "memory.max",
            "memory.oom.group",
            "cgroup.events",
            "cgroup.type",
            "cgroup.freeze",
            "cgroup.kill",
        ] {
            assert!(!names.contains(&not_on_root.to_owned()), "{not_on_root}");
        }
        assert_eq!(
            fs.read("/cgroup.stat").unwrap(),
            "nr_descendants 1\nnr_subsys_memory 2\nnr_dying_descendants 0\nnr_dying_subsys_memory 0\n"
        );
        assert_eq!(
            fs.read("/a/cgroup.events").unwrap(),
            "populated 0\nfrozen 0\n"
        );
        assert_eq!(fs.read("/a/cgroup.type").unwrap(), "domain\n");
        assert_eq!(
            fs.write("/a/cgroup.type", "threaded").unwrap_err().errno,
            Errno::EOPNOTSUPP
        );
        assert_eq!(
            fs.write("/a/cgroup.type", "domain").unwrap_err().errno,
            Errno::EINVAL
        );
        fs.tree().uncharge(&a, 1, ChargeKind::Anon);
    }

    #[test]
    fn pressure_files_take_one_trigger_each_and_go_with_cgroup_pressure_0() {
        let fs = exact_fs();
        fs.mkdir("/a").unwrap();
        assert_eq!(fs.read("/a/cgroup.pressure").unwrap(), "1\n");
        assert_eq!(fs.read("/cgroup.pressure").unwrap(), "1\n");
        let mut f = fs.open("/a/memory.pressure", Access::ReadWrite).unwrap();
        assert_eq!(
            f.pressure_poll(true),
            Some(PressurePoll {
                pri: true,
                err: true
            }),
            "no trigger yet"
        );
        f.write("some 150000 1000000\n").unwrap();
        assert_eq!(f.write("some 1 2").unwrap_err().errno, Errno::EBUSY);
        assert_eq!(f.pressure_poll(true), Some(PressurePoll::default()));
        let mut g = fs.open("/a/memory.pressure", Access::Write).unwrap();
        g.set_privileged(false);
        assert_eq!(
            g.write("some 150000 1000000").unwrap_err().errno,
            Errno::EINVAL,
            "unprivileged: the window must be a multiple of 2 s"
        );
        g.write("some 150000 2000000").unwrap();
        assert_eq!(
            fs.open("/a/cgroup.procs", Access::Read)
                .unwrap()
                .pressure_poll(true),
            None
        );
        // Off: the file is hidden, open files are released.
        assert_eq!(
            fs.write("/a/cgroup.pressure", "2").unwrap_err().errno,
            Errno::ERANGE
        );
        assert_eq!(
            fs.write("/a/cgroup.pressure", "no").unwrap_err().errno,
            Errno::EINVAL
        );
        fs.write("/a/cgroup.pressure", "0").unwrap();
        assert_eq!(fs.read("/a/cgroup.pressure").unwrap(), "0\n");
        assert!(
            !fs.ls("/a")
                .unwrap()
                .iter()
                .any(|e| e.name == "memory.pressure")
        );
        assert_eq!(
            fs.read("/a/memory.pressure").unwrap_err().errno,
            Errno::ENOENT
        );
        assert_eq!(f.read().unwrap_err().errno, Errno::ENODEV);
        assert_eq!(
            f.pressure_poll(true),
            Some(PressurePoll {
                pri: true,
                err: true
            })
        );
        fs.write("/a/cgroup.pressure", "1").unwrap();
        assert!(f.read().is_ok(), "kernfs reads a re-shown file again");
        assert_eq!(f.write("some 1 1000000").unwrap_err().errno, Errno::ENODEV);
        assert!(fs.read("/a/memory.pressure").is_ok());
        // A removed cgroup's open pressure file is gone.
        let h = fs.open("/a/memory.pressure", Access::Read).unwrap();
        drop((f, g));
        fs.rmdir("/a").unwrap();
        assert_eq!(h.read().unwrap_err().errno, Errno::ENODEV);
    }

    #[test]
    fn small_control_files() {
        let fs = exact_fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        assert_eq!(fs.read("/a/memory.oom.group").unwrap(), "0\n");
        fs.write("/a/memory.oom.group", "1\n").unwrap();
        assert_eq!(fs.read("/a/memory.oom.group").unwrap(), "1\n");
        for bad in ["2", "-1", "x", ""] {
            assert_eq!(
                fs.write("/a/memory.oom.group", bad).unwrap_err().errno,
                Errno::EINVAL,
                "{bad}"
            );
        }
        fs.write("/memory.zswap.writeback", "0").unwrap();
        assert!(
            !fs.memcg("/a").unwrap().zswap_writeback_enabled(),
            "an ancestor has 0"
        );
        assert_eq!(fs.read("/a/memory.zswap.writeback").unwrap(), "1\n");
        assert_eq!(fs.read("/cgroup.max.descendants").unwrap(), "max\n");
        fs.write("/cgroup.max.descendants", "1").unwrap();
        assert_eq!(fs.mkdir("/b").unwrap_err().errno, Errno::EAGAIN);
        assert_eq!(
            fs.write("/cgroup.max.depth", "-1").unwrap_err().errno,
            Errno::ERANGE
        );
        assert_eq!(
            fs.write("/cgroup.max.depth", "deep").unwrap_err().errno,
            Errno::EINVAL
        );
        fs.write("/cgroup.max.descendants", "max").unwrap();
        fs.mkdir("/b").unwrap();
        // memory.reclaim: write-only; nothing reclaimable yet is EAGAIN.
        assert_eq!(
            fs.read("/a/memory.reclaim").unwrap_err().errno,
            Errno::EINVAL
        );
        assert_eq!(
            fs.write("/a/memory.reclaim", "1M").unwrap_err().errno,
            Errno::EAGAIN
        );
        fs.write("/a/memory.reclaim", "0").unwrap();
        fs.write("/a/memory.reclaim", "0\tswappiness=0x10").unwrap();
        for bad in ["", "x", "1M swappiness=201", "1M bogus", "1Mx"] {
            assert_eq!(
                fs.write("/a/memory.reclaim", bad).unwrap_err().errno,
                Errno::EINVAL,
                "{bad}"
            );
        }
    }

    /// An interface following `kernel`, with `/a` made.
    fn fs_of(kernel: crate::profile::KernelVersion) -> CgroupFs {
        let fs = CgroupFs::new(TreeConfig {
            behaviour: kernel.behaviour(),
            ..TreeConfig::default()
        });
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        fs
    }

    /// `memparse` per kernel: 7.3 saturates an overflowing suffix shift
    /// (`16E` reads back `max`) and wants digits before a suffix; 6.12
    /// and v6.14 wrap (`16E` is 0) and take a bare suffix as 0.
    #[test]
    fn memparse_per_kernel() {
        use crate::profile::KernelVersion;
        assert_eq!(memparse_prefix_as("16E", true), (u64::MAX, ""));
        assert_eq!(memparse_prefix_as("17E", true), (u64::MAX, ""));
        assert_eq!(memparse_prefix_as("8E", true), (1 << 63, ""));
        assert_eq!(memparse_prefix_as("K", true), (0, "K"));
        assert_eq!(memparse_prefix_as("0x10k", true), (16 << 10, ""));
        assert_eq!(memparse_prefix_as("16E", false), (0, ""));
        assert_eq!(memparse_prefix_as("K", false), (0, ""));
        for (kernel, max_16e, bare_k) in [
            (KernelVersion::V6_12, "0\n", Ok("0\n")),
            (KernelVersion::V6_14, "0\n", Ok("0\n")),
            (KernelVersion::V7_3, "max\n", Err(Errno::EINVAL)),
        ] {
            let fs = fs_of(kernel);
            fs.write("/a/memory.max", "16E").unwrap();
            assert_eq!(fs.read("/a/memory.max").unwrap(), max_16e, "{kernel}");
            fs.write("/a/memory.high", "4096").unwrap();
            let got = fs
                .write("/a/memory.high", "K")
                .map(|()| fs.read("/a/memory.high").unwrap())
                .map_err(|e| e.errno);
            assert_eq!(got.as_deref(), bare_k.as_deref(), "{kernel}");
            // memory.reclaim's size too: a bare suffix is 0 bytes before 7.3.
            let reclaim_k = fs.write("/a/memory.reclaim", "K").map_err(|e| e.errno);
            assert_eq!(reclaim_k.is_ok(), kernel != KernelVersion::V7_3, "{kernel}");
        }
    }

    /// `swappiness=max` is a word of 7.3's `memory.reclaim` only.
    #[test]
    fn reclaim_swappiness_max_per_kernel() {
        use crate::profile::KernelVersion;
        for kernel in KernelVersion::ALL {
            let fs = fs_of(kernel);
            let got = fs
                .write("/a/memory.reclaim", "0 swappiness=max")
                .map_err(|e| e.errno);
            let want = if kernel == KernelVersion::V7_3 {
                Ok(())
            } else {
                Err(Errno::EINVAL)
            };
            assert_eq!(got, want, "{kernel}");
            assert_eq!(
                fs.write("/a/memory.reclaim", "0 swappiness=maxx")
                    .unwrap_err()
                    .errno,
                Errno::EINVAL
            );
        }
    }
}

#[cfg(all(test, not(loom)))]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Any text written to any file (of a cgroup with and without the
        /// memory controller) gives a value or a clean error, never a
        /// panic, and reads keep working.
        #[test]
        fn any_write_to_any_file_is_handled(value in ".{0,40}", which in 0usize..FILES.len(), nested in any::<bool>()) {
            let fs = CgroupFs::default();
            fs.write("/cgroup.subtree_control", "+memory").unwrap();
            fs.mkdir("/a").unwrap();
            fs.mkdir("/a/b").unwrap();
            let dir = if nested { "/a/b" } else { "/a" };
            let path = format!("{dir}/{}", FILES[which].name);
            if let Err(e) = fs.write(&path, &value) {
                prop_assert!(matches!(e.errno, Errno::EINVAL | Errno::ENOENT | Errno::EACCES | Errno::EBUSY | Errno::ESRCH | Errno::ERANGE | Errno::EOPNOTSUPP), "{e}");
            }
            for f in FILES {
                let _ = fs.read(&format!("{dir}/{}", f.name));
            }
        }

        #[test]
        fn parse_pages_never_panics(text in "\\PC{0,30}") {
            let _ = parse_pages(&text);
        }
    }
}
