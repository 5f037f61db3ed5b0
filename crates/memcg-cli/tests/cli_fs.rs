//! The filesystem verbs of `memcg sh` and `memcg workload readers`, end to
//! end at a small scale.

use assert_cmd::Command;
use serde_json::Value;

fn memcg() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
}

#[test]
fn sh_files_charge_the_cgroup_and_drop_caches_frees_them() {
    let script = "mkdir /a\n\
                  echo +memory > /cgroup.subtree_control\n\
                  mount ram 64M /mnt\n\
                  write /a /mnt/f 38893 --fill seq\n\
                  sync\n\
                  read /a /mnt/f\n\
                  verify /mnt/f\n\
                  ls /mnt\n\
                  cat /a/memory.current\n\
                  echo 3 > /proc/sys/vm/drop_caches\n\
                  echo 3 > /proc/sys/vm/drop_caches\n\
                  cat /a/memory.current\n\
                  cat /proc/sys/vm/drop_caches\n\
                  echo 5 > /proc/sys/vm/drop_caches\n\
                  verify /mnt/f\n\
                  rm /mnt/nope\n\
                  umount /mnt\n";
    let out = memcg()
        .args(["sh", "--mem", "256M", "--charge-stock", "off"])
        .write_stdin(script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stdout, "/mnt/f: 38893 bytes\nf\t38893\n45056\n0\n",
        "10 file pages and one of slab, then nothing; stderr: {stderr}"
    );
    assert!(
        stderr.contains("drop_caches: Permission denied"),
        "{stderr}"
    );
    assert!(stderr.contains("Invalid argument"), "{stderr}");
    assert!(
        stderr.contains("cannot remove '/mnt/nope': No such file or directory"),
        "{stderr}"
    );
}

#[test]
fn readers_workload_reports_every_design() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = memcg()
        .args([
            "workload",
            "readers",
            "--readers",
            "40",
            "--runs",
            "2",
            "--memcg-max",
            "64M",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        let runs = r["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        let pin = !r["design"]["reparent_lru_folios"].as_bool().unwrap();
        // Pinned page cache keeps every removed reader cgroup dying.
        assert_eq!(runs[0]["dying_at_end"], if pin { 40 } else { 0 });
        assert_eq!(runs[1]["dying_after_drop"], 0);
    }
}

#[test]
fn readers_workload_runs_on_the_machine_size_given() {
    // 200 files of 39K fill more than a 4M machine: the run stops with
    // an error naming the machine, never a panic or an abort.
    let out = memcg()
        .args(["workload", "readers", "--readers", "200", "--runs", "1"])
        .args(["--mem", "4M"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("Error:"), "{stderr}");
    // The same run fits a 64M machine.
    let out = memcg()
        .args(["workload", "readers", "--readers", "20", "--runs", "1"])
        .args(["--mem", "64M", "--memcg-max", "16M"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kbuild_workload_replays_in_lockstep_and_refuses_bad_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let json = |name: &str| dir.path().join(name);
    let run = |out: &std::path::Path| {
        let result = memcg()
            .args(["workload", "kbuild", "--jobs", "2", "--tasks", "3"])
            .args(["--memcg-max", "3M", "--heap-max", "6M", "--lockstep"])
            .args(["--swap-cgroup", "locked,memcg"])
            .arg("--json")
            .arg(out)
            .output()
            .unwrap();
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
        report["results"].as_array().unwrap().clone()
    };
    let (a, b) = (run(&json("a.json")), run(&json("b.json")));
    assert_eq!(a.len(), 2);
    for key in [
        "tasks",
        "pswpin",
        "pswpout",
        "pgmajfault",
        "max_events",
        "oom_kills",
    ] {
        assert_eq!(a[0][key], b[0][key], "{key} replays");
        assert_eq!(a[0][key], a[1][key], "{key}: the design changes no count");
    }
    assert!(a[0]["pswpout"].as_u64().unwrap() > 0, "{a:?}");
    for (flags, message) in [
        (vec!["--jobs", "0"], "--jobs must be at least 1"),
        (vec!["--folio", "8K"], "--folio must be 4K or 64K"),
        (vec!["--jobs", "100000"], "half of this host"),
    ] {
        let out = memcg()
            .args(["workload", "kbuild"])
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn kbuild_and_usemem_run_on_a_machine_of_mem() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("w.json");
    for workload in [
        &[
            "kbuild",
            "--jobs",
            "1",
            "--tasks",
            "2",
            "--memcg-max",
            "3M",
            "--heap-max",
            "6M",
        ][..],
        &["usemem", "--tasks", "1", "--size", "4M"][..],
    ] {
        let out = memcg()
            .arg("workload")
            .args(workload)
            .args(["--mem", "200M", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{workload:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("on a 200 MiB machine"), "{stdout}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["mem_bytes"], 200 << 20, "{workload:?}");
        let out = memcg()
            .arg("workload")
            .args(workload)
            .args(["--mem", "16E"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("a machine needs at least 1M"),
            "{stderr}"
        );
    }
}

#[test]
fn usemem_workload_swaps_per_design_and_refuses_bad_shapes() {
    let out = memcg()
        .args(["workload", "usemem", "--tasks", "2", "--size", "4M"])
        .args(["--swap-cgroup", "locked,memcg"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("| locked") && stdout.contains("| memcg"),
        "{stdout}"
    );
    for (flags, message) in [
        (vec!["--tasks", "0"], "--tasks must be at least 1"),
        (vec!["--size", "4097"], "multiple of the folio size"),
        (vec!["--size", "1T"], "half of this host"),
    ] {
        let out = memcg()
            .args(["workload", "usemem"])
            .args(&flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn reproduce_smoke_writes_every_table_beside_the_seeds() {
    let dir = tempfile::tempdir().unwrap();
    // An empty test bed cache: no kernel boots here, and the report says
    // plainly that the real-kernel column is absent and why.
    let no_testbed = tempfile::tempdir().unwrap();
    let out = memcg()
        .args(["reproduce", "--smoke", "--out"])
        .arg(dir.path())
        .env("MEMCG_TESTBED_CACHE", no_testbed.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    for heading in [
        "## Kernel build in a memcg (seeds 000/003)",
        "## Sequential swap of zero folios (seed 000)",
        "readers leaving dying cgroups (seed 002)",
        "### The same shape with real processes: `make` of zlib",
    ] {
        assert!(md.contains(heading), "{md}");
    }
    // The real build: one design's row under --smoke, or why it was
    // skipped (no root, /dev/fuse or zlib's source).
    let real: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("real_kbuild.json")).unwrap(),
    )
    .unwrap();
    let skipped = real["note"]
        .as_str()
        .is_some_and(|n| n.starts_with("skipped: needs root, /dev/fuse, and the zlib source"));
    assert!(
        (skipped && md.contains("Real build skipped: needs root"))
            || (real["rows"][0]["swap_cgroup"] == "memcg" && real["rows"][1].is_null()),
        "{real}"
    );
    // The seed's published ratios sit beside ours, and their figures as
    // published.
    assert!(md.contains("0.892") && md.contains("0.9925"), "{md}");
    for figure in [
        "| 10782.29 s | 9617.23 s |",
        "| 8176.94 s | 7358.98 s |",
        "| 5461409.12 us | 5420447.26 us |",
        "| 19736958.916667 us | 19662182.629630 us |",
        "run 1 0m3.498s and runs 2–10 1m31.931s",
    ] {
        assert!(md.contains(figure), "{figure}: {md}");
    }
    // Beside each table, a verdict computed from this run, with its
    // criterion: both kernel builds, both swap experiments, the readers'
    // later-run slowdown (with a run-1 column and the later/first ratio)
    // for the seed's two designs, and the patch.
    let verdicts: Vec<&str> = md
        .lines()
        .filter(|l| l.contains("**Reproduced**") || l.contains("**Not reproduced**"))
        .collect();
    for section in [
        "4K folios: ",
        "64K folios: ",
        "swapout-64k-zero-ram: ",
        "swapin-4k-zero-ram: ",
        "The later-run slowdown, list_lru legacy, folios pin (v6.14): ",
        "The later-run slowdown, list_lru split, folios pin (v6.14): ",
        "The patch (list_lru `legacy` → `split`",
    ] {
        let line = verdicts.iter().find(|l| l.starts_with(section));
        assert!(
            line.is_some_and(|l| l.contains(". Criterion: ")),
            "{section}: {verdicts:#?}"
        );
    }
    assert!(
        md.contains("| run 1 wall s | later runs wall s (median) | later / first |"),
        "{md}"
    );
    // The verdict column says the same as the readers' verdicts.
    assert!(
        md.contains("| reproduced |") || md.contains("| not reproduced |"),
        "{md}"
    );
    for file in [
        "kbuild.json",
        "kbuild.svg",
        "projection.svg",
        "swap.json",
        "swap.svg",
        "readers.json",
        "readers.svg",
        "kernel.json",
        "real_kbuild.json",
        "real_kbuild.txt",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    assert!(
        md.contains("## Beside the real kernel")
            && md.contains("**No real-kernel column**: no test bed: run `memcg testbed prepare`."),
        "{md}"
    );
    let column: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("kernel.json")).unwrap())
            .unwrap();
    assert_eq!(
        column["note"], "no test bed: run `memcg testbed prepare`",
        "{column}"
    );
    assert_eq!(column["kernels"], serde_json::json!([]), "{column}");
    assert!(!dir.path().join("kernel.svg").exists());
}

#[test]
fn reproduce_and_readers_check_their_outputs_before_any_work() {
    // Paths even root cannot write: a directory where a file should be,
    // and an existing directory of /proc.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("report.md")).unwrap();
    let report_md = dir.path().join("report.md").display().to_string();
    let other = tempfile::tempdir().unwrap();
    let readers_svg = other.path().join("readers.svg");
    std::fs::create_dir(&readers_svg).unwrap();
    let cases: [(Vec<String>, String); 3] = [
        (
            vec![
                "reproduce".into(),
                "--smoke".into(),
                "--out".into(),
                dir.path().display().to_string(),
            ],
            format!("cannot write {report_md}"),
        ),
        (
            vec![
                "reproduce".into(),
                "--smoke".into(),
                "--out".into(),
                "/proc".into(),
            ],
            "cannot write /proc/kbuild.json".into(),
        ),
        (
            [
                "workload",
                "readers",
                "--readers",
                "10",
                "--runs",
                "1",
                "--svg",
            ]
            .map(String::from)
            .into_iter()
            .chain([readers_svg.display().to_string()])
            .collect(),
            format!("cannot write {}", readers_svg.display()),
        ),
    ];
    for (args, message) in cases {
        let out = memcg().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(&message),
            "{args:?}: {stderr}"
        );
        // Nothing ran: no progress line, no table.
        assert!(!stderr.contains(": [1/"), "{args:?} ran first: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    for d in [&dir, &other] {
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "nothing left behind"
        );
    }
}
