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
//!
//! Where a run's shortest phase is shorter than `--min-phase-ms`, a sample
//! is that many whole runs (each on a fresh tree) with each phase's times
//! summed, and figures are per run of `--cgroups` cgroups.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, ensure};
use clap::Args;
use memcg::list_lru::{ListLru, ListLruConfig, LruDesign, Walked};
use memcg::memcontrol::{CgroupTree, MemCgroup, TreeConfig};
use serde::Serialize;

use super::{
    Benchmark, CommonArgs, Interleaved, Phased, Runs, Sample, Timed, run_plan, timed_here,
    timed_threads,
};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// Flags of `memcg bench list-lru`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("threads", |a| a.default_value("1,2,4")))]
pub struct ListLruArgs {
    /// Cgroups to create [default: 10000; --quick 2000].
    #[arg(long)]
    pub cgroups: Option<usize>,
    /// Objects per cgroup per list_lru.
    #[arg(long, default_value_t = 8)]
    pub objects: u32,
    /// NUMA nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Designs to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "legacy,split")]
    pub designs: Vec<LruDesign>,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ListLruArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            cgroups: smoke.then_some(100),
            objects: 8,
            nodes: 1,
            designs: LruDesign::ALL.to_vec(),
            common: CommonArgs::for_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &ListLruArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

const PHASES: [&str; 5] = ["mkdir+alloc", "add", "walk", "rmdir", "total"];
/// The index of "total" in [`PHASES`]: the sum of the others.
const TOTAL: usize = 4;

/// The timed phases of one or more runs, each summed over the runs.
#[derive(Debug, Clone, Default)]
struct RunTimes {
    /// mkdir+alloc, add, walk and rmdir, in [`PHASES`] order.
    phases: [Timed; 4],
    /// Runs summed.
    runs: u64,
    /// Adds of the add phase, per run.
    adds: u64,
    /// Churn operations while the removals ran, summed.
    churn_ops: u64,
}

impl RunTimes {
    /// Adds `other`'s runs.
    fn add(&mut self, other: &RunTimes) {
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            mine.add(theirs);
        }
        self.runs += other.runs;
        self.adds = other.adds;
        self.churn_ops += other.churn_ops;
    }

    /// Wall seconds of phase `phase` over every run (the total: the sum).
    fn secs(&self, phase: usize) -> f64 {
        if phase == TOTAL {
            self.phases.iter().map(|p| p.secs).sum()
        } else {
            self.phases[phase].secs
        }
    }

    /// Phase `phase` as a sample of ms per run. The total's CPU share is
    /// its worst phase's: the phases time different threads.
    fn sample(&self, phase: usize) -> Sample {
        let (cpu_share, busy_secs) = if phase == TOTAL {
            let worst = self.phases.iter().map(Timed::min_cpu_share);
            let busy = self.phases.iter().map(Timed::busy_secs).sum();
            (worst.fold(f64::INFINITY, f64::min), busy)
        } else {
            let p = &self.phases[phase];
            (p.min_cpu_share(), p.busy_secs())
        };
        Sample {
            value: self.secs(phase) * 1e3 / self.runs as f64,
            phase_secs: self.secs(phase),
            cpu_share,
            busy_secs,
        }
    }

    /// Operations per second of phase `phase` where it has a count: the
    /// adds, or for rmdir the churn that ran alongside.
    fn ops_per_sec(&self, phase: usize) -> Option<f64> {
        match PHASES[phase] {
            "add" => Some((self.adds * self.runs) as f64 / self.secs(phase)),
            "rmdir" => Some(self.churn_ops as f64 / self.secs(phase)),
            _ => None,
        }
    }
}

impl Phased for RunTimes {
    fn calibration_secs(&self) -> f64 {
        let busy = self.phases.iter().map(Timed::busy_secs);
        busy.fold(f64::INFINITY, f64::min)
    }
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

/// One run of the four phases on a fresh tree.
fn run_once(
    design: LruDesign,
    threads: usize,
    cgroups: usize,
    objects: u32,
    nodes: usize,
) -> anyhow::Result<RunTimes> {
    let Setup { tree, lrus } = setup(design, cgroups, objects, nodes)?;
    let parent = tree.find("/bench/test/1")?;
    let run = Run {
        tree,
        lrus,
        parent,
        threads,
        cgroups,
        objects,
        nodes,
    };
    let (cgs, mkdir) = run.phase_mkdir()?;
    let add = run.phase_add(&cgs)?;
    let walk = run.phase_walk(&cgs)?;
    let (rmdir, churn_ops) = run.phase_rmdir_under_churn(&cgs)?;
    run.check_nothing_lost()?;
    Ok(RunTimes {
        phases: [mkdir, add, walk, rmdir],
        runs: 1,
        adds: 2 * cgroups as u64 * u64::from(objects),
        churn_ops,
    })
}

/// One run: its tree and list_lrus, and its sizes.
struct Run {
    tree: CgroupTree,
    lrus: [ListLru; 2],
    /// `/bench/test/1`, where the cgroups are made.
    parent: Arc<MemCgroup>,
    threads: usize,
    cgroups: usize,
    objects: u32,
    nodes: usize,
}

/// How the removal and the churn threads of the rmdir phase meet.
struct ChurnSync {
    /// The removal is still running: keep churning.
    removing: AtomicBool,
    /// The removal is being timed: count the churn.
    timing: AtomicBool,
    /// Churn threads that have started churning (or found nothing to).
    churning: AtomicU64,
}

impl Run {
    /// mkdir+alloc: T threads create the cgroups, each its own share.
    fn phase_mkdir(&self) -> anyhow::Result<(Vec<Arc<MemCgroup>>, Timed)> {
        let cgs: Vec<Mutex<Option<Arc<MemCgroup>>>> =
            (0..self.cgroups).map(|_| Mutex::new(None)).collect();
        let timed = timed_threads(self.threads, |t| {
            for i in share(t, self.threads, self.cgroups) {
                let cg = self.tree.mkdir_in(self.parent.cgroup(), &i.to_string())?;
                let cg = cg.memcg().context("no memory cgroup")?;
                *cgs[i].lock().expect("no panics while held") = Some(cg);
            }
            Ok(())
        })?;
        let cgs = cgs
            .into_iter()
            .map(|c| {
                c.into_inner()
                    .expect("no panics while held")
                    .expect("created")
            })
            .collect();
        Ok((cgs, timed))
    }

    /// add: each thread on its own contiguous run of cgroups (neighbouring
    /// cgroups' lists and objects share cache lines).
    fn phase_add(&self, cgs: &[Arc<MemCgroup>]) -> anyhow::Result<Timed> {
        timed_threads(self.threads, |t| {
            for i in share(t, self.threads, self.cgroups) {
                for k in 0..self.objects {
                    let nid = (k as usize) % self.nodes;
                    for lru in &self.lrus {
                        ensure!(
                            lru.add(object(i, k, self.objects), nid, &cgs[i])?,
                            "object added twice"
                        );
                    }
                }
            }
            Ok(())
        })
    }

    /// walk: one shrinker pass, cgroup by cgroup as reclaim does (each with
    /// its own count as nr_to_scan), isolating odd objects, rotating even.
    fn phase_walk(&self, cgs: &[Arc<MemCgroup>]) -> anyhow::Result<Timed> {
        let (isolated, timed) = timed_here(|| {
            let mut isolated = 0;
            for lru in &self.lrus {
                for nid in 0..self.nodes {
                    for cg in std::iter::once(self.tree.root()).chain(cgs) {
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
            Ok(isolated)
        })?;
        let odd = self.odd_objects();
        ensure!(
            isolated == 2 * odd,
            "walk isolated {isolated}, expected {}",
            2 * odd
        );
        Ok(timed)
    }

    /// rmdir while T threads churn the even objects of live cgroups. The
    /// removal starts only once every churner is churning, and each churner
    /// counts only what it does while the removal runs, so the phase always
    /// measures rmdir under churn and the churn rate is the phase's own.
    /// Returns the phase (the removing thread's) and the churn operations.
    fn phase_rmdir_under_churn(&self, cgs: &[Arc<MemCgroup>]) -> anyhow::Result<(Timed, u64)> {
        let sync = ChurnSync {
            removing: AtomicBool::new(true),
            timing: AtomicBool::new(false),
            churning: AtomicU64::new(0),
        };
        std::thread::scope(|s| {
            let churners: Vec<_> = (0..self.threads)
                .map(|t| {
                    let sync = &sync;
                    s.spawn(move || self.churn(t, cgs, sync))
                })
                .collect();
            // Acquire: pairs with each churner's Release once it is running.
            while sync.churning.load(Ordering::Acquire) < self.threads as u64 {
                std::thread::yield_now();
            }
            // Relaxed: flags that only start and stop counting; no data is
            // published through them (the joins below order the results).
            sync.timing.store(true, Ordering::Relaxed);
            // Any error waits until the churners are stopped and joined.
            let removal =
                timed_here(|| Ok(cgs.iter().try_for_each(|cg| self.tree.rmdir_cgroup(cg))));
            // Relaxed: a stop flag; pairs with nothing, the join orders.
            sync.removing.store(false, Ordering::Relaxed);
            let mut churn_ops = 0;
            for c in churners {
                churn_ops += c
                    .join()
                    .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
            }
            let (removed, timed) = removal?;
            removed?;
            Ok((timed, churn_ops))
        })
    }

    /// Churn thread `t`: deletes and re-adds the surviving objects of its
    /// share of cgroups, round and round, while the removal runs; returns
    /// the operations done while it was timed.
    fn churn(&self, t: usize, cgs: &[Arc<MemCgroup>], sync: &ChurnSync) -> anyhow::Result<u64> {
        let mine = share(t, self.threads, self.cgroups);
        let mut i = mine.start;
        let (mut ops, mut announced, mut idle) = (0, false, 0);
        // Relaxed: the stop flag (see `phase_rmdir_under_churn`), read each round.
        while sync.removing.load(Ordering::Relaxed) && !mine.is_empty() {
            i = if i + 1 >= mine.end { mine.start } else { i + 1 };
            let Some((item, nid)) = surviving_object(i, self.objects, self.nodes) else {
                idle += 1;
                if idle >= mine.len() && !announced {
                    // A whole sweep found nothing to churn.
                    announced = true;
                    sync.churning.fetch_add(1, Ordering::Release);
                }
                continue;
            };
            for lru in &self.lrus {
                ensure!(lru.del(item, nid, &cgs[i])?, "churn: object {item} lost");
                ensure!(lru.add(item, nid, &cgs[i])?, "churn: object {item} doubled");
            }
            if !announced {
                announced = true;
                sync.churning.fetch_add(1, Ordering::Release);
            }
            // Relaxed: the timing flag only decides what is counted.
            if sync.timing.load(Ordering::Relaxed) {
                ops += 4;
            }
        }
        if !announced {
            // No object to churn (every cgroup of its share is empty): do
            // not hold the removal back.
            sync.churning.fetch_add(1, Ordering::Release);
        }
        Ok(ops)
    }

    /// Nothing lost: every even object is on the parent's lists.
    fn check_nothing_lost(&self) -> anyhow::Result<()> {
        let even = 2 * (self.cgroups * self.objects as usize - self.odd_objects());
        let left = self.count_on_every_node(|lru, nid| lru.count_node(nid));
        ensure!(
            left == even,
            "{left} objects left after reparenting, expected {even}"
        );
        let on_parent = self.count_on_every_node(|lru, nid| lru.count_one(nid, &self.parent));
        ensure!(
            on_parent == even,
            "{on_parent} objects on /bench/test/1, expected {even}"
        );
        Ok(())
    }

    /// Objects with odd ids, which the walk isolates.
    fn odd_objects(&self) -> usize {
        (0..self.cgroups)
            .flat_map(|i| (0..self.objects).map(move |k| object(i, k, self.objects)))
            .filter(|o| o % 2 == 1)
            .count()
    }

    /// `count(lru, nid)` summed over both list_lrus and every node (a
    /// refused count counts 0).
    fn count_on_every_node<E>(&self, count: impl Fn(&ListLru, usize) -> Result<usize, E>) -> usize {
        self.lrus
            .iter()
            .map(|l| {
                (0..self.nodes)
                    .map(|n| count(l, n).unwrap_or(0))
                    .sum::<usize>()
            })
            .sum()
    }
}

/// The removal of `cgroups` cgroups holding `objects` objects each.
fn reparent(design: LruDesign, cgroups: usize, objects: u32) -> anyhow::Result<Timed> {
    let Setup { tree, lrus } = setup(design, cgroups, objects, 1)?;
    let parent = tree.find("/bench/test/1")?;
    let cgs: Vec<_> = (0..cgroups)
        .map(|i| {
            tree.mkdir_in(parent.cgroup(), &i.to_string())?
                .memcg()
                .context("no memory cgroup")
        })
        .collect::<anyhow::Result<_>>()?;
    for (i, cg) in cgs.iter().enumerate() {
        for k in 0..objects {
            for lru in &lrus {
                lru.add(object(i, k, objects), 0, cg)?;
            }
        }
    }
    let ((), timed) = timed_here(|| {
        for cg in &cgs {
            tree.rmdir_cgroup(cg)?;
        }
        Ok(())
    })?;
    Ok(timed)
}

#[derive(Debug, Serialize)]
struct PhaseRow {
    design: String,
    threads: usize,
    phase: &'static str,
    /// Median over repetitions, ms per run of `cgroups` cgroups.
    ms: f64,
    stdev_ms: f64,
    min_ms: f64,
    max_ms: f64,
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
    /// The rmdir phase's CPU share is the removing thread's; mkdir+alloc
    /// and add time every thread, walk its one thread, and the total takes
    /// the lowest of its phases'.
    #[serde(flatten)]
    phases: PhaseFacts,
}

#[derive(Debug, Serialize)]
struct ReparentRow {
    design: String,
    objects_per_cgroup: u32,
    /// Median over repetitions.
    ns_per_rmdir: f64,
    stdev_ns: f64,
    #[serde(flatten)]
    phases: PhaseFacts,
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
    min_phase_ms: u64,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    head: ReportHead,
    config: Config,
    results: Vec<PhaseRow>,
    reparent: Vec<ReparentRow>,
    memory: Vec<MemoryRow>,
}

/// Validated settings of one invocation.
struct Plan {
    cgroups: usize,
    objects: u32,
    nodes: usize,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    designs: Vec<LruDesign>,
    /// Arms of the main runs, one configuration per thread count.
    run_arms: Vec<usize>,
    /// Arms of the reparenting runs, one configuration per
    /// [`REPARENT_OBJECTS`].
    reparent_arms: Vec<usize>,
}

impl Plan {
    fn of(args: &ListLruArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let cgroups = common.scaled(args.cgroups, 2000, 10_000);
        common.validate(&[
            ("--cgroups", cgroups as u64),
            ("--objects", u64::from(args.objects)),
        ])?;
        ensure!(args.nodes >= 1, "--nodes must be at least 1");
        ensure!(!args.designs.is_empty(), "nothing to run");
        let designs = args.designs.len();
        Ok(Self {
            cgroups,
            objects: args.objects,
            nodes: args.nodes,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            threads: common.threads.clone(),
            designs: args.designs.clone(),
            run_arms: vec![designs; common.threads.len()],
            reparent_arms: vec![designs; REPARENT_OBJECTS.len()],
        })
    }

    /// Cgroups per reparenting run: a tenth of the main runs', within
    /// 10..=500.
    fn reparent_cgroups(&self) -> usize {
        (self.cgroups / 10).clamp(10, 500)
    }

    /// How the main runs, then the reparenting runs, are repeated.
    fn interleaved(&self) -> [Interleaved<'_>; 2] {
        let runs = Interleaved::new(self.reps, self.min_phase_ms, &self.run_arms, false);
        let reparent = Interleaved::new(self.reps, self.min_phase_ms, &self.reparent_arms, false);
        [runs, reparent]
    }

    /// `rounds` runs of `design` on `threads` threads, summed.
    fn run(&self, design: LruDesign, threads: usize, rounds: u64) -> anyhow::Result<RunTimes> {
        let mut total = RunTimes::default();
        for _ in 0..rounds {
            let run = run_once(design, threads, self.cgroups, self.objects, self.nodes)
                .with_context(|| format!("{design} with {threads} threads"))?;
            total.add(&run);
        }
        Ok(total)
    }

    /// `rounds` reparenting runs of `design` with `objects` per cgroup;
    /// the value is ns per rmdir.
    fn reparent(&self, design: LruDesign, objects: u32, rounds: u64) -> anyhow::Result<Sample> {
        let cgroups = self.reparent_cgroups();
        let mut total = Timed::default();
        for _ in 0..rounds {
            total.add(&reparent(design, cgroups, objects)?);
        }
        let ns = total.secs * 1e9 / (cgroups as u64 * rounds) as f64;
        Ok(Sample::new(ns, &total))
    }
}

/// Objects per cgroup of the reparenting runs: rmdir costs the same
/// whatever a cgroup holds.
const REPARENT_OBJECTS: [u32; 2] = [1, 1000];

/// What [`Benchmark::measure`] found.
struct Samples {
    /// Every run, one configuration per thread count, one arm per design.
    runs: Runs<RunTimes>,
    /// ns per rmdir of every reparenting run, one configuration per
    /// [`REPARENT_OBJECTS`], one arm per design.
    reparent: Runs<Sample>,
    /// Bytes per cgroup per list_lru, per design.
    memory_bytes: Vec<usize>,
}

impl Benchmark for Plan {
    const NAME: &'static str = "list-lru";
    type Samples = Samples;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} cgroups under /bench/test/1, {} objects each in 2 list_lrus, {} node(s), \
             median of {} interleaved reps of phases >= {} ms, ms per run",
            self.cgroups, self.objects, self.nodes, self.reps, self.min_phase_ms
        )
    }

    /// Every timed run, then the reparenting runs (each interleaved, see
    /// [`super::schedule`]) and the memory per cgroup.
    fn measure(&self) -> anyhow::Result<Samples> {
        let [runs, reparent] = self.interleaved();
        let mut progress = Progress::new(Self::NAME, runs.steps() + reparent.steps());
        let runs = runs.run(
            &mut progress,
            |t, d| format!("{} x{}", self.designs[d], self.threads[t]),
            |t, d, rounds| self.run(self.designs[d], self.threads[t], rounds),
        )?;
        let reparent = reparent.run(
            &mut progress,
            |o, d| {
                format!(
                    "{} rmdir of {} objects",
                    self.designs[d], REPARENT_OBJECTS[o]
                )
            },
            |o, d, rounds| self.reparent(self.designs[d], REPARENT_OBJECTS[o], rounds),
        )?;
        progress.finish();
        Ok(Samples {
            runs,
            reparent,
            memory_bytes: self.measure_memory()?,
        })
    }

    fn summarise(&self, head: ReportHead, samples: Samples) -> Report {
        let memory = self
            .designs
            .iter()
            .zip(samples.memory_bytes)
            .map(|(design, bytes)| MemoryRow {
                design: design.name().to_owned(),
                bytes_per_cgroup_per_list_lru: bytes,
            })
            .collect();
        Report {
            head,
            config: Config {
                cgroups: self.cgroups,
                objects: self.objects,
                nodes: self.nodes,
                reps: self.reps,
                min_phase_ms: self.min_phase_ms,
                threads: self.threads.clone(),
            },
            results: phase_rows(self, &samples.runs),
            reparent: reparent_rows(self, &samples.reparent),
            memory,
        }
    }

    fn print_tables(report: &Report) {
        print_phase_table(report);
        print_reparent_table(report);
        print_memory_table(&report.memory);
        let facts = report.results.iter().map(|r| &r.phases);
        let facts = facts.chain(report.reparent.iter().map(|r| &r.phases));
        report::print_method_note(facts, report.config.min_phase_ms as f64);
        print_churn_note(report);
    }

    /// ms of every phase against threads (add: Mops/s), one panel per
    /// phase, each labelled with its own unit.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = PHASES.iter().map(|&phase| {
            // The add phase is charted as a rate, the others as times.
            let value = |r: &PhaseRow| {
                if phase == "add" {
                    (r.mops.unwrap_or(0.0), r.mops_stdev.unwrap_or(0.0))
                } else {
                    (r.ms, r.stdev_ms)
                }
            };
            let unit = if phase == "add" { "Mops/s" } else { "ms" };
            Panel {
                title: format!("{phase} ({unit})"),
                y_label: Some(unit.to_owned()),
                series: self
                    .designs
                    .iter()
                    .map(|d| {
                        let rows = report.results.iter();
                        let rows = rows.filter(|r| r.phase == phase && r.design == d.name());
                        let points = rows.map(|r| (r.threads, value(r).0, value(r).1));
                        Series::by_threads(d.name(), points)
                    })
                    .collect(),
            }
        });
        report::chart_by_threads("list_lru: seed 002 experiment by phase", "ms", panels)
    }
}

impl Plan {
    /// Bytes per cgroup per list_lru, per design.
    fn measure_memory(&self) -> anyhow::Result<Vec<usize>> {
        self.designs
            .iter()
            .map(|&design| {
                let Setup { lrus, .. } = setup(design, 1, 1, self.nodes)?;
                Ok(lrus[0].bytes_per_cgroup())
            })
            .collect()
    }
}

/// A row per design, thread count and phase.
fn phase_rows(plan: &Plan, runs: &Runs<RunTimes>) -> Vec<PhaseRow> {
    let legacy = plan.designs.iter().position(|&d| d == LruDesign::Legacy);
    let mut results = Vec::new();
    for (di, &design) in plan.designs.iter().enumerate() {
        for (ti, &threads) in plan.threads.iter().enumerate() {
            let legacy = legacy.map(|li| &runs.samples[ti][li][..]);
            let mine = (&runs.samples[ti][di][..], runs.rounds[ti][di]);
            for phase in 0..PHASES.len() {
                results.push(phase_row(design, threads, phase, mine, legacy));
            }
        }
    }
    results
}

/// One phase of one design at one thread count, from its `runs` and their
/// rounds; `legacy` holds the `legacy` design's runs of the same thread
/// count, if it ran.
fn phase_row(
    design: LruDesign,
    threads: usize,
    phase: usize,
    (runs, rounds): (&[RunTimes], u64),
    legacy: Option<&[RunTimes]>,
) -> PhaseRow {
    let samples: Vec<Sample> = runs.iter().map(|r| r.sample(phase)).collect();
    let ms = |runs: &[RunTimes]| {
        let ms: Vec<f64> = runs.iter().map(|r| r.sample(phase).value).collect();
        Stats::of(&ms)
    };
    let st = ms(runs);
    let ops: Option<Vec<f64>> = runs.iter().map(|r| r.ops_per_sec(phase)).collect();
    let ops = ops.map(|o| Stats::of(&o));
    let name = PHASES[phase];
    PhaseRow {
        design: design.name().to_owned(),
        threads,
        phase: name,
        ms: st.median,
        stdev_ms: st.stdev,
        min_ms: st.min,
        max_ms: st.max,
        mops: ops.map(|o| o.median / 1e6),
        mops_stdev: ops.map(|o| o.stdev / 1e6),
        runs_without_churn: (name == "rmdir")
            .then(|| runs.iter().filter(|r| r.churn_ops == 0).count()),
        speedup_vs_legacy: legacy.map(|l| ms(l).median / st.median),
        phases: PhaseFacts::of(rounds, samples.iter().map(|s| (s.phase_secs, s.cpu_share))),
    }
}

/// A row per design and objects per cgroup.
fn reparent_rows(plan: &Plan, reparent: &Runs<Sample>) -> Vec<ReparentRow> {
    let mut rows = Vec::new();
    for (di, design) in plan.designs.iter().enumerate() {
        for (oi, &objects) in REPARENT_OBJECTS.iter().enumerate() {
            let st = Stats::of(&reparent.values(oi, di));
            rows.push(ReparentRow {
                design: design.name().to_owned(),
                objects_per_cgroup: objects,
                ns_per_rmdir: st.median,
                stdev_ns: st.stdev,
                phases: reparent.facts(oi, di),
            });
        }
    }
    rows
}

fn print_phase_table(report: &Report) {
    let reps = report.config.reps;
    let rows = report.results.iter().map(|r| {
        vec![
            r.phase.to_owned(),
            r.threads.to_string(),
            r.design.clone(),
            format!("{:.2}", r.ms),
            report::fmt_stdev(r.stdev_ms, reps, 2),
            report::fmt_range(r.min_ms, r.max_ms, reps, 2),
            r.mops.map_or("-".into(), |m| format!("{m:.2}")),
            r.speedup_vs_legacy
                .map_or("-".into(), |x| format!("{x:.2}x")),
            r.phases.cpu_cell(),
        ]
    });
    report::print_table(
        &[
            "phase",
            "threads",
            "design",
            "ms",
            "stdev",
            "min–max",
            "Mops/s (add; rmdir: churn)",
            "vs legacy",
            "CPU",
        ],
        rows,
    );
}

fn print_reparent_table(report: &Report) {
    let rows = report.reparent.iter().map(|r| {
        vec![
            r.design.clone(),
            r.objects_per_cgroup.to_string(),
            format!("{:.0}", r.ns_per_rmdir),
            report::fmt_stdev(r.stdev_ns, report.config.reps, 0),
            format!("{:.0}", r.phases.shortest_phase_ms),
            r.phases.cpu_cell(),
        ]
    });
    // The phase column: a round's set-up (adding every object) costs far
    // more than its timed removals, so these phases can stay short.
    report::print_table(
        &[
            "design",
            "objects/cgroup",
            "ns per rmdir",
            "stdev",
            "phase ms",
            "CPU",
        ],
        rows,
    );
}

fn print_memory_table(memory: &[MemoryRow]) {
    let rows = memory.iter().map(|m| {
        vec![
            m.design.clone(),
            m.bytes_per_cgroup_per_list_lru.to_string(),
        ]
    });
    report::print_table(&["design", "bytes/cgroup/list_lru"], rows);
}

/// Says in how many rmdir runs no churn operation completed, if any.
fn print_churn_note(report: &Report) {
    let rmdir_rows = report.results.iter().filter_map(|r| r.runs_without_churn);
    let (configs, quiet) = rmdir_rows.fold((0, 0), |(c, q), n| (c + 1, q + n));
    if quiet > 0 {
        println!(
            "note: in {quiet} of {} rmdir runs no churn operation completed while the removals ran (more threads than CPUs)\n",
            report.config.reps * configs
        );
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
            assert!(run.phases.iter().all(|p| p.secs >= 0.0));
            assert_eq!(run.phases[0].cpu_secs.len(), 2, "mkdir times both threads");
            assert_eq!(run.phases[3].cpu_secs.len(), 1, "rmdir times the remover");
            assert!(reparent(design, 10, 3).unwrap().secs > 0.0);
        }
    }
}
