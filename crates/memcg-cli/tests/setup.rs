//! What a fresh machine needs: the README's Quick start says it, `.ci/tools`
//! (run by `.ci/run`) installs it, and the time the README quotes for the
//! main command is the one `memcg reproduce --help` quotes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README's `## Quick start` section.
fn quick_start() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme.find("## Quick start\n").expect("a Quick start");
    let rest = &readme[start + 3..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_owned()
}

#[test]
fn the_quick_start_names_what_a_fresh_machine_needs() {
    let text = quick_start();
    // Exactly two set-up commands.
    let block = text.split("```sh\n").nth(1).expect("a command block");
    let commands: Vec<&str> = block
        .split("```")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        commands,
        [
            "cargo run --release -- reproduce --quick",
            "cargo test --workspace"
        ]
    );
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for need in [
        "C compiler",
        "zstd-sys",
        "crates.io",
        "root",
        "/dev/fuse",
        "python3",
        "skipped",
        ".ci/run",
    ] {
        assert!(flat.contains(need), "{need}: {flat}");
    }
}

/// The whole seconds after the first `about ` that is followed by a
/// number and ` s`.
fn about_secs(text: &str) -> Option<u64> {
    text.match_indices("about ").find_map(|(i, _)| {
        let rest = &text[i + "about ".len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        rest[digits.len()..]
            .starts_with(" s")
            .then(|| digits.parse().ok())
            .flatten()
    })
}

#[test]
fn the_readme_and_help_quote_one_time_for_the_quick_reproduction() {
    let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .args(["reproduce", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let quick = help
        .lines()
        .skip_while(|l| !l.contains("--quick"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let help_secs = about_secs(&quick).unwrap_or_else(|| panic!("no time in: {quick}"));
    let text = quick_start();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme_secs = about_secs(&flat).unwrap_or_else(|| panic!("no time in: {flat}"));
    assert_eq!(readme_secs, help_secs, "README: {flat}\n--help: {quick}");
    assert!(
        flat.contains("build excluded") && quick.contains("build excluded"),
        "both say what the time leaves out: {quick}"
    );
}

/// A directory of stand-ins for `.ci/tools` to find on its `PATH`: a
/// recording `apt-get`, `sudo` that runs its command, the real `bash` and
/// `id`, and, where asked, a `cc`, a `python3`, the test bed's tools and the
/// cgroup programs of the acceptance tests.
fn fake_path(with_tools: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("apt.log");
    let script = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    };
    script("apt-get", &format!("echo \"$*\" >> {}", log.display()));
    script("sudo", "exec \"$@\"");
    if with_tools {
        for tool in [
            "cc",
            "python3",
            "qemu-system-x86_64",
            "busybox",
            "mkfs.xfs",
            "mke2fs",
            "cgcreate",
            "systemd-cgls",
        ] {
            script(tool, "exit 0");
        }
    }
    for tool in ["bash", "id"] {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(real, dir.path().join(tool)).unwrap();
    }
    (dir, log)
}

fn run_tools(path: &Path) -> std::process::Output {
    Command::new("/bin/bash")
        .arg(repo().join(".ci/tools"))
        .env_clear()
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn ci_installs_a_c_compiler_python3_the_test_beds_tools_and_cgroup_programs_where_missing() {
    let (dir, log) = fake_path(false);
    let out = run_tools(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let apt = std::fs::read_to_string(&log).unwrap();
    assert!(
        apt.lines().any(|l| l == "update -qq")
            && apt.lines().any(|l| l
                == "install -y -qq --no-install-recommends gcc libc6-dev python3 \
                                qemu-system-x86 busybox-static xfsprogs e2fsprogs \
                                cgroup-tools systemd"),
        "{apt}"
    );
    // Where both are present, nothing is installed.
    let (dir, log) = fake_path(true);
    let out = run_tools(dir.path());
    assert!(out.status.success());
    assert!(!log.exists(), "apt-get ran");
    // And .ci/run runs it before building anything.
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let tools = ci.find("\n.ci/tools\n").expect(".ci/run runs .ci/tools");
    assert!(tools < ci.find("cargo ").unwrap(), "before the first cargo");
}

/// `--help` and the docs of `memcg sh` (docs/sh.md, "The simulated
/// machine", moved there from the README) say exactly what `--mem` bounds
/// (qa C1): the simulated kernel's charges and own pages, and the host
/// bookkeeping per cgroup beyond them.
#[test]
fn the_help_and_sh_docs_say_what_mem_bounds() {
    let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .args(["sh", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let readme = std::fs::read_to_string(repo().join("docs/sh.md")).unwrap();
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (help, readme) = (flat(&help), flat(&readme));
    for needle in [
        "page tables",
        "own structures",
        "swap tables",
        "bookkeeping",
        "per cgroup without",
    ] {
        assert!(help.contains(needle), "sh --help lacks {needle:?}: {help}");
        assert!(readme.contains(needle), "docs/sh.md lacks {needle:?}");
    }
}
