//! What the tests that run `memcg run` (or mount the FUSE cgroupfs) share:
//! whether this host can, their scratch directory, a command's stdout.
//! Each test binary uses some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

/// Whether FUSE mounts can be made here (root, /dev/fuse) and, with
/// `userfaultfd`, whether real processes' anonymous memory can be served;
/// says why not otherwise.
pub fn usable(test: &str, userfaultfd: bool) -> bool {
    // SAFETY: `geteuid` has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let uffd = !userfaultfd || Path::new("/dev/userfaultfd").exists();
    let ok = root && Path::new("/dev/fuse").exists() && uffd;
    if !ok {
        let needs = if userfaultfd {
            "root, /dev/fuse and userfaultfd"
        } else {
            "root and /dev/fuse"
        };
        eprintln!("{test}: skipped: needs {needs}");
    }
    ok
}

/// `NAME` under the target's scratch directory, made if need be.
pub fn tests_tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The command's stdout; it must have succeeded (else its status, stdout
/// and stderr are the failure's message).
pub fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
