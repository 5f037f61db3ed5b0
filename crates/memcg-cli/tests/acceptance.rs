//! Issue 24's acceptance: cgroup-aware programs, unmodified, under
//! `memcg run`, which finds them the simulated cgroup2 (its shim answers
//! `/proc/self/mounts`, `statfs` of `/sys/fs/cgroup` and
//! `/proc/PID/cgroup` as a kernel would):
//!
//! - `systemd-cgls` and `systemd-cgtop` show the simulated tree;
//! - libcgroup's `cgcreate`, `cgset`, `cgget` and `cgexec` work on it, and
//!   what a process started by `cgexec` writes to a `--fs` is charged to
//!   its cgroup;
//! - the kernel's `test_core`, and (issue 25) its `test_memcontrol` and
//!   `test_zswap`, as the real-kernel test bed built them, give the booted
//!   kernels' results but for the differences
//!   `tests/differential/selftests.sim-known` explains
//!   (`memcg testbed selftests --sim`, both kernels: 4 min 40 s in this
//!   debug build on the 2-core machine, 3 min 32 s in a release build;
//!   3 min of it the 90 s each kernel's `test_memcontrol` hangs in
//!   `test_memcg_high_sync` before it is stopped).
//!
//! They need root and `/dev/fuse`, the programs (`.ci/tools` installs
//! `cgroup-tools` and `systemd`) and, for the selftests, a prepared test bed
//! (`memcg testbed prepare`); where one is missing a test says so on
//! stderr and passes without running. They run one at a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn memcg() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("memcg"));
    cmd.env("LC_ALL", "C");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("acceptance-tests");
    std::fs::create_dir_all(&tmp).unwrap();
    cmd.env("TMPDIR", tmp);
    cmd
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Whether `test` can run here: root, `/dev/fuse` and `programs`; says
/// why not otherwise.
fn usable(test: &str, programs: &[&str]) -> bool {
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        eprintln!("{test}: skipped: needs root and /dev/fuse");
        return false;
    }
    if let Some(missing) = programs.iter().find(|p| !on_path(p)) {
        eprintln!("{test}: skipped: no {missing} (.ci/tools installs it)");
        return false;
    }
    true
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `memcg run --mem 256M --fs /mnt/fs=ram:64M -- bash -c SCRIPT`, one at
/// a time; fails unless it succeeds.
fn run_script(script: &str) -> String {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out: Output = memcg()
        .args(["run", "--mem", "256M", "--fs", "/mnt/fs=ram:64M", "--"])
        .args(["bash", "-c", script])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    stdout
}

/// The lines of `text` between the line `@begin NAME` and `@end`.
fn section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != format!("@begin {name}"))
        .skip(1)
        .take_while(|l| *l != "@end")
        .collect()
}

#[test]
fn systemd_cgls_and_cgtop_show_the_simulated_tree() {
    let test = "systemd_cgls_and_cgtop_show_the_simulated_tree";
    if !usable(test, &["systemd-cgls", "systemd-cgtop"]) {
        return;
    }
    let out = run_script(
        r#"set -e
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p /sys/fs/cgroup/sim-a/sim-b /sys/fs/cgroup/sim-c
        echo +memory > /sys/fs/cgroup/sim-a/cgroup.subtree_control
        echo $$ > /sys/fs/cgroup/sim-a/sim-b/cgroup.procs
        head -c 4194304 /dev/zero > /mnt/fs/file
        sleep 1000 &
        echo "@begin cgls-dir"; systemd-cgls --no-pager --all /sys/fs/cgroup; echo "@end"
        echo "@begin cgls"; systemd-cgls --no-pager --all; echo "@end"
        echo "@begin cgtop"; systemd-cgtop -n 1 -b --depth=3; echo "@end"
        kill %1"#,
    );
    // Each line without its tree drawing (ASCII under LC_ALL=C).
    for name in ["cgls-dir", "cgls"] {
        let entries: Vec<&str> = section(&out, name)
            .into_iter()
            .map(|l| l.trim_start_matches([' ', '|', '`', '-', '│', '├', '└', '─']))
            .collect();
        for cgroup in ["sim-a", "sim-b", "sim-c"] {
            assert!(entries.contains(&cgroup), "{name}: no {cgroup} in\n{out}");
        }
        assert!(
            entries.iter().any(|e| e.ends_with(" sleep 1000")),
            "{name}: no sleep 1000 in\n{out}"
        );
    }
    assert_eq!(
        section(&out, "cgls").first().copied(),
        Some("Control group /:"),
        "{out}"
    );
    // cgtop: a row per populated cgroup with its task count, and the
    // memory of sim-b (the 4M file's page cache) in its subtree's rows.
    let cgtop = section(&out, "cgtop");
    let row = |path: &str| -> Vec<&str> {
        cgtop
            .iter()
            .find(|l| l.split_whitespace().next() == Some(path))
            .unwrap_or_else(|| panic!("cgtop has no {path} row:\n{out}"))
            .split_whitespace()
            .collect()
    };
    for path in ["/", "/sim-a", "/sim-a/sim-b"] {
        row(path);
    }
    let b = row("/sim-a/sim-b");
    assert_eq!(b[1], "3", "bash, sleep and cgtop in sim-b: {b:?}");
    assert!(b[3].ends_with('M'), "sim-b's memory, over 4M: {b:?}");
}

#[test]
fn libcgroup_creates_sets_gets_and_execs_in_the_simulated_tree() {
    let test = "libcgroup_creates_sets_gets_and_execs_in_the_simulated_tree";
    if !usable(test, &["cgcreate", "cgset", "cgget", "cgexec"]) {
        return;
    }
    let out = run_script(
        r#"set -e
        cgcreate -g memory:/t
        cgset -r memory.max=8M t
        echo "@begin cgget"; cgget -r memory.max t; echo "@end"
        echo "@begin max"; cat /sys/fs/cgroup/t/memory.max; echo "@end"
        echo "@begin before"; cat /sys/fs/cgroup/t/memory.current; echo "@end"
        echo "@begin cgexec"
        cgexec -g memory:t sh -c 'cat /proc/self/cgroup; head -c 4194304 /dev/zero > /mnt/fs/f'
        echo "@end"
        echo "@begin after"; cat /sys/fs/cgroup/t/memory.current; echo "@end""#,
    );
    assert_eq!(
        section(&out, "cgget"),
        ["t:", "memory.max: 8388608", ""],
        "{out}"
    );
    assert_eq!(section(&out, "max"), ["8388608"], "{out}");
    assert_eq!(section(&out, "cgexec"), ["0::/t"], "{out}");
    let number = |name: &str| -> u64 { section(&out, name)[0].parse().unwrap() };
    // The 4M the process cgexec started wrote is page cache of t.
    assert!(
        number("after") >= number("before") + (4 << 20),
        "memory.current of t did not move by the 4M written:\n{out}"
    );
}

#[test]
fn selftests_under_memcg_run_give_the_booted_kernels_results_or_a_known_reason() {
    let test = "selftests_under_memcg_run";
    if !usable(test, &[]) {
        return;
    }
    let cache = std::env::var_os("MEMCG_TESTBED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/memcg-testbed")
        });
    let programs = ["test_core", "test_memcontrol", "test_zswap"];
    if !["6.12", "7.3"].iter().all(|k| {
        programs.iter().all(|p| {
            cache
                .join("kernels")
                .join(k)
                .join("selftests")
                .join(p)
                .exists()
        })
    }) {
        eprintln!(
            "{test}: skipped: no prepared test bed in {} (memcg testbed prepare)",
            cache.display()
        );
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = memcg()
        .args(["testbed", "selftests", "--sim", "--expected"])
        .arg(repo().join("tests/differential/selftests.expected"))
        .arg("--cache")
        .arg(&cache)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for kernel in ["6.12", "7.3"] {
        for program in programs {
            assert!(
                stdout.contains(&format!("{program} on kernel {kernel} ")),
                "{stdout}"
            );
        }
    }
}
