//! `memcg bench charge`: the memory cgroup charge path (`try_charge` +
//! `uncharge` of one page through `memcontrol`: page counters, statistics,
//! the charged-page pin) with and without the per-thread charge stock, in
//! one run.
//!
//! Each thread charges and uncharges one anonymous page at a time, on its
//! own leaf (`own`) or on one leaf all threads share (`shared`), the
//! leaves `depth` levels below the root under one chain of ancestors. With
//! the stock a charge takes 64 pages from the counters once and the next 63
//! charges from its slot's stock; an uncharge always goes to the counters,
//! as the kernel's does.

use anyhow::{Context, ensure};
use clap::Args;
use memcg::memcontrol::{CgroupTree, ChargeKind, MemCgroup};
use serde::Serialize;
use std::sync::Arc;

use super::{
    Benchmark, CommonArgs, DepthScale, Interleaved, MopsStats, Runs, Sample, run_plan,
    timed_threads,
};
use crate::report::{self, Chart, Panel, Progress, ReportHead, Series, Stats};
use memcg::memcontrol::Gfp;

/// Flags of `memcg bench charge`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("threads", |a| a.default_value("1,2,4")))]
pub struct ChargeArgs {
    /// Depths of the leaves below the root, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub depths: Vec<usize>,
    /// Charge + uncharge pairs per thread per round [default: 1000000;
    /// --quick 100000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// Compare the stock `on`, `off`, or both [default: both].
    #[arg(long, value_delimiter = ',')]
    pub charge_stock: Vec<StockSetting>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Whether charges go through the per-thread stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StockSetting {
    /// Every charge on the counters.
    Off,
    /// The kernel's per-CPU stock.
    On,
}

impl StockSetting {
    fn name(self) -> &'static str {
        match self {
            StockSetting::Off => "stock off",
            StockSetting::On => "stock on",
        }
    }
}

/// Whose leaf the threads charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Leaf {
    /// Each thread its own leaf (sharing the ancestors).
    Own,
    /// One leaf for every thread.
    Shared,
}

impl Leaf {
    const ALL: [Leaf; 2] = [Leaf::Own, Leaf::Shared];

    fn name(self) -> &'static str {
        match self {
            Leaf::Own => "own leaf",
            Leaf::Shared => "shared leaf",
        }
    }
}

impl ChargeArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            depths: vec![1, 4, 8],
            ops: smoke.then_some(2_000),
            charge_stock: Vec::new(),
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &ChargeArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// A tree with a chain of `depth - 1` ancestors and the leaves `threads`
/// threads charge (one per thread, or one shared).
fn hierarchy(
    stock: StockSetting,
    depth: usize,
    threads: usize,
    leaf: Leaf,
) -> anyhow::Result<(CgroupTree, Vec<Arc<MemCgroup>>)> {
    let tree = CgroupTree::default();
    tree.set_charge_stock(stock == StockSetting::On);
    let mut path = String::new();
    for level in 1..depth {
        path.push_str(&format!("/l{level}"));
        tree.mkdir(&path)?;
    }
    let leaves = match leaf {
        Leaf::Own => (0..threads)
            .map(|t| {
                tree.mkdir(&format!("{path}/t{t}"))?
                    .memcg()
                    .context("no memory cgroup")
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        Leaf::Shared => {
            let shared = tree
                .mkdir(&format!("{path}/shared"))?
                .memcg()
                .context("no memory cgroup")?;
            vec![shared; threads]
        }
    };
    Ok((tree, leaves))
}

/// Mops/s (charge + uncharge pairs) of one run of `ops` pairs per thread.
fn run_once(
    stock: StockSetting,
    depth: usize,
    threads: usize,
    leaf: Leaf,
    ops: u64,
) -> anyhow::Result<Sample> {
    let (tree, leaves) = hierarchy(stock, depth, threads, leaf)?;
    // The memory cgroups' own metadata, charged to their parents (less
    // what the stock took with it).
    tree.drain_all_stock(tree.root());
    let metadata_pages = tree.root().memory().usage();
    let timed = timed_threads(threads, |t| {
        let cg = &leaves[t];
        for _ in 0..ops {
            tree.try_charge(cg, 1, ChargeKind::Anon, Gfp::Kernel)?;
            tree.uncharge(cg, 1, ChargeKind::Anon);
        }
        Ok(())
    })?;
    tree.drain_all_stock(tree.root());
    ensure!(
        tree.root().memory().usage() == metadata_pages
            && leaves.iter().all(|l| l.memory().usage() == 0),
        "charges did not balance"
    );
    let mops = threads as f64 * ops as f64 / timed.secs / 1e6;
    Ok(Sample::new(mops, &timed))
}

#[derive(Debug, Serialize)]
struct ResultRow {
    stock: StockSetting,
    leaf: Leaf,
    depth: usize,
    threads: usize,
    #[serde(flatten)]
    stats: MopsStats,
    /// Median over the stock-off median of the same configuration.
    ratio_stock_off: Option<f64>,
}

type Report = super::Report<DepthScale, ResultRow>;

/// Validated settings of one invocation.
struct Plan {
    scale: DepthScale,
    stocks: Vec<StockSetting>,
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &ChargeArgs) -> anyhow::Result<Self> {
        let scale = DepthScale::of(&args.common, args.ops, &args.depths)?;
        let stocks = if args.charge_stock.is_empty() {
            vec![StockSetting::Off, StockSetting::On]
        } else {
            args.charge_stock.clone()
        };
        let configs = scale.configs().len() * Leaf::ALL.len();
        Ok(Self {
            arms: vec![stocks.len(); configs],
            scale,
            stocks,
        })
    }

    /// Every `(depth, threads, leaf)`, depths outermost.
    fn configs(&self) -> Vec<(usize, usize, Leaf)> {
        let pairs = self.scale.configs().into_iter();
        pairs
            .flat_map(|(d, t)| Leaf::ALL.map(|leaf| (d, t, leaf)))
            .collect()
    }
}

impl Benchmark for Plan {
    const NAME: &'static str = "charge";
    type Samples = Runs<Sample>;
    type Report = Report;

    fn describe(&self) -> String {
        self.scale
            .describe("try_charge+uncharge pairs of 1 page through memcontrol")
    }

    fn measure(&self) -> anyhow::Result<Runs<Sample>> {
        let configs = self.configs();
        let plan = Interleaved::new(self.scale.reps, self.scale.min_phase_ms, &self.arms, false);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let name = |c: usize, a: usize| {
            let (depth, threads, leaf) = configs[c];
            format!(
                "{} depth {depth} {} x{threads}",
                self.stocks[a].name(),
                leaf.name()
            )
        };
        let runs = plan.run(&mut progress, name, |c, a, rounds| {
            let (depth, threads, leaf) = configs[c];
            run_once(
                self.stocks[a],
                depth,
                threads,
                leaf,
                self.scale.ops_per_thread * rounds,
            )
        })?;
        progress.finish();
        Ok(runs)
    }

    fn summarise(&self, head: ReportHead, runs: Runs<Sample>) -> Report {
        let off = self.stocks.iter().position(|&s| s == StockSetting::Off);
        let mut results = Vec::new();
        for (ci, (depth, threads, leaf)) in self.configs().into_iter().enumerate() {
            let off_median = off.map(|a| Stats::of(&runs.values(ci, a)).median);
            for (ai, &stock) in self.stocks.iter().enumerate() {
                let stats = MopsStats::of(&runs, ci, ai);
                results.push(ResultRow {
                    stock,
                    leaf,
                    depth,
                    threads,
                    ratio_stock_off: off_median.map(|m| stats.mops / m),
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
                r.leaf.name().to_owned(),
                r.stock.name().to_owned(),
                mops,
                stdev,
                range,
                r.ratio_stock_off
                    .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}x")),
                r.stats.phases.cpu_cell(),
            ]
        });
        report::print_table(
            &[
                "depth",
                "threads",
                "leaf",
                "stock",
                "Mops/s",
                "stdev",
                "min–max",
                "vs stock off",
                "CPU",
            ],
            rows,
        );
        let facts = report.results.iter().map(|r| &r.stats.phases);
        report::print_method_note(facts, report.config.min_phase_ms as f64);
    }

    /// Mops/s against threads, one panel per depth and leaf sharing.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let mut panels = Vec::new();
        for &depth in &self.scale.depths {
            for leaf in Leaf::ALL {
                let series = self
                    .stocks
                    .iter()
                    .map(|&s| {
                        let rows = report
                            .results
                            .iter()
                            .filter(|r| r.depth == depth && r.leaf == leaf && r.stock == s);
                        let points = rows.map(|r| (r.threads, r.stats.mops, r.stats.stdev));
                        Series::by_threads(s.name(), points)
                    })
                    .collect();
                panels.push(Panel {
                    y_label: None,
                    title: format!("depth {depth}, {}", leaf.name()),
                    series,
                });
            }
        }
        report::chart_by_threads(
            "memcg charge+uncharge Mops/s, charge stock off vs on",
            "Mops/s",
            panels,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_balances() {
        for stock in [StockSetting::Off, StockSetting::On] {
            for leaf in Leaf::ALL {
                let s = run_once(stock, 3, 2, leaf, 1_000).unwrap();
                assert!(s.value > 0.0, "{s:?}");
            }
        }
    }
}
