//! `memcg workload usemem`: N tasks each touching a size twice inside one
//! memory cgroup below their sum (`memcg_sim::usemem`, the vm-scalability
//! shape), once per swap_cgroup design asked for: a clean swap-throughput
//! figure.

use std::path::PathBuf;

use anyhow::Context;
use memcg::swap_cgroup::Design;
use memcg_sim::Fill;
use memcg_sim::usemem::{self, UsememConfig};
use serde::Serialize;

use crate::kbuild::SwapArg;
use crate::report::{self, Machine, ReportHead};

/// `memcg workload usemem` flags.
#[derive(Debug, clap::Args)]
pub struct UsememArgs {
    /// Tasks, each on its own thread.
    #[arg(long, default_value_t = 2)]
    pub tasks: usize,
    /// Bytes each task touches (K/M/G suffixes).
    #[arg(long, default_value = "64M", value_parser = crate::parse_bytes)]
    pub size: u64,
    /// `memory.max` of the cgroup [default: half of the tasks' sum].
    #[arg(long, value_parser = crate::parse_bytes)]
    pub memcg_max: Option<u64>,
    /// Anonymous folio size: 4K or 64K.
    #[arg(long, default_value = "4K", value_parser = crate::parse_bytes)]
    pub folio: u64,
    /// Page contents: zero, random, text, sparse, ...
    #[arg(long, default_value = "random")]
    pub fill: Fill,
    /// Swap device: ram, zswap (in front of ram) or file.
    #[arg(long, default_value = "ram")]
    pub swap: SwapArg,
    /// swap_cgroup designs, comma separated, each a run of its own.
    #[arg(long, value_delimiter = ',', default_value = "memcg")]
    pub swap_cgroup: Vec<Design>,
    /// The kernel whose behaviour switches the machine follows (6.12,
    /// 6.14 or 7.3; docs/kernel-profiles.md). The designs this workload
    /// compares stay those its own flags name.
    #[arg(long, default_value = "6.14")]
    pub kernel: memcg::profile::KernelVersion,
    /// Seed of the page contents.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// The simulated machine's memory (K/M/G/T/P/E suffixes): the limit,
    /// a RAM swap device's pages and the kernel's own pages must fit, or
    /// global reclaim and OOM follow [default: what the run needs, at most
    /// half of the host's available memory].
    #[arg(long, value_parser = crate::parse_size)]
    pub mem: Option<u64>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Row {
    swap_cgroup: String,
    wall_secs: f64,
    cpu_secs: f64,
    gib_per_s: f64,
    pages_out: u64,
    pages_in: u64,
    reclaim_secs: f64,
    pageout_secs: f64,
}

#[derive(Debug, Serialize)]
struct UsememReport {
    #[serde(flatten)]
    head: ReportHead,
    tasks: usize,
    bytes_per_task: u64,
    memcg_max_bytes: u64,
    /// The simulated machine's memory.
    mem_bytes: u64,
    folio_bytes: u64,
    seed: u64,
    results: Vec<Row>,
}

/// Runs `memcg workload usemem`.
pub fn run(args: &UsememArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.folio == 4096 || args.folio == 65536,
        "--folio must be 4K or 64K"
    );
    anyhow::ensure!(!args.swap_cgroup.is_empty(), "--swap-cgroup needs a design");
    report::check_writable(&args.json)?;
    let temp = tempfile::tempdir()?;
    let base = UsememConfig {
        tasks: args.tasks,
        bytes_per_task: args.size,
        memcg_max_bytes: args.memcg_max.unwrap_or(args.size * args.tasks as u64 / 2),
        folio_pages: (args.folio / memcg::mm_types::PAGE_SIZE) as u32,
        fill: args.fill,
        swap: args.swap.kind(temp.path(), "memcg-usemem.swap"),
        swap_cgroup: Design::Memcg,
        behaviour: args.kernel.behaviour(),
        seed: args.seed,
        mem_bytes: None,
    };
    let base = UsememConfig {
        mem_bytes: Some(crate::workload_machine_bytes(
            args.mem,
            base.needed_machine_bytes(),
            "run",
            "use fewer --tasks or a smaller --size",
        )?),
        ..base
    };
    let mut results = Vec::new();
    for &design in &args.swap_cgroup {
        let config = UsememConfig {
            swap_cgroup: design,
            ..base.clone()
        };
        let r = usemem::run(&config)
            .with_context(|| format!("usemem with {design} (--seed {})", args.seed))?;
        results.push(Row {
            swap_cgroup: design.to_string(),
            wall_secs: r.wall_secs,
            cpu_secs: r.cpu_secs,
            gib_per_s: r.gib_per_s,
            pages_out: r.pages_out,
            pages_in: r.pages_in,
            reclaim_secs: r.reclaim_secs,
            pageout_secs: r.pageout_secs,
        });
    }
    let report = UsememReport {
        head: ReportHead::new("usemem", Machine::current()),
        tasks: args.tasks,
        bytes_per_task: args.size,
        memcg_max_bytes: base.memcg_max_bytes,
        mem_bytes: base.machine_bytes(),
        folio_bytes: args.folio,
        seed: args.seed,
        results,
    };
    print(&report);
    report::save_json(args.json.as_deref(), &report)?;
    Ok(())
}

fn print(report: &UsememReport) {
    println!(
        "## usemem: {} tasks x {} MiB in a {} MiB memcg on a {} MiB machine, {} KiB folios\n",
        report.tasks,
        report.bytes_per_task >> 20,
        report.memcg_max_bytes >> 20,
        report.mem_bytes >> 20,
        report.folio_bytes >> 10
    );
    let rows = report.results.iter().map(|r| {
        vec![
            r.swap_cgroup.clone(),
            format!("{:.2}", r.gib_per_s),
            format!("{:.2}", r.wall_secs),
            format!("{:.2}", r.cpu_secs),
            format!("{:.2}", r.reclaim_secs),
            r.pages_out.to_string(),
            r.pages_in.to_string(),
        ]
    });
    report::print_table(
        &[
            "swap_cgroup",
            "GiB/s",
            "wall s",
            "CPU s",
            "reclaim s",
            "pages out",
            "pages in",
        ],
        rows,
    );
}
