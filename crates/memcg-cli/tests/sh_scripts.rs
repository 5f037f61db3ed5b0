//! Runs every `tests/scripts/*.sh` through `memcg sh` (with the flags in
//! `NAME.args`, if any) and compares stdout with `NAME.out`, stderr with
//! `NAME.err` (empty if absent) and the exit status with `NAME.status` (0
//! if absent). A `NAME.args` with no `NAME.sh` whose first word is
//! `@BASE.sh` runs BASE.sh with the rest of its flags, checked against
//! NAME's expected files: one script, run under several kernel profiles.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn expected(script: &Path, ext: &str) -> Option<String> {
    std::fs::read_to_string(script.with_extension(ext)).ok()
}

/// Every case: (the name its expected files carry, the script, its flags).
fn cases(dir: &Path) -> Vec<(PathBuf, PathBuf, String)> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut cases = Vec::new();
    for path in paths {
        match path.extension().and_then(|e| e.to_str()) {
            Some("sh") => {
                let args = expected(&path, "args").unwrap_or_default();
                cases.push((path.clone(), path, args));
            }
            Some("args") if !path.with_extension("sh").exists() => {
                let args = std::fs::read_to_string(&path).unwrap();
                let (base, rest) = args.trim_start().split_once(char::is_whitespace).unwrap();
                let base = base
                    .strip_prefix('@')
                    .unwrap_or_else(|| panic!("{}: no script and no @BASE.sh", path.display()));
                cases.push((path.with_extension("sh"), dir.join(base), rest.to_string()));
            }
            _ => {}
        }
    }
    cases
}

#[test]
fn every_script_gives_its_expected_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let cases = cases(&dir);
    assert!(cases.len() >= 6, "scripts missing from {}", dir.display());
    for (case, script, args) in cases {
        let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
            .arg("sh")
            .args(args.split_whitespace())
            .arg(&script)
            .output()
            .unwrap();
        let name = case.file_name().unwrap().to_string_lossy();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stdout,
            expected(&case, "out").unwrap_or_default(),
            "{name}: stdout"
        );
        assert_eq!(
            stderr,
            expected(&case, "err").unwrap_or_default(),
            "{name}: stderr"
        );
        let status: i32 = expected(&case, "status").map_or(0, |s| s.trim().parse().unwrap());
        assert_eq!(out.status.code(), Some(status), "{name}: exit status");
    }
}

#[test]
fn stdin_is_read_when_no_file_is_given() {
    let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .arg("sh")
        .write_stdin("mkdir /a\nls /\nexit 4\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l == "a"), "{stdout}");
    assert!(
        out.stderr.is_empty(),
        "no prompt when stdin is not a terminal"
    );
}
