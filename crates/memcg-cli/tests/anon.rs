//! Real processes' anonymous memory under `memcg run` (issue 25): charged
//! on first touch, reclaimed to the simulated swap and back with every
//! byte intact, OOM-killed with a real SIGKILL, throttled at
//! `memory.high`, kept across fork, and released whatever ends the
//! process. Needs root and /dev/fuse (skipped otherwise) and a C compiler
//! for `tests/anon_helper.c`.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;

use common::stdout_of;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn usable(test: &str) -> bool {
    common::usable(test, true)
}

fn tests_tmp() -> PathBuf {
    common::tests_tmp("anon-tests")
}

/// `tests/anon_helper.c`, compiled once.
fn helper() -> PathBuf {
    static BUILT: Mutex<bool> = Mutex::new(false);
    let exe = tests_tmp().join("anon_helper");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !*built {
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/anon_helper.c");
        let status = Command::new("cc")
            .args(["-O2", "-pthread", "-o"])
            .arg(&exe)
            .arg(source)
            .status()
            .expect("a C compiler (cc)");
        assert!(status.success(), "compiling {source}");
        *built = true;
    }
    exe
}

/// The preamble of every script: a cgroup `t` with the memory controller,
/// `memory.max` MAX, this shell in it; `$H` is the helper.
fn preamble(max: &str) -> String {
    format!(
        "set -u\nH={}\necho +memory > /sys/fs/cgroup/cgroup.subtree_control\n\
         mkdir /sys/fs/cgroup/t\necho {max} > /sys/fs/cgroup/t/memory.max\n\
         echo $$ > /sys/fs/cgroup/t/cgroup.procs\n\
         stat() {{ awk -v k=$1 '$1 == k {{ print $2 }}' /sys/fs/cgroup/t/$2; }}\n",
        helper().display()
    )
}

/// `memcg run ARGS -- bash -c SCRIPT`, alone.
fn run(args: &[&str], script: &str) -> Output {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .env("LC_ALL", "C")
        .env("TMPDIR", tests_tmp())
        .arg("run")
        .args(args)
        .args(["--", "bash", "-c", script])
        .output()
        .unwrap()
}

/// `key value` lines of the output as numbers.
fn value(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
}

#[test]
fn a_process_past_memory_max_swaps_out_and_in_and_keeps_every_byte() {
    if !usable("a_process_past_memory_max_swaps_out_and_in_and_keeps_every_byte") {
        return;
    }
    let script = preamble("8M")
        + "$H touch 24\n\
           echo pswpout $(stat pswpout memory.stat)\n\
           echo pswpin $(stat pswpin memory.stat)\n\
           echo max $(stat max memory.events)\n\
           echo oom_kill $(stat oom_kill memory.events)\n\
           echo peak $(cat /sys/fs/cgroup/t/memory.peak)\n\
           echo current $(cat /sys/fs/cgroup/t/memory.current)\n\
           echo swap $(cat /sys/fs/cgroup/t/memory.swap.current)\n";
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "64M"], &script));
    assert!(out.starts_with("ok\n"), "{out}");
    assert!(value(&out, "pswpout") > 2000, "{out}");
    assert!(value(&out, "pswpin") > 1000, "{out}");
    assert!(value(&out, "max") > 0, "{out}");
    assert_eq!(value(&out, "oom_kill"), 0, "{out}");
    assert!(value(&out, "peak") <= 8 << 20, "{out}");
    // Released at exit: only the shell's own heap is left, and no swap.
    assert!(value(&out, "current") < 2 << 20, "{out}");
    assert_eq!(value(&out, "swap"), 0, "{out}");
}

#[test]
fn the_heaps_first_chunk_is_charged_like_the_rest() {
    if !usable("the_heaps_first_chunk_is_charged_like_the_rest") {
        return;
    }
    // 8M of 64K blocks, the first ~4M of them from the chunk the loader's
    // first malloc mapped before the process had its userfaultfd: every
    // page written is charged (the kernel charges each at first touch).
    let script = preamble("max") + "$H blocks 8 /sys/fs/cgroup/t/memory.stat\necho status $?\n";
    let out = stdout_of(&run(&["--mem", "256M"], &script));
    assert_eq!(value(&out, "status"), 0, "{out}");
    let anon = value(&out, "anon");
    assert!((8 << 20..=10 << 20).contains(&anon), "{out}");
}

#[test]
fn folio_fills_map_16_pages_a_fault_and_keep_every_byte_through_swap() {
    if !usable("folio_fills_map_16_pages_a_fault_and_keep_every_byte_through_swap") {
        return;
    }
    // 64K mTHP: below the limit a first write charges and maps 16 pages;
    // at the limit (no charge without reclaim) single pages, as the
    // kernel falls back.
    let script = preamble("8M")
        + "echo always > /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled\n\
           f0=$(stat pgfault memory.stat)\n\
           $H touch 4\n\
           echo small_faults $(( $(stat pgfault memory.stat) - f0 ))\n\
           $H touch 24\n\
           echo pswpout $(stat pswpout memory.stat)\n\
           echo pswpin $(stat pswpin memory.stat)\n\
           echo swap $(cat /sys/fs/cgroup/t/memory.swap.current)\n";
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "64M"], &script));
    assert!(out.starts_with("ok\nsmall_faults "), "{out}");
    assert!(out.contains("\nok\n"), "{out}");
    // 1024 pages written (and read twice) in 4M that fit: a fault per 16
    // pages, with room for the shell's own.
    assert!(value(&out, "small_faults") < 1024 / 4, "{out}");
    assert!(value(&out, "pswpout") > 2000, "{out}");
    assert!(value(&out, "pswpin") > 1000, "{out}");
    assert_eq!(value(&out, "swap"), 0, "{out}");
}

#[test]
fn python_past_memory_max_keeps_its_data_with_swap_and_is_oom_killed_without() {
    if !usable("python_past_memory_max_keeps_its_data_with_swap_and_is_oom_killed_without") {
        return;
    }
    let python = "import hashlib\n\
                  x = bytearray(48 << 20)\n\
                  for i in range(0, len(x), 4096): x[i] = i // 4096 % 251\n\
                  h = hashlib.sha256(x).hexdigest()\n\
                  print(hashlib.sha256(x).hexdigest() == h, sum(x[i] for i in range(0, len(x), 4096)))";
    let script = preamble("16M")
        + &format!(
            "python3 -c '{python}'\necho status $?\necho oom_kill $(stat oom_kill memory.events)\n"
        );
    let with_swap = stdout_of(&run(&["--mem", "256M", "--swap", "128M"], &script));
    let expected: u64 = (0..(48u64 << 20) / 4096).map(|i| i % 251).sum();
    assert!(
        with_swap.starts_with(&format!("True {expected}\n")),
        "{with_swap}"
    );
    assert_eq!(value(&with_swap, "status"), 0);
    assert_eq!(value(&with_swap, "oom_kill"), 0);
    let without = stdout_of(&run(&["--mem", "256M"], &script));
    assert_eq!(value(&without, "status"), 137, "{without}");
    assert_eq!(value(&without, "oom_kill"), 1, "{without}");
}

#[test]
fn memory_high_throttles_the_process_and_its_pressure_rises() {
    if !usable("memory_high_throttles_the_process_and_its_pressure_rises") {
        return;
    }
    let script = preamble("max")
        + "echo 8M > /sys/fs/cgroup/t/memory.high\n\
           $H touch 32\n\
           echo high $(stat high memory.events)\n\
           echo max $(stat max memory.events)\n\
           echo some $(awk '/^some/ { sub(\"total=\", \"\", $5); print $5 }' /sys/fs/cgroup/t/memory.pressure)\n";
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "128M"], &script));
    assert!(out.starts_with("ok\n"), "{out}");
    assert!(value(&out, "high") > 0, "{out}");
    assert_eq!(value(&out, "max"), 0, "{out}");
    assert!(value(&out, "some") > 0, "memory stalls count: {out}");
}

#[test]
fn a_fork_keeps_the_parents_swapped_pages_for_the_child() {
    if !usable("a_fork_keeps_the_parents_swapped_pages_for_the_child") {
        return;
    }
    let script = preamble("8M")
        + "$H fork 16\n\
           echo pswpin $(stat pswpin memory.stat)\n\
           echo swap $(cat /sys/fs/cgroup/t/memory.swap.current)\n";
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "64M"], &script));
    assert!(out.starts_with("ok\n"), "{out}");
    assert!(value(&out, "pswpin") > 0, "{out}");
    assert_eq!(value(&out, "swap"), 0, "every reference released: {out}");
}

#[test]
fn processes_killed_at_any_instant_leave_no_charge_or_swap_behind() {
    if !usable("processes_killed_at_any_instant_leave_no_charge_or_swap_behind") {
        return;
    }
    // Each round: a process filling 24M through 8M of memory.max in a
    // cgroup, killed after 0-290 ms, waited for; then nothing of it may be
    // left: no anonymous page charged, nothing on swap (memory.current may
    // keep the charge stock, as the kernel's does).
    let script = format!(
        "H={}\necho +memory > /sys/fs/cgroup/cgroup.subtree_control\n\
         mkdir /sys/fs/cgroup/v\necho 8M > /sys/fs/cgroup/v/memory.max\n\
         for i in $(seq 0 29); do\n\
           sh -c 'echo $$ > /sys/fs/cgroup/v/cgroup.procs; exec '$H' hold 24' > /dev/null &\n\
           sleep 0.$(( i % 30 / 3 ))$(( i % 10 ))\n\
           kill -9 $! ; wait $! 2>/dev/null\n\
           c=$(awk '$1 == \"anon\" {{ print $2 }}' /sys/fs/cgroup/v/memory.stat)\n\
           s=$(cat /sys/fs/cgroup/v/memory.swap.current)\n\
           [ \"$c\" = 0 ] && [ \"$s\" = 0 ] || echo \"round $i: left $c anon, $s on swap\"\n\
         done\n\
         echo swapused $(awk 'NR > 1 {{ u += $4 }} END {{ print u + 0 }}' /proc/swaps)\n",
        helper().display()
    );
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "64M"], &script));
    assert!(!out.contains("round"), "{out}");
    assert_eq!(value(&out, "swapused"), 0, "{out}");
}

#[test]
fn threads_and_forks_fault_reclaim_and_exit_with_every_byte_verified() {
    if !usable("threads_and_forks_fault_reclaim_and_exit_with_every_byte_verified") {
        return;
    }
    let seed: u64 = std::env::var("MEMCG_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let script = preamble("8M")
        + &format!(
            "$H stress {seed} 4 3 24 || echo failed seed {seed}\n\
             echo current $(cat /sys/fs/cgroup/t/memory.current)\n\
             echo swap $(cat /sys/fs/cgroup/t/memory.swap.current)\n"
        );
    let out = stdout_of(&run(&["--mem", "256M", "--swap", "128M"], &script));
    assert!(
        out.starts_with("ok\n"),
        "stress seed {seed} (MEMCG_STRESS_SEED replays): {out}"
    );
    assert!(value(&out, "current") < 2 << 20, "{out}");
    assert_eq!(value(&out, "swap"), 0, "{out}");
}

#[test]
fn processes_die_with_the_simulator() {
    if !usable("processes_die_with_the_simulator") {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let marker = tests_tmp().join("die-with-sim");
    let _ = std::fs::remove_file(&marker);
    let mut server = Command::new(assert_cmd::cargo::cargo_bin!("memcg"))
        .env("TMPDIR", tests_tmp())
        .args(["run", "--mem", "256M", "--swap", "64M", "--"])
        .arg("bash")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}; exec {} hold 16",
            marker.display(),
            helper().display()
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "ready\n");
    server.kill().unwrap();
    server.wait().unwrap();
    // The held process (its pid in the run's namespace is written, so
    // look for the program itself) is gone within a few seconds.
    let gone = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        !Command::new("pgrep")
            .args(["-f", &format!("{} hold 16", helper().display())])
            .status()
            .unwrap()
            .success()
    });
    assert!(gone, "a process outlived its simulator");
}
