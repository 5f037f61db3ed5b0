//! `memcg bench page-counter`: charge + uncharge throughput of the lockless
//! `PageCounter` against `res_counter`, the design it replaced in the
//! kernel (a hierarchical counter with one lock per level), in one run.
//!
//! Each thread charges and uncharges one page at a time on its own leaf
//! cgroup; leaves share every ancestor, so at depth D the D-1 ancestors are
//! updated by every thread (depth 1: each thread has its own counter).

use std::sync::{Arc, Mutex};

use anyhow::ensure;
use clap::Args;
use memcg::page_counter::{PAGE_COUNTER_MAX, PageCounter};
use serde::Serialize;

use super::timed_threads;
use crate::report::{self, Chart, Machine, Panel, Progress, ReportFiles, Series, Stats, Tool};

/// Flags of `memcg bench page-counter`.
#[derive(Debug, Clone, Args)]
pub struct PageCounterArgs {
    /// Thread counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Hierarchy depths (levels charged), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub depths: Vec<usize>,
    /// Charge + uncharge pairs per thread per run [default: 1000000; --quick 100000].
    #[arg(long)]
    pub ops: Option<u64>,
    /// Repetitions [default: 5; --quick 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Smaller defaults for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// `--json` and `--svg`.
    #[command(flatten)]
    pub files: ReportFiles,
}

impl PageCounterArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            threads: vec![1, 2],
            depths: vec![1, 4, 8],
            ops: smoke.then_some(2_000),
            reps: smoke.then_some(1),
            quick: true,
            files: ReportFiles::default(),
        }
    }
}

/// One level of the baseline: usage, limit, peak and failcnt under a lock.
#[derive(Default)]
struct ResLevel {
    usage: u64,
    max: u64,
    watermark: u64,
    failcnt: u64,
}

/// The kernel's pre-2014 `res_counter`: hierarchical, one lock per level.
struct ResCounter {
    level: Mutex<ResLevel>,
    parent: Option<Arc<ResCounter>>,
}

impl ResCounter {
    fn new(parent: Option<Arc<ResCounter>>) -> Self {
        Self {
            level: Mutex::new(ResLevel {
                max: PAGE_COUNTER_MAX,
                ..Default::default()
            }),
            parent,
        }
    }

    fn levels(&self) -> impl Iterator<Item = &ResCounter> {
        std::iter::successors(Some(self), |c| c.parent.as_deref())
    }

    /// `res_counter_charge`: charge level by level, undo on failure.
    fn try_charge(&self, nr: u64) -> bool {
        for (i, c) in self.levels().enumerate() {
            let mut l = c.level.lock().expect("no panics while held");
            if l.usage + nr > l.max {
                l.failcnt += 1;
                drop(l);
                self.levels().take(i).for_each(|u| u.uncharge_one(nr));
                return false;
            }
            l.usage += nr;
            l.watermark = l.watermark.max(l.usage);
        }
        true
    }

    fn uncharge_one(&self, nr: u64) {
        self.level.lock().expect("no panics while held").usage -= nr;
    }

    fn uncharge(&self, nr: u64) {
        self.levels().for_each(|c| c.uncharge_one(nr));
    }

    fn usage(&self) -> u64 {
        self.level.lock().expect("no panics while held").usage
    }
}

/// The two designs measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    ResCounter,
    PageCounter,
}

impl Design {
    const ALL: [Design; 2] = [Design::ResCounter, Design::PageCounter];

    fn name(self) -> &'static str {
        match self {
            Design::ResCounter => "res_counter (locked)",
            Design::PageCounter => "page_counter",
        }
    }
}

/// Leaves, one per thread, under a shared chain of `depth - 1` ancestors.
fn page_counter_leaves(
    depth: usize,
    threads: usize,
) -> (Vec<Arc<PageCounter>>, Option<Arc<PageCounter>>) {
    let mut top: Option<Arc<PageCounter>> = None;
    for _ in 1..depth {
        top = Some(Arc::new(PageCounter::new(top, true)));
    }
    let leaves = (0..threads)
        .map(|_| Arc::new(PageCounter::new(top.clone(), true)))
        .collect();
    (leaves, top)
}

fn res_counter_leaves(
    depth: usize,
    threads: usize,
) -> (Vec<Arc<ResCounter>>, Option<Arc<ResCounter>>) {
    let mut top: Option<Arc<ResCounter>> = None;
    for _ in 1..depth {
        top = Some(Arc::new(ResCounter::new(top)));
    }
    let leaves = (0..threads)
        .map(|_| Arc::new(ResCounter::new(top.clone())))
        .collect();
    (leaves, top)
}

/// Mops/s (charge + uncharge pairs) of one run.
fn measure(design: Design, depth: usize, threads: usize, ops: u64) -> anyhow::Result<f64> {
    let secs = match design {
        Design::PageCounter => {
            let (leaves, top) = page_counter_leaves(depth, threads);
            let secs = timed_threads(threads, |t| {
                let leaf = &leaves[t];
                for _ in 0..ops {
                    ensure!(
                        leaf.try_charge(1).is_ok(),
                        "unlimited counter refused a charge"
                    );
                    leaf.uncharge(1);
                }
                Ok(())
            })?;
            ensure!(
                top.as_ref().is_none_or(|t| t.usage() == 0),
                "page_counter did not balance"
            );
            ensure!(
                leaves.iter().all(|l| l.usage() == 0),
                "page_counter leaf did not balance"
            );
            secs
        }
        Design::ResCounter => {
            let (leaves, top) = res_counter_leaves(depth, threads);
            let secs = timed_threads(threads, |t| {
                let leaf = &leaves[t];
                for _ in 0..ops {
                    ensure!(leaf.try_charge(1), "unlimited counter refused a charge");
                    leaf.uncharge(1);
                }
                Ok(())
            })?;
            ensure!(
                top.as_ref().is_none_or(|t| t.usage() == 0),
                "res_counter did not balance"
            );
            secs
        }
    };
    Ok(threads as f64 * ops as f64 / secs / 1e6)
}

#[derive(Debug, Serialize)]
struct ResultRow {
    design: &'static str,
    depth: usize,
    threads: usize,
    /// Median charge + uncharge pairs per second, millions.
    mops: f64,
    stdev: f64,
    ratio_locked: f64,
    samples: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct Config {
    ops_per_thread: u64,
    reps: usize,
    depths: Vec<usize>,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Report {
    bench: &'static str,
    tool: Tool,
    machine: Machine,
    config: Config,
    results: Vec<ResultRow>,
}

/// Runs the benchmark, prints its table, writes JSON/SVG if asked.
pub fn run(args: &PageCounterArgs) -> anyhow::Result<()> {
    let ops = args
        .ops
        .unwrap_or(if args.quick { 100_000 } else { 1_000_000 });
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 });
    ensure!(ops > 0 && reps > 0, "--ops and --reps must be at least 1");
    ensure!(
        !args.threads.is_empty() && !args.threads.contains(&0),
        "--threads needs counts of at least 1"
    );
    ensure!(
        !args.depths.is_empty() && !args.depths.contains(&0),
        "--depths needs depths of at least 1"
    );
    args.files.validate()?;

    let machine = Machine::current();
    println!("## page-counter on {machine}");
    println!(
        "{ops} charge+uncharge pairs of 1 page per thread, own leaf per thread, {reps} reps, median Mops/s\n"
    );
    let configs: Vec<(usize, usize)> = args
        .depths
        .iter()
        .flat_map(|&d| args.threads.iter().map(move |&t| (d, t)))
        .collect();
    let mut progress = Progress::new(
        "page-counter",
        (reps * configs.len() * Design::ALL.len()) as u64,
    );
    let mut samples = vec![[Vec::new(), Vec::new()]; configs.len()];
    for rep in 0..reps {
        for (ci, &(depth, threads)) in configs.iter().enumerate() {
            for (di, &design) in Design::ALL.iter().enumerate() {
                samples[ci][di].push(measure(design, depth, threads, ops)?);
                progress.step(
                    1,
                    &format!("rep {} {} depth {depth} x{threads}", rep + 1, design.name()),
                );
            }
        }
    }
    progress.finish();

    let mut results = Vec::new();
    for (ci, &(depth, threads)) in configs.iter().enumerate() {
        let locked = Stats::of(&samples[ci][0]).median;
        for (di, &design) in Design::ALL.iter().enumerate() {
            let st = Stats::of(&samples[ci][di]);
            results.push(ResultRow {
                design: design.name(),
                depth,
                threads,
                mops: st.median,
                stdev: st.stdev,
                ratio_locked: st.median / locked,
                samples: samples[ci][di].clone(),
            });
        }
    }
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.depth.to_string(),
                r.threads.to_string(),
                r.design.to_owned(),
                format!("{:.1}", r.mops),
                report::fmt_stdev(r.stdev, reps, 1),
                format!("{:.2}x", r.ratio_locked),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(
            &["depth", "threads", "design", "Mops/s", "stdev", "vs locked"],
            rows
        )
    );

    let report = Report {
        bench: "page-counter",
        tool: Tool::current(),
        machine,
        config: Config {
            ops_per_thread: ops,
            reps,
            depths: args.depths.clone(),
            threads: args.threads.clone(),
        },
        results,
    };
    args.files.write(&report, || chart(&report, &args.depths))
}

/// Mops/s against threads, one panel per depth.
fn chart(report: &Report, depths: &[usize]) -> Chart<'static> {
    let panels = depths
        .iter()
        .map(|&depth| Panel {
            title: format!("depth {depth}"),
            series: Design::ALL
                .iter()
                .map(|d| {
                    let rows: Vec<&ResultRow> = report
                        .results
                        .iter()
                        .filter(|r| r.depth == depth && r.design == d.name())
                        .collect();
                    Series {
                        name: d.name().to_owned(),
                        points: rows.iter().map(|r| (r.threads as f64, r.mops)).collect(),
                        errors: rows.iter().map(|r| r.stdev).collect(),
                    }
                })
                .collect(),
        })
        .collect();
    Chart {
        title: "page_counter vs res_counter: charge+uncharge Mops/s",
        x_label: "threads",
        y_label: "Mops/s",
        panels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_designs_balance_at_every_depth() {
        for depth in [1, 3] {
            for design in Design::ALL {
                assert!(measure(design, depth, 2, 500).unwrap() > 0.0);
            }
        }
    }

    #[test]
    fn res_counter_refuses_and_undoes_like_page_counter() {
        let (leaves, top) = res_counter_leaves(3, 1);
        let top = top.unwrap();
        top.level.lock().unwrap().max = 2;
        assert!(leaves[0].try_charge(2));
        assert!(!leaves[0].try_charge(1));
        assert_eq!((leaves[0].usage(), top.usage()), (2, 2));
        assert_eq!(top.level.lock().unwrap().failcnt, 1);
        leaves[0].uncharge(2);
        assert_eq!(top.usage(), 0);
    }
}
