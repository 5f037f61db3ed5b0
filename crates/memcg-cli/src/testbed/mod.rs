//! The real-kernel test bed: Debian's own 6.12 and 7.3 kernels, booted
//! under qemu, run the same scripts the simulator runs, so fidelity is a
//! measured agreement rather than a reading of the source.
//!
//! - `memcg testbed prepare` ([`prepare`]) fetches each kernel's packages
//!   through a private apt configuration (its own sources list and state
//!   under the cache directory: the host's apt setup is untouched), takes
//!   the uncompressed `vmlinux` out of the bzImage (qemu boots it through
//!   its PVH entry, skipping the decompressor that stock kernels crash in
//!   under TCG on some hosts), builds an initramfs per kernel
//!   ([`initramfs`]: busybox, bash, mkfs, the modules a scenario may need,
//!   our `/init`) and the kernel's own cgroup selftests from its source
//!   package. Idempotent: a kernel whose stamp matches is left alone.
//! - `memcg testbed run` ([`qemu`]) boots one kernel with a 9p share that
//!   carries the script in and its stdout, stderr and status out, and the
//!   machine options a scenario needs (memory, CPUs, swap on zram or a
//!   disk, zswap, MGLRU, a brd filesystem at `/mnt/fs`).
//! - `memcg testbed corpus` ([`corpus`], [`compare`], [`report`]) runs the
//!   differential corpus (`tests/differential/`) on the simulator under
//!   each kernel profile and on both kernels (one boot per set of machine
//!   needs), and judges every observation by the rule of issue 23.
//!
//! The cache lives outside git (`~/.cache/memcg-testbed`, or
//! `MEMCG_TESTBED_CACHE`, or `--cache`) and is re-created from packages on
//! a fresh machine. Timings inside a TCG guest are relative only: compare
//! runs inside one kernel, never a kernel with the simulator.

mod compare;
pub(crate) mod corpus;
mod initramfs;
mod prepare;
mod qemu;
mod report;
mod selftests;
pub(crate) mod sim_selftests;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use qemu::GuestOutput;

/// A kernel the test bed boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
pub(crate) enum Kernel {
    /// Debian trixie's 6.12 LTS (`linux-image-6.12.*+deb13-amd64-unsigned`).
    #[value(name = "6.12")]
    V6_12,
    /// Debian trixie-backports' 7.3 (`linux-binary-unsigned-7.3.*+deb13-amd64`).
    #[value(name = "7.3")]
    V7_3,
}

impl Kernel {
    pub(crate) const ALL: [Kernel; 2] = [Kernel::V6_12, Kernel::V7_3];

    /// "6.12" or "7.3".
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kernel::V6_12 => "6.12",
            Kernel::V7_3 => "7.3",
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Where the guest swaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestSwap {
    /// A zram device of this many bytes.
    Zram(u64),
    /// A virtio disk backed by a sparse host file of this many bytes.
    Disk(u64),
}

/// The filesystem made on the brd RAM disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum GuestFs {
    #[default]
    Xfs,
    Ext4,
}

/// One boot's machine.
#[derive(Debug, Clone)]
pub(crate) struct GuestSpec {
    pub(crate) kernel: Kernel,
    pub(crate) mem_bytes: u64,
    pub(crate) cpus: u32,
    pub(crate) swap: Option<GuestSwap>,
    pub(crate) zswap: bool,
    /// MGLRU on (the Debian default); off by default here, as the
    /// simulator models the classic two-list LRU.
    pub(crate) mglru: bool,
    /// A brd RAM disk of this many bytes, formatted and mounted at `/mnt/fs`.
    pub(crate) brd_bytes: Option<u64>,
    pub(crate) fs: GuestFs,
    /// The whole boot's limit, script included.
    pub(crate) timeout: Duration,
}

impl Default for GuestSpec {
    fn default() -> Self {
        GuestSpec {
            kernel: Kernel::V7_3,
            mem_bytes: 2 << 30,
            cpus: 2,
            swap: None,
            zswap: false,
            mglru: false,
            brd_bytes: None,
            fs: GuestFs::Xfs,
            timeout: Duration::from_secs(600),
        }
    }
}

/// Why the test bed cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TestbedError {
    #[error(
        "`{tool}` is not installed: it comes with Debian's {package} package (apt-get install {package})"
    )]
    MissingTool {
        tool: &'static str,
        package: &'static str,
    },
    #[error("kernel {0} is not prepared in {1}: run `memcg testbed prepare` first")]
    NotPrepared(Kernel, PathBuf),
    #[error("no package matches {0} in Debian trixie / trixie-backports")]
    NoPackage(String),
    #[error("module {module} is neither built into kernel {kernel} nor in its package")]
    NoModule { kernel: Kernel, module: String },
    #[error("no compressed kernel found inside {0}")]
    NoKernelImage(PathBuf),
    #[error("`{command}` failed: {status}{detail}")]
    Command {
        command: String,
        status: std::process::ExitStatus,
        detail: String,
    },
    #[error(
        "kernel {kernel} did not finish within {timeout_s} s; the console's last lines:\n{console}"
    )]
    Timeout {
        kernel: Kernel,
        timeout_s: u64,
        console: String,
    },
    #[error(
        "kernel {kernel} stopped before the script finished; the console's last lines:\n{console}"
    )]
    NoResult { kernel: Kernel, console: String },
}

/// A prepared cache of kernels.
#[derive(Debug)]
pub(crate) struct Testbed {
    cache: PathBuf,
}

impl Testbed {
    /// The test bed cached at `cache`, else `$MEMCG_TESTBED_CACHE`, else
    /// `~/.cache/memcg-testbed`.
    pub(crate) fn open(cache: Option<&Path>) -> Testbed {
        let cache = cache
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("MEMCG_TESTBED_CACHE").map(PathBuf::from))
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
                Path::new(&home).join(".cache/memcg-testbed")
            });
        Testbed { cache }
    }

    /// The directory kernel `kernel`'s boot files live in.
    fn kernel_dir(&self, kernel: Kernel) -> PathBuf {
        self.cache.join("kernels").join(kernel.label())
    }

    /// Boots `spec.kernel` and runs `bash script args...` in it.
    pub(crate) fn run(
        &self,
        spec: &GuestSpec,
        script: &Path,
        files: &[PathBuf],
        args: &[String],
    ) -> anyhow::Result<GuestOutput> {
        let dir = self.kernel_dir(spec.kernel);
        if !prepare::is_current(&dir) {
            return Err(TestbedError::NotPrepared(spec.kernel, self.cache.clone()).into());
        }
        qemu::run(&dir, spec, script, files, args)
    }
}

/// `memcg testbed ...`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TestbedCmd {
    /// Fetch, extract and build what the test bed boots (idempotent).
    Prepare {
        /// The kernels to prepare [default: all].
        #[arg(long, value_delimiter = ',')]
        kernel: Vec<Kernel>,
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Boot KERNEL under qemu and run `bash SCRIPT ARGS...` in it as root;
    /// print its stdout and stderr, exit with its status.
    Run(RunArgs),
    /// Run each kernel's own test_memcontrol, test_zswap and test_core on
    /// it and compare the results with the record; with --sim, run them on
    /// the simulator and compare with the kernels' record.
    Selftests(selftests::SelftestArgs),
    /// Run the differential corpus (tests/differential) on the simulator
    /// under each kernel profile and on each booted kernel; print the
    /// agreement table; fail when an observation disagrees that no
    /// scenario declares known.
    Corpus(corpus::CorpusArgs),
}

/// `memcg testbed run`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[arg(long)]
    kernel: Kernel,
    /// The guest's memory (K/M/G suffixes).
    #[arg(long, default_value = "2G", value_parser = crate::parse_bytes)]
    mem: u64,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    cpus: u32,
    /// Swap: `zram:SIZE` or `disk:SIZE`.
    #[arg(long, value_parser = parse_guest_swap)]
    swap: Option<GuestSwap>,
    /// Turn zswap on (Debian builds it in, off).
    #[arg(long)]
    zswap: bool,
    /// MGLRU (Debian's default is on; the simulator models the classic LRU).
    #[arg(long, value_enum, default_value = "off")]
    mglru: crate::Switch,
    /// A brd RAM disk of this size, formatted with --fs and mounted at /mnt/fs.
    #[arg(long, value_parser = crate::parse_bytes)]
    brd: Option<u64>,
    #[arg(long, value_enum, default_value = "xfs")]
    fs: GuestFs,
    /// Seconds the whole boot may take.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// A file copied beside the script (the script's working directory).
    #[arg(long = "file")]
    files: Vec<PathBuf>,
    #[arg(long)]
    cache: Option<PathBuf>,
    script: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

fn parse_guest_swap(text: &str) -> Result<GuestSwap, String> {
    let (kind, size) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: give zram:SIZE or disk:SIZE"))?;
    let bytes = crate::parse_bytes(size)?;
    match kind {
        "zram" => Ok(GuestSwap::Zram(bytes)),
        "disk" => Ok(GuestSwap::Disk(bytes)),
        _ => Err(format!("{kind:?} is no swap kind: zram or disk")),
    }
}

/// Runs `memcg testbed ...`; returns the exit status.
pub(crate) fn main(cmd: TestbedCmd) -> anyhow::Result<i32> {
    match cmd {
        TestbedCmd::Prepare { kernel, cache } => {
            let testbed = Testbed::open(cache.as_deref());
            let kernels = if kernel.is_empty() {
                Kernel::ALL.to_vec()
            } else {
                kernel
            };
            prepare::prepare(&testbed.cache, &kernels)?;
            Ok(0)
        }
        TestbedCmd::Selftests(args) => selftests::main(&args),
        TestbedCmd::Corpus(args) => corpus::main(args),
        TestbedCmd::Run(args) => {
            let testbed = Testbed::open(args.cache.as_deref());
            let spec = GuestSpec {
                kernel: args.kernel,
                mem_bytes: args.mem,
                cpus: args.cpus,
                swap: args.swap,
                zswap: args.zswap,
                mglru: args.mglru == crate::Switch::On,
                brd_bytes: args.brd,
                fs: args.fs,
                timeout: Duration::from_secs(args.timeout),
            };
            let out = testbed.run(&spec, &args.script, &args.files, &args.args)?;
            use std::io::Write;
            std::io::stdout().write_all(&out.stdout)?;
            std::io::stderr().write_all(&out.stderr)?;
            Ok(out.status)
        }
    }
}

/// Runs `command`, failing with its stderr when it does not succeed.
fn run_command(command: &mut std::process::Command) -> anyhow::Result<std::process::Output> {
    let output = command.output()?;
    if output.status.success() {
        return Ok(output);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let detail = if tail.is_empty() {
        String::new()
    } else {
        format!(
            "\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    };
    Err(TestbedError::Command {
        command: format!("{command:?}"),
        status: output.status,
        detail,
    }
    .into())
}

/// Checks that `tool` is on the PATH (or an absolute path that exists).
fn require_tool(tool: &'static str, package: &'static str) -> Result<(), TestbedError> {
    let found = if tool.starts_with('/') {
        Path::new(tool).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
    };
    if found {
        Ok(())
    } else {
        Err(TestbedError::MissingTool { tool, package })
    }
}
