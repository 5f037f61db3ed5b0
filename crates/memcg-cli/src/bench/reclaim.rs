//! `memcg bench reclaim`: a usemem-like load driving memory cgroup reclaim
//! through `memcg-sim`, per `swap_cgroup` design in one run.
//!
//! Each run: a cgroup `/bench` with `memory.max` = `--limit`, a RAM swap
//! device, and T tasks whose mappings of random bytes together make a
//! working set twice the limit (4 KiB or 64 KiB folios). Populating them
//! (untimed) already swaps half of it out. The timed phase touches every
//! page of every mapping once more, in order: each swapped page faults in,
//! and its charge at the limit makes reclaim swap out the coldest pages of
//! the subtree (the ones not touched since they were faulted), so half the
//! working set goes out and half comes in. Afterwards every byte is
//! verified and every charge, slot and LRU page is checked released.
//!
//! Reported per run: wall time; the GiB/s swapped out and in; the CPU time
//! of all timed threads per reclaimed page; and where that time went:
//! inside reclaim (`try_to_free_mem_cgroup_pages`: scanning, isolating,
//! the reference checks), of which inside the swap-out of reclaimed folios
//! (swap cache, slot allocation, `swap_cgroup`, swap accounting, the copy
//! to the device), and the rest of the fault (swap-in, charge, LRU add).
//! The `memcpy` limit of the working set on the same threads is measured
//! in the same run: each page moved is one copy each way.

use anyhow::{Context, ensure};
use clap::Args;
use memcg::lruvec::LruList;
use memcg::memcontrol::VmEvent;
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::Design;
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use super::tasks::{
    DEVICE_SLACK_BYTES, Limit, gib_per_s, in_parallel, measure_limit, parse_size, rate_stdev,
};
use super::timing::Phased;
use super::{Benchmark, CommonArgs, Interleaved, Runs, Sample, Timed, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};

/// Flags of `memcg bench reclaim`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("threads", |a| a.help(
        "Thread counts (tasks on distinct mappings in one cgroup), comma separated"
    )),
)]
pub struct ReclaimArgs {
    /// `memory.max` of the cgroup; the working set is twice it (K/M/G
    /// suffixes) [default: 256M; --quick 32M].
    #[arg(long, value_parser = parse_size)]
    pub limit: Option<u64>,
    /// swap_cgroup designs, comma separated [default: all five].
    #[arg(long, value_delimiter = ',')]
    pub designs: Vec<Design>,
    /// Folio sizes in KiB, comma separated: 4, 64 [default: both].
    #[arg(long, value_delimiter = ',')]
    pub folio_kib: Vec<u32>,
    /// Seed of the random page contents.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ReclaimArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            limit: smoke.then_some(2 << 20),
            designs: super::suite_designs(smoke),
            folio_kib: Vec::new(),
            seed: 0x5eed,
            common: CommonArgs::for_task_suite(smoke),
        }
    }
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &ReclaimArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// What one timed phase did.
#[derive(Debug, Clone, Copy, Default)]
struct Moved {
    out_pages: u64,
    in_pages: u64,
    steal_pages: u64,
}

/// One repetition: the phase, what it moved and where its time went.
#[derive(Debug, Clone)]
struct ReclaimSample {
    sample: Sample,
    moved: Moved,
    /// CPU seconds of every timed thread, summed.
    cpu_secs: f64,
    reclaim_secs: f64,
    pageout_secs: f64,
}

impl Phased for ReclaimSample {
    fn calibration_secs(&self) -> f64 {
        self.sample.busy_secs
    }
}

/// The simulated machine a run needs: the limit's worth of resident pages,
/// the RAM device holding the working set, its tables, and room to spare.
fn machine_bytes_for(limit_bytes: u64, threads: usize) -> u64 {
    let device_bytes = device_bytes_for(limit_bytes, threads);
    let tables = memcg::swap_state::swap_tables_pages(device_bytes / PAGE_SIZE) * PAGE_SIZE;
    limit_bytes + device_bytes + tables + (64 << 20)
}

fn device_bytes_for(limit_bytes: u64, threads: usize) -> u64 {
    2 * limit_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1)
}

/// One run of `folio_pages` folios with `design` on `threads` tasks: its
/// phase, what moved, and reclaim's time.
fn run_timed(
    folio_pages: u32,
    design: Design,
    threads: usize,
    limit_bytes: u64,
    seed: u64,
) -> anyhow::Result<(Timed, Moved, memcg_sim::ReclaimTimes)> {
    let sim = Sim::new(SimConfig {
        seed,
        swap_cgroup: design,
        mem_bytes: machine_bytes_for(limit_bytes, threads),
        charge_stock: true,
        memcg_metadata_bytes: None,
        ..SimConfig::default()
    });
    sim.prefault(machine_bytes_for(limit_bytes, threads));
    sim.fs().write("/cgroup.subtree_control", "+memory")?;
    sim.fs().mkdir("/bench")?;
    sim.fs()
        .write("/bench/memory.max", &limit_bytes.to_string())?;
    let device = sim.swapon_ram(device_bytes_for(limit_bytes, threads), None)?;
    let per_task_bytes = 2 * limit_bytes / threads as u64;
    let names: Vec<String> = (0..threads).map(|t| format!("task{t}")).collect();
    // Untimed: populate, in parallel; past the limit reclaim already swaps.
    in_parallel(&names, |name| {
        sim.alloc("/bench", name, per_task_bytes, folio_pages, Fill::Random)?;
        Ok(())
    })?;

    let bench = sim.fs().memcg("/bench")?;
    let counts = || {
        (
            bench.vm_event(VmEvent::Pswpout),
            bench.vm_event(VmEvent::Pswpin),
            bench.vm_event(VmEvent::PgstealDirect),
        )
    };
    let before = counts();
    sim.machine().set_reclaim_timing(true);
    let timed: Timed = timed_threads(threads, |t| {
        sim.touch(&names[t])?;
        Ok(())
    })?;
    let times = sim.machine().reclaim_times();
    sim.machine().set_reclaim_timing(false);
    let after = counts();
    let moved = Moved {
        out_pages: after.0 - before.0,
        in_pages: after.1 - before.1,
        steal_pages: after.2 - before.2,
    };

    in_parallel(&names, |name| Ok(sim.verify(name)?))?;
    for name in &names {
        sim.free(name)?;
    }
    check_all_released(&sim, &device)?;
    sim.swapoff(&device)?;
    Ok((timed, moved, times))
}

/// `rounds` runs (each on a fresh simulation) as one sample: times and
/// counts summed, then per run.
fn run_rounds(
    folio_pages: u32,
    design: Design,
    threads: usize,
    limit_bytes: u64,
    seed: u64,
    rounds: u64,
) -> anyhow::Result<ReclaimSample> {
    let mut timed = Timed::default();
    let (mut moved, mut cpu, mut reclaim, mut pageout) = (Moved::default(), 0.0, 0.0, 0.0);
    for _ in 0..rounds {
        let (t, m, times) = run_timed(folio_pages, design, threads, limit_bytes, seed)?;
        timed.add(&t);
        moved.out_pages += m.out_pages;
        moved.in_pages += m.in_pages;
        moved.steal_pages += m.steal_pages;
        cpu += t.cpu_secs.iter().sum::<f64>();
        reclaim += times.reclaim_secs;
        pageout += times.pageout_secs;
    }
    let n = rounds.max(1);
    let nf = n as f64;
    Ok(ReclaimSample {
        sample: Sample::new(timed.secs / nf * 1e6, &timed),
        moved: Moved {
            out_pages: moved.out_pages / n,
            in_pages: moved.in_pages / n,
            steal_pages: moved.steal_pages / n,
        },
        cpu_secs: cpu / nf,
        reclaim_secs: reclaim / nf,
        pageout_secs: pageout / nf,
    })
}

/// Nothing left behind: no charge, no slot, no page on an LRU list.
fn check_all_released(sim: &Sim, device: &str) -> anyhow::Result<()> {
    let bench = sim.fs().memcg("/bench")?;
    // Stocked pages are charged but unused: give them back first.
    sim.fs().tree().drain_all_stock(&bench);
    let inuse = sim
        .swap()
        .swapfiles()
        .by_name(device)
        .context("the device is still on")?
        .inuse_pages();
    let lru = bench.lruvec().size(LruList::InactiveAnon) + bench.lruvec().size(LruList::ActiveAnon);
    ensure!(
        (bench.memory().usage(), bench.swap().usage(), inuse, lru) == (0, 0, 0, 0),
        "memory {} swap {} slots {inuse} LRU {lru} left after free",
        bench.memory().usage(),
        bench.swap().usage(),
    );
    Ok(())
}

/// One configuration: the memcpy limit at a thread count, or every design
/// on a folio size at a thread count.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunConfig {
    Limit(usize),
    Load { threads: usize, folio_pages: u32 },
}

/// Validated settings of one invocation.
struct Plan {
    limit_bytes: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    designs: Vec<Design>,
    folio_pages: Vec<u32>,
    seed: u64,
    configs: Vec<RunConfig>,
    arms: Vec<usize>,
}

impl Plan {
    fn of(args: &ReclaimArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let limit_bytes = common.scaled(args.limit, 32 << 20, 256 << 20);
        common.validate(&[])?;
        let folio_pages: Vec<u32> = if args.folio_kib.is_empty() {
            vec![1, 16]
        } else {
            args.folio_kib.iter().map(|k| k / 4).collect()
        };
        for (&kib, &pages) in args.folio_kib.iter().zip(&folio_pages) {
            ensure!(
                kib == 4 || kib == 64,
                "--folio-kib {kib}: the loads use 4 or 64 KiB folios"
            );
            debug_assert!(pages == 1 || pages == 16);
        }
        for &t in &common.threads {
            ensure!(
                limit_bytes > 0 && (2 * limit_bytes).is_multiple_of(t as u64 * 16 * PAGE_SIZE),
                "--limit {limit_bytes}: twice it does not split into {t} shares of 64 KiB folios"
            );
        }
        let needed = common
            .threads
            .iter()
            .map(|&t| machine_bytes_for(limit_bytes, t))
            .max()
            .unwrap_or(0);
        let available = memcg_sim::default_mem_bytes();
        ensure!(
            needed <= available,
            "--limit {limit_bytes} needs a simulated machine of {needed} bytes, more than half \
             of this host's available memory ({available} bytes); use a smaller --limit"
        );
        let designs = if args.designs.is_empty() {
            Design::ALL.to_vec()
        } else {
            args.designs.clone()
        };
        let configs: Vec<RunConfig> = common
            .threads
            .iter()
            .flat_map(|&threads| {
                let loads = folio_pages.iter().map(move |&folio_pages| RunConfig::Load {
                    threads,
                    folio_pages,
                });
                std::iter::once(RunConfig::Limit(threads)).chain(loads)
            })
            .collect();
        let arms = configs
            .iter()
            .map(|c| match c {
                RunConfig::Limit(_) => 1,
                RunConfig::Load { .. } => designs.len(),
            })
            .collect();
        Ok(Self {
            limit_bytes,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            threads: common.threads.clone(),
            designs,
            folio_pages,
            seed: args.seed,
            configs,
            arms,
        })
    }

    /// The working set: what moves each phase, and what the limit copies.
    fn working_set_bytes(&self) -> u64 {
        2 * self.limit_bytes
    }

    fn run_arm(&self, config: usize, arm: usize, rounds: u64) -> anyhow::Result<ReclaimSample> {
        match self.configs[config] {
            RunConfig::Limit(threads) => {
                let sample =
                    measure_limit(Limit::Memcpy, threads, self.working_set_bytes(), rounds)?;
                Ok(ReclaimSample {
                    sample,
                    moved: Moved::default(),
                    cpu_secs: 0.0,
                    reclaim_secs: 0.0,
                    pageout_secs: 0.0,
                })
            }
            RunConfig::Load {
                threads,
                folio_pages,
            } => {
                let design = self.designs[arm];
                run_rounds(
                    folio_pages,
                    design,
                    threads,
                    self.limit_bytes,
                    self.seed,
                    rounds,
                )
                .with_context(|| {
                    format!(
                        "{} KiB folios with {design} on {threads} threads (--seed {})",
                        folio_pages * 4,
                        self.seed
                    )
                })
            }
        }
    }

    fn arm_name(&self, config: usize, arm: usize) -> String {
        match self.configs[config] {
            RunConfig::Limit(threads) => format!("memcpy x{threads}"),
            RunConfig::Load {
                threads,
                folio_pages,
            } => format!("{}k {} x{threads}", folio_pages * 4, self.designs[arm]),
        }
    }
}

#[derive(Debug, Serialize)]
struct Config {
    limit_bytes: u64,
    working_set_bytes: u64,
    reps: usize,
    min_phase_ms: u64,
    seed: u64,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct LimitRow {
    threads: usize,
    median_us: f64,
    stdev_us: f64,
    gib_per_s: f64,
    samples_us: Vec<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

#[derive(Debug, Serialize)]
struct ResultRow {
    folio_kib: u32,
    threads: usize,
    design: &'static str,
    /// Median wall time of the phase.
    median_us: f64,
    stdev_us: f64,
    min_us: f64,
    max_us: f64,
    samples_us: Vec<f64>,
    /// Swapped out per second at the median (pages out × 4 KiB / time).
    out_gib_per_s: f64,
    /// Swapped in per second at the median.
    in_gib_per_s: f64,
    /// `out_gib_per_s` over the memcpy limit's GiB/s.
    out_fraction_of_memcpy: f64,
    /// Median pages swapped out and in per phase.
    out_pages: u64,
    in_pages: u64,
    /// Median CPU ns (all timed threads) per page reclaimed.
    cpu_ns_per_reclaimed_page: f64,
    /// Median shares of the timed threads' CPU time.
    reclaim_share: f64,
    pageout_share: f64,
    /// Median time of `locked` over this design's (> 1: faster).
    speedup_vs_locked: Option<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    head: ReportHead,
    config: Config,
    limits: Vec<LimitRow>,
    results: Vec<ResultRow>,
}

fn facts(samples: &[ReclaimSample], rounds: u64) -> PhaseFacts {
    PhaseFacts::of(
        rounds,
        samples
            .iter()
            .map(|s| (s.sample.phase_secs, s.sample.cpu_share)),
    )
}

fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.into_iter().collect();
    Stats::of(&v).median
}

impl Plan {
    fn limit_row(&self, runs: &Runs<ReclaimSample>, config: usize, threads: usize) -> LimitRow {
        let samples = &runs.samples[config][0];
        let us: Vec<f64> = samples.iter().map(|s| s.sample.value).collect();
        let st = Stats::of(&us);
        LimitRow {
            threads,
            median_us: st.median,
            stdev_us: st.stdev,
            gib_per_s: gib_per_s(self.working_set_bytes(), st.median / 1e6),
            samples_us: us,
            phases: facts(samples, runs.rounds[config][0]),
        }
    }

    fn result_rows(
        &self,
        runs: &Runs<ReclaimSample>,
        (config, threads, folio_pages): (usize, usize, u32),
        memcpy_gib: f64,
    ) -> Vec<ResultRow> {
        let mut rows: Vec<ResultRow> = self
            .designs
            .iter()
            .enumerate()
            .map(|(arm, design)| {
                let samples = &runs.samples[config][arm];
                let us: Vec<f64> = samples.iter().map(|s| s.sample.value).collect();
                let st = Stats::of(&us);
                let out_pages = median(samples.iter().map(|s| s.moved.out_pages as f64));
                let in_pages = median(samples.iter().map(|s| s.moved.in_pages as f64));
                let secs = st.median / 1e6;
                let out_gib = gib_per_s((out_pages as u64) * PAGE_SIZE, secs);
                let share = |f: fn(&ReclaimSample) -> f64| {
                    median(samples.iter().map(|s| {
                        if s.cpu_secs > 0.0 {
                            f(s) / s.cpu_secs
                        } else {
                            0.0
                        }
                    }))
                };
                ResultRow {
                    folio_kib: folio_pages * 4,
                    threads,
                    design: design.name(),
                    median_us: st.median,
                    stdev_us: st.stdev,
                    min_us: st.min,
                    max_us: st.max,
                    samples_us: us,
                    out_gib_per_s: out_gib,
                    in_gib_per_s: gib_per_s((in_pages as u64) * PAGE_SIZE, secs),
                    out_fraction_of_memcpy: out_gib / memcpy_gib,
                    out_pages: out_pages as u64,
                    in_pages: in_pages as u64,
                    cpu_ns_per_reclaimed_page: median(
                        samples
                            .iter()
                            .map(|s| s.cpu_secs * 1e9 / (s.moved.steal_pages.max(1) as f64)),
                    ),
                    reclaim_share: share(|s| s.reclaim_secs),
                    pageout_share: share(|s| s.pageout_secs),
                    speedup_vs_locked: None,
                    phases: facts(samples, runs.rounds[config][arm]),
                }
            })
            .collect();
        let locked = self
            .designs
            .iter()
            .position(|&d| d == Design::Locked)
            .map(|i| rows[i].median_us);
        for r in &mut rows {
            r.speedup_vs_locked = locked.map(|l| l / r.median_us);
        }
        rows
    }
}

impl Benchmark for Plan {
    const NAME: &'static str = "reclaim";
    type Samples = Runs<ReclaimSample>;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "memory.max {} MiB, working set {} MiB of random bytes split over the threads, \
             RAM swap; timed: one touch of every page (half swap in, reclaim swaps half out); \
             median of {} interleaved reps",
            self.limit_bytes >> 20,
            self.working_set_bytes() >> 20,
            self.reps,
        )
    }

    fn measure(&self) -> anyhow::Result<Runs<ReclaimSample>> {
        let plan = Interleaved::new(self.reps, self.min_phase_ms, &self.arms, true);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let runs = plan.run(
            &mut progress,
            |c, a| self.arm_name(c, a),
            |c, a, rounds| self.run_arm(c, a, rounds),
        )?;
        progress.finish();
        Ok(runs)
    }

    fn summarise(&self, head: ReportHead, runs: Runs<ReclaimSample>) -> Report {
        let (mut limits, mut results) = (Vec::new(), Vec::new());
        for (ci, &config) in self.configs.iter().enumerate() {
            match config {
                RunConfig::Limit(threads) => limits.push(self.limit_row(&runs, ci, threads)),
                RunConfig::Load {
                    threads,
                    folio_pages,
                } => {
                    let memcpy = limits
                        .iter()
                        .find(|l: &&LimitRow| l.threads == threads)
                        .map_or(f64::NAN, |l| l.gib_per_s);
                    results.extend(self.result_rows(&runs, (ci, threads, folio_pages), memcpy));
                }
            }
        }
        Report {
            head,
            config: Config {
                limit_bytes: self.limit_bytes,
                working_set_bytes: self.working_set_bytes(),
                reps: self.reps,
                min_phase_ms: self.min_phase_ms,
                seed: self.seed,
                threads: self.threads.clone(),
            },
            limits,
            results,
        }
    }

    fn print_tables(report: &Report) {
        let reps = report.config.reps;
        let rows = report.limits.iter().map(|l| {
            vec![
                "memcpy".to_owned(),
                l.threads.to_string(),
                format!("{:.0}", l.median_us),
                report::fmt_stdev(l.stdev_us, reps, 0),
                format!("{:.2}", l.gib_per_s),
                l.phases.cpu_cell(),
            ]
        });
        report::print_table(
            &["limit", "threads", "median µs", "stdev µs", "GiB/s", "CPU"],
            rows,
        );
        let rows = report.results.iter().map(|r| {
            vec![
                format!("{}k", r.folio_kib),
                r.threads.to_string(),
                r.design.to_owned(),
                format!("{:.0}", r.median_us),
                report::fmt_stdev(r.stdev_us, reps, 0),
                format!("{:.2}", r.out_gib_per_s),
                format!("{:.2}", r.in_gib_per_s),
                format!("{:.1}%", r.out_fraction_of_memcpy * 100.0),
                format!("{:.0}", r.cpu_ns_per_reclaimed_page),
                format!(
                    "{:.0}% / {:.0}%",
                    r.reclaim_share * 100.0,
                    r.pageout_share * 100.0
                ),
                r.speedup_vs_locked
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.3}x")),
                r.phases.cpu_cell(),
            ]
        });
        report::print_table(
            &[
                "folio",
                "threads",
                "swap_cgroup",
                "median µs",
                "stdev µs",
                "out GiB/s",
                "in GiB/s",
                "out of memcpy",
                "CPU ns/reclaimed page",
                "in reclaim / of it pageout",
                "vs locked",
                "CPU",
            ],
            rows,
        );
        let facts = report.limits.iter().map(|l| &l.phases);
        let facts = facts.chain(report.results.iter().map(|r| &r.phases));
        report::print_method_note(facts, report.config.min_phase_ms as f64);
    }

    /// Swap-out GiB/s against threads, one panel per folio size: every
    /// design and the memcpy limit.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let panels = self.folio_pages.iter().map(|&pages| {
            let kib = pages * 4;
            let designs = self.designs.iter().map(|d| {
                let rows = report
                    .results
                    .iter()
                    .filter(|r| r.folio_kib == kib && r.design == d.name());
                Series::by_threads(
                    d.name(),
                    rows.map(|r| {
                        let err = rate_stdev(r.out_gib_per_s, r.median_us, r.stdev_us);
                        (r.threads, r.out_gib_per_s, err)
                    }),
                )
            });
            let limit = Series::by_threads(
                "memcpy (limit)",
                report.limits.iter().map(|l| {
                    let err = rate_stdev(l.gib_per_s, l.median_us, l.stdev_us);
                    (l.threads, l.gib_per_s, err)
                }),
            );
            Panel {
                y_label: None,
                title: format!("reclaim, {kib} KiB folios: swap-out GiB/s"),
                series: designs.chain([limit]).collect(),
            }
        });
        report::chart_by_threads(
            "reclaim-driven swap-out GiB/s by swap_cgroup design",
            "GiB/s",
            panels,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_reclaims_and_balances() {
        for folio_pages in [1, 16] {
            let s = run_rounds(folio_pages, Design::Memcg, 2, 1 << 20, 7, 1).unwrap();
            assert!(s.moved.out_pages > 0 && s.moved.in_pages > 0, "{s:?}");
            assert!(s.moved.steal_pages >= s.moved.out_pages / 2, "{s:?}");
        }
    }

    #[test]
    fn limits_must_split_into_whole_folios() {
        let mut args = ReclaimArgs::for_suite(true);
        args.common.threads = vec![3];
        assert!(Plan::of(&args).is_err());
        args.common.threads = vec![2];
        args.folio_kib = vec![8];
        assert!(Plan::of(&args).is_err());
        args.folio_kib = vec![4];
        assert!(Plan::of(&args).is_ok());
    }
}
