//! `memcg bench swap-cgroup`: every swap_cgroup design on the same
//! workloads, thread counts and offsets, in one run, against the hardware
//! limit (plain `u16` loads and stores on one thread) measured in that run.
//!
//! Workloads (each iteration's calls all count as operations):
//! - `folio-4k`: record + lookup + clear of one slot at a random offset in
//!   the thread's own part of the device (3 calls).
//! - `folio-64k`: the same on a random naturally aligned 16-slot folio.
//! - `lookup`: one lookup at a random offset of a fully recorded device.
//! - `neighbour`: record + lookup + clear where threads own alternating
//!   slots of one 128-slot window: every packed word and cache line is
//!   shared by two owners, the worst case for packing.
//!
//! The folio workloads keep the last 16-slot folio of every cluster
//! recorded throughout (a device in use), so the lazily allocating designs
//! are measured in steady state rather than allocating and freeing a
//! cluster on every call.

use std::hint::black_box;

use anyhow::{Context, bail, ensure};
use clap::{Args, ValueEnum};
use memcg::mm_types::SWAPFILE_CLUSTER;
use memcg::swap_cgroup::{Design, SwapCgroupMap};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::{
    Benchmark, CommonArgs, Interleaved, Runs, Sample, run_plan, timed_here, timed_threads,
};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// Flags of `memcg bench swap-cgroup`.
#[derive(Debug, Clone, Args)]
pub struct SwapCgroupArgs {
    /// Slots on the benchmark device [default: 1048576; --quick 262144].
    #[arg(long)]
    pub slots: Option<u64>,
    /// Iterations per thread per round; a run repeats rounds until it
    /// lasts `--min-phase-ms` [default: 2000000; --quick 200000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// Designs to run, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "locked,packed,atomic-u16,cluster,memcg"
    )]
    pub designs: Vec<Design>,
    /// Workloads to run, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "folio-4k,folio-64k,lookup,neighbour"
    )]
    pub workloads: Vec<Workload>,
    /// Seed for the random offsets.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl SwapCgroupArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            slots: smoke.then_some(16 * SWAPFILE_CLUSTER as u64),
            ops: smoke.then_some(2_000),
            designs: Design::ALL.to_vec(),
            workloads: Workload::value_variants().to_vec(),
            seed: 0x5eed,
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &SwapCgroupArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// A benchmark workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// record + lookup + clear of single slots at random offsets.
    #[value(name = "folio-4k")]
    #[serde(rename = "folio-4k")]
    Folio4k,
    /// record + lookup + clear of aligned 16-slot folios.
    #[value(name = "folio-64k")]
    #[serde(rename = "folio-64k")]
    Folio64k,
    /// Random lookups on a fully recorded device.
    Lookup,
    /// Threads own alternating slots of one small window.
    Neighbour,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Folio4k => "folio-4k",
            Workload::Folio64k => "folio-64k",
            Workload::Lookup => "lookup",
            Workload::Neighbour => "neighbour",
        }
    }

    fn folio_pages(self) -> u32 {
        if self == Workload::Folio64k { 16 } else { 1 }
    }

    fn calls_per_iteration(self) -> u64 {
        if self == Workload::Lookup { 1 } else { 3 }
    }
}

/// Slots of the folio kept recorded at the end of every cluster.
const BACKGROUND_PAGES: u64 = 16;
const BACKGROUND_ID: u16 = 0xbeef;
/// Slots of the window the `neighbour` threads share.
const NEIGHBOUR_WINDOW: u64 = 128;
/// Offsets generated per thread, then cycled.
const OFFSETS_PER_THREAD: usize = 1 << 16;

/// What one thread does in one run: its offsets (cycled) and its id.
struct ThreadPlan {
    offsets: Vec<u64>,
    id: u16,
}

fn plans(workload: Workload, threads: usize, slots: u64, seed: u64) -> Vec<ThreadPlan> {
    let cluster = SWAPFILE_CLUSTER as u64;
    let clusters = slots / cluster;
    (0..threads)
        .map(|t| {
            let mut rng =
                ChaCha8Rng::seed_from_u64(seed ^ ((t as u64 + 1) << 32) ^ workload as u64);
            // Own a contiguous run of clusters.
            let (c0, c1) = (
                clusters * t as u64 / threads as u64,
                clusters * (t as u64 + 1) / threads as u64,
            );
            let nr = u64::from(workload.folio_pages());
            let usable_folios = (cluster - BACKGROUND_PAGES) / nr;
            let offsets = match workload {
                Workload::Folio4k | Workload::Folio64k => (0..OFFSETS_PER_THREAD)
                    .map(|_| {
                        rng.random_range(c0..c1) * cluster + rng.random_range(0..usable_folios) * nr
                    })
                    .collect(),
                Workload::Lookup => (0..OFFSETS_PER_THREAD)
                    .map(|_| rng.random_range(0..slots))
                    .collect(),
                Workload::Neighbour => (t as u64..NEIGHBOUR_WINDOW).step_by(threads).collect(),
            };
            ThreadPlan {
                offsets,
                id: t as u16 + 1,
            }
        })
        .collect()
}

/// The id the `lookup` workload records at `offset`.
fn lookup_id(offset: u64) -> u16 {
    (offset / 16 % 4000) as u16 + 1
}

/// Records what must be there before timing starts.
fn prepare(map: &SwapCgroupMap, workload: Workload, slots: u64) -> anyhow::Result<()> {
    let cluster = SWAPFILE_CLUSTER as u64;
    match workload {
        Workload::Lookup => {
            for offset in (0..slots).step_by(16) {
                map.record(offset, lookup_id(offset), 16)?;
            }
        }
        _ => {
            for c in 0..slots / cluster {
                map.record(
                    (c + 1) * cluster - BACKGROUND_PAGES,
                    BACKGROUND_ID,
                    BACKGROUND_PAGES as u32,
                )?;
            }
        }
    }
    Ok(())
}

/// The timed loop on one design. Returns a checksum of every returned id.
fn run_map(map: &SwapCgroupMap, workload: Workload, plan: &ThreadPlan, iterations: u64) -> u64 {
    let nr = workload.folio_pages();
    let offsets = &plan.offsets;
    let mut sum = 0u64;
    let mut at = 0;
    for _ in 0..iterations {
        let offset = offsets[at];
        at = if at + 1 == offsets.len() { 0 } else { at + 1 };
        if workload == Workload::Lookup {
            sum += u64::from(map.lookup(offset).expect("offsets are in range"));
        } else {
            sum += u64::from(
                map.record(offset, plan.id, nr)
                    .expect("offsets are in range"),
            );
            sum += u64::from(map.lookup(offset).expect("offsets are in range"));
            sum += u64::from(map.clear(offset, nr).expect("offsets are in range"));
        }
    }
    sum
}

/// The same loop on a plain `u16` slice: the hardware limit. `black_box`
/// between calls keeps the compiler from merging one call's stores into the
/// next, so every load and store really happens.
fn run_limit(ids: &mut [u16], workload: Workload, plan: &ThreadPlan, iterations: u64) -> u64 {
    let nr = workload.folio_pages() as usize;
    let offsets = &plan.offsets;
    let mut sum = 0u64;
    let mut at = 0;
    for _ in 0..iterations {
        let offset = offsets[at] as usize;
        at = if at + 1 == offsets.len() { 0 } else { at + 1 };
        if workload == Workload::Lookup {
            sum += u64::from(black_box(&*ids)[offset]);
            continue;
        }
        let slots = &mut black_box(&mut *ids)[offset..offset + nr];
        sum += u64::from(slots[0]);
        slots.fill(plan.id);
        sum += u64::from(black_box(&*ids)[offset]);
        let slots = &mut black_box(&mut *ids)[offset..offset + nr];
        sum += u64::from(slots[0]);
        slots.fill(0);
    }
    sum
}

/// The checksum a correct run of `iterations` must produce.
fn expected_sum(workload: Workload, plan: &ThreadPlan, iterations: u64) -> u64 {
    let per_cycle = |offsets: &[u64]| -> u64 {
        offsets
            .iter()
            .map(|&o| match workload {
                Workload::Lookup => u64::from(lookup_id(o)),
                _ => 2 * u64::from(plan.id),
            })
            .sum()
    };
    let len = plan.offsets.len() as u64;
    per_cycle(&plan.offsets) * (iterations / len)
        + per_cycle(&plan.offsets[..(iterations % len) as usize])
}

fn measure_design(
    design: Design,
    workload: Workload,
    plans: &[ThreadPlan],
    slots: u64,
    iterations: u64,
) -> anyhow::Result<Sample> {
    let map = SwapCgroupMap::new(design, slots)?;
    prepare(&map, workload, slots)?;
    let timed = timed_threads(plans.len(), |t| {
        let sum = run_map(&map, workload, &plans[t], iterations);
        let want = expected_sum(workload, &plans[t], iterations);
        ensure!(
            sum == want,
            "{design} {} thread {t}: checksum {sum} != {want}",
            workload.name()
        );
        Ok(())
    })?;
    let mops = mops(workload, plans.len(), iterations, timed.secs);
    Ok(Sample::new(mops, &timed))
}

fn measure_limit(
    workload: Workload,
    plan: &ThreadPlan,
    slots: u64,
    iterations: u64,
) -> anyhow::Result<Sample> {
    let mut ids = vec![0u16; slots as usize];
    if workload == Workload::Lookup {
        for (offset, id) in ids.iter_mut().enumerate() {
            *id = lookup_id(offset as u64);
        }
    }
    let (sum, timed) = timed_here(|| Ok(run_limit(&mut ids, workload, plan, iterations)))?;
    let want = expected_sum(workload, plan, iterations);
    ensure!(
        sum == want,
        "limit {}: checksum {sum} != {want}",
        workload.name()
    );
    Ok(Sample::new(
        mops(workload, 1, iterations, timed.secs),
        &timed,
    ))
}

fn mops(workload: Workload, threads: usize, iterations: u64, secs: f64) -> f64 {
    (threads as u64 * iterations * workload.calls_per_iteration()) as f64 / secs / 1e6
}

/// Bytes per slot of a `slots`-slot device, dense (every slot recorded) or
/// sparse (one folio in 1% of clusters).
fn memory_per_slot(design: Design, slots: u64, dense: bool) -> anyhow::Result<f64> {
    let map = SwapCgroupMap::new(design, slots)?;
    let cluster = SWAPFILE_CLUSTER as u64;
    if dense {
        for offset in (0..slots).step_by(16) {
            map.record(offset, 1, 16)?;
        }
    } else {
        for c in (0..slots / cluster).step_by(100) {
            map.record(c * cluster, 1, 16)?;
        }
    }
    Ok(map.memory_bytes() as f64 / slots as f64)
}

#[derive(Debug, Serialize)]
struct ResultRow {
    design: String,
    workload: Workload,
    threads: usize,
    /// Median over repetitions, millions of calls per second.
    mops: f64,
    stdev: f64,
    mops_min: f64,
    mops_max: f64,
    ratio_locked: Option<f64>,
    ratio_limit: f64,
    samples: Vec<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

#[derive(Debug, Serialize)]
struct LimitRow {
    workload: Workload,
    threads: usize,
    mops: f64,
    stdev: f64,
    mops_min: f64,
    mops_max: f64,
    samples: Vec<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

#[derive(Debug, Serialize)]
struct MemoryRow {
    design: String,
    layout: &'static str,
    bytes_per_slot: f64,
    ratio_packed: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Config {
    slots: u64,
    ops_per_thread: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    seed: u64,
    slots_per_cluster: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    head: ReportHead,
    config: Config,
    results: Vec<ResultRow>,
    limit: Vec<LimitRow>,
    memory: Vec<MemoryRow>,
}

/// One configuration of a run: a workload's plain `u16` limit (one arm),
/// or every design (one arm each) on a workload at a thread count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunConfig {
    Limit(Workload),
    Designs(Workload, usize),
}

/// Validated settings of one invocation.
struct Plan {
    slots: u64,
    iterations: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    designs: Vec<Design>,
    workloads: Vec<Workload>,
    seed: u64,
    /// Per workload: its limit, then every thread count.
    configs: Vec<RunConfig>,
    /// Arms of each configuration.
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &SwapCgroupArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let slots = common.scaled(args.slots, 1 << 18, 1 << 20);
        let iterations = common.scaled(args.ops, 200_000, 2_000_000);
        common.validate(&[("--ops", iterations)])?;
        ensure!(
            !args.designs.is_empty() && !args.workloads.is_empty(),
            "nothing to run"
        );
        let max_threads = common.threads.iter().copied().max().unwrap_or(0);
        let cluster = SWAPFILE_CLUSTER as u64;
        if !slots.is_multiple_of(cluster) || slots < cluster * max_threads as u64 {
            bail!(
                "--slots must be a multiple of {cluster} with at least one cluster per thread ({max_threads} threads)"
            );
        }
        if args.workloads.contains(&Workload::Neighbour) {
            ensure!(
                max_threads as u64 <= NEIGHBOUR_WINDOW,
                "neighbour runs at most {NEIGHBOUR_WINDOW} threads"
            );
        }
        let configs: Vec<RunConfig> = args
            .workloads
            .iter()
            .flat_map(|&w| {
                let by_threads = common
                    .threads
                    .iter()
                    .map(move |&t| RunConfig::Designs(w, t));
                std::iter::once(RunConfig::Limit(w)).chain(by_threads)
            })
            .collect();
        let arms = configs
            .iter()
            .map(|c| match c {
                RunConfig::Limit(_) => 1,
                RunConfig::Designs(..) => args.designs.len(),
            })
            .collect();
        Ok(Self {
            slots,
            iterations,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            threads: common.threads.clone(),
            designs: args.designs.clone(),
            workloads: args.workloads.clone(),
            seed: args.seed,
            configs,
            arms,
        })
    }
}

/// What [`Benchmark::measure`] found.
struct Samples {
    /// Mops/s of every run, in [`Plan::configs`] order.
    runs: Runs<Sample>,
    memory: Vec<MemoryRow>,
}

impl Benchmark for Plan {
    const NAME: &'static str = "swap-cgroup";
    type Samples = Samples;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "slots {}, {} iterations per thread per round, median of {} interleaved reps of phases >= {} ms, Mops/s (calls: record, lookup and clear each count one)",
            self.slots, self.iterations, self.reps, self.min_phase_ms
        )
    }

    /// Every timed run, interleaved (see [`super::schedule`]), then the
    /// memory each design takes.
    fn measure(&self) -> anyhow::Result<Samples> {
        let plan = Interleaved::new(self.reps, self.min_phase_ms, &self.arms, false);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let runs = plan.run(
            &mut progress,
            |c, a| self.arm_name(c, a),
            |c, a, rounds| self.run_arm(c, a, rounds),
        )?;
        progress.finish();
        Ok(Samples {
            runs,
            memory: self.memory_rows()?,
        })
    }

    fn summarise(&self, head: ReportHead, samples: Samples) -> Report {
        let runs = &samples.runs;
        let limit: Vec<LimitRow> = (self.configs.iter().enumerate())
            .filter_map(|(ci, &c)| match c {
                RunConfig::Limit(workload) => Some(limit_row(workload, runs, ci)),
                RunConfig::Designs(..) => None,
            })
            .collect();
        let results = self.result_rows(runs, &limit);
        Report {
            head,
            config: Config {
                slots: self.slots,
                ops_per_thread: self.iterations,
                reps: self.reps,
                min_phase_ms: self.min_phase_ms,
                threads: self.threads.clone(),
                seed: self.seed,
                slots_per_cluster: SWAPFILE_CLUSTER,
            },
            results,
            limit,
            memory: samples.memory,
        }
    }

    fn print_tables(report: &Report) {
        print_speed_table(report);
        print_memory_table(&report.memory);
        print_targets(&report.results);
    }

    /// Mops/s against threads, one panel per workload.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = self.workloads.iter().map(|&w| Panel {
            y_label: None,
            title: w.name().to_owned(),
            series: self
                .designs
                .iter()
                .map(|d| {
                    let rows = report.results.iter();
                    let rows = rows.filter(|r| r.workload == w && r.design == d.name());
                    Series::by_threads(d.name(), rows.map(|r| (r.threads, r.mops, r.stdev)))
                })
                .collect(),
        });
        report::chart_by_threads("swap_cgroup: Mops/s by threads", "Mops/s", panels)
    }
}

impl Plan {
    /// What progress calls arm `arm` of configuration `config`.
    fn arm_name(&self, config: usize, arm: usize) -> String {
        match self.configs[config] {
            RunConfig::Limit(w) => format!("{} limit", w.name()),
            RunConfig::Designs(w, threads) => {
                format!("{} {} x{threads}", w.name(), self.designs[arm])
            }
        }
    }

    /// One timed run of arm `arm` of configuration `config`, `rounds`
    /// times the iterations.
    fn run_arm(&self, config: usize, arm: usize, rounds: u64) -> anyhow::Result<Sample> {
        let iterations = self.iterations * rounds;
        match self.configs[config] {
            RunConfig::Limit(workload) => {
                let single = plans(workload, 1, self.slots, self.seed);
                measure_limit(workload, &single[0], self.slots, iterations)
            }
            RunConfig::Designs(workload, threads) => {
                let plans = plans(workload, threads, self.slots, self.seed);
                let design = self.designs[arm];
                measure_design(design, workload, &plans, self.slots, iterations).with_context(
                    || format!("{design} on {} with {threads} threads", workload.name()),
                )
            }
        }
    }

    /// Bytes per slot of every design, dense and sparse, against `packed`.
    fn memory_rows(&self) -> anyhow::Result<Vec<MemoryRow>> {
        let mut memory = Vec::new();
        for (layout, dense) in [("dense", true), ("sparse", false)] {
            let packed = memory_per_slot(Design::Packed, self.slots, dense)?;
            for &design in &self.designs {
                let b = memory_per_slot(design, self.slots, dense)?;
                memory.push(MemoryRow {
                    design: design.name().to_owned(),
                    layout,
                    bytes_per_slot: b,
                    ratio_packed: Some(b / packed),
                });
            }
        }
        Ok(memory)
    }

    /// A row per workload, thread count and design, against `locked` and
    /// the workload's `limit`.
    fn result_rows(&self, runs: &Runs<Sample>, limit: &[LimitRow]) -> Vec<ResultRow> {
        let locked = self.designs.iter().position(|&d| d == Design::Locked);
        let mut results = Vec::new();
        for (ci, &config) in self.configs.iter().enumerate() {
            let RunConfig::Designs(workload, threads) = config else {
                continue;
            };
            let limit = limit.iter().find(|l| l.workload == workload);
            let locked = locked.map(|di| Stats::of(&runs.values(ci, di)).median);
            for (di, &design) in self.designs.iter().enumerate() {
                let samples = runs.values(ci, di);
                let st = Stats::of(&samples);
                results.push(ResultRow {
                    design: design.name().to_owned(),
                    workload,
                    threads,
                    mops: st.median,
                    stdev: st.stdev,
                    mops_min: st.min,
                    mops_max: st.max,
                    ratio_locked: locked.map(|l| st.median / l),
                    ratio_limit: limit.map_or(f64::NAN, |l| st.median / l.mops),
                    samples,
                    phases: runs.facts(ci, di),
                });
            }
        }
        results
    }
}

/// The row of a workload's limit, configuration `config` of `runs`.
fn limit_row(workload: Workload, runs: &Runs<Sample>, config: usize) -> LimitRow {
    let samples = runs.values(config, 0);
    let st = Stats::of(&samples);
    LimitRow {
        workload,
        threads: 1,
        mops: st.median,
        stdev: st.stdev,
        mops_min: st.min,
        mops_max: st.max,
        samples,
        phases: runs.facts(config, 0),
    }
}

/// Mops/s of every design, then of the limit.
fn print_speed_table(report: &Report) {
    let reps = report.config.reps;
    let rows = report
        .results
        .iter()
        .map(|r| {
            vec![
                r.workload.name().to_owned(),
                r.threads.to_string(),
                r.design.clone(),
                format!("{:.1}", r.mops),
                report::fmt_stdev(r.stdev, reps, 1),
                report::fmt_range(r.mops_min, r.mops_max, reps, 1),
                r.ratio_locked.map_or("-".into(), |x| format!("{x:.2}x")),
                format!("{:.2}x", r.ratio_limit),
                r.phases.cpu_cell(),
            ]
        })
        .chain(report.limit.iter().map(|l| {
            vec![
                l.workload.name().to_owned(),
                "1".into(),
                "limit (plain u16)".into(),
                format!("{:.1}", l.mops),
                report::fmt_stdev(l.stdev, reps, 1),
                report::fmt_range(l.mops_min, l.mops_max, reps, 1),
                "-".into(),
                "1.00x".into(),
                l.phases.cpu_cell(),
            ]
        }));
    report::print_table(
        &[
            "workload",
            "threads",
            "design",
            "Mops/s",
            "stdev",
            "min–max",
            "vs locked",
            "vs limit",
            "CPU",
        ],
        rows,
    );
    let facts = report.results.iter().map(|r| &r.phases);
    let facts = facts.chain(report.limit.iter().map(|l| &l.phases));
    report::print_method_note(facts, report.config.min_phase_ms as f64);
}

fn print_memory_table(memory: &[MemoryRow]) {
    let rows = memory.iter().map(|m| {
        vec![
            m.layout.to_owned(),
            m.design.clone(),
            format!("{:.4}", m.bytes_per_slot),
            m.ratio_packed
                .map_or("-".into(), |x| format!("{:.1}%", x * 100.0)),
        ]
    });
    report::print_table(&["layout", "design", "bytes/slot", "of packed"], rows);
}

/// Prints how `memcg` fares against every other design at every point.
fn print_targets(results: &[ResultRow]) {
    let mut worst: Option<(f64, String)> = None;
    for r in results.iter().filter(|r| r.design == Design::Memcg.name()) {
        for other in results
            .iter()
            .filter(|o| o.workload == r.workload && o.threads == r.threads && o.design != r.design)
        {
            let ratio = r.mops / other.mops;
            if worst.as_ref().is_none_or(|(w, _)| ratio < *w) {
                worst = Some((
                    ratio,
                    format!(
                        "{} on {} at {} threads",
                        other.design,
                        r.workload.name(),
                        r.threads
                    ),
                ));
            }
        }
    }
    if let Some((ratio, against)) = worst {
        println!("memcg's smallest lead: {ratio:.2}x over {against}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_stay_in_owned_ranges_and_avoid_background() {
        let slots = 8 * SWAPFILE_CLUSTER as u64;
        for workload in [Workload::Folio4k, Workload::Folio64k] {
            let plans = plans(workload, 2, slots, 1);
            let nr = u64::from(workload.folio_pages());
            for (t, plan) in plans.iter().enumerate() {
                for &o in &plan.offsets {
                    let cluster = o / SWAPFILE_CLUSTER as u64;
                    assert_eq!(
                        cluster / 4,
                        t as u64,
                        "thread {t} owns clusters {}..",
                        t * 4
                    );
                    assert_eq!(o % nr, 0, "aligned");
                    assert!(
                        o % SWAPFILE_CLUSTER as u64 + nr
                            <= SWAPFILE_CLUSTER as u64 - BACKGROUND_PAGES
                    );
                }
            }
        }
        let plans = plans(Workload::Neighbour, 2, slots, 1);
        assert!(plans[0].offsets.iter().all(|o| o % 2 == 0));
        assert!(plans[1].offsets.iter().all(|o| o % 2 == 1));
    }

    #[test]
    fn every_design_and_the_limit_produce_the_expected_checksum() {
        let slots = 4 * SWAPFILE_CLUSTER as u64;
        for workload in Workload::value_variants().iter().copied() {
            let plans = plans(workload, 2, slots, 7);
            for design in Design::ALL {
                let sample = measure_design(design, workload, &plans, slots, 300).unwrap();
                assert!(sample.value > 0.0 && sample.cpu_share > 0.0, "{sample:?}");
            }
            measure_limit(workload, &plans[0], slots, 300).unwrap();
        }
    }

    #[test]
    fn memory_layouts() {
        let slots = 200 * SWAPFILE_CLUSTER as u64;
        let dense = memory_per_slot(Design::Memcg, slots, true).unwrap();
        let sparse = memory_per_slot(Design::Memcg, slots, false).unwrap();
        assert!(dense > 2.0 && dense < 2.02, "{dense}");
        // At most one 4 KiB page per used cluster: 4096 / (100 * 512) B/slot.
        assert!(sparse <= 0.1, "{sparse}");
    }
}
