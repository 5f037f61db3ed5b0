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
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(args) => bench::run(args),
        Command::Sh { file } => {
            let status = sh::main(file.as_deref())?;
            std::process::exit(status)
        }
    }
}
