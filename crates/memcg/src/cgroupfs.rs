//! The cgroup v2 interface files of the memory controller: paths, file
//! names, value parsing and formatting, and errno, as the kernel has them
//! (kernel/cgroup/cgroup.c, mm/memcontrol.c, v6.14).
//!
//! [`CgroupFs`] is a facade over a [`CgroupTree`]: `mkdir`, `rmdir`,
//! `read`, `write`, `ls`. Paths are absolute from the cgroup root; a leading
//! `/sys/fs/cgroup` is accepted.
//!
//! # Files
//!
//! Every cgroup has `cgroup.controllers`, `cgroup.subtree_control`,
//! `cgroup.procs` and `cgroup.stat`. A cgroup whose parent has `+memory` in
//! its subtree control also has the memory files (`memory.current`,
//! `.peak`, `.max`, `.high`, `.low`, `.min`, `.events`, `.events.local`,
//! `.stat`, `.swap.current`, `.swap.high`, `.swap.max`, `.swap.peak`,
//! `.swap.events`, `.zswap.current`, `.zswap.max`). The root has only
//! `memory.stat`, as in the kernel.
//!
//! # Values
//!
//! Limits are written as bytes with an optional `K`/`M`/`G`/`T`/`P`/`E`
//! suffix (powers of 1024; `0x` and leading-`0` octal prefixes as the
//! kernel's `memparse`) or `max`, surrounding whitespace ignored, and
//! rounded *down* to whole 4 KiB pages (`page_counter_memparse`). They read
//! back as bytes, or `max` for the unlimited value.
//!
//! # Errors
//!
//! As the kernel returns them: `ENOENT` for a missing cgroup or file (memory
//! files of a cgroup without the controller included), `EEXIST`, `EBUSY`
//! (rmdir with children, `-memory` with children), `ENOSPC` (no ids left),
//! `EINVAL` (a value that does not parse), `EACCES` (writing a read-only
//! file), `EISDIR` (reading a directory), `ESRCH` (moving a task that does
//! not exist).

use std::fmt;
use std::fmt::Write as _;

use crate::errno::Errno;
use crate::memcontrol::{
    CgroupError, CgroupTree, MemCgroup, MemcgEvent, MemcgStat, TreeConfig, VmEvent,
};
use crate::page_counter::{PAGE_COUNTER_MAX, PAGE_SIZE};
use crate::sync::Arc;

/// Controllers the kernel knows but this hierarchy does not provide:
/// enabling one is `ENOENT` (not available), not `EINVAL` (unknown).
const OTHER_CONTROLLERS: [&str; 7] = ["cpuset", "cpu", "io", "hugetlb", "pids", "rdma", "misc"];

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

/// Parses a memory value as `page_counter_memparse` does: `max`, or bytes
/// with an optional suffix; returns whole pages (rounded down, capped at
/// [`PAGE_COUNTER_MAX`]).
pub fn parse_pages(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if s == "max" {
        return Ok(PAGE_COUNTER_MAX);
    }
    let bytes = memparse(s)?;
    Ok((bytes / PAGE_SIZE).min(PAGE_COUNTER_MAX))
}

/// The kernel's `memparse`: an unsigned number in base 0 (`0x` hex, `0`
/// octal, else decimal) and an optional binary suffix; nothing may follow.
/// An empty string is 0 (`simple_strtoull` parses nothing as 0). Values
/// past `u64` saturate.
pub fn memparse(s: &str) -> Result<u64, String> {
    let (digits, radix) = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (hex, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let (number, rest) = digits.split_at(end);
    let mut value: u64 = 0;
    for c in number.chars() {
        let d = u64::from(c.to_digit(radix).expect("checked digit"));
        value = value.saturating_mul(u64::from(radix)).saturating_add(d);
    }
    let shift = match rest {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => {
            return Err(format!(
                "{s:?} is not a size (bytes with an optional K, M, G, T, P or E suffix, or \"max\")"
            ));
        }
    };
    Ok(value
        .checked_shl(shift)
        .filter(|v| v >> shift == value)
        .unwrap_or(u64::MAX))
}

/// Formats pages as `memory.max` reads back: bytes, or `max`.
pub fn format_pages(pages: u64) -> String {
    if pages >= PAGE_COUNTER_MAX {
        "max".to_owned()
    } else {
        (pages * PAGE_SIZE).to_string()
    }
}

/// Who may see a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every cgroup (`cgroup.*`).
    All,
    /// Cgroups with the memory controller, the root too (`memory.stat`).
    Memory,
    /// Non-root cgroups with the memory controller (`CFTYPE_NOT_ON_ROOT`).
    MemoryNotRoot,
}

type Reader = fn(&CgroupFs, &Arc<MemCgroup>) -> String;
/// A writer's refusal: the errno and why.
type WriteError = (Errno, String);
type Writer = fn(&CgroupFs, &Arc<MemCgroup>, &str) -> Result<(), WriteError>;

/// One interface file.
struct FileSpec {
    name: &'static str,
    scope: Scope,
    read: Reader,
    write: Option<Writer>,
}

fn line(v: impl fmt::Display) -> String {
    format!("{v}\n")
}

fn events_text(cg: &MemCgroup, swap: bool, local: bool) -> String {
    let mut out = String::new();
    for e in MemcgEvent::ALL.into_iter().filter(|e| e.is_swap() == swap) {
        let n = if local {
            cg.event_local(e)
        } else {
            cg.event(e)
        };
        let _ = writeln!(out, "{} {n}", e.name());
    }
    out
}

fn stat_text(cg: &MemCgroup) -> String {
    let mut out = String::new();
    for s in MemcgStat::ALL {
        if let Some(key) = s.key() {
            let v = u64::try_from(cg.stat(s)).unwrap_or(0) * s.unit_bytes();
            let _ = writeln!(out, "{key} {v}");
        }
    }
    for e in VmEvent::ALL {
        let _ = writeln!(out, "{} {}", e.key(), cg.vm_event(e));
    }
    out
}

fn write_pages(f: impl FnOnce(u64)) -> impl FnOnce(&str) -> Result<(), WriteError> {
    move |v| {
        f(parse_pages(v).map_err(|e| (Errno::EINVAL, e))?);
        Ok(())
    }
}

fn write_subtree_control(
    fs: &CgroupFs,
    cg: &Arc<MemCgroup>,
    value: &str,
) -> Result<(), WriteError> {
    // Validate every token before applying any, as the kernel does.
    let mut changes = Vec::new();
    for token in value.split_whitespace() {
        let (enable, name) = if let Some(name) = token.strip_prefix('+') {
            (true, name)
        } else if let Some(name) = token.strip_prefix('-') {
            (false, name)
        } else {
            return Err((
                Errno::EINVAL,
                format!("{token:?}: controllers are written as +name or -name"),
            ));
        };
        if name == "memory" {
            changes.push(enable);
        } else if OTHER_CONTROLLERS.contains(&name) {
            return Err((
                Errno::ENOENT,
                format!("the {name} controller is not available in this hierarchy"),
            ));
        } else {
            return Err((Errno::EINVAL, format!("{name:?} is not a controller")));
        }
    }
    for enable in changes {
        fs.tree
            .set_subtree_memory(cg, enable)
            .map_err(|e| match e.errno() {
                Errno::EBUSY => (Errno::EBUSY, e.to_string()),
                _ => (
                    Errno::ENOENT,
                    format!("the memory controller is not enabled for {}", cg.path()),
                ),
            })?;
    }
    Ok(())
}

const FILES: &[FileSpec] = &[
    FileSpec {
        name: "cgroup.controllers",
        scope: Scope::All,
        read: |_, cg| line(if cg.memory_enabled() { "memory" } else { "" }),
        write: None,
    },
    FileSpec {
        name: "cgroup.subtree_control",
        scope: Scope::All,
        read: |_, cg| line(if cg.subtree_memory() { "memory" } else { "" }),
        write: Some(write_subtree_control),
    },
    FileSpec {
        name: "cgroup.procs",
        scope: Scope::All,
        read: |fs, cg| {
            fs.tree
                .procs(cg)
                .iter()
                .map(|pid| format!("{pid}\n"))
                .collect()
        },
        write: Some(|fs, cg, v| match v.trim().parse::<u32>() {
            Ok(pid) => fs
                .tree
                .attach(pid, cg)
                .map_err(|errno| (errno, format!("cannot move task {pid} to {}", cg.path()))),
            Err(_) => Err((Errno::EINVAL, format!("{:?} is not a pid", v.trim()))),
        }),
    },
    FileSpec {
        name: "cgroup.stat",
        scope: Scope::All,
        read: |_, cg| {
            format!(
                "nr_descendants {}\nnr_dying_descendants {}\n",
                cg.nr_descendants(),
                cg.nr_dying_descendants()
            )
        },
        write: None,
    },
    FileSpec {
        name: "memory.current",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(cg.memory().usage() * PAGE_SIZE),
        write: None,
    },
    FileSpec {
        name: "memory.events",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| events_text(cg, false, false),
        write: None,
    },
    FileSpec {
        name: "memory.events.local",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| events_text(cg, false, true),
        write: None,
    },
    FileSpec {
        name: "memory.high",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.memory().high())),
        write: Some(|fs, cg, v| write_pages(|p| fs.tree.set_memory_high(cg, p))(v)),
    },
    FileSpec {
        name: "memory.low",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.memory().low())),
        write: Some(|_, cg, v| write_pages(|p| cg.memory().set_low(p))(v)),
    },
    FileSpec {
        name: "memory.max",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.memory().max())),
        write: Some(|fs, cg, v| {
            write_pages(|p| {
                fs.tree.set_memory_max(cg, p);
            })(v)
        }),
    },
    FileSpec {
        name: "memory.min",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.memory().min())),
        write: Some(|_, cg, v| write_pages(|p| cg.memory().set_min(p))(v)),
    },
    FileSpec {
        name: "memory.peak",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(cg.memory().watermark() * PAGE_SIZE),
        write: Some(|_, cg, _| {
            cg.memory().reset_watermark();
            Ok(())
        }),
    },
    FileSpec {
        name: "memory.stat",
        scope: Scope::Memory,
        read: |_, cg| stat_text(cg),
        write: None,
    },
    FileSpec {
        name: "memory.swap.current",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(cg.swap().usage() * PAGE_SIZE),
        write: None,
    },
    FileSpec {
        name: "memory.swap.events",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| events_text(cg, true, false),
        write: None,
    },
    FileSpec {
        name: "memory.swap.high",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.swap().high())),
        write: Some(|_, cg, v| write_pages(|p| cg.swap().set_high(p))(v)),
    },
    FileSpec {
        name: "memory.swap.max",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.swap().max())),
        write: Some(|_, cg, v| {
            write_pages(|p| {
                cg.swap().force_max(p);
            })(v)
        }),
    },
    FileSpec {
        name: "memory.swap.peak",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(cg.swap().watermark() * PAGE_SIZE),
        write: Some(|_, cg, _| {
            cg.swap().reset_watermark();
            Ok(())
        }),
    },
    FileSpec {
        name: "memory.zswap.current",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(cg.stat(MemcgStat::ZswapBytes).max(0)),
        write: None,
    },
    FileSpec {
        name: "memory.zswap.max",
        scope: Scope::MemoryNotRoot,
        read: |_, cg| line(format_pages(cg.zswap_max())),
        write: Some(|_, cg, v| write_pages(|p| cg.set_zswap_max(p))(v)),
    },
];

impl FileSpec {
    fn visible_in(&self, cg: &MemCgroup) -> bool {
        match self.scope {
            Scope::All => true,
            Scope::Memory => cg.memory_enabled(),
            Scope::MemoryNotRoot => cg.memory_enabled() && !cg.is_root(),
        }
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

/// The cgroup v2 memory interface over a [`CgroupTree`]; see the module
/// docs.
#[derive(Debug, Clone, Default)]
pub struct CgroupFs {
    tree: CgroupTree,
}

impl CgroupFs {
    /// A fresh hierarchy with only the root cgroup.
    pub fn new(config: TreeConfig) -> Self {
        Self {
            tree: CgroupTree::new(config),
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
    pub fn mkdir(&self, path: &str) -> Result<Arc<MemCgroup>, FsError> {
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
    pub fn mkdir_p(&self, path: &str) -> Result<Arc<MemCgroup>, FsError> {
        self.tree.mkdir_p(path).map_err(|e| from_cgroup(path, e))
    }

    /// Removes a cgroup (`rmdir`).
    pub fn rmdir(&self, path: &str) -> Result<(), FsError> {
        if self.split_file(path).is_some() {
            return Err(FsError::new(Errno::ENOENT, path, "not a directory"));
        }
        self.tree.rmdir(path).map_err(|e| from_cgroup(path, e))
    }

    /// The cgroup at `path`.
    pub fn cgroup(&self, path: &str) -> Result<Arc<MemCgroup>, FsError> {
        self.tree.find(path).map_err(|e| from_cgroup(path, e))
    }

    /// Splits `path` into the cgroup holding a file and the file's spec,
    /// if its last component names an interface file.
    fn split_file(&self, path: &str) -> Option<(Arc<MemCgroup>, &'static FileSpec)> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        let spec = FILES.iter().find(|f| f.name == name)?;
        let cg = self.tree.find(dir).ok()?;
        spec.visible_in(&cg).then_some((cg, spec))
    }

    /// Resolves `path` to an existing file, or the error reading or writing
    /// it would give.
    fn file(&self, path: &str) -> Result<(Arc<MemCgroup>, &'static FileSpec), FsError> {
        if let Some(found) = self.split_file(path) {
            return Ok(found);
        }
        if self.tree.find(path).is_ok() {
            return Err(FsError::new(Errno::EISDIR, path, "is a cgroup directory"));
        }
        let (dir, name) = path
            .trim_end_matches('/')
            .rsplit_once('/')
            .unwrap_or(("", path));
        let detail = match self.tree.find(dir) {
            Err(_) => "no such cgroup".to_owned(),
            Ok(cg) if FILES.iter().any(|f| f.name == name) && !cg.memory_enabled() => {
                format!(
                    "{name} needs the memory controller: enable it in the parent's cgroup.subtree_control"
                )
            }
            Ok(_) => format!("no file {name:?} in this cgroup"),
        };
        Err(FsError::new(Errno::ENOENT, path, detail))
    }

    /// Reads an interface file.
    pub fn read(&self, path: &str) -> Result<String, FsError> {
        let (cg, spec) = self.file(path)?;
        Ok((spec.read)(self, &cg))
    }

    /// Writes an interface file, as `echo value > file` does (`value` may
    /// carry the trailing newline).
    pub fn write(&self, path: &str, value: &str) -> Result<(), FsError> {
        let (cg, spec) = self.file(path)?;
        let Some(write) = spec.write else {
            return Err(FsError::new(Errno::EACCES, path, "the file is read-only"));
        };
        write(self, &cg, value).map_err(|(errno, detail)| FsError::new(errno, path, detail))
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

    #[test]
    fn memparse_like_the_kernel() {
        assert_eq!(memparse("4096"), Ok(4096));
        assert_eq!(memparse("30M"), Ok(30 << 20));
        assert_eq!(memparse("1k"), Ok(1024));
        assert_eq!(memparse("2G"), Ok(2 << 30));
        assert_eq!(memparse("0x10"), Ok(16));
        assert_eq!(memparse("010"), Ok(8), "leading 0 is octal");
        assert_eq!(memparse(""), Ok(0), "simple_strtoull of nothing");
        assert_eq!(memparse("99999999999999999999999"), Ok(u64::MAX));
        assert_eq!(memparse("16E"), Ok(u64::MAX), "saturates");
        assert!(memparse("12X").is_err());
        assert!(memparse("-1").is_err());
        assert!(memparse("1 M").is_err());
        assert_eq!(parse_pages(" max\n"), Ok(PAGE_COUNTER_MAX));
        assert_eq!(parse_pages("4097\n"), Ok(1), "rounds down");
        assert_eq!(parse_pages("4095"), Ok(0));
        assert_eq!(format_pages(PAGE_COUNTER_MAX), "max");
        assert_eq!(format_pages(3), "12288");
    }

    #[test]
    fn subtree_control_gates_memory_files() {
        let fs = CgroupFs::default();
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
        assert_eq!(
            fs.write("/cgroup.subtree_control", "-memory")
                .unwrap_err()
                .errno,
            Errno::EBUSY
        );
        assert_eq!(
            fs.write("/cgroup.subtree_control", "+cpu")
                .unwrap_err()
                .errno,
            Errno::ENOENT
        );
        assert_eq!(
            fs.write("/cgroup.subtree_control", "+bogus")
                .unwrap_err()
                .errno,
            Errno::EINVAL
        );
        assert_eq!(
            fs.write("/cgroup.subtree_control", "memory")
                .unwrap_err()
                .errno,
            Errno::EINVAL
        );
        fs.mkdir("/a/b").unwrap();
        assert_eq!(
            fs.write("/a/b/cgroup.subtree_control", "+memory")
                .unwrap_err()
                .errno,
            Errno::ENOENT
        );
    }

    #[test]
    fn values_round_trip_in_bytes() {
        let fs = CgroupFs::default();
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
            fs.write("/a/memory.current", "0").unwrap_err().errno,
            Errno::EACCES
        );
        assert_eq!(fs.read("/a").unwrap_err().errno, Errno::EISDIR);
        assert_eq!(fs.read("/a/nope").unwrap_err().errno, Errno::ENOENT);
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
    fn current_peak_events_and_stat_follow_charges() {
        let fs = CgroupFs::default();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        let a = fs.mkdir("/a").unwrap();
        fs.tree().try_charge(&a, 3, ChargeKind::Anon).unwrap();
        assert_eq!(fs.read("/a/memory.current").unwrap(), "12288\n");
        fs.tree().uncharge(&a, 2, ChargeKind::Anon);
        assert_eq!(fs.read("/a/memory.current").unwrap(), "4096\n");
        assert_eq!(fs.read("/a/memory.peak").unwrap(), "12288\n");
        fs.write("/a/memory.peak", "reset").unwrap();
        assert_eq!(fs.read("/a/memory.peak").unwrap(), "4096\n");
        assert!(fs.read("/memory.stat").unwrap().contains("anon 4096\n"));
        assert_eq!(
            fs.read("/a/memory.events").unwrap(),
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
        );
        assert_eq!(
            fs.read("/a/memory.swap.events").unwrap(),
            "high 0\nmax 0\nfail 0\n"
        );
        let names: Vec<String> = fs.ls("/").unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.contains(&"a".to_owned()) && names.contains(&"memory.stat".to_owned()));
        assert!(!names.contains(&"memory.max".to_owned()));
        assert_eq!(
            fs.read("/cgroup.stat").unwrap(),
            "nr_descendants 1\nnr_dying_descendants 0\n"
        );
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
                prop_assert!(matches!(e.errno, Errno::EINVAL | Errno::ENOENT | Errno::EACCES | Errno::EBUSY | Errno::ESRCH), "{e}");
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
