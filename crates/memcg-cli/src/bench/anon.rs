//! `memcg bench anon`: what putting a real process's anonymous memory
//! under the simulator (`memcg run`, userfaultfd) costs, in one run, each
//! against the baseline it replaces:
//!
//! | row            | what is timed, per 4 KiB page                               |
//! |----------------|-------------------------------------------------------------|
//! | first touch    | a write to each page of a fresh `mmap`: natively (the host   |
//! |                | kernel's fault, THP off), through a bare userfaultfd handler |
//! |                | thread in the process (`UFFDIO_COPY` of a zero page: the     |
//! |                | floor of any userfaultfd design), and under `memcg run`      |
//! |                | (the server charges the page, then maps it), and under       |
//! |                | `memcg run` with 64K mTHP (`hugepages-64kB/enabled` always:  |
//! |                | a fault charges and maps 16 pages at once)                   |
//! | swap-out       | `memory.reclaim` of the process's pages under `memcg run`    |
//! |                | (write-protect, copy out, swap out, drop) against the        |
//! |                | simulator's own swap-out of as many pages of a simulated     |
//! |                | task (`Sim::pageout`), RAM swap both                          |
//! | swap-in        | a read of each swapped page (fault, swap-in, copy in)        |
//! |                | against `Sim::touch` of the simulated task                   |
//! | charge only    | the simulator's own work on a first touch (charge, LRU add)  |
//!
//! And what aging by faults alone changes (the simulator sees a real
//! process's first touches and swap-ins, not its accessed bits): a 4 MiB
//! hot set re-read after each MiB of 48 MiB of cold pages written once,
//! under `memory.max` 16 MiB with RAM swap ([`Aging`]; the corpus's
//! `anon_aging` runs the same on booted kernels): the memory cgroup's
//! major faults, every one a refault of the hot set, for a simulated task
//! (whose accesses mark its pages young) and for a real process under
//! `memcg run`.
//!
//! The process side is this binary itself (`memcg bench anon-probe`, a
//! hidden subcommand) run natively or under `memcg run`. Needs root,
//! /dev/fuse and userfaultfd for the `memcg run` rows (skipped otherwise).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use clap::Args;
use memcg::folio::Folio;
use memcg::memcontrol::Gfp;
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use crate::report::{self, Chart, Panel, Series, Stats};

const PAGE: usize = 4096;

/// Flags of `memcg bench anon`.
#[derive(Debug, Clone, Args)]
pub struct AnonArgs {
    /// Pages touched per run [default: 16384 (64 MiB); --quick 4096].
    #[arg(long)]
    pub pages: Option<usize>,
    /// Repetitions of every row [default: 5; --quick 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Smaller defaults for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// `--json` and `--svg`.
    #[command(flatten)]
    pub files: report::ReportFiles,
}

/// What the probe does (`memcg bench anon-probe MODE PAGES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeMode {
    /// First touch of fresh pages, whoever handles the faults.
    Touch,
    /// First touch through a userfaultfd handler thread of its own.
    Uffd,
    /// Under `memcg run`: touch, reclaim to swap, read back.
    Swap,
    /// Under `memcg run`: the hot and cold pages of [`Aging`].
    Aging,
}

/// The aging experiment's shape (as the corpus's `anon_aging`).
pub(crate) struct Aging;

impl Aging {
    /// The hot set, re-read after each cold MiB.
    pub(crate) const HOT_MIB: usize = 4;
    /// The cold pages, written once and kept.
    pub(crate) const COLD_MIB: usize = 48;
    /// The memory cgroup's `memory.max`.
    pub(crate) const MAX_MIB: usize = 16;
}

/// The hidden probe's flags.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    #[arg(value_enum)]
    pub mode: ProbeMode,
    pub pages: usize,
}

/// One row of the table: nanoseconds per page over the repetitions.
#[derive(Debug, Serialize)]
struct Row {
    row: &'static str,
    what: &'static str,
    ns_per_page: Stats,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: report::Machine,
    pages: usize,
    rows: Vec<Row>,
    /// [`Aging`]: the hot set's major faults.
    aging: Vec<AgingRow>,
}

#[derive(Debug, Serialize)]
struct AgingRow {
    what: &'static str,
    hot_pages: usize,
    major_faults: Stats,
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &AnonArgs) -> anyhow::Result<()> {
    args.files.validate()?;
    let pages = args.pages.unwrap_or(if args.quick { 4096 } else { 16384 });
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 });
    ensure!(pages > 0 && reps > 0, "--pages and --reps must be positive");
    let exe = std::env::current_exe().context("finding this binary")?;
    let under_run = crate::bench::fuse::usable() && Path::new("/dev/userfaultfd").exists();
    let mut samples: Vec<(&'static str, &'static str, Vec<f64>)> = vec![
        ("first touch", "native", Vec::new()),
        ("first touch", "bare userfaultfd", Vec::new()),
        ("first touch", "memcg run", Vec::new()),
        ("first touch", "memcg run, 64K folio fills", Vec::new()),
        ("first touch", "charge only (in process)", Vec::new()),
        ("swap-out", "memcg run (memory.reclaim)", Vec::new()),
        ("swap-out", "simulator (Sim::pageout)", Vec::new()),
        ("swap-in", "memcg run (read fault)", Vec::new()),
        ("swap-in", "simulator (Sim::touch)", Vec::new()),
    ];
    for rep in 0..reps {
        eprintln!("memcg bench anon: repetition {} of {reps}", rep + 1);
        let native = Under::Native;
        samples[0]
            .2
            .push(probe(&exe, ProbeMode::Touch, pages, native)?[0]);
        samples[1]
            .2
            .push(probe(&exe, ProbeMode::Uffd, pages, native)?[0]);
        samples[4].2.push(charge_only(pages)?);
        let (out, inn) = sim_swap(pages)?;
        samples[6].2.push(out);
        samples[8].2.push(inn);
        if under_run {
            let run = Under::Run { mthp_kb: None };
            samples[2]
                .2
                .push(probe(&exe, ProbeMode::Touch, pages, run)?[0]);
            let run64 = Under::Run { mthp_kb: Some(64) };
            samples[3]
                .2
                .push(probe(&exe, ProbeMode::Touch, pages, run64)?[0]);
            let swap = probe(&exe, ProbeMode::Swap, pages, run)?;
            samples[5].2.push(swap[1]);
            samples[7].2.push(swap[2]);
        }
    }
    let rows: Vec<Row> = samples
        .into_iter()
        .filter(|(_, _, s)| !s.is_empty())
        .map(|(row, what, s)| Row {
            row,
            what,
            ns_per_page: Stats::of(&s),
        })
        .collect();
    print(&rows);
    let aging = aging_rows(&exe, reps, under_run)?;
    print_aging(&aging);
    let report = Report {
        machine: report::Machine::current(),
        pages,
        rows,
        aging,
    };
    report::save_json(args.files.json.as_deref(), &report)?;
    if let Some(svg) = &args.files.svg {
        report::write_svg(svg, &chart(&report.rows))?;
    }
    Ok(())
}

fn print(rows: &[Row]) {
    let base = |row: &str| {
        rows.iter()
            .find(|r| r.row == row)
            .map(|r| r.ns_per_page.mean)
    };
    report::print_table(
        &["", "way", "µs per 4K page", "× the first"],
        rows.iter().map(|r| {
            let ratio = base(r.row).map_or(f64::NAN, |b| r.ns_per_page.mean / b);
            vec![
                r.row.to_owned(),
                r.what.to_owned(),
                format!(
                    "{:.2} ± {:.2}",
                    r.ns_per_page.mean / 1e3,
                    r.ns_per_page.stdev / 1e3
                ),
                format!("{ratio:.2}x"),
            ]
        }),
    );
}

/// [`Aging`] `reps` times on a simulated task and (if it can) under
/// `memcg run`.
fn aging_rows(exe: &Path, reps: usize, under_run: bool) -> anyhow::Result<Vec<AgingRow>> {
    let mut task = Vec::new();
    let mut process = Vec::new();
    for _ in 0..reps {
        task.push(sim_aging()?);
        if under_run {
            let run = Under::Run { mthp_kb: None };
            let hot_pages = Aging::HOT_MIB << 8;
            process.push(probe(exe, ProbeMode::Aging, hot_pages, run)?[0]);
        }
    }
    Ok([
        ("simulated task (accessed bits seen)", task),
        ("memcg run (faults only)", process),
    ]
    .into_iter()
    .filter(|(_, s)| !s.is_empty())
    .map(|(what, s)| AgingRow {
        what,
        hot_pages: Aging::HOT_MIB << 8,
        major_faults: Stats::of(&s),
    })
    .collect())
}

fn print_aging(rows: &[AgingRow]) {
    println!(
        "\nthe hot set's major faults: {} MiB re-read after each MiB of {} MiB written once, memory.max {} MiB",
        Aging::HOT_MIB,
        Aging::COLD_MIB,
        Aging::MAX_MIB
    );
    report::print_table(
        &["way", "major faults", "per hot page"],
        rows.iter().map(|r| {
            vec![
                r.what.to_owned(),
                format!("{:.0} ± {:.0}", r.major_faults.mean, r.major_faults.stdev),
                format!("{:.2}", r.major_faults.mean / r.hot_pages as f64),
            ]
        }),
    );
}

fn chart(rows: &[Row]) -> Chart<'static> {
    let mut panels = Vec::new();
    for title in ["first touch", "swap-out", "swap-in"] {
        let series = rows
            .iter()
            .filter(|r| r.row == title)
            .map(|r| Series {
                name: r.what.to_owned(),
                points: vec![(0.0, r.ns_per_page.mean / 1e3)],
                errors: vec![r.ns_per_page.stdev / 1e3],
                style: report::Style::Line,
            })
            .collect();
        panels.push(Panel {
            title: title.to_owned(),
            series,
            y_label: None,
        });
    }
    Chart {
        title: "memcg bench anon: a real process's anonymous memory under the simulator",
        x_label: "",
        y_label: "µs per 4 KiB page",
        panels,
        x_categories: vec!["per page".to_owned()],
    }
}

/// Where the probe runs.
#[derive(Debug, Clone, Copy)]
enum Under {
    /// On the host.
    Native,
    /// Under `memcg run`, with `hugepages-<mthp_kb>kB/enabled` set to
    /// `always` first if given.
    Run { mthp_kb: Option<u32> },
}

/// Runs the probe where `under` says; its numbers (ns per page), one per
/// line.
fn probe(exe: &Path, mode: ProbeMode, pages: usize, under: Under) -> anyhow::Result<Vec<f64>> {
    let mode_name = match mode {
        ProbeMode::Touch => "touch",
        ProbeMode::Uffd => "uffd",
        ProbeMode::Swap => "swap",
        ProbeMode::Aging => "aging",
    };
    let probe_args = ["bench", "anon-probe", mode_name, &pages.to_string()];
    let mut cmd = Command::new(exe);
    match under {
        Under::Native => {
            cmd.args(probe_args);
        }
        Under::Run { mthp_kb } => {
            let mem = format!("{}M", ((pages * PAGE) >> 20) * 4 + 256);
            let swap = format!("{}M", ((pages * PAGE) >> 20) * 2 + 64);
            let enable = mthp_kb.map_or(String::new(), |kb| {
                format!(
                    "echo always > /sys/kernel/mm/transparent_hugepage/hugepages-{kb}kB/enabled && "
                )
            });
            let script = format!("{enable}exec \"$0\" \"$@\"");
            cmd.args([
                "run", "--mem", &mem, "--swap", &swap, "--", "sh", "-c", &script,
            ])
            .arg(exe)
            .args(probe_args);
        }
    }
    let out = cmd
        .output()
        .with_context(|| format!("running the {mode_name} probe"))?;
    if !out.status.success() {
        bail!(
            "the {mode_name} probe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse::<f64>().context("a probe's number"))
        .collect()
}

/// The simulator's own work on a first touch, in process: a page
/// charged (no frame: `Folio::new_unbacked`) and put on the LRU.
fn charge_only(pages: usize) -> anyhow::Result<f64> {
    let sim = Sim::new(SimConfig::default());
    let tree = sim.machine().tree();
    let memcg = Arc::clone(tree.root());
    let start = Instant::now();
    let mut held = Vec::with_capacity(pages);
    for _ in 0..pages {
        let folio = Arc::new(Folio::new_unbacked(tree, &memcg, 1, Gfp::Kernel)?);
        held.push(folio);
    }
    let ns = start.elapsed().as_nanos() as f64 / pages as f64;
    drop(held);
    Ok(ns)
}

/// The simulator's own swap-out and swap-in of `pages` pages of a
/// simulated task (RAM swap, 4 KiB folios, pattern-filled): ns per page.
fn sim_swap(pages: usize) -> anyhow::Result<(f64, f64)> {
    let sim = Sim::new(SimConfig::default());
    sim.swapon_ram((pages * PAGE * 2) as u64, None)?;
    sim.alloc_populate("/", "bench", (pages * PAGE) as u64, 1, Fill::Pattern)?;
    let start = Instant::now();
    let out = sim.pageout("bench")?;
    let out_ns = start.elapsed().as_nanos() as f64 / out.max(1) as f64;
    let start = Instant::now();
    let back = sim.touch("bench")?;
    let in_ns = start.elapsed().as_nanos() as f64 / back.max(1) as f64;
    sim.verify("bench")?;
    sim.free("bench")?;
    Ok((out_ns, in_ns))
}

/// [`Aging`] on a simulated task: the hot set a mapping of its own, each
/// cold MiB another, the hot set touched (`Sim::touch`: resident pages
/// marked young, swapped ones faulted back) after each; the memory
/// cgroup's `pgmajfault`.
fn sim_aging() -> anyhow::Result<f64> {
    let sim = Sim::new(SimConfig::default());
    sim.swapon_ram(((Aging::HOT_MIB + Aging::COLD_MIB) as u64) << 21, None)?;
    sim.fs().write("/cgroup.subtree_control", "+memory")?;
    sim.fs().mkdir("/aging")?;
    sim.fs()
        .write("/aging/memory.max", &(Aging::MAX_MIB << 20).to_string())?;
    sim.alloc(
        "/aging",
        "hot",
        (Aging::HOT_MIB as u64) << 20,
        1,
        Fill::Pattern,
    )?;
    for m in 0..Aging::COLD_MIB {
        let name = format!("cold{m}");
        sim.alloc("/aging", &name, 1 << 20, 1, Fill::Pattern)?;
        sim.touch("hot")?;
    }
    sim.verify("hot")?;
    let stat = sim.fs().read("/aging/memory.stat")?;
    let faults = stat
        .lines()
        .find_map(|l| l.strip_prefix("pgmajfault ")?.trim().parse::<u64>().ok())
        .context("no pgmajfault in memory.stat")?;
    sim.free("hot")?;
    for m in 0..Aging::COLD_MIB {
        sim.free(&format!("cold{m}"))?;
    }
    Ok(faults as f64)
}
