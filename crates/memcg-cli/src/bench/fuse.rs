//! `memcg bench fuse`: what serving the simulator over FUSE costs, in one
//! run: each operation through the mount (system calls from this process,
//! answered by the FUSE server's threads) against the same operation in
//! process, and, where the host has one, against the kernel's own file.
//!
//! | operation     | through the mount                   | in process                 | kernel (the host's)            |
//! |---------------|-------------------------------------|----------------------------|--------------------------------|
//! | `cat-current` | open, read, close `memory.current`  | `CgroupFs::read`           | `/proc/sys/vm/swappiness`      |
//! | `poll-current`| `pread` at 0 of an open `memory.current` (a monitor's loop) | `OpenFile::read` | the same on `/proc/sys/vm/swappiness` |
//! | `echo-high`   | open, write, close `memory.high`    | `CgroupFs::write`          | —                              |
//! | `mkdir-rmdir` | `mkdir` + `rmdir` of a cgroup       | `CgroupFs::mkdir` + `rmdir`| —                              |
//! | `read-128k`   | 128 KiB `pread` of a cached `--fs` file | `File::read_at`        | the same bytes from `/dev/shm` |
//!
//! Each thread works on its own cgroup and file. Needs root and
//! `/dev/fuse` (the mount is made in a temporary directory and undone at
//! the end).

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use clap::Args;
use memcg_sim::{Sim, SimConfig};
use serde::Serialize;

use super::{Benchmark, CommonArgs, Interleaved, Runs, Sample, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// Bytes of one file read.
const READ_BYTES: usize = 128 << 10;
/// Bytes of each thread's file.
const FILE_BYTES: usize = 4 << 20;

/// Flags of `memcg bench fuse`.
#[derive(Debug, Clone, Args)]
pub struct FuseArgs {
    /// Operations per thread per round; a run repeats rounds until it lasts
    /// `--min-phase-ms` [default: 20000; --quick 2000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl FuseArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            ops: smoke.then_some(100),
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &FuseArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// Whether this process can mount FUSE filesystems (the suite skips the
/// benchmark otherwise).
pub fn usable() -> bool {
    // SAFETY: `geteuid` has no preconditions.
    (unsafe { libc::geteuid() } == 0) && Path::new("/dev/fuse").exists()
}

/// The operations measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Op {
    CatCurrent,
    PollCurrent,
    EchoHigh,
    MkdirRmdir,
    Read128k,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::CatCurrent,
        Op::PollCurrent,
        Op::EchoHigh,
        Op::MkdirRmdir,
        Op::Read128k,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::CatCurrent => "cat-current",
            Op::PollCurrent => "poll-current",
            Op::EchoHigh => "echo-high",
            Op::MkdirRmdir => "mkdir-rmdir",
            Op::Read128k => "read-128k",
        }
    }

    /// The paths it can take.
    fn ways(self) -> &'static [Way] {
        match self {
            Op::CatCurrent | Op::PollCurrent | Op::Read128k => {
                &[Way::Mount, Way::InProcess, Way::Kernel]
            }
            Op::EchoHigh | Op::MkdirRmdir => &[Way::Mount, Way::InProcess],
        }
    }
}

/// Which path an operation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Way {
    /// System calls on the FUSE mount.
    Mount,
    /// The library's calls in this process.
    InProcess,
    /// The host kernel's own file.
    Kernel,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Mount => "fuse mount",
            Way::InProcess => "in process",
            Way::Kernel => "host kernel",
        }
    }
}

/// The machine under test, mounted, with each thread's cgroup and file.
struct Bench {
    sim: Arc<Sim>,
    mount: crate::fuse::Mounted,
    dir: tempfile::TempDir,
    shm: tempfile::TempDir,
    threads: usize,
}

impl Bench {
    fn new(threads: usize) -> anyhow::Result<Self> {
        let sim = Arc::new(Sim::new(SimConfig {
            mem_bytes: 256 << 20,
            first_pid: memcg_sim::PID_MAX_LIMIT,
            ..SimConfig::default()
        }));
        sim.machine().mount(
            "/data",
            memcg::fs::FsSource::Ram {
                size_bytes: (FILE_BYTES * threads) as u64 + (16 << 20),
            },
        )?;
        sim.fs().write("/cgroup.subtree_control", "+memory")?;
        let shm = tempfile::Builder::new()
            .prefix("memcg-bench-")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())?;
        let bytes: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
        for t in 0..threads {
            sim.fs().mkdir(&format!("/t{t}"))?;
            sim.write_file("/", &format!("/data/f{t}"), &bytes)?;
            std::fs::write(shm.path().join(format!("f{t}")), &bytes)?;
        }
        let dir = tempfile::tempdir()?;
        let mount = crate::fuse::mount(Arc::clone(&sim), dir.path())?;
        Ok(Self {
            sim,
            mount,
            dir,
            shm,
            threads,
        })
    }

    fn on_mount(&self, path: &str) -> PathBuf {
        self.dir.path().join(path.trim_start_matches('/'))
    }

    /// `ops` operations of `op` by `way` on thread `t`'s cgroup and file.
    fn run(&self, op: Op, way: Way, t: usize, ops: u64) -> anyhow::Result<()> {
        match way {
            Way::Mount => self.run_on_mount(op, t, ops),
            Way::InProcess => self.run_in_process(op, t, ops),
            Way::Kernel => self.run_on_kernel(op, t, ops),
        }
    }

    /// `op` through the FUSE mount: system calls on its files.
    fn run_on_mount(&self, op: Op, t: usize, ops: u64) -> anyhow::Result<()> {
        let cg = format!("/t{t}");
        match op {
            Op::CatCurrent => {
                let path = self.on_mount(&format!("/sys/fs/cgroup{cg}/memory.current"));
                let mut buf = Vec::with_capacity(64);
                for _ in 0..ops {
                    buf.clear();
                    std::fs::File::open(&path)?.read_to_end(&mut buf)?;
                    ensure!(!buf.is_empty(), "memory.current read empty");
                }
            }
            Op::PollCurrent => {
                let path = self.on_mount(&format!("/sys/fs/cgroup{cg}/memory.current"));
                poll_loop(ops, &std::fs::File::open(path)?)?;
            }
            Op::EchoHigh => {
                let path = self.on_mount(&format!("/sys/fs/cgroup{cg}/memory.high"));
                for i in 0..ops {
                    let mut f = std::fs::OpenOptions::new().write(true).open(&path)?;
                    f.write_all(high_value(i).as_bytes())?;
                }
            }
            Op::MkdirRmdir => {
                let path = self.on_mount(&format!("/sys/fs/cgroup{cg}-d"));
                for _ in 0..ops {
                    std::fs::create_dir(&path)?;
                    std::fs::remove_dir(&path)?;
                }
            }
            Op::Read128k => {
                let file = std::fs::File::open(self.on_mount(&format!("/data/f{t}")))?;
                read_loop(ops, |buf, at| Ok(file.read_at(buf, at)?))?;
            }
        }
        Ok(())
    }

    /// `op` as the library's call in this process.
    fn run_in_process(&self, op: Op, t: usize, ops: u64) -> anyhow::Result<()> {
        let cg = format!("/t{t}");
        match op {
            Op::CatCurrent => {
                let path = format!("{cg}/memory.current");
                for _ in 0..ops {
                    ensure!(!self.sim.fs().read(&path)?.is_empty());
                }
            }
            Op::PollCurrent => {
                let file = self.sim.fs().open(
                    &format!("{cg}/memory.current"),
                    memcg::cgroupfs::Access::Read,
                )?;
                for _ in 0..ops {
                    ensure!(!file.read()?.is_empty());
                }
            }
            Op::EchoHigh => {
                let path = format!("{cg}/memory.high");
                for i in 0..ops {
                    self.sim.fs().write(&path, &high_value(i))?;
                }
            }
            Op::MkdirRmdir => {
                let path = format!("{cg}-d");
                for _ in 0..ops {
                    self.sim.fs().mkdir(&path)?;
                    self.sim.fs().rmdir(&path)?;
                }
            }
            Op::Read128k => {
                let (sb, name) = self
                    .sim
                    .machine()
                    .resolve_file(&format!("/data/f{t}"))
                    .context("the bench file")?;
                let memcg = self.sim.fs().memcg("/")?;
                let file = sb.open_file(&memcg, &name, false)?;
                read_loop(ops, |buf, at| Ok(file.read_at(&memcg, at, buf)?))?;
            }
        }
        Ok(())
    }

    /// `op` on the host kernel's own file where one exists.
    fn run_on_kernel(&self, op: Op, t: usize, ops: u64) -> anyhow::Result<()> {
        match op {
            Op::CatCurrent => {
                let mut buf = Vec::with_capacity(64);
                for _ in 0..ops {
                    buf.clear();
                    std::fs::File::open("/proc/sys/vm/swappiness")?.read_to_end(&mut buf)?;
                }
            }
            Op::PollCurrent => {
                poll_loop(ops, &std::fs::File::open("/proc/sys/vm/swappiness")?)?;
            }
            Op::Read128k => {
                let file = std::fs::File::open(self.shm.path().join(format!("f{t}")))?;
                read_loop(ops, |buf, at| Ok(file.read_at(buf, at)?))?;
            }
            op => bail!("{} has no {} way", op.name(), Way::Kernel.name()),
        }
        Ok(())
    }

    /// Checks the machine is as it was: the bench cgroups empty of
    /// children, no stray mount.
    fn finish(self) -> anyhow::Result<()> {
        ensure!(!self.mount.is_finished(), "the FUSE server stopped early");
        drop(self.mount);
        for t in 0..self.threads {
            self.sim.fs().rmdir(&format!("/t{t}"))?;
            self.sim.remove_file(&format!("/data/f{t}"))?;
        }
        Ok(())
    }
}

/// `ops` reads at offset 0 of an open file (each re-renders it).
fn poll_loop(ops: u64, file: &std::fs::File) -> anyhow::Result<()> {
    let mut buf = [0u8; 64];
    for _ in 0..ops {
        ensure!(file.read_at(&mut buf, 0)? > 0, "an empty read");
    }
    Ok(())
}

/// A `memory.high` value to write (alternating, so each write changes it).
fn high_value(i: u64) -> String {
    format!("{}\n", (64 + (i & 1)) << 20)
}

/// `ops` reads of [`READ_BYTES`], walking the file.
fn read_loop(
    ops: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> anyhow::Result<usize>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; READ_BYTES];
    let slots = (FILE_BYTES / READ_BYTES) as u64;
    for i in 0..ops {
        let at = (i % slots) * READ_BYTES as u64;
        let n = read_at(&mut buf, at)?;
        ensure!(n == READ_BYTES, "short read: {n} bytes at {at}");
        ensure!(
            buf[0] == (at % 251) as u8,
            "byte at {at} is {}, not what was written",
            buf[0]
        );
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
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &FuseArgs) -> anyhow::Result<Self> {
        let ops_per_thread = args.common.scaled(args.ops, 2_000, 20_000);
        args.common.validate(&[("--ops", ops_per_thread)])?;
        ensure!(
            usable(),
            "memcg bench fuse mounts a FUSE filesystem: it needs root and /dev/fuse"
        );
        let configs: Vec<(Op, usize)> = Op::ALL
            .iter()
            .flat_map(|&op| args.common.threads.iter().map(move |&t| (op, t)))
            .collect();
        let arms = configs.iter().map(|(op, _)| op.ways().len()).collect();
        Ok(Self {
            scale: Scale {
                ops_per_thread,
                reps: args.common.reps(),
                min_phase_ms: args.common.min_phase_ms(),
                threads: args.common.threads.clone(),
            },
            configs,
            arms,
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
    /// Median over the host kernel's median, where the operation has a
    /// kernel way.
    vs_kernel: Option<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

type Report = super::Report<Scale, ResultRow>;

impl Benchmark for Plan {
    const NAME: &'static str = "fuse";
    type Samples = Runs<Sample>;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} operations per thread per round, median of {} interleaved reps of phases >= {} \
             ms, thousands of operations per second (all threads)",
            self.scale.ops_per_thread, self.scale.reps, self.scale.min_phase_ms
        )
    }

    fn measure(&self) -> anyhow::Result<Runs<Sample>> {
        let most_threads = self.scale.threads.iter().copied().max().unwrap_or(1);
        let bench = Bench::new(most_threads)?;
        let plan = Interleaved::new(self.scale.reps, self.scale.min_phase_ms, &self.arms, true);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let configs = &self.configs;
        let name = |c: usize, a: usize| {
            let (op, threads) = configs[c];
            format!("{} {} x{threads}", op.name(), op.ways()[a].name())
        };
        let runs = plan.run(&mut progress, name, |c, a, rounds| {
            let (op, threads) = configs[c];
            let way = op.ways()[a];
            let ops = self.scale.ops_per_thread * rounds;
            let timed = timed_threads(threads, |t| bench.run(op, way, t, ops))?;
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
                let a = op.ways().iter().position(|&w| w == way)?;
                Some(Stats::of(&runs.values(c, a)).median)
            };
            let base = median_of(Way::InProcess).unwrap_or(f64::NAN);
            let kernel = median_of(Way::Kernel);
            for (a, &way) in op.ways().iter().enumerate() {
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
                    vs_kernel: kernel.map(|k| st.median / k),
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
            let gib = if r.op == Op::Read128k {
                format!(
                    "{:.2}",
                    r.kops * 1e3 * READ_BYTES as f64 / (1u64 << 30) as f64
                )
            } else {
                String::new()
            };
            vec![
                r.op.name().to_owned(),
                r.threads.to_string(),
                r.way.name().to_owned(),
                format!("{:.1}", r.kops),
                report::fmt_stdev(r.stdev, report.config.reps, 1),
                gib,
                report::fmt_ratio(r.vs_in_process),
                r.vs_kernel.map_or(String::new(), report::fmt_ratio),
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
                "GiB/s",
                "vs in process",
                "vs host kernel",
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

    /// Microseconds per operation on each thread (threads over the
    /// table's all-thread rate) against threads, one panel per operation:
    /// the three ways differ by orders of magnitude in kops/s, and a
    /// linear chart of time shows every one.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = Op::ALL.iter().map(|&op| Panel {
            y_label: None,
            title: op.name().to_owned(),
            series: op
                .ways()
                .iter()
                .map(|&way| {
                    let rows = report.results.iter().filter(|r| r.op == op && r.way == way);
                    let us = |r: &ResultRow| r.threads as f64 * 1e3 / r.kops;
                    // The spread of kops/s carried over to µs (first order).
                    let spread = |r: &ResultRow| us(r) * r.stdev / r.kops;
                    Series::by_threads(way.name(), rows.map(|r| (r.threads, us(r), spread(r))))
                })
                .collect(),
        });
        report::chart_by_threads(
            "the simulator over FUSE vs in process vs the host kernel",
            "µs per operation, on each thread",
            panels,
        )
    }
}
