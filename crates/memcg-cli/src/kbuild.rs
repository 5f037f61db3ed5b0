//! `memcg workload kbuild`: seeds 000/003's kernel build in a memory
//! cgroup (`memcg_sim::kbuild`), once per swap_cgroup design asked for, in
//! one run: wall and CPU time, time in reclaim and pageout, swap traffic,
//! OOM kills.

use std::path::PathBuf;

use anyhow::Context;
use memcg::swap_cgroup::Design;
use memcg_sim::kbuild::{self, KbuildConfig, KbuildResult, SwapKind};
use serde::Serialize;

use crate::report::{self, Machine, ReportHead};

/// `memcg workload kbuild` flags (defaults: the seeds' shape, scaled).
#[derive(Debug, clap::Args)]
pub struct KbuildArgs {
    /// Parallel jobs (`make -jN`).
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Compile tasks per job.
    #[arg(long, default_value_t = 24)]
    pub tasks: usize,
    /// `memory.max` of the build cgroup [default: 16M per job].
    #[arg(long, value_parser = crate::parse_bytes)]
    pub memcg_max: Option<u64>,
    /// Largest heap of a compile task (smallest: a 24th of it) [default:
    /// 48M].
    #[arg(long, value_parser = crate::parse_bytes)]
    pub heap_max: Option<u64>,
    /// Anonymous folio size: 4K or 64K.
    #[arg(long, default_value = "4K", value_parser = crate::parse_bytes)]
    pub folio: u64,
    /// Swap device: ram, zswap (in front of ram) or file.
    #[arg(long, default_value = "ram")]
    pub swap: SwapArg,
    /// Directory of the file swap device [default: a temporary one].
    #[arg(long)]
    pub swap_dir: Option<PathBuf>,
    /// swap_cgroup designs, comma separated, each a build of its own.
    #[arg(long, value_delimiter = ',', default_value = "memcg")]
    pub swap_cgroup: Vec<Design>,
    /// Take turns one task step at a time: every count replays exactly.
    #[arg(long)]
    pub lockstep: bool,
    /// The kernel whose behaviour switches the machine follows (6.12,
    /// 6.14 or 7.3; docs/kernel-profiles.md). The designs this workload
    /// compares stay those its own flags name.
    #[arg(long, default_value = "6.14")]
    pub kernel: memcg::profile::KernelVersion,
    /// Seed of every job's choices.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// The simulated machine's memory (K/M/G/T/P/E suffixes): the build's
    /// limit, a RAM swap device's pages, its files and the kernel's own
    /// pages must fit, or global reclaim and OOM follow [default: what the
    /// build needs, at most half of the host's available memory].
    #[arg(long, value_parser = crate::parse_size)]
    pub mem: Option<u64>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `--swap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwapArg {
    /// A RAM disk.
    Ram,
    /// zswap in front of a RAM disk.
    Zswap,
    /// A preallocated file.
    File,
}

impl SwapArg {
    /// The device `--swap` asks for; a file one lives in `dir`, named
    /// `file_name`.
    pub fn kind(self, dir: &std::path::Path, file_name: &str) -> SwapKind {
        match self {
            SwapArg::Ram => SwapKind::Ram,
            SwapArg::Zswap => SwapKind::Zswap,
            SwapArg::File => SwapKind::File(dir.join(file_name)),
        }
    }
}

/// One design's build.
#[derive(Debug, Serialize)]
struct Row {
    swap_cgroup: String,
    wall_secs: f64,
    cpu_secs: f64,
    job_cpu_secs: Vec<f64>,
    reclaim_secs: f64,
    pageout_secs: f64,
    tasks: u64,
    oom_kills: u64,
    max_events: u64,
    pswpin: u64,
    pswpout: u64,
    zswpin: u64,
    zswpout: u64,
    pgmajfault: u64,
    swap_cgroup_ops: u64,
    /// Calls timed (one in `SAMPLE_EVERY` per thread).
    swap_cgroup_sampled_calls: u64,
    /// Measured mean per call: in the map, waiting for and holding a lock.
    swap_cgroup_ns_per_call: f64,
    swap_cgroup_lock_wait_ns_per_call: f64,
    swap_cgroup_lock_held_ns_per_call: f64,
    /// Estimated total time in swap_cgroup calls (sampled time scaled up).
    swap_cgroup_secs: f64,
}

impl Row {
    fn of(design: Design, r: KbuildResult) -> Self {
        Self {
            swap_cgroup: design.to_string(),
            wall_secs: r.wall_secs,
            cpu_secs: r.cpu_secs,
            job_cpu_secs: r.job_cpu_secs.clone(),
            reclaim_secs: r.reclaim_secs,
            pageout_secs: r.pageout_secs,
            tasks: r.tasks,
            oom_kills: r.oom_kills,
            max_events: r.max_events,
            pswpin: r.pswpin,
            pswpout: r.pswpout,
            zswpin: r.zswpin,
            zswpout: r.zswpout,
            pgmajfault: r.pgmajfault,
            swap_cgroup_ops: r.swap_cgroup_ops,
            swap_cgroup_sampled_calls: r.swap_cgroup.sampled_calls,
            swap_cgroup_ns_per_call: r.swap_cgroup.mean_in_map_ns(),
            swap_cgroup_lock_wait_ns_per_call: r.swap_cgroup.mean_lock_wait_ns(),
            swap_cgroup_lock_held_ns_per_call: r.swap_cgroup.mean_lock_held_ns(),
            swap_cgroup_secs: r.swap_cgroup_secs(),
        }
    }
}

#[derive(Debug, Serialize)]
struct KbuildReport {
    #[serde(flatten)]
    head: ReportHead,
    jobs: usize,
    tasks_per_job: usize,
    memcg_max_bytes: u64,
    /// The simulated machine's memory.
    mem_bytes: u64,
    folio_bytes: u64,
    swap: SwapArg,
    lockstep: bool,
    seed: u64,
    results: Vec<Row>,
}

/// The build's shape from the flags, checked.
pub fn config(args: &KbuildArgs, swap_dir: &std::path::Path) -> anyhow::Result<KbuildConfig> {
    anyhow::ensure!(
        args.folio == 4096 || args.folio == 65536,
        "--folio must be 4K or 64K"
    );
    let mut config = KbuildConfig::scaled(args.jobs);
    config.behaviour = args.kernel.behaviour();
    config.tasks_per_job = args.tasks;
    if let Some(max) = args.memcg_max {
        config.memcg_max_bytes = max;
    }
    config.folio_pages = (args.folio / memcg::mm_types::PAGE_SIZE) as u32;
    if let Some(max) = args.heap_max {
        config.heap_max_bytes = max;
        config.heap_min_bytes = (max / 24).max(args.folio);
    }
    config.swap = args.swap.kind(swap_dir, "memcg-kbuild.swap");
    config.lockstep = args.lockstep;
    config.seed = args.seed;
    config.validate()?;
    config.mem_bytes = Some(crate::workload_machine_bytes(
        args.mem,
        config.needed_machine_bytes(),
        "build",
        "use fewer --jobs or a smaller --memcg-max",
    )?);
    Ok(config)
}

/// Runs `memcg workload kbuild`.
pub fn run(args: &KbuildArgs) -> anyhow::Result<()> {
    anyhow::ensure!(!args.swap_cgroup.is_empty(), "--swap-cgroup needs a design");
    report::check_writable(&args.json)?;
    let temp = tempfile::tempdir()?;
    let swap_dir = args.swap_dir.as_deref().unwrap_or(temp.path());
    let base = config(args, swap_dir)?;
    let mut progress = report::Progress::new("kbuild", args.swap_cgroup.len() as u64);
    let mut results = Vec::new();
    for &design in &args.swap_cgroup {
        let config = KbuildConfig {
            swap_cgroup: design,
            ..base.clone()
        };
        let r = kbuild::run(&config)
            .with_context(|| format!("kbuild with {design} (--seed {})", args.seed))?;
        results.push(Row::of(design, r));
        progress.step(1, &design.to_string());
    }
    progress.finish();
    let report = KbuildReport {
        head: ReportHead::new("kbuild", Machine::current()),
        jobs: args.jobs,
        tasks_per_job: args.tasks,
        memcg_max_bytes: base.memcg_max_bytes,
        mem_bytes: base.machine_bytes(),
        folio_bytes: args.folio,
        swap: args.swap,
        lockstep: args.lockstep,
        seed: args.seed,
        results,
    };
    print(&report);
    report::save_json(args.json.as_deref(), &report)?;
    Ok(())
}

fn print(report: &KbuildReport) {
    println!(
        "## kbuild: {} jobs x {} tasks in a {} MiB memcg on a {} MiB machine, {} KiB folios, {} swap\n",
        report.jobs,
        report.tasks_per_job,
        report.memcg_max_bytes >> 20,
        report.mem_bytes >> 20,
        report.folio_bytes >> 10,
        serde_json::to_value(report.swap)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    );
    let rows = report.results.iter().map(|r| {
        vec![
            r.swap_cgroup.clone(),
            format!("{:.2}", r.wall_secs),
            format!("{:.2}", r.cpu_secs),
            format!("{:.2}", r.reclaim_secs),
            format!("{:.2}", r.pageout_secs),
            (r.pswpout + r.zswpout).to_string(),
            (r.pswpin + r.zswpin).to_string(),
            r.swap_cgroup_ops.to_string(),
            format!("{:.0}", r.swap_cgroup_ns_per_call),
            format!("{:.0}", r.swap_cgroup_lock_held_ns_per_call),
            format!("{:.1}", r.swap_cgroup_secs * 1e3),
            r.oom_kills.to_string(),
        ]
    });
    report::print_table(
        &[
            "swap_cgroup",
            "wall s",
            "CPU s",
            "reclaim s",
            "pageout s",
            "pages out",
            "pages in",
            "swap_cgroup ops",
            "ns/call",
            "lock held ns/call",
            "ms in swap_cgroup",
            "OOM kills",
        ],
        rows,
    );
}
