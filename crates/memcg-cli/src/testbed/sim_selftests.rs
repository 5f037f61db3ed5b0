//! `memcg testbed selftests --sim`: the same selftest binaries `prepare`
//! built for each kernel, unmodified and dynamically linked, run on the
//! simulator under `memcg run --kernel K` (its shim makes them find the
//! simulated cgroup2 and puts their anonymous memory under the simulated
//! memcg), their TAP results compared test by test with what the booted
//! kernel K gave (the record, `selftests.expected`).
//!
//! A test may differ only where `selftests.sim-known` says why, naming the
//! result the simulator gives (`-`: the program never reported the test,
//! as when an earlier test hangs): a known line whose result changes, or
//! that now agrees, fails the run as an unexplained difference does, so the
//! record stays what the simulator does. A known line may name one kernel
//! (`KERNEL PROGRAM TEST RESULT: why`); it then wins over one for both.
//!
//! Each program runs as the booted guest runs it: cwd on a filesystem (a
//! RAM `--fs`), zswap turned on for `test_zswap`, on the guest's machine
//! (2G, 2 CPUs, 2G swap). Its stdout is line-buffered (`stdbuf -oL`, which
//! keeps the shim preloaded) so that a program stopped for hanging has
//! reported every test it finished. A program that prints nothing for
//! [`STALL`] is taken to hang and is stopped.
//!
//! Needs root and `/dev/fuse` (as `memcg run`) and a prepared cache; no
//! kernel boots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::selftests::{Expected, Results, parse_tap};
use super::{Kernel, Testbed, TestbedError, prepare};

/// The selftests that run on the simulator, in the booted guest's order
/// but test_core first (2 s).
pub(super) const SIM_PROGRAMS: [&str; 3] = ["test_core", "test_memcontrol", "test_zswap"];

/// How long one program may run under `memcg run`.
const TIMEOUT: Duration = Duration::from_secs(900);

/// How long a program may go without printing a line before it is taken
/// to hang (the longest test, `test_memcg_swap_max_peak`, takes a few
/// seconds in a release build).
const STALL: Duration = Duration::from_secs(90);

/// `(kernel or none for both, program, test)` -> (the simulator's result,
/// why it differs).
pub(super) type Known = BTreeMap<(Option<String>, String, String), (String, String)>;

/// One test's verdict.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Agree,
    /// The kernel's result is recorded as flaky (`any`).
    Flaky,
    Known(String),
    /// Differs with no known line, or from what its known line says.
    Differs(String),
}

/// Runs `programs` ([`SIM_PROGRAMS`] where empty) of each kernel in
/// `kernels` on the simulator and prints the comparison; returns 1 when a
/// test differs unexplained.
pub(super) fn main(
    testbed: &Testbed,
    kernels: &[Kernel],
    programs: &[String],
    expected: &Expected,
    known: &Known,
) -> anyhow::Result<i32> {
    if let Some(bad) = programs
        .iter()
        .find(|p| !SIM_PROGRAMS.contains(&p.as_str()))
    {
        anyhow::bail!("{bad:?} is not one of the simulator's selftests {SIM_PROGRAMS:?}");
    }
    let exe = std::env::current_exe()?;
    let mut unexplained = 0;
    for &kernel in kernels {
        let dir = testbed.kernel_dir(kernel);
        if !prepare::is_current(&dir) {
            return Err(TestbedError::NotPrepared(kernel, testbed.cache.clone()).into());
        }
        for program in SIM_PROGRAMS {
            if !programs.is_empty() && !programs.iter().any(|p| p == program) {
                continue;
            }
            let results = run_sim(&exe, kernel, &dir.join("selftests").join(program))?;
            let rows = compare(kernel, program, &results, expected, known);
            unexplained += print_table(kernel, program, &rows);
        }
    }
    if unexplained > 0 {
        eprintln!(
            "memcg testbed: {unexplained} selftest results on the simulator differ from the \
             booted kernels' with no known reason (tests/differential/selftests.sim-known)"
        );
        return Ok(1);
    }
    Ok(0)
}

/// One test of the comparison as `memcg reproduce` reports it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct SimRow {
    pub kernel: String,
    pub program: String,
    pub test: String,
    /// The booted kernel's result (the record).
    pub booted: String,
    /// The simulator's (`-`: never reported).
    pub simulator: String,
    /// `agree`, `known: why`, or `DIFFERS: why`.
    pub verdict: String,
}

/// Every simulator selftest of every kernel, run and compared with the
/// record and the known differences in the repository's
/// `tests/differential/` (what `memcg testbed selftests --sim` prints),
/// for `memcg reproduce`. `Err` with the reason when it cannot run (the
/// test bed at `cache` not prepared, the record not found).
pub(crate) fn comparison(cache: Option<&Path>) -> anyhow::Result<Result<Vec<SimRow>, String>> {
    let testbed = Testbed::open(cache);
    let expected_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/differential/selftests.expected");
    if !expected_path.exists() {
        return Ok(Err(format!("no record at {}", expected_path.display())));
    }
    let expected = super::selftests::read_expected(&expected_path)?;
    let known = read_known(&known_path(&expected_path))?;
    let exe = std::env::current_exe()?;
    let mut rows = Vec::new();
    for kernel in Kernel::ALL {
        let dir = testbed.kernel_dir(kernel);
        if !prepare::is_current(&dir) {
            return Ok(Err(TestbedError::NotPrepared(
                kernel,
                testbed.cache.clone(),
            )
            .to_string()));
        }
        for program in SIM_PROGRAMS {
            let results = run_sim(&exe, kernel, &dir.join("selftests").join(program))?;
            for (test, booted, simulator, verdict) in
                compare(kernel, program, &results, &expected, &known)
            {
                rows.push(SimRow {
                    kernel: kernel.label().to_owned(),
                    program: program.to_owned(),
                    test,
                    booted,
                    simulator,
                    verdict: note(&verdict),
                });
            }
        }
    }
    Ok(Ok(rows))
}

/// A verdict as the tables print it.
fn note(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Agree => "agree".to_string(),
        Verdict::Flaky => "agree (flaky on the kernel: not compared)".to_string(),
        Verdict::Known(why) => format!("known: {why}"),
        Verdict::Differs(why) => format!("DIFFERS: {why}"),
    }
}

/// What the guest script does before `program` (selftests.rs's SCRIPT):
/// zswap on for test_zswap, as its skip message asks.
fn before(program: &str) -> &'static str {
    match program {
        "test_zswap" => "echo 1 > /sys/module/zswap/parameters/enabled || exit 1; ",
        _ => "",
    }
}

/// `memcg run --kernel K` on the test bed guest's machine (2G, 2 CPUs, 2G
/// swap, a RAM filesystem as the cwd: `/mnt/fs-PROGRAM-K`, a directory of
/// its own, since a run stopped as hung removes the one it made a moment
/// after it is gone), running `binary` line-buffered; stopped after
/// [`TIMEOUT`], or after [`STALL`] without a line.
fn run_sim(exe: &Path, kernel: Kernel, binary: &Path) -> anyhow::Result<Results> {
    let name = binary.file_name().unwrap_or_default().to_string_lossy();
    let out = tempfile::NamedTempFile::new()?;
    let dir = format!("/mnt/fs-{name}-{}", kernel.label());
    let script = format!("{}cd {dir} && exec stdbuf -oL \"$0\" 2>&1", before(&name));
    let mut child = Command::new(exe)
        .args(["run", "--kernel", kernel.label(), "--mem", "2G"])
        .args([
            "--cpus",
            "2",
            "--swap",
            "2G",
            "--fs",
            &format!("{dir}=ram:400M"),
        ])
        .args(["--", "sh", "-c", &script])
        .arg(binary)
        .stdin(Stdio::null())
        .stdout(out.reopen()?)
        .stderr(Stdio::inherit())
        .spawn()?;
    let start = Instant::now();
    let status = wait_or_stop(&mut child, out.path(), start)?;
    let text = read_back(out.reopen()?)?;
    eprintln!(
        "sim {kernel:<4} {name}: {} in {:.1} s",
        status
            .as_ref()
            .map_or_else(|e| e.to_string(), |s| s.to_string()),
        start.elapsed().as_secs_f64()
    );
    let prefixed: String = text.lines().map(|l| format!("{name}: {l}\n")).collect();
    let results = parse_tap(&prefixed);
    if results.is_empty() || status.is_err() {
        // A whole-program skip ("1..0 # SKIP cgroup v2 isn't mounted":
        // the program did not recognise the simulated cgroup2), a crash or
        // a hang: say how its output ends.
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        eprintln!(
            "sim {kernel:<4} {name}: {} tests reported; its output ends:\n{}",
            results.len(),
            tail.join("\n")
        );
    }
    Ok(results)
}

/// Waits for `child`; kills it (and with `memcg run` its processes) when it
/// runs past [`TIMEOUT`] or `out` has not grown for [`STALL`], and says
/// which in the error.
fn wait_or_stop(
    child: &mut std::process::Child,
    out: &Path,
    start: Instant,
) -> anyhow::Result<Result<std::process::ExitStatus, String>> {
    let (mut size, mut grew) = (0, Instant::now());
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ok(status));
        }
        let now = std::fs::metadata(out).map_or(size, |m| m.len());
        if now != size {
            (size, grew) = (now, Instant::now());
        }
        let why = if start.elapsed() > TIMEOUT {
            Some(format!("stopped after {} s", TIMEOUT.as_secs()))
        } else if grew.elapsed() > STALL {
            Some(format!("hung (no output for {} s)", STALL.as_secs()))
        } else {
            None
        };
        if let Some(why) = why {
            child.kill()?;
            child.wait()?;
            return Ok(Err(why));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_back(mut file: std::fs::File) -> anyhow::Result<String> {
    use std::io::{Read, Seek};
    let mut bytes = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One row per test either side ran: (test, kernel's, simulator's, verdict).
type Row = (String, String, String, Verdict);

fn compare(
    kernel: Kernel,
    program: &str,
    sim: &Results,
    expected: &Expected,
    known: &Known,
) -> Vec<Row> {
    let mut tests: Vec<String> = expected
        .keys()
        .filter(|(k, p, _)| k == kernel.label() && p == program)
        .map(|(_, _, t)| t.clone())
        .collect();
    tests.extend(
        sim.keys()
            .filter(|(p, _)| p == program)
            .map(|(_, t)| t.clone()),
    );
    tests.sort();
    tests.dedup();
    tests
        .into_iter()
        .map(|test| {
            let want = expected
                .get(&(kernel.label().into(), program.into(), test.clone()))
                .cloned()
                .unwrap_or_else(|| "-".into());
            let got = sim
                .get(&(program.into(), test.clone()))
                .cloned()
                .unwrap_or_else(|| "-".into());
            let why = known
                .get(&(Some(kernel.label().into()), program.into(), test.clone()))
                .or_else(|| known.get(&(None, program.into(), test.clone())));
            let verdict = verdict(&want, &got, why);
            (test, want, got, verdict)
        })
        .collect()
}

/// The rule: equal results agree; a difference needs a known line naming
/// the simulator's result (or `any`, for a result that varies on the
/// simulator); a known line for a test that agrees is stale.
fn verdict(kernel: &str, sim: &str, known: Option<&(String, String)>) -> Verdict {
    match known {
        // The simulator's own result varies from run to run.
        Some((result, why)) if result == "any" => Verdict::Known(format!("varies: {why}")),
        None if kernel == "any" => Verdict::Flaky,
        None if kernel == sim => Verdict::Agree,
        None => Verdict::Differs("no known reason".into()),
        Some((result, _)) if kernel == sim || kernel == "any" => Verdict::Differs(format!(
            "agrees now: its known line (simulator: {result}) is stale"
        )),
        Some((result, why)) if result == sim => Verdict::Known(why.clone()),
        Some((result, _)) => Verdict::Differs(format!("the known line says {result}")),
    }
}

/// Prints one program's table; returns how many rows differ unexplained.
fn print_table(kernel: Kernel, program: &str, rows: &[Row]) -> usize {
    let count = |f: fn(&Verdict) -> bool| rows.iter().filter(|r| f(&r.3)).count();
    let agree = count(|v| matches!(v, Verdict::Agree | Verdict::Flaky));
    let known = count(|v| matches!(v, Verdict::Known(_)));
    let differs = count(|v| matches!(v, Verdict::Differs(_)));
    println!(
        "{program} on kernel {kernel} and on the simulator (memcg run --kernel {kernel}): \
         {agree} of {} agree, {known} known differences, {differs} unexplained",
        rows.len()
    );
    for (test, want, got, verdict) in rows {
        println!("  {test:54} {want:7} {got:7} {}", note(verdict));
    }
    differs
}

/// Reads `[KERNEL] PROGRAM TEST RESULT: why` lines (`#` comments, blank
/// lines); KERNEL, where given, is a kernel's label (`6.12`, `7.3`).
pub(super) fn read_known(path: &Path) -> anyhow::Result<Known> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut known = Known::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parsed = line.split_once(": ").and_then(|(what, why)| {
            let mut words: Vec<&str> = what.split_whitespace().collect();
            let kernel = words
                .first()
                .filter(|w| Kernel::ALL.iter().any(|k| k.label() == **w))
                .map(|w| w.to_string());
            if kernel.is_some() {
                words.remove(0);
            }
            (words.len() >= 3).then(|| {
                let key = (kernel, words[0].to_string(), words[1].to_string());
                (key, (words[2..].join(" "), why.trim().to_string()))
            })
        });
        let (key, value) = parsed.ok_or_else(|| {
            anyhow::anyhow!(
                "{}: {line:?} is not `[KERNEL] PROGRAM TEST RESULT: why`",
                path.display()
            )
        })?;
        known.insert(key, value);
    }
    Ok(known)
}

/// The known-differences file beside the record.
pub(super) fn known_path(expected: &Path) -> PathBuf {
    expected.with_file_name("selftests.sim-known")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(result: &str) -> (String, String) {
        (result.to_string(), "threaded cgroups".to_string())
    }

    #[test]
    fn a_difference_needs_a_known_line_naming_the_simulators_result() {
        assert_eq!(verdict("ok", "ok", None), Verdict::Agree);
        assert_eq!(verdict("any", "not ok", None), Verdict::Flaky);
        assert!(matches!(verdict("ok", "skip", None), Verdict::Differs(_)));
        assert_eq!(
            verdict("ok", "not ok", Some(&known("not ok"))),
            Verdict::Known("threaded cgroups".into())
        );
        assert!(matches!(
            verdict("ok", "skip", Some(&known("not ok"))),
            Verdict::Differs(_)
        ));
        // A known line for a test that now agrees is stale.
        assert!(matches!(
            verdict("ok", "ok", Some(&known("not ok"))),
            Verdict::Differs(_)
        ));
    }

    #[test]
    fn known_lines_parse_with_two_word_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known");
        std::fs::write(
            &path,
            "# comment\n\ntest_core test_x not ok: why: because\ntest_core test_y skip: no cpu\n",
        )
        .unwrap();
        let known = read_known(&path).unwrap();
        assert_eq!(
            known[&(None, "test_core".into(), "test_x".into())],
            ("not ok".into(), "why: because".into())
        );
        assert_eq!(
            known[&(None, "test_core".into(), "test_y".into())].0,
            "skip"
        );
        std::fs::write(&path, "6.12 test_zswap test_z -: killed\n").unwrap();
        let known = read_known(&path).unwrap();
        assert_eq!(
            known[&(Some("6.12".into()), "test_zswap".into(), "test_z".into())],
            ("-".into(), "killed".into())
        );
        std::fs::write(&path, "test_core test_x\n").unwrap();
        assert!(read_known(&path).is_err());
    }
}
