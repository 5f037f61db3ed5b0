//! `memcg run` and `memcg mount` end to end: real bash, coreutils and
//! Python driving the simulated machine over FUSE, as they would drive a
//! kernel. The scripts are in `tests/fuse/`.
//!
//! These need root and `/dev/fuse` (CI has both); where either is missing
//! each test says so on stderr and passes without running. They run one
//! at a time (some share `/tmp/test-fs`, the path seed 002 uses), and each
//! checks at its end that no memcg mount is left on the host.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn memcg() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("memcg"));
    // ASCII quotes from coreutils, English messages.
    cmd.env("LC_ALL", "C");
    // `memcg run` makes its mount point here: a directory of these tests'
    // own, so that other runs on the host cannot confuse the check that
    // none is left.
    cmd.env("TMPDIR", tests_tmp());
    cmd
}

fn tests_tmp() -> PathBuf {
    common::tests_tmp("fuse-tests")
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn fuse_usable(test: &str) -> bool {
    common::usable(test, false)
}

/// The memcg FUSE mounts the host has now in these tests' own directory
/// (other work on the host may mount elsewhere meanwhile).
fn memcg_mounts() -> Vec<String> {
    let ours = format!(" {}/", tests_tmp().display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - fuse.memcg memcg ") || l.contains(" - fuse memcg "))
        .filter(|l| l.contains(&ours))
        .map(str::to_owned)
        .collect()
}

/// `memcg run`'s mount points (temporary directories on the host; the
/// mounts themselves live in its private namespace, which no one else
/// sees and which dies with it).
fn run_dirs() -> Vec<String> {
    std::fs::read_dir(tests_tmp())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("memcg-run-"))
        .collect()
}

/// Runs `f` alone, then checks nothing is left mounted in this namespace
/// and no `memcg run` mount point is left, even if `f` failed.
fn alone(test: &str, f: impl FnOnce()) {
    if !fuse_usable(test) {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = (memcg_mounts(), run_dirs());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert_eq!(
        (memcg_mounts(), run_dirs()),
        before,
        "{test}: a memcg mount or mount point was left behind"
    );
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Drops bash's `FILE: line N: ` prefix (it names our script file).
fn without_bash_prefix(stderr: &str) -> String {
    stderr
        .lines()
        .map(|line| match line.find(": line ") {
            Some(at) => {
                let rest = &line[at + ": line ".len()..];
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                match rest[digits..].strip_prefix(": ") {
                    Some(message) if digits > 0 => message.to_owned(),
                    _ => line.to_owned(),
                }
            }
            None => line.to_owned(),
        })
        .map(|l| l + "\n")
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `memcg run ARGS -- bash SCRIPT`.
fn run_bash(args: &[&str], script: &Path) -> Output {
    memcg()
        .arg("run")
        .args(args)
        .args(["--", "bash"])
        .arg(script)
        .output()
        .unwrap()
}

/// `memcg run --mem 64M -- bash -c SCRIPT`.
fn run_bash_c(script: &str) -> Output {
    memcg()
        .args(["run", "--mem", "64M", "--", "bash", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn memcg_sh_scripts_rewritten_for_bash_print_the_same() {
    alone("memcg_sh_scripts_rewritten_for_bash", || {
        for name in ["subtree_control", "memcg_metadata", "seed002_readers"] {
            let sh = dir().join("scripts").join(name);
            let sh_args = read(sh.with_extension("args"));
            let mut args: Vec<&str> = sh_args.split_whitespace().collect();
            args.extend(["--mem", "256M", "--fs", "/tmp/test-fs=ram:16G"]);
            // A script that needs no rewrite (only kernel paths and
            // coreutils) runs as it is.
            let rewritten = dir().join("fuse").join(format!("{name}.sh"));
            let script = if rewritten.exists() {
                rewritten
            } else {
                sh.with_extension("sh")
            };
            let out = run_bash(&args, &script);
            // The sh scripts may name cgroups without /sys/fs/cgroup.
            let stderr = without_bash_prefix(&text(&out.stderr)).replace("/sys/fs/cgroup", "");
            let want_err = read(sh.with_extension("err")).replace("/sys/fs/cgroup", "");
            assert_eq!(
                text(&out.stdout),
                read(sh.with_extension("out")),
                "{name}: stdout"
            );
            assert_eq!(stderr.trim(), want_err.trim(), "{name}: stderr");
            let status = read(sh.with_extension("status"));
            let status: i32 = status.trim().parse().unwrap_or(0);
            // bash ends with the last command's status; `memcg sh` with
            // the worst one: they agree on success only.
            assert_eq!(out.status.success(), status == 0, "{name}: status");
        }
    });
}

#[test]
fn bash_and_coreutils_print_the_kernels_errnos() {
    alone("bash_and_coreutils_print_the_kernels_errnos", || {
        let script = dir().join("fuse/errnos.sh");
        let out = run_bash(&["--mem", "256M"], &script);
        assert_eq!(text(&out.stdout), read(script.with_extension("out")));
        assert_eq!(
            without_bash_prefix(&text(&out.stderr)),
            read(script.with_extension("err"))
        );
        assert_eq!(out.status.code(), Some(2), "ls's status, passed through");
    });
}

#[test]
fn a_moved_process_is_charged_for_its_reads_and_its_children_inherit() {
    alone("a_moved_process_is_charged", || {
        let script = r#"
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir /sys/fs/cgroup/job
            seq 100000 > /tmp/memcg-test-fs/data
            sync /tmp/memcg-test-fs/data
            echo 3 > /proc/sys/vm/drop_caches
            bash -c '
                echo $$ > /sys/fs/cgroup/job/cgroup.procs
                cat /tmp/memcg-test-fs/data > /dev/null
                sleep 30 & sleeper=$!
                grep -qx $$ /sys/fs/cgroup/job/cgroup.procs && echo "shell listed"
                grep -qx $sleeper /sys/fs/cgroup/job/cgroup.procs && echo "child listed"
                kill $sleeper
                cat /sys/fs/cgroup/job/memory.current
                grep "^file " /sys/fs/cgroup/job/memory.stat
            '
            echo "after exit: [$(cat /sys/fs/cgroup/job/cgroup.procs)]"
            rmdir /sys/fs/cgroup/job && echo removed
        "#;
        let out = memcg()
            .args([
                "run",
                "--mem",
                "256M",
                "--charge-stock",
                "off",
                "--fs",
                "/tmp/memcg-test-fs=ram:64M",
                "--",
                "bash",
                "-c",
                script,
            ])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        // `seq 100000` is 588895 bytes: 144 pages, read by `cat` (a child
        // of the moved shell) and charged to its cgroup.
        let file_bytes = 144 * 4096;
        assert_eq!(lines.len(), 6, "{stdout}\nstderr: {}", text(&out.stderr));
        assert_eq!(lines[..2], ["shell listed", "child listed"]);
        let current: u64 = lines[2].parse().unwrap();
        assert!(current >= file_bytes, "memory.current {current}");
        assert_eq!(lines[3], format!("file {file_bytes}"));
        assert_eq!(lines[4], "after exit: []");
        assert_eq!(lines[5], "removed");
        assert!(out.status.success());
        assert!(
            !Path::new("/tmp/memcg-test-fs").exists(),
            "the --fs dir it made stays"
        );
    });
}

#[test]
fn a_first_small_read_charges_the_readahead_window_and_read_ahead_kb_sets_it() {
    alone("a_first_small_read_charges_the_readahead_window", || {
        // `head -c 1` reads 1 byte (FOPEN_DIRECT_IO passes the request
        // through): the kernel's initial window for a 1-page read is 4
        // pages, 16K of `file`, as booted 6.12 and 7.3 kernels charge; with
        // read_ahead_kb 0, the page alone.
        let script = r#"
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir /sys/fs/cgroup/job
            head -c 1M /dev/zero > /tmp/memcg-ra-fs/f
            sync /tmp/memcg-ra-fs/f
            ls /sys/class/bdi
            cat /sys/class/bdi/0:1/read_ahead_kb
            for kb in 128 0; do
                echo $kb > /sys/class/bdi/0:1/read_ahead_kb
                echo 1 > /proc/sys/vm/drop_caches
                bash -c '
                    echo $$ > /sys/fs/cgroup/job/cgroup.procs
                    head -c 1 /tmp/memcg-ra-fs/f > /dev/null
                    grep "^file " /sys/fs/cgroup/job/memory.stat
                '
            done
            rmdir /sys/fs/cgroup/job && echo removed
        "#;
        let out = memcg()
            .args([
                "run",
                "--mem",
                "256M",
                "--fs",
                "/tmp/memcg-ra-fs=ram:64M",
                "--",
                "bash",
                "-c",
                script,
            ])
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout),
            "0:1\n128\nfile 16384\nfile 4096\nremoved\n",
            "stderr: {}",
            text(&out.stderr)
        );
        assert!(out.status.success());
    });
}

#[test]
fn cgroup_kill_kills_the_real_processes_in_the_cgroup_only() {
    alone("cgroup_kill_kills_the_real_processes", || {
        let script = r#"
            mkdir /sys/fs/cgroup/doomed /sys/fs/cgroup/spared
            bash -c 'echo $$ > /sys/fs/cgroup/doomed/cgroup.procs; exec sleep 60' &
            doomed=$!
            bash -c 'echo $$ > /sys/fs/cgroup/spared/cgroup.procs; exec sleep 60' &
            spared=$!
            until grep -qx $doomed /sys/fs/cgroup/doomed/cgroup.procs; do sleep 0.05; done
            until grep -qx $spared /sys/fs/cgroup/spared/cgroup.procs; do sleep 0.05; done
            echo 1 > /sys/fs/cgroup/doomed/cgroup.kill
            wait $doomed; echo "doomed: $?"
            kill -0 $spared && echo "spared lives"
            kill $spared; wait $spared
            cat /sys/fs/cgroup/doomed/cgroup.procs
            rmdir /sys/fs/cgroup/doomed /sys/fs/cgroup/spared && echo removed
        "#;
        let out = run_bash_c(script);
        assert_eq!(
            text(&out.stdout),
            format!("doomed: {}\nspared lives\nremoved\n", 128 + libc::SIGKILL),
            "stderr: {}",
            text(&out.stderr)
        );
    });
}

/// `cgroup.freeze` stops a real process (both its threads: SIGSTOP) and
/// thawing continues it; `frozen` in `cgroup.events` follows; a frozen
/// cgroup can still be killed. `cgroup.threads` lists the threads, and a
/// thread written to another cgroup's is refused. An embedded NUL ends a
/// value (`printf '1M\0junk'`).
#[test]
fn cgroup_freeze_stops_and_continues_a_real_process() {
    alone("cgroup_freeze_stops_and_continues_a_real_process", || {
        let script = r#"
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir /sys/fs/cgroup/ice /sys/fs/cgroup/other
            python3 -c '
import threading, time
open("/sys/fs/cgroup/ice/cgroup.procs", "w").write("0")
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
time.sleep(60)' &
            p=$!
            until [ "$(wc -l < /sys/fs/cgroup/ice/cgroup.threads)" = 2 ]; do sleep 0.05; done
            [ "$(head -1 /sys/fs/cgroup/ice/cgroup.threads)" = $p ] && echo "threads: 2, the pid first"
            tid=$(tail -1 /sys/fs/cgroup/ice/cgroup.threads)
            echo $tid > /sys/fs/cgroup/ice/cgroup.threads && echo "own cgroup: ok"
            echo $tid > /sys/fs/cgroup/other/cgroup.threads
            states() { cat /proc/$p/task/*/stat | awk '{print $3}' | sort -u | tr -d '
'; }
            echo 1 > /sys/fs/cgroup/ice/cgroup.freeze
            cat /sys/fs/cgroup/ice/cgroup.freeze /sys/fs/cgroup/ice/cgroup.events
            until [ "$(states)" = T ]; do sleep 0.05; done
            echo "frozen: $(states)"
            echo 0 > /sys/fs/cgroup/ice/cgroup.freeze
            until [ "$(states)" = S ]; do sleep 0.05; done
            echo "thawed: $(states)"
            cat /sys/fs/cgroup/ice/cgroup.events
            echo 1 > /sys/fs/cgroup/ice/cgroup.freeze
            until [ "$(states)" = T ]; do sleep 0.05; done
            echo 1 > /sys/fs/cgroup/ice/cgroup.kill
            wait $p; echo "killed: $?"
            cat /sys/fs/cgroup/ice/cgroup.events
            echo 0 > /sys/fs/cgroup/ice/cgroup.freeze
            printf '1M\0junk' > /sys/fs/cgroup/other/memory.max
            cat /sys/fs/cgroup/other/memory.max
            rmdir /sys/fs/cgroup/ice /sys/fs/cgroup/other && echo removed
        "#;
        let out = run_bash_c(script);
        assert_eq!(
            text(&out.stdout),
            format!(
                "threads: 2, the pid first\nown cgroup: ok\n1\npopulated 1\nfrozen 1\n\
                 frozen: T\nthawed: S\npopulated 1\nfrozen 0\nkilled: {}\n\
                 populated 0\nfrozen 1\n1048576\nremoved\n",
                128 + libc::SIGKILL
            ),
            "stderr: {}",
            text(&out.stderr)
        );
        // Besides bash's report of the killed job, one error: the thread
        // written to another cgroup.
        let stderr = without_bash_prefix(&text(&out.stderr));
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors, ["echo: write error: Operation not supported"]);
    });
}

#[test]
fn poll_on_memory_events_wakes_on_an_event_and_not_before() {
    alone("poll_on_memory_events", || {
        let out = memcg()
            .args([
                "run",
                "--mem",
                "256M",
                "--fs",
                "/tmp/memcg-poll-fs=ram:64M",
                "--",
            ])
            .arg("python3")
            .arg(dir().join("fuse/poll_events.py"))
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout),
            "before: high 0\nquiet poll: []\nwoken: True\npending: True\n\
             high risen: True\nquiet after read: []\n",
            "stderr: {}",
            text(&out.stderr)
        );
    });
}

#[test]
fn page_cache_reclaim_stalls_a_real_process_and_wakes_a_psi_trigger() {
    // Before: `memory.pressure` stayed at total=0 for page-cache reclaim
    // by real processes (qa M2), and writing a trigger was EOPNOTSUPP.
    alone("psi_trigger", || {
        let out = memcg()
            .args([
                "run",
                "--mem",
                "512M",
                "--charge-stock",
                "off",
                "--fs",
                "/tmp/memcg-psi-fs=ram:256M",
                "--",
            ])
            .arg("python3")
            .arg(dir().join("fuse/psi_trigger.py"))
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout),
            "trigger: ok\nsecond trigger: EBUSY\nquiet poll: []\nwoken: True\n\
             stalled: True True\nunprivileged: EINVAL ok\n",
            "stderr: {}",
            text(&out.stderr)
        );
    });
}

/// Seed 002's `do_test()` as published, with 10000 readers made `$N`;
/// `prepare()` is the seed's too, less the device set-up `--fs` replaces.
fn do_test(reparent: &str) -> (String, String) {
    let script = dir().join("fuse/seed002_do_test.sh");
    let out = memcg()
        .env("N", "100")
        .args([
            "run",
            "--mem",
            "1G",
            "--reparent-lru-folios",
            reparent,
            "--fs",
            "/tmp/test-fs=ram:16G",
            "--",
            "bash",
        ])
        .arg(script)
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

#[test]
fn seed002_do_test_runs_unchanged_with_100_real_readers() {
    alone("seed002_do_test", || {
        // v6.14: each reader's page cache keeps its cgroup dying.
        let (stdout, stderr) = do_test("off");
        assert_eq!(
            stdout,
            "reader cgroups left: 0\n\
             nr_descendants 0\nnr_subsys_memory 1\n\
             nr_dying_descendants 100\nnr_dying_subsys_memory 100\n",
            "stderr: {stderr}"
        );
        assert!(stderr.contains("real"), "bash's `time` output: {stderr}");
        // 2026's reparenting: none stays dying.
        let (stdout, _) = do_test("on");
        assert!(
            stdout.ends_with("nr_dying_descendants 0\nnr_dying_subsys_memory 0\n"),
            "{stdout}"
        );
    });
}

#[test]
fn a_python_controller_moves_memory_high_as_its_rule_says() {
    alone("a_python_controller", || {
        let out = memcg()
            .args([
                "run",
                "--mem",
                "512M",
                "--swap",
                "256M",
                "--workload",
                "kbuild --jobs 2 --cgroup /build --heap-max 16M",
                "--",
                "python3",
            ])
            .arg(dir().join("fuse/pressure_controller.py"))
            .arg("4")
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\nstderr: {}",
            text(&out.stderr)
        );
        let rounds: Vec<Vec<f64>> = stdout
            .lines()
            .map(|l| l.split_whitespace().map(|w| w.parse().unwrap()).collect())
            .collect();
        assert_eq!(rounds.len(), 4, "{stdout}");
        for r in &rounds {
            let [pressure, old, new, read_back] = r[..] else {
                panic!("{r:?}")
            };
            // The rule: down 10% under 1% pressure, else up 10%, at least
            // 8M, in pages; and memory.high took it.
            let factor = if pressure < 1.0 { 0.9 } else { 1.1 };
            let want = ((old * factor).floor().max((8 << 20) as f64) as u64) / 4096 * 4096;
            assert_eq!(new as u64, want, "{r:?}");
            assert_eq!(read_back, new, "memory.high reads back what was written");
        }
        assert!(
            text(&out.stderr).contains("memcg: kbuild in /build:"),
            "the workload ran"
        );
    });
}

/// A `memcg mount` in the host's namespace, stopped (SIGTERM) on drop.
struct Mount {
    child: Child,
    dir: tempfile::TempDir,
}

impl Mount {
    fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir_in(tests_tmp()).unwrap();
        let child = memcg()
            .arg("mount")
            .arg(dir.path())
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let ready = dir.path().join("sys/fs/cgroup/cgroup.procs");
        let start = Instant::now();
        while !ready.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the mount never came up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, which has not been reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

#[test]
fn mount_serves_until_interrupted_and_refuses_a_busy_mount_point() {
    alone("mount_serves_until_interrupted", || {
        // Exact figures: no charge stock, whose up to 64 pages per server
        // thread `memory.current` and a reset `memory.peak` would count.
        let mount = Mount::start(&[
            "--mem",
            "128M",
            "--charge-stock",
            "off",
            "--fs",
            "/data=ram:64M",
        ]);
        let cg = |f: &str| mount.path(&format!("sys/fs/cgroup/{f}"));
        std::fs::write(cg("cgroup.subtree_control"), "+memory").unwrap();
        std::fs::create_dir(cg("a")).unwrap();
        let err = std::fs::write(cg("a/memory.max"), "bogus").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        assert_eq!(
            std::fs::read_to_string(mount.path("proc/sys/vm/swappiness")).unwrap(),
            "60\n"
        );
        // A shell in `a` writes 144 pages of page cache, then removes them.
        let status = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "echo $$ > {}; seq 100000 > {data}; rm {data}",
                cg("a/cgroup.procs").display(),
                data = mount.path("data/f").display()
            ))
            .status()
            .unwrap();
        assert!(status.success());
        // The kernel tells the server the file was closed asynchronously:
        // wait until the removed file's pages are gone.
        let start = Instant::now();
        let file_bytes = || -> u64 {
            let stat = std::fs::read_to_string(cg("a/memory.stat")).unwrap();
            stat.lines()
                .find_map(|l| l.strip_prefix("file "))
                .unwrap()
                .parse()
                .unwrap()
        };
        while file_bytes() > 0 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the pages stayed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Per-open memory.peak: a reset through one descriptor leaves the
        // other's peak alone.
        use std::io::{Read, Seek, Write};
        let peak = |f: &mut std::fs::File| -> u64 {
            let mut s = String::new();
            f.rewind().unwrap();
            f.read_to_string(&mut s).unwrap();
            s.trim().parse().unwrap()
        };
        let mut watcher = std::fs::File::open(cg("a/memory.peak")).unwrap();
        let mut resetter = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(cg("a/memory.peak"))
            .unwrap();
        assert!(peak(&mut watcher) >= 144 * 4096);
        resetter.write_all(b"reset\n").unwrap();
        assert!(peak(&mut resetter) < 144 * 4096);
        assert!(peak(&mut watcher) >= 144 * 4096);
        drop((watcher, resetter));
        // The shell exited: the cgroup empties and can go.
        std::fs::remove_dir(cg("a")).unwrap();
        let busy = memcg().arg("mount").arg(mount.dir.path()).output().unwrap();
        assert!(!busy.status.success());
        assert!(
            text(&busy.stderr).contains("busy"),
            "{}",
            text(&busy.stderr)
        );
        let mut mount = mount;
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(mount.child.id() as libc::pid_t, libc::SIGINT);
        }
        let status = mount.child.wait().unwrap();
        assert!(status.success());
        let mut stderr = String::new();
        mount
            .child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(stderr.contains("unmounted"), "{stderr}");
    });
}

#[test]
fn a_child_forked_before_its_parent_moved_stays_behind() {
    alone("a_child_forked_before_its_parent_moved", || {
        let script = r#"
            mkdir /sys/fs/cgroup/x
            sleep 30 & early=$!
            echo $$ > /sys/fs/cgroup/x/cgroup.procs
            sleep 30 & late=$!
            sleep 1
            grep -qx $early /sys/fs/cgroup/cgroup.procs && echo "early child in the root"
            grep -qx $late /sys/fs/cgroup/x/cgroup.procs && echo "late child in x"
            kill $early $late
        "#;
        let out = run_bash_c(script);
        assert_eq!(
            text(&out.stdout),
            "early child in the root\nlate child in x\n",
            "stderr: {}",
            text(&out.stderr)
        );
    });
}

#[test]
fn a_file_held_open_after_the_command_exits_does_not_hold_the_machine() {
    alone("a_file_held_open_after_the_command_exits", || {
        let start = Instant::now();
        let out = memcg()
            .args(["run", "--mem", "64M", "--", "bash", "-c"])
            .arg("sleep 5 < /sys/fs/cgroup/cgroup.procs > /dev/null 2>&1 & exit 0")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn run_reports_a_missing_or_crashing_command_and_leaves_nothing() {
    alone("run_reports_a_missing_or_crashing_command", || {
        let missing = memcg()
            .args(["run", "--mem", "64M", "--", "/no/such/command"])
            .output()
            .unwrap();
        assert_eq!(missing.status.code(), Some(127));
        assert!(text(&missing.stderr).contains("/no/such/command"));
        let crashed = memcg()
            .args(["run", "--mem", "64M", "--", "bash", "-c", "kill -SEGV $$"])
            .output()
            .unwrap();
        assert_eq!(crashed.status.code(), Some(128 + libc::SIGSEGV));
        let no_cmd = memcg().args(["run", "--mem", "64M"]).output().unwrap();
        assert!(!no_cmd.status.success());
    });
}

/// VmRSS of process `pid`, in kB.
fn vm_rss_kb(pid: u32) -> u64 {
    read(PathBuf::from(format!("/proc/{pid}/status")))
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
        .expect("the server's VmRSS")
}

/// qa C1 through the mount: bash makes and removes 10000 memory cgroups
/// at a time (`mkdir $(seq 10000); rmdir $(seq 10000)`, as
/// `repro_leak.sh` does), 100000 in all, as the issue asks; the server's
/// resident memory after the first 10000 grows by at most 8 MiB while the
/// other 90000 come and go (before: by ~0.9 KB per cgroup, ~80 MB here,
/// plus the malloc arenas of its threads). Through FUSE in the debug build
/// a round of 10000 takes 6-8 s here.
#[test]
fn churning_cgroups_through_the_mount_keeps_the_server_bounded() {
    const ROUNDS: u32 = 10;
    const RSS_GROWTH_BOUND_KB: u64 = 8 * 1024;
    alone("churning_cgroups_through_the_mount", || {
        // Room for 10000 memory cgroups' own metadata, charged to `n`.
        let mount = Mount::start(&["--mem", "512M"]);
        let cg = mount.path("sys/fs/cgroup");
        std::fs::write(cg.join("cgroup.subtree_control"), "+memory").unwrap();
        std::fs::create_dir(cg.join("n")).unwrap();
        std::fs::write(cg.join("n/cgroup.subtree_control"), "+memory").unwrap();
        let round = || {
            let out = Command::new("bash")
                .arg("-c")
                .arg(r#"cd "$1" && mkdir $(seq 10000) && rmdir $(seq 10000)"#)
                .arg("bash")
                .arg(cg.join("n"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
        };
        round();
        let first = vm_rss_kb(mount.child.id());
        for _ in 1..ROUNDS {
            round();
        }
        let last = vm_rss_kb(mount.child.id());
        eprintln!(
            "server VmRSS after 10000 cgroups: {first} kB, after {}: {last} kB",
            ROUNDS * 10000
        );
        assert!(
            last.saturating_sub(first) <= RSS_GROWTH_BOUND_KB,
            "the server grew from {first} kB to {last} kB"
        );
        let stat = read(cg.join("n/cgroup.stat"));
        assert!(stat.contains("nr_dying_descendants 0"), "{stat}");
        // Every child's own structures were given back (memory.current
        // may still count pages the server threads' charge stocks hold).
        let memory_stat = read(cg.join("n/memory.stat"));
        for key in ["percpu 0\n", "slab_unreclaimable 0\n"] {
            assert!(memory_stat.contains(key), "{memory_stat}");
        }
    });
}

/// The processes whose command line holds `marker` as an argument.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == marker.as_bytes()))
        })
        .collect()
}

/// Waits (up to 10 s) for `done`; false if it never came.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `memcg run` of a bash that traps TERM, INT and HUP (writing which to
/// `trapped` and exiting 3), with background `sleep`s marked `marker` (one
/// a grandchild of CMD) and an `--fs` under a directory it has to make,
/// `dir`; returns once CMD said it is ready. Killed on drop, if a test
/// fails first.
fn run_until_ready(marker: &str, dir: &Path, trapped: &Path) -> KillOnDrop {
    use std::io::BufRead;
    let script = format!(
        r#"
        for s in TERM INT HUP; do trap "echo $s > {trapped}; exit 3" $s; done
        sleep {marker} &
        bash -c 'sleep {marker} & wait' &
        echo ready
        wait
        "#,
        trapped = trapped.display()
    );
    let mut command = memcg();
    command
        .args(["run", "--mem", "64M", "--fs"])
        .arg(format!("{}/fs=ram:1M", dir.display()))
        .args(["--", "bash", "-c", &script])
        .stdout(Stdio::piped());
    no_core_dump(&mut command);
    let mut child = KillOnDrop(command.spawn().unwrap());
    let mut line = String::new();
    // The sleeps hold the pipe (only the first line is read).
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    assert!(
        eventually(|| processes_with(marker).len() == 2),
        "the sleeps start"
    );
    child
}

/// A child SIGKILLed (and reaped) on drop unless it was waited for.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: signalling our own child, which has not been reaped.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, signal);
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().is_ok_and(|s| s.is_none()) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// After `memcg run` ended: nothing it started is left (processes, the
/// `--fs` directory it made and its parent), now or within seconds
/// (after a SIGKILL the init cleans up after the server). Survivors of a
/// failure are killed.
fn assert_nothing_left(marker: &str, dir: &Path, how: &str) {
    let gone = eventually(|| processes_with(marker).is_empty());
    let left = processes_with(marker);
    for &pid in &left {
        // SAFETY: a process of this test's, marked `marker`.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(gone, "{how}: processes left: {left:?}");
    assert!(
        eventually(|| !dir.exists()),
        "{how}: {} left",
        dir.display()
    );
}

#[test]
fn run_forwards_term_int_and_hup_to_cmd_then_leaves_nothing() {
    alone("run_forwards_term_int_and_hup", || {
        for (signal, name) in [
            (libc::SIGTERM, "TERM"),
            (libc::SIGINT, "INT"),
            (libc::SIGHUP, "HUP"),
        ] {
            let marker = format!("1000.{}{signal}", std::process::id());
            let dir = Path::new("/tmp").join(format!("memcg-teardown-{marker}"));
            let trapped = tests_tmp().join(format!("trapped-{marker}"));
            let mut run = run_until_ready(&marker, &dir, &trapped);
            run.signal(signal);
            let status = run.0.wait().unwrap();
            let said = std::fs::read_to_string(&trapped).unwrap_or_default();
            let _ = std::fs::remove_file(&trapped);
            // Nothing is left as `memcg run` returns.
            let left = processes_with(&marker);
            assert_nothing_left(&marker, &dir, name);
            assert_eq!(left, Vec::<u32>::new(), "{name}: left when it returned");
            assert_eq!(said, format!("{name}\n"), "CMD's trap ran");
            assert_eq!(status.code(), Some(3), "{name}: CMD's status");
        }
    });
}

#[test]
fn run_killed_or_crashing_leaves_nothing() {
    alone("run_killed_or_crashing_leaves_nothing", || {
        use std::os::unix::process::ExitStatusExt;
        for (signal, how) in [(libc::SIGKILL, "SIGKILL"), (libc::SIGABRT, "a crash")] {
            let marker = format!("1000.{}{signal}", std::process::id());
            let dir = Path::new("/tmp").join(format!("memcg-teardown-{marker}"));
            let trapped = tests_tmp().join(format!("trapped-{marker}"));
            let mut run = run_until_ready(&marker, &dir, &trapped);
            run.signal(signal);
            assert_eq!(run.0.wait().unwrap().signal(), Some(signal), "{how}");
            assert_nothing_left(&marker, &dir, how);
        }
    });
}

/// A crash of `command` dumps no core (into the test's directory).
fn no_core_dump(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `setrlimit` is async-signal-safe; it runs between fork and
    // exec.
    unsafe {
        command.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &none) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn sync_and_syncfs_in_run_write_back_the_simulated_page_cache() {
    alone("sync_and_syncfs_in_run", || {
        // 315 pages on one filesystem, 144 on the other, dirty; `sync -f`
        // (syncfs) writes back the first only, `sync` (sync) the rest, and
        // then the clean pages can be dropped.
        let script = r#"
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir /sys/fs/cgroup/job
            echo $$ > /sys/fs/cgroup/job/cgroup.procs
            stat() { grep "^$1 " /sys/fs/cgroup/job/memory.stat; }
            seq 200000 > /tmp/memcg-sync-a/f
            seq 100000 > /tmp/memcg-sync-b/f
            stat file_dirty
            sync -f /tmp/memcg-sync-a/f
            stat file_dirty
            sync
            stat file_dirty
            echo 3 > /proc/sys/vm/drop_caches
            stat file
        "#;
        let out = memcg()
            .args([
                "run",
                "--mem",
                "256M",
                "--charge-stock",
                "off",
                "--fs",
                "/tmp/memcg-sync-a=ram:16M",
                "--fs",
                "/tmp/memcg-sync-b=ram:16M",
                "--",
                "bash",
                "-c",
                script,
            ])
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout),
            format!(
                "file_dirty {}\nfile_dirty {}\nfile_dirty 0\nfile 0\n",
                (315 + 144) * 4096,
                144 * 4096
            ),
            "stderr: {}",
            text(&out.stderr)
        );
        assert!(out.status.success());
    });
}

#[test]
fn a_whole_tree_in_fs_with_mmap_exec_and_a_host_directory() {
    alone("a_whole_tree_in_fs", || {
        let host = tempfile::tempdir().unwrap();
        let ram = tests_tmp().join("tree-ram");
        let out = memcg()
            .args(["run", "--mem", "256M", "--fs"])
            .arg(format!("{}=ram:16M", ram.display()))
            .arg("--fs")
            .arg(format!(
                "/tmp/memcg-tree-host=dir:{}",
                host.path().display()
            ))
            .args(["--", "python3"])
            .arg(dir().join("fuse/fs_tree.py"))
            .arg(&ram)
            .arg("/tmp/memcg-tree-host")
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout),
            "shared store read back: hello\n\
             write seen mapped: world\n\
             private store private: True\n\
             exec: ran\n\
             unlinked open: still here! False\n\
             tree: ['a', 'soft'] ['b', 'f', 'hard'] 2\n",
            "stderr: {}",
            text(&out.stderr)
        );
        assert!(out.status.success());
        // The host directory holds the tree, contents written back when
        // the run ended.
        let h = host.path();
        let x10000 = |p: &str| std::fs::read(h.join(p)).unwrap() == vec![b'x'; 10000];
        assert!(x10000("a/f"), "a/f written back");
        assert!(x10000("soft"), "soft names a/f");
        assert!(h.join("a/b").is_dir());
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = std::fs::metadata(h.join("a/hard")).unwrap();
        assert_eq!(
            (meta.nlink(), meta.permissions().mode() & 0o777),
            (2, 0o600)
        );
        assert!(
            !ram.exists(),
            "the RAM disk's mount point made by run is gone"
        );
    });
}

/// The pid of the first child of `pid` (its watchdog, for `memcg mount`).
fn first_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .find_map(|c| c.parse().ok())
}

/// Whether process `pid` lives (exists and is no zombie).
fn lives(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// `memcg mount DIR --mem 64M`, once its files are there.
fn mount_at(dir: &Path) -> KillOnDrop {
    let child = memcg()
        .arg("mount")
        .arg(dir)
        .args(["--mem", "64M"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read, not looked at: the kernel may answer a stat from its cache
    // of a dead mount's attributes.
    let procs = dir.join("sys/fs/cgroup/cgroup.procs");
    let child = KillOnDrop(child);
    assert!(
        eventually(|| std::fs::read_to_string(&procs).is_ok()),
        "the mount came up"
    );
    child
}

/// Whether something is mounted at `dir`.
fn mounted_at(dir: &Path) -> bool {
    let dir = format!(" {} ", dir.display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(&dir))
}

#[test]
fn a_killed_mount_is_unmounted_by_its_watchdog_or_recovered_by_the_next() {
    alone("a_killed_mount_is_unmounted", || {
        use std::io::Read;
        let dir = tempfile::tempdir_in(tests_tmp()).unwrap();
        let procs = dir.path().join("sys/fs/cgroup/cgroup.procs");
        // SIGKILLed, the server leaves its mount to its watchdog.
        let mut server = mount_at(dir.path());
        let watchdog = first_child(server.0.id()).expect("a watchdog");
        server.signal(libc::SIGKILL);
        server.0.wait().unwrap();
        assert!(
            eventually(|| !mounted_at(dir.path()) && !lives(watchdog)),
            "the watchdog unmounted and ended"
        );
        // Server and watchdog SIGKILLed: a dead mount stays...
        let mut server = mount_at(dir.path());
        let watchdog = first_child(server.0.id()).expect("a watchdog");
        // SAFETY: killing the watchdog, which lives (our grandchild): it
        // runs no more code once this returns.
        unsafe {
            libc::kill(watchdog as libc::pid_t, libc::SIGKILL);
        }
        server.signal(libc::SIGKILL);
        server.0.wait().unwrap();
        // (Opening asks the server; a stat may be answered from the
        // kernel's cache.)
        let err = std::fs::read_to_string(&procs).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN), "a dead mount");
        // ... and the next `memcg mount` there unmounts it, and serves.
        let mut server = mount_at(dir.path());
        server.signal(libc::SIGTERM);
        assert!(server.0.wait().unwrap().success());
        let mut stderr = String::new();
        server
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(
            stderr.contains("unmounted a memcg mount whose server had died"),
            "{stderr}"
        );
        assert!(!mounted_at(dir.path()), "unmounted");
    });
}
