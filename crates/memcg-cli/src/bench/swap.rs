//! `memcg bench swap`: the seed's swap micro-experiments, end to end through
//! `memcg-sim` (real pages, a real RAM or file swap device, the swap cache,
//! swap accounting and the `swap_cgroup` map), once per `swap_cgroup` design
//! in the same run.
//!
//! The seed (`../shared/seeds/000`) timed two experiments on a brd ramdisk:
//! sequential swap-out of 8 GiB of 64 KiB zero folios with
//! `madvise(MADV_PAGEOUT)`, and sequential swap-in of 8 GiB of 4 KiB zero
//! folios, reporting the mean and stdev in µs. Zero pages never reach the
//! device (only the zero bitmap), so those two isolate the bookkeeping the
//! seed changed. We add the same pair with random content on a RAM device
//! and on a file device, where the bytes really move.
//!
//! Each run builds a fresh simulation, populates the mappings (untimed;
//! for swap-in also pages them out untimed), then times only the pageout or
//! the fault-in. `--threads N` splits the bytes over N tasks that run in
//! parallel on distinct mappings. After every run each byte is verified and
//! every charge, swap slot and id pin is checked to be released.
//!
//! The hardware limits are measured in the same run on the same bytes and
//! threads: a streaming `read` (an OR over the buffer) for zero swap-out (a
//! zero folio must be read to be known zero, and nothing is written),
//! `memset` for zero swap-in (filling zero pages back is a memset), and
//! `memcpy` for random content (a RAM swap device is a copy each way; the
//! file device goes through the page cache, which is also a copy).
//!
//! Where one run's timed phase is shorter than `--min-phase-ms`, a sample
//! is that many whole runs (each on a fresh simulation) with their timed
//! phases summed, and figures are per run of `--size` bytes.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, ensure};
use clap::Args;
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::Design;
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use super::tasks::{
    DEVICE_SLACK_BYTES, Limit, check_size, gib_per_s, in_parallel, machine_bytes_for,
    measure_limit, parse_size, rate_stdev,
};
use super::{Benchmark, CommonArgs, Interleaved, Runs, Sample, Timed, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// The largest folio any experiment uses (64 KiB): sizes are multiples of
/// it per thread.
const MAX_FOLIO_BYTES: u64 = 16 * PAGE_SIZE;

/// Flags of `memcg bench swap`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("threads", |a| a.help(
        "Thread counts (tasks on distinct mappings in parallel), comma separated"
    )),
)]
pub struct SwapArgs {
    /// Bytes swapped per run, split over the threads (K/M/G suffixes;
    /// `8G` is the seed's size) [default: 1G; --quick 64M].
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// swap_cgroup designs, comma separated [default: all five].
    #[arg(long, value_delimiter = ',')]
    pub designs: Vec<Design>,
    /// Experiments, comma separated [default: all six]: swapout-64k-zero-ram,
    /// swapin-4k-zero-ram, swapout-64k-random-ram, swapin-4k-random-ram,
    /// swapout-64k-random-file, swapin-4k-random-file.
    #[arg(long, value_delimiter = ',')]
    pub experiments: Vec<Experiment>,
    /// Seed of the random page contents.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Directory for the file swap device [default: a temporary directory].
    #[arg(long)]
    pub swap_dir: Option<PathBuf>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl SwapArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            size: smoke.then_some(4 << 20),
            designs: super::suite_designs(smoke),
            experiments: Vec::new(),
            seed: 0x5eed,
            swap_dir: None,
            common: CommonArgs::for_task_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &SwapArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// What an experiment times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// `pageout` of resident mappings (`MADV_PAGEOUT`).
    SwapOut,
    /// `touch` of paged-out mappings (a fault per folio).
    SwapIn,
}

memcg::named_enum!(Op {
    SwapOut => "swapout",
    SwapIn => "swapin",
});

/// The swap device an experiment uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    /// A RAM disk (the seed's brd).
    Ram,
    /// A preallocated file.
    File,
}

memcg::named_enum!(Device {
    Ram => "ram",
    File => "file",
});

/// One experiment: what is timed, on which folios, contents and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experiment {
    op: Op,
    folio_pages: u32,
    fill: Fill,
    device: Device,
}

impl Experiment {
    /// Every experiment, in report order: the seed's two first.
    pub const ALL: [Experiment; 6] = [
        Experiment::new(Op::SwapOut, 16, Fill::Zero, Device::Ram),
        Experiment::new(Op::SwapIn, 1, Fill::Zero, Device::Ram),
        Experiment::new(Op::SwapOut, 16, Fill::Random, Device::Ram),
        Experiment::new(Op::SwapIn, 1, Fill::Random, Device::Ram),
        Experiment::new(Op::SwapOut, 16, Fill::Random, Device::File),
        Experiment::new(Op::SwapIn, 1, Fill::Random, Device::File),
    ];

    const fn new(op: Op, folio_pages: u32, fill: Fill, device: Device) -> Self {
        Self {
            op,
            folio_pages,
            fill,
            device,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> String {
        format!(
            "{}-{}k-{}-{}",
            self.op,
            u64::from(self.folio_pages) * PAGE_SIZE / 1024,
            self.fill.name(),
            self.device
        )
    }

    /// The bandwidth that bounds this experiment.
    fn limit(self) -> Limit {
        match (self.fill, self.op) {
            // Known zero only once read; nothing is written to the device.
            (Fill::Zero, Op::SwapOut) => Limit::Read,
            // The page is filled back with zeros.
            (Fill::Zero, Op::SwapIn) => Limit::Memset,
            // A copy each way through a RAM device or the page cache.
            _ => Limit::Memcpy,
        }
    }
}

impl FromStr for Experiment {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Experiment::ALL.iter().map(|e| e.name()).collect();
                format!(
                    "unknown experiment {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// Where the file device lives for the whole run.
enum SwapDir {
    Temp(tempfile::TempDir),
    Given(PathBuf),
}

impl SwapDir {
    fn path(&self) -> &Path {
        match self {
            SwapDir::Temp(t) => t.path(),
            SwapDir::Given(p) => p,
        }
    }
}

/// One timed run of `exp` with `design` on `threads` tasks sharing
/// `size_bytes`; returns its timed phase.
fn run_once(
    exp: Experiment,
    design: Design,
    threads: usize,
    size_bytes: u64,
    seed: u64,
    swap_dir: &Path,
) -> anyhow::Result<Timed> {
    let sim = Sim::new(SimConfig {
        seed,
        swap_cgroup: design,
        mem_bytes: machine_bytes_for(size_bytes, threads),
        charge_stock: true,
        memcg_metadata_bytes: None,
        ..SimConfig::default()
    });
    // The machine's memory is real before the run: no host page faults in
    // a timed phase (the kernel's pages need none either).
    sim.prefault(machine_bytes_for(size_bytes, threads));
    sim.fs().write("/cgroup.subtree_control", "+memory")?;
    sim.fs().mkdir("/bench")?;
    let device_bytes = size_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1);
    let device = swapon(&sim, exp.device, device_bytes, swap_dir)?;
    let per_task_bytes = size_bytes / threads as u64;
    let per_task_pages = per_task_bytes / PAGE_SIZE;
    let names: Vec<String> = (0..threads).map(|t| format!("task{t}")).collect();

    // Untimed set-up: populate (and for swap-in, page out) every mapping.
    in_parallel(&names, |name| {
        sim.alloc("/bench", name, per_task_bytes, exp.folio_pages, exp.fill)?;
        if exp.op == Op::SwapIn {
            ensure!(
                sim.pageout(name)? == per_task_pages,
                "{name}: pageout short"
            );
        }
        Ok(())
    })?;

    let timed = timed_threads(threads, |t| {
        let name = &names[t];
        let pages = match exp.op {
            Op::SwapOut => sim.pageout(name)?,
            Op::SwapIn => sim.touch(name)?,
        };
        ensure!(
            pages == per_task_pages,
            "{name}: {pages} of {per_task_pages} pages moved"
        );
        Ok(())
    })?;

    // Nothing lost: every byte as written, then everything released.
    in_parallel(&names, |name| Ok(sim.verify(name)?))?;
    for name in &names {
        sim.free(name)?;
    }
    check_all_released(&sim, &device, || format!("{} with {design}", exp.name()))?;
    sim.swapoff(&device)?;
    Ok(timed)
}

/// Turns on a swap device of `device_bytes` of kind `device`; returns its
/// name.
fn swapon(sim: &Sim, device: Device, device_bytes: u64, swap_dir: &Path) -> anyhow::Result<String> {
    Ok(match device {
        Device::Ram => sim.swapon_ram(device_bytes, None)?,
        // One file per size: a reused swap file must be large enough.
        Device::File => {
            let path = swap_dir.join(format!("memcg-bench-{}M.swap", device_bytes >> 20));
            sim.machine().swapon_file(&path, device_bytes, None)?
        }
    })
}

/// Checks that `/bench` is charged nothing and `device` holds no slot once
/// every task freed its mapping; `run` names the run in the error.
fn check_all_released(sim: &Sim, device: &str, run: impl Fn() -> String) -> anyhow::Result<()> {
    let bench = sim.fs().memcg("/bench")?;
    // Stocked pages are charged but unused: give them back first.
    sim.fs().tree().drain_all_stock(&bench);
    let inuse = sim
        .swap()
        .swapfiles()
        .by_name(device)
        .context("the device is still on")?
        .inuse_pages();
    ensure!(
        (bench.memory().usage(), bench.swap().usage(), inuse) == (0, 0, 0),
        "{}: memory {} swap {} slots {} left after free",
        run(),
        bench.memory().usage(),
        bench.swap().usage(),
        inuse
    );
    Ok(())
}

/// A timed phase over the repetitions, in µs per run of `size_bytes`
/// (the rounds of a phase divided out).
#[derive(Debug, Serialize)]
struct PhaseUs {
    /// Median, the statistic the tables and ratios use.
    median_us: f64,
    /// Mean (the seed's statistic).
    mean_us: f64,
    stdev_us: f64,
    min_us: f64,
    max_us: f64,
    /// Bytes moved per second at the median time.
    gib_per_s: f64,
    samples_us: Vec<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

impl PhaseUs {
    /// Arm `arm` of configuration `config` of `runs`, runs of `size_bytes`.
    fn of(runs: &Runs<Sample>, config: usize, arm: usize, size_bytes: u64) -> Self {
        let samples_us = runs.values(config, arm);
        let st = Stats::of(&samples_us);
        Self {
            median_us: st.median,
            mean_us: st.mean,
            stdev_us: st.stdev,
            min_us: st.min,
            max_us: st.max,
            gib_per_s: gib_per_s(size_bytes, st.median / 1e6),
            samples_us,
            phases: runs.facts(config, arm),
        }
    }

    /// The GiB/s and its error bar for a chart.
    fn chart_point(&self, threads: usize) -> (usize, f64, f64) {
        let error = rate_stdev(self.gib_per_s, self.median_us, self.stdev_us);
        (threads, self.gib_per_s, error)
    }
}

#[derive(Debug, Serialize)]
struct ResultRow {
    experiment: String,
    threads: usize,
    design: &'static str,
    #[serde(flatten)]
    time: PhaseUs,
    /// Median time of `locked` divided by this design's (> 1: faster).
    speedup_vs_locked: Option<f64>,
    /// The experiment's bound (read, memset or memcpy).
    limit: Limit,
    /// This design's GiB/s divided by the limit's GiB/s, both at the
    /// median.
    fraction_of_limit: f64,
}

#[derive(Debug, Serialize)]
struct LimitRow {
    limit: Limit,
    threads: usize,
    #[serde(flatten)]
    time: PhaseUs,
}

#[derive(Debug, Serialize)]
struct Config {
    size_bytes: u64,
    reps: usize,
    min_phase_ms: u64,
    seed: u64,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    head: ReportHead,
    config: Config,
    limits: Vec<LimitRow>,
    results: Vec<ResultRow>,
}

/// One configuration of a run: every limit (one arm each) at a thread
/// count, or every design (one arm each) on an experiment at a thread
/// count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunConfig {
    Limits(usize),
    Experiment(usize, Experiment),
}

/// Validated settings of one invocation.
struct Plan {
    size_bytes: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    designs: Vec<Design>,
    experiments: Vec<Experiment>,
    seed: u64,
    swap_dir: Option<PathBuf>,
    /// Per thread count: the limits, then every experiment.
    configs: Vec<RunConfig>,
    /// Arms of each configuration.
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &SwapArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let size_bytes = common.scaled(args.size, 64 << 20, 1 << 30);
        check_size(common, size_bytes, MAX_FOLIO_BYTES)?;
        let designs = if args.designs.is_empty() {
            Design::ALL.to_vec()
        } else {
            args.designs.clone()
        };
        let experiments = if args.experiments.is_empty() {
            Experiment::ALL.to_vec()
        } else {
            args.experiments.clone()
        };
        let configs = configs(&common.threads, &experiments);
        let arms = configs
            .iter()
            .map(|c| match c {
                RunConfig::Limits(_) => Limit::ALL.len(),
                RunConfig::Experiment(..) => designs.len(),
            })
            .collect();
        Ok(Self {
            size_bytes,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            threads: common.threads.clone(),
            designs,
            experiments,
            seed: args.seed,
            swap_dir: args.swap_dir.clone(),
            configs,
            arms,
        })
    }

    /// `rounds` timed runs summed, with what reproduces them in any error;
    /// the value is µs per run.
    fn run(
        &self,
        swap_dir: &SwapDir,
        exp: Experiment,
        design: Design,
        threads: usize,
        rounds: u64,
    ) -> anyhow::Result<Sample> {
        let mut total = Timed::default();
        for _ in 0..rounds {
            let path = swap_dir.path();
            let timed = run_once(exp, design, threads, self.size_bytes, self.seed, path)
                .with_context(|| {
                    format!(
                        "{} with {design} on {threads} threads (--seed {})",
                        exp.name(),
                        self.seed
                    )
                })?;
            total.add(&timed);
        }
        Ok(Sample::new(total.secs / rounds as f64 * 1e6, &total))
    }

    /// One sample of arm `arm` of configuration `config`.
    fn run_arm(
        &self,
        swap_dir: &SwapDir,
        config: usize,
        arm: usize,
        rounds: u64,
    ) -> anyhow::Result<Sample> {
        match self.configs[config] {
            RunConfig::Limits(threads) => {
                measure_limit(Limit::ALL[arm], threads, self.size_bytes, rounds)
            }
            RunConfig::Experiment(threads, exp) => {
                self.run(swap_dir, exp, self.designs[arm], threads, rounds)
            }
        }
    }

    /// What progress calls arm `arm` of configuration `config`.
    fn arm_name(&self, config: usize, arm: usize) -> String {
        match self.configs[config] {
            RunConfig::Limits(threads) => format!("{} x{threads}", Limit::ALL[arm]),
            RunConfig::Experiment(threads, exp) => {
                format!("{} {} x{threads}", exp.name(), self.designs[arm])
            }
        }
    }

    /// The rows of every design on `exp` at `threads` (configuration
    /// `config`), against `locked` and the experiment's limit in `limits`.
    fn result_rows(
        &self,
        runs: &Runs<Sample>,
        (config, threads, exp): (usize, usize, Experiment),
        limits: &[LimitRow],
    ) -> Vec<ResultRow> {
        let limit_gib = limits
            .iter()
            .find(|l| l.threads == threads && l.limit == exp.limit())
            .map_or(f64::NAN, |l| l.time.gib_per_s);
        let times: Vec<PhaseUs> = (0..self.designs.len())
            .map(|di| PhaseUs::of(runs, config, di, self.size_bytes))
            .collect();
        let locked =
            (self.designs.iter().position(|&d| d == Design::Locked)).map(|di| times[di].median_us);
        (self.designs.iter().zip(times))
            .map(|(&design, time)| ResultRow {
                experiment: exp.name(),
                threads,
                design: design.name(),
                speedup_vs_locked: locked.map(|l| l / time.median_us),
                limit: exp.limit(),
                fraction_of_limit: time.gib_per_s / limit_gib,
                time,
            })
            .collect()
    }
}

/// Per thread count: its limits, then every experiment.
fn configs(threads: &[usize], experiments: &[Experiment]) -> Vec<RunConfig> {
    threads
        .iter()
        .flat_map(|&t| {
            let exps = experiments
                .iter()
                .map(move |&e| RunConfig::Experiment(t, e));
            std::iter::once(RunConfig::Limits(t)).chain(exps)
        })
        .collect()
}

impl Benchmark for Plan {
    const NAME: &'static str = "swap";
    type Samples = Runs<Sample>;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} MiB per run split over the threads, median of {} interleaved reps of timed phases \
             (pageout or fault-in) >= {} ms, µs per run",
            self.size_bytes >> 20,
            self.reps,
            self.min_phase_ms
        )
    }

    /// A warm-up (or calibration) pass, then every repetition, interleaved
    /// (see [`super::schedule`]).
    fn measure(&self) -> anyhow::Result<Runs<Sample>> {
        let swap_dir = match &self.swap_dir {
            Some(dir) => SwapDir::Given(dir.clone()),
            None => SwapDir::Temp(
                tempfile::tempdir().context("creating a directory for the swap file")?,
            ),
        };
        // The warm-up creates the swap files and brings the allocator and
        // page cache to the state every later run sees.
        let plan = Interleaved::new(self.reps, self.min_phase_ms, &self.arms, true);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let runs = plan.run(
            &mut progress,
            |c, a| self.arm_name(c, a),
            |c, a, rounds| self.run_arm(&swap_dir, c, a, rounds),
        )?;
        progress.finish();
        Ok(runs)
    }

    fn summarise(&self, head: ReportHead, runs: Runs<Sample>) -> Report {
        let (mut limits, mut results) = (Vec::new(), Vec::new());
        for (ci, &config) in self.configs.iter().enumerate() {
            match config {
                RunConfig::Limits(threads) => {
                    limits.extend(Limit::ALL.iter().enumerate().map(|(li, &limit)| LimitRow {
                        limit,
                        threads,
                        time: PhaseUs::of(&runs, ci, li, self.size_bytes),
                    }));
                }
                RunConfig::Experiment(threads, exp) => {
                    results.extend(self.result_rows(&runs, (ci, threads, exp), &limits));
                }
            }
        }
        Report {
            head,
            config: Config {
                size_bytes: self.size_bytes,
                reps: self.reps,
                min_phase_ms: self.min_phase_ms,
                seed: self.seed,
                threads: self.threads.clone(),
            },
            limits,
            results,
        }
    }

    fn print_tables(report: &Report) {
        print_limit_table(report);
        print_result_table(report);
        let facts = report.limits.iter().map(|l| &l.time.phases);
        let facts = facts.chain(report.results.iter().map(|r| &r.time.phases));
        report::print_method_note(facts, report.config.min_phase_ms as f64);
    }

    /// GiB/s against threads, one panel per experiment: every design and
    /// the experiment's limit.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = self.experiments.iter().map(|exp| {
            let name = exp.name();
            let designs = self.designs.iter().map(|d| {
                let rows = report.results.iter();
                let rows = rows.filter(|r| r.experiment == name && r.design == d.name());
                Series::by_threads(d.name(), rows.map(|r| r.time.chart_point(r.threads)))
            });
            let limits = report.limits.iter().filter(|l| l.limit == exp.limit());
            let limit_points = limits.map(|l| l.time.chart_point(l.threads));
            let limit = Series::by_threads(format!("{} (limit)", exp.limit().name()), limit_points);
            let series = designs.chain([limit]).collect();
            Panel {
                y_label: None,
                title: name,
                series,
            }
        });
        report::chart_by_threads(
            "swap-out / swap-in GiB/s by swap_cgroup design",
            "GiB/s",
            panels,
        )
    }
}

/// The limits: median µs per pass over the run's bytes, and GiB/s.
fn print_limit_table(report: &Report) {
    let reps = report.config.reps;
    let rows = report.limits.iter().map(|l| {
        let t = &l.time;
        vec![
            l.limit.name().to_owned(),
            l.threads.to_string(),
            format!("{:.0}", t.median_us),
            report::fmt_stdev(t.stdev_us, reps, 0),
            report::fmt_range(t.min_us, t.max_us, reps, 0),
            format!("{:.2}", t.gib_per_s),
            t.phases.cpu_cell(),
        ]
    });
    let header = [
        "limit",
        "threads",
        "median µs",
        "stdev µs",
        "min–max µs",
        "GiB/s",
        "CPU",
    ];
    report::print_table(&header, rows);
}

/// Every experiment, thread count and design.
fn print_result_table(report: &Report) {
    let reps = report.config.reps;
    let rows = report.results.iter().map(|r| {
        let t = &r.time;
        vec![
            r.experiment.clone(),
            r.threads.to_string(),
            r.design.to_owned(),
            format!("{:.0}", t.median_us),
            report::fmt_stdev(t.stdev_us, reps, 0),
            report::fmt_range(t.min_us, t.max_us, reps, 0),
            format!("{:.2}", t.gib_per_s),
            r.speedup_vs_locked
                .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}x")),
            format!("{:.1}% {}", r.fraction_of_limit * 100.0, r.limit.name()),
            t.phases.cpu_cell(),
        ]
    });
    let header = [
        "experiment",
        "threads",
        "swap_cgroup",
        "median µs",
        "stdev µs",
        "min–max µs",
        "GiB/s",
        "vs locked",
        "of limit",
        "CPU",
    ];
    report::print_table(&header, rows);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiment_names_round_trip() {
        for exp in Experiment::ALL {
            assert_eq!(exp.name().parse::<Experiment>(), Ok(exp));
        }
        assert_eq!(Experiment::ALL[0].name(), "swapout-64k-zero-ram");
        assert_eq!(Experiment::ALL[1].name(), "swapin-4k-zero-ram");
        assert!("swapout-2m-zero-ram".parse::<Experiment>().is_err());
    }

    #[test]
    fn every_experiment_runs_balanced_on_two_threads() {
        let dir = tempfile::tempdir().unwrap();
        for exp in Experiment::ALL {
            for design in [Design::Locked, Design::Memcg] {
                let timed = run_once(exp, design, 2, 1 << 20, 7, dir.path()).unwrap();
                assert!(timed.secs > 0.0, "{}", exp.name());
                assert_eq!(timed.cpu_secs.len(), 2);
            }
        }
    }

    #[test]
    fn sizes_must_split_into_whole_folios() {
        let mut args = SwapArgs::for_suite(true);
        args.common.threads = vec![3];
        assert!(Plan::of(&args).is_err());
        args.common.threads = vec![2];
        args.size = Some((1 << 20) + 4096);
        assert!(Plan::of(&args).is_err());
        args.size = Some(1 << 20);
        assert!(Plan::of(&args).is_ok());
    }
}
