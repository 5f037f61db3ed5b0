//! `memcg bench list-lru`: the seed 002 experiment in userspace, for the
//! `legacy` and `split` list_lru designs in one run.
//!
//! Like the seed's script, C cgroups are created under `/bench/test/1/`,
//! objects are added to two memcg-aware list_lrus per cgroup (one
//! dentry-like and one inode-like, as reading a file does), a shrinker pass
//! walks every cgroup's lists, and all cgroups are removed (reparenting)
//! while other threads keep adding and deleting in cgroups still alive.
//! Phases are timed separately:
//!
//! - `mkdir+alloc`: T threads create the cgroups (each mkdir allocates
//!   lists in both list_lrus).
//! - `add`: T threads add K objects per cgroup to both list_lrus, each
//!   thread on its own cgroups (concurrent adds across cgroups).
//! - `walk`: one shrinker pass, cgroup by cgroup with each one's count as
//!   the scan budget (as reclaim walks memcgs), isolating every other object
//!   and rotating the rest.
//! - `rmdir`: one thread removes every cgroup while T threads churn
//!   (delete and re-add) objects of cgroups still alive.
//!
//! A second measurement removes cgroups holding 1 and 1000 objects each to
//! show that reparenting costs the same whatever a cgroup holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, ensure};
use clap::Args;
use memcg::list_lru::{ListLru, ListLruConfig, LruDesign, Walked};
use memcg::memcontrol::{CgroupTree, MemCgroup, TreeConfig};
use serde::Serialize;

use super::timed_threads;
use crate::report::{self, Chart, Machine, Panel, Progress, ReportFiles, Series, Stats, Tool};

/// Flags of `memcg bench list-lru`.
#[derive(Debug, Clone, Args)]
pub struct ListLruArgs {
    /// Cgroups to create [default: 10000; --quick 2000].
    #[arg(long)]
    pub cgroups: Option<usize>,
    /// Objects per cgroup per list_lru.
    #[arg(long, default_value_t = 8)]
    pub objects: u32,
    /// Thread counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub threads: Vec<usize>,
    /// NUMA nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Repetitions of every configuration [default: 5; --quick 3].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Smaller defaults for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// Designs to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "legacy,split")]
    pub designs: Vec<LruDesign>,
    /// `--json` and `--svg`.
    #[command(flatten)]
    pub files: ReportFiles,
}

impl ListLruArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            cgroups: smoke.then_some(100),
            objects: 8,
            threads: vec![1, 2],
            nodes: 1,
            reps: smoke.then_some(1),
            quick: true,
            designs: LruDesign::ALL.to_vec(),
            files: ReportFiles::default(),
        }
    }
}

const PHASES: [&str; 5] = ["mkdir+alloc", "add", "walk", "rmdir", "total"];

/// One run's phase times in seconds, and the operations of the add phase.
#[derive(Clone)]
struct RunTimes {
    secs: [f64; 5],
    adds: u64,
    churn_ops: u64,
}

/// Everything one run needs.
struct Setup {
    tree: CgroupTree,
    lrus: [ListLru; 2],
}

fn setup(design: LruDesign, cgroups: usize, objects: u32, nodes: usize) -> anyhow::Result<Setup> {
    let max_ids = u32::try_from(cgroups + 8)
        .ok()
        .filter(|&m| m <= memcg::memcontrol::MEM_CGROUP_ID_MAX);
    let max_ids = max_ids.context("--cgroups must leave room below 65535 cgroup ids")?;
    let tree = CgroupTree::new(TreeConfig {
        nr_nodes: nodes,
        max_ids,
        ..TreeConfig::default()
    });
    let max_items = u32::try_from(cgroups)
        .ok()
        .and_then(|c| c.checked_mul(objects))
        .context("--cgroups x --objects must fit in 32 bits")?;
    let config = ListLruConfig {
        memcg_aware: true,
        max_items,
        design,
    };
    let lrus = [ListLru::new(&tree, config)?, ListLru::new(&tree, config)?];
    tree.mkdir_p("/bench/test/1")?;
    Ok(Setup { tree, lrus })
}

/// Thread `t`'s contiguous share of `n` items.
fn share(t: usize, threads: usize, n: usize) -> std::ops::Range<usize> {
    n * t / threads..n * (t + 1) / threads
}

/// An object of cgroup `i` that the walk phase left on its list (the walk
/// isolates odd object ids), and its node, if it has one.
fn surviving_object(i: usize, objects: u32, nodes: usize) -> Option<(u32, usize)> {
    (0..objects)
        .map(|k| (object(i, k, objects), k as usize % nodes))
        .find(|(o, _)| o % 2 == 0)
}

/// Object `k` of cgroup `i`.
fn object(i: usize, k: u32, objects: u32) -> u32 {
    i as u32 * objects + k
}

fn run_once(
    design: LruDesign,
    threads: usize,
    cgroups: usize,
    objects: u32,
    nodes: usize,
) -> anyhow::Result<RunTimes> {
    let Setup { tree, lrus } = setup(design, cgroups, objects, nodes)?;
    let parent = tree.find("/bench/test/1")?;

    // mkdir+alloc
    let cgs: Vec<std::sync::Mutex<Option<Arc<MemCgroup>>>> =
        (0..cgroups).map(|_| std::sync::Mutex::new(None)).collect();
    let mkdir = timed_threads(threads, |t| {
        for i in share(t, threads, cgroups) {
            let cg = tree.mkdir_in(&parent, &i.to_string())?;
            *cgs[i].lock().expect("no panics while held") = Some(cg);
        }
        Ok(())
    })?;
    let cgs: Vec<Arc<MemCgroup>> = cgs
        .into_iter()
        .map(|c| {
            c.into_inner()
                .expect("no panics while held")
                .expect("created")
        })
        .collect();

    // add: each thread on its own contiguous run of cgroups (neighbouring
    // cgroups' lists and objects share cache lines).
    let add = timed_threads(threads, |t| {
        for i in share(t, threads, cgroups) {
            for k in 0..objects {
                let nid = (k as usize) % nodes;
                for lru in &lrus {
                    ensure!(
                        lru.add(object(i, k, objects), nid, &cgs[i])?,
                        "object added twice"
                    );
                }
            }
        }
        Ok(())
    })?;
    let adds = 2 * cgroups as u64 * u64::from(objects);

    // walk: one shrinker pass, cgroup by cgroup as reclaim does (each with
    // its own count as nr_to_scan), isolating odd objects, rotating even.
    let start = Instant::now();
    let mut isolated = 0;
    for lru in &lrus {
        for nid in 0..nodes {
            for cg in std::iter::once(tree.root()).chain(&cgs) {
                let mut budget = lru.count_one(nid, cg)?;
                isolated += lru.walk_one(nid, cg, &mut budget, |item, guard| {
                    if item % 2 == 1 {
                        let (list, token) = guard.isolate();
                        Walked::Removed(list, token)
                    } else {
                        Walked::Rotate(guard)
                    }
                })?;
            }
        }
    }
    let walk = start.elapsed().as_secs_f64();
    let odd = (0..cgroups)
        .flat_map(|i| (0..objects).map(move |k| object(i, k, objects)))
        .filter(|o| o % 2 == 1)
        .count();
    ensure!(
        isolated == 2 * odd,
        "walk isolated {isolated}, expected {}",
        2 * odd
    );

    // rmdir while T threads churn the even objects of live cgroups. The
    // removal starts only once every churner is churning, and each churner
    // counts only what it does while the removal runs, so the phase always
    // measures rmdir under churn and the churn rate is the phase's own.
    let removing = AtomicBool::new(true);
    let timing = AtomicBool::new(false);
    let churning = AtomicU64::new(0);
    let churn_ops = AtomicU64::new(0);
    let rmdir = std::thread::scope(|s| -> anyhow::Result<f64> {
        let churners: Vec<_> = (0..threads)
            .map(|t| {
                let (lrus, cgs, removing, timing, churning, churn_ops) =
                    (&lrus, &cgs, &removing, &timing, &churning, &churn_ops);
                s.spawn(move || -> anyhow::Result<()> {
                    let mine = share(t, threads, cgroups);
                    let mut i = mine.start;
                    let (mut ops, mut announced, mut idle) = (0, false, 0);
                    while removing.load(Ordering::Relaxed) && !mine.is_empty() {
                        i = if i + 1 >= mine.end { mine.start } else { i + 1 };
                        let Some((item, nid)) = surviving_object(i, objects, nodes) else {
                            idle += 1;
                            if idle >= mine.len() && !announced {
                                // A whole sweep found nothing to churn.
                                announced = true;
                                churning.fetch_add(1, Ordering::Release);
                            }
                            continue;
                        };
                        for lru in lrus {
                            ensure!(lru.del(item, nid, &cgs[i])?, "churn: object {item} lost");
                            ensure!(lru.add(item, nid, &cgs[i])?, "churn: object {item} doubled");
                        }
                        if !announced {
                            announced = true;
                            churning.fetch_add(1, Ordering::Release);
                        }
                        if timing.load(Ordering::Relaxed) {
                            ops += 4;
                        }
                    }
                    if !announced {
                        // No object to churn (every cgroup of its share is
                        // empty): do not hold the removal back.
                        churning.fetch_add(1, Ordering::Release);
                    }
                    churn_ops.fetch_add(ops, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        // Acquire: pairs with each churner's Release once it is running.
        while churning.load(Ordering::Acquire) < threads as u64 {
            std::thread::yield_now();
        }
        timing.store(true, Ordering::Relaxed);
        let start = Instant::now();
        let removed = cgs.iter().try_for_each(|cg| tree.rmdir_cgroup(cg));
        let secs = start.elapsed().as_secs_f64();
        removing.store(false, Ordering::Relaxed);
        for c in churners {
            c.join()
                .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
        }
        removed?;
        Ok(secs)
    })?;

    // Nothing lost: every even object is on the parent's lists.
    let even = 2 * (cgroups * objects as usize - odd);
    let left: usize = lrus
        .iter()
        .map(|l| {
            (0..nodes)
                .map(|n| l.count_node(n).unwrap_or(0))
                .sum::<usize>()
        })
        .sum();
    ensure!(
        left == even,
        "{left} objects left after reparenting, expected {even}"
    );
    let on_parent: usize = lrus
        .iter()
        .map(|l| {
            (0..nodes)
                .map(|n| l.count_one(n, &parent).unwrap_or(0))
                .sum::<usize>()
        })
        .sum();
    ensure!(
        on_parent == even,
        "{on_parent} objects on /bench/test/1, expected {even}"
    );

    let total = mkdir + add + walk + rmdir;
    Ok(RunTimes {
        secs: [mkdir, add, walk, rmdir, total],
        adds,
        churn_ops: churn_ops.into_inner(),
    })
}

/// Nanoseconds per rmdir of cgroups holding `objects` objects each.
fn reparent_ns(design: LruDesign, cgroups: usize, objects: u32) -> anyhow::Result<f64> {
    let Setup { tree, lrus } = setup(design, cgroups, objects, 1)?;
    let parent = tree.find("/bench/test/1")?;
    let cgs: Vec<_> = (0..cgroups)
        .map(|i| tree.mkdir_in(&parent, &i.to_string()))
        .collect::<Result<_, _>>()?;
    for (i, cg) in cgs.iter().enumerate() {
        for k in 0..objects {
            for lru in &lrus {
                lru.add(object(i, k, objects), 0, cg)?;
            }
        }
    }
    let start = Instant::now();
    for cg in &cgs {
        tree.rmdir_cgroup(cg)?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e9 / cgroups as f64)
}

#[derive(Debug, Serialize)]
struct PhaseRow {
    design: String,
    threads: usize,
    phase: &'static str,
    /// Median over repetitions.
    ms: f64,
    stdev_ms: f64,
    /// Operations per second of the phase where it has a count: the adds,
    /// or for rmdir the churn (del + add) that ran alongside the removals.
    mops: Option<f64>,
    /// Sample standard deviation of `mops`.
    mops_stdev: Option<f64>,
    /// For rmdir: repetitions in which no churn operation completed while
    /// the removals ran (the churn threads were descheduled throughout; on
    /// a machine with fewer CPUs than threads this can happen).
    runs_without_churn: Option<usize>,
    /// `legacy` time / this time (≥ 1 means faster than legacy).
    speedup_vs_legacy: Option<f64>,
}

#[derive(Debug, Serialize)]
struct ReparentRow {
    design: String,
    objects_per_cgroup: u32,
    ns_per_rmdir: f64,
}

#[derive(Debug, Serialize)]
struct MemoryRow {
    design: String,
    bytes_per_cgroup_per_list_lru: usize,
}

#[derive(Debug, Serialize)]
struct Config {
    cgroups: usize,
    objects: u32,
    nodes: usize,
    reps: usize,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Report {
    bench: &'static str,
    tool: Tool,
    machine: Machine,
    config: Config,
    results: Vec<PhaseRow>,
    reparent: Vec<ReparentRow>,
    memory: Vec<MemoryRow>,
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &ListLruArgs) -> anyhow::Result<()> {
    let cgroups = args
        .cgroups
        .unwrap_or(if args.quick { 2000 } else { 10_000 });
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 });
    ensure!(
        cgroups >= 1 && args.objects >= 1 && reps >= 1,
        "--cgroups, --objects and --reps must be at least 1"
    );
    ensure!(
        !args.threads.is_empty() && !args.threads.contains(&0),
        "--threads needs counts of at least 1"
    );
    ensure!(args.nodes >= 1, "--nodes must be at least 1");
    ensure!(!args.designs.is_empty(), "nothing to run");
    args.files.validate()?;

    let machine = Machine::current();
    println!("## list-lru on {machine}");
    println!(
        "{cgroups} cgroups under /bench/test/1, {} objects each in 2 list_lrus, {} node(s), {reps} reps, median ms\n",
        args.objects, args.nodes
    );
    let total = (reps * args.threads.len() * args.designs.len()) as u64;
    let mut progress = Progress::new("list-lru", total);
    let mut samples = vec![vec![Vec::<RunTimes>::new(); args.threads.len()]; args.designs.len()];
    for rep in 0..reps {
        for (ti, &threads) in args.threads.iter().enumerate() {
            for (di, &design) in args.designs.iter().enumerate() {
                let run = run_once(design, threads, cgroups, args.objects, args.nodes)
                    .with_context(|| format!("{design} with {threads} threads"))?;
                samples[di][ti].push(run);
                progress.step(1, &format!("rep {} {design} x{threads}", rep + 1));
            }
        }
    }
    progress.finish();

    let median_ms = |runs: &[RunTimes], phase: usize| {
        let ms: Vec<f64> = runs.iter().map(|r| r.secs[phase] * 1e3).collect();
        Stats::of(&ms)
    };
    let legacy = args.designs.iter().position(|&d| d == LruDesign::Legacy);
    let mut results = Vec::new();
    for (di, &design) in args.designs.iter().enumerate() {
        for (ti, &threads) in args.threads.iter().enumerate() {
            let runs = &samples[di][ti];
            for (phase, name) in PHASES.iter().enumerate() {
                let st = median_ms(runs, phase);
                let ops = match *name {
                    "add" => Some(
                        runs.iter()
                            .map(|r| r.adds as f64 / r.secs[1])
                            .collect::<Vec<_>>(),
                    ),
                    "rmdir" => Some(
                        runs.iter()
                            .map(|r| r.churn_ops as f64 / r.secs[3])
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                };
                let ops = ops.map(|o| Stats::of(&o));
                results.push(PhaseRow {
                    design: design.name().to_owned(),
                    threads,
                    phase: name,
                    ms: st.median,
                    stdev_ms: st.stdev,
                    mops: ops.map(|o| o.median / 1e6),
                    mops_stdev: ops.map(|o| o.stdev / 1e6),
                    runs_without_churn: (*name == "rmdir")
                        .then(|| runs.iter().filter(|r| r.churn_ops == 0).count()),
                    speedup_vs_legacy: legacy
                        .map(|li| median_ms(&samples[li][ti], phase).median / st.median),
                });
            }
        }
    }

    let mut reparent = Vec::new();
    let reparent_cgroups = (cgroups / 10).clamp(10, 500);
    for &design in &args.designs {
        for objects in [1, 1000] {
            let runs: Vec<f64> = (0..reps)
                .map(|_| reparent_ns(design, reparent_cgroups, objects))
                .collect::<anyhow::Result<_>>()?;
            reparent.push(ReparentRow {
                design: design.name().to_owned(),
                objects_per_cgroup: objects,
                ns_per_rmdir: Stats::of(&runs).median,
            });
        }
    }
    let memory = args
        .designs
        .iter()
        .map(|&design| -> anyhow::Result<MemoryRow> {
            let Setup { lrus, .. } = setup(design, 1, 1, args.nodes)?;
            Ok(MemoryRow {
                design: design.name().to_owned(),
                bytes_per_cgroup_per_list_lru: lrus[0].bytes_per_cgroup(),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    print_tables(&results, &reparent, &memory, reps);
    let quiet: usize = results.iter().filter_map(|r| r.runs_without_churn).sum();
    if quiet > 0 {
        println!(
            "note: in {quiet} of {} rmdir runs no churn operation completed while the removals ran (more threads than CPUs)\n",
            reps * args.threads.len() * args.designs.len()
        );
    }
    let report = Report {
        bench: "list-lru",
        tool: Tool::current(),
        machine,
        config: Config {
            cgroups,
            objects: args.objects,
            nodes: args.nodes,
            reps,
            threads: args.threads.clone(),
        },
        results,
        reparent,
        memory,
    };
    args.files.write(&report, || chart(&report, &args.designs))
}

fn print_tables(results: &[PhaseRow], reparent: &[ReparentRow], memory: &[MemoryRow], reps: usize) {
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.phase.to_owned(),
                r.threads.to_string(),
                r.design.clone(),
                format!("{:.2}", r.ms),
                report::fmt_stdev(r.stdev_ms, reps, 2),
                r.mops.map_or("-".into(), |m| format!("{m:.2}")),
                r.speedup_vs_legacy
                    .map_or("-".into(), |x| format!("{x:.2}x")),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(
            &[
                "phase",
                "threads",
                "design",
                "ms",
                "stdev",
                "Mops/s (add; rmdir: churn)",
                "vs legacy"
            ],
            rows
        )
    );
    let rows = reparent
        .iter()
        .map(|r| {
            vec![
                r.design.clone(),
                r.objects_per_cgroup.to_string(),
                format!("{:.0}", r.ns_per_rmdir),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(&["design", "objects/cgroup", "ns per rmdir"], rows)
    );
    let rows = memory
        .iter()
        .map(|m| {
            vec![
                m.design.clone(),
                m.bytes_per_cgroup_per_list_lru.to_string(),
            ]
        })
        .collect();
    println!(
        "{}\n",
        report::table(&["design", "bytes/cgroup/list_lru"], rows)
    );
}

fn chart<'a>(report: &Report, designs: &[LruDesign]) -> Chart<'a> {
    let panels = PHASES
        .iter()
        .map(|&phase| Panel {
            title: if phase == "add" {
                "add (Mops/s)".to_owned()
            } else {
                format!("{phase} (ms)")
            },
            series: designs
                .iter()
                .map(|d| {
                    let rows: Vec<&PhaseRow> = report
                        .results
                        .iter()
                        .filter(|r| r.phase == phase && r.design == d.name())
                        .collect();
                    let value = |r: &PhaseRow| {
                        if phase == "add" {
                            (r.mops.unwrap_or(0.0), r.mops_stdev.unwrap_or(0.0))
                        } else {
                            (r.ms, r.stdev_ms)
                        }
                    };
                    Series {
                        name: d.name().to_owned(),
                        points: rows
                            .iter()
                            .map(|r| (r.threads as f64, value(r).0))
                            .collect(),
                        errors: rows.iter().map(|r| value(r).1).collect(),
                    }
                })
                .collect(),
        })
        .collect();
    Chart {
        title: "list_lru: seed 002 experiment by phase",
        x_label: "threads",
        y_label: "ms (add: Mops/s)",
        panels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_small_run_per_design_balances() {
        for design in LruDesign::ALL {
            let run = run_once(design, 2, 50, 4, 2).unwrap();
            assert_eq!(run.adds, 2 * 50 * 4);
            assert!(run.secs.iter().all(|s| *s >= 0.0));
            assert!(reparent_ns(design, 10, 3).unwrap() > 0.0);
        }
    }
}
