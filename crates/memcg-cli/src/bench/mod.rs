//! `memcg bench`: the benchmarks, each comparing our design with the ones it
//! replaces in one run. Without a subcommand every benchmark runs at quick
//! scale (or tiny with `--smoke`).
//!
//! Every benchmark has the same skeleton, [`run_plan`]: its `Plan::of(args)`
//! checks the flags and settles the defaults, and the plan's [`Benchmark`]
//! steps measure (showing only progress, on stderr), summarise the samples
//! into the report, and show it (tables on stdout, JSON and SVG files where
//! asked). The flags every benchmark takes are [`CommonArgs`].
//!
//! Every benchmark measures the same way: [`schedule`] orders the runs
//! (repetitions outermost, the designs of a configuration interleaved) and
//! settles each design's rounds of work so that a timed phase lasts
//! `--min-phase-ms`; [`timing`] times a phase and the CPU share its threads
//! got. The benches that run tasks on `memcg-sim` (swap, reclaim, zswap)
//! share [`tasks`]: machine sizing, set-up threads, the hardware limits
//! measured alongside, rates. No bench file imports from another.

pub mod anon;
mod anon_probe;
mod charge;
pub mod fs;
pub mod fuse;
pub mod list_lru;
pub mod page_counter;
pub mod reclaim;
mod schedule;
pub mod swap;
pub mod swap_cgroup;
mod tasks;
pub(crate) mod timing;
pub mod zswap;

use std::path::PathBuf;

use anyhow::{bail, ensure};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::report::{Chart, Machine, PhaseFacts, ReportFiles, ReportHead, Stats};
pub(crate) use schedule::{Interleaved, Runs};
pub(crate) use timing::{Phased, Sample, Timed, timed_here, timed_threads};

/// Flags of `memcg bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark; all of them at quick scale when omitted.
    #[command(subcommand)]
    pub which: Option<BenchCommand>,
    /// With no subcommand: the smallest scale, for CI smoke runs.
    #[arg(long)]
    pub smoke: bool,
    /// With no subcommand: write each benchmark's JSON and SVG here.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

/// One benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// swap_cgroup designs: locked, packed, atomic-u16, cluster, memcg.
    SwapCgroup(swap_cgroup::SwapCgroupArgs),
    /// list_lru designs (legacy vs split) on the seed 002 experiment.
    ListLru(list_lru::ListLruArgs),
    /// page_counter against the locked res_counter it replaced.
    PageCounter(page_counter::PageCounterArgs),
    /// The seed's swap-out / swap-in experiments, per swap_cgroup design.
    Swap(swap::SwapArgs),
    /// A usemem-like load at a memory cgroup's limit: reclaim-driven swap.
    Reclaim(reclaim::ReclaimArgs),
    /// The memcg charge path with and without the per-thread charge stock.
    Charge(charge::ChargeArgs),
    /// Swap-out/in through zswap vs the RAM device vs the raw compressor.
    Zswap(zswap::ZswapArgs),
    /// Interface files and page-cache reads through the FUSE mount vs in
    /// process vs the host kernel.
    Fuse(fuse::FuseArgs),
    /// A `--fs` filesystem's metadata operations and 4K/1M reads and
    /// writes through the FUSE mount vs the host's tmpfs vs in process.
    Fs(fs::FsArgs),
    /// A real process's anonymous memory under `memcg run`: first touch,
    /// swap-out and swap-in per page vs native, bare userfaultfd and the
    /// simulator's own.
    Anon(anon::AnonArgs),
    /// The process side of `bench anon`.
    #[command(hide = true)]
    AnonProbe(anon::ProbeArgs),
}

/// Runs `memcg bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.which.is_some() && (args.smoke || args.out_dir.is_some()) {
        bail!(
            "--smoke and --out-dir belong to the whole suite (`memcg bench --smoke`); \
             a named benchmark takes its own flags: --quick, --json, --svg"
        );
    }
    match args.which {
        Some(BenchCommand::SwapCgroup(a)) => swap_cgroup::run(&a),
        Some(BenchCommand::ListLru(a)) => list_lru::run(&a),
        Some(BenchCommand::PageCounter(a)) => page_counter::run(&a),
        Some(BenchCommand::Swap(a)) => swap::run(&a),
        Some(BenchCommand::Reclaim(a)) => reclaim::run(&a),
        Some(BenchCommand::Charge(a)) => charge::run(&a),
        Some(BenchCommand::Zswap(a)) => zswap::run(&a),
        Some(BenchCommand::Fuse(a)) => fuse::run(&a),
        Some(BenchCommand::Fs(a)) => fs::run(&a),
        Some(BenchCommand::Anon(a)) => anon::run(&a),
        Some(BenchCommand::AnonProbe(a)) => anon_probe::run(&a),
        None => run_suite(args.smoke, args.out_dir.as_deref()),
    }
}

/// Every benchmark at quick scale (tiny with `smoke`), each writing its
/// JSON and SVG in `dir` when given. Every file is checked up front, so
/// an unwritable one is found before the first benchmark runs.
fn run_suite(smoke: bool, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let files = |name| ReportFiles::in_dir(dir, name);
    let mut sc = swap_cgroup::SwapCgroupArgs::for_suite(smoke);
    sc.common.files = files("swap-cgroup")?;
    let mut ll = list_lru::ListLruArgs::for_suite(smoke);
    ll.common.files = files("list-lru")?;
    let mut pc = page_counter::PageCounterArgs::for_suite(smoke);
    pc.common.files = files("page-counter")?;
    let mut ch = charge::ChargeArgs::for_suite(smoke);
    ch.common.files = files("charge")?;
    let mut sw = swap::SwapArgs::for_suite(smoke);
    sw.common.files = files("swap")?;
    let mut rc = reclaim::ReclaimArgs::for_suite(smoke);
    rc.common.files = files("reclaim")?;
    let mut zs = zswap::ZswapArgs::for_suite(smoke);
    zs.common.files = files("zswap")?;
    let (fu, fs) = if fuse::usable() {
        let mut fu = fuse::FuseArgs::for_suite(smoke);
        fu.common.files = files("fuse")?;
        let mut fs = fs::FsArgs::for_suite(smoke);
        fs.common.files = files("fs")?;
        (Some(fu), Some(fs))
    } else {
        (None, None)
    };
    let commons = [
        &sc.common, &ll.common, &pc.common, &ch.common, &sw.common, &rc.common, &zs.common,
    ];
    let mounted = fu.as_ref().map(|f| &f.common);
    for common in commons
        .into_iter()
        .chain(mounted)
        .chain(fs.as_ref().map(|f| &f.common))
    {
        common.files.validate()?;
    }
    swap_cgroup::run(&sc)?;
    list_lru::run(&ll)?;
    page_counter::run(&pc)?;
    charge::run(&ch)?;
    swap::run(&sw)?;
    reclaim::run(&rc)?;
    zswap::run(&zs)?;
    match (fu, fs) {
        (Some(fu), Some(fs)) => {
            fuse::run(&fu)?;
            fs::run(&fs)
        }
        _ => {
            eprintln!("memcg bench: fuse and fs skipped: they need root and /dev/fuse");
            Ok(())
        }
    }
}

/// The flags every benchmark takes. A benchmark whose default or help
/// differs says so with `#[command(mut_arg(...))]` on its own flags.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Thread counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Repetitions of every configuration, interleaved [default: 9; --quick 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Shortest timed phase in ms: work that takes less is repeated until
    /// it lasts this long [default: 200; --quick 0, one round].
    #[arg(long)]
    pub min_phase_ms: Option<u64>,
    /// Smaller defaults for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// `--json` and `--svg`.
    #[command(flatten)]
    pub files: ReportFiles,
}

impl CommonArgs {
    /// What `memcg bench` passes every benchmark: quick scale, one
    /// repetition with `--smoke`, no files (the suite names them).
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            threads: vec![1, 2],
            reps: smoke.then_some(1),
            min_phase_ms: None,
            quick: true,
            files: ReportFiles::default(),
        }
    }

    /// [`CommonArgs::for_suite`] for a benchmark whose threads are
    /// simulated tasks: one of them with `--smoke`.
    pub fn for_task_suite(smoke: bool) -> Self {
        let common = Self::for_suite(smoke);
        Self {
            threads: if smoke {
                vec![1]
            } else {
                common.threads.clone()
            },
            ..common
        }
    }

    /// `--reps`, or 3 with `--quick` and 9 without: a median of 9 is not
    /// moved by a few repetitions the scheduler spoiled.
    pub fn reps(&self) -> usize {
        self.scaled(self.reps, 3, 9)
    }

    /// `--min-phase-ms`, or 0 with `--quick` (quick runs stay quick) and
    /// 200 without.
    pub fn min_phase_ms(&self) -> u64 {
        self.scaled(self.min_phase_ms, 0, 200)
    }

    /// A size flag's `value`, or its default at this scale: `quick` with
    /// `--quick`, `full` without.
    pub fn scaled<T>(&self, value: Option<T>, quick: T, full: T) -> T {
        value.unwrap_or(if self.quick { quick } else { full })
    }

    /// Refuses counts of 0: first the benchmark's own `counts` (flag and
    /// value) together with `--reps`, in one message that names them all,
    /// then `--threads`.
    pub fn validate(&self, counts: &[(&str, u64)]) -> anyhow::Result<()> {
        if self.reps() == 0 || counts.iter().any(|&(_, n)| n == 0) {
            let flags: Vec<&str> = counts.iter().map(|&(flag, _)| flag).collect();
            bail!("{} must be at least 1", and_list(&flags, "--reps"));
        }
        ensure!(
            !self.threads.is_empty() && !self.threads.contains(&0),
            "--threads needs counts of at least 1"
        );
        Ok(())
    }
}

/// The scale of a benchmark of `--ops` operation pairs per thread at each
/// hierarchy depth of `--depths` (`page-counter`, `charge`), checked.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DepthScale {
    pub ops_per_thread: u64,
    pub reps: usize,
    pub min_phase_ms: u64,
    pub depths: Vec<usize>,
    pub threads: Vec<usize>,
}

impl DepthScale {
    /// `ops` (100000 with `--quick`, 1000000 without), `depths` and the
    /// common flags, refused where a count is 0.
    pub fn of(common: &CommonArgs, ops: Option<u64>, depths: &[usize]) -> anyhow::Result<Self> {
        let ops_per_thread = common.scaled(ops, 100_000, 1_000_000);
        common.validate(&[("--ops", ops_per_thread)])?;
        ensure!(
            !depths.is_empty() && !depths.contains(&0),
            "--depths needs depths of at least 1"
        );
        Ok(Self {
            ops_per_thread,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            depths: depths.to_vec(),
            threads: common.threads.clone(),
        })
    }

    /// Every `(depth, threads)` pair, depths outermost.
    pub fn configs(&self) -> Vec<(usize, usize)> {
        self.depths
            .iter()
            .flat_map(|&d| self.threads.iter().map(move |&t| (d, t)))
            .collect()
    }

    /// The heading's line for `what` pairs per thread.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{} {what} per thread per round, median of {} interleaved reps of phases >= {} ms, \
             Mops/s",
            self.ops_per_thread, self.reps, self.min_phase_ms
        )
    }
}

/// Mops/s of one arm of one configuration over the repetitions, flattened
/// into a benchmark's result rows.
#[derive(Debug, Serialize)]
pub(crate) struct MopsStats {
    /// Median operation pairs per second, millions.
    pub mops: f64,
    pub stdev: f64,
    pub mops_min: f64,
    pub mops_max: f64,
    pub samples: Vec<f64>,
    #[serde(flatten)]
    pub phases: PhaseFacts,
}

impl MopsStats {
    /// Arm `arm` of configuration `config` of `runs`.
    pub fn of(runs: &Runs<Sample>, config: usize, arm: usize) -> Self {
        let samples = runs.values(config, arm);
        let st = Stats::of(&samples);
        Self {
            mops: st.median,
            stdev: st.stdev,
            mops_min: st.min,
            mops_max: st.max,
            samples,
            phases: runs.facts(config, arm),
        }
    }

    /// The table cells: Mops/s, stdev and range over `reps`.
    pub fn cells(&self, reps: usize) -> [String; 3] {
        [
            format!("{:.1}", self.mops),
            crate::report::fmt_stdev(self.stdev, reps, 1),
            crate::report::fmt_range(self.mops_min, self.mops_max, reps, 1),
        ]
    }
}

/// What a benchmark writes: the heading, its settings and its rows.
#[derive(Debug, Serialize)]
pub(crate) struct Report<C, R> {
    #[serde(flatten)]
    pub head: ReportHead,
    pub config: C,
    pub results: Vec<R>,
}

/// The swap_cgroup designs `memcg bench` runs: the old and ours with
/// `--smoke`, else every one (an empty list).
pub(crate) fn suite_designs(smoke: bool) -> Vec<memcg::swap_cgroup::Design> {
    use memcg::swap_cgroup::Design;
    if smoke {
        vec![Design::Locked, Design::Memcg]
    } else {
        Vec::new()
    }
}

/// `a, b and last`.
fn and_list(first: &[&str], last: &str) -> String {
    if first.is_empty() {
        last.to_owned()
    } else {
        format!("{} and {last}", first.join(", "))
    }
}

/// One benchmark's steps, which [`run_plan`] takes in order. `Self` is the
/// benchmark's plan: its flags, checked, with the defaults settled.
pub(crate) trait Benchmark {
    /// The name in the heading, on progress lines and in the report.
    const NAME: &'static str;
    /// What [`Benchmark::measure`] found.
    type Samples;
    /// What is printed and written.
    type Report: Serialize;

    /// The line under the heading: the scale of the run and the statistic
    /// its tables show.
    fn describe(&self) -> String;

    /// Runs every measurement, showing progress on stderr only.
    fn measure(&self) -> anyhow::Result<Self::Samples>;

    /// The report of `samples` (no measuring, no output).
    fn summarise(&self, head: ReportHead, samples: Self::Samples) -> Self::Report;

    /// Prints the report's tables on stdout.
    fn print_tables(report: &Self::Report);

    /// The report as a chart.
    fn chart(&self, report: &Self::Report) -> Chart<'static>;
}

/// Runs the benchmark `plan`: checks that `files` can be written, prints the
/// heading, measures, prints the tables and writes `files`.
pub(crate) fn run_plan<B: Benchmark>(plan: &B, files: &ReportFiles) -> anyhow::Result<()> {
    files.validate()?;
    let machine = Machine::current();
    println!("## {} on {machine}", B::NAME);
    println!("{}\n", plan.describe());
    let samples = plan.measure()?;
    let report = plan.summarise(ReportHead::new(B::NAME, machine), samples);
    B::print_tables(&report);
    files.write(&report, || plan.chart(&report))
}
