//! The `--fs` filesystems against the host kernel's tmpfs: random
//! operation sequences (`tests/fuse/fs_fuzz.py`, run inside `memcg run`)
//! applied to a `--fs` directory and to a tmpfs directory at once, every
//! result compared (errno, bytes, listing, stat), then the whole trees;
//! and the refusals the kernel gives (errnos, a full RAM disk, a host
//! directory that goes away).
//!
//! `MEMCG_FUZZ_SEED` replays one seed (the failure message names it),
//! `MEMCG_FUZZ_OPS` sets the operations per seed, `MEMCG_FUZZ_SEEDS` how
//! many seeds from the first; directories are held open across
//! operations too (removed while open, they still answer), unless
//! `MEMCG_FUZZ_DIR_FDS=0`. These need root and `/dev/fuse`; where
//! either is missing each test says so on stderr and passes without
//! running.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn memcg() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("memcg"));
    cmd.env("LC_ALL", "C");
    cmd.env("TMPDIR", scratch("tmp"));
    cmd
}

/// A fresh, empty directory of these tests (`name` under the target's
/// temporary directory).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fs-fuzz")
        .join(name);
    if name != "tmp" {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuse/fs_fuzz.py")
}

/// Whether FUSE mounts can be made here and python3 runs; says why not
/// otherwise. Returns the lock that runs these tests one at a time.
fn usable(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    // SAFETY: `geteuid` has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let python = Command::new("python3").arg("-V").output().is_ok();
    if !(root && Path::new("/dev/fuse").exists() && python) {
        eprintln!("{test}: skipped: needs root, /dev/fuse and python3");
        return None;
    }
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()))
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A directory on the host's tmpfs for the reference: `/dev/shm` where it
/// is one (`None` otherwise: the test is skipped).
fn tmpfs_dir(name: &str) -> Option<PathBuf> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let shm = Path::new("/dev/shm");
    let c = std::ffi::CString::new("/dev/shm").unwrap();
    // SAFETY: a zeroed statfs is a valid out-buffer; the path is a C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 || st.f_type as i64 != TMPFS_MAGIC {
        eprintln!("{name}: skipped: /dev/shm is not a tmpfs");
        return None;
    }
    let dir = shm.join(format!("memcg-fs-fuzz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    Some(dir)
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs the fuzz script for each seed on `--fs MNT=source` against a
/// fresh tmpfs directory, then `after(reference)`. (On a host directory
/// too, a directory's size is the simulator's, counted as tmpfs counts.)
fn fuzz(test: &str, source: &dyn Fn() -> String, after: &dyn Fn(&Path)) {
    let Some(_serial) = usable(test) else {
        return;
    };
    let first = env_u64("MEMCG_FUZZ_SEED", 1);
    let seeds = if std::env::var("MEMCG_FUZZ_SEED").is_ok() {
        1
    } else {
        env_u64("MEMCG_FUZZ_SEEDS", 2)
    };
    let ops = env_u64("MEMCG_FUZZ_OPS", 2000).to_string();
    let keep_dir_fds = std::env::var("MEMCG_FUZZ_DIR_FDS").map_or(true, |v| v != "0");
    let mnt = scratch(&format!("{test}-mnt"));
    for seed in first..first + seeds {
        let Some(reference) = tmpfs_dir(test) else {
            return;
        };
        let fs = format!("{}={}", mnt.display(), source());
        let out = memcg()
            .args(["run", "--mem", "1G", "--fs", &fs, "--", "python3"])
            .arg(script())
            .arg(&mnt)
            .arg(&reference)
            .args(["--seed", &seed.to_string(), "--ops", &ops])
            .args(keep_dir_fds.then_some("--keep-dir-fds"))
            .output()
            .unwrap();
        let ok = out.status.success();
        let checked = ok
            && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| after(&reference))).is_ok();
        let _ = std::fs::remove_dir_all(&reference);
        assert!(ok, "{test}: seed {seed}: {}", text(&out));
        assert!(
            checked,
            "{test}: seed {seed}: the check after the run failed"
        );
        eprint!("{}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn random_operations_on_a_ram_fs_match_tmpfs() {
    fuzz(
        "random_operations_on_a_ram_fs_match_tmpfs",
        &|| "ram:256M".to_owned(),
        &|_| {},
    );
}

#[test]
fn random_operations_on_a_host_dir_match_tmpfs_and_reach_the_host() {
    let host = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fs-fuzz/host-dir");
    fuzz(
        "random_operations_on_a_host_dir",
        &|| scratch("host-dir").display().to_string(),
        &|reference| {
            // Everything written is on the host once the run is over.
            let out = Command::new("python3")
                .arg(script())
                .arg("--compare-trees")
                .arg(&host)
                .arg(reference)
                .output()
                .unwrap();
            assert!(out.status.success(), "host dir vs tmpfs: {}", text(&out));
        },
    );
}

fn errnos_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuse/fs_errnos.py")
}

/// `memcg run --mem 1G FS_ARGS -- CMD...`, which must succeed: its stdout.
fn run_ok(fs_args: &[String], cmd: &[&str]) -> String {
    let out = memcg()
        .args(["run", "--mem", "1G"])
        .args(fs_args)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn refused_calls_get_the_errnos_tmpfs_gives() {
    let test = "refused_calls_get_the_errnos_tmpfs_gives";
    let Some(_serial) = usable(test) else {
        return;
    };
    let Some(reference) = tmpfs_dir(test) else {
        return;
    };
    let out = Command::new("python3")
        .arg(errnos_script())
        .arg(&reference)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&reference);
    assert!(out.status.success(), "on tmpfs: {}", text(&out));
    let want = String::from_utf8_lossy(&out.stdout).into_owned();
    let mnt = scratch("errnos-mnt");
    let fs = vec!["--fs".to_owned(), format!("{}=ram:64M", mnt.display())];
    let script = errnos_script().display().to_string();
    let got = run_ok(&fs, &["python3", &script, &mnt.display().to_string()]);
    // Extended attributes are not kept (ENOTSUP), where tmpfs keeps user.*.
    let want = want
        .replace("getxattr: ENODATA", "getxattr: ENOTSUP")
        .replace("setxattr: ok", "setxattr: ENOTSUP");
    assert_eq!(got, want);
    for errno in [
        "ENAMETOOLONG",
        "ELOOP",
        "ENOTEMPTY",
        "EISDIR",
        "ENOTDIR",
        "EEXIST",
    ] {
        assert!(got.contains(errno), "{errno} checked");
    }
}

#[test]
fn renames_and_links_between_filesystems_are_exdev() {
    let Some(_serial) = usable("renames_and_links_between_filesystems_are_exdev") else {
        return;
    };
    let (a, b) = (scratch("exdev-a"), scratch("exdev-b"));
    let fs = [
        "--fs".to_owned(),
        format!("{}=ram:16M", a.display()),
        "--fs".to_owned(),
        format!("{}=ram:16M", b.display()),
    ];
    let script = format!(
        "python3 {s} --exdev {a} {b} && python3 {s} --exdev {b} /sys/fs/cgroup",
        s = errnos_script().display(),
        a = a.display(),
        b = b.display()
    );
    let got = run_ok(&fs, &["bash", "-c", &script]);
    let one = "rename file across mounts: EXDEV\nrename dir across mounts: EXDEV\n\
               link across mounts: EXDEV\nrename EXCHANGE across mounts: EXDEV\n";
    assert_eq!(got, one.repeat(2));
}

#[test]
fn a_full_ram_fs_is_enospc_and_keeps_every_byte_written() {
    let Some(_serial) = usable("a_full_ram_fs_is_enospc_and_keeps_every_byte_written") else {
        return;
    };
    let mnt = scratch("enospc-mnt");
    let fs = ["--fs".to_owned(), format!("{}=ram:8M", mnt.display())];
    let script = errnos_script().display().to_string();
    let got = run_ok(
        &fs,
        &["python3", &script, "--enospc", &mnt.display().to_string()],
    );
    // What an 8 MiB tmpfs prints: 8 files of 1 MiB, the ninth refused.
    assert_eq!(
        got,
        "full: ENOSPC\nappend to a full disk: ENOSPC\n\
         files: 9, bytes: 8388608, lost: []\nappend after freeing: ok\nf0 grew: True\n"
    );
}

#[test]
fn a_host_dir_that_disappears_gives_clean_errors() {
    let Some(_serial) = usable("a_host_dir_that_disappears_gives_clean_errors") else {
        return;
    };
    let host = scratch("vanishing-host");
    std::fs::create_dir(host.join("sub")).unwrap();
    std::fs::write(host.join("sub/old"), "before\n").unwrap();
    let mnt = scratch("vanishing-mnt");
    let fs = [
        "--fs".to_owned(),
        format!("{}={}", mnt.display(), host.display()),
    ];
    // `kept` is cached and open when the directory goes; `old` was never
    // read (nothing cached).
    let script = format!(
        r#"cd {mnt} && echo written > kept && sync && exec 3<kept
        rm -rf {host}
        cat kept; cat sub/old; echo new > new; mkdir d; mv kept k2; rm kept
        cat <&3; sync && echo synced; cd /"#,
        mnt = mnt.display(),
        host = host.display()
    );
    let out = memcg()
        .args(["run", "--mem", "1G"])
        .args(&fs)
        .args(["--", "bash", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "written\nwritten\nsynced\n"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in [
        "cat: sub/old: No such file or directory",
        "new: No such file or directory",
        "mkdir: cannot create directory 'd': No such file or directory",
        "mv: cannot move 'kept' to 'k2': No such file or directory",
        "rm: cannot remove 'kept': No such file or directory",
    ] {
        assert!(stderr.contains(line), "{line:?} in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn an_open_directory_removed_still_answers_fstat_and_getdents() {
    let Some(_serial) = usable("an_open_directory_removed_still_answers_fstat_and_getdents") else {
        return;
    };
    let mnt = scratch("open-dir-mnt");
    let fs = ["--fs".to_owned(), format!("{}=ram:16M", mnt.display())];
    // What tmpfs prints: nlink 0, size 40, no entries.
    let script = format!(
        r#"import os
os.chdir("{}")
os.mkdir("x"); fd = os.open("x", os.O_RDONLY); os.rmdir("x")
st = os.fstat(fd); print(st.st_nlink, st.st_size, os.listdir(fd))"#,
        mnt.display()
    );
    assert_eq!(run_ok(&fs, &["python3", "-c", &script]), "0 40 []\n");
}
