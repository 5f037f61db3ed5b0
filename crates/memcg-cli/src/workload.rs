//! `memcg workload`: simulated workloads run once and reported.
//!
//! `readers` is seed 002's `do_test` in-process: files of `seq 8000` on a
//! RAM disk; per run, `drop_caches` 3, then one reader per cgroup under
//! `system.slice/bench/test/1` (mkdir, read the cgroup's file, done), then
//! every reader cgroup removed; `bench` has a `memory.max`. Readers are
//! spread over real threads. It compares, in one run, list_lru `legacy`
//! and `split` and v6.14 folio pinning against the 2026 LRU reparenting.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use memcg::fs::FsSource;
use memcg::list_lru::LruDesign;
use memcg_sim::fill::{FileFill, file_contents};
use memcg_sim::{Sim, SimConfig};
use serde::Serialize;

use crate::bench::timing::thread_cpu_secs;
use crate::report::{self, Chart, Machine, Panel, ReportHead, Series};
use crate::seeds;

/// A simulated workload.
#[derive(Debug, clap::Subcommand)]
pub enum Workload {
    /// Seed 002's 10000-reader experiment (list_lru and dying cgroups).
    Readers(ReadersArgs),
    /// Seeds 000/003's kernel build swapping in a memory cgroup.
    Kbuild(crate::kbuild::KbuildArgs),
    /// vm-scalability's usemem: tasks touching memory at a cgroup's limit.
    Usemem(crate::usemem::UsememArgs),
}

/// `memcg workload readers` flags (defaults: the seed's shape).
#[derive(Debug, clap::Args)]
pub struct ReadersArgs {
    /// Reader cgroups (and files) per run.
    #[arg(long, default_value_t = 10000)]
    pub readers: usize,
    /// Runs of do_test per design.
    #[arg(long, default_value_t = 12)]
    pub runs: usize,
    /// Threads the readers are spread over.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// `memory.max` of `bench` (K/M/G suffixes).
    #[arg(long, default_value = "768M", value_parser = crate::parse_bytes)]
    pub memcg_max: u64,
    /// Lines of `seq` in each file (`seq 8000`: 38893 bytes).
    #[arg(long, default_value_t = 8000)]
    pub seq: u64,
    /// Bytes each memory cgroup charges to its parent for its own
    /// structures, in place of the v6.14 model (K/M suffixes; 0: none)
    /// [default: the model, 14K on the simulated machine's 2 CPUs].
    #[arg(long, value_parser = crate::parse_bytes)]
    pub memcg_metadata: Option<u64>,
    /// The simulated machine's memory (K/M/G/T suffixes) [default: half
    /// of the host's available memory].
    #[arg(long, value_parser = crate::parse_bytes)]
    pub mem: Option<u64>,
    /// The kernel whose behaviour switches the machine follows (6.12,
    /// 6.14 or 7.3; docs/kernel-profiles.md). The designs this workload
    /// compares stay those its own flags name.
    #[arg(long, default_value = "6.14")]
    pub kernel: memcg::profile::KernelVersion,
    /// Seed (file contents are `seq`; the seed names the run).
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw time per run per design as an SVG chart here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// One design compared.
#[derive(Debug, Clone, Copy, Serialize)]
struct Design {
    #[serde(serialize_with = "display")]
    list_lru: LruDesign,
    reparent_lru_folios: bool,
}

fn display<S: serde::Serializer>(d: &LruDesign, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(d)
}

impl Design {
    fn name(self) -> String {
        let folios = if self.reparent_lru_folios {
            "reparent (2026)"
        } else {
            "pin (v6.14)"
        };
        format!("list_lru {}, folios {folios}", self.list_lru)
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize)]
struct Run {
    wall_secs: f64,
    cpu_secs: f64,
    drop_caches_secs: f64,
    mkdir_secs: f64,
    read_secs: f64,
    rmdir_secs: f64,
    reclaim_calls: u64,
    memcgs_visited_per_reclaim: f64,
    /// `nr_dying_descendants` of the root before the run's drop_caches,
    /// after it, and after the rmdirs.
    dying_at_start: usize,
    dying_after_drop: usize,
    dying_at_end: usize,
    bench_max_events: u64,
    bench_usage_bytes_at_end: u64,
}

#[derive(Debug, Serialize)]
struct DesignResult {
    design: Design,
    name: String,
    runs: Vec<Run>,
}

#[derive(Debug, Serialize)]
struct ReadersReport {
    #[serde(flatten)]
    head: ReportHead,
    readers: usize,
    runs: usize,
    threads: usize,
    memcg_max_bytes: u64,
    file_bytes: usize,
    memcg_metadata_bytes: u64,
    results: Vec<DesignResult>,
}

const TEST: &str = "/system.slice/bench/test/1";

pub fn run(w: Workload) -> anyhow::Result<()> {
    match w {
        Workload::Readers(args) => readers(&args),
        Workload::Kbuild(args) => crate::kbuild::run(&args),
        Workload::Usemem(args) => crate::usemem::run(&args),
    }
}

pub(crate) fn readers(args: &ReadersArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.readers > 0 && args.runs > 0 && args.threads > 0,
        "readers, runs and threads must be positive"
    );
    report::check_writable([&args.json, &args.svg].into_iter().flatten())?;
    let designs = [
        (LruDesign::Legacy, false),
        (LruDesign::Split, false),
        (LruDesign::Legacy, true),
        (LruDesign::Split, true),
    ]
    .map(|(list_lru, reparent_lru_folios)| Design {
        list_lru,
        reparent_lru_folios,
    });
    let data = file_contents(FileFill::Seq, 0, seq_bytes(args.seq));
    let mut progress = report::Progress::new("readers", (designs.len() * args.runs) as u64);
    let mut results = Vec::new();
    for design in designs {
        let sim = prepare(args, design, &data)?;
        let mut runs = Vec::new();
        for i in 0..args.runs {
            runs.push(do_test(&sim, args, &data)?);
            progress.step(1, &format!("{} run {}", design.name(), i + 1));
        }
        sim.machine().umount("/tmp/test-fs")?;
        results.push(DesignResult {
            design,
            name: design.name(),
            runs,
        });
    }
    progress.finish();
    let report = ReadersReport {
        head: ReportHead::new("readers", Machine::current()),
        readers: args.readers,
        runs: args.runs,
        threads: args.threads,
        memcg_max_bytes: args.memcg_max,
        file_bytes: data.len(),
        memcg_metadata_bytes: metadata_bytes(args),
        results,
    };
    print_report(&report);
    report::save_json(args.json.as_deref(), &report)?;
    if let Some(path) = &args.svg {
        report::write_svg(path, &chart(&report))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Bytes each memory cgroup charges to its parent for its own structures
/// in these runs.
fn metadata_bytes(args: &ReadersArgs) -> u64 {
    args.memcg_metadata.unwrap_or_else(|| {
        memcg::memcontrol::MemcgMetadata::v6_14(SimConfig::default().nr_cpus, 1).total_bytes()
    })
}

/// Bytes of `seq 1 n`.
fn seq_bytes(n: u64) -> usize {
    (1..=n).map(|i| i.to_string().len() + 1).sum()
}

/// seed 002's `prepare()`: a RAM disk with one file per reader, the
/// cgroups and the limit.
fn prepare(args: &ReadersArgs, design: Design, data: &[u8]) -> anyhow::Result<Sim> {
    let sim = Sim::new(SimConfig {
        seed: args.seed,
        mem_bytes: crate::machine_bytes(args.mem),
        memcg_metadata_bytes: args.memcg_metadata,
        list_lru: design.list_lru,
        reparent_lru_folios: design.reparent_lru_folios,
        ..SimConfig::for_kernel(args.kernel)
    });
    let disk_bytes = (data.len().next_multiple_of(4096) * args.readers) as u64 + (16 << 20);
    sim.machine().mount(
        "/tmp/test-fs",
        FsSource::Ram {
            size_bytes: disk_bytes,
        },
    )?;
    for i in 1..=args.readers {
        sim.write_file("/", &format!("/tmp/test-fs/{i}"), data)?;
    }
    sim.machine().sync()?;
    let fs = sim.fs();
    fs.mkdir_p(TEST).context("mkdir")?;
    fs.write("/cgroup.subtree_control", "+memory")?;
    fs.write("/system.slice/cgroup.subtree_control", "+memory")?;
    fs.write("/system.slice/bench/cgroup.subtree_control", "+memory")?;
    fs.write("/system.slice/bench/test/cgroup.subtree_control", "+memory")?;
    fs.write(
        "/system.slice/bench/test/1/cgroup.subtree_control",
        "+memory",
    )?;
    fs.write(
        "/system.slice/bench/memory.max",
        &args.memcg_max.to_string(),
    )?;
    Ok(sim)
}

/// Seconds spent in each phase, summed over threads.
#[derive(Default)]
struct PhaseSecs {
    mkdir: f64,
    read: f64,
    cpu: f64,
}

/// seed 002's `do_test()`: drop caches, all readers, then all rmdirs.
fn do_test(sim: &Sim, args: &ReadersArgs, data: &[u8]) -> anyhow::Result<Run> {
    let tree = sim.fs().tree().clone();
    let bench = sim.fs().memcg("/system.slice/bench")?;
    let dying = || tree.root_cgroup().nr_dying_descendants();
    let reclaim_before = tree.reclaim_counts();
    let max_before = bench.event(memcg::memcontrol::MemcgEvent::Max);
    let mut run = Run {
        dying_at_start: dying(),
        ..Run::default()
    };
    let cpu0 = thread_cpu_secs()?;
    let start = Instant::now();
    sim.machine()
        .drop_caches(3)
        .map_err(|e| anyhow::anyhow!("drop_caches: {e}"))?;
    run.drop_caches_secs = start.elapsed().as_secs_f64();
    run.dying_after_drop = dying();
    let next = AtomicUsize::new(1);
    let phases = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|_| s.spawn(|| read_worker(sim, args, data, &next)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a reader panicked"))?)
            .collect::<anyhow::Result<Vec<PhaseSecs>>>()
    })?;
    let rmdir_start = Instant::now();
    for i in 1..=args.readers {
        sim.fs().rmdir(&format!("{TEST}/{i}"))?;
    }
    run.rmdir_secs = rmdir_start.elapsed().as_secs_f64();
    run.wall_secs = start.elapsed().as_secs_f64();
    run.cpu_secs = thread_cpu_secs()? - cpu0 + phases.iter().map(|p| p.cpu).sum::<f64>();
    run.mkdir_secs = phases.iter().map(|p| p.mkdir).sum();
    run.read_secs = phases.iter().map(|p| p.read).sum();
    let reclaim = tree.reclaim_counts();
    run.reclaim_calls = reclaim.calls - reclaim_before.calls;
    let visited = reclaim.memcgs_visited - reclaim_before.memcgs_visited;
    run.memcgs_visited_per_reclaim = visited as f64 / run.reclaim_calls.max(1) as f64;
    run.dying_at_end = dying();
    run.bench_max_events = bench.event(memcg::memcontrol::MemcgEvent::Max) - max_before;
    run.bench_usage_bytes_at_end = bench.memory().usage() * 4096;
    Ok(run)
}

/// One thread of readers: takes the next reader number until all are done.
fn read_worker(
    sim: &Sim,
    args: &ReadersArgs,
    data: &[u8],
    next: &AtomicUsize,
) -> anyhow::Result<PhaseSecs> {
    let cpu0 = thread_cpu_secs()?;
    let mut secs = PhaseSecs::default();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i > args.readers {
            break;
        }
        let cgroup = format!("{TEST}/{i}");
        let t0 = Instant::now();
        sim.fs().mkdir(&cgroup)?;
        let t1 = Instant::now();
        let got = sim.read_file(&cgroup, &format!("/tmp/test-fs/{i}"))?;
        secs.mkdir += (t1 - t0).as_secs_f64();
        secs.read += t1.elapsed().as_secs_f64();
        anyhow::ensure!(got == data, "reader {i} read other bytes than were written");
    }
    secs.cpu = thread_cpu_secs()? - cpu0;
    Ok(secs)
}

fn print_report(r: &ReadersReport) {
    println!(
        "readers: {} cgroups under {TEST}, files of {} bytes, bench memory.max {} MiB, {} threads, {} runs; {}",
        r.readers,
        r.file_bytes,
        r.memcg_max_bytes >> 20,
        r.threads,
        r.runs,
        r.head.machine
    );
    let header = [
        "design",
        "run",
        "wall s",
        "cpu s",
        "drop s",
        "mkdir s",
        "read s",
        "rmdir s",
        "reclaims",
        "memcgs/reclaim",
        "dying start",
        "dying after drop",
        "dying end",
    ];
    let rows = r.results.iter().flat_map(|d| {
        d.runs.iter().enumerate().map(move |(i, run)| {
            vec![
                d.name.clone(),
                (i + 1).to_string(),
                format!("{:.3}", run.wall_secs),
                format!("{:.3}", run.cpu_secs),
                format!("{:.3}", run.drop_caches_secs),
                format!("{:.3}", run.mkdir_secs),
                format!("{:.3}", run.read_secs),
                format!("{:.3}", run.rmdir_secs),
                run.reclaim_calls.to_string(),
                format!("{:.0}", run.memcgs_visited_per_reclaim),
                run.dying_at_start.to_string(),
                run.dying_after_drop.to_string(),
                run.dying_at_end.to_string(),
            ]
        })
    });
    report::print_table(&header, rows);
    let seed = seeds::readers_later_over_first(&seeds::READERS_BEFORE);
    for d in &r.results {
        let first = d.runs.first().map_or(0.0, |r| r.wall_secs);
        let later: Vec<f64> = d.runs.iter().skip(1).map(|r| r.wall_secs).collect();
        if !later.is_empty() {
            let median = report::Stats::of(&later).median;
            let ratio = median / first.max(1e-9);
            let verdict = if seeds::readers_slowdown_reproduced(ratio) {
                "reproduced"
            } else {
                "not reproduced"
            };
            println!(
                "{}: run 1 {first:.3} s, later runs {median:.3} s (median; {ratio:.2}x run 1):                  seed 002's later-run slowdown ({seed:.1}x on a kernel) {verdict}                  (criterion: at least {:.1}x)",
                d.name,
                seeds::readers_threshold()
            );
        }
    }
}

fn chart(r: &ReadersReport) -> Chart<'static> {
    let series = r
        .results
        .iter()
        .map(|d| {
            let points = d.runs.iter().enumerate();
            Series::by_threads(
                d.name.clone(),
                points.map(|(i, run)| (i + 1, run.wall_secs, 0.0)),
            )
        })
        .collect();
    Chart {
        title: "seed 002 readers: wall time per run",
        x_label: "run",
        y_label: "seconds",
        panels: vec![Panel {
            title: format!(
                "{} readers, bench memory.max {} MiB",
                r.readers,
                r.memcg_max_bytes >> 20
            ),
            series,
            y_label: None,
        }],
        x_categories: Vec::new(),
    }
}
