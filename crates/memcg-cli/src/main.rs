//! The `memcg` command, the front ends of the simulated machine: `sh` (a
//! cgroup v2 shell over a fresh machine), `mount` and `run` (the machine
//! served over FUSE to real programs), `workload` (kbuild, usemem and seed
//! 002's readers on their own), `bench` (each of our designs measured
//! against the ones it replaces, in one run) and `reproduce` (every seed
//! experiment for every design, with a verdict against the seeds' figures).
//!
//! Each subcommand parses its flags here and runs in its own module; none
//! keeps state between runs.

mod bench;
mod fuse;
mod kbuild;
mod projection;
mod report;
mod reproduce;
mod run;
mod seeds;
mod served;
pub(crate) mod sh;
mod testbed;
mod usemem;
mod workload;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
        /// The script; stdin when omitted or `-` (with a prompt on a
        /// terminal).
        file: Option<std::path::PathBuf>,
        #[command(flatten)]
        machine: MachineArgs,
        /// The simulated time reclaim work takes, per 4 KiB page: pages
        /// scanned, written out (swap-out) and read back on a refault of
        /// the working set, so memory stalls last a modelled time on the
        /// shell's simulated clock. The default was measured on a 2-CPU
        /// VM with a virtio disk (memcg reclaim of page cache, the disk's
        /// sequential writes and random 4K reads; see memcg::clock).
        #[arg(long, value_name = "scan=T,write=T,read=T",
              default_value = "scan=1.5us,write=16us,read=140us",
              value_parser = parse_reclaim_cost)]
        reclaim_cost: memcg::clock::ReclaimCost,
    },
    /// Serve a simulated machine over FUSE at DIR (its cgroup v2 tree at
    /// DIR/sys/fs/cgroup, its /proc files at DIR/proc) until interrupted
    /// or unmounted.
    Mount {
        /// The mount point: a directory (what it holds is hidden while
        /// the machine is mounted there).
        dir: std::path::PathBuf,
        #[command(flatten)]
        machine: MachineArgs,
        #[command(flatten)]
        served: ServedArgs,
    },
    /// Run CMD against a simulated machine: in a private mount namespace
    /// its files are bind-mounted at their real paths (/sys/fs/cgroup,
    /// /proc/{meminfo,swaps,pressure/memory,sys/vm/*},
    /// /sys/module/zswap/parameters, /sys/kernel/mm/transparent_hugepage,
    /// each --fs DIR), and CMD runs in a pid
    /// namespace of its own: what it starts ends with it, or with memcg
    /// run however that ends. SIGTERM, SIGINT, SIGHUP and SIGQUIT go to
    /// CMD. Needs root (or user namespaces) and /dev/fuse. Exits with
    /// CMD's status (128+N for signal N, 127 if CMD is not found).
    #[command(
        after_help = "Example: memcg run --mem 1G --fs /tmp/test-fs=ram:16G -- bash do_test.sh"
    )]
    Run {
        #[command(flatten)]
        machine: MachineArgs,
        #[command(flatten)]
        served: ServedArgs,
        /// CMD's anonymous memory (its heap and anonymous mappings) under
        /// the simulated memcg: charged on first touch, reclaimed to the
        /// machine's swap, swapped back on the next touch, OOM-killed
        /// (userfaultfd, through the shim; needs root).
        #[arg(long, value_enum, default_value = "on")]
        anon: Switch,
        /// The command and its arguments (after `--` if they start with
        /// a dash).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<std::ffi::OsString>,
    },
    /// Run a simulated workload.
    #[command(subcommand)]
    Workload(workload::Workload),
    /// Run every seed experiment for every design and write a report
    /// beside the seeds' published figures.
    Reproduce(reproduce::ReproduceArgs),
    /// The real-kernel test bed: Debian's 6.12 and 7.3 kernels booted
    /// under qemu, running the same scripts as the simulator.
    #[command(subcommand)]
    Testbed(testbed::TestbedCmd),
}

/// The simulated machine's options (`sh`, `mount`, `run`).
///
/// `--kernel` picks a bundle of switches (`MachineConfig::for_kernel`);
/// each switch's own flag, where it has one, overrides the bundle's value
/// wherever it stands on the command line.
#[derive(Debug, clap::Args)]
struct MachineArgs {
    /// The kernel whose behaviour the machine follows where kernels
    /// differ: 6.12, 6.14 (the seeds' kernel) or 7.3. It sets the
    /// swap_cgroup and list_lru designs, what rmdir does with LRU folios,
    /// how sizes parse, what memory.reclaim accepts, the memory.stat and
    /// memory.events keys and zswap's incompressible pages
    /// (docs/kernel-profiles.md); the flags below override its choices.
    #[arg(long, default_value = "6.14")]
    kernel: memcg::profile::KernelVersion,
    /// The swap_cgroup design recording swap owners: locked, packed,
    /// atomic-u16, cluster or memcg [default: the kernel's: locked on
    /// 6.12, packed on 6.14, cluster on 7.3].
    #[arg(long)]
    swap_cgroup: Option<memcg::swap_cgroup::Design>,
    /// Seed of random fills.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// The simulated machine's memory (K/M/G/T/P/E suffixes). It bounds
    /// what the simulated kernel holds: every charge (tasks' pages, page
    /// cache, slab objects, page tables, zswap's pool, each memory
    /// cgroup's own structures) and the kernel's own pages (RAM disks,
    /// swap tables). The host pays that and the simulator's bookkeeping:
    /// about 7K per memory cgroup (each charges 14K, so --mem bounds
    /// them) and 0.7K per cgroup without memory (uncharged, as the
    /// kernel's struct cgroup) [default: half of the host's available
    /// memory].
    #[arg(long, value_parser = parse_size)]
    mem: Option<u64>,
    /// The simulated machine's CPUs: what the kernel keeps per CPU
    /// (pressure stall counts, per-CPU memcg data) scales with it.
    #[arg(long, default_value_t = memcg::memcontrol::DEFAULT_NR_CPUS,
          value_parser = clap::value_parser!(u32).range(1..=memcg::memcontrol::MAX_NR_CPUS as i64))]
    cpus: u32,
    /// The per-thread charge stock: `on` as the kernel (memory.current
    /// counts up to 64 pages more than the pages in use), `off` for
    /// exact figures.
    #[arg(long, value_enum, default_value = "on")]
    charge_stock: Switch,
    /// Bytes of its own structures each new memory cgroup charges to its
    /// parent, in place of the v6.14 model (K/M suffixes; 0: none). By
    /// default the model: 1688 bytes of per-CPU statistics per CPU,
    /// charged x (CPUs + 2), 3088 bytes of slab and 4496 bytes calibrated
    /// to booted kernels: 14K per memory cgroup on 2 CPUs, 1.6K more per
    /// CPU; shown in the parent's memory.stat percpu, slab and kernel.
    #[arg(long, value_parser = parse_bytes)]
    memcg_metadata: Option<u64>,
    /// The list_lru design of mounted filesystems' dentry and inode
    /// caches: split (v6.13+) or legacy [default: the kernel's: legacy on
    /// 6.12, split after].
    #[arg(long)]
    list_lru: Option<memcg::list_lru::LruDesign>,
    /// What rmdir does with a cgroup's LRU folios: `off` leaves them to
    /// pin the dying cgroup (6.12, v6.14), `on` moves them to the parent
    /// (7.3) [default: the kernel's].
    #[arg(long, value_enum)]
    reparent_lru_folios: Option<Switch>,
    /// Whether a swap-in may bring a large folio back whole once zswap has
    /// been enabled, loading its pages from zswap one by one: `off` swaps
    /// in single pages then (every profile: 6.12 to 7.3), `on` goes
    /// beyond [default: the kernel's].
    #[arg(long, value_enum)]
    zswap_large_folio_loads: Option<Switch>,
    /// Whether a refault checks the serial of the memory cgroup that
    /// evicted the page besides its id: `off` takes a recycled id for the
    /// same cgroup (every profile: 6.12 to 7.3), `on` does not
    /// [default: the kernel's].
    #[arg(long, value_enum)]
    shadow_memcg_serial: Option<Switch>,
}

impl MachineArgs {
    /// The kernel's configuration, then each switch given on the command
    /// line in place of the kernel's value.
    fn config(&self) -> memcg_sim::SimConfig {
        let kernel = memcg_sim::SimConfig::for_kernel(self.kernel);
        let on = |flag: Option<Switch>, default: bool| flag.map_or(default, |s| s == Switch::On);
        memcg_sim::SimConfig {
            seed: self.seed,
            swap_cgroup: self.swap_cgroup.unwrap_or(kernel.swap_cgroup),
            mem_bytes: machine_bytes(self.mem),
            charge_stock: self.charge_stock == Switch::On,
            memcg_metadata_bytes: self.memcg_metadata,
            nr_cpus: self.cpus,
            list_lru: self.list_lru.unwrap_or(kernel.list_lru),
            reparent_lru_folios: on(self.reparent_lru_folios, kernel.reparent_lru_folios),
            zswap_large_folio_loads: on(
                self.zswap_large_folio_loads,
                kernel.zswap_large_folio_loads,
            ),
            shadow_memcg_serial: on(self.shadow_memcg_serial, kernel.shadow_memcg_serial),
            ..kernel
        }
    }
}

/// What a served machine holds besides its cgroups (`mount`, `run`).
#[derive(Debug, clap::Args)]
struct ServedArgs {
    /// A filesystem of the machine: DIR=ram:SIZE (a RAM disk) or
    /// DIR=dir:HOSTDIR (a host directory's tree, its changes made on the
    /// host; file contents on writeback, sync or unmount); its files are
    /// read and written through the simulated page cache, charged to the
    /// cgroup of the process doing it. Repeatable.
    #[arg(long = "fs", value_name = "DIR=SOURCE")]
    fs: Vec<fuse::FsSpec>,
    /// A RAM swap device of this size (K/M/G/T suffixes).
    #[arg(long, value_parser = parse_bytes)]
    swap: Option<u64>,
    /// A workload run in the background, one build after another:
    /// `kbuild [--jobs 2] [--cgroup /build] [--tasks 8] [--heap-max 24M]
    /// [--seed N]` (the cgroup is made if missing; no limit is set).
    /// Repeatable, one per cgroup.
    #[arg(long, value_name = "WORKLOAD")]
    workload: Vec<served::WorkloadSpec>,
}

impl ServedArgs {
    fn spec(&self, machine: &MachineArgs) -> fuse::MachineSpec {
        fuse::MachineSpec {
            config: machine.config(),
            fs: self.fs.clone(),
            swap_bytes: self.swap,
            workloads: self.workload.clone(),
        }
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

/// A machine size with an optional K/M/G/T/P/E suffix, as the kernel's
/// `memparse`, of at least 1 MiB (so a value that wraps, `16E`, is refused
/// rather than making a machine of 0 bytes).
fn parse_size(text: &str) -> Result<u64, String> {
    match memcg::cgroupfs::memparse(text) {
        Ok(bytes) if bytes >= 1 << 20 => Ok(bytes),
        Ok(bytes) => Err(format!(
            "{text:?} is {bytes} bytes; a machine needs at least 1M"
        )),
        Err(_) => Err(size_help(text)),
    }
}

/// `--reclaim-cost`: `scan=T,write=T,read=T`.
fn parse_reclaim_cost(text: &str) -> Result<memcg::clock::ReclaimCost, String> {
    memcg::clock::ReclaimCost::parse(text).map_err(|e| e.to_string())
}

/// A byte count with an optional K/M/G suffix (`memparse`).
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    memcg::cgroupfs::memparse(text).map_err(|_| size_help(text))
}

/// Why `text` is no size (the interface files' message would offer
/// "max", which no flag takes).
pub(crate) fn size_help(text: &str) -> String {
    format!("{text:?} is not a size: bytes with an optional K, M, G, T, P or E suffix")
}

/// The machine size for `--mem` (or the default), with a warning when it
/// is larger than the host, whose memory the simulation really uses.
pub(crate) fn machine_bytes(mem: Option<u64>) -> u64 {
    let bytes = mem.unwrap_or_else(memcg_sim::default_mem_bytes);
    if let Some(host) = memcg_sim::host_mem_bytes().filter(|&host| bytes > host) {
        eprintln!(
            "memcg: warning: --mem {bytes} is more than this host's {host} bytes; \
             filling the simulated machine can exhaust the host"
        );
    }
    bytes
}

/// The machine of a workload that sizes its own (`kbuild`, `usemem`):
/// `--mem` as given (warned about where it exceeds the host, or is
/// smaller than the `needed` bytes), else the `needed` bytes, refused
/// where they are more than the default machine (half of the host's
/// available memory); `what` names the workload and `advice` says how
/// to make it smaller.
pub(crate) fn workload_machine_bytes(
    mem: Option<u64>,
    needed: u64,
    what: &str,
    advice: &str,
) -> anyhow::Result<u64> {
    let Some(mem) = mem else {
        let host = memcg_sim::default_mem_bytes();
        anyhow::ensure!(
            needed <= host,
            "this {what} needs a simulated machine of {needed} bytes, more than half of this \
             host's available memory ({host} bytes): {advice}, or give --mem"
        );
        return Ok(needed);
    };
    if mem < needed {
        eprintln!(
            "memcg: warning: --mem {mem} is less than the {needed} bytes this {what} needs; \
             expect global reclaim and OOM kills"
        );
    }
    Ok(machine_bytes(Some(mem)))
}

fn main() -> anyhow::Result<()> {
    // Output piped into `head` that closes early ends us quietly, as it
    // does `cat`, instead of a panic in `println!` (Rust ignores SIGPIPE
    // by default).
    // SAFETY: restoring a signal's default disposition at start-up, before
    // any thread exists; `signal` has no other preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // `memcg sh --help` lists the shell's verbs from its own command table.
    let matches = Cli::command()
        .mut_subcommand("sh", |c| c.after_help(sh::verbs_help()))
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Workload(w) => workload::run(w),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Testbed(cmd) => std::process::exit(testbed::main(cmd)?),
        Command::Sh {
            file,
            machine,
            reclaim_cost,
        } => {
            let status = sh::main(file.as_deref(), machine.config(), reclaim_cost)?;
            std::process::exit(status)
        }
        Command::Mount {
            dir,
            machine,
            served,
        } => fuse::run_mount(&dir, &served.spec(&machine)),
        Command::Run {
            machine,
            served,
            anon,
            cmd,
        } => {
            let status = run::main(&served.spec(&machine), &cmd, anon == Switch::On)?;
            std::process::exit(status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcg::list_lru::LruDesign;
    use memcg::swap_cgroup::Design;

    fn machine_of(args: &[&str]) -> memcg_sim::SimConfig {
        let cli = Cli::try_parse_from(["memcg", "sh", "--mem", "64M"].iter().chain(args)).unwrap();
        let Command::Sh { machine, .. } = cli.command else {
            unreachable!("parsed sh")
        };
        machine.config()
    }

    /// `--kernel` sets every switch; a switch's own flag wins wherever it
    /// stands.
    #[test]
    fn kernel_profiles_then_flags() {
        let default = machine_of(&[]);
        assert_eq!(
            default.behaviour.version,
            memcg::profile::KernelVersion::V6_14
        );
        assert_eq!(default.swap_cgroup, Design::Packed);
        assert_eq!(default.list_lru, LruDesign::Split);
        assert!(!default.reparent_lru_folios);
        let old = machine_of(&["--kernel", "6.12"]);
        assert_eq!(
            (old.swap_cgroup, old.list_lru),
            (Design::Locked, LruDesign::Legacy)
        );
        let new = machine_of(&["--kernel", "7.3"]);
        assert_eq!(new.swap_cgroup, Design::Cluster);
        assert!(new.reparent_lru_folios && new.behaviour.memparse_saturates);
        let mixed = machine_of(&[
            "--reparent-lru-folios",
            "off",
            "--kernel",
            "7.3",
            "--swap-cgroup",
            "memcg",
        ]);
        assert_eq!(mixed.swap_cgroup, Design::Memcg);
        assert!(!mixed.reparent_lru_folios);
        assert!(mixed.behaviour.reclaim_swappiness_max, "the rest is 7.3's");
        assert!(Cli::try_parse_from(["memcg", "sh", "--kernel", "6.13"]).is_err());
    }

    /// The workloads take `--kernel` too: its switches, their own designs.
    #[test]
    fn workloads_take_a_kernel() {
        let cli = Cli::try_parse_from(["memcg", "workload", "kbuild", "--kernel", "7.3"]).unwrap();
        let Command::Workload(workload::Workload::Kbuild(args)) = cli.command else {
            unreachable!("parsed kbuild")
        };
        let config = kbuild::config(&args, std::path::Path::new("/tmp")).unwrap();
        assert!(config.behaviour.zswap_store_incompressible);
        assert_eq!(
            config.swap_cgroup,
            Design::Memcg,
            "the workload's own design"
        );
        for cmd in ["usemem", "readers"] {
            let cli = Cli::try_parse_from(["memcg", "workload", cmd, "--kernel", "6.12"]);
            assert!(cli.is_ok(), "{cmd}");
        }
        let cli = Cli::try_parse_from(["memcg", "reproduce", "--smoke", "--kernel", "7.3"]);
        assert!(cli.is_ok());
    }
}
