//! `memcg bench fs`: what a `--fs` filesystem costs, in one run: each
//! operation through the FUSE mount (system calls from this process,
//! answered by the server's threads), the same system calls on the host's
//! tmpfs (`/dev/shm`), and the simulator's own calls in process
//! (`memcg::fs::Superblock` and `File`).
//!
//! | operation       | one operation                                   |
//! |-----------------|-------------------------------------------------|
//! | `create-unlink` | `open(O_CREAT\|O_EXCL)`, `close`, `unlink`      |
//! | `stat`          | `stat` of a file                                |
//! | `rename`        | `rename` of a file (back and forth)             |
//! | `mkdir-rmdir`   | `mkdir` + `rmdir`                               |
//! | `write-4k`      | a 4 KiB `pwrite`, sequential through a file     |
//! | `read-4k`       | a 4 KiB `pread`, sequential, of cached pages    |
//! | `write-1m`      | a 1 MiB `pwrite`, sequential                    |
//! | `read-1m`       | a 1 MiB `pread`, sequential                     |
//!
//! Each thread works in its own directory and file. Needs root and
//! `/dev/fuse` (the mount is made in a temporary directory and undone at
//! the end).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, ensure};
use clap::Args;
use memcg::fs::{Owner, ROOT_INO, RenameMode, Superblock};
use memcg::memcontrol::MemCgroup;
use memcg_sim::{Sim, SimConfig};
use serde::Serialize;

use super::{Benchmark, CommonArgs, Interleaved, Runs, Sample, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// Bytes of each thread's file.
const FILE_BYTES: usize = 16 << 20;

/// Flags of `memcg bench fs`.
#[derive(Debug, Clone, Args)]
pub struct FsArgs {
    /// Operations per thread per round (a tenth of them for the 1 MiB
    /// reads and writes); a run repeats rounds until it lasts
    /// `--min-phase-ms` [default: 20000; --quick 2000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl FsArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            ops: smoke.then_some(100),
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &FsArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// The operations measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Op {
    CreateUnlink,
    Stat,
    Rename,
    MkdirRmdir,
    Write4k,
    Read4k,
    Write1m,
    Read1m,
}

impl Op {
    const ALL: [Op; 8] = [
        Op::CreateUnlink,
        Op::Stat,
        Op::Rename,
        Op::MkdirRmdir,
        Op::Write4k,
        Op::Read4k,
        Op::Write1m,
        Op::Read1m,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::CreateUnlink => "create-unlink",
            Op::Stat => "stat",
            Op::Rename => "rename",
            Op::MkdirRmdir => "mkdir-rmdir",
            Op::Write4k => "write-4k",
            Op::Read4k => "read-4k",
            Op::Write1m => "write-1m",
            Op::Read1m => "read-1m",
        }
    }

    /// Bytes each operation moves (0 for metadata).
    fn bytes(self) -> usize {
        match self {
            Op::Write4k | Op::Read4k => 4 << 10,
            Op::Write1m | Op::Read1m => 1 << 20,
            _ => 0,
        }
    }

    /// Operations per round, of `ops` (1 MiB ones are a tenth).
    fn ops(self, ops: u64) -> u64 {
        if self.bytes() > (64 << 10) {
            (ops / 10).max(1)
        } else {
            ops
        }
    }
}

/// Which path an operation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Way {
    /// System calls on the FUSE mount.
    Mount,
    /// The same system calls on the host's tmpfs.
    Tmpfs,
    /// The library's calls in this process.
    InProcess,
}

impl Way {
    const ALL: [Way; 3] = [Way::Mount, Way::Tmpfs, Way::InProcess];

    fn name(self) -> &'static str {
        match self {
            Way::Mount => "fuse mount",
            Way::Tmpfs => "host tmpfs",
            Way::InProcess => "in process",
        }
    }
}

/// The machine under test, mounted, with each thread's directory and file
/// on it and on tmpfs.
struct Bench {
    sim: Arc<Sim>,
    sb: Arc<Superblock>,
    memcg: Arc<MemCgroup>,
    mount: crate::fuse::Mounted,
    dir: tempfile::TempDir,
    shm: tempfile::TempDir,
    threads: usize,
}

impl Bench {
    fn new(threads: usize) -> anyhow::Result<Self> {
        let sim = Arc::new(Sim::new(SimConfig {
            mem_bytes: 1 << 30,
            first_pid: memcg_sim::PID_MAX_LIMIT,
            ..SimConfig::default()
        }));
        let size_bytes = (FILE_BYTES * threads) as u64 + (64 << 20);
        sim.machine()
            .mount("/data", memcg::fs::FsSource::Ram { size_bytes })?;
        let sb = sim
            .machine()
            .mounts()
            .into_iter()
            .find(|(dir, _)| dir == "/data")
            .map(|(_, sb)| sb)
            .context("the bench filesystem")?;
        let memcg = sim.fs().memcg("/")?;
        let shm = tempfile::Builder::new()
            .prefix("memcg-bench-")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())?;
        let bytes = pattern();
        for t in 0..threads {
            let d = sb.mkdir_at(ROOT_INO, &format!("t{t}"), Owner::root(0o755))?;
            sb.create_at(&memcg, d.ino, "f", Owner::root(0o644), true)?
                .write_at(&memcg, 0, bytes)?;
            sb.create_at(&memcg, d.ino, "s", Owner::root(0o644), true)?;
            let host = shm.path().join(format!("t{t}"));
            std::fs::create_dir(&host)?;
            std::fs::write(host.join("f"), bytes)?;
            std::fs::write(host.join("s"), b"")?;
        }
        let dir = tempfile::tempdir()?;
        let mount = crate::fuse::mount(Arc::clone(&sim), dir.path())?;
        Ok(Self {
            sim,
            sb,
            memcg,
            mount,
            dir,
            shm,
            threads,
        })
    }

    /// `ops` operations of `op` by `way` in thread `t`'s directory.
    fn run(&self, op: Op, way: Way, t: usize, ops: u64) -> anyhow::Result<()> {
        match way {
            Way::Mount => run_on_dir(&self.dir.path().join(format!("data/t{t}")), op, ops),
            Way::Tmpfs => run_on_dir(&self.shm.path().join(format!("t{t}")), op, ops),
            Way::InProcess => self.run_in_process(op, t, ops),
        }
    }

    /// `op` as the library's calls in this process.
    fn run_in_process(&self, op: Op, t: usize, ops: u64) -> anyhow::Result<()> {
        let (sb, memcg) = (&self.sb, &self.memcg);
        let d = sb.lookup_at(ROOT_INO, &format!("t{t}"))?.ino;
        let owner = Owner::root(0o644);
        match op {
            Op::CreateUnlink => {
                for _ in 0..ops {
                    drop(sb.create_at(memcg, d, "c", owner, true)?);
                    sb.unlink_at(d, "c")?;
                }
            }
            Op::Stat => {
                for _ in 0..ops {
                    ensure!(sb.lookup_at(d, "f")?.size_bytes == FILE_BYTES as u64);
                }
            }
            Op::Rename => {
                for i in 0..ops {
                    let (from, to) = if i % 2 == 0 { ("s", "r") } else { ("r", "s") };
                    sb.rename_at(d, from, d, to, RenameMode::Replace)?;
                }
                if ops % 2 == 1 {
                    sb.rename_at(d, "r", d, "s", RenameMode::Replace)?;
                }
            }
            Op::MkdirRmdir => {
                for _ in 0..ops {
                    sb.mkdir_at(d, "m", Owner::root(0o755))?;
                    sb.rmdir_at(d, "m")?;
                }
            }
            Op::Write4k | Op::Write1m | Op::Read4k | Op::Read1m => {
                let ino = sb.lookup_at(d, "f")?.ino;
                let file = sb.open_ino(memcg, ino)?;
                io_loop(
                    op,
                    ops,
                    |buf, at| Ok(file.read_at(memcg, at, buf)?),
                    |buf, at| Ok(file.write_at(memcg, at, buf)?),
                )?;
            }
        }
        Ok(())
    }

    /// Checks the server is still up, then unmounts.
    fn finish(self) -> anyhow::Result<()> {
        ensure!(!self.mount.is_finished(), "the FUSE server stopped early");
        drop(self.mount);
        // What the in-process way left is what the mount's left.
        for t in 0..self.threads {
            let d = self.sb.lookup_at(ROOT_INO, &format!("t{t}"))?.ino;
            let names: Vec<String> = self.sb.readdir(d)?.into_iter().map(|e| e.name).collect();
            ensure!(names == ["f", "s"], "t{t} holds {names:?}");
        }
        drop(self.sim);
        Ok(())
    }
}

/// `op` by system calls in directory `dir` (the mount's or tmpfs's).
fn run_on_dir(dir: &Path, op: Op, ops: u64) -> anyhow::Result<()> {
    let at = |name: &str| -> PathBuf { dir.join(name) };
    match op {
        Op::CreateUnlink => {
            let c = at("c");
            for _ in 0..ops {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&c)?;
                std::fs::remove_file(&c)?;
            }
        }
        Op::Stat => {
            let f = at("f");
            for _ in 0..ops {
                ensure!(std::fs::metadata(&f)?.len() == FILE_BYTES as u64);
            }
        }
        Op::Rename => {
            let (s, r) = (at("s"), at("r"));
            for i in 0..ops {
                let (from, to) = if i % 2 == 0 { (&s, &r) } else { (&r, &s) };
                std::fs::rename(from, to)?;
            }
            if ops % 2 == 1 {
                std::fs::rename(&r, &s)?;
            }
        }
        Op::MkdirRmdir => {
            let m = at("m");
            for _ in 0..ops {
                std::fs::create_dir(&m)?;
                std::fs::remove_dir(&m)?;
            }
        }
        Op::Write4k | Op::Write1m | Op::Read4k | Op::Read1m => {
            let write = matches!(op, Op::Write4k | Op::Write1m);
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(write)
                .open(at("f"))?;
            io_loop(
                op,
                ops,
                |buf, at| Ok(file.read_at(buf, at)?),
                |buf, at| Ok(file.write_all_at(buf, at)?),
            )?;
        }
    }
    Ok(())
}

/// The bytes every file holds (each write writes them again).
fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| (0..FILE_BYTES).map(|i| (i % 251) as u8).collect())
}

/// `ops` reads (`read_at`) or writes (`write_at`) of `op.bytes()`,
/// walking the file; what is read is checked to be what was written.
fn io_loop(
    op: Op,
    ops: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> anyhow::Result<usize>,
    mut write_at: impl FnMut(&[u8], u64) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let bs = op.bytes();
    let slots = (FILE_BYTES / bs) as u64;
    let mut buf = vec![0u8; bs];
    for i in 0..ops {
        let at = (i % slots) * bs as u64;
        if matches!(op, Op::Write4k | Op::Write1m) {
            write_at(&pattern()[at as usize..][..bs], at)?;
            continue;
        }
        let n = read_at(&mut buf, at)?;
        ensure!(n == bs, "short {}: {n} bytes at {at}", op.name());
        ensure!(buf[0] == (at % 251) as u8, "byte at {at} is {}", buf[0]);
    }
    Ok(())
}

/// Settings of one invocation.
#[derive(Debug, Clone, Serialize)]
struct Scale {
    ops_per_thread: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
}

struct Plan {
    scale: Scale,
    /// `(op, threads)` per configuration.
    configs: Vec<(Op, usize)>,
}

impl Plan {
    fn of(args: &FsArgs) -> anyhow::Result<Self> {
        let ops_per_thread = args.common.scaled(args.ops, 2_000, 20_000);
        args.common.validate(&[("--ops", ops_per_thread)])?;
        ensure!(
            super::fuse::usable(),
            "memcg bench fs mounts a FUSE filesystem: it needs root and /dev/fuse"
        );
        let configs: Vec<(Op, usize)> = Op::ALL
            .iter()
            .flat_map(|&op| args.common.threads.iter().map(move |&t| (op, t)))
            .collect();
        Ok(Self {
            scale: Scale {
                ops_per_thread,
                reps: args.common.reps(),
                min_phase_ms: args.common.min_phase_ms(),
                threads: args.common.threads.clone(),
            },
            configs,
        })
    }
}

#[derive(Debug, Serialize)]
struct ResultRow {
    op: Op,
    way: Way,
    threads: usize,
    /// Median thousands of operations per second, all threads together.
    kops: f64,
    stdev: f64,
    samples: Vec<f64>,
    /// Median over the in-process median.
    vs_in_process: f64,
    /// Median over the host tmpfs's median.
    vs_tmpfs: f64,
    #[serde(flatten)]
    phases: PhaseFacts,
}

type Report = super::Report<Scale, ResultRow>;

impl Benchmark for Plan {
    const NAME: &'static str = "fs";
    type Samples = Runs<Sample>;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} operations per thread per round (1 MiB ones: a tenth), median of {} \
             interleaved reps of phases >= {} ms, thousands of operations per second (all \
             threads)",
            self.scale.ops_per_thread, self.scale.reps, self.scale.min_phase_ms
        )
    }

    fn measure(&self) -> anyhow::Result<Runs<Sample>> {
        let most_threads = self.scale.threads.iter().copied().max().unwrap_or(1);
        let bench = Bench::new(most_threads)?;
        let arms = vec![Way::ALL.len(); self.configs.len()];
        let plan = Interleaved::new(self.scale.reps, self.scale.min_phase_ms, &arms, true);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let configs = &self.configs;
        let name = |c: usize, a: usize| {
            let (op, threads) = configs[c];
            format!("{} {} x{threads}", op.name(), Way::ALL[a].name())
        };
        let runs = plan.run(&mut progress, name, |c, a, rounds| {
            let (op, threads) = configs[c];
            let ops = op.ops(self.scale.ops_per_thread) * rounds;
            let timed = timed_threads(threads, |t| bench.run(op, Way::ALL[a], t, ops))?;
            Ok(Sample::new(
                threads as f64 * ops as f64 / timed.secs / 1e3,
                &timed,
            ))
        })?;
        progress.finish();
        bench.finish()?;
        Ok(runs)
    }

    fn summarise(&self, head: ReportHead, runs: Runs<Sample>) -> Report {
        let mut results = Vec::new();
        for (c, &(op, threads)) in self.configs.iter().enumerate() {
            let median_of = |way| {
                let a = Way::ALL.iter().position(|&w| w == way).unwrap_or(0);
                Stats::of(&runs.values(c, a)).median
            };
            let (base, tmpfs) = (median_of(Way::InProcess), median_of(Way::Tmpfs));
            for (a, &way) in Way::ALL.iter().enumerate() {
                let samples = runs.values(c, a);
                let st = Stats::of(&samples);
                results.push(ResultRow {
                    op,
                    way,
                    threads,
                    kops: st.median,
                    stdev: st.stdev,
                    samples,
                    vs_in_process: st.median / base,
                    vs_tmpfs: st.median / tmpfs,
                    phases: runs.facts(c, a),
                });
            }
        }
        Report {
            head,
            config: self.scale.clone(),
            results,
        }
    }

    fn print_tables(report: &Report) {
        let rows = report.results.iter().map(|r| {
            let mib = match r.op.bytes() {
                0 => String::new(),
                bytes => format!("{:.0}", r.kops * 1e3 * bytes as f64 / (1 << 20) as f64),
            };
            vec![
                r.op.name().to_owned(),
                r.threads.to_string(),
                r.way.name().to_owned(),
                format!("{:.1}", r.kops),
                report::fmt_stdev(r.stdev, report.config.reps, 1),
                mib,
                format!("{:.1}", r.threads as f64 * 1e3 / r.kops),
                report::fmt_ratio(r.vs_in_process),
                report::fmt_ratio(r.vs_tmpfs),
                r.phases.cpu_cell(),
            ]
        });
        report::print_table(
            &[
                "operation",
                "threads",
                "way",
                "kops/s (all threads)",
                "stdev",
                "MiB/s",
                "µs/op",
                "vs in process",
                "vs host tmpfs",
                "CPU",
            ],
            rows,
        );
        let facts = report.results.iter().map(|r| &r.phases);
        report::print_method_note(facts, report.config.min_phase_ms as f64);
        println!(
            "CPU: the calling threads' share only; the FUSE server's threads do the work of a \
             mounted operation.\n"
        );
    }

    /// Microseconds per operation on each thread against threads, one
    /// panel per operation.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = Op::ALL.iter().map(|&op| Panel {
            y_label: None,
            title: op.name().to_owned(),
            series: Way::ALL
                .iter()
                .map(|&way| {
                    let rows = report.results.iter().filter(|r| r.op == op && r.way == way);
                    let us = |r: &ResultRow| r.threads as f64 * 1e3 / r.kops;
                    let spread = |r: &ResultRow| us(r) * r.stdev / r.kops;
                    Series::by_threads(way.name(), rows.map(|r| (r.threads, us(r), spread(r))))
                })
                .collect(),
        });
        report::chart_by_threads(
            "a --fs filesystem over FUSE vs the host's tmpfs vs in process",
            "µs per operation, on each thread",
            panels,
        )
    }
}
