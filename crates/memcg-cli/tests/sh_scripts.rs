//! Runs every `tests/scripts/*.sh` through `memcg sh` (with the flags in
//! `NAME.args`, if any) and compares stdout with `NAME.out`, stderr with
//! `NAME.err` (empty if absent) and the exit status with `NAME.status` (0
//! if absent).

use std::path::Path;

use assert_cmd::Command;

fn expected(script: &Path, ext: &str) -> Option<String> {
    std::fs::read_to_string(script.with_extension(ext)).ok()
}

#[test]
fn every_script_gives_its_expected_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 6, "scripts missing from {}", dir.display());
    for script in scripts {
        let args = expected(&script, "args").unwrap_or_default();
        let out = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
            .arg("sh")
            .args(args.split_whitespace())
            .arg(&script)
            .output()
            .unwrap();
        let name = script.file_name().unwrap().to_string_lossy();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stdout,
            expected(&script, "out").unwrap_or_default(),
            "{name}: stdout"
        );
        assert_eq!(
            stderr,
            expected(&script, "err").unwrap_or_default(),
            "{name}: stderr"
        );
        let status: i32 = expected(&script, "status").map_or(0, |s| s.trim().parse().unwrap());
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
