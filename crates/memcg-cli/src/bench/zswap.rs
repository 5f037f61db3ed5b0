//! `memcg bench zswap`: swap-out and swap-in through zswap against the
//! same pages going straight to the RAM swap device, and against the raw
//! compressor on the same pages, in one run.
//!
//! Three kinds of page contents: `random` (incompressible: zswap refuses
//! every page and they go to the device), `text` (source-code-like, about
//! 3:1 under LZ4) and `mostly-zero` (one non-zero byte per page, what
//! `test_zswap.c` writes: not a zero page, compresses to almost nothing).
//! For each, three paths per direction:
//!
//! - `raw`: the compressor alone (`lz4_flex` block or `zstd` level 3, a
//!   reused output buffer and context), compressing each page
//!   (swap-out) or decompressing it back (swap-in): the bound on zswap;
//! - `zswap`: the simulator's `pageout` (reclaim's `swap_writepage` with
//!   zswap on: zero check, store, LRU, charges) and `touch` (faults that
//!   load and free the entries);
//! - `ram`: the same with zswap off, every page copied to the RAM device.
//!
//! Figures are GiB/s of page data. Besides the timed runs, one untimed
//! probe per content fills zswap and reads the pool: the compression
//! ratio (page bytes over compressed bytes) and the fragmentation
//! (`pool_total_size` over compressed bytes: what zsmalloc's size classes
//! and part-used zspages add). After every run each byte is verified and
//! every charge, slot and zswap entry is checked to be released.

use anyhow::{Context, ensure};
use clap::Args;
use std::sync::Arc;

use memcg::folio::Folio;
use memcg::list_lru::LruDesign;
use memcg::memcontrol::{CgroupTree, MemCgroup};
use memcg::mm_types::{PAGE_BYTES, PAGE_SIZE};
use memcg::swapops::SwapEntry;
use memcg::zswap::{Compressor, Zswap};
use memcg_sim::fill::{fill_page, stream};
use memcg_sim::{Fill, Sim, SimConfig};
use serde::Serialize;

use super::tasks::{check_size, gib_per_s, machine_bytes_for, parse_size, rate_stdev};
use super::{Benchmark, CommonArgs, Interleaved, Runs, Sample, Timed, run_plan, timed_threads};
use crate::report::{self, Chart, Panel, PhaseFacts, Progress, ReportHead, Series, Stats};
use memcg::memcontrol::Gfp;

/// Flags of `memcg bench zswap`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("threads", |a| a.help(
    "Thread counts (tasks on distinct mappings in parallel), comma separated"
)))]
pub struct ZswapArgs {
    /// Bytes of pages per run, split over the threads (K/M/G suffixes)
    /// [default: 256M; --quick 32M].
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Page contents, comma separated [default: random,text,mostly-zero].
    #[arg(long, value_delimiter = ',')]
    pub contents: Vec<Contents>,
    /// The compressor: lz4 or zstd.
    #[arg(long, default_value = "lz4", value_parser = parse_compressor)]
    pub compressor: Compressor,
    /// Seed of the page contents.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// `--threads`, `--reps`, `--quick`, `--json` and `--svg`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ZswapArgs {
    /// The arguments `memcg bench` uses: quick scale, or tiny for `--smoke`.
    pub fn for_suite(smoke: bool) -> Self {
        Self {
            size: smoke.then_some(1 << 20),
            contents: Vec::new(),
            compressor: Compressor::Lz4,
            seed: 0x5eed,
            common: CommonArgs::for_task_suite(smoke),
        }
    }
}

fn parse_compressor(name: &str) -> Result<Compressor, String> {
    Compressor::from_name(name).ok_or_else(|| format!("unknown compressor {name:?} (lz4 or zstd)"))
}

/// Runs the benchmark, prints its tables, writes JSON/SVG if asked.
pub fn run(args: &ZswapArgs) -> anyhow::Result<()> {
    run_plan(&Plan::of(args)?, &args.common.files)
}

/// What the pages hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contents {
    /// Incompressible.
    Random,
    /// Source-code-like, about 3:1.
    Text,
    /// One non-zero byte per page.
    MostlyZero,
}

memcg::named_enum!(Contents {
    Random => "random",
    Text => "text",
    MostlyZero => "mostly-zero",
}, unknown: String = |s| format!("unknown contents {s:?} (random, text or mostly-zero)"));

impl Contents {
    fn fill(self) -> Fill {
        match self {
            Contents::Random => Fill::Random,
            Contents::Text => Fill::Text,
            Contents::MostlyZero => Fill::Sparse,
        }
    }
}

/// Which way the pages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Direction {
    /// Compress / `pageout`.
    SwapOut,
    /// Decompress / fault in.
    SwapIn,
}

memcg::named_enum!(Direction {
    SwapOut => "swap-out",
    SwapIn => "swap-in",
});

/// What moves the pages: the arms of every configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Path {
    /// The compressor alone.
    Raw,
    /// The library's `Zswap::store` / `Zswap::load_page` alone, on
    /// charged folios and swap entries made beforehand.
    Zswap,
    /// Reclaim and faults through zswap (RAM device behind it).
    SwapZswap,
    /// Reclaim and faults with zswap off, straight to the RAM device.
    SwapRam,
}

memcg::named_enum!(Path {
    Raw => "raw",
    Zswap => "zswap",
    SwapZswap => "swap-zswap",
    SwapRam => "swap-ram",
});

/// One configuration: contents, direction and thread count.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RunConfig {
    contents: Contents,
    direction: Direction,
    threads: usize,
}

/// The compressor with its reusable state, as zswap's per-CPU
/// `acomp_ctx` holds it.
enum Codec {
    Lz4,
    Zstd(
        Box<zstd::bulk::Compressor<'static>>,
        Box<zstd::bulk::Decompressor<'static>>,
    ),
}

impl Codec {
    fn new(compressor: Compressor) -> anyhow::Result<Self> {
        Ok(match compressor {
            Compressor::Lz4 => Codec::Lz4,
            Compressor::Zstd => Codec::Zstd(
                Box::new(zstd::bulk::Compressor::new(3)?),
                Box::new(zstd::bulk::Decompressor::new()?),
            ),
        })
    }

    /// Compresses `page` into `out`; the compressed length.
    fn compress(&mut self, page: &[u8], out: &mut [u8]) -> anyhow::Result<usize> {
        Ok(match self {
            Codec::Lz4 => lz4_flex::block::compress_into(page, out)?,
            Codec::Zstd(c, _) => c.compress_to_buffer(page, out)?,
        })
    }

    /// Decompresses `compressed` into `page`; checks it filled the page.
    fn decompress(&mut self, compressed: &[u8], page: &mut [u8]) -> anyhow::Result<()> {
        let n = match self {
            Codec::Lz4 => lz4_flex::block::decompress_into(compressed, page)?,
            Codec::Zstd(_, d) => d.decompress_to_buffer(compressed, page)?,
        };
        ensure!(n == PAGE_BYTES, "decompressed {n} bytes, not a page");
        Ok(())
    }
}

/// The largest compressed page either codec writes.
const OUT_BYTES: usize = 2 * PAGE_BYTES;

/// The pages of task `t`'s mapping, as the simulator fills them.
fn task_pages(contents: Contents, seed: u64, t: usize, nr_pages: u64) -> Vec<u8> {
    let mut pages = vec![0u8; nr_pages as usize * PAGE_BYTES];
    let stream = stream(seed, &task_name(t));
    for (i, page) in pages.chunks_exact_mut(PAGE_BYTES).enumerate() {
        fill_page(contents.fill(), stream, i as u64, page);
    }
    pages
}

fn task_name(t: usize) -> String {
    format!("task{t}")
}

/// One raw compressor thread's pages and buffers.
struct RawTask {
    pages: Vec<u8>,
    compressed: Vec<Vec<u8>>,
    /// Where swap-in decompresses to: a mapping's worth of pages, as
    /// faults fill distinct pages (written once, so no pass faults).
    decompressed: Vec<u8>,
    /// Where swap-out compresses to: the most a page compresses to, as
    /// zswap's per-CPU buffer (the codecs may touch all they are given).
    out: Vec<u8>,
    codec: Codec,
}

impl RawTask {
    fn new(plan: &Plan, config: RunConfig, t: usize) -> anyhow::Result<Self> {
        let nr_pages = plan.size_bytes / config.threads as u64 / PAGE_SIZE;
        let pages = task_pages(config.contents, plan.seed, t, nr_pages);
        let mut codec = Codec::new(plan.compressor)?;
        let mut out = vec![1u8; OUT_BYTES];
        let compressed = pages
            .chunks_exact(PAGE_BYTES)
            .map(|p| {
                let n = codec.compress(p, &mut out)?;
                Ok(out[..n].to_vec())
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            decompressed: vec![1u8; pages.len()],
            pages,
            compressed,
            out,
            codec,
        })
    }

    /// One pass over the pages in `direction`.
    fn pass(&mut self, direction: Direction) -> anyhow::Result<()> {
        match direction {
            Direction::SwapOut => {
                for page in self.pages.chunks_exact(PAGE_BYTES) {
                    std::hint::black_box(self.codec.compress(page, &mut self.out)?);
                }
            }
            Direction::SwapIn => {
                let pages = self.decompressed.chunks_exact_mut(PAGE_BYTES);
                for (page, c) in pages.zip(&self.compressed) {
                    self.codec.decompress(c, page)?;
                }
            }
        }
        Ok(())
    }

    /// Checks that decompression gives the pages back.
    fn verify(&mut self) -> anyhow::Result<()> {
        let mut page = vec![0u8; PAGE_BYTES];
        for (orig, c) in self.pages.chunks_exact(PAGE_BYTES).zip(&self.compressed) {
            self.codec.decompress(c, &mut page)?;
            ensure!(page == orig, "the compressor changed a page");
        }
        Ok(())
    }
}

/// `rounds` passes of the raw compressor; the timed phase.
fn run_raw(plan: &Plan, config: RunConfig, rounds: u64) -> anyhow::Result<Timed> {
    let tasks = (0..config.threads)
        .map(|t| RawTask::new(plan, config, t).map(std::sync::Mutex::new))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let timed = timed_threads(config.threads, |t| {
        // Each thread locks only its own task: uncontended.
        let mut task = tasks[t]
            .lock()
            .map_err(|_| anyhow::anyhow!("raw task poisoned"))?;
        (0..rounds).try_for_each(|_| task.pass(config.direction))
    })?;
    for task in tasks {
        task.into_inner()
            .map_err(|_| anyhow::anyhow!("raw task poisoned"))?
            .verify()?;
    }
    Ok(timed)
}

/// One thread's folios for the library arm, filled as the simulator
/// fills the task's mapping, and their swap entries.
struct StoreTask {
    folios: Vec<Folio>,
    entries: Vec<SwapEntry>,
    /// Where loads decompress to (a page per folio, written once so that
    /// no timed load faults), and which pages a load filled; only this
    /// task's thread locks it.
    loaded: std::sync::Mutex<(Vec<u8>, Vec<bool>)>,
}

/// The library arm's world: a tree with `/bench`, zswap on over it, and
/// each thread's folios charged there.
struct StoreWorld {
    /// Keeps the tree alive while the folios are charged to it; drains
    /// its charge stock at the end.
    tree: CgroupTree,
    bench: Arc<MemCgroup>,
    zswap: Arc<Zswap>,
    tasks: Vec<StoreTask>,
}

fn store_world(plan: &Plan, config: RunConfig) -> anyhow::Result<StoreWorld> {
    let tree = CgroupTree::default();
    let bench = tree.mkdir("/bench")?.memcg().context("no memory cgroup")?;
    let zswap = Zswap::new(&tree, LruDesign::Split);
    zswap.set_enabled(true);
    zswap.set_compressor(plan.compressor);
    let nr_pages = plan.size_bytes / config.threads as u64 / PAGE_SIZE;
    let tasks = (0..config.threads)
        .map(|t| {
            let pages = task_pages(config.contents, plan.seed, t, nr_pages);
            let mut task = StoreTask {
                folios: Vec::new(),
                entries: Vec::new(),
                loaded: std::sync::Mutex::new((
                    vec![1u8; pages.len()],
                    vec![false; nr_pages as usize],
                )),
            };
            for (i, page) in pages.chunks_exact(PAGE_BYTES).enumerate() {
                let folio = Folio::new(&tree, &bench, 1, Gfp::Kernel)?;
                folio.bytes().copy_from_slice(page);
                task.folios.push(folio);
                task.entries
                    .push(SwapEntry::new(0, t as u64 * nr_pages + i as u64)?);
            }
            Ok(task)
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(StoreWorld {
        tree,
        bench,
        zswap,
        tasks,
    })
}

/// Stores every folio of `task`; refused (incompressible) ones are
/// counted by zswap and left out.
fn store_all(zswap: &Zswap, task: &StoreTask) {
    for (folio, &entry) in task.folios.iter().zip(&task.entries) {
        let _ = std::hint::black_box(zswap.store(folio, entry));
    }
}

/// Loads every stored page of `task` back (freeing its entry) into its
/// buffer.
fn load_all(zswap: &Zswap, task: &StoreTask) -> anyhow::Result<()> {
    let mut loaded = task
        .loaded
        .lock()
        .map_err(|_| anyhow::anyhow!("load buffer poisoned"))?;
    let (pages, filled) = &mut *loaded;
    let slots = pages.chunks_exact_mut(PAGE_BYTES).zip(filled.iter_mut());
    for ((page, filled), &entry) in slots.zip(&task.entries) {
        *filled = zswap.load_page(entry, page);
    }
    Ok(())
}

/// Checks every page the last [`load_all`] filled against its folio.
fn verify_loaded(task: &StoreTask) -> anyhow::Result<()> {
    let loaded = task
        .loaded
        .lock()
        .map_err(|_| anyhow::anyhow!("load buffer poisoned"))?;
    let (pages, filled) = &*loaded;
    for ((page, &filled), folio) in pages.chunks_exact(PAGE_BYTES).zip(filled).zip(&task.folios) {
        ensure!(
            !filled || page == &folio.bytes()[..],
            "zswap changed a page"
        );
    }
    Ok(())
}

/// `rounds` timed stores, or loads, through the library alone.
fn run_zswap_alone(plan: &Plan, config: RunConfig, rounds: u64) -> anyhow::Result<Timed> {
    let StoreWorld {
        tree,
        bench,
        zswap,
        tasks,
    } = store_world(plan, config)?;
    let mut total = Timed::default();
    for _ in 0..rounds {
        let timed = match config.direction {
            Direction::SwapOut => {
                let timed = timed_threads(config.threads, |t| {
                    store_all(&zswap, &tasks[t]);
                    Ok(())
                })?;
                for task in &tasks {
                    load_all(&zswap, task)?;
                }
                timed
            }
            Direction::SwapIn => {
                tasks.iter().for_each(|task| store_all(&zswap, task));
                timed_threads(config.threads, |t| load_all(&zswap, &tasks[t]))?
            }
        };
        tasks.iter().try_for_each(verify_loaded)?;
        total.add(&timed);
    }
    let counts = zswap.debug_counts();
    ensure!(
        (counts.stored_pages, counts.pool_total_size) == (0, 0),
        "zswap kept {} pages in {} bytes",
        counts.stored_pages,
        counts.pool_total_size
    );
    drop(tasks);
    // zswap's entries charge through the per-CPU stock, as the kernel's
    // obj_cgroup charges do: give the stocked pages back before counting.
    tree.drain_all_stock(&bench);
    ensure!(bench.memory().usage() == 0, "folios left charged");
    Ok(total)
}

/// A simulated machine with a RAM device and zswap on or off, the
/// threads' mappings populated (and, for swap-in, paged out).
fn machine(plan: &Plan, config: RunConfig, zswap: bool) -> anyhow::Result<(Sim, String)> {
    let mem_bytes = machine_bytes_for(plan.size_bytes, config.threads);
    let sim = Sim::new(SimConfig {
        seed: plan.seed,
        mem_bytes,
        charge_stock: true,
        memcg_metadata_bytes: None,
        ..SimConfig::default()
    });
    sim.prefault(mem_bytes);
    sim.fs().write("/cgroup.subtree_control", "+memory")?;
    sim.fs().mkdir("/bench")?;
    let zs = sim.swap().zswap();
    zs.set_enabled(zswap);
    zs.set_compressor(plan.compressor);
    // The pool may hold every page: the limit is not what is measured.
    zs.set_max_pool_percent(100);
    let device = sim.swapon_ram(
        plan.size_bytes + (4 << 20) * (config.threads as u64 + 1),
        None,
    )?;
    let per_task_bytes = plan.size_bytes / config.threads as u64;
    for t in 0..config.threads {
        let name = task_name(t);
        sim.alloc("/bench", &name, per_task_bytes, 1, config.contents.fill())?;
        if config.direction == Direction::SwapIn {
            sim.pageout(&name)?;
        }
    }
    Ok((sim, device))
}

/// One timed `pageout` or fault-in through zswap or the RAM device.
fn run_sim(plan: &Plan, config: RunConfig, path: Path) -> anyhow::Result<Timed> {
    let (sim, device) = machine(plan, config, path == Path::SwapZswap)?;
    let per_task_pages = plan.size_bytes / config.threads as u64 / PAGE_SIZE;
    let timed = timed_threads(config.threads, |t| {
        let name = task_name(t);
        let pages = match config.direction {
            Direction::SwapOut => sim.pageout(&name)?,
            Direction::SwapIn => sim.touch(&name)?,
        };
        ensure!(
            pages == per_task_pages,
            "{name}: {pages} of {per_task_pages} pages moved"
        );
        Ok(())
    })?;
    for t in 0..config.threads {
        let name = task_name(t);
        sim.verify(&name)?;
        sim.free(&name)?;
    }
    check_released(&sim, &device)?;
    Ok(timed)
}

/// Nothing charged to `/bench`, no slot of `device` and no zswap entry
/// or pool page left once every mapping is freed.
fn check_released(sim: &Sim, device: &str) -> anyhow::Result<()> {
    let bench = sim.fs().memcg("/bench")?;
    sim.fs().tree().drain_all_stock(&bench);
    let slots = sim
        .swap()
        .swapfiles()
        .by_name(device)
        .context("the device is still on")?
        .inuse_pages();
    let zswap = sim.swap().zswap().debug_counts();
    ensure!(
        (bench.memory().usage(), bench.swap().usage(), slots) == (0, 0, 0)
            && (zswap.stored_pages, zswap.pool_total_size) == (0, 0),
        "memory {} swap {} slots {} zswap pages {} pool {} left after free",
        bench.memory().usage(),
        bench.swap().usage(),
        slots,
        zswap.stored_pages,
        zswap.pool_total_size
    );
    Ok(())
}

/// What zswap's pool held once every page of one content was stored.
#[derive(Debug, Clone, Serialize)]
struct PoolRow {
    contents: Contents,
    pages_stored: u64,
    /// Pages zswap refused as incompressible (they went to the device).
    pages_rejected: u64,
    /// Sum of the stored objects' sizes (`memory.zswap.current`).
    compressed_bytes: u64,
    /// `pool_total_size`: the pool's pages.
    pool_bytes: u64,
    /// Page bytes stored over compressed bytes.
    compression_ratio: Option<f64>,
    /// `pool_bytes` over `compressed_bytes` (1.0: no waste).
    fragmentation: Option<f64>,
}

/// Stores every page of `contents` in zswap (one thread) and reads the
/// pool.
fn probe_pool(plan: &Plan, contents: Contents) -> anyhow::Result<PoolRow> {
    let config = RunConfig {
        contents,
        direction: Direction::SwapOut,
        threads: 1,
    };
    let (sim, device) = machine(plan, config, true)?;
    sim.pageout(&task_name(0))?;
    let counts = sim.swap().zswap().debug_counts();
    let compressed_bytes = u64::try_from(
        sim.fs()
            .memcg("/bench")?
            .stat(memcg::memcontrol::MemcgStat::ZswapBytes),
    )?;
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let row = PoolRow {
        contents,
        pages_stored: counts.stored_pages,
        pages_rejected: counts.reject_compress_poor,
        compressed_bytes,
        pool_bytes: counts.pool_total_size,
        compression_ratio: ratio(counts.stored_pages * PAGE_SIZE, compressed_bytes),
        fragmentation: ratio(counts.pool_total_size, compressed_bytes),
    };
    sim.verify(&task_name(0))?;
    sim.free(&task_name(0))?;
    check_released(&sim, &device)?;
    Ok(row)
}

/// One path's GiB/s over the repetitions.
#[derive(Debug, Serialize)]
struct Rate {
    /// Median GiB/s (from the median time).
    gib_per_s: f64,
    stdev_gib_per_s: f64,
    samples_us: Vec<f64>,
    #[serde(flatten)]
    phases: PhaseFacts,
}

impl Rate {
    fn of(runs: &Runs<Sample>, config: usize, arm: usize, size_bytes: u64) -> Self {
        let samples_us = runs.values(config, arm);
        let st = Stats::of(&samples_us);
        let gib = gib_per_s(size_bytes, st.median / 1e6);
        Self {
            gib_per_s: gib,
            stdev_gib_per_s: rate_stdev(gib, st.median, st.stdev),
            samples_us,
            phases: runs.facts(config, arm),
        }
    }
}

#[derive(Debug, Serialize)]
struct ResultRow {
    contents: Contents,
    direction: Direction,
    threads: usize,
    raw: Rate,
    zswap: Rate,
    swap_zswap: Rate,
    swap_ram: Rate,
    /// The library's zswap over the raw compressor (the target: at least
    /// 0.7 on one thread for compressible pages); none for a swap-in of
    /// contents zswap stores none of (it loads nothing then).
    zswap_vs_raw: Option<f64>,
    /// Swapping through zswap over swapping to the RAM device.
    swap_zswap_vs_ram: f64,
}

#[derive(Debug, Serialize)]
struct ZswapConfig {
    size_bytes: u64,
    compressor: &'static str,
    reps: usize,
    min_phase_ms: u64,
    seed: u64,
    threads: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Report {
    #[serde(flatten)]
    head: ReportHead,
    config: ZswapConfig,
    pool: Vec<PoolRow>,
    results: Vec<ResultRow>,
}

/// Validated settings of one invocation.
struct Plan {
    size_bytes: u64,
    compressor: Compressor,
    seed: u64,
    reps: usize,
    min_phase_ms: u64,
    threads: Vec<usize>,
    contents: Vec<Contents>,
    configs: Vec<RunConfig>,
}

impl Plan {
    fn of(args: &ZswapArgs) -> anyhow::Result<Self> {
        let common = &args.common;
        let size_bytes = common.scaled(args.size, 32 << 20, 256 << 20);
        check_size(common, size_bytes, PAGE_SIZE)?;
        let contents = if args.contents.is_empty() {
            Contents::ALL.to_vec()
        } else {
            args.contents.clone()
        };
        let mut configs = Vec::new();
        for &contents in &contents {
            for direction in [Direction::SwapOut, Direction::SwapIn] {
                for &threads in &common.threads {
                    configs.push(RunConfig {
                        contents,
                        direction,
                        threads,
                    });
                }
            }
        }
        Ok(Self {
            size_bytes,
            compressor: args.compressor,
            seed: args.seed,
            reps: common.reps(),
            min_phase_ms: common.min_phase_ms(),
            threads: common.threads.clone(),
            contents,
            configs,
        })
    }

    /// `rounds` timed runs of `path` summed; the value is µs per run.
    fn run_arm(&self, config: RunConfig, path: Path, rounds: u64) -> anyhow::Result<Sample> {
        let mut total = Timed::default();
        match path {
            Path::Raw => total = run_raw(self, config, rounds)?,
            Path::Zswap => total = run_zswap_alone(self, config, rounds)?,
            Path::SwapZswap | Path::SwapRam => {
                for _ in 0..rounds {
                    total.add(&run_sim(self, config, path)?);
                }
            }
        }
        Ok(Sample::new(total.secs / rounds as f64 * 1e6, &total))
    }
}

/// What [`Plan::measure`](Benchmark::measure) found.
struct Samples {
    pool: Vec<PoolRow>,
    runs: Runs<Sample>,
}

impl Benchmark for Plan {
    const NAME: &'static str = "zswap";
    type Samples = Samples;
    type Report = Report;

    fn describe(&self) -> String {
        format!(
            "{} MiB of pages per run through zswap ({}) vs the RAM device vs the raw \
             compressor, median of {} interleaved reps of phases >= {} ms, GiB/s",
            self.size_bytes >> 20,
            self.compressor.name(),
            self.reps,
            self.min_phase_ms
        )
    }

    fn measure(&self) -> anyhow::Result<Samples> {
        let pool = self
            .contents
            .iter()
            .map(|&c| {
                probe_pool(self, c)
                    .with_context(|| format!("{c} pool probe (--seed {})", self.seed))
            })
            .collect::<anyhow::Result<_>>()?;
        let arms = vec![Path::ALL.len(); self.configs.len()];
        let plan = Interleaved::new(self.reps, self.min_phase_ms, &arms, false);
        let mut progress = Progress::new(Self::NAME, plan.steps());
        let name = |c: usize, a: usize| {
            let config = self.configs[c];
            format!(
                "{} {} {} x{}",
                Path::ALL[a],
                config.contents,
                config.direction,
                config.threads
            )
        };
        let runs = plan.run(&mut progress, name, |c, a, rounds| {
            self.run_arm(self.configs[c], Path::ALL[a], rounds)
                .with_context(|| format!("{} (--seed {})", name(c, a), self.seed))
        })?;
        progress.finish();
        Ok(Samples { pool, runs })
    }

    fn summarise(&self, head: ReportHead, samples: Samples) -> Report {
        let results = self
            .configs
            .iter()
            .enumerate()
            .map(|(ci, config)| {
                let [raw, zswap, swap_zswap, swap_ram] =
                    [0, 1, 2, 3].map(|a| Rate::of(&samples.runs, ci, a, self.size_bytes));
                let loads_nothing = config.direction == Direction::SwapIn
                    && samples
                        .pool
                        .iter()
                        .any(|p| p.contents == config.contents && p.pages_stored == 0);
                ResultRow {
                    contents: config.contents,
                    direction: config.direction,
                    threads: config.threads,
                    zswap_vs_raw: (!loads_nothing).then(|| zswap.gib_per_s / raw.gib_per_s),
                    swap_zswap_vs_ram: swap_zswap.gib_per_s / swap_ram.gib_per_s,
                    raw,
                    zswap,
                    swap_zswap,
                    swap_ram,
                }
            })
            .collect();
        Report {
            head,
            config: ZswapConfig {
                size_bytes: self.size_bytes,
                compressor: self.compressor.name(),
                reps: self.reps,
                min_phase_ms: self.min_phase_ms,
                seed: self.seed,
                threads: self.threads.clone(),
            },
            pool: samples.pool,
            results,
        }
    }

    fn print_tables(report: &Report) {
        print_rates(report);
        println!();
        print_pool(&report.pool);
        let facts = report
            .results
            .iter()
            .flat_map(|r| Path::ALL.map(|p| &r.rate(p).phases));
        report::print_method_note(facts, report.config.min_phase_ms as f64);
    }

    /// GiB/s against threads, one panel per content and direction.
    fn chart(&self, report: &Report) -> Chart<'static> {
        let mut panels = Vec::new();
        for &contents in &self.contents {
            for direction in [Direction::SwapOut, Direction::SwapIn] {
                let rows: Vec<&ResultRow> = report
                    .results
                    .iter()
                    .filter(|r| r.contents == contents && r.direction == direction)
                    .collect();
                let series = Path::ALL
                    .iter()
                    .map(|&path| {
                        // A swap-in zswap stores nothing for loads nothing:
                        // no point.
                        let shown = rows
                            .iter()
                            .filter(|r| path != Path::Zswap || r.zswap_vs_raw.is_some());
                        let points = shown.map(|r| {
                            let rate = r.rate(path);
                            (r.threads, rate.gib_per_s, rate.stdev_gib_per_s)
                        });
                        Series::by_threads(path.name(), points)
                    })
                    .collect();
                panels.push(Panel {
                    y_label: None,
                    title: format!("{contents} {direction}"),
                    series,
                });
            }
        }
        report::chart_by_threads(
            "zswap vs RAM swap device vs raw compressor, GiB/s",
            "GiB/s",
            panels,
        )
    }
}

impl ResultRow {
    fn rate(&self, path: Path) -> &Rate {
        match path {
            Path::Raw => &self.raw,
            Path::Zswap => &self.zswap,
            Path::SwapZswap => &self.swap_zswap,
            Path::SwapRam => &self.swap_ram,
        }
    }
}

fn print_rates(report: &Report) {
    let reps = report.config.reps;
    let rows = report.results.iter().map(|r| {
        let cell = |rate: &Rate| {
            format!(
                "{:.2} ±{}",
                rate.gib_per_s,
                report::fmt_stdev(rate.stdev_gib_per_s, reps, 2)
            )
        };
        let (zswap, ratio) = match r.zswap_vs_raw {
            Some(ratio) => (cell(&r.zswap), format!("{ratio:.2}")),
            None => ("- (none stored)".to_owned(), "-".to_owned()),
        };
        vec![
            r.contents.name().to_owned(),
            r.direction.name().to_owned(),
            r.threads.to_string(),
            cell(&r.raw),
            zswap,
            ratio,
            cell(&r.swap_zswap),
            cell(&r.swap_ram),
            format!("{:.2}", r.swap_zswap_vs_ram),
        ]
    });
    report::print_table(
        &[
            "contents",
            "direction",
            "threads",
            "raw GiB/s",
            "zswap GiB/s",
            "zswap/raw",
            "swap-zswap GiB/s",
            "swap-ram GiB/s",
            "swap-zswap/ram",
        ],
        rows,
    );
}

fn print_pool(pool: &[PoolRow]) {
    let fmt = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"));
    let rows = pool.iter().map(|p| {
        vec![
            p.contents.name().to_owned(),
            p.pages_stored.to_string(),
            p.pages_rejected.to_string(),
            p.compressed_bytes.to_string(),
            p.pool_bytes.to_string(),
            fmt(p.compression_ratio),
            fmt(p.fragmentation),
        ]
    });
    report::print_table(
        &[
            "contents",
            "stored",
            "rejected",
            "compressed B",
            "pool B",
            "ratio",
            "pool/compressed",
        ],
        rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(contents: Contents) -> Plan {
        let mut args = ZswapArgs::for_suite(true);
        args.contents = vec![contents];
        Plan::of(&args).unwrap()
    }

    #[test]
    fn every_path_moves_and_releases_every_page() {
        for contents in Contents::ALL {
            let plan = plan(contents);
            for &config in &plan.configs {
                for path in Path::ALL {
                    let s = plan.run_arm(config, path, 1).unwrap();
                    assert!(s.value > 0.0, "{config:?} {path:?}");
                }
            }
        }
    }

    #[test]
    fn the_pool_probe_sees_compression_and_rejects() {
        let text = probe_pool(&plan(Contents::Text), Contents::Text).unwrap();
        let ratio = text.compression_ratio.unwrap();
        assert!(
            (2.0..5.0).contains(&ratio),
            "text compresses about 3:1: {ratio}"
        );
        assert!(text.fragmentation.unwrap() >= 1.0);
        let random = probe_pool(&plan(Contents::Random), Contents::Random).unwrap();
        assert_eq!(random.pages_stored, 0);
        assert_eq!(random.pages_rejected, 256);
    }
}
