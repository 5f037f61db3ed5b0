//! `memcg sh`: a shell-like script runner over a fresh simulated cgroup v2
//! hierarchy, so that kernel-style scripts (`mkdir`, `echo 30M >
//! memory.max`, `cat memory.events`, `rmdir`) run unchanged without root.
//!
//! Paths are absolute from the cgroup root or relative to `cd`; a leading
//! `/sys/fs/cgroup` is accepted. Errors are reported as bash and coreutils
//! report them and set the exit status; `set -e` stops at the first one.
//!
//! Commands live in one table ([`COMMANDS`]); each gets its arguments and
//! an optional output redirection, so later verbs (tasks, swapon,
//! workloads) slot in as new rows.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use std::path::Path;

use memcg::cgroupfs::{CgroupFs, FsError, memparse};
use memcg::memcontrol::{ChargeKind, MemCgroup};
use memcg::page_counter::PAGE_SIZE;
use memcg::swap_cgroup::{Design, SwapCgroup};
use memcg::{Errno, SwapEntry};
use memcg_sim::{Fill, Sim, SimConfig, SimError};

/// The cgroup v2 mount point scripts may prefix paths with.
const MOUNT: &str = "/sys/fs/cgroup";

/// Slots of the shell's swap device for `charge ... swap` (4 GiB).
const SWAP_SLOTS: u64 = 1 << 20;

/// Where a redirection sends output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fd {
    /// `>` or `1>`.
    Stdout,
    /// `2>`.
    Stderr,
    /// `&>`: both.
    Both,
}

/// A parsed command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Line {
    words: Vec<String>,
    /// `> path` (or `>> path`, which cgroup files treat the same).
    redirect: Option<String>,
    /// Error messages are discarded (`2>/dev/null`, `&>/dev/null`).
    quiet_errors: bool,
}

/// The only file outside the hierarchy a script may redirect to.
const DEV_NULL: &str = "/dev/null";

impl Line {
    /// Ends the current word: a command word, or a redirection target.
    fn finish(&mut self, word: &mut Option<String>, target: &mut Option<Fd>) -> Result<(), String> {
        let Some(w) = word.take() else { return Ok(()) };
        match target.take() {
            None => self.words.push(w),
            Some(Fd::Stdout) => self.redirect = Some(w),
            Some(fd) if w == DEV_NULL => {
                self.quiet_errors = true;
                if fd == Fd::Both {
                    self.redirect = Some(w);
                }
            }
            Some(_) => return Err(format!("{w}: only {DEV_NULL} can take error output")),
        }
        Ok(())
    }
}

/// Splits a line into words: single and double quotes, backslash escapes,
/// `#` comments, and `>`/`>>`/`1>`/`2>`/`&>` redirection (also attached, as
/// in `1>f`). Hand-written because redirection must be recognised outside
/// quotes, which generic shell-word splitters do not do.
fn parse_line(line: &str) -> Result<Line, String> {
    let mut out = Line::default();
    let mut word: Option<String> = None;
    let mut target: Option<Fd> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => out.finish(&mut word, &mut target)?,
            '#' if word.is_none() => break,
            '>' => {
                // `1>`, `2>` and `&>`: the word so far names the descriptor.
                let fd = match word.as_deref() {
                    Some("1") => Some(Fd::Stdout),
                    Some("2") => Some(Fd::Stderr),
                    Some("&") => Some(Fd::Both),
                    _ => None,
                };
                if fd.is_some() {
                    word = None;
                } else {
                    out.finish(&mut word, &mut target)?;
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if target.is_some() {
                    return Err("syntax error near unexpected token `>'".into());
                }
                target = Some(fd.unwrap_or(Fd::Stdout));
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err("unexpected EOF while looking for matching `''".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\' | '$' | '`')) => w.push(ch),
                            Some(ch) => {
                                w.push('\\');
                                w.push(ch);
                            }
                            None => {
                                return Err("unexpected EOF while looking for matching `\"'".into());
                            }
                        },
                        Some(ch) => w.push(ch),
                        None => return Err("unexpected EOF while looking for matching `\"'".into()),
                    }
                }
            }
            '\\' => {
                if let Some(ch) = chars.next() {
                    word.get_or_insert_with(String::new).push(ch);
                }
            }
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.finish(&mut word, &mut target)?;
    if target.is_some() {
        return Err("syntax error near unexpected token `newline'".into());
    }
    Ok(out)
}

/// What a failed command reports: its message (already formatted the way
/// bash or coreutils would) and exit status.
struct Failure {
    message: String,
    status: i32,
}

/// Runs a command: the shell, its arguments, its output redirection.
type Run = fn(&mut Shell<'_>, &[String], Option<&str>) -> Result<(), Failure>;

/// Charges made by `charge` under one (path, kind): the cgroup that took
/// each and its pages.
type Charges = Vec<(Arc<MemCgroup>, u64)>;

/// A command of the table.
struct Command {
    name: &'static str,
    usage: &'static str,
    run: Run,
}

/// Every command, in `help` order.
const COMMANDS: &[Command] = &[
    Command {
        name: "mkdir",
        usage: "mkdir [-p] PATH...",
        run: cmd_mkdir,
    },
    Command {
        name: "rmdir",
        usage: "rmdir PATH...",
        run: cmd_rmdir,
    },
    Command {
        name: "echo",
        usage: "echo [-n] WORD... [> FILE]",
        run: cmd_echo,
    },
    Command {
        name: "cat",
        usage: "cat FILE...",
        run: cmd_cat,
    },
    Command {
        name: "ls",
        usage: "ls [PATH]",
        run: cmd_ls,
    },
    Command {
        name: "cd",
        usage: "cd [PATH]",
        run: cmd_cd,
    },
    Command {
        name: "pwd",
        usage: "pwd",
        run: |sh, _, _| {
            let cwd = sh.cwd.clone();
            sh.print(&format!("{cwd}\n"))
        },
    },
    Command {
        name: "set",
        usage: "set -e|+e",
        run: cmd_set,
    },
    Command {
        name: "charge",
        usage: "charge CGROUP SIZE [anon|file|swap]",
        run: |sh, args, _| cmd_charge(sh, args, true),
    },
    Command {
        name: "uncharge",
        usage: "uncharge CGROUP SIZE [anon|file|swap]",
        run: |sh, args, _| cmd_charge(sh, args, false),
    },
    Command {
        name: "swapon",
        usage: "swapon [ram SIZE | file PATH SIZE]",
        run: cmd_swapon,
    },
    Command {
        name: "swapoff",
        usage: "swapoff NAME",
        run: cmd_swapoff,
    },
    Command {
        name: "alloc",
        usage: "alloc CGROUP NAME SIZE [--folio SIZE] [--fill zero|random|pattern]",
        run: cmd_alloc,
    },
    Command {
        name: "touch",
        usage: "touch NAME",
        run: |sh, args, _| mapping_verb(sh, args, "touch", |sim, name| sim.touch(name).map(drop)),
    },
    Command {
        name: "pageout",
        usage: "pageout NAME",
        run: |sh, args, _| {
            mapping_verb(sh, args, "pageout", |sim, name| sim.pageout(name).map(drop))
        },
    },
    Command {
        name: "verify",
        usage: "verify NAME",
        run: |sh, args, _| mapping_verb(sh, args, "verify", Sim::verify),
    },
    Command {
        name: "free",
        usage: "free NAME",
        run: |sh, args, _| mapping_verb(sh, args, "free", Sim::free),
    },
    Command {
        name: "pidof",
        usage: "pidof NAME",
        run: cmd_pidof,
    },
    Command {
        name: "exit",
        usage: "exit [N]",
        run: |_, _, _| Ok(()),
    },
    Command {
        name: "help",
        usage: "help",
        run: cmd_help,
    },
];

/// What `charge ... KIND` charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Memory(ChargeKind),
    Swap,
}

/// Swap slots charged by `charge ... swap`, per path, oldest first.
struct SwapState {
    map: SwapCgroup,
    next_offset: u64,
    freed: Vec<(u64, u32)>,
    records: HashMap<String, VecDeque<(SwapEntry, u32)>>,
}

impl SwapState {
    fn new() -> Self {
        let map = SwapCgroup::new(Design::default());
        map.swapon(0, SWAP_SLOTS)
            .expect("type 0 is free in a fresh table");
        Self {
            map,
            next_offset: 0,
            freed: Vec::new(),
            records: HashMap::new(),
        }
    }

    fn alloc(&mut self, nr: u32) -> Option<SwapEntry> {
        if let Some(i) = self.freed.iter().position(|&(_, n)| n == nr) {
            let (offset, _) = self.freed.swap_remove(i);
            return SwapEntry::new(0, offset).ok();
        }
        let offset = self.next_offset;
        if offset + u64::from(nr) > SWAP_SLOTS {
            return None;
        }
        self.next_offset += u64::from(nr);
        SwapEntry::new(0, offset).ok()
    }
}

/// The interpreter state.
pub struct Shell<'a> {
    sim: Sim,
    cwd: String,
    errexit: bool,
    /// 1-based line number in a script; `None` interactively.
    line: Option<usize>,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    /// What `charge` charged per (path, kind): the cgroup that took it
    /// (the path's effective memory cgroup then) and the pages, so that
    /// `uncharge` takes back no more than was given, from the same cgroup,
    /// even after the path was removed.
    charged: HashMap<(String, Kind), Charges>,
    swap: Option<SwapState>,
    /// The current line discards error messages.
    quiet_errors: bool,
    /// The current line sends its output to `/dev/null`.
    discard_output: bool,
}

impl<'a> Shell<'a> {
    /// A shell over a fresh hierarchy, printing to `out` and `err`.
    pub fn new(config: SimConfig, out: &'a mut dyn Write, err: &'a mut dyn Write) -> Self {
        Self {
            sim: Sim::new(config),
            cwd: "/".to_owned(),
            errexit: false,
            line: None,
            out,
            err,
            charged: HashMap::new(),
            swap: None,
            quiet_errors: false,
            discard_output: false,
        }
    }

    /// Runs a whole script; returns the exit status (the last command's, or
    /// the first failure's under `set -e`, or `exit N`'s).
    pub fn run_script(&mut self, script: &str) -> i32 {
        let mut status = 0;
        for (i, text) in script.lines().enumerate() {
            self.line = Some(i + 1);
            match self.run_line(text) {
                Flow::Continue(s) => status = s,
                Flow::Exit(s) => return s,
            }
            if status != 0 && self.errexit {
                return status;
            }
        }
        status
    }

    /// Reads commands from `input`, prompting on stderr when it is a
    /// terminal; returns the exit status.
    pub fn run_interactive(&mut self, input: &mut dyn BufRead, prompt: bool) -> i32 {
        let mut status = 0;
        let mut text = String::new();
        loop {
            if prompt {
                let _ = write!(self.err, "memcg:{}$ ", self.cwd);
                let _ = self.err.flush();
            }
            text.clear();
            match input.read_line(&mut text) {
                Ok(0) | Err(_) => return status,
                Ok(_) => {}
            }
            match self.run_line(&text) {
                Flow::Continue(s) => status = s,
                Flow::Exit(s) => return s,
            }
            if status != 0 && self.errexit {
                return status;
            }
        }
    }

    fn run_line(&mut self, text: &str) -> Flow {
        let parsed = match parse_line(text) {
            Ok(p) => p,
            Err(e) => {
                self.report(&format!("{}{e}", self.prefix()));
                return Flow::Continue(2);
            }
        };
        let Some((name, args)) = parsed.words.split_first() else {
            return Flow::Continue(0);
        };
        if name == "exit" {
            return Flow::Exit(args.first().and_then(|a| a.parse().ok()).unwrap_or(0));
        }
        let Some(cmd) = COMMANDS.iter().find(|c| c.name == name) else {
            self.report(&format!("{}{name}: command not found", self.prefix()));
            return Flow::Continue(127);
        };
        self.quiet_errors = parsed.quiet_errors;
        let redirect = parsed.redirect.as_deref();
        self.discard_output = redirect == Some(DEV_NULL);
        let result = (cmd.run)(self, args, redirect.filter(|&r| r != DEV_NULL));
        self.discard_output = false;
        let status = match result {
            Ok(()) => 0,
            Err(f) => {
                self.report(&f.message);
                f.status
            }
        };
        self.quiet_errors = false;
        Flow::Continue(status)
    }

    /// `memcg sh: line N: ` (bash's prefix for its own messages).
    fn prefix(&self) -> String {
        match self.line {
            Some(n) => format!("memcg sh: line {n}: "),
            None => "memcg sh: ".to_owned(),
        }
    }

    fn report(&mut self, message: &str) {
        if !message.is_empty() && !self.quiet_errors {
            let _ = writeln!(self.err, "{message}");
        }
    }

    fn print(&mut self, text: &str) -> Result<(), Failure> {
        if self.discard_output {
            return Ok(());
        }
        self.out.write_all(text.as_bytes()).map_err(|e| Failure {
            message: format!("{}write error: {e}", self.prefix()),
            status: 1,
        })
    }

    /// `path` made absolute against `cd`, `.`/`..` resolved, the mount
    /// point prefix removed.
    fn resolve(&self, path: &str) -> String {
        let path = path.strip_prefix(MOUNT).unwrap_or(path);
        let joined = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{}/{path}", self.cwd)
        };
        let mut parts: Vec<&str> = Vec::new();
        for c in joined.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                name => parts.push(name),
            }
        }
        format!("/{}", parts.join("/"))
    }

    fn usage(&self, name: &str) -> Failure {
        let usage = COMMANDS
            .iter()
            .find(|c| c.name == name)
            .map_or("", |c| c.usage);
        Failure {
            message: format!("{}{name}: usage: {usage}", self.prefix()),
            status: 2,
        }
    }
}

/// Whether to go on after a line.
enum Flow {
    Continue(i32),
    Exit(i32),
}

fn errno_text(e: &FsError) -> &'static str {
    e.errno.message()
}

fn cmd_mkdir(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
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
fn quiet_status(status: i32) -> Result<(), Failure> {
    match status {
        0 => Ok(()),
        status => Err(Failure {
            message: String::new(),
            status,
        }),
    }
}

fn cmd_rmdir(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
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

fn cmd_echo(sh: &mut Shell<'_>, args: &[String], redirect: Option<&str>) -> Result<(), Failure> {
    let newline = args.first().is_none_or(|a| a != "-n");
    let words = &args[usize::from(!newline)..];
    let mut text = words.join(" ");
    if newline {
        text.push('\n');
    }
    let Some(target) = redirect else {
        return sh.print(&text);
    };
    let path = sh.resolve(target);
    sh.sim.fs().write(&path, &text).map_err(|e| {
        let message = match e.errno {
            // The redirection itself fails: the file cannot be opened.
            Errno::ENOENT | Errno::EISDIR => format!("{}{target}: {}", sh.prefix(), errno_text(&e)),
            _ => format!("{}echo: write error: {}", sh.prefix(), errno_text(&e)),
        };
        Failure { message, status: 1 }
    })
}

fn cmd_cat(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    if args.is_empty() {
        return Err(sh.usage("cat"));
    }
    let mut status = 0;
    for p in args {
        if p == "/proc/swaps" {
            let text = sh.sim.proc_swaps();
            sh.print(&text)?;
            continue;
        }
        match sh.sim.fs().read(&sh.resolve(p)) {
            Ok(text) => sh.print(&text)?,
            Err(e) => {
                sh.report(&format!("cat: {p}: {}", errno_text(&e)));
                status = 1;
            }
        }
    }
    quiet_status(status)
}

fn cmd_ls(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    let target = args.first().map_or(".", String::as_str);
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

fn cmd_cd(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    let target = args.first().map_or("/", String::as_str);
    let path = sh.resolve(target);
    match sh.sim.fs().cgroup(&path) {
        Ok(_) => {
            sh.cwd = path;
            Ok(())
        }
        Err(_) => Err(Failure {
            message: format!("{}cd: {target}: No such file or directory", sh.prefix()),
            status: 1,
        }),
    }
}

fn cmd_set(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    match args.first().map(String::as_str) {
        Some("-e") => sh.errexit = true,
        Some("+e") => sh.errexit = false,
        _ => return Err(sh.usage("set")),
    }
    Ok(())
}

fn cmd_help(sh: &mut Shell<'_>, _: &[String], _: Option<&str>) -> Result<(), Failure> {
    let text: String = COMMANDS.iter().map(|c| format!("{}\n", c.usage)).collect();
    sh.print(&text)
}

fn cmd_swapon(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    let result = match args {
        [] => {
            let text = sh.sim.proc_swaps();
            return sh.print(&text);
        }
        [kind, size] if kind == "ram" => match memparse(size) {
            Ok(bytes) => sh.sim.swapon_ram(bytes).map(drop),
            Err(_) => return Err(sh.usage("swapon")),
        },
        [kind, path, size] if kind == "file" => match memparse(size) {
            Ok(bytes) => sh.sim.swapon_file(Path::new(path), bytes).map(drop),
            Err(_) => return Err(sh.usage("swapon")),
        },
        _ => return Err(sh.usage("swapon")),
    };
    result.map_err(|e| Failure {
        message: format!(
            "swapon: {}: swapon failed: {}",
            args[1..].join(" "),
            e.errno().message()
        ),
        status: 1,
    })
}

fn cmd_swapoff(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    let [name] = args else {
        return Err(sh.usage("swapoff"));
    };
    sh.sim.swapoff(name).map_err(|e| Failure {
        message: format!("swapoff: {name}: swapoff failed: {}", e.errno().message()),
        status: 1,
    })
}

fn cmd_alloc(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
    let [cgroup, name, size, options @ ..] = args else {
        return Err(sh.usage("alloc"));
    };
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
        .map_err(|e| Failure {
            message: format!("{}alloc: {name}: {}", sh.prefix(), describe(&e)),
            status: 1,
        })
}

/// What a simulation error prints: the errno text, with detail where the
/// detail is the point (a corrupt page, pages left behind, a bad size).
fn describe(e: &SimError) -> String {
    match e {
        SimError::Corrupt { .. } | SimError::Pageout { .. } | SimError::BadSize(_) => e.to_string(),
        _ => e.errno().message().to_owned(),
    }
}

/// Runs a verb that takes one mapping name.
fn mapping_verb(
    sh: &mut Shell<'_>,
    args: &[String],
    verb: &str,
    op: impl FnOnce(&Sim, &str) -> Result<(), SimError>,
) -> Result<(), Failure> {
    let [name] = args else {
        return Err(sh.usage(verb));
    };
    op(&sh.sim, name).map_err(|e| Failure {
        message: format!("{}{verb}: {}", sh.prefix(), describe(&e)),
        status: 1,
    })
}

fn cmd_pidof(sh: &mut Shell<'_>, args: &[String], _: Option<&str>) -> Result<(), Failure> {
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

fn cmd_charge(sh: &mut Shell<'_>, args: &[String], charging: bool) -> Result<(), Failure> {
    let name = if charging { "charge" } else { "uncharge" };
    let (path_arg, size, kind) = match args {
        [p, s] => (p, s, "anon"),
        [p, s, k] => (p, s, k.as_str()),
        _ => return Err(sh.usage(name)),
    };
    let kind = match kind {
        "anon" => Kind::Memory(ChargeKind::Anon),
        "file" => Kind::Memory(ChargeKind::File),
        "swap" => Kind::Swap,
        _ => return Err(sh.usage(name)),
    };
    let Some(pages) = size_pages(size).filter(|&p| p > 0 && p <= u64::from(u32::MAX)) else {
        return Err(sh.usage(name));
    };
    let path = sh.resolve(path_arg);
    let fail = |sh: &Shell<'_>, errno: Errno| Failure {
        message: format!("{}{name}: {path_arg}: {}", sh.prefix(), errno.message()),
        status: 1,
    };
    let key = (path.clone(), kind);
    if !charging {
        let held: u64 = sh
            .charged
            .get(&key)
            .map_or(0, |v| v.iter().map(|(_, p)| p).sum());
        if held < pages {
            return Err(fail(sh, Errno::EINVAL));
        }
        uncharge(sh, &key, pages).map_err(|errno| fail(sh, errno))?;
        return Ok(());
    }
    let cg = sh
        .sim
        .fs()
        .cgroup(&path)
        .map_err(|e| fail(sh, e.errno))?
        .effective_memcg();
    match kind {
        Kind::Memory(k) => sh
            .sim
            .fs()
            .tree()
            .try_charge(&cg, pages, k)
            .map_err(|e| fail(sh, e.errno()))?,
        Kind::Swap => charge_swap(sh, &path, &cg, pages as u32).map_err(|errno| fail(sh, errno))?,
    }
    sh.charged.entry(key).or_default().push((cg, pages));
    Ok(())
}

fn charge_swap(sh: &mut Shell<'_>, path: &str, cg: &Arc<MemCgroup>, nr: u32) -> Result<(), Errno> {
    let swap = sh.swap.get_or_insert_with(SwapState::new);
    let Some(entry) = swap.alloc(nr) else {
        sh.sim.fs().tree().swapout_failed(cg);
        return Err(Errno::ENOSPC);
    };
    match sh.sim.fs().tree().swapout_charge(cg, &swap.map, entry, nr) {
        Ok(_) => {
            swap.records
                .entry(path.to_owned())
                .or_default()
                .push_back((entry, nr));
            Ok(())
        }
        Err(e) => {
            swap.freed.push((entry.swp_offset(), nr));
            Err(e.errno())
        }
    }
}

/// Takes back `pages` charged earlier under `key`, newest charge first
/// (the path may have been removed since: the charge stays with the dying
/// cgroup until then, as in the kernel).
fn uncharge(sh: &mut Shell<'_>, key: &(String, Kind), mut pages: u64) -> Result<(), Errno> {
    let records = sh.charged.get_mut(key).ok_or(Errno::EINVAL)?;
    while pages > 0 {
        let (cg, held) = records.last_mut().ok_or(Errno::EINVAL)?;
        let take = pages.min(*held);
        match key.1 {
            Kind::Memory(k) => sh.sim.fs().tree().uncharge(cg, take, k),
            Kind::Swap => free_swap(
                sh.swap.as_mut().ok_or(Errno::EINVAL)?,
                sh.sim.fs(),
                &key.0,
                take,
            )?,
        }
        *held -= take;
        pages -= take;
        if *held == 0 {
            records.pop();
        }
    }
    Ok(())
}

/// Frees `pages` of swap slots recorded for `path`, oldest first.
fn free_swap(swap: &mut SwapState, fs: &CgroupFs, path: &str, mut pages: u64) -> Result<(), Errno> {
    let records = swap.records.get_mut(path).ok_or(Errno::EINVAL)?;
    while pages > 0 {
        let (entry, nr) = records.front_mut().ok_or(Errno::EINVAL)?;
        let take = u32::try_from(pages).unwrap_or(u32::MAX).min(*nr);
        fs.tree()
            .swap_uncharge(&swap.map, *entry, take)
            .map_err(|e| e.errno())?;
        swap.freed.push((entry.swp_offset(), take));
        pages -= u64::from(take);
        if take == *nr {
            records.pop_front();
        } else {
            *entry = entry.add(u64::from(take)).map_err(|_| Errno::EINVAL)?;
            *nr -= take;
        }
    }
    Ok(())
}

/// Runs `memcg sh [FILE]`; returns the exit status.
pub fn main(file: Option<&std::path::Path>, config: SimConfig) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    let mut shell = Shell::new(config, &mut out, &mut err);
    let status = match file {
        Some(path) => {
            let bytes =
                std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            shell.run_script(&String::from_utf8_lossy(&bytes))
        }
        None => {
            let stdin = std::io::stdin();
            let prompt = stdin.is_terminal();
            let mut input = stdin.lock();
            shell.run_interactive(&mut input, prompt)
        }
    };
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(script: &str) -> (String, String, i32) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = Shell::new(SimConfig::default(), &mut out, &mut err).run_script(script);
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
            status,
        )
    }

    #[test]
    fn tokenizer_handles_quotes_comments_and_redirection() {
        let l = parse_line(r#"echo "+memory" 'a b'>f # note"#).unwrap();
        assert_eq!(l.words, ["echo", "+memory", "a b"]);
        assert_eq!(l.redirect.as_deref(), Some("f"));
        assert_eq!(
            parse_line("echo 1 >> /x").unwrap().redirect.as_deref(),
            Some("/x")
        );
        assert_eq!(parse_line(r"echo a\ b").unwrap().words, ["echo", "a b"]);
        assert!(parse_line("echo 'open").is_err());
        assert!(parse_line("echo >").is_err());
        assert_eq!(
            parse_line("echo > a > b").unwrap().redirect.as_deref(),
            Some("b"),
            "last wins, as in bash"
        );
        assert_eq!(parse_line("  # only a comment").unwrap(), Line::default());
        let l = parse_line("rmdir /a &>/dev/null").unwrap();
        assert_eq!(
            (l.words.len(), l.redirect.as_deref(), l.quiet_errors),
            (2, Some("/dev/null"), true)
        );
        let l = parse_line("rmdir /a 2>/dev/null").unwrap();
        assert_eq!((l.redirect, l.quiet_errors), (None, true));
        assert!(parse_line("rmdir /a 2>/elsewhere").is_err());
    }

    #[test]
    fn a_kernel_style_script_runs() {
        let (out, err, status) = run("mkdir -p /sys/fs/cgroup/bench/test\n\
             echo +memory > /sys/fs/cgroup/cgroup.subtree_control\n\
             echo +memory > /sys/fs/cgroup/bench/cgroup.subtree_control\n\
             echo 8K > /sys/fs/cgroup/bench/memory.max\n\
             cd /bench\n\
             cat memory.max test/cgroup.controllers\n\
             charge test 4K\n\
             cat test/memory.current\n");
        assert_eq!(err, "");
        assert_eq!(status, 0);
        assert_eq!(out, "8192\nmemory\n4096\n");
    }

    #[test]
    fn errors_print_like_bash_and_set_the_status() {
        let (_, err, status) = run("mkdir /a\nmkdir /a/b\nrmdir /a\n");
        assert_eq!(
            err,
            "rmdir: failed to remove '/a': Device or resource busy\n"
        );
        assert_eq!(status, 1);
        let (_, err, status) =
            run("echo +memory > /cgroup.subtree_control\nmkdir /a\necho lots > /a/memory.max\n");
        assert_eq!(
            err,
            "memcg sh: line 3: echo: write error: Invalid argument\n"
        );
        assert_eq!(status, 1);
        let (_, err, _) = run("mkdir /a\nmkdir /a\ncat /a/memory.max\nfrob\ncd /nope\n");
        assert_eq!(
            err,
            "mkdir: cannot create directory '/a': File exists\n\
             cat: /a/memory.max: No such file or directory\n\
             memcg sh: line 4: frob: command not found\n\
             memcg sh: line 5: cd: /nope: No such file or directory\n"
        );
        let (out, _, status) = run("set -e\nrmdir /nope\necho unreachable\n");
        assert_eq!((out.as_str(), status), ("", 1));
        let (_, _, status) = run("exit 3\necho no\n");
        assert_eq!(status, 3);
    }

    #[test]
    fn charge_verbs_drive_the_counters() {
        let (out, err, status) = run("echo +memory > /cgroup.subtree_control\n\
             mkdir /a\n\
             echo 12K > /a/memory.max\n\
             charge /a 8K\n\
             charge /a 8K\n\
             cat /a/memory.events\n\
             uncharge /a 16K\n\
             uncharge /a 4K\n\
             charge /a 1 swap\n\
             cat /a/memory.swap.current\n");
        assert_eq!(
            err,
            "memcg sh: line 5: charge: /a: Cannot allocate memory\n\
             memcg sh: line 7: uncharge: /a: Invalid argument\n"
        );
        assert!(out.contains("oom 1\n"), "{out}");
        assert!(out.ends_with("4096\n"));
        assert_eq!(status, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_line(&text);
            let _ = run(&text);
        }

        #[test]
        fn random_command_lines_never_panic(lines in prop::collection::vec(
            (prop::sample::select(vec!["mkdir", "mkdir -p", "rmdir", "echo", "cat", "ls", "cd", "charge", "uncharge", "set", "exit x"]),
             "[ /a-z0-9.+>'\"KMG-]{0,24}"),
            0..30)) {
            let script: String = lines.iter().map(|(c, rest)| format!("{c} {rest}\n")).collect();
            let _ = run(&format!("echo +memory > /cgroup.subtree_control\n{script}"));
        }
    }
}
