//! The verbs of `memcg sh`: one function per row of [`COMMANDS`], each
//! given the shell and its arguments. A verb reports through
//! [`Shell::print`] and [`Shell::report`] and returns a [`Failure`] with
//! the message bash or coreutils would print; the simulation it drives is
//! [`Sim`]'s, so a verb holds no state of its own.

use std::path::Path;

use memcg::Errno;
use memcg::cgroupfs::{FsError, memparse};
use memcg::memcontrol::{ChargeKind, MountOptions};
use memcg::mm_types::PAGE_SIZE;
use memcg::swapfile::MAX_SWAP_PRIO;
use memcg_sim::{ChargeTarget, Fill, Sim, SimError};

use super::{COMMANDS, Failure, MOUNT, Shell};

fn errno_text(e: &FsError) -> &'static str {
    e.errno.message()
}

pub(super) fn cmd_mkdir(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let parents = args.first().is_some_and(|a| a == "-p");
    let paths = &args[usize::from(parents)..];
    if paths.is_empty() {
        return Err(sh.usage("mkdir"));
    }
    let mut status = 0;
    for p in paths {
        let path = sh.resolve(p);
        let result = if parents {
            sh.sim.fs().mkdir_p(&path).map(drop)
        } else {
            sh.sim.fs().mkdir(&path).map(drop)
        };
        if let Err(e) = result {
            sh.report(&format!(
                "mkdir: cannot create directory '{p}': {}",
                errno_text(&e)
            ));
            status = 1;
        }
    }
    quiet_status(status)
}

/// The result of a command that reported its failures as they happened.
pub(super) fn quiet_status(status: i32) -> Result<(), Failure> {
    match status {
        0 => Ok(()),
        status => Err(Failure {
            message: String::new(),
            status,
        }),
    }
}

pub(super) fn cmd_rmdir(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    if args.is_empty() {
        return Err(sh.usage("rmdir"));
    }
    let mut status = 0;
    for p in args {
        let path = sh.resolve(p);
        if let Err(e) = sh.sim.fs().rmdir(&path) {
            sh.report(&format!(
                "rmdir: failed to remove '{p}': {}",
                errno_text(&e)
            ));
            status = 1;
        }
    }
    quiet_status(status)
}

pub(super) fn cmd_echo(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let newline = args.first().is_none_or(|a| a != "-n");
    let words = &args[usize::from(!newline)..];
    let mut text = words.join(" ");
    if newline {
        text.push('\n');
    }
    sh.print(&text)
}

/// The text of a file `cat` and `grep` read: a kernel file or an
/// interface file; on failure, its errno.
pub(super) fn read_text(sh: &Shell<'_>, p: &str) -> Result<String, Errno> {
    match sh.sim.procfs().read(p) {
        Some(result) => result,
        None => sh.sim.fs().read(&sh.resolve(p)).map_err(|e| e.errno),
    }
}

pub(super) fn cmd_cat(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    if args.is_empty() {
        return Err(sh.usage("cat"));
    }
    let mut status = 0;
    for p in args {
        match read_text(sh, p) {
            Ok(text) => sh.print(&text)?,
            Err(errno) => {
                sh.report(&format!("cat: {p}: {}", errno.message()));
                status = 1;
            }
        }
    }
    quiet_status(status)
}

pub(super) fn cmd_ls(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let target = args.first().map_or(".", String::as_str);
    if target.starts_with('/')
        && let Some(result) = super::files::ls_mount(sh, target)
    {
        return result;
    }
    let path = sh.resolve(target);
    match sh.sim.fs().ls(&path) {
        Ok(entries) => {
            let text: String = entries.iter().map(|e| format!("{}\n", e.name)).collect();
            sh.print(&text)
        }
        // A file lists as itself.
        Err(_) if sh.sim.fs().read(&path).is_ok() => sh.print(&format!("{target}\n")),
        Err(_) => Err(Failure {
            message: format!("ls: cannot access '{target}': No such file or directory"),
            status: 2,
        }),
    }
}

pub(super) fn cmd_cd(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let target = args.first().map_or("/", String::as_str);
    let path = sh.resolve(target);
    match sh.sim.fs().cgroup(&path) {
        Ok(_) => {
            sh.cwd = path;
            Ok(())
        }
        Err(_) => {
            let why = if sh.sim.fs().read(&path).is_ok() {
                Errno::ENOTDIR
            } else {
                Errno::ENOENT
            };
            Err(Failure {
                message: format!("{}cd: {target}: {}", sh.prefix(), why.message()),
                status: 1,
            })
        }
    }
}

pub(super) fn cmd_set(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    match args.first().map(String::as_str) {
        Some("-e") => sh.errexit = true,
        Some("+e") => sh.errexit = false,
        _ => return Err(sh.usage("set")),
    }
    Ok(())
}

pub(super) fn cmd_help(sh: &mut Shell<'_>, _: &[String]) -> Result<(), Failure> {
    let text: String = COMMANDS.iter().map(|c| format!("{}\n", c.usage)).collect();
    sh.print(&text)
}

/// The verbs, for `memcg sh --help`.
pub fn verbs_help() -> String {
    let verbs: String = COMMANDS
        .iter()
        .map(|c| format!("  {}\n", c.usage))
        .collect();
    format!(
        "Commands (also: `;`, `&&`, `||`, `$?`, `> FILE`, `2>/dev/null`, `&>/dev/null`; \
         /proc files: swaps, meminfo, pressure/memory, sys/vm/swappiness, PID/oom_score_adj, PID/oom_score):\n{verbs}"
    )
}

pub(super) fn cmd_swapon(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    if args.is_empty() {
        let text = sh.sim.machine().proc_swaps();
        return sh.print(&text);
    }
    // `-p PRIO`: 0..=32767 (`SWAP_FLAG_PRIO_MASK`); -1 is the default, as
    // swapon(8) takes it.
    let (prio, rest) = match args {
        [flag, p, rest @ ..] if flag == "-p" => match p.parse::<i32>() {
            Ok(-1) => (None, rest),
            Ok(p) if (0..=MAX_SWAP_PRIO).contains(&p) => (Some(p), rest),
            _ => return Err(sh.usage("swapon")),
        },
        rest => (None, rest),
    };
    let (name, result) = match rest {
        [kind, size] if kind == "ram" => {
            let Ok(bytes) = memparse(size) else {
                return Err(sh.usage("swapon"));
            };
            (
                sh.sim.machine().next_ram_name(),
                sh.sim.swapon_ram(bytes, prio),
            )
        }
        [kind, path, size] if kind == "file" => {
            let Ok(bytes) = memparse(size) else {
                return Err(sh.usage("swapon"));
            };
            (
                path.clone(),
                sh.sim
                    .machine()
                    .swapon_file(Path::new(path), bytes, prio)
                    .map_err(SimError::from),
            )
        }
        _ => return Err(sh.usage("swapon")),
    };
    let name = result.map_err(|e| Failure {
        message: format!("swapon: {name}: swapon failed: {}", describe(&e)),
        status: 1,
    })?;
    // The kernel says this in its log; say it where the user is looking.
    if let Some(device) = sh.sim.swap().swapfiles().by_name(&name)
        && let Some(size) = device.truncated_from()
    {
        let kb = |pages: u64| pages * PAGE_SIZE / 1024;
        sh.report(&format!(
            "swapon: {name}: Truncating oversized swap area, only using {}k out of {}k",
            kb(device.nr_pages()),
            kb(size)
        ));
    }
    Ok(())
}

/// `mount -o remount,OPTIONS ... /sys/fs/cgroup`: the cgroup2 mount options
/// that change the memory controller. As the kernel's
/// `apply_cgroup_root_flags`, a remount sets exactly the options it lists:
/// one not listed is cleared.
pub(super) fn cmd_mount(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let ["-o", options, .., target] = args.iter().map(String::as_str).collect::<Vec<_>>()[..]
    else {
        return Err(sh.usage("mount"));
    };
    let fail = |message: String| Failure {
        message,
        status: 32,
    };
    if target.trim_end_matches('/') != MOUNT {
        return Err(fail(format!(
            "mount: {target}: only {MOUNT} can be remounted here"
        )));
    }
    let mut opts = MountOptions::default();
    let mut remount = false;
    for opt in options.split(',') {
        match opt {
            "remount" => remount = true,
            "memory_localevents" => opts.memory_localevents = true,
            "memory_recursiveprot" => opts.memory_recursiveprot = true,
            // Options that change nothing simulated.
            ""
            | "rw"
            | "nosuid"
            | "nodev"
            | "noexec"
            | "relatime"
            | "nsdelegate"
            | "favordynmods"
            | "memory_hugetlb_accounting"
            | "pids_localevents" => {}
            other => {
                return Err(fail(format!(
                    "mount: {target}: bad option {other:?} (cgroup2: EINVAL)"
                )));
            }
        }
    }
    if !remount {
        return Err(fail(format!(
            "mount: {target}: already mounted; use -o remount,..."
        )));
    }
    sh.sim.fs().tree().set_mount_options(opts);
    Ok(())
}

pub(super) fn cmd_swapoff(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [name] = args else {
        return Err(sh.usage("swapoff"));
    };
    sh.sim.swapoff(name).map_err(|e| Failure {
        message: format!("swapoff: {name}: swapoff failed: {}", e.errno().message()),
        status: 1,
    })
}

pub(super) fn cmd_alloc(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [cgroup, name, size, options @ ..] = args else {
        return Err(sh.usage("alloc"));
    };
    if name.is_empty() {
        return Err(sh.usage("alloc"));
    }
    let (mut folio_pages, mut fill) = (1u32, Fill::Pattern);
    let mut opts = options.iter();
    while let Some(opt) = opts.next() {
        let value = opts.next();
        match (opt.as_str(), value) {
            ("--folio", Some(v)) => match memparse(v)
                .ok()
                .map(|b| b / PAGE_SIZE)
                .and_then(|p| u32::try_from(p).ok())
            {
                Some(p) if p > 0 => folio_pages = p,
                _ => return Err(sh.usage("alloc")),
            },
            ("--fill", Some(v)) => match v.parse() {
                Ok(f) => fill = f,
                Err(_) => return Err(sh.usage("alloc")),
            },
            _ => return Err(sh.usage("alloc")),
        }
    }
    let Ok(bytes) = memparse(size) else {
        return Err(sh.usage("alloc"));
    };
    let path = sh.resolve(cgroup);
    sh.sim
        .alloc(&path, name, bytes, folio_pages, fill)
        .map(drop)
        .map_err(|e| match e {
            SimError::Killed { .. } => killed(sh, name),
            _ => Failure {
                message: format!("{}alloc: {name}: {}", sh.prefix(), describe(&e)),
                status: 1,
            },
        })
}

/// A task killed under a verb (the OOM killer chose it): bash's report of
/// a command that died of SIGKILL, and its status 128 + 9.
fn killed(sh: &Shell<'_>, name: &str) -> Failure {
    Failure {
        message: format!("{}{name}: Killed", sh.prefix()),
        status: 137,
    }
}

/// What a simulation error prints: the errno text, with detail where the
/// detail is the point (a corrupt page, pages left behind, a bad size).
fn describe(e: &SimError) -> String {
    match e {
        SimError::Corrupt { .. }
        | SimError::Pageout { .. }
        | SimError::BadFolioSize(_)
        | SimError::BadMappingSize { .. }
        | SimError::Frozen { .. } => e.to_string(),
        _ => e.errno().message().to_owned(),
    }
}

/// Runs a verb that takes one mapping name.
pub(super) fn mapping_verb(
    sh: &mut Shell<'_>,
    args: &[String],
    verb: &str,
    op: impl FnOnce(&Sim, &str) -> Result<(), SimError>,
) -> Result<(), Failure> {
    let [name] = args else {
        return Err(sh.usage(verb));
    };
    op(&sh.sim, name).map_err(|e| {
        // Detailed errors name the mapping themselves.
        let message = match e {
            SimError::Killed { .. } => return killed(sh, name),
            SimError::Corrupt { .. } | SimError::Pageout { .. } => {
                format!("{}{verb}: {e}", sh.prefix())
            }
            _ => format!("{}{verb}: {name}: {}", sh.prefix(), describe(&e)),
        };
        Failure { message, status: 1 }
    })
}

/// `sleep SECONDS`: advances the simulated clock (fractions allowed, as
/// coreutils' sleep takes them).
pub(super) fn cmd_sleep(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [seconds] = args else {
        return Err(sh.usage("sleep"));
    };
    match seconds.parse::<f64>() {
        Ok(s) if (0.0..1e9).contains(&s) => {
            sh.clock.advance(std::time::Duration::from_secs_f64(s));
            // The flushers' periodic writeback that came due meanwhile.
            sh.sim.machine().run_flushers();
            Ok(())
        }
        _ => Err(Failure {
            message: format!("sleep: invalid time interval '{seconds}'"),
            status: 1,
        }),
    }
}

/// `kill NAME|PID`: SIGKILL to the task owning mapping NAME, or to PID.
pub(super) fn cmd_kill(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [target] = args else {
        return Err(sh.usage("kill"));
    };
    let pid = match target.parse::<u32>() {
        Ok(pid) => Some(pid),
        Err(_) => sh.sim.task_of(target).ok().map(|t| t.pid()),
    };
    let result = pid.ok_or(()).and_then(|pid| sh.sim.kill(pid).map_err(drop));
    result.map_err(|()| Failure {
        message: format!("{}kill: ({target}) - No such process", sh.prefix()),
        status: 1,
    })
}

pub(super) fn cmd_pidof(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [name] = args else {
        return Err(sh.usage("pidof"));
    };
    match sh.sim.task_of(name) {
        Ok(task) => sh.print(&format!("{}\n", task.pid())),
        Err(_) => Err(Failure {
            message: String::new(),
            status: 1,
        }),
    }
}

/// Pages for a size given in bytes (a partial page takes a whole one).
fn size_pages(text: &str) -> Option<u64> {
    memparse(text).ok().map(|bytes| bytes.div_ceil(PAGE_SIZE))
}

pub(super) fn cmd_charge(
    sh: &mut Shell<'_>,
    args: &[String],
    charging: bool,
) -> Result<(), Failure> {
    let name = if charging { "charge" } else { "uncharge" };
    let (path_arg, size, kind) = match args {
        [p, s] => (p, s, "anon"),
        [p, s, k] => (p, s, k.as_str()),
        _ => return Err(sh.usage(name)),
    };
    let what = match kind {
        "anon" => ChargeTarget::Memory(ChargeKind::Anon),
        "file" => ChargeTarget::Memory(ChargeKind::File),
        "swap" => ChargeTarget::Swap,
        _ => return Err(sh.usage(name)),
    };
    let Some(pages) = size_pages(size).filter(|&p| p > 0 && p <= u64::from(u32::MAX)) else {
        return Err(sh.usage(name));
    };
    let path = sh.resolve(path_arg);
    let result = if charging {
        sh.sim.charge(&path, pages, what)
    } else {
        sh.sim.uncharge(&path, pages, what)
    };
    result.map_err(|e| Failure {
        message: format!("{}{name}: {path_arg}: {}", sh.prefix(), e.errno().message()),
        status: 1,
    })
}
