//! The `memcg` command: benchmarks that compare the kernel's memory-cgroup
//! designs with ours (and, as the simulator grows, a cgroup v2 shell and the
//! seeds' reproductions).

mod bench;
mod report;
mod sh;

use clap::{Parser, Subcommand};

/// Linux memory-cgroup machinery in userspace: measure and compare designs.
#[derive(Debug, Parser)]
#[command(name = "memcg", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run benchmarks; every one at quick scale when none is named.
    Bench(bench::BenchArgs),
    /// Run a cgroup v2 shell script (or commands from stdin) over a fresh
    /// simulated hierarchy.
    Sh {
        /// The script; stdin when omitted (with a prompt on a terminal).
        file: Option<std::path::PathBuf>,
        /// The swap_cgroup design recording swap owners.
        #[arg(long, default_value = "memcg")]
        swap_cgroup: memcg::swap_cgroup::Design,
        /// Seed of random fills.
        #[arg(long, default_value_t = 0x5eed)]
        seed: u64,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(args) => bench::run(args),
        Command::Sh {
            file,
            swap_cgroup,
            seed,
        } => {
            let config = memcg_sim::SimConfig { seed, swap_cgroup };
            let status = sh::main(file.as_deref(), config)?;
            std::process::exit(status)
        }
    }
}
