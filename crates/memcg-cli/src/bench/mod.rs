//! `memcg bench`: the benchmarks, each comparing our design with the ones it
//! replaces in one run. Without a subcommand every benchmark runs at quick
//! scale (or tiny with `--smoke`).

pub mod swap_cgroup;

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
}

/// Runs `memcg bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        Some(BenchCommand::SwapCgroup(a)) => swap_cgroup::run(&a),
        None => {
            let mut sc = swap_cgroup::SwapCgroupArgs::for_suite(args.smoke);
            if let Some(dir) = &args.out_dir {
                std::fs::create_dir_all(dir)?;
                sc.json = Some(dir.join("swap-cgroup.json"));
                sc.svg = Some(dir.join("swap-cgroup.svg"));
            }
            swap_cgroup::run(&sc)
        }
    }
}
