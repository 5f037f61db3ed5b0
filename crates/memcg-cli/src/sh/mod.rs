//! `memcg sh`: a shell-like script runner over a fresh simulated cgroup v2
//! hierarchy, so that kernel-style scripts (`mkdir`, `echo 30M >
//! memory.max`, `cat memory.events`, `rmdir`) run unchanged without root.
//!
//! Paths are absolute from the cgroup root or relative to `cd`; a leading
//! `/sys/fs/cgroup` is accepted. Every task runs on the shell's one
//! thread, so a verb that would run a frozen task (`cgroup.freeze`:
//! `alloc`, `touch`, `pageout`, `free`) fails saying so, where a kernel's
//! task would wait for the thaw; `kill` and `cgroup.kill` still kill it. Errors are reported as bash and coreutils
//! report them and set the exit status; `set -e` stops at the first one.
//!
//! Commands live in one table ([`COMMANDS`]) whose rows point at the verbs
//! in `verbs.rs` (`grep`'s in `grep.rs`); each gets its arguments and an
//! optional output redirection, so a new verb is a new row. [`Shell`] holds interpreter
//! state only (cwd, `set -e`, `$?`, where output goes); everything a verb
//! changes lives in the simulator ([`Sim`]), including direct charges and
//! the swap slots they take. Kernel files outside the hierarchy (`/proc`,
//! `/sys/module/zswap`, ...) are the library's table (`memcg::procfs`,
//! over the simulator's machine and tasks: `Sim::procfs`), as FUSE serves
//! them.

mod files;
mod grep;
mod parse;
mod verbs;

use std::io::{BufRead, IsTerminal, Write};

use std::sync::Arc;

use grep::cmd_grep;
use memcg::Errno;
use memcg::cgroupfs::{Access, OpenFile};
use memcg::clock::{ReclaimCost, VirtualClock};
use memcg::procfs::{self, ProcFile};
use memcg_sim::{FrozenOps, Sim, SimConfig};
use parse::{DEV_NULL, Join, List, ParseError, Simple};
pub use verbs::verbs_help;
use verbs::{
    cmd_alloc, cmd_cat, cmd_cd, cmd_charge, cmd_echo, cmd_help, cmd_kill, cmd_ls, cmd_mkdir,
    cmd_mount, cmd_pidof, cmd_rmdir, cmd_set, cmd_sleep, cmd_swapoff, cmd_swapon, mapping_verb,
};

/// The cgroup v2 mount point scripts may prefix paths with.
const MOUNT: &str = "/sys/fs/cgroup";

/// What a failed command reports: its message (already formatted the way
/// bash or coreutils would) and exit status.
struct Failure {
    message: String,
    status: i32,
}

/// Runs a command: the shell and its arguments (output goes through
/// [`Shell::print`], which honours the line's redirection).
type Run = fn(&mut Shell<'_>, &[String]) -> Result<(), Failure>;

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
        usage: "echo [-n] WORD...",
        run: cmd_echo,
    },
    Command {
        name: "cat",
        usage: "cat FILE...",
        run: cmd_cat,
    },
    Command {
        name: "grep",
        usage: "grep [-EFGHchilnqsvwx] [-e PATTERN]... [PATTERN] FILE...",
        run: cmd_grep,
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
        run: |sh, _| {
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
        usage: "charge CGROUP SIZE [anon|file|swap]  (swap: after swapon)",
        run: |sh, args| cmd_charge(sh, args, true),
    },
    Command {
        name: "uncharge",
        usage: "uncharge CGROUP SIZE [anon|file|swap]",
        run: |sh, args| cmd_charge(sh, args, false),
    },
    Command {
        name: "swapon",
        usage: "swapon [[-p PRIO] ram SIZE | [-p PRIO] file PATH SIZE]",
        run: cmd_swapon,
    },
    Command {
        name: "swapoff",
        usage: "swapoff NAME",
        run: cmd_swapoff,
    },
    Command {
        name: "alloc",
        usage: "alloc CGROUP NAME SIZE [--folio SIZE] [--fill zero|random|pattern|text|sparse|half]",
        run: cmd_alloc,
    },
    Command {
        name: "umount",
        usage: "umount DIR",
        run: files::cmd_umount,
    },
    Command {
        name: "write",
        usage: "write CGROUP PATH SIZE [--fill zero|random|pattern|text|sparse|half|seq]",
        run: files::cmd_write,
    },
    Command {
        name: "read",
        usage: "read CGROUP PATH [--bs SIZE] [--count N] [--offset SIZE]",
        run: files::cmd_read,
    },
    Command {
        name: "rm",
        usage: "rm PATH...",
        run: files::cmd_rm,
    },
    Command {
        name: "sync",
        usage: "sync",
        run: files::cmd_sync,
    },
    Command {
        name: "touch",
        usage: "touch NAME",
        run: |sh, args| mapping_verb(sh, args, "touch", |sim, name| sim.touch(name).map(drop)),
    },
    Command {
        name: "pageout",
        usage: "pageout NAME",
        run: |sh, args| mapping_verb(sh, args, "pageout", |sim, name| sim.pageout(name).map(drop)),
    },
    Command {
        name: "verify",
        usage: "verify NAME|PATH  (a mapping, or a file under a mount)",
        run: |sh, args| match args {
            [path] if sh.sim.machine().resolve_file(path).is_some() => files::verify_file(sh, path),
            _ => mapping_verb(sh, args, "verify", Sim::verify),
        },
    },
    Command {
        name: "free",
        usage: "free NAME",
        run: |sh, args| mapping_verb(sh, args, "free", Sim::free),
    },
    Command {
        name: "sleep",
        usage: "sleep SECONDS",
        run: cmd_sleep,
    },
    Command {
        name: "kill",
        usage: "kill NAME|PID",
        run: cmd_kill,
    },
    Command {
        name: "pidof",
        usage: "pidof NAME",
        run: cmd_pidof,
    },
    Command {
        name: "mount",
        usage: "mount [ram SIZE DIR | dir HOSTDIR DIR | -o remount[,memory_localevents][,memory_recursiveprot] [DEVICE] /sys/fs/cgroup]",
        run: |sh, args| match args.first().map(String::as_str) {
            Some("-o") => cmd_mount(sh, args),
            _ => files::cmd_mount(sh, args),
        },
    },
    Command {
        name: "exit",
        usage: "exit [N]",
        run: |_, _| Ok(()),
    },
    Command {
        name: "help",
        usage: "help",
        run: cmd_help,
    },
];

/// A file opened by `>`.
enum Sink {
    /// A cgroup interface file.
    Cgroup(OpenFile),
    /// A `/proc` file.
    Proc(ProcFile),
}

/// Where the current command's output goes.
enum Output {
    /// The shell's standard output.
    Stdout,
    /// `> /dev/null`.
    Discard,
    /// `> FILE`: gathered, then written to the file in one `write(2)`.
    Capture(String),
    /// `>&2`: the shell's error stream.
    Stderr,
}

/// The interpreter state.
pub struct Shell<'a> {
    sim: Sim,
    /// The simulated time the tree's throttling sleeps on.
    clock: Arc<VirtualClock>,
    cwd: String,
    errexit: bool,
    /// 1-based line number in a script; `None` interactively.
    line: Option<usize>,
    /// Whether a syntax error ends the input (bash reading a script or a
    /// pipe) or only the line (at a prompt).
    interactive: bool,
    /// `$?`.
    last_status: i32,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    /// The current command discards error messages.
    quiet_errors: bool,
    /// The current command's error messages go where its output goes.
    errors_to_output: bool,
    output: Output,
    /// What `write` put in each file, so `verify` can check it.
    files: files::Written,
}

impl<'a> Shell<'a> {
    /// A shell over a fresh hierarchy, printing to `out` and `err`, with
    /// reclaim costing [`ReclaimCost::MEASURED`].
    #[cfg(test)]
    pub fn new(config: SimConfig, out: &'a mut dyn Write, err: &'a mut dyn Write) -> Self {
        Self::with_reclaim_cost(config, ReclaimCost::MEASURED, out, err)
    }

    /// A shell whose reclaim work costs `cost` of simulated time.
    pub fn with_reclaim_cost(
        config: SimConfig,
        cost: ReclaimCost,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
    ) -> Self {
        let sim = Sim::new(config);
        // One thread runs every task here: an operation of a frozen task
        // fails (saying it would wait) instead of waiting for a thaw that
        // could never come.
        sim.set_frozen_ops(FrozenOps::Refuse);
        // Scripts run on simulated time: a throttled task's sleep, the
        // `sleep` verb and reclaim's modelled cost (memcg::clock) advance
        // it at once, so runs are instant and repeat.
        let clock = Arc::new(VirtualClock::with_reclaim_cost(cost));
        sim.fs().tree().set_clock(clock.clone());
        Self {
            sim,
            clock,
            cwd: "/".to_owned(),
            errexit: false,
            line: None,
            interactive: false,
            last_status: 0,
            out,
            err,
            quiet_errors: false,
            errors_to_output: false,
            output: Output::Stdout,
            files: files::Written::default(),
        }
    }

    /// Runs a whole script; returns the exit status (the last command's, or
    /// the first failure's under `set -e`, or `exit N`'s, or 2 after a
    /// syntax error, which ends a script as it does in bash).
    pub fn run_script(&mut self, script: &str) -> i32 {
        let mut lines = script.lines().enumerate().peekable();
        while let Some((i, first)) = lines.next() {
            self.line = Some(i + 1);
            // A command runs on while a quote is open or a line ends in a
            // backslash, as bash reads it.
            let mut text = first.to_owned();
            loop {
                let open = parse::continues(&text)
                    || matches!(parse::parse(&text), Err(ParseError::Unterminated(_)));
                match lines.peek() {
                    Some(&(_, next)) if open => {
                        if parse::continues(&text) {
                            text.pop();
                        } else {
                            text.push('\n');
                        }
                        text.push_str(next);
                        lines.next();
                    }
                    _ => break,
                }
            }
            if let Flow::Exit(status) = self.run_line(&text) {
                return status;
            }
        }
        self.last_status
    }

    /// Reads commands from `input` until it ends, prompting on stderr when
    /// it is a terminal (a session where a syntax error only ends its
    /// line); returns the exit status. Bytes that are not UTF-8 are read
    /// as U+FFFD, as a script file's are.
    pub fn run_interactive(&mut self, input: &mut dyn BufRead, prompt: bool) -> i32 {
        self.interactive = prompt;
        let mut bytes = Vec::new();
        let mut number = 0;
        loop {
            if prompt {
                let _ = write!(self.err, "memcg:{}$ ", self.cwd);
                let _ = self.err.flush();
            }
            bytes.clear();
            match input.read_until(b'\n', &mut bytes) {
                Ok(0) => return self.last_status,
                Ok(_) => {}
                Err(e) => {
                    let _ = writeln!(self.err, "memcg sh: read error: {e}");
                    return 1;
                }
            }
            number += 1;
            if !prompt {
                self.line = Some(number);
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Flow::Exit(status) = self.run_line(&text) {
                return status;
            }
        }
    }

    /// Runs one line: a list of commands joined by `;`, `&&` and `||`.
    fn run_line(&mut self, text: &str) -> Flow {
        let list = match parse::parse(text) {
            Ok(list) => list,
            Err(e) => return self.syntax_error(&e),
        };
        self.run_list(&list)
    }

    fn syntax_error(&mut self, e: &ParseError) -> Flow {
        for line in e.to_string().lines() {
            self.report(&format!("{}{line}", self.prefix()));
        }
        self.last_status = 2;
        if self.interactive && !e.ends_input() {
            Flow::Continue
        } else {
            Flow::Exit(2)
        }
    }

    fn run_list(&mut self, list: &List) -> Flow {
        for (i, (join, command)) in list.iter().enumerate() {
            let runs = match join {
                Join::Always => true,
                Join::IfOk => self.last_status == 0,
                Join::IfFailed => self.last_status != 0,
            };
            if !runs {
                continue;
            }
            if let Flow::Exit(status) = self.run_simple(command) {
                return Flow::Exit(status);
            }
            // `set -e` spares a command whose status an `&&` or `||` after
            // it tests.
            let tested = list
                .get(i + 1)
                .is_some_and(|(next, _)| *next != Join::Always);
            if self.errexit && self.last_status != 0 && !tested {
                return Flow::Exit(self.last_status);
            }
        }
        Flow::Continue
    }

    /// Runs one command with its redirection: the target is opened first
    /// (an open that fails reports and skips the command, as bash does),
    /// output is gathered and written to it in one write.
    fn run_simple(&mut self, command: &Simple) -> Flow {
        let words: Vec<String> = command
            .words
            .iter()
            .map(|w| w.expand(self.last_status))
            .collect();
        self.quiet_errors = command.quiet_errors;
        self.errors_to_output = command.errors_to_stdout;
        let target = command
            .redirect
            .as_ref()
            .map(|w| w.expand(self.last_status));
        let mut file = None;
        self.output = match target.as_deref() {
            None if command.output_to_stderr => Output::Stderr,
            None => Output::Stdout,
            Some(DEV_NULL) => Output::Discard,
            Some(t) => match self.open_for_output(t) {
                Ok(f) => {
                    file = Some(f);
                    Output::Capture(String::new())
                }
                Err(message) => {
                    self.report(&format!("{}{t}: {message}", self.prefix()));
                    return self.finish_command(1);
                }
            },
        };
        let Some((name, args)) = words.split_first() else {
            return self.finish_command(0);
        };
        if name == "exit" {
            return self.exit(args);
        }
        let Some(cmd) = COMMANDS.iter().find(|c| c.name == name) else {
            self.report(&format!("{}{name}: command not found", self.prefix()));
            return self.finish_command(127);
        };
        let mut status = match (cmd.run)(self, args) {
            Ok(()) => 0,
            Err(f) => {
                self.report(&f.message);
                f.status
            }
        };
        if let (Some(mut file), Output::Capture(text)) =
            (file, std::mem::replace(&mut self.output, Output::Stdout))
            && !text.is_empty()
            && let Err(errno) = self.write_sink(&mut file, &text)
        {
            // A builtin's write error carries the shell's prefix; a
            // program's does not.
            let prefix = if name == "echo" {
                self.prefix()
            } else {
                String::new()
            };
            self.report(&format!("{prefix}{name}: write error: {}", errno.message()));
            status = 1;
        }
        self.finish_command(status)
    }

    fn finish_command(&mut self, status: i32) -> Flow {
        self.last_status = status;
        self.quiet_errors = false;
        self.errors_to_output = false;
        self.output = Output::Stdout;
        Flow::Continue
    }

    /// `exit [N]`: N modulo 256; no N is the last status; a non-number is
    /// an error that exits with 2, as bash's does.
    fn exit(&mut self, args: &[String]) -> Flow {
        let status = match args.first() {
            None => self.last_status,
            Some(n) => match n.parse::<i64>() {
                Ok(n) => n.rem_euclid(256) as i32,
                Err(_) => {
                    self.report(&format!(
                        "{}exit: {n}: numeric argument required",
                        self.prefix()
                    ));
                    2
                }
            },
        };
        Flow::Exit(status)
    }

    /// Opens the target of `>` (a cgroup file) for writing; the error is
    /// what bash prints after the path.
    fn open_for_output(&mut self, target: &str) -> Result<Sink, String> {
        if procfs::is_kernel_file(target) {
            return self
                .sim
                .procfs()
                .open_for_write(target)
                .map(Sink::Proc)
                .map_err(|e| e.message().to_owned());
        }
        if target.starts_with("/dev/") {
            return Err(Errno::EACCES.message().to_owned());
        }
        let path = self.resolve(target);
        self.sim
            .fs()
            .open(&path, Access::Write)
            .map(Sink::Cgroup)
            .map_err(|e| e.errno.message().to_owned())
    }

    /// Writes a command's output to its redirection target, in one write.
    fn write_sink(&self, sink: &mut Sink, text: &str) -> Result<(), Errno> {
        match sink {
            Sink::Cgroup(file) => file.write(text).map(drop).map_err(|e| e.errno),
            Sink::Proc(file) => self.sim.procfs().write(file, text),
        }
    }

    /// `memcg sh: line N: ` (bash's prefix for its own messages).
    fn prefix(&self) -> String {
        match self.line {
            Some(n) => format!("memcg sh: line {n}: "),
            None => "memcg sh: ".to_owned(),
        }
    }

    fn report(&mut self, message: &str) {
        if message.is_empty() || self.quiet_errors {
            return;
        }
        if self.errors_to_output {
            match &mut self.output {
                Output::Discard => {}
                Output::Capture(buf) => {
                    buf.push_str(message);
                    buf.push('\n');
                }
                Output::Stdout => {
                    let _ = writeln!(self.out, "{message}");
                }
                Output::Stderr => {
                    let _ = writeln!(self.err, "{message}");
                }
            }
            return;
        }
        let _ = writeln!(self.err, "{message}");
    }

    fn print(&mut self, text: &str) -> Result<(), Failure> {
        match &mut self.output {
            Output::Discard => Ok(()),
            Output::Capture(buf) => {
                buf.push_str(text);
                Ok(())
            }
            Output::Stdout => self.out.write_all(text.as_bytes()).map_err(|e| Failure {
                message: format!("{}write error: {e}", self.prefix()),
                status: 1,
            }),
            Output::Stderr => self.err.write_all(text.as_bytes()).map_err(|e| Failure {
                message: format!("{}write error: {e}", self.prefix()),
                status: 1,
            }),
        }
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
    Continue,
    Exit(i32),
}

/// Runs `memcg sh [FILE]`; returns the exit status.
pub fn main(
    file: Option<&std::path::Path>,
    config: SimConfig,
    cost: ReclaimCost,
) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    let mut shell = Shell::with_reclaim_cost(config, cost, &mut out, &mut err);
    let status = match file.filter(|p| *p != std::path::Path::new("-")) {
        Some(path) => match std::fs::read(path) {
            Ok(bytes) => shell.run_script(&String::from_utf8_lossy(&bytes)),
            Err(e) => {
                // As bash: the script's name and the error, status 127.
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => "No such file or directory".to_owned(),
                    _ => e.to_string(),
                };
                let _ = writeln!(shell.err, "memcg sh: {}: {why}", path.display());
                127
            }
        },
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
    fn a_kernel_style_script_runs() {
        let (out, err, status) = run("mkdir -p /sys/fs/cgroup/bench/test\n\
             echo +memory > /sys/fs/cgroup/cgroup.subtree_control\n\
             echo +memory > /sys/fs/cgroup/bench/cgroup.subtree_control\n\
             echo 64K > /sys/fs/cgroup/bench/memory.max\n\
             cd /bench\n\
             cat memory.max test/cgroup.controllers\n\
             charge test 4K\n\
             cat test/memory.current\n");
        assert_eq!(err, "");
        assert_eq!(status, 0);
        assert_eq!(out, "65536\nmemory\n4096\n");
    }

    #[test]
    fn grep_prints_matching_lines_with_greps_status() {
        let setup = "echo +memory > /cgroup.subtree_control\nmkdir /a /b\n";
        let (out, err, status) = run(&format!("{setup}grep zswpout /a/memory.stat\n"));
        assert_eq!((out.as_str(), err.as_str(), status), ("zswpout 0\n", "", 0));
        let (out, _, status) = run(&format!(
            "{setup}grep swap.max /a/memory.swap.max /b/memory.stat\necho $?\n"
        ));
        assert_eq!((out.as_str(), status), ("1\n", 0), "no line matched");
        let (out, _, _) = run(&format!("{setup}grep max /a/memory.max /b/memory.max\n"));
        assert_eq!(out, "/a/memory.max:max\n/b/memory.max:max\n");
        let (_, err, status) = run(&format!("{setup}grep x /a/nope\n"));
        assert_eq!(
            (err.as_str(), status),
            ("grep: /a/nope: No such file or directory\n", 2)
        );
        let (_, _, status) = run("grep x\n");
        assert_eq!(status, 2, "usage");
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
             swapon ram 1M\n\
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

    #[test]
    fn lists_status_and_set_e() {
        let (out, err, status) =
            run("mkdir /a; mkdir /b && echo made || echo not\nrmdir /nope || echo rc=$?\n");
        assert_eq!(out, "made\nrc=1\n");
        assert_eq!(
            err,
            "rmdir: failed to remove '/nope': No such file or directory\n"
        );
        assert_eq!(status, 0);
        // set -e spares a command tested by && or ||, not the last one.
        let (out, _, status) = run(
            "set -e\nrmdir /nope || echo handled\nrmdir /nope && echo no\necho reached\nrmdir /nope\necho not reached\n",
        );
        assert_eq!(out, "handled\nreached\n");
        assert_eq!(status, 1);
    }

    #[test]
    fn unsupported_syntax_is_a_syntax_error_that_ends_the_script() {
        for script in [
            "ls / | cat /cgroup.procs\necho after\n",
            "echo $(pwd)\necho after\n",
            "echo $HOME\necho after\n",
        ] {
            let (out, err, status) = run(script);
            assert_eq!((out.as_str(), status), ("", 2), "{script}");
            assert!(err.starts_with("memcg sh: line 1: syntax error"), "{err}");
        }
        let (out, err, status) = run("echo before\necho 'open\necho after\n");
        assert_eq!((out.as_str(), status), ("before\n", 2));
        assert_eq!(
            err,
            "memcg sh: line 2: unexpected EOF while looking for matching `''\n\
             memcg sh: line 2: syntax error: unexpected end of file\n"
        );
    }

    #[test]
    fn continuation_lines_and_descriptor_duplication() {
        let (out, err, status) =
            run("echo 'two\nlines' \\\n  and more\nrmdir /nope 2>&1\necho to-err >&2\n");
        assert_eq!(
            out,
            "two\nlines and more\nrmdir: failed to remove '/nope': No such file or directory\n"
        );
        assert_eq!(err, "to-err\n");
        assert_eq!(status, 0);
    }

    #[test]
    fn remount_sets_exactly_the_options_listed() {
        let script = "echo +memory > /cgroup.subtree_control\n\
             mkdir /p\n\
             echo +memory > /p/cgroup.subtree_control\n\
             mkdir /p/c\n\
             echo 4K > /p/c/memory.max\n\
             mount -o remount,memory_localevents none /sys/fs/cgroup\n\
             charge /p/c 8K\n\
             mount -o remount none /sys/fs/cgroup\n\
             charge /p/c 8K\n\
             cat /p/memory.events\n\
             mount -o remount,nomemory_localevents none /sys/fs/cgroup\n";
        let (out, err, status) = run(script);
        // The first failure stays on /p/c; only the second, after a remount
        // that cleared memory_localevents, reaches /p.
        assert!(out.contains("max 18\n") && out.contains("oom 1\n"), "{out}");
        assert!(
            err.ends_with("bad option \"nomemory_localevents\" (cgroup2: EINVAL)\n"),
            "{err}"
        );
        assert_eq!(status, 32);
    }

    #[test]
    fn exit_takes_bashs_arguments() {
        assert_eq!(run("exit 3\necho no\n").2, 3);
        assert_eq!(run("exit 256\n").2, 0);
        assert_eq!(run("exit -1\n").2, 255);
        assert_eq!(run("rmdir /nope\nexit\n").2, 1, "the last status");
        let (_, err, status) = run("exit abc\necho no\n");
        assert_eq!(status, 2);
        assert_eq!(
            err,
            "memcg sh: line 1: exit: abc: numeric argument required\n"
        );
    }

    #[test]
    fn invalid_utf8_on_stdin_is_read_and_reported() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut input: &[u8] = b"ls /cgroup.procs\n\xff\nmkdir /zzz\nexit 5\n";
        let status =
            Shell::new(SimConfig::default(), &mut out, &mut err).run_interactive(&mut input, false);
        assert_eq!(status, 5);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "memcg sh: line 2: \u{fffd}: command not found\n"
        );
    }

    #[test]
    fn any_command_can_write_a_file_and_open_errors_come_first() {
        let (out, err, _) = run("echo +memory > /cgroup.subtree_control\n\
             mkdir /a\n\
             echo 2M > /a/memory.max\n\
             cat /a/memory.max > /a/memory.high\n\
             cat /a/memory.high\n\
             echo -n \"\" > /a/memory.max\n\
             cat /a/memory.max\n\
             echo 1 > /a/memory.current\n\
             echo 1 > /memory.max\n\
             echo x > /a/memory.max\n\
             cat /proc/meminfo > /a/memory.high\n");
        assert_eq!(out, "2097152\n2097152\n", "echo -n '' writes nothing");
        assert_eq!(
            err,
            "memcg sh: line 8: echo: write error: Invalid argument\n\
             memcg sh: line 9: /memory.max: Permission denied\n\
             memcg sh: line 10: echo: write error: Invalid argument\n\
             cat: write error: Invalid argument\n"
        );
    }

    #[test]
    fn swapon_priorities_and_proc_files() {
        let (out, err, status) = run(
            "swapon ram 1M\nswapon -p 5 ram 1M\nswapon ram 1M\nswapoff /dev/ram0\nswapon ram 1M\ncat /proc/swaps\nswapon -p 40000 ram 1M\n",
        );
        assert_eq!(
            err,
            "memcg sh: line 7: swapon: usage: swapon [[-p PRIO] ram SIZE | [-p PRIO] file PATH SIZE]\n"
        );
        assert_eq!(status, 2);
        let prios: Vec<(&str, &str)> = out
            .lines()
            .skip(1)
            .map(|l| (l.split(' ').next().unwrap(), l.rsplit('\t').next().unwrap()))
            .collect();
        // In type order: ram3 reused ram0's type 0; ram2 moved up to -2
        // when ram0 went, and ram3 got the next default, -3.
        assert_eq!(
            prios,
            [("/dev/ram3", "-3"), ("/dev/ram1", "5"), ("/dev/ram2", "-2")]
        );
        let (out, _, _) = run("cat /proc/meminfo\n");
        assert!(out.starts_with("MemTotal:"), "{out}");
        assert!(out.contains("\nSwapTotal:             0 kB\n"), "{out}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse::parse(&text);
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
