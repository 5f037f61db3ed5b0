//! `memcg reproduce`: the seeds' experiments in one command, each table
//! beside the figures the seeds published, written to a report directory.
//!
//! - **Kernel build** (seeds 000/003): `make -j96` in a 1.5G memcg with 4K
//!   folios (2G with 64K), scaled to `--jobs` jobs of 16 MiB (21 MiB with
//!   64K folios, keeping the seed's 4:3), once per swap_cgroup design and
//!   repetition (`memcg_sim::kbuild`). Medians of wall and CPU time; the
//!   seed's "sys" and "real" deltas are after/before ratios against
//!   `locked`.
//! - **Real build** (seed 000's shape with real processes): `make -j2`
//!   of zlib under `memcg run`, anonymous memory charged and swapped,
//!   once per design (`real_kbuild`; skipped, saying so, without root,
//!   /dev/fuse or the cached source; one design under `--smoke`).
//! - **The kernels' selftests under `memcg run`**: `test_core`,
//!   `test_memcontrol` and `test_zswap` of each booted kernel run on the
//!   simulator and compared test by test with the kernel's record
//!   (`memcg testbed selftests --sim`; skipped, saying so, under `--smoke`,
//!   without root and /dev/fuse, or without a prepared test bed).
//! - **Sequential swap** (seed 000): swap-out of 64K zero folios and
//!   swap-in of 4K zero folios on a RAM disk, through `memcg bench swap`.
//! - **Readers** (seed 002): `do_test` with list_lru `legacy` and `split`
//!   and folio pinning against reparenting, through `memcg workload
//!   readers`.
//!
//! Beside each table: the seeds' figures as they published them, and a
//! verdict computed from this run by a stated criterion, saying whether
//! it reproduces the seed's effect and, if not, why not in this run's
//! numbers (`seeds.rs`). Everything here is measured on this machine
//! except the projection to 96 jobs, which says so.

mod kernel;
mod real_kbuild;

use std::path::{Path, PathBuf};

use anyhow::Context;
use memcg::swap_cgroup::{Design, SAMPLE_EVERY};
use memcg_sim::kbuild::{self, KbuildConfig};
use serde::Serialize;
use serde_json::Value;

use crate::bench::swap::{Experiment, SwapArgs};
use crate::projection::{self, Point};
use crate::report::{self, Machine, Progress, ReportFiles, ReportHead, Stats};
use crate::seeds;
use crate::testbed::sim_selftests::{self, SimRow};
use crate::workload::ReadersArgs;

/// `memcg reproduce` flags.
#[derive(Debug, clap::Args)]
pub struct ReproduceArgs {
    /// Smaller scale: about 110 s on a 2-vCPU VM (AMD EPYC), the build
    /// excluded.
    #[arg(long)]
    pub quick: bool,
    /// The smallest scale, for CI.
    #[arg(long, conflicts_with = "quick")]
    pub smoke: bool,
    /// The report directory.
    #[arg(long, default_value = "memcg-report")]
    pub out: PathBuf,
    /// Jobs of the kernel builds [default: 4; --quick and --smoke 2].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Seed of every workload.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// The kernel whose behaviour switches the simulated machines follow
    /// (6.12, 6.14 or 7.3; docs/kernel-profiles.md); the designs compared
    /// stay the seeds'. The seeds' figures were taken on 6.14.
    #[arg(long, default_value = "6.14")]
    pub kernel: memcg::profile::KernelVersion,
    /// Readers of the real-kernel column (seed 002's shape on booted 6.12
    /// and 7.3) [default: 400; --quick 200; --smoke 20].
    #[arg(long)]
    pub testbed_readers: Option<usize>,
    /// Runs of the real-kernel column's readers [default: 4; --quick 3;
    /// --smoke 2].
    #[arg(long)]
    pub testbed_runs: Option<usize>,
    /// The test bed's cache [default: $MEMCG_TESTBED_CACHE, else
    /// ~/.cache/memcg-testbed]; without prepared kernels the report says
    /// so and has no real-kernel column.
    #[arg(long)]
    pub testbed_cache: Option<PathBuf>,
}

/// The scale of one reproduction.
struct Scale {
    name: &'static str,
    jobs: usize,
    tasks_per_job: usize,
    heap_max_bytes: u64,
    reps: usize,
    swap_bytes: u64,
    readers: usize,
    reader_runs: usize,
    kernel: memcg::profile::KernelVersion,
}

impl Scale {
    fn of(args: &ReproduceArgs) -> Self {
        let (name, jobs, tasks, heap, reps, swap, readers, runs) = if args.smoke {
            ("smoke", 2, 2, 4 << 20, 1, 4 << 20, 40, 2)
        } else if args.quick {
            ("quick", 2, 16, 48 << 20, 3, 64 << 20, 1000, 3)
        } else {
            ("full", 4, 24, 48 << 20, 5, 1 << 30, 10_000, 12)
        };
        Self {
            name,
            jobs: args.jobs.unwrap_or(jobs),
            tasks_per_job: tasks,
            heap_max_bytes: heap,
            reps,
            swap_bytes: swap,
            readers,
            reader_runs: runs,
            kernel: args.kernel,
        }
    }
}

/// One kernel-build row: a design's medians.
#[derive(Debug, Serialize)]
struct KbuildRow {
    folio_kib: u64,
    swap_cgroup: String,
    wall_secs: f64,
    cpu_secs: f64,
    reclaim_secs: f64,
    pages_out: u64,
    pages_in: u64,
    /// swap_cgroup operations per build (mean over repetitions), from the
    /// swap events.
    swap_cgroup_ops: u64,
    /// swap_cgroup calls per build, measured (sampled calls times the
    /// sampling rate; every lookup included), mean over repetitions.
    swap_cgroup_calls: u64,
    /// Measured medians per call: in the map, waiting for a lock, holding
    /// one (the critical section), ns.
    swap_cgroup_ns_per_call: f64,
    swap_cgroup_lock_wait_ns_per_call: f64,
    swap_cgroup_lock_held_ns_per_call: f64,
    /// Median share of the build's CPU spent in swap_cgroup calls.
    swap_cgroup_cpu_share: f64,
    /// Median CPU and wall time over `locked`'s.
    cpu_vs_locked: f64,
    wall_vs_locked: f64,
    samples_wall_secs: Vec<f64>,
    samples_cpu_secs: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct ReproduceReport {
    #[serde(flatten)]
    head: ReportHead,
    scale: &'static str,
    jobs: usize,
    seed: u64,
    kbuild: Vec<KbuildRow>,
    projection: Projection,
}

/// Every file `memcg reproduce` writes in its report directory.
const OUTPUTS: [&str; 13] = [
    "kbuild.json",
    "kbuild.svg",
    "real_kbuild.json",
    "real_kbuild.txt",
    "selftests_sim.json",
    "projection.svg",
    "swap.json",
    "swap.svg",
    "readers.json",
    "readers.svg",
    "kernel.json",
    "kernel.svg",
    "report.md",
];

/// Runs `memcg reproduce`.
pub fn run(args: &ReproduceArgs) -> anyhow::Result<()> {
    let scale = Scale::of(args);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    report::check_writable(OUTPUTS.map(|f| args.out.join(f)))?;
    let kbuild = kbuild_tables(&scale, args.seed)?;
    let projection = projection(&scale, args.seed, &kbuild, &args.out)?;
    let real = real_build(&scale, &args.out)?;
    let selftests = selftests_sim(&scale, args.testbed_cache.as_deref(), &args.out)?;
    swap_table(&scale, &args.out)?;
    readers_table(&scale, args.seed, &args.out)?;
    let shape = kernel::Shape::of(scale.name, args.testbed_readers, args.testbed_runs);
    let column = kernel::column(shape, args.testbed_cache.as_deref(), args.seed, &args.out)?;
    let report = ReproduceReport {
        head: ReportHead::new("reproduce", Machine::current()),
        scale: scale.name,
        jobs: scale.jobs,
        seed: args.seed,
        kbuild,
        projection,
    };
    report::write_json(&args.out.join("kbuild.json"), &report)?;
    report::write_svg(&args.out.join("kbuild.svg"), &kbuild_chart(&report))?;
    let mut md = markdown(&report, &real_kbuild::markdown(&real), &args.out)?;
    md.push_str(&selftests_markdown(&selftests));
    md.push_str(&kernel::markdown(&column));
    std::fs::write(args.out.join("report.md"), &md)?;
    println!("{md}");
    println!("wrote {}", args.out.join("report.md").display());
    Ok(())
}

/// Every design's kernel builds with 4K and 64K folios, `reps` each,
/// interleaved.
fn kbuild_tables(scale: &Scale, seed: u64) -> anyhow::Result<Vec<KbuildRow>> {
    let mut rows = Vec::new();
    let steps = (2 * Design::ALL.len() * scale.reps) as u64;
    let mut progress = Progress::new("reproduce kbuild", steps);
    for folio_pages in [1u32, 16] {
        let mut samples = vec![Vec::new(); Design::ALL.len()];
        for rep in 0..scale.reps {
            for (d, &design) in Design::ALL.iter().enumerate() {
                let config = kbuild_config(scale, seed, folio_pages, design);
                let r = kbuild::run(&config)
                    .with_context(|| format!("kbuild {design} (--seed {seed})"))?;
                samples[d].push(r);
                progress.step(
                    1,
                    &format!("kbuild {}K {design} rep {}", folio_pages * 4, rep + 1),
                );
            }
        }
        rows.extend(kbuild_rows(folio_pages, &samples));
    }
    progress.finish();
    Ok(rows)
}

fn kbuild_config(scale: &Scale, seed: u64, folio_pages: u32, design: Design) -> KbuildConfig {
    let per_job: u64 = if folio_pages == 1 {
        16 << 20
    } else {
        (64 << 20) / 3
    };
    KbuildConfig {
        tasks_per_job: scale.tasks_per_job,
        memcg_max_bytes: (per_job * scale.jobs as u64).next_multiple_of(1 << 20),
        folio_pages,
        swap_cgroup: design,
        behaviour: scale.kernel.behaviour(),
        seed,
        heap_min_bytes: (scale.heap_max_bytes / 24).max(64 << 10),
        heap_max_bytes: scale.heap_max_bytes,
        ..KbuildConfig::scaled(scale.jobs)
    }
}

fn kbuild_rows(folio_pages: u32, samples: &[Vec<kbuild::KbuildResult>]) -> Vec<KbuildRow> {
    let median = |f: &dyn Fn(&kbuild::KbuildResult) -> f64, d: usize| {
        Stats::of(&samples[d].iter().map(f).collect::<Vec<_>>()).median
    };
    let locked = Design::ALL
        .iter()
        .position(|&d| d == Design::Locked)
        .expect("locked is a design");
    let (locked_cpu, locked_wall) = (
        median(&|r| r.cpu_secs, locked),
        median(&|r| r.wall_secs, locked),
    );
    Design::ALL
        .iter()
        .enumerate()
        .map(|(d, design)| {
            let cpu = median(&|r| r.cpu_secs, d);
            let wall = median(&|r| r.wall_secs, d);
            KbuildRow {
                folio_kib: u64::from(folio_pages) * 4,
                swap_cgroup: design.to_string(),
                wall_secs: wall,
                cpu_secs: cpu,
                reclaim_secs: median(&|r| r.reclaim_secs, d),
                pages_out: samples[d]
                    .iter()
                    .map(|r| r.pswpout + r.zswpout)
                    .sum::<u64>()
                    / samples[d].len() as u64,
                pages_in: samples[d].iter().map(|r| r.pswpin + r.zswpin).sum::<u64>()
                    / samples[d].len() as u64,
                swap_cgroup_ops: samples[d].iter().map(|r| r.swap_cgroup_ops).sum::<u64>()
                    / samples[d].len() as u64,
                swap_cgroup_calls: samples[d]
                    .iter()
                    .map(|r| r.swap_cgroup.sampled_calls * SAMPLE_EVERY)
                    .sum::<u64>()
                    / samples[d].len() as u64,
                swap_cgroup_ns_per_call: median(&|r| r.swap_cgroup.mean_in_map_ns(), d),
                swap_cgroup_lock_wait_ns_per_call: median(
                    &|r| r.swap_cgroup.mean_lock_wait_ns(),
                    d,
                ),
                swap_cgroup_lock_held_ns_per_call: median(
                    &|r| r.swap_cgroup.mean_lock_held_ns(),
                    d,
                ),
                swap_cgroup_cpu_share: median(&|r| r.swap_cgroup_secs() / r.cpu_secs, d),
                cpu_vs_locked: cpu / locked_cpu,
                wall_vs_locked: wall / locked_wall,
                samples_wall_secs: samples[d].iter().map(|r| r.wall_secs).collect(),
                samples_cpu_secs: samples[d].iter().map(|r| r.cpu_secs).collect(),
            }
        })
        .collect()
}

/// The seed's two sequential swap experiments, every design, through
/// `memcg bench swap` (its JSON and chart land in `out`).
fn swap_table(scale: &Scale, out: &Path) -> anyhow::Result<()> {
    let mut args = SwapArgs::for_suite(scale.name == "smoke");
    args.size = Some(scale.swap_bytes);
    args.designs = Design::ALL.to_vec();
    args.experiments = ["swapout-64k-zero-ram", "swapin-4k-zero-ram"]
        .iter()
        .map(|e| e.parse::<Experiment>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()?;
    args.common.threads = vec![1];
    args.common.reps = Some(if scale.name == "full" {
        9
    } else {
        scale.reps.max(3)
    });
    args.common.files = ReportFiles::in_dir(Some(out), "swap")?;
    crate::bench::swap::run(&args)
}

/// Seed 002's readers through `memcg workload readers`.
fn readers_table(scale: &Scale, seed: u64, out: &Path) -> anyhow::Result<()> {
    let args = ReadersArgs {
        readers: scale.readers,
        runs: scale.reader_runs,
        threads: 2,
        memcg_max: 768 << 20,
        seq: 8000,
        // The machine's default, as the seed's kernel charges its own.
        memcg_metadata: memcg_sim::SimConfig::default().memcg_metadata_bytes,
        mem: None,
        kernel: scale.kernel,
        seed,
        json: Some(out.join("readers.json")),
        svg: Some(out.join("readers.svg")),
    };
    crate::workload::readers(&args)
}

/// Seed 000's shape with real processes: `make -j2` of zlib per design
/// (only `memcg`'s under `--smoke`).
fn real_build(scale: &Scale, out: &Path) -> anyhow::Result<real_kbuild::RealKbuild> {
    let designs = if scale.name == "smoke" {
        vec![Design::Memcg]
    } else {
        Design::ALL.to_vec()
    };
    real_kbuild::table(
        &real_kbuild::default_cache(),
        &designs,
        2,
        scale.kernel,
        out,
    )
}

/// The kernels' own selftests run on the simulator under `memcg run`
/// against the booted kernels' record (`memcg testbed selftests --sim`),
/// written to `selftests_sim.json`; why not, when it cannot run (under
/// `--smoke`, without root and /dev/fuse, without a prepared test bed).
fn selftests_sim(
    scale: &Scale,
    cache: Option<&Path>,
    out: &Path,
) -> anyhow::Result<Result<Vec<SimRow>, String>> {
    let rows = if scale.name == "smoke" {
        Err("skipped under --smoke (CI runs `memcg testbed selftests --sim` itself)".to_owned())
    } else if !crate::bench::fuse::usable() {
        Err("skipped: needs root and /dev/fuse".to_owned())
    } else {
        sim_selftests::comparison(cache)?
    };
    report::write_json(&out.join("selftests_sim.json"), &rows)?;
    Ok(rows)
}

/// The selftests section of `report.md`: one row per kernel and test.
fn selftests_markdown(rows: &Result<Vec<SimRow>, String>) -> String {
    let mut md = String::from(
        "\n## The kernels' selftests under `memcg run`\n\n\
         `test_core`, `test_memcontrol` and `test_zswap` from Debian's linux-source of each \
         kernel, built by `memcg testbed prepare`, unmodified, run under `memcg run --kernel K \
         --mem 2G --cpus 2 --swap 2G --fs DIR=ram:400M` with their cwd on DIR, against the \
         results of the same binaries on the booted kernel \
         (`tests/differential/selftests.expected`); a difference must have its reason in \
         `tests/differential/selftests.sim-known`.\n\n",
    );
    let rows = match rows {
        Err(why) => return md + &format!("Selftests {why}.\n"),
        Ok(rows) => rows,
    };
    let agree = rows
        .iter()
        .filter(|r| r.verdict.starts_with("agree"))
        .count();
    let known = rows
        .iter()
        .filter(|r| r.verdict.starts_with("known"))
        .count();
    md.push_str(&format!(
        "{agree} of {} agree, {known} differ with a known reason, {} unexplained.\n\n\
         | kernel | program | test | booted | simulator | verdict |\n|---|---|---|---|---|---|\n",
        rows.len(),
        rows.len() - agree - known
    ));
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | `{}` | {} | {} | {} |\n",
            r.kernel, r.program, r.test, r.booted, r.simulator, r.verdict
        ));
    }
    md
}

/// `report.md`: every table beside the seeds' figures, the real build
/// (`real`, markdown) after the simulated one.
fn markdown(report: &ReproduceReport, real: &str, out: &Path) -> anyhow::Result<String> {
    let mut md = String::new();
    md.push_str(&format!(
        "# memcg reproduce ({} scale)\n\nMachine: {}. Tool: {} (commit {}). Seed {}.\n\
         Every figure below is **measured** on this machine; the seeds' are theirs \
         (96 CPUs, bare metal).\n\n",
        report.scale,
        report.head.machine,
        report.head.tool.version,
        report.head.tool.commit,
        report.seed
    ));
    md.push_str(&kbuild_markdown(report));
    md.push_str(real);
    md.push_str(&projection_markdown(&report.projection));
    md.push_str(&swap_markdown(&read_json(&out.join("swap.json"))?));
    md.push_str(&readers_markdown(&read_json(&out.join("readers.json"))?));
    Ok(md)
}

fn kbuild_markdown(report: &ReproduceReport) -> String {
    let mut md = kbuild_seed_figures(report.jobs);
    md.push_str(&kbuild_run_table(report));
    md.push_str(&kbuild_inside_table(report));
    md
}

/// The section's opening: the set-up, and the seeds' published figures.
fn kbuild_seed_figures(jobs: usize) -> String {
    let mut md = format!(
        "## Kernel build in a memcg (seeds 000/003)\n\n{} jobs (the seed: 96), 16 MiB of \
         memory.max per job with 4K folios, 21 MiB with 64K (the seed: 1.5G and 2G), RAM \
         swap. CPU time is the simulated kernel's work (the seed's \"sys\").\n\n\
         The seeds' published figures (`make -j96` on 96 CPUs; before: the device lock, \
         `locked`; after: `packed`):\n\n\
         | seed | build | before | after | after/before |\n|---|---|---|---|---|\n",
        jobs
    );
    for (seed, build, figure) in [
        (
            "000/003 (6 runs)",
            "4K folios, 1.5G: sys",
            seeds::KBUILD_4K_SYS,
        ),
        ("000/003", "4K folios: real", seeds::KBUILD_4K_REAL),
        ("000/003", "64K folios, 2G: sys", seeds::KBUILD_64K_SYS),
        ("000/003", "64K folios: real", seeds::KBUILD_64K_REAL),
        (
            "001 (first version, 10 runs)",
            "4K folios: sys",
            seeds::KBUILD_V1_4K_SYS,
        ),
        ("001", "64K folios: sys", seeds::KBUILD_V1_64K_SYS),
    ] {
        md.push_str(&format!(
            "| {seed} | {build} | {} {} | {} {} | {:.3} |\n",
            figure.before,
            figure.unit,
            figure.after,
            figure.unit,
            figure.ratio()
        ));
    }
    md
}

/// This run's builds beside the seeds' ratios, and the verdicts.
fn kbuild_run_table(report: &ReproduceReport) -> String {
    let mut md = String::from(
        "\nThis run (**measured**, medians over the repetitions):\n\n\
         | folio | swap_cgroup | wall s | CPU s | CPU vs locked | wall vs locked | seed: sys after/before | seed: real after/before |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in &report.kbuild {
        let (sys, real) = if r.folio_kib == 4 {
            (seeds::KBUILD_4K_SYS, seeds::KBUILD_4K_REAL)
        } else {
            (seeds::KBUILD_64K_SYS, seeds::KBUILD_64K_REAL)
        };
        let (sys, real) = if r.swap_cgroup == "packed" {
            (
                format!("{:.3}", sys.ratio()),
                format!("{:.3}", real.ratio()),
            )
        } else {
            (String::new(), String::new())
        };
        md.push_str(&format!(
            "| {}K | {} | {:.2} | {:.2} | {:.3} | {:.3} | {sys} | {real} |\n",
            r.folio_kib, r.swap_cgroup, r.wall_secs, r.cpu_secs, r.cpu_vs_locked, r.wall_vs_locked,
        ));
    }
    md.push('\n');
    for (folio_kib, seed) in [(4, seeds::KBUILD_4K_SYS), (64, seeds::KBUILD_64K_SYS)] {
        if let Some(verdict) = kbuild_verdict(report, folio_kib, seed) {
            md.push_str(&format!("{folio_kib}K folios: {verdict}\n\n"));
        }
    }
    md
}

/// What swap_cgroup's calls cost inside those builds (sampled timing).
fn kbuild_inside_table(report: &ReproduceReport) -> String {
    let mut md = format!(
        "Inside those builds (**measured**: one swap_cgroup call in {SAMPLE_EVERY} per \
         thread timed, clock overhead subtracted; medians over repetitions). `calls` \
         counts every record, clear and lookup; the critical section is the time a call \
         holds the device lock (`locked`) or a cluster lock (`cluster`).\n\n\
         | folio | swap_cgroup | calls per build | calls per job-second | ns per call | lock wait ns | critical section ns | share of CPU |\n\
         |---|---|---|---|---|---|---|---|\n"
    );
    for r in &report.kbuild {
        md.push_str(&format!(
            "| {}K | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.3}% |\n",
            r.folio_kib,
            r.swap_cgroup,
            r.swap_cgroup_calls,
            r.swap_cgroup_calls as f64 / r.cpu_secs,
            r.swap_cgroup_ns_per_call,
            r.swap_cgroup_lock_wait_ns_per_call,
            r.swap_cgroup_lock_held_ns_per_call,
            r.swap_cgroup_cpu_share * 100.0,
        ));
    }
    let most = report
        .kbuild
        .iter()
        .map(|r| r.swap_cgroup_cpu_share)
        .fold(0.0, f64::max);
    md.push_str(&format!(
        "\nIn every design swap_cgroup calls take at most {:.2}% of the build's CPU on this \
         machine. For the seed's −10% sys to come from this lock alone, its calls must \
         take over 10% of sys at 96 CPUs: that is the wait for the lock, not the calls \
         themselves.\n\n",
        most * 100.0
    ));
    md
}

/// Seeds 000/003's verdict for the builds with `folio_kib` folios, from
/// `packed`'s and `locked`'s rows.
fn kbuild_verdict(
    report: &ReproduceReport,
    folio_kib: u64,
    seed: seeds::Published,
) -> Option<seeds::Verdict> {
    let row = |design: &str| {
        report
            .kbuild
            .iter()
            .find(|r| r.folio_kib == folio_kib && r.swap_cgroup == design)
    };
    let (packed, locked) = (row("packed")?, row("locked")?);
    Some(seeds::kbuild(
        seed,
        seeds::KbuildFacts {
            packed_over_locked: packed.cpu_vs_locked,
            noise: seeds::ratio_noise(&packed.samples_cpu_secs, &locked.samples_cpu_secs),
            locked_share: locked.swap_cgroup_cpu_share,
            locked_wait_ns: locked.swap_cgroup_lock_wait_ns_per_call,
            locked_calls: locked.swap_cgroup_calls,
            jobs: report.jobs,
            cpus: report.head.machine.cpus,
        },
    ))
}

fn swap_markdown(swap: &Value) -> String {
    let experiments = [
        (
            "swapout-64k-zero-ram",
            "swap-out of 8G of 64K zero folios",
            seeds::SWAPOUT_64K_ZERO,
        ),
        (
            "swapin-4k-zero-ram",
            "swap-in of 8G of 4K zero folios",
            seeds::SWAPIN_4K_ZERO,
        ),
    ];
    let mut md = String::from(
        "## Sequential swap of zero folios (seed 000)\n\n\
         The seed's published figures (a brd RAM disk, 24 runs; before: `locked`, after: \
         `packed`):\n\n| experiment | before | after | after/before |\n|---|---|---|---|\n",
    );
    for (_, what, seed) in experiments {
        md.push_str(&format!(
            "| {what} | {} {} | {} {} | {:.4} |\n",
            seed.before,
            seed.unit,
            seed.after,
            seed.unit,
            seed.ratio()
        ));
    }
    md.push_str(
        "\nThis run (**measured**):\n\n\
         | experiment | swap_cgroup | µs per run (median) | vs locked | seed: after/before (packed) |\n\
         |---|---|---|---|---|\n",
    );
    let results: Vec<&Value> = swap["results"].as_array().into_iter().flatten().collect();
    for r in &results {
        let experiment = r["experiment"].as_str().unwrap_or("");
        let design = r["design"].as_str().unwrap_or("");
        let vs_locked = r["speedup_vs_locked"]
            .as_f64()
            .map_or(String::new(), |s| format!("{:.3}", 1.0 / s));
        let seed = experiments
            .iter()
            .find(|e| e.0 == experiment && design == "packed")
            .map_or(String::new(), |e| format!("{:.4}", e.2.ratio()));
        md.push_str(&format!(
            "| {experiment} | {design} | {:.0} | {vs_locked} | {seed} |\n",
            r["median_us"].as_f64().unwrap_or(0.0)
        ));
    }
    md.push('\n');
    md.push_str(&swap_verdicts(&experiments, &results));
    md
}

/// Seed 000's verdict per experiment, from `packed`'s and `locked`'s rows
/// of `results`.
fn swap_verdicts(experiments: &[(&str, &str, seeds::Published)], results: &[&Value]) -> String {
    let mut md = String::new();
    for &(experiment, _, seed) in experiments {
        let row = |design: &str| {
            let r = results
                .iter()
                .find(|r| r["experiment"] == experiment && r["design"] == design)?;
            let samples: Vec<f64> = r["samples_us"]
                .as_array()?
                .iter()
                .filter_map(Value::as_f64)
                .collect();
            Some((r["median_us"].as_f64()?, samples))
        };
        if let (Some(packed), Some(locked)) = (row("packed"), row("locked")) {
            let ratio = packed.0 / locked.0;
            let noise = seeds::ratio_noise(&packed.1, &locked.1);
            let verdict = seeds::not_worse(seed.ratio(), ratio, noise, "`packed`");
            md.push_str(&format!("{experiment}: {verdict}\n\n"));
        }
    }
    md
}

/// One readers design's runs, summarised against seed 002.
struct ReadersRow {
    name: String,
    facts: Option<seeds::ReadersFacts>,
    /// Wall seconds of every run after the first.
    later_walls: Vec<f64>,
    dying_at_end: u64,
}

impl ReadersRow {
    fn of(design: &Value, readers: &Value) -> Self {
        let runs: Vec<&Value> = design["runs"].as_array().into_iter().flatten().collect();
        let num = |r: &Value, key: &str| r[key].as_f64().unwrap_or(0.0);
        let median = |key: &str| {
            let later: Vec<f64> = runs.iter().skip(1).map(|r| num(r, key)).collect();
            (!later.is_empty()).then(|| Stats::of(&later).median)
        };
        let facts = runs.first().and_then(|first| {
            Some(seeds::ReadersFacts {
                first_secs: num(first, "wall_secs"),
                later_secs: median("wall_secs")?,
                first_reclaims: num(first, "reclaim_calls") as u64,
                later_reclaims: median("reclaim_calls")? as u64,
                later_visited_per_reclaim: median("memcgs_visited_per_reclaim")?,
                dying_at_run2: num(runs.get(1)?, "dying_at_start") as u64,
                bench_usage_bytes: num(runs.last()?, "bench_usage_bytes_at_end") as u64,
                bench_max_bytes: readers["memcg_max_bytes"].as_u64().unwrap_or(0),
                memcg_metadata_bytes: readers["memcg_metadata_bytes"].as_u64().unwrap_or(0),
            })
        });
        Self {
            name: design["name"].as_str().unwrap_or("").to_owned(),
            facts,
            later_walls: runs.iter().skip(1).map(|r| num(r, "wall_secs")).collect(),
            dying_at_end: runs.last().map_or(0, |r| num(r, "dying_at_end") as u64),
        }
    }

    /// Whether this design is one the seed ran (v6.14 pins folios).
    fn is_the_seeds(&self) -> bool {
        self.name.contains("pin (v6.14)")
    }
}

fn readers_markdown(readers: &Value) -> String {
    let (before_first, before_later, before_median) = seeds::readers_runs(&seeds::READERS_BEFORE);
    let (after_first, after_later, after_median) = seeds::readers_runs(&seeds::READERS_AFTER);
    let mut md = format!(
        "## {} readers leaving dying cgroups (seed 002)\n\n\
         The seed's published figures (`time read_in_all`, `real`, 10000 readers on 96 CPUs, \
         10 runs): before the patch (list_lru `legacy`) run 1 {} and runs 2–10 {} (median; \
         {:.1}x run 1); after it (`split`) {} and {} ({:.1}x): every run after the first is \
         about 26 times slower, and the patch \"very slightly\" faster.\n\n\
         This run (**measured**; runs 2.. are the later runs):\n\n\
         | design | run 1 wall s | later runs wall s (median) | later / first | seed: later / first | dying at start of run 2 | reclaims, run 1 → later | dying at end | seed's slowdown |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        readers["readers"],
        seeds::READERS_BEFORE[0],
        before_median,
        before_later / before_first,
        seeds::READERS_AFTER[0],
        after_median,
        after_later / after_first,
    );
    let rows: Vec<ReadersRow> = readers["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| ReadersRow::of(d, readers))
        .collect();
    for row in &rows {
        let Some(f) = &row.facts else {
            md.push_str(&format!(
                "| {} | | | | | | | {} | one run only: no later runs |\n",
                row.name, row.dying_at_end
            ));
            continue;
        };
        let seed = if row.name.contains("legacy") {
            before_later / before_first
        } else {
            after_later / after_first
        };
        md.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.2}x | {seed:.1}x | {} | {} → {} | {} | {} |\n",
            row.name,
            f.first_secs,
            f.later_secs,
            f.later_secs / f.first_secs.max(1e-9),
            f.dying_at_run2,
            f.first_reclaims,
            f.later_reclaims,
            row.dying_at_end,
            seeds::readers(f).word()
        ));
    }
    md.push('\n');
    md.push_str(&readers_verdicts(&rows, after_later / before_later));
    md
}

/// Seed 002's verdicts: the later-run slowdown of the seed's designs, and
/// the patch's (`legacy` → `split`) against the seed's own ratio
/// `seed_split_over_legacy` of later runs.
fn readers_verdicts(rows: &[ReadersRow], seed_split_over_legacy: f64) -> String {
    let mut md = String::new();
    for row in rows.iter().filter(|r| r.is_the_seeds()) {
        if let Some(f) = &row.facts {
            md.push_str(&format!(
                "The later-run slowdown, {}: {}\n\n",
                row.name,
                seeds::readers(f)
            ));
        }
    }
    let later = |list_lru: &str| {
        rows.iter()
            .find(|r| r.is_the_seeds() && r.name.contains(list_lru))
            .filter(|r| !r.later_walls.is_empty())
            .map(|r| &r.later_walls)
    };
    if let (Some(legacy), Some(split)) = (later("legacy"), later("split")) {
        let ratio = Stats::of(split).median / Stats::of(legacy).median;
        let noise = seeds::ratio_noise(split, legacy);
        let verdict = seeds::not_worse(seed_split_over_legacy, ratio, noise, "`split`");
        md.push_str(&format!(
            "The patch (list_lru `legacy` → `split`, folios pinned as in v6.14), later runs: \
             {verdict}\n\n"
        ));
    }
    md
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Job counts projected to, and measured at.
const PROJECTED_JOBS: [usize; 7] = [1, 2, 4, 8, 16, 48, 96];
const MEASURED_JOBS: [usize; 4] = [1, 2, 4, 8];

/// The model's inputs and outputs (see `projection.rs`).
#[derive(Debug, Serialize)]
struct Projection {
    /// `locked`'s service time per operation (4K folios), µs: its
    /// critical section measured in the build plus the hand-over.
    service_us: f64,
    /// Of that, the critical section measured inside the build, µs.
    critical_section_us: f64,
    /// Of that, the lock's hand-over between two cores, µs.
    handover_us: f64,
    /// Per design: CPU between operations (`Z`), µs, and the projected
    /// points.
    designs: Vec<ProjectedDesign>,
    /// Measured: `locked`'s build CPU over `memcg`'s, at 1, 2, 4, 8 jobs.
    measured_locked_over_memcg: Vec<(usize, f64)>,
    /// The service time at which the model gives the seed's 4K "sys"
    /// ratio at 96 jobs (`locked` over `packed`), µs.
    service_for_seed_us: Option<f64>,
    /// `locked` projected at that service time.
    locked_at_seed_service: Vec<Point>,
}

#[derive(Debug, Serialize)]
struct ProjectedDesign {
    swap_cgroup: String,
    think_us: f64,
    points: Vec<Point>,
}

/// The cost of handing `locked`'s lock from one core to another: the
/// time per operation of two threads recording and clearing pages of one
/// map as fast as they can (each operation waits for the other's, so the
/// lock and its cache line move between cores every time) less that of
/// one thread doing the same alone. On a many-core machine this hand-over
/// dominates the lock's service time.
fn locked_handover_secs() -> anyhow::Result<f64> {
    let map = memcg::swap_cgroup::SwapCgroupMap::new(Design::Locked, 1 << 16)?;
    let rounds = 1u64 << 19;
    let per_op = |threads: u64| -> anyhow::Result<f64> {
        let start = std::time::Instant::now();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let map = &map;
                    s.spawn(move || -> anyhow::Result<()> {
                        for i in 0..rounds {
                            let offset = (t << 15) | ((i * 7) & 0x7fff);
                            map.record(offset, 1, 1)?;
                            map.clear(offset, 1)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a lock thread panicked"))?
            })
        })?;
        Ok(start.elapsed().as_secs_f64() / (2 * threads * rounds) as f64)
    };
    let alone = per_op(1)?;
    let taking_turns = per_op(2)?;
    Ok((taking_turns - alone).max(0.0))
}

/// Projects every design to `PROJECTED_JOBS` and measures `locked` and
/// `memcg` at `MEASURED_JOBS` to check the model against.
fn projection(
    scale: &Scale,
    seed: u64,
    kbuild: &[KbuildRow],
    out: &Path,
) -> anyhow::Result<Projection> {
    let handover = locked_handover_secs()?;
    let critical_section = kbuild
        .iter()
        .find(|r| r.folio_kib == 4 && r.swap_cgroup == "locked")
        .map_or(0.0, |r| r.swap_cgroup_lock_held_ns_per_call * 1e-9);
    let service = critical_section + handover;
    let designs: Vec<ProjectedDesign> = kbuild
        .iter()
        .filter(|r| r.folio_kib == 4 && r.swap_cgroup_calls > 0)
        .map(|r| {
            // The build's CPU per swap_cgroup call; all of it but the
            // serialised part is the job's own (the think time).
            let per_call = r.cpu_secs / r.swap_cgroup_calls as f64;
            let (s, serialised) = if r.swap_cgroup == "locked" {
                (service, critical_section)
            } else {
                (0.0, 0.0)
            };
            let think = (per_call - serialised).max(0.0);
            ProjectedDesign {
                swap_cgroup: r.swap_cgroup.clone(),
                think_us: think * 1e6,
                points: projection::project(s, think, &PROJECTED_JOBS),
            }
        })
        .collect();
    let measured = measure_job_counts(scale, seed)?;
    let locked_think = designs
        .iter()
        .find(|d: &&ProjectedDesign| d.swap_cgroup == "locked")
        .map(|d| d.think_us * 1e-6);
    let service_for_seed = locked_think.map(|think| {
        let seed_ratio = 1.0 / seeds::KBUILD_4K_SYS.ratio();
        (
            projection::service_for_cpu_ratio(96, think, seed_ratio),
            think,
        )
    });
    let projection = Projection {
        service_us: service * 1e6,
        critical_section_us: critical_section * 1e6,
        handover_us: handover * 1e6,
        designs,
        measured_locked_over_memcg: measured,
        service_for_seed_us: service_for_seed.map(|(s, _)| s * 1e6),
        locked_at_seed_service: service_for_seed
            .map(|(s, think)| projection::project(s, think, &PROJECTED_JOBS))
            .unwrap_or_default(),
    };
    report::write_svg(&out.join("projection.svg"), &projection_chart(&projection))?;
    Ok(projection)
}

/// `locked`'s build CPU over `memcg`'s at each of `MEASURED_JOBS` (small
/// builds; job counts above the cores are oversubscribed, and still
/// measurements).
fn measure_job_counts(scale: &Scale, seed: u64) -> anyhow::Result<Vec<(usize, f64)>> {
    let mut progress = Progress::new("reproduce jobs", 2 * MEASURED_JOBS.len() as u64);
    let mut out = Vec::new();
    for jobs in MEASURED_JOBS {
        let cpu = |design| -> anyhow::Result<f64> {
            let small = Scale {
                jobs,
                tasks_per_job: (scale.tasks_per_job / 2).max(2),
                ..Scale { ..*scale }
            };
            let r = kbuild::run(&kbuild_config(&small, seed, 1, design))?;
            Ok(r.cpu_secs)
        };
        let locked = cpu(Design::Locked)?;
        progress.step(1, &format!("{jobs} jobs locked"));
        let memcg = cpu(Design::Memcg)?;
        progress.step(1, &format!("{jobs} jobs memcg"));
        out.push((jobs, locked / memcg));
    }
    progress.finish();
    Ok(out)
}

/// Every design's projected CPU ratio against jobs (designs with the same
/// projection share one line, named for all of them), `locked` at the
/// service time the seed's figure needs, the measured check, and the
/// seed's published 4K ratio as a reference.
fn projection_chart(p: &Projection) -> report::Chart<'static> {
    let mut groups: Vec<(Vec<&str>, &[Point])> = Vec::new();
    for d in &p.designs {
        let same = |g: &&mut (Vec<&str>, &[Point])| {
            g.1.iter()
                .zip(&d.points)
                .all(|(a, b)| a.jobs == b.jobs && a.cpu_ratio == b.cpu_ratio)
        };
        match groups.iter_mut().find(same) {
            Some(g) => g.0.push(&d.swap_cgroup),
            None => groups.push((vec![&d.swap_cgroup], &d.points)),
        }
    }
    let line = |name: String, points: &[Point]| {
        report::Series::by_threads(name, points.iter().map(|x| (x.jobs, x.cpu_ratio, 0.0)))
    };
    let mut series: Vec<report::Series> = groups
        .iter()
        .map(|(names, points)| {
            let what = if names.contains(&"locked") {
                format!("with the measured S = {:.3} µs", p.service_us)
            } else {
                "which serialises nothing".to_owned()
            };
            line(format!("{} (projected, {what})", names.join(", ")), points)
        })
        .collect();
    if let Some(s) = p.service_for_seed_us {
        series.push(line(
            format!("locked at S = {s:.3} µs (projected, the S the seed's figure needs)"),
            &p.locked_at_seed_service,
        ));
    }
    let measured = p.measured_locked_over_memcg.iter();
    series.push(report::Series::by_threads(
        "locked / memcg (measured)",
        measured.map(|&(j, r)| (j, r, 0.0)),
    ));
    let seed = seeds::KBUILD_4K_SYS;
    series.push(report::Series::reference(
        format!(
            "seed at 96 CPUs: locked/packed sys {} / {} s = {:.3}",
            seed.before,
            seed.after,
            1.0 / seed.ratio()
        ),
        1.0 / seed.ratio(),
    ));
    let panel = report::Panel {
        title: "build CPU over uncontended CPU (4K folios)".into(),
        series,
        y_label: None,
    };
    report::Chart {
        title: "kernel build: swap_cgroup lock contention, measured and projected",
        x_label: "jobs",
        y_label: "CPU ratio",
        panels: vec![panel],
        x_categories: Vec::new(),
    }
}

fn projection_markdown(p: &Projection) -> String {
    let mut md = format!(
        "## Past this machine: a projection to 96 jobs (**projected**, not measured)\n\n\
         Model (`crates/memcg-cli/src/projection.rs`): each job alternates CPU work of \
         its own (`Z`, measured: the build's CPU per swap_cgroup call, less the part the \
         lock serialises) with one call; `locked` serialises every call on its device \
         lock for `S` = {:.3} µs: the critical section measured inside the 4K build \
         ({:.3} µs) plus the lock's hand-over between two cores ({:.3} µs, measured: two \
         threads taking turns on one map, less one thread alone). `cluster`'s locks are \
         per cluster and each job allocates from a cluster of its own, so like the \
         lock-free designs it serialises nothing. \
         A closed single-server queue solved by mean value analysis gives the wait per \
         operation; the kernel's lock spins, so the wait is CPU. Not modelled: cache-line \
         bouncing of the lock-free designs' map, NUMA distances larger than this \
         machine's, and every other lock the build takes.\n\n\
         | swap_cgroup | Z µs | jobs | lock utilisation | wait µs/op | CPU ratio |\n\
         |---|---|---|---|---|---|\n",
        p.service_us, p.critical_section_us, p.handover_us
    );
    for d in &p.designs {
        for x in d
            .points
            .iter()
            .filter(|x| [1, 16, 48, 96].contains(&x.jobs))
        {
            md.push_str(&format!(
                "| {} | {:.2} | {} | {:.3} | {:.3} | {:.3} |\n",
                d.swap_cgroup, d.think_us, x.jobs, x.utilisation, x.wait_us, x.cpu_ratio
            ));
        }
    }
    md.push_str(
        "\nChecked against measurements: `locked`'s build CPU over `memcg`'s at the same \
         job count (**measured**; above 2 jobs the 2 cores are oversubscribed, and our \
         simulator's locks park instead of spinning, so contention shows as wall time, \
         not CPU):\n\n| jobs | measured locked/memcg CPU | projected |\n|---|---|---|\n",
    );
    let locked = p.designs.iter().find(|d| d.swap_cgroup == "locked");
    for &(jobs, ratio) in &p.measured_locked_over_memcg {
        let projected = locked
            .and_then(|d| d.points.iter().find(|x| x.jobs == jobs))
            .map_or(String::new(), |x| format!("{:.3}", x.cpu_ratio));
        md.push_str(&format!("| {jobs} | {ratio:.3} | {projected} |\n"));
    }
    let locked_96 = locked.and_then(|d| d.points.iter().find(|x| x.jobs == 96));
    if let (Some(x), Some(s)) = (locked_96, p.service_for_seed_us) {
        let verdict = seeds::projection(seeds::ProjectionFacts {
            cpu_ratio: x.cpu_ratio,
            utilisation: x.utilisation,
            service_us: p.service_us,
            service_for_seed_us: s,
        });
        md.push_str(&format!("\nThe model at 96 jobs: {verdict}\n"));
    }
    md.push('\n');
    md
}

/// Build CPU over `locked`'s per design (a category each: nothing lies
/// between two designs), 4K and 64K folios side by side with one standard
/// deviation of the repetitions, and the seed's published `packed`
/// ratios beside ours.
fn kbuild_chart(report: &ReproduceReport) -> report::Chart<'static> {
    let rows = &report.kbuild;
    let designs: Vec<String> = Design::ALL.iter().map(ToString::to_string).collect();
    let at = |name: &str| designs.iter().position(|d| d == name).unwrap_or(0) as f64;
    let measured = |folio_kib: u64| {
        let rows = || rows.iter().filter(move |r| r.folio_kib == folio_kib);
        report::Series {
            name: format!("{folio_kib}K folios (measured)"),
            points: rows()
                .map(|r| (at(&r.swap_cgroup), r.cpu_vs_locked))
                .collect(),
            // The spread of the design's CPU, relative to locked's median.
            errors: rows()
                .map(|r| {
                    let stdev = Stats::of(&r.samples_cpu_secs).stdev;
                    stdev * r.cpu_vs_locked / r.cpu_secs
                })
                .collect(),
            style: report::Style::Line,
        }
    };
    let seed = |folio: &str, seed: seeds::Published| report::Series {
        name: format!(
            "seed, {folio}: packed/locked sys {} / {} s",
            seed.after, seed.before
        ),
        points: vec![(at("packed"), seed.ratio())],
        errors: Vec::new(),
        style: report::Style::Line,
    };
    report::Chart {
        title: "kernel build: CPU time over locked's (measured; the seeds' sys)",
        x_label: "swap_cgroup design",
        y_label: "CPU vs locked",
        panels: vec![report::Panel {
            title: format!("{} jobs (the seed: 96), 4K and 64K folios", report.jobs),
            series: vec![
                measured(4),
                measured(64),
                seed("4K", seeds::KBUILD_4K_SYS),
                seed("64K", seeds::KBUILD_64K_SYS),
            ],
            y_label: None,
        }],
        x_categories: designs,
    }
}
