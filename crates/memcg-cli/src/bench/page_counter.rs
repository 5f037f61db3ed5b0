//! `memcg bench page-counter`: charge + uncharge throughput of the lockless
//! `PageCounter` against `res_counter`, the design it replaced in the
//! kernel (a hierarchical counter with one lock per level), in one run.
//! Both live in the library (`memcg::page_counter`, picked by
//! `PageCounterDesign`).
//!
//! Each thread charges and uncharges one page at a time on its own leaf
//! cgroup; leaves share every ancestor, so at depth D the D-1 ancestors are
//! updated by every thread (depth 1: each thread has its own counter).

use anyhow::ensure;
use clap::Args;
use memcg::page_counter::{Counter, PageCounterDesign};
use serde::Serialize;

use super::{
    Benchmark, CommonArgs, DepthScale, Interleaved, MopsStats, Runs, Sample, run_plan,
    timed_threads,
};
use crate::report::{self, Chart, Panel, Progress, ReportHead, Series, Stats};

/// Flags of `memcg bench page-counter`.
#[derive(Debug, Clone, Args)]
pub struct PageCounterArgs {
    /// Hierarchy depths (levels charged), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub depths: Vec<usize>,
    /// Charge + uncharge pairs per thread per round; a run repeats rounds
    /// until it lasts `--min-phase-ms` [default: 1000000; --quick 100000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl PageCounterArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            depths: vec![1, 4, 8],
            ops: smoke.then_some(2_000),
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &PageCounterArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// The name of a design in tables and reports: the baseline's says it is
/// the locked one.
fn label(design: PageCounterDesign) -> &'static str {
    match design {
        PageCounterDesign::ResCounter => "res_counter (locked)",
        PageCounterDesign::PageCounter => "page_counter",
    }
}

/// Leaves, one per thread, under a shared chain of `depth - 1` ancestors;
/// returns them and the top of the chain (none at depth 1).
fn hierarchy(
    design: PageCounterDesign,
    depth: usize,
    threads: usize,
) -> (Vec<Counter>, Option<Counter>) {
    let under =
        |parent: Option<&Counter>| parent.map_or_else(|| Counter::new(design), Counter::child);
    let mut top = None;
    for _ in 1..depth {
        top = Some(under(top.as_ref()));
    }
    let leaves = (0..threads).map(|_| under(top.as_ref())).collect();
    (leaves, top)
}

/// Mops/s (charge + uncharge pairs) of one run of `ops` pairs per thread.
fn run_once(
    design: PageCounterDesign,
    depth: usize,
    threads: usize,
    ops: u64,
) -> anyhow::Result<Sample> {
    let (leaves, top) = hierarchy(design, depth, threads);
    let timed = timed_threads(threads, |t| {
        let leaf = &leaves[t];
        for _ in 0..ops {
            ensure!(leaf.try_charge(1), "unlimited counter refused a charge");
            leaf.uncharge(1);
        }
        Ok(())
    })?;
    ensure!(
        top.as_ref().is_none_or(|t| t.usage() == 0),
        "{design} did not balance"
    );
    ensure!(
        leaves.iter().all(|l| l.usage() == 0),
        "{design} leaf did not balance"
    );
    let mops = threads as f64 * ops as f64 / timed.secs / 1e6;
    Ok(Sample::new(mops, &timed))
}

#[derive(Debug, Serialize)]
struct ResultRow {
    design: &'static str,
    depth: usize,
    threads: usize,
    #[serde(flatten)]
    stats: MopsStats,
    /// Median over the locked baseline's median.
    ratio_locked: f64,
}

type Report = super::Report<DepthScale, ResultRow>;

/// Validated settings of one invocation.
struct Plan {
    scale: DepthScale,
    /// Arms of each configuration: every design.
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &PageCounterArgs) -> anyhow::Result<Self> {
        let scale = DepthScale::of(&args.common, args.ops, &args.depths)?;
        let arms = vec![PageCounterDesign::ALL.len(); scale.configs().len()];
        Ok(Self { scale, arms })
    }
}

/// Every run: configs in [`DepthScale::configs`] order, arms in
/// [`PageCounterDesign::ALL`] order.
type Samples = Runs<Sample>;

impl Benchmark for Plan {
    const NAME: &'static str = "page-counter";
    type Samples = Samples;
    type Report = Report;

    fn describe(&self) -> String {
        self.scale
            .describe("charge+uncharge pairs of 1 page on an own leaf")
    }

    /// Every run, interleaved (see [`super::schedule`]).
    fn measure(&self) -> anyhow::Result<Samples> {
        let configs = self.scale.configs();
        let designs = PageCounterDesign::ALL;
        let plan = Interleaved::new(self.scale.reps, self.scale.min_phase_ms, &self.arms, false);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let name = |c: usize, d: usize| {
            let (depth, threads) = configs[c];
            format!("{} depth {depth} x{threads}", label(designs[d]))
        };
        let runs = plan.run(&mut progress, name, |c, d, rounds| {
            let (depth, threads) = configs[c];
            run_once(
                designs[d],
                depth,
                threads,
                self.scale.ops_per_thread * rounds,
            )
        })?;
        progress.finish();
        Ok(runs)
    }

    fn summarise(&self, head: ReportHead, runs: Samples) -> Report {
        let locked = PageCounterDesign::ALL
            .iter()
            .position(|&d| d == PageCounterDesign::ResCounter)
            .expect("the baseline is a design");
        let mut results = Vec::new();
        for (ci, (depth, threads)) in self.scale.configs().into_iter().enumerate() {
            let locked_median = Stats::of(&runs.values(ci, locked)).median;
            for (di, design) in PageCounterDesign::ALL.into_iter().enumerate() {
                let stats = MopsStats::of(&runs, ci, di);
                results.push(ResultRow {
                    design: label(design),
                    depth,
                    threads,
                    ratio_locked: stats.mops / locked_median,
                    stats,
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
        let reps = report.config.reps;
        let rows = report.results.iter().map(|r| {
            let [mops, stdev, range] = r.stats.cells(reps);
            vec![
                r.depth.to_string(),
                r.threads.to_string(),
                r.design.to_owned(),
                mops,
                stdev,
                range,
                format!("{:.2}x", r.ratio_locked),
                r.stats.phases.cpu_cell(),
            ]
        });
        report::print_table(
            &[
                "depth",
                "threads",
                "design",
                "Mops/s",
                "stdev",
                "min–max",
                "vs locked",
                "CPU",
            ],
            rows,
        );
        let facts = report.results.iter().map(|r| &r.stats.phases);
        report::print_method_note(facts, report.config.min_phase_ms as f64);
    }

    /// Mops/s against threads, one panel per depth.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = self.scale.depths.iter().map(|&depth| Panel {
            y_label: None,
            title: format!("depth {depth}"),
            series: PageCounterDesign::ALL
                .into_iter()
                .map(|d| {
                    let rows = report.results.iter();
                    let rows = rows.filter(|r| r.depth == depth && r.design == label(d));
                    let points = rows.map(|r| (r.threads, r.stats.mops, r.stats.stdev));
                    Series::by_threads(label(d), points)
                })
                .collect(),
        });
        report::chart_by_threads(
            "page_counter vs res_counter: charge+uncharge Mops/s",
            "Mops/s",
            panels,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_designs_balance_at_every_depth() {
        for depth in [1, 3] {
            for design in PageCounterDesign::ALL {
                let sample = run_once(design, depth, 2, 500).unwrap();
                assert!(sample.value > 0.0 && sample.phase_secs > 0.0);
                assert!(sample.cpu_share > 0.0, "{sample:?}");
            }
        }
    }
}
