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
//! The hardware limit is measured in the same run on the same bytes and
//! threads: `memset` bandwidth for the zero experiments (filling zero pages
//! back is a memset, and checking pages for zeros reads as many bytes), and
//! `memcpy` for random content (a RAM swap device is a copy each way; the
//! file device goes through the page cache, which is also a copy).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, ensure};
use clap::Args;
use memcg::cgroupfs::memparse;
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::Design;
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use super::{Benchmark, CommonArgs, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, Progress, ReportHead, Series, Stats};

/// The largest folio any experiment uses (64 KiB): sizes are multiples of
/// it per thread.
const MAX_FOLIO_BYTES: u64 = 16 * PAGE_SIZE;
/// Swap space beyond the data: the header page and partly used clusters
/// (2 MiB each) per thread.
const DEVICE_SLACK_BYTES: u64 = 4 << 20;

/// Flags of `memcg bench swap`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("threads", |a| a.help(
        "Thread counts (tasks on distinct mappings in parallel), comma separated"
    )),
    mut_arg("reps", |a| a.help("Repetitions [default: 5; --quick 3]")),
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
        let common = CommonArgs::for_suite(smoke);
        Self {
            size: smoke.then_some(4 << 20),
            designs: if smoke {
                vec![Design::Locked, Design::Memcg]
            } else {
                Vec::new()
            },
            experiments: Vec::new(),
            seed: 0x5eed,
            swap_dir: None,
            common: CommonArgs {
                threads: if smoke {
                    vec![1]
                } else {
                    common.threads.clone()
                },
                ..common
            },
        }
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &SwapArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

fn parse_size(text: &str) -> Result<u64, String> {
    memparse(text).map_err(|e| e.to_string())
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
        match self.fill {
            Fill::Zero => Limit::Memset,
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

/// A hardware bandwidth measured alongside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Limit {
    Memset,
    Memcpy,
}

memcg::named_enum!(Limit {
    Memset => "memset",
    Memcpy => "memcpy",
});

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

/// The simulated machine a run needs: the mappings, a RAM device as large
/// (its pages are machine memory) and the device's tables, with room to
/// spare. Benchmarks size the machine to the experiment; the host must
/// hold it ([`check_host_fits`]).
fn machine_bytes_for(size_bytes: u64, threads: usize) -> u64 {
    let device_bytes = size_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1);
    let tables = memcg::swap_state::swap_tables_pages(device_bytes / PAGE_SIZE) * PAGE_SIZE;
    size_bytes + device_bytes + tables + (64 << 20)
}

/// Refuses, before any run, a size whose machine would not fit in half of
/// the host's available memory (the simulator's pages are real).
fn check_host_fits(size_bytes: u64, threads: &[usize]) -> anyhow::Result<()> {
    let needed = threads
        .iter()
        .map(|&t| machine_bytes_for(size_bytes, t))
        .max()
        .unwrap_or(0);
    let available = memcg_sim::default_mem_bytes();
    ensure!(
        needed <= available,
        "--size {size_bytes} needs a simulated machine of {needed} bytes, more than half of \
         this host's available memory ({available} bytes); use a smaller --size"
    );
    Ok(())
}

/// One timed run of `exp` with `design` on `threads` tasks sharing
/// `size_bytes`; returns the seconds the timed phase took.
fn run_once(
    exp: Experiment,
    design: Design,
    threads: usize,
    size_bytes: u64,
    seed: u64,
    swap_dir: &Path,
) -> anyhow::Result<f64> {
    let sim = Sim::new(SimConfig {
        seed,
        swap_cgroup: design,
        mem_bytes: machine_bytes_for(size_bytes, threads),
    });
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

    let secs = timed_threads(threads, |t| {
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
    Ok(secs)
}

/// Turns on a swap device of `device_bytes` of kind `device`; returns its
/// name.
fn swapon(sim: &Sim, device: Device, device_bytes: u64, swap_dir: &Path) -> anyhow::Result<String> {
    Ok(match device {
        Device::Ram => sim.swapon_ram(device_bytes, None)?,
        // One file per size: a reused swap file must be large enough.
        Device::File => {
            let path = swap_dir.join(format!("memcg-bench-{}M.swap", device_bytes >> 20));
            sim.swapon_file(&path, device_bytes, None)?
        }
    })
}

/// Checks that `/bench` is charged nothing and `device` holds no slot once
/// every task freed its mapping; `run` names the run in the error.
fn check_all_released(sim: &Sim, device: &str, run: impl Fn() -> String) -> anyhow::Result<()> {
    let bench = sim.fs().memcg("/bench")?;
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

/// Runs `body` for each name on its own thread.
fn in_parallel<F>(names: &[String], body: F) -> anyhow::Result<()>
where
    F: Fn(&str) -> anyhow::Result<()> + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = names.iter().map(|n| s.spawn(|| body(n))).collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("set-up thread panicked"))?
        })
    })
}

/// Seconds `threads` threads take to memset (or memcpy) their share of
/// `size_bytes`, on buffers already faulted in.
fn measure_limit(limit: Limit, threads: usize, size_bytes: u64) -> anyhow::Result<f64> {
    let per_thread = usize::try_from(size_bytes / threads as u64)?;
    // Fault the buffers in before timing: the swap paths write to pages
    // that exist too (the RAM disk's, the folio's). Each thread locks only
    // its own pair, so the locks are uncontended.
    let bufs: Vec<std::sync::Mutex<(Vec<u8>, Vec<u8>)>> = (0..threads)
        .map(|t| std::sync::Mutex::new((vec![t as u8 + 1; per_thread], vec![1u8; per_thread])))
        .collect();
    let secs = timed_threads(threads, |t| {
        let mut pair = bufs[t]
            .lock()
            .map_err(|_| anyhow::anyhow!("limit buffer poisoned"))?;
        let (src, dst) = &mut *pair;
        match limit {
            Limit::Memset => dst.fill(0),
            Limit::Memcpy => dst.copy_from_slice(src),
        }
        std::hint::black_box(&dst[..]);
        Ok(())
    })?;
    for (t, pair) in bufs.into_iter().enumerate() {
        let (_, dst) = pair
            .into_inner()
            .map_err(|_| anyhow::anyhow!("limit buffer poisoned"))?;
        let want = match limit {
            Limit::Memset => 0,
            Limit::Memcpy => t as u8 + 1,
        };
        ensure!(
            dst.iter().all(|&b| b == want),
            "{} wrote the wrong bytes",
            limit.name()
        );
    }
    Ok(secs)
}

/// The standard deviation of a rate from that of the time it was computed
/// from (first order: the same relative spread).
fn rate_stdev(rate: f64, mean_us: f64, stdev_us: f64) -> f64 {
    if mean_us > 0.0 {
        rate * stdev_us / mean_us
    } else {
        0.0
    }
}

fn gib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / f64::from(1u32 << 30)
}

#[derive(Debug, Serialize)]
struct ResultRow {
    experiment: String,
    threads: usize,
    design: &'static str,
    /// Mean of the timed phase, µs (the seed's statistic).
    mean_us: f64,
    stdev_us: f64,
    /// Bytes moved per second at the mean time.
    gib_per_s: f64,
    /// Mean time of `locked` divided by this design's (> 1: faster).
    speedup_vs_locked: Option<f64>,
    /// The experiment's bound (memset or memcpy).
    limit: Limit,
    /// This design's GiB/s divided by the limit's GiB/s.
    fraction_of_limit: f64,
    samples_us: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct LimitRow {
    limit: Limit,
    threads: usize,
    mean_us: f64,
    stdev_us: f64,
    gib_per_s: f64,
    samples_us: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct Config {
    size_bytes: u64,
    reps: usize,
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

/// Validated settings of one invocation.
struct Plan {
    size_bytes: u64,
    reps: usize,
    threads: Vec<usize>,
    designs: Vec<Design>,
    experiments: Vec<Experiment>,
    seed: u64,
    swap_dir: Option<PathBuf>,
}

impl Plan {
    fn of(args: &SwapArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let size_bytes = common.scaled(args.size, 64 << 20, 1 << 30);
        common.validate(&[])?;
        for &t in &common.threads {
            ensure!(
                size_bytes > 0 && size_bytes.is_multiple_of(t as u64 * MAX_FOLIO_BYTES),
                "--size {size_bytes} does not split into {t} equal shares of whole 64 KiB folios"
            );
        }
        check_host_fits(size_bytes, &common.threads)?;
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
        Ok(Self {
            size_bytes,
            reps: common.reps(),
            threads: common.threads.clone(),
            designs,
            experiments,
            seed: args.seed,
            swap_dir: args.swap_dir.clone(),
        })
    }

    /// One timed run, with what reproduces it in any error.
    fn run(
        &self,
        swap_dir: &SwapDir,
        exp: Experiment,
        design: Design,
        threads: usize,
    ) -> anyhow::Result<f64> {
        run_once(
            exp,
            design,
            threads,
            self.size_bytes,
            self.seed,
            swap_dir.path(),
        )
        .with_context(|| {
            format!(
                "{} with {design} on {threads} threads (--seed {})",
                exp.name(),
                self.seed
            )
        })
    }
}

/// What [`Benchmark::measure`] found, in µs: `designs[threads][experiment][design]`
/// and `limits[threads][limit]`, in plan and [`Limit::ALL`] order.
struct Samples {
    designs: Vec<Vec<Vec<Vec<f64>>>>,
    limits: Vec<Vec<Vec<f64>>>,
}

impl Benchmark for Plan {
    const NAME: &'static str = "swap";
    type Samples = Samples;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} MiB per run split over the threads, {} reps, mean ± stdev of the timed phase (pageout or fault-in)",
            self.size_bytes >> 20,
            self.reps
        )
    }

    /// A warm-up pass, then every repetition. Repetitions interleave every
    /// configuration so drift spreads evenly, and the design order rotates
    /// each repetition so none always runs first (right after another
    /// experiment).
    fn measure(&self) -> anyhow::Result<Samples> {
        let swap_dir = match &self.swap_dir {
            Some(dir) => SwapDir::Given(dir.clone()),
            None => SwapDir::Temp(
                tempfile::tempdir().context("creating a directory for the swap file")?,
            ),
        };
        let (nt, ne, nd) = (
            self.threads.len(),
            self.experiments.len(),
            self.designs.len(),
        );
        let mut progress = Progress::new(Self::NAME, ((self.reps + 1) * nt * (ne * nd + 2)) as u64);
        warm_up(self, &swap_dir, &mut progress)?;
        let mut samples = Samples {
            designs: vec![vec![vec![Vec::new(); nd]; ne]; nt],
            limits: vec![vec![Vec::new(); Limit::ALL.len()]; nt],
        };
        for rep in 0..self.reps {
            for (ti, &threads) in self.threads.iter().enumerate() {
                for (li, &limit) in Limit::ALL.iter().enumerate() {
                    let secs = measure_limit(limit, threads, self.size_bytes)?;
                    samples.limits[ti][li].push(secs * 1e6);
                    progress.step(1, &format!("rep {} {} x{threads}", rep + 1, limit.name()));
                }
                for (ei, &exp) in self.experiments.iter().enumerate() {
                    for di in (0..nd).map(|k| (k + rep) % nd) {
                        let design = self.designs[di];
                        let secs = self.run(&swap_dir, exp, design, threads)?;
                        samples.designs[ti][ei][di].push(secs * 1e6);
                        let what = format!("rep {} {} {design} x{threads}", rep + 1, exp.name());
                        progress.step(1, &what);
                    }
                }
            }
        }
        progress.finish();
        Ok(samples)
    }

    fn summarise(&self, head: ReportHead, samples: Samples) -> Report {
        let mut limits = Vec::new();
        let mut results = Vec::new();
        for (ti, &threads) in self.threads.iter().enumerate() {
            let limit_samples = &samples.limits[ti];
            for (&limit, samples_us) in Limit::ALL.iter().zip(limit_samples) {
                let st = Stats::of(samples_us);
                limits.push(LimitRow {
                    limit,
                    threads,
                    mean_us: st.mean,
                    stdev_us: st.stdev,
                    gib_per_s: gib_per_s(self.size_bytes, st.mean / 1e6),
                    samples_us: samples_us.clone(),
                });
            }
            let limit_gib = |limit: Limit| {
                let li = Limit::ALL.iter().position(|&l| l == limit).expect("listed");
                gib_per_s(self.size_bytes, Stats::of(&limit_samples[li]).mean / 1e6)
            };
            for (&exp, by_design) in self.experiments.iter().zip(&samples.designs[ti]) {
                let locked = self
                    .designs
                    .iter()
                    .position(|&d| d == Design::Locked)
                    .map(|di| Stats::of(&by_design[di]).mean);
                for (&design, samples_us) in self.designs.iter().zip(by_design) {
                    let st = Stats::of(samples_us);
                    let gib = gib_per_s(self.size_bytes, st.mean / 1e6);
                    results.push(ResultRow {
                        experiment: exp.name(),
                        threads,
                        design: design.name(),
                        mean_us: st.mean,
                        stdev_us: st.stdev,
                        gib_per_s: gib,
                        speedup_vs_locked: locked.map(|l| l / st.mean),
                        limit: exp.limit(),
                        fraction_of_limit: gib / limit_gib(exp.limit()),
                        samples_us: samples_us.clone(),
                    });
                }
            }
        }
        Report {
            head,
            config: Config {
                size_bytes: self.size_bytes,
                reps: self.reps,
                seed: self.seed,
                threads: self.threads.clone(),
            },
            limits,
            results,
        }
    }

    fn print_tables(report: &Report) {
        let reps = report.config.reps;
        let limit_rows = report.limits.iter().map(|l| {
            vec![
                l.limit.name().to_owned(),
                l.threads.to_string(),
                format!("{:.0}", l.mean_us),
                report::fmt_stdev(l.stdev_us, reps, 0),
                format!("{:.2}", l.gib_per_s),
            ]
        });
        report::print_table(
            &["limit", "threads", "mean µs", "stdev µs", "GiB/s"],
            limit_rows,
        );
        let rows = report.results.iter().map(|r| {
            vec![
                r.experiment.clone(),
                r.threads.to_string(),
                r.design.to_owned(),
                format!("{:.0}", r.mean_us),
                report::fmt_stdev(r.stdev_us, reps, 0),
                format!("{:.2}", r.gib_per_s),
                r.speedup_vs_locked
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}x")),
                format!("{:.1}% {}", r.fraction_of_limit * 100.0, r.limit.name()),
            ]
        });
        report::print_table(
            &[
                "experiment",
                "threads",
                "swap_cgroup",
                "mean µs",
                "stdev µs",
                "GiB/s",
                "vs locked",
                "of limit",
            ],
            rows,
        );
    }

    /// GiB/s against threads, one panel per experiment: every design and
    /// the experiment's limit.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = self.experiments.iter().map(|exp| {
            let name = exp.name();
            let designs = self.designs.iter().map(|d| {
                let rows = report.results.iter();
                let rows = rows.filter(|r| r.experiment == name && r.design == d.name());
                let points = rows.map(|r| {
                    let error = rate_stdev(r.gib_per_s, r.mean_us, r.stdev_us);
                    (r.threads, r.gib_per_s, error)
                });
                Series::by_threads(d.name(), points)
            });
            let limits = report.limits.iter().filter(|l| l.limit == exp.limit());
            let limit_points = limits.map(|l| {
                let error = rate_stdev(l.gib_per_s, l.mean_us, l.stdev_us);
                (l.threads, l.gib_per_s, error)
            });
            let limit = Series::by_threads(format!("{} (limit)", exp.limit().name()), limit_points);
            let series = designs.chain([limit]).collect();
            Panel {
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

/// One untimed pass first: it creates the swap files and brings the
/// allocator and page cache to the state every later run sees.
fn warm_up(plan: &Plan, swap_dir: &SwapDir, progress: &mut Progress) -> anyhow::Result<()> {
    for &threads in &plan.threads {
        for &limit in &Limit::ALL {
            measure_limit(limit, threads, plan.size_bytes)?;
            progress.step(1, &format!("warm-up {} x{threads}", limit.name()));
        }
        for &exp in &plan.experiments {
            plan.run(swap_dir, exp, plan.designs[0], threads)?;
            let what = format!("warm-up {} x{threads}", exp.name());
            progress.step(plan.designs.len() as u64, &what);
        }
    }
    Ok(())
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
                let secs = run_once(exp, design, 2, 1 << 20, 7, dir.path()).unwrap();
                assert!(secs > 0.0, "{}", exp.name());
            }
        }
    }

    #[test]
    fn limits_write_the_right_bytes() {
        for limit in Limit::ALL {
            assert!(measure_limit(limit, 2, 1 << 20).unwrap() > 0.0);
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
