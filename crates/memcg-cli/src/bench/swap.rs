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
use memcg::swap_cgroup::Design;
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use super::timed_threads;
use crate::report::{self, Chart, Machine, Panel, Progress, ReportFiles, Series, Stats, Tool};

const PAGE_BYTES: u64 = 4096;
/// The largest folio any experiment uses (64 KiB): sizes are multiples of
/// it per thread.
const MAX_FOLIO_BYTES: u64 = 16 * PAGE_BYTES;
/// Swap space beyond the data: the header page and partly used clusters
/// (2 MiB each) per thread.
const DEVICE_SLACK_BYTES: u64 = 4 << 20;

/// Flags of `memcg bench swap`.
#[derive(Debug, Clone, Args)]
pub struct SwapArgs {
    /// Bytes swapped per run, split over the threads (K/M/G suffixes;
    /// `8G` is the seed's size) [default: 1G; --quick 64M].
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Thread counts (tasks on distinct mappings in parallel), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// swap_cgroup designs, comma separated [default: all five].
    #[arg(long, value_delimiter = ',')]
    pub designs: Vec<Design>,
    /// Experiments, comma separated [default: all six]: swapout-64k-zero-ram,
    /// swapin-4k-zero-ram, swapout-64k-random-ram, swapin-4k-random-ram,
    /// swapout-64k-random-file, swapin-4k-random-file.
    #[arg(long, value_delimiter = ',')]
    pub experiments: Vec<Experiment>,
    /// Repetitions [default: 5; --quick 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Seed of the random page contents.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Directory for the file swap device [default: a temporary directory].
    #[arg(long)]
    pub swap_dir: Option<PathBuf>,
    /// Smaller defaults for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// `--json` and `--svg`.
    #[command(flatten)]
    pub files: ReportFiles,
}

impl SwapArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            size: smoke.then_some(4 << 20),
            threads: if smoke { vec![1] } else { vec![1, 2] },
            designs: if smoke {
                vec![Design::Locked, Design::Memcg]
            } else {
                Vec::new()
            },
            experiments: Vec::new(),
            reps: smoke.then_some(1),
            seed: 0x5eed,
            swap_dir: None,
            quick: true,
            files: ReportFiles::default(),
        }
    }
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

/// The swap device an experiment uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    /// A RAM disk (the seed's brd).
    Ram,
    /// A preallocated file.
    File,
}

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
        let op = match self.op {
            Op::SwapOut => "swapout",
            Op::SwapIn => "swapin",
        };
        let device = match self.device {
            Device::Ram => "ram",
            Device::File => "file",
        };
        format!(
            "{op}-{}k-{}-{device}",
            u64::from(self.folio_pages) * PAGE_BYTES / 1024,
            self.fill.name()
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

impl Limit {
    const ALL: [Limit; 2] = [Limit::Memset, Limit::Memcpy];

    fn name(self) -> &'static str {
        match self {
            Limit::Memset => "memset",
            Limit::Memcpy => "memcpy",
        }
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

/// The simulated machine a run needs: the mappings, a RAM device as large
/// (its pages are machine memory) and the device's tables, with room to
/// spare. Benchmarks size the machine to the experiment; the host must
/// hold it ([`check_host_fits`]).
fn machine_bytes_for(size_bytes: u64, threads: usize) -> u64 {
    let device_bytes = size_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1);
    let tables = memcg::swap_state::swap_tables_pages(device_bytes / PAGE_BYTES) * PAGE_BYTES;
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
    let bench = sim.fs().memcg("/bench")?;
    let device_bytes = size_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1);
    let device = match exp.device {
        Device::Ram => sim.swapon_ram(device_bytes, None)?,
        // One file per size: a reused swap file must be large enough.
        Device::File => {
            let path = swap_dir.join(format!("memcg-bench-{}M.swap", device_bytes >> 20));
            sim.swapon_file(&path, device_bytes, None)?
        }
    };
    let per_task_bytes = size_bytes / threads as u64;
    let per_task_pages = per_task_bytes / PAGE_BYTES;
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
    let inuse = sim
        .swap()
        .swapfiles()
        .by_name(&device)
        .context("the device is still on")?
        .inuse_pages();
    ensure!(
        (bench.memory().usage(), bench.swap().usage(), inuse) == (0, 0, 0),
        "{} with {design}: memory {} swap {} slots {} left after free",
        exp.name(),
        bench.memory().usage(),
        bench.swap().usage(),
        inuse
    );
    sim.swapoff(&device)?;
    Ok(secs)
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
    bench: &'static str,
    tool: Tool,
    machine: Machine,
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
}

impl Plan {
    fn of(args: &SwapArgs) -> anyhow::Result<Self> {
        let size_bytes = args
            .size
            .unwrap_or(if args.quick { 64 << 20 } else { 1 << 30 });
        let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 });
        ensure!(reps > 0, "--reps must be at least 1");
        ensure!(
            !args.threads.is_empty() && !args.threads.contains(&0),
            "--threads needs counts of at least 1"
        );
        for &t in &args.threads {
            ensure!(
                size_bytes > 0 && size_bytes.is_multiple_of(t as u64 * MAX_FOLIO_BYTES),
                "--size {size_bytes} does not split into {t} equal shares of whole 64 KiB folios"
            );
        }
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
            reps,
            threads: args.threads.clone(),
            designs,
            experiments,
        })
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &SwapArgs) -> anyhow::Result<()> {
    let plan = Plan::of(args)?;
    check_host_fits(plan.size_bytes, &plan.threads)?;
    args.files.validate()?;
    let swap_dir = match &args.swap_dir {
        Some(dir) => SwapDir::Given(dir.clone()),
        None => {
            SwapDir::Temp(tempfile::tempdir().context("creating a directory for the swap file")?)
        }
    };
    let machine = Machine::current();
    println!("## swap on {machine}");
    println!(
        "{} MiB per run split over the threads, {} reps, mean ± stdev of the timed phase (pageout or fault-in)\n",
        plan.size_bytes >> 20,
        plan.reps
    );

    // samples[threads][experiment][design] and limit_samples[threads][limit],
    // in µs. Repetitions interleave every configuration so drift spreads
    // evenly, and the design order rotates each repetition so none always
    // runs first (right after another experiment).
    let (nt, ne, nd) = (
        plan.threads.len(),
        plan.experiments.len(),
        plan.designs.len(),
    );
    let mut samples = vec![vec![vec![Vec::new(); nd]; ne]; nt];
    let mut limit_samples = vec![vec![Vec::new(); Limit::ALL.len()]; nt];
    let mut progress = Progress::new("swap", ((plan.reps + 1) * nt * (ne * nd + 2)) as u64);
    let run = |exp: Experiment, design: Design, threads: usize| {
        run_once(
            exp,
            design,
            threads,
            plan.size_bytes,
            args.seed,
            swap_dir.path(),
        )
        .with_context(|| {
            format!(
                "{} with {design} on {threads} threads (--seed {})",
                exp.name(),
                args.seed
            )
        })
    };
    // One untimed pass first: it creates the swap files and brings the
    // allocator and page cache to the state every later run sees.
    for &threads in &plan.threads {
        for &limit in &Limit::ALL {
            measure_limit(limit, threads, plan.size_bytes)?;
            progress.step(1, &format!("warm-up {} x{threads}", limit.name()));
        }
        for &exp in &plan.experiments {
            run(exp, plan.designs[0], threads)?;
            progress.step(nd as u64, &format!("warm-up {} x{threads}", exp.name()));
        }
    }
    for rep in 0..plan.reps {
        for (ti, &threads) in plan.threads.iter().enumerate() {
            for (li, &limit) in Limit::ALL.iter().enumerate() {
                let secs = measure_limit(limit, threads, plan.size_bytes)?;
                limit_samples[ti][li].push(secs * 1e6);
                progress.step(1, &format!("rep {} {} x{threads}", rep + 1, limit.name()));
            }
            for (ei, &exp) in plan.experiments.iter().enumerate() {
                for di in (0..nd).map(|k| (k + rep) % nd) {
                    let secs = run(exp, plan.designs[di], threads)?;
                    samples[ti][ei][di].push(secs * 1e6);
                    progress.step(
                        1,
                        &format!(
                            "rep {} {} {} x{threads}",
                            rep + 1,
                            exp.name(),
                            plan.designs[di]
                        ),
                    );
                }
            }
        }
    }
    progress.finish();

    let report = summarise(&plan, &machine, args.seed, &samples, &limit_samples);
    print_tables(&report);
    args.files.write(&report, || chart(&plan, &report))
}

fn summarise(
    plan: &Plan,
    machine: &Machine,
    seed: u64,
    samples: &[Vec<Vec<Vec<f64>>>],
    limit_samples: &[Vec<Vec<f64>>],
) -> Report {
    let mut limits = Vec::new();
    let mut results = Vec::new();
    for (ti, &threads) in plan.threads.iter().enumerate() {
        let limit_gib = |limit: Limit| {
            let li = Limit::ALL.iter().position(|&l| l == limit).expect("listed");
            gib_per_s(
                plan.size_bytes,
                Stats::of(&limit_samples[ti][li]).mean / 1e6,
            )
        };
        for (li, &limit) in Limit::ALL.iter().enumerate() {
            let st = Stats::of(&limit_samples[ti][li]);
            limits.push(LimitRow {
                limit,
                threads,
                mean_us: st.mean,
                stdev_us: st.stdev,
                gib_per_s: gib_per_s(plan.size_bytes, st.mean / 1e6),
                samples_us: limit_samples[ti][li].clone(),
            });
        }
        for (ei, &exp) in plan.experiments.iter().enumerate() {
            let locked = plan
                .designs
                .iter()
                .position(|&d| d == Design::Locked)
                .map(|di| Stats::of(&samples[ti][ei][di]).mean);
            for (di, &design) in plan.designs.iter().enumerate() {
                let st = Stats::of(&samples[ti][ei][di]);
                let gib = gib_per_s(plan.size_bytes, st.mean / 1e6);
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
                    samples_us: samples[ti][ei][di].clone(),
                });
            }
        }
    }
    Report {
        bench: "swap",
        tool: Tool::current(),
        machine: machine.clone(),
        config: Config {
            size_bytes: plan.size_bytes,
            reps: plan.reps,
            seed,
            threads: plan.threads.clone(),
        },
        limits,
        results,
    }
}

fn print_tables(report: &Report) {
    let limit_rows = report
        .limits
        .iter()
        .map(|l| {
            vec![
                l.limit.name().to_owned(),
                l.threads.to_string(),
                format!("{:.0}", l.mean_us),
                report::fmt_stdev(l.stdev_us, report.config.reps, 0),
                format!("{:.2}", l.gib_per_s),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(
            &["limit", "threads", "mean µs", "stdev µs", "GiB/s"],
            limit_rows
        )
    );
    let rows = report
        .results
        .iter()
        .map(|r| {
            vec![
                r.experiment.clone(),
                r.threads.to_string(),
                r.design.to_owned(),
                format!("{:.0}", r.mean_us),
                report::fmt_stdev(r.stdev_us, report.config.reps, 0),
                format!("{:.2}", r.gib_per_s),
                r.speedup_vs_locked
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}x")),
                format!("{:.1}% {}", r.fraction_of_limit * 100.0, r.limit.name()),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(
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
            rows
        )
    );
}

fn chart(plan: &Plan, report: &Report) -> Chart<'static> {
    let panels = plan
        .experiments
        .iter()
        .map(|exp| {
            let name = exp.name();
            let mut series: Vec<Series> = plan
                .designs
                .iter()
                .map(|d| {
                    let rows: Vec<&ResultRow> = report
                        .results
                        .iter()
                        .filter(|r| r.experiment == name && r.design == d.name())
                        .collect();
                    Series {
                        name: d.name().to_owned(),
                        points: rows
                            .iter()
                            .map(|r| (r.threads as f64, r.gib_per_s))
                            .collect(),
                        errors: rows
                            .iter()
                            .map(|r| rate_stdev(r.gib_per_s, r.mean_us, r.stdev_us))
                            .collect(),
                    }
                })
                .collect();
            let limits: Vec<&LimitRow> = report
                .limits
                .iter()
                .filter(|l| l.limit == exp.limit())
                .collect();
            series.push(Series {
                name: format!("{} (limit)", exp.limit().name()),
                points: limits
                    .iter()
                    .map(|l| (l.threads as f64, l.gib_per_s))
                    .collect(),
                errors: limits
                    .iter()
                    .map(|l| rate_stdev(l.gib_per_s, l.mean_us, l.stdev_us))
                    .collect(),
            });
            Panel {
                title: name,
                series,
            }
        })
        .collect();
    Chart {
        title: "swap-out / swap-in GiB/s by swap_cgroup design",
        x_label: "threads",
        y_label: "GiB/s",
        panels,
    }
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
        args.threads = vec![3];
        assert!(Plan::of(&args).is_err());
        args.threads = vec![2];
        args.size = Some((1 << 20) + 4096);
        assert!(Plan::of(&args).is_err());
        args.size = Some(1 << 20);
        assert!(Plan::of(&args).is_ok());
    }
}
