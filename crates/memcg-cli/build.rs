//! Records the git commit the binary is built from (`MEMCG_GIT_COMMIT`),
//! so every benchmark report can say which code produced it, and builds
//! `memcg run`'s shim (`crates/memcg-shim`, a `no_std` cdylib compiled
//! with this build's `rustc`) into `OUT_DIR/libmemcg_shim.so`, which the
//! binary carries (`include_bytes!`).

use std::path::PathBuf;
use std::process::Command;

/// Compiles the shim with the `rustc` cargo uses, for the target being
/// built.
fn build_shim() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let source = PathBuf::from("../memcg-shim/src/lib.rs");
    let status = Command::new(rustc)
        .args([
            "--edition=2024",
            "--crate-type=cdylib",
            "--crate-name=memcg_shim",
            "-Cpanic=abort",
            "-Copt-level=2",
            "-Cdebuginfo=0",
            "-Cstrip=symbols",
            "--cap-lints=warn",
            "--target",
            &target,
            "-o",
        ])
        .arg(out.join("libmemcg_shim.so"))
        .arg(&source)
        .status()
        .expect("running rustc for the shim");
    assert!(
        status.success(),
        "building the shim ({}) failed",
        source.display()
    );
    println!("cargo:rerun-if-changed=../memcg-shim/src");
}

fn main() {
    build_shim();
    let commit = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MEMCG_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves or the index changes (a commit or a checkout).
    for path in ["../../.git/HEAD", "../../.git/index"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
