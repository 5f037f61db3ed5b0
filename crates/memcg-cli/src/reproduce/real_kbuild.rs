//! Seed 000's shape with real processes: `make -jN` of a real C project
//! (Debian's zlib 1.2.13 source, fetched by `tests/realbuild/fetch.sh`)
//! under `memcg run`, once per swap_cgroup design, beside the simulated
//! kernel build.
//!
//! Each build runs `memcg run --kernel K --swap-cgroup D --mem 512M --swap
//! 256M --fs DIR=ram:64M -- bash build.sh TARBALL DIR MAX REFERENCE JOBS`:
//! the tree is unpacked onto a RAM filesystem, configured and built in a
//! cgroup whose memory.max is `MAX_PER_JOB` per job, with every process's
//! anonymous memory under the simulator (`--anon on`, the default). Wall
//! time is measured around `memcg run`; CPU time is the user and system
//! time of `memcg run` and everything it waited for (`RUSAGE_CHILDREN`,
//! before and after). Swap counters come from the build cgroup's
//! memory.stat and memory.events at the end; every output is compared
//! byte for byte with a host build of the same tree.
//!
//! The seed's 16M per job is too generous for zlib: at 32M for `-j2` the
//! build's reclaim takes only page cache (11 `max` events, no swap-out),
//! so the cgroup gets 8M per job, where anonymous memory swaps.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use memcg::swap_cgroup::Design;
use serde::Serialize;

use crate::report;

/// The build script `memcg run` runs (the real_build test's).
const BUILD_SH: &str = include_str!("../../tests/realbuild/build.sh");
/// The zlib tarball `tests/realbuild/fetch.sh` leaves in the cache.
const TARBALL: &str = "zlib_1.2.13.dfsg.orig.tar.bz2";
/// memory.max per job (the seed's is 16M; see the module docs).
pub(super) const MAX_PER_JOB: u64 = 8 << 20;
/// The simulated machine's memory, swap and RAM filesystem.
const MEM: &str = "512M";
const SWAP: &str = "256M";
const FS_SIZE: &str = "64M";
/// A build that takes longer is killed and reported as hung.
const TIMEOUT: Duration = Duration::from_secs(600);
/// The outputs build.sh compares.
const OUTPUTS: [&str; 4] = ["libz.a", "libz.so.1.2.13", "example", "minigzip"];
/// Why the section is absent.
pub(super) const SKIPPED: &str =
    "skipped: needs root, /dev/fuse, and the zlib source (tests/realbuild/fetch.sh)";

/// One design's build.
#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub(super) swap_cgroup: String,
    pub(super) wall_secs: f64,
    pub(super) cpu_secs: f64,
    /// memory.stat's, where the kernel's profile has them.
    pub(super) pswpin: Option<u64>,
    pub(super) pswpout: Option<u64>,
    pub(super) zswpin: Option<u64>,
    pub(super) zswpout: Option<u64>,
    pub(super) max_events: Option<u64>,
    pub(super) oom_kill: Option<u64>,
    /// make's exit status.
    pub(super) make_status: Option<i32>,
    /// Every output compared and none differs.
    pub(super) identical: bool,
    /// The outputs that differ from the host's.
    pub(super) differs: Vec<String>,
    /// What went wrong, when the build did not finish as it should.
    pub(super) error: Option<String>,
}

/// `real_kbuild.json`: the table, or why there is none.
#[derive(Debug, Serialize)]
pub(super) struct RealKbuild {
    /// Set when the section was skipped, saying why.
    pub(super) note: Option<String>,
    pub(super) project: &'static str,
    pub(super) jobs: usize,
    pub(super) memory_max_bytes: u64,
    pub(super) kernel: String,
    /// The command of each build, `D` standing for the design.
    pub(super) command: String,
    pub(super) rows: Vec<Row>,
}

/// The cached tarball, when the machine can run the builds.
fn available(cache: &Path) -> Option<PathBuf> {
    // SAFETY: `geteuid` has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tarball = cache.join(TARBALL);
    (root && Path::new("/dev/fuse").exists() && tarball.is_file()).then_some(tarball)
}

/// `tests/realbuild/fetch.sh`'s cache: ~/.cache/memcg-realbuild.
pub(super) fn default_cache() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/memcg-realbuild")
}

/// Builds zlib once per design in `designs` (skipped, saying why, where
/// the machine cannot), writing `real_kbuild.json` and `.txt` in `out`.
pub(super) fn table(
    cache: &Path,
    designs: &[Design],
    jobs: usize,
    kernel: memcg::profile::KernelVersion,
    out: &Path,
) -> anyhow::Result<RealKbuild> {
    let max = MAX_PER_JOB * jobs as u64;
    let mut table = RealKbuild {
        note: None,
        project: "zlib 1.2.13 (Debian's 1:1.2.13.dfsg-1 source)",
        jobs,
        memory_max_bytes: max,
        kernel: kernel.to_string(),
        command: format!(
            "memcg run --kernel {kernel} --swap-cgroup D --mem {MEM} --swap {SWAP} \
             --fs DIR=ram:{FS_SIZE} -- bash build.sh TARBALL DIR {}M REFERENCE {jobs}",
            max >> 20
        ),
        rows: Vec::new(),
    };
    match available(cache) {
        None => table.note = Some(SKIPPED.to_owned()),
        Some(tarball) => {
            let work = tempfile::tempdir()?;
            let reference = host_build(&tarball, work.path(), jobs)?;
            let script = work.path().join("build.sh");
            std::fs::write(&script, BUILD_SH)?;
            let build = Build {
                tarball: &tarball,
                script: &script,
                reference: &reference,
                max,
                jobs,
                kernel,
            };
            for &design in designs {
                eprintln!("reproduce: real build of zlib, make -j{jobs}, swap_cgroup {design}");
                table.rows.push(build.run(design)?);
            }
        }
    }
    report::write_json(&out.join("real_kbuild.json"), &table)?;
    std::fs::write(out.join("real_kbuild.txt"), text(&table))?;
    Ok(table)
}

/// The host's build of the tarball under `dir`: the reference tree.
fn host_build(tarball: &Path, dir: &Path, jobs: usize) -> anyhow::Result<PathBuf> {
    let host = dir.join("host");
    std::fs::create_dir(&host)?;
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "tar xjf \"$1\" && cd zlib-* && ./configure > /dev/null && make -j{jobs} > /dev/null"
        ))
        .arg("host-build")
        .arg(tarball)
        .current_dir(&host)
        .env("LC_ALL", "C")
        .status()
        .context("running the host build")?;
    anyhow::ensure!(status.success(), "the host build of zlib failed: {status}");
    let tree = std::fs::read_dir(&host)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .context("the host build left no tree")?;
    Ok(tree)
}

/// What every design's build shares.
struct Build<'a> {
    tarball: &'a Path,
    script: &'a Path,
    reference: &'a Path,
    max: u64,
    jobs: usize,
    kernel: memcg::profile::KernelVersion,
}

impl Build<'_> {
    /// One build under `memcg run` with `design`.
    fn run(&self, design: Design) -> anyhow::Result<Row> {
        let fs = tempfile::tempdir()?;
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.env("LC_ALL", "C")
            .arg("run")
            .args(["--kernel", &self.kernel.to_string()])
            .args(["--swap-cgroup", &design.to_string()])
            .args(["--mem", MEM, "--swap", SWAP])
            .arg("--fs")
            .arg(format!("{}=ram:{FS_SIZE}", fs.path().display()))
            .arg("--")
            .arg("bash")
            .arg(self.script)
            .arg(self.tarball)
            .arg(fs.path())
            .arg(format!("{}M", self.max >> 20))
            .arg(self.reference)
            .arg(self.jobs.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let cpu_before = children_cpu_secs();
        let start = Instant::now();
        let (status, stdout, stderr) = run_with_timeout(cmd, TIMEOUT)?;
        let wall_secs = start.elapsed().as_secs_f64();
        let cpu_secs = children_cpu_secs() - cpu_before;
        let mut row = parse(design, &stdout);
        row.wall_secs = wall_secs;
        row.cpu_secs = cpu_secs;
        row.error = match status {
            None => Some(format!("hung: killed after {} s", TIMEOUT.as_secs())),
            Some(s) if !s.success() => Some(format!("memcg run: {s}: {}", tail(&stderr))),
            Some(_) if row.make_status != Some(0) => Some(format!("make failed: {}", why(&stdout))),
            Some(_) => None,
        };
        Ok(row)
    }
}

/// The user and system time of every child waited for so far, s.
fn children_cpu_secs() -> f64 {
    // SAFETY: an all-zero `rusage` is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs `cmd`, killing it after `limit`: its status (none when killed),
/// stdout and stderr.
fn run_with_timeout(
    mut cmd: Command,
    limit: Duration,
) -> anyhow::Result<(Option<std::process::ExitStatus>, String, String)> {
    let mut child = cmd.spawn().context("starting memcg run")?;
    let pipes = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut text);
            }
            text
        })
    };
    let out = pipes(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = pipes(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let join = |h: std::thread::JoinHandle<String>| h.join().unwrap_or_default();
    Ok((status, join(out), join(err)))
}

/// The last lines of `text`, on one line.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}

/// Why make failed: the compilers' errors in build.sh's `log:` lines.
fn why(stdout: &str) -> String {
    let errors: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("log: "))
        .filter(|l| l.contains("error") || l.contains("Killed") || l.contains("signal"))
        .take(4)
        .collect();
    if errors.is_empty() {
        tail(stdout)
    } else {
        errors.join(" | ")
    }
}

/// build.sh's `key value` lines as a row (times left at zero).
fn parse(design: Design, stdout: &str) -> Row {
    let value = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let differs: Vec<String> = stdout
        .lines()
        .filter_map(|l| Some(l.strip_prefix("differs ")?.to_owned()))
        .collect();
    let compared = stdout.lines().any(|l| l == "compared");
    let make_status = value("make").and_then(|s: u64| i32::try_from(s).ok());
    Row {
        swap_cgroup: design.to_string(),
        wall_secs: 0.0,
        cpu_secs: 0.0,
        pswpin: value("pswpin_after"),
        pswpout: value("pswpout_after"),
        zswpin: value("zswpin_after"),
        zswpout: value("zswpout_after"),
        max_events: value("max_events"),
        oom_kill: value("oom_kill"),
        make_status,
        identical: compared && make_status == Some(0) && differs.is_empty(),
        differs,
        error: None,
    }
}

fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "–".to_owned(), |n| n.to_string())
}

/// The table's rows in markdown (also the text file's body).
fn rows(table: &RealKbuild) -> String {
    let mut md = String::from(
        "| swap_cgroup | wall s | CPU s | swap-ins | swap-outs | zswap in/out | max events | oom_kill | outputs identical |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &table.rows {
        let identical = if r.identical {
            format!("yes ({} outputs, every .o)", OUTPUTS.len())
        } else {
            format!("**no**: {}", r.differs.join(", "))
        };
        md.push_str(&format!(
            "| {} | {:.2} | {:.2} | {} | {} | {}/{} | {} | {} | {identical} |\n",
            r.swap_cgroup,
            r.wall_secs,
            r.cpu_secs,
            count(r.pswpin),
            count(r.pswpout),
            count(r.zswpin),
            count(r.zswpout),
            count(r.max_events),
            count(r.oom_kill),
        ));
    }
    md
}

/// `real_kbuild.txt`: the command and the table.
fn text(table: &RealKbuild) -> String {
    match &table.note {
        Some(note) => format!("real build: {note}\n"),
        None => format!("{}\n\n{}{}", table.command, rows(table), errors(table)),
    }
}

fn errors(table: &RealKbuild) -> String {
    table
        .rows
        .iter()
        .filter_map(|r| Some(format!("\n{}: {}\n", r.swap_cgroup, r.error.as_ref()?)))
        .collect()
}

/// The report's section, beside the simulated kernel build.
pub(super) fn markdown(table: &RealKbuild) -> String {
    let mut md = String::from("### The same shape with real processes: `make` of zlib\n\n");
    if let Some(note) = &table.note {
        md.push_str(&format!("Real build {note}.\n\n"));
        return md;
    }
    md.push_str(&format!(
        "`make -j{}` of {}, its cwd on a simulated RAM filesystem, in a cgroup with \
         memory.max {}M ({}M per job: the seed's 16M per job leaves zlib's anonymous \
         memory unswapped) and {SWAP} of RAM swap, every process's heap and anonymous \
         mappings charged, reclaimed, swapped and swapped back by the simulator \
         (`memcg run --anon on`); kernel profile {}. Counters are the build cgroup's \
         memory.stat (pswpin, pswpout, zswpin, zswpout) and memory.events at the end. \
         Wall and CPU (user + sys of `memcg run` and its children) are **measured** on \
         this machine, one build per design; the outputs are compared byte for byte \
         with a host build. Each build:\n\n    {}\n\n",
        table.jobs,
        table.project,
        table.memory_max_bytes >> 20,
        MAX_PER_JOB >> 20,
        table.kernel,
        table.command
    ));
    md.push_str(&rows(table));
    md.push_str(&errors(table));
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_sh_lines_make_a_row() {
        let out = "file_before 1\nmake 0\npswpin_after 5\npswpout_after 9\n\
                   max_events 3\noom_kill 0\ncompared\n";
        let row = parse(Design::Memcg, out);
        assert_eq!(
            (row.pswpin, row.pswpout, row.max_events),
            (Some(5), Some(9), Some(3))
        );
        assert_eq!(row.zswpout, None);
        assert!(row.identical);
        let row = parse(Design::Locked, "make 2\ndiffers libz.a\ncompared\n");
        assert!(!row.identical);
        assert_eq!(row.differs, ["libz.a"]);
    }

    #[test]
    fn skipped_without_the_source() {
        let out = tempfile::tempdir().unwrap();
        let missing = out.path().join("no-cache");
        let table = table(
            &missing,
            &[Design::Memcg],
            2,
            memcg::profile::KernelVersion::default(),
            out.path(),
        )
        .unwrap();
        assert_eq!(table.note.as_deref(), Some(SKIPPED));
        assert!(markdown(&table).contains(SKIPPED));
        assert!(out.path().join("real_kbuild.json").exists());
    }
}
