//! `memcg bench`: the benchmarks, each comparing our design with the ones it
//! replaces in one run. Without a subcommand every benchmark runs at quick
//! scale (or tiny with `--smoke`).

pub mod list_lru;
pub mod page_counter;
pub mod swap;
pub mod swap_cgroup;

use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Instant;

use clap::{Args, Subcommand};

use crate::report::ReportFiles;

/// Flags of `memcg bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark; all of them at quick scale when omitted.
    #[command(subcommand)]
    pub which: Option<BenchCommand>,
    /// With no subcommand: the smallest scale, for CI smoke runs.
    #[arg(long)]
    pub smoke: bool,
    /// With no subcommand: write each benchmark's JSON and SVG here.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

/// One benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// swap_cgroup designs: locked, packed, atomic-u16, cluster, memcg.
    SwapCgroup(swap_cgroup::SwapCgroupArgs),
    /// list_lru designs (legacy vs split) on the seed 002 experiment.
    ListLru(list_lru::ListLruArgs),
    /// page_counter against the locked res_counter it replaced.
    PageCounter(page_counter::PageCounterArgs),
    /// The seed's swap-out / swap-in experiments, per swap_cgroup design.
    Swap(swap::SwapArgs),
}

/// Runs `memcg bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.which.is_some() && (args.smoke || args.out_dir.is_some()) {
        anyhow::bail!(
            "--smoke and --out-dir belong to the whole suite (`memcg bench --smoke`); \
             a named benchmark takes its own flags: --quick, --json, --svg"
        );
    }
    match args.which {
        Some(BenchCommand::SwapCgroup(a)) => swap_cgroup::run(&a),
        Some(BenchCommand::ListLru(a)) => list_lru::run(&a),
        Some(BenchCommand::PageCounter(a)) => page_counter::run(&a),
        Some(BenchCommand::Swap(a)) => swap::run(&a),
        None => {
            let dir = args.out_dir.as_deref();
            let mut sc = swap_cgroup::SwapCgroupArgs::for_suite(args.smoke);
            sc.files = ReportFiles::in_dir(dir, "swap-cgroup")?;
            swap_cgroup::run(&sc)?;
            let mut ll = list_lru::ListLruArgs::for_suite(args.smoke);
            ll.files = ReportFiles::in_dir(dir, "list-lru")?;
            list_lru::run(&ll)?;
            let mut pc = page_counter::PageCounterArgs::for_suite(args.smoke);
            pc.files = ReportFiles::in_dir(dir, "page-counter")?;
            page_counter::run(&pc)?;
            let mut sw = swap::SwapArgs::for_suite(args.smoke);
            sw.files = ReportFiles::in_dir(dir, "swap")?;
            swap::run(&sw)
        }
    }
}

/// Runs `body(thread)` on `threads` threads released together; returns the
/// wall time in seconds from the first thread's start to the last one's end.
/// Each thread reads the clock itself: the releasing thread may not run again
/// until the workers are done when there are more threads than CPUs.
pub(crate) fn timed_threads<F>(threads: usize, body: F) -> anyhow::Result<f64>
where
    F: Fn(usize) -> anyhow::Result<()> + Sync,
{
    let barrier = Barrier::new(threads);
    let spans = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, body) = (&barrier, &body);
                s.spawn(move || -> anyhow::Result<(Instant, Instant)> {
                    barrier.wait();
                    let start = Instant::now();
                    body(t)?;
                    Ok((start, Instant::now()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("benchmark thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let first = spans
        .iter()
        .map(|s| s.0)
        .min()
        .expect("at least one thread");
    let last = spans
        .iter()
        .map(|s| s.1)
        .max()
        .expect("at least one thread");
    Ok((last - first).as_secs_f64())
}
