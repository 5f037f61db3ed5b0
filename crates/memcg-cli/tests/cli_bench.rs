//! The `memcg bench` command end to end, at the smallest scale.

use assert_cmd::Command;
use serde_json::Value;

fn memcg() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
}

#[test]
fn swap_cgroup_bench_writes_the_documented_json_and_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (json, svg) = (dir.path().join("sc.json"), dir.path().join("sc.svg"));
    let stdout = run_ok(
        memcg()
            .args([
                "bench",
                "swap-cgroup",
                "--quick",
                "--threads",
                "1,2",
                "--slots",
                "4096",
                "--ops",
                "500",
                "--reps",
                "1",
            ])
            .arg("--json")
            .arg(&json)
            .arg("--svg")
            .arg(&svg),
    );
    assert!(
        stdout.contains("limit (plain u16)") && stdout.contains("bytes/slot"),
        "{stdout}"
    );

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["bench"], "swap-cgroup");
    let results = report["results"].as_array().unwrap();
    // 5 designs x 4 workloads x 2 thread counts.
    assert_eq!(results.len(), 40);
    for r in results {
        assert!(r["design"].is_string() && r["workload"].is_string());
        assert!(r["threads"].as_u64().unwrap() >= 1);
        assert!(r["mops"].as_f64().unwrap() > 0.0);
    }
    let designs: Vec<&str> = results
        .iter()
        .map(|r| r["design"].as_str().unwrap())
        .collect();
    for d in ["locked", "packed", "atomic-u16", "cluster", "memcg"] {
        assert!(designs.contains(&d), "{d} missing");
    }
    let memory = report["memory"].as_array().unwrap();
    assert_eq!(memory.len(), 10);
    assert!(
        memory
            .iter()
            .any(|m| m["design"] == "memcg" && m["layout"] == "sparse")
    );
    assert!(
        memory
            .iter()
            .all(|m| m["bytes_per_slot"].as_f64().unwrap() > 0.0)
    );
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

#[test]
fn bench_suite_smoke_writes_every_report() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(
        memcg()
            .args(["bench", "--smoke", "--out-dir"])
            .arg(dir.path()),
    );
    for name in ["swap-cgroup", "list-lru", "page-counter", "swap"] {
        let json = dir.path().join(format!("{name}.json"));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        check_cpu_shares(&report);
        assert_eq!(
            report["config"]["min_phase_ms"], 0,
            "{name}: smoke stays quick"
        );
        assert!(dir.path().join(format!("{name}.svg")).exists(), "{name}");
    }
}

/// Every timed row of `report` (results, limits, reparenting) carries the
/// CPU share of each repetition, in (0, 1] give or take clock
/// granularity, and their minimum.
fn check_cpu_shares(report: &Value) {
    let mut rows = 0;
    for key in ["results", "limit", "limits", "reparent"] {
        for r in report[key].as_array().into_iter().flatten() {
            let shares = r["cpu_shares"].as_array().expect("cpu_shares");
            assert!(!shares.is_empty(), "{r}");
            let shares: Vec<f64> = shares.iter().map(|s| s.as_f64().unwrap()).collect();
            for &s in &shares {
                assert!(s > 0.0 && s <= 1.05, "{key}: share {s} in {r}");
            }
            let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
            assert_eq!(r["min_cpu_share"].as_f64().unwrap(), min, "{r}");
            assert!(r["rounds"].as_u64().unwrap() >= 1, "{r}");
            assert!(r["shortest_phase_ms"].as_f64().unwrap() > 0.0, "{r}");
            rows += 1;
        }
    }
    assert!(rows > 0, "{}: no timed rows", report["bench"]);
}

#[test]
fn phases_are_repeated_to_the_minimum_and_cpu_shares_reported() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pc.json");
    // 1000 pairs take ~10-80 µs: reaching 20 ms takes hundreds of rounds.
    let stdout = run_ok(
        memcg()
            .args([
                "bench",
                "page-counter",
                "--ops",
                "1000",
                "--reps",
                "3",
                "--threads",
                "1,2",
                "--depths",
                "1",
                "--min-phase-ms",
                "20",
            ])
            .arg("--json")
            .arg(&json),
    );
    assert!(
        stdout.contains(" CPU |") && stdout.contains("min–max"),
        "{stdout}"
    );
    assert!(stdout.contains("minimum 20 ms"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["config"]["min_phase_ms"], 20);
    check_cpu_shares(&report);
    for r in report["results"].as_array().unwrap() {
        assert!(r["rounds"].as_u64().unwrap() >= 10, "{r}");
        // Calibration aims 25% past the minimum; a repetition faster than
        // the calibration run still lasts well over half of it.
        assert!(r["shortest_phase_ms"].as_f64().unwrap() >= 10.0, "{r}");
        assert_eq!(r["cpu_shares"].as_array().unwrap().len(), 3);
        assert!(r["mops_min"].as_f64().unwrap() <= r["mops"].as_f64().unwrap());
        assert!(r["mops"].as_f64().unwrap() <= r["mops_max"].as_f64().unwrap());
    }
}

/// Runs `cmd`, expecting success; returns its stdout.
fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `memcg ARGS`, expecting failure with `message` on stderr.
fn fails_with(args: &[&str], message: &str) {
    let out = memcg().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[test]
fn reports_say_which_build_made_them_and_progress_goes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pc.json");
    let out = memcg()
        .args([
            "bench",
            "page-counter",
            "--quick",
            "--ops",
            "100",
            "--reps",
            "1",
            "--threads",
            "1",
            "--depths",
            "1",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["tool"]["name"], "memcg");
    assert_eq!(report["tool"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(!report["tool"]["commit"].as_str().unwrap().is_empty());
    assert_eq!(report["config"]["reps"], 1);
    // Not a terminal: one line per step.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("page-counter: [1/2]"), "{stderr}");
    assert!(stderr.contains("page-counter: [2/2]"), "{stderr}");
    // One repetition has no spread: the table says so.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.contains(" - |")), "{stdout}");
}

#[test]
fn output_paths_are_checked_before_the_run() {
    let start = std::time::Instant::now();
    fails_with(
        &["bench", "swap", "--json", "/nonexistent/dir/x.json"],
        "cannot write /nonexistent/dir/x.json",
    );
    fails_with(
        &["bench", "list-lru", "--svg", "/proc/x.svg"],
        "cannot write /proc/x.svg",
    );
    assert!(start.elapsed().as_secs() < 30, "failed before running");
    fails_with(
        &["bench", "--smoke", "page-counter"],
        "--smoke and --out-dir belong to the whole suite",
    );
    fails_with(
        &["bench", "--out-dir", "/tmp/x", "swap"],
        "--smoke and --out-dir belong to the whole suite",
    );
}

#[test]
fn the_suite_checks_every_output_before_the_first_benchmark() {
    // The last benchmark's chart cannot be written (a directory is in its
    // place, which even root cannot open for writing).
    let dir = tempfile::tempdir().unwrap();
    let zswap_svg = dir.path().join("zswap.svg");
    std::fs::create_dir(&zswap_svg).unwrap();
    let out = memcg()
        .args(["bench", "--smoke", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(&format!("cannot write {}", zswap_svg.display())),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "a benchmark ran: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing left behind"
    );
}

#[test]
fn bad_flags_are_clear_errors() {
    fails_with(&["bench", "swap-cgroup", "--threads", "0"], "--threads");
    fails_with(
        &["bench", "swap-cgroup", "--designs", "spinlock"],
        "unknown swap_cgroup design",
    );
    fails_with(
        &["bench", "swap-cgroup", "--slots", "1000"],
        "multiple of 512",
    );
    fails_with(
        &["bench", "swap-cgroup", "--workloads", "nope"],
        "invalid value",
    );
}

#[test]
fn list_lru_bench_writes_phases_for_both_designs() {
    let dir = tempfile::tempdir().unwrap();
    let (json, svg) = (dir.path().join("ll.json"), dir.path().join("ll.svg"));
    run_ok(
        memcg()
            .args([
                "bench",
                "list-lru",
                "--quick",
                "--cgroups",
                "1000",
                "--objects",
                "3",
                "--threads",
                "1,2",
                "--reps",
                "1",
                "--nodes",
                "2",
            ])
            .arg("--json")
            .arg(&json)
            .arg("--svg")
            .arg(&svg),
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["bench"], "list-lru");
    let results = report["results"].as_array().unwrap();
    // 2 designs x 2 thread counts x 5 phases.
    assert_eq!(results.len(), 20);
    for phase in ["mkdir+alloc", "add", "walk", "rmdir", "total"] {
        assert!(
            results
                .iter()
                .any(|r| r["phase"] == phase && r["design"] == "split")
        );
        assert!(
            results
                .iter()
                .any(|r| r["phase"] == phase && r["design"] == "legacy")
        );
    }
    // The rmdir phase reports the churn that ran alongside, and says in
    // how many runs none did.
    let rmdir: Vec<_> = results.iter().filter(|r| r["phase"] == "rmdir").collect();
    for r in &rmdir {
        assert!(r["mops"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(r["runs_without_churn"].as_u64().unwrap() <= 1, "{r}");
    }
    // The churn really runs while the cgroups go: in some run (over two
    // designs and two thread counts) it did work during the removal.
    assert!(
        rmdir
            .iter()
            .any(|r| r["mops"].as_f64().unwrap() > 0.0 && r["runs_without_churn"] == 0),
        "{rmdir:?}"
    );
    assert_eq!(report["reparent"].as_array().unwrap().len(), 4);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    fails_with(
        &["bench", "list-lru", "--designs", "fast"],
        "unknown list_lru design",
    );
    fails_with(&["bench", "list-lru", "--cgroups", "70000"], "65535");
}

#[test]
fn swap_bench_times_every_experiment_per_design_against_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let (json, svg) = (dir.path().join("sw.json"), dir.path().join("sw.svg"));
    let stdout = run_ok(
        memcg()
            .args([
                "bench",
                "swap",
                "--quick",
                "--size",
                "1M",
                "--threads",
                "1,2",
                "--designs",
                "locked,memcg",
                "--reps",
                "2",
                "--seed",
                "9",
            ])
            .arg("--swap-dir")
            .arg(dir.path())
            .arg("--json")
            .arg(&json)
            .arg("--svg")
            .arg(&svg),
    );
    assert!(
        stdout.contains("memcpy") && stdout.contains("vs locked") && stdout.contains("% read"),
        "{stdout}"
    );

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["bench"], "swap");
    assert_eq!(report["config"]["size_bytes"], 1 << 20);
    // memset, memcpy and read at 2 thread counts, measured like the
    // experiments.
    let limits = report["limits"].as_array().unwrap();
    assert_eq!(limits.len(), 6);
    for threads in [1, 2] {
        let read = limits
            .iter()
            .find(|l| l["limit"] == "read" && l["threads"] == threads)
            .expect("a read limit per thread count");
        assert!(read["gib_per_s"].as_f64().unwrap() > 0.0, "{read}");
        assert_eq!(read["samples_us"].as_array().unwrap().len(), 2);
    }
    let results = report["results"].as_array().unwrap();
    // 6 experiments x 2 designs x 2 thread counts.
    assert_eq!(results.len(), 24);
    for r in results {
        assert_eq!(r["samples_us"].as_array().unwrap().len(), 2);
        assert!(r["mean_us"].as_f64().unwrap() > 0.0);
        assert!(r["median_us"].as_f64().unwrap() > 0.0);
        assert!(r["min_us"].as_f64().unwrap() <= r["max_us"].as_f64().unwrap());
        assert!(r["gib_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["fraction_of_limit"].as_f64().unwrap() > 0.0);
        assert_eq!(r["rounds"], 1, "--quick runs one round");
        // Zero swap-out is bounded by reading the folio, zero swap-in by
        // filling it, random contents by copying.
        let experiment = r["experiment"].as_str().unwrap();
        let expected_limit = match (
            experiment.contains("zero"),
            experiment.starts_with("swapout"),
        ) {
            (true, true) => "read",
            (true, false) => "memset",
            (false, _) => "memcpy",
        };
        assert_eq!(r["limit"], expected_limit, "{experiment}");
    }
    check_cpu_shares(&report);
    assert!(
        results
            .iter()
            .any(|r| r["experiment"] == "swapin-4k-random-file" && r["design"] == "memcg")
    );
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));

    fails_with(
        &["bench", "swap", "--experiments", "swapout-2m-zero-ram"],
        "unknown experiment",
    );
    fails_with(
        &["bench", "swap", "--size", "1M", "--threads", "3"],
        "equal shares",
    );
    fails_with(
        &["bench", "swap", "--designs", "spinlock"],
        "unknown swap_cgroup design",
    );
}

#[test]
fn bench_fs_measures_every_operation_three_ways() {
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/fuse").exists() {
        eprintln!(
            "bench_fs_measures_every_operation_three_ways: skipped: needs root and /dev/fuse"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fs.json");
    run_ok(
        memcg()
            .args(["bench", "fs", "--quick", "--reps", "1", "--threads", "1"])
            .args(["--ops", "50", "--json"])
            .arg(&json),
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    check_cpu_shares(&report);
    let rows = report["results"].as_array().unwrap();
    assert_eq!(rows.len(), 8 * 3, "8 operations, 3 ways");
    for way in ["mount", "tmpfs", "in-process"] {
        assert_eq!(rows.iter().filter(|r| r["way"] == way).count(), 8, "{way}");
    }
    assert!(rows.iter().all(|r| r["kops"].as_f64().unwrap() > 0.0));
}
