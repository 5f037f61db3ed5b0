//! `memcg testbed selftests`: the kernels' own cgroup selftests
//! (`test_memcontrol`, `test_zswap`, `test_core`, built from each kernel's
//! source package by `prepare`) run on the kernel they came with, as that
//! kernel ships (MGLRU on), one boot per kernel, their TAP results
//! compared with the expectations recorded in
//! `tests/differential/selftests.expected`. With `--sim` the same binaries
//! run on the simulator instead and are compared with that record
//! ([`sim_selftests`](super::sim_selftests)), their anonymous memory
//! under the simulated memcg (issue 25's shim).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{GuestSpec, GuestSwap, Kernel, Testbed};

/// The guest script: the selftests with their cwd on a real filesystem
/// (test_memcontrol makes its page-cache files there) and zswap on for
/// test_zswap, as its skip message asks; then test_core (cgroup core
/// rules only: 2 s).
const SCRIPT: &str = "\
cd /mnt/fs || exit 1
/selftests/test_memcontrol 2>&1 | sed 's/^/test_memcontrol: /'
echo 1 > /sys/module/zswap/parameters/enabled
/selftests/test_zswap 2>&1 | sed 's/^/test_zswap: /'
/selftests/test_core 2>&1 | sed 's/^/test_core: /'
";

/// `memcg testbed selftests`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct SelftestArgs {
    /// The kernels [default: all].
    #[arg(long, value_delimiter = ',')]
    kernel: Vec<Kernel>,
    /// MGLRU as the kernels ship it (on) or off, as the corpus runs.
    #[arg(long, value_enum, default_value = "on")]
    mglru: crate::Switch,
    /// The recorded results (`KERNEL PROGRAM TEST RESULT` lines).
    #[arg(long, default_value = "tests/differential/selftests.expected")]
    expected: PathBuf,
    /// Run the selftests on the simulator (`memcg run --kernel K`, root
    /// and /dev/fuse) instead of booting the kernels, and compare them
    /// with each kernel's record; differences must be known.
    #[arg(long)]
    sim: bool,
    /// With --sim: the known differences (`PROGRAM TEST RESULT: why`)
    /// [default: selftests.sim-known beside --expected].
    #[arg(long)]
    known: Option<PathBuf>,
    /// With --sim: only these programs (test_core, test_memcontrol,
    /// test_zswap) [default: all three].
    #[arg(long, value_delimiter = ',')]
    program: Vec<String>,
    #[arg(long)]
    cache: Option<PathBuf>,
}

/// One test's outcome: (program, test) -> ok | not ok | skip.
pub(super) type Results = BTreeMap<(String, String), String>;

/// The record: (kernel, program, test) -> ok | not ok | skip | any.
pub(super) type Expected = BTreeMap<(String, String, String), String>;

/// Whether `result` of (program, test) `key` on `kernel` is what the
/// record says (or the record says it varies).
fn matches(kernel: Kernel, key: &(String, String), result: &str, expected: &Expected) -> bool {
    let (program, test) = key;
    expected
        .get(&(kernel.label().into(), program.clone(), test.clone()))
        .is_some_and(|want| want == result || want == "any")
}

/// How many of `results` differ from the record.
fn differing(kernel: Kernel, results: &Results, expected: &Expected) -> usize {
    results
        .iter()
        .filter(|(key, result)| !matches(kernel, key, result, expected))
        .count()
}

/// How many times a kernel whose results differ from the record is
/// booted before a difference counts.
const MAX_BOOTS: u32 = 3;

/// Runs the selftests; returns 1 when a result differs from the record
/// (a kernel with differences is booted again, up to [`MAX_BOOTS`] in
/// all, and a test differs only if it differs in every boot).
pub(crate) fn main(args: &SelftestArgs) -> anyhow::Result<i32> {
    let testbed = Testbed::open(args.cache.as_deref());
    let kernels = if args.kernel.is_empty() {
        Kernel::ALL.to_vec()
    } else {
        args.kernel.clone()
    };
    let expected = read_expected(&args.expected)?;
    if args.sim {
        let known_path = args
            .known
            .clone()
            .unwrap_or_else(|| super::sim_selftests::known_path(&args.expected));
        let known = super::sim_selftests::read_known(&known_path)?;
        return super::sim_selftests::main(&testbed, &kernels, &args.program, &expected, &known);
    }
    let mut changed = 0;
    for kernel in kernels {
        let mglru = args.mglru == crate::Switch::On;
        let mut results = run_kernel(&testbed, kernel, mglru)?;
        let mut boots = 1;
        while boots < MAX_BOOTS && differing(kernel, &results, &expected) > 0 {
            // The kernels' own timing varies under emulation: a test that
            // differs is taken from the next boot, and differs only if it
            // differs in every boot.
            eprintln!("kernel {kernel}: results differ from the record; booting it once more");
            let again = run_kernel(&testbed, kernel, mglru)?;
            boots += 1;
            for (key, result) in results.iter_mut() {
                if let Some(next) = again.get(key)
                    && !matches(kernel, key, result, &expected)
                {
                    *result = next.clone();
                }
            }
        }
        println!("kernel {kernel}:");
        for (key, result) in &results {
            let (program, test) = key;
            let note = match expected.get(&(kernel.label().into(), program.clone(), test.clone())) {
                _ if matches(kernel, key, result, &expected) => "",
                Some(_) => "  <- differs from the record (in every boot)",
                None => "  <- not recorded",
            };
            if !note.is_empty() {
                changed += 1;
            }
            println!("  {program:16} {test:40} {result}{note}");
        }
    }
    if changed > 0 {
        eprintln!(
            "memcg testbed: {changed} selftest results differ from {}",
            args.expected.display()
        );
        return Ok(1);
    }
    Ok(0)
}

fn run_kernel(testbed: &Testbed, kernel: Kernel, mglru: bool) -> anyhow::Result<Results> {
    let spec = GuestSpec {
        kernel,
        swap: Some(GuestSwap::Disk(2 << 30)),
        mglru,
        brd_bytes: Some(400 << 20),
        timeout: Duration::from_secs(900),
        ..GuestSpec::default()
    };
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("selftests.sh");
    std::fs::write(&script, SCRIPT)?;
    let out = testbed.run(&spec, &script, &[], &[])?;
    Ok(parse_tap(&String::from_utf8_lossy(&out.stdout)))
}

/// `PROGRAM: ok N NAME`, `PROGRAM: not ok N NAME`, `PROGRAM: ok N # SKIP
/// NAME` lines as (program, test) -> ok | not ok | skip. A test printed
/// twice (a forked child flushing the parent's buffered output) counts
/// once.
pub(super) fn parse_tap(text: &str) -> Results {
    let mut results = Results::new();
    for line in text.lines() {
        let Some((program, rest)) = line.split_once(": ") else {
            continue;
        };
        let (result, rest) = if let Some(rest) = rest.strip_prefix("not ok ") {
            ("not ok", rest)
        } else if let Some(rest) = rest.strip_prefix("ok ") {
            ("ok", rest)
        } else {
            continue;
        };
        let name = rest.split_once(' ').map_or("", |(_, name)| name);
        let (result, name) = match name.strip_prefix("# SKIP ") {
            Some(name) => ("skip", name),
            None => (result, name),
        };
        results.insert((program.to_string(), name.to_string()), result.to_string());
    }
    results
}

pub(super) fn read_expected(path: &Path) -> anyhow::Result<Expected> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut expected = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        anyhow::ensure!(
            words.len() >= 4,
            "{}: {line:?} is not `KERNEL PROGRAM TEST RESULT`",
            path.display()
        );
        let key = (words[0].into(), words[1].into(), words[2].into());
        expected.insert(key, words[3..].join(" "));
    }
    Ok(expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_lines_parse_once_each() {
        let text = "test_zswap: TAP version 13\n\
                    test_zswap: ok 1 test_zswap_usage\n\
                    test_zswap: not ok 2 test_swapin_nozswap\n\
                    test_zswap: not ok 2 test_swapin_nozswap\n\
                    test_zswap: ok 6 # SKIP test_no_kmem_bypass\n";
        let results = parse_tap(text);
        assert_eq!(results.len(), 3);
        let get = |t: &str| results[&("test_zswap".to_string(), t.to_string())].as_str();
        assert_eq!(get("test_zswap_usage"), "ok");
        assert_eq!(get("test_swapin_nozswap"), "not ok");
        assert_eq!(get("test_no_kmem_bypass"), "skip");
    }
}
