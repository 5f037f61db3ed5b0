//! A real C project built inside the simulator: Debian's zlib source
//! package (fetched once through a private apt configuration,
//! `tests/realbuild/fetch.sh`) is configured and built with `make -j2` in a
//! `--fs` RAM filesystem under `memcg run` (every process's anonymous
//! memory charged too: `--anon on`, the default). Its outputs must be
//! byte for byte those of the same build on the host.
//!
//! - Page cache: `memory.max` 32M (the seed's 16M per job) and 256M of
//!   swap. The build's anonymous memory peaks near 30M (its whole charge
//!   at 34M), so the limit is hit and reclaim takes page cache; without
//!   swap that limit OOM-kills cc1 (the test's old 3M limit was set
//!   before anonymous memory was charged: gcc cannot run in it).
//! - Swap: `memory.max` 16M (8M per job) and 256M of swap, swap_cgroup
//!   `memcg`: anonymous memory is swapped out and back in throughout.
//!
//! Needs root, `/dev/fuse` and the network the first time (CI has all
//! three); without root or `/dev/fuse` it says so and passes without
//! running.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realbuild")
}

fn cache() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/memcg-realbuild")
}

fn sh(script: &str, dir: &Path) {
    let status = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

/// The host's build of `tarball` in `dir`, the reference.
fn host_build(tarball: &Path, dir: &Path) -> PathBuf {
    sh(&format!("tar xjf {}", tarball.display()), dir);
    let tree = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    sh("./configure > /dev/null && make -j2 > /dev/null", &tree);
    tree
}

fn value(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
}

/// The zlib build under `memcg run` with `flags`, in a cgroup limited to
/// `max`: build.sh's report (its stdout, then stderr), after checking
/// that make succeeded and every output is the host's. None when the
/// machine cannot run it.
fn build_under_memcg(flags: &[&str], max: &str) -> Option<(String, String)> {
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        eprintln!("real build: skipped: needs root and /dev/fuse");
        return None;
    }
    let fetched = Command::new(tests_dir().join("fetch.sh"))
        .arg(cache())
        .output()
        .unwrap();
    assert!(
        fetched.status.success(),
        "fetching zlib's source: {}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let tarball = PathBuf::from(String::from_utf8(fetched.stdout).unwrap().trim());
    let host = tempfile::tempdir().unwrap();
    let reference = host_build(&tarball, host.path());
    let fs_dir = tempfile::tempdir().unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .env("LC_ALL", "C")
        .arg("run")
        .args(["--mem", "512M"])
        .args(flags)
        .arg("--fs")
        .arg(format!("{}=ram:64M", fs_dir.path().display()))
        .arg("--")
        .arg(tests_dir().join("build.sh"))
        .arg(&tarball)
        .arg(fs_dir.path())
        .arg(max)
        .arg(&reference)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    assert_eq!(value(&stdout, "make "), 0, "{report}");
    assert!(stdout.contains("compared"), "{report}");
    assert!(
        !stdout.contains("differs"),
        "outputs differ from the host's:\n{report}"
    );
    Some((stdout.into_owned(), report))
}

#[test]
fn zlib_builds_with_make_j2_under_memory_max_reclaiming_page_cache() {
    let Some((stdout, report)) = build_under_memcg(&["--swap", "256M"], "32M") else {
        return;
    };
    assert!(value(&stdout, "file_after ") > 0, "{report}");
    assert!(
        value(&stdout, "max_events ") > 0,
        "the limit was hit: {report}"
    );
    assert!(value(&stdout, "pgscan_after ") > 0, "reclaim ran: {report}");
}

#[test]
fn zlib_builds_with_make_j2_while_its_anonymous_memory_swaps() {
    let flags = ["--swap", "256M", "--swap-cgroup", "memcg"];
    let Some((stdout, report)) = build_under_memcg(&flags, "16M") else {
        return;
    };
    assert!(
        value(&stdout, "pswpout_after ") > 0,
        "swapped out: {report}"
    );
    assert!(value(&stdout, "pswpin_after ") > 0, "swapped in: {report}");
    assert!(
        value(&stdout, "max_events ") > 0,
        "the limit was hit: {report}"
    );
    assert_eq!(value(&stdout, "oom_kill "), 0, "{report}");
}
