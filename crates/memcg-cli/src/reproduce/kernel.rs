//! The real-kernel column of `memcg reproduce`: seed 002's readers and
//! seed 000's sequential zero-folio swap run on Debian's booted 6.12 and
//! 7.3 (the test bed, `crate::testbed`), one boot per kernel running
//! `kernel.sh`, beside the simulator's figures for the same shape under
//! the same kernel's profile.
//!
//! - **Readers** (seed 002's shape, scaled): `READERS` files of `seq 8000`
//!   on xfs on a brd RAM disk, written and synced, a parent (`bench`)
//!   whose memory.max is the seed's 768M scaled by readers / 10000; each
//!   run drops caches, starts one reader per child cgroup, waits, removes
//!   the children. Per run: the root's `nr_dying_descendants` one second
//!   after the rmdirs, `bench`'s memory.current, and the run's
//!   `read_in_all` seconds over run 1's.
//! - **Zero-folio swap** (seed 000): the same brd device, unmounted,
//!   becomes the swap device; `zero_swap.c` (built static with the host's
//!   gcc) writes zeros into every page of a range in a cgroup with a small
//!   memory.max, pages the rest out with MADV_PAGEOUT and reads it back,
//!   with 4K folios and with 64K mTHP. Swap counters are `/proc/vmstat`
//!   deltas; times are compared inside one kernel only.
//!
//! Timings inside a TCG guest are relative: ratios inside one kernel,
//! never a kernel's seconds against the simulator's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::report;
use crate::testbed::{GuestSpec, Kernel, Testbed, TestbedError};

/// The guest script (one boot: readers, then swap).
const SCRIPT: &str = include_str!("kernel.sh");
/// Seed 000's swap program, compiled on the host.
const ZERO_SWAP_C: &str = include_str!("zero_swap.c");
/// The brd disk: xfs needs at least 400M.
const BRD_BYTES: u64 = 400 << 20;
/// Lines of `seq` per file, as the seed.
const SEQ: u64 = 8000;

/// The shape both kernels and the simulator run.
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct Shape {
    pub(super) readers: usize,
    pub(super) runs: usize,
    pub(super) seq: u64,
    /// `bench`'s memory.max: the seed's 768M scaled by readers / 10000
    /// (at least 4M), in MiB.
    pub(super) parent_max_bytes: u64,
    /// Bytes of zero-filled anonymous memory written through swap.
    pub(super) swap_bytes: u64,
    /// memory.max of the cgroup that writes them.
    pub(super) swap_max_bytes: u64,
}

impl Shape {
    /// The shape at `scale` ("smoke", "quick" or "full"), `readers` and
    /// `runs` overriding the scale's.
    pub(super) fn of(scale: &str, readers: Option<usize>, runs: Option<usize>) -> Shape {
        let (default_readers, default_runs, swap_mib, swap_max_mib) = match scale {
            "smoke" => (20, 2, 16, 8),
            "quick" => (200, 3, 64, 16),
            _ => (400, 4, 256, 32),
        };
        let readers = readers.unwrap_or(default_readers).max(1);
        let parent = ((768u64 << 20) * readers as u64 / 10_000).max(4 << 20);
        Shape {
            readers,
            runs: runs.unwrap_or(default_runs).max(1),
            seq: SEQ,
            parent_max_bytes: parent.next_multiple_of(1 << 20),
            swap_bytes: swap_mib << 20,
            swap_max_bytes: swap_max_mib << 20,
        }
    }

    fn script_args(&self) -> Vec<String> {
        [
            self.readers as u64,
            self.runs as u64,
            self.seq,
            self.parent_max_bytes,
            self.swap_bytes >> 20,
            self.swap_max_bytes,
        ]
        .map(|n| n.to_string())
        .to_vec()
    }
}

/// One readers run, on a kernel or the simulator.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ReadersRun {
    pub(super) run: usize,
    pub(super) secs: f64,
    /// This run's seconds over run 1's (same machine).
    pub(super) over_first: f64,
    pub(super) dying: u64,
    pub(super) parent_current_bytes: u64,
}

/// One zero-folio swap pass on a kernel.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct SwapPass {
    pub(super) folio_kib: u64,
    pub(super) write_secs: f64,
    pub(super) pageout_secs: f64,
    pub(super) read_secs: f64,
    pub(super) pswpout: u64,
    pub(super) pswpin: u64,
    pub(super) swpout_zero: u64,
    pub(super) swpin_zero: u64,
    /// Why the pass did not run, when it did not.
    pub(super) error: Option<String>,
}

/// One kernel's results beside the simulator's for its profile.
#[derive(Debug, Serialize)]
pub(super) struct KernelResult {
    pub(super) kernel: &'static str,
    /// Why this kernel has no figures, when it has none.
    pub(super) error: Option<String>,
    pub(super) boot_secs: f64,
    pub(super) readers: Vec<ReadersRun>,
    pub(super) swap: Vec<SwapPass>,
    /// The simulator's design under this kernel's profile.
    pub(super) sim_design: String,
    pub(super) sim_readers: Vec<ReadersRun>,
}

/// `kernel.json`: the column, or why there is none.
#[derive(Debug, Serialize)]
pub(super) struct KernelColumn {
    /// Set when the column is absent, saying why.
    pub(super) note: Option<String>,
    pub(super) shape: Shape,
    pub(super) swap_device: &'static str,
    pub(super) kernels: Vec<KernelResult>,
}

/// The note when no test bed is prepared.
pub(super) const NO_TESTBED: &str = "no test bed: run `memcg testbed prepare`";

/// Runs the column at `shape` with the test bed cached at `cache` (else
/// the test bed's default), writing `kernel.json` and `kernel.svg` in
/// `out`; the simulator's runs use `seed`.
pub(super) fn column(
    shape: Shape,
    cache: Option<&Path>,
    seed: u64,
    out: &Path,
) -> anyhow::Result<KernelColumn> {
    let testbed = Testbed::open(cache);
    let mut column = KernelColumn {
        note: None,
        shape,
        swap_device: "brd (/dev/ram0, the readers' disk once unmounted)",
        kernels: Vec::new(),
    };
    let work = tempfile::tempdir()?;
    let files = build_zero_swap(work.path());
    let script = work.path().join("kernel.sh");
    std::fs::write(&script, SCRIPT)?;
    for kernel in Kernel::ALL {
        let result = run_kernel(&testbed, kernel, &shape, &script, &files, seed)?;
        match result {
            Some(r) => column.kernels.push(r),
            None => {
                column.note = Some(NO_TESTBED.to_owned());
                column.kernels.clear();
                break;
            }
        }
    }
    report::write_json(&out.join("kernel.json"), &column)?;
    if !column.kernels.is_empty() {
        report::write_svg(&out.join("kernel.svg"), &chart(&column))?;
    }
    Ok(column)
}

/// `zero_swap` built static in `dir` with the host's gcc, as the files to
/// pass to the guest (none when gcc fails: the guest script then reports
/// the swap passes as not run).
fn build_zero_swap(dir: &Path) -> Vec<PathBuf> {
    let source = dir.join("zero_swap.c");
    let binary = dir.join("zero_swap");
    let built = std::fs::write(&source, ZERO_SWAP_C).is_ok()
        && std::process::Command::new("gcc")
            .args(["-static", "-O1", "-o"])
            .arg(&binary)
            .arg(&source)
            .status()
            .is_ok_and(|s| s.success());
    if built {
        vec![binary]
    } else {
        eprintln!("reproduce: gcc -static failed; the kernel column has no swap passes");
        Vec::new()
    }
}

/// One boot of `kernel`, and the simulator's same shape under its
/// profile. `None` when the kernel is not prepared.
fn run_kernel(
    testbed: &Testbed,
    kernel: Kernel,
    shape: &Shape,
    script: &Path,
    files: &[PathBuf],
    seed: u64,
) -> anyhow::Result<Option<KernelResult>> {
    let spec = GuestSpec {
        kernel,
        brd_bytes: Some(BRD_BYTES),
        timeout: Duration::from_secs(240 + 2 * (shape.readers * shape.runs) as u64 / 5),
        ..GuestSpec::default()
    };
    eprintln!("reproduce: booting kernel {kernel} (qemu TCG) for the real-kernel column");
    let start = std::time::Instant::now();
    let booted = testbed.run(&spec, script, files, &shape.script_args());
    let boot_secs = start.elapsed().as_secs_f64();
    let mut result = KernelResult {
        kernel: kernel.label(),
        error: None,
        boot_secs,
        readers: Vec::new(),
        swap: Vec::new(),
        sim_design: String::new(),
        sim_readers: Vec::new(),
    };
    match booted {
        Err(e) if matches!(e.downcast_ref(), Some(TestbedError::NotPrepared(..))) => {
            return Ok(None);
        }
        Err(e) => result.error = Some(format!("{e:#}")),
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            (result.readers, result.swap) = parse_output(&stdout);
            if out.status != 0 || result.readers.is_empty() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let tail: Vec<&str> = stderr.lines().rev().take(4).collect();
                result.error = Some(format!(
                    "script status {}: {}",
                    out.status,
                    tail.join(" / ")
                ));
            }
        }
    }
    (result.sim_design, result.sim_readers) = simulate(kernel, shape, seed)?;
    Ok(Some(result))
}

/// The `key=value` words of a line after its first word.
fn fields(line: &str) -> impl Iterator<Item = (&str, &str)> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|w| w.split_once('='))
}

/// The guest's `readers ...` and `swap ...` lines.
fn parse_output(stdout: &str) -> (Vec<ReadersRun>, Vec<SwapPass>) {
    let mut readers = Vec::new();
    let mut swap = Vec::new();
    for line in stdout.lines() {
        let num = |key: &str| {
            fields(line)
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse::<f64>().ok())
        };
        if line.starts_with("readers ") {
            readers.push(ReadersRun {
                run: num("run").unwrap_or(0.0) as usize,
                secs: num("secs").unwrap_or(0.0),
                over_first: 0.0,
                dying: num("dying").unwrap_or(0.0) as u64,
                parent_current_bytes: num("current").unwrap_or(0.0) as u64,
            });
        } else if line.starts_with("swap ") {
            let count = |key: &str| num(key).unwrap_or(0.0) as u64;
            swap.push(SwapPass {
                folio_kib: count("folio"),
                write_secs: num("write_us").unwrap_or(0.0) / 1e6,
                pageout_secs: num("pageout_us").unwrap_or(0.0) / 1e6,
                read_secs: num("read_us").unwrap_or(0.0) / 1e6,
                pswpout: count("pswpout"),
                pswpin: count("pswpin"),
                swpout_zero: count("swpout_zero"),
                swpin_zero: count("swpin_zero"),
                error: fields(line)
                    .find(|(k, _)| *k == "error")
                    .map(|(_, v)| v.to_owned()),
            });
        }
    }
    set_over_first(&mut readers);
    (readers, swap)
}

fn set_over_first(runs: &mut [ReadersRun]) {
    let first = runs.first().map_or(0.0, |r| r.secs);
    for r in runs {
        r.over_first = if first > 0.0 { r.secs / first } else { 0.0 };
    }
}

/// The simulator's readers at `shape` under `kernel`'s profile: the
/// design (list_lru, folio reparenting) that profile selects, from
/// `memcg workload readers`'s JSON.
fn simulate(kernel: Kernel, shape: &Shape, seed: u64) -> anyhow::Result<(String, Vec<ReadersRun>)> {
    let version: memcg::profile::KernelVersion =
        kernel.label().parse().map_err(anyhow::Error::msg)?;
    let json = tempfile::NamedTempFile::new()?;
    let args = crate::workload::ReadersArgs {
        readers: shape.readers,
        runs: shape.runs,
        threads: 2,
        memcg_max: shape.parent_max_bytes,
        seq: shape.seq,
        memcg_metadata: memcg_sim::SimConfig::default().memcg_metadata_bytes,
        mem: None,
        kernel: version,
        seed,
        json: Some(json.path().to_path_buf()),
        svg: None,
    };
    crate::workload::readers(&args)?;
    let value: Value = serde_json::from_str(&std::fs::read_to_string(json.path())?)?;
    let profile = memcg::machine::MachineConfig::for_kernel(version);
    let design = value["results"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| {
            d["design"]["list_lru"] == profile.list_lru.to_string()
                && d["design"]["reparent_lru_folios"] == profile.reparent_lru_folios
        })
        .ok_or_else(|| anyhow::anyhow!("no readers design for kernel {kernel}'s profile"))?;
    let num = |r: &Value, key: &str| r[key].as_f64().unwrap_or(0.0);
    let mut runs: Vec<ReadersRun> = design["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| ReadersRun {
            run: i + 1,
            secs: num(r, "wall_secs"),
            over_first: 0.0,
            dying: num(r, "dying_at_end") as u64,
            parent_current_bytes: num(r, "bench_usage_bytes_at_end") as u64,
        })
        .collect();
    set_over_first(&mut runs);
    Ok((design["name"].as_str().unwrap_or("").to_owned(), runs))
}

/// Run k / run 1 per run, each kernel beside the simulator under its
/// profile.
fn chart(column: &KernelColumn) -> report::Chart<'static> {
    let line = |name: String, runs: &[ReadersRun]| {
        report::Series::by_threads(name, runs.iter().map(|r| (r.run, r.over_first, 0.0)))
    };
    let panels = column
        .kernels
        .iter()
        .map(|k| report::Panel {
            title: format!(
                "kernel {} beside the simulator's {} profile",
                k.kernel, k.kernel
            ),
            series: vec![
                line(format!("Linux {} (TCG guest)", k.kernel), &k.readers),
                line(format!("simulator: {}", k.sim_design), &k.sim_readers),
            ],
            y_label: None,
        })
        .collect();
    report::Chart {
        title: "seed 002's readers: run k / run 1, real kernels and the simulator",
        x_label: "run",
        y_label: "wall time / run 1's",
        panels,
        x_categories: Vec::new(),
    }
}

/// The report's section.
pub(super) fn markdown(column: &KernelColumn) -> String {
    let s = &column.shape;
    let mut md = format!(
        "## Beside the real kernel (seeds 002 and 000 on booted Linux 6.12 and 7.3)\n\n\
         Seed 002's shape at {} readers, {} runs: `seq {}` files on xfs on a {} MiB brd \
         disk, written and synced, `bench`'s memory.max {} MiB (the seed's 768M × readers / \
         10000). One boot per kernel (`memcg testbed`: qemu TCG, 2 vCPUs, 2G, MGLRU off). \
         Beside each kernel, the simulator at the same shape under that kernel's profile \
         (`--kernel`). Dying: the root's `nr_dying_descendants` one second after the run's \
         rmdirs; memory.current: `bench`'s then. **Timings under TCG are relative only**: \
         compare run k / run 1 inside one kernel, never a kernel's seconds with the \
         simulator's.\n\n",
        s.readers,
        s.runs,
        s.seq,
        BRD_BYTES >> 20,
        s.parent_max_bytes >> 20
    );
    if let Some(note) = &column.note {
        md.push_str(&format!("**No real-kernel column**: {note}.\n\n"));
        return md;
    }
    md.push_str(&readers_table(column));
    md.push_str(&swap_table(column));
    md
}

fn readers_table(column: &KernelColumn) -> String {
    let mut md = String::from(
        "| kernel | run | kernel: dying | kernel: memory.current | kernel: run k / run 1 | \
         simulator: dying | simulator: memory.current | simulator: run k / run 1 |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mib = |b: u64| format!("{:.1}M", b as f64 / f64::from(1 << 20));
    for k in &column.kernels {
        if let Some(e) = &k.error {
            md.push_str(&format!("| {} | | {e} | | | | | |\n", k.kernel));
        }
        for (i, r) in k.readers.iter().enumerate() {
            let sim = k.sim_readers.get(i);
            md.push_str(&format!(
                "| {} | {} | {} | {} | {:.2} | {} | {} | {} |\n",
                k.kernel,
                r.run,
                r.dying,
                mib(r.parent_current_bytes),
                r.over_first,
                sim.map_or(String::new(), |s| s.dying.to_string()),
                sim.map_or(String::new(), |s| mib(s.parent_current_bytes)),
                sim.map_or(String::new(), |s| format!("{:.2}", s.over_first)),
            ));
        }
    }
    md.push_str("\nThe simulator's designs: ");
    let designs: Vec<String> = column
        .kernels
        .iter()
        .map(|k| format!("{} → {}", k.kernel, k.sim_design))
        .collect();
    md.push_str(&designs.join("; "));
    md.push_str(".\n\n");
    md
}

fn swap_table(column: &KernelColumn) -> String {
    let s = &column.shape;
    let mut md = format!(
        "Seed 000's sequential zero-folio swap: {} MiB of zero-filled anonymous memory \
         written page by page in a cgroup with memory.max {} MiB, the rest paged out \
         (MADV_PAGEOUT), then read back; swap on {}. Counters are `/proc/vmstat` deltas \
         (pages). Ratios are against the same kernel's 4K pass.\n\n\
         | kernel | folio | write s | pageout s | read (swap-in) s | pageout vs 4K | read vs 4K | pswpout | pswpin | swpout_zero | swpin_zero |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        s.swap_bytes >> 20,
        s.swap_max_bytes >> 20,
        column.swap_device
    );
    for k in &column.kernels {
        let base = k
            .swap
            .iter()
            .find(|p| p.folio_kib == 4 && p.error.is_none());
        for p in &k.swap {
            if let Some(e) = &p.error {
                md.push_str(&format!(
                    "| {} | {}K | not run: {e} |||||||||\n",
                    k.kernel, p.folio_kib
                ));
                continue;
            }
            let vs = |f: fn(&SwapPass) -> f64| {
                base.filter(|b| f(b) > 0.0)
                    .map_or(String::new(), |b| format!("{:.2}", f(p) / f(b)))
            };
            md.push_str(&format!(
                "| {} | {}K | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |\n",
                k.kernel,
                p.folio_kib,
                p.write_secs,
                p.pageout_secs,
                p.read_secs,
                vs(|p| p.pageout_secs),
                vs(|p| p.read_secs),
                p.pswpout,
                p.pswpin,
                p.swpout_zero,
                p.swpin_zero
            ));
        }
    }
    md.push_str(
        "\nZero-filled folios never reach the device on either kernel: swap-out records \
         them in the swap device's zero map (`swpout_zero`) and swap-in fills them \
         without I/O (`swpin_zero`); `pswpout`/`pswpin` count only pages written or read \
         on brd.\n\n",
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_guest_lines() {
        let out = "readers run=1 secs=2.000 dying=3 current=1048576\n\
                   readers run=2 secs=3.000 dying=5 current=2097152\n\
                   swap folio=4 write_us=1000000 pageout_us=500000 read_us=2000000  \
                   pswpin=1 pswpout=2 swpin_zero=16384 swpout_zero=16390\n\
                   swap folio=64 error=no-mthp\n";
        let (readers, swap) = parse_output(out);
        assert_eq!(readers.len(), 2);
        assert_eq!(readers[1].dying, 5);
        assert!((readers[1].over_first - 1.5).abs() < 1e-9);
        assert_eq!(swap[0].swpout_zero, 16390);
        assert!((swap[0].read_secs - 2.0).abs() < 1e-9);
        assert_eq!(swap[1].error.as_deref(), Some("no-mthp"));
    }

    #[test]
    fn shapes_scale_the_parent_limit_with_the_readers() {
        let full = Shape::of("full", None, None);
        assert_eq!(full.readers, 400);
        assert_eq!(full.parent_max_bytes, 31 << 20);
        assert_eq!(Shape::of("smoke", None, None).parent_max_bytes, 4 << 20);
        assert_eq!(Shape::of("quick", Some(1000), Some(5)).readers, 1000);
    }
}
