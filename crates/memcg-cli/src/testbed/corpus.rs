//! `memcg testbed corpus`: the differential corpus (`tests/differential/`)
//! run on the simulator under each kernel profile (one `memcg run` per
//! scenario) and on each booted kernel (one boot per set of machine needs,
//! every scenario of the set run in it by a driver script, delimited), then
//! judged by [`compare`](super::compare)'s rule: an agreement table per
//! scenario, totals, every disagreement, and a JSON record. It fails when
//! an observation disagrees that no scenario declares `known`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::compare::{self, MachineNeeds, Observations, Scenario};
use super::{GuestFs, GuestSpec, GuestSwap, Kernel, Testbed};

/// `memcg testbed corpus`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct CorpusArgs {
    /// The kernels to boot [default: 6.12,7.3; none with --kernel-obs].
    #[arg(long, value_delimiter = ',')]
    kernels: Vec<Kernel>,
    /// The simulator's kernel profiles (`memcg run --kernel P`)
    /// [default: 6.12,6.14,7.3 where `memcg run` has --kernel, else its
    /// one default, v6.14].
    #[arg(long, value_delimiter = ',')]
    profiles: Vec<String>,
    /// Write every observation and verdict here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Take the kernels' observations from a file --record-kernels wrote
    /// instead of booting them (unless --kernels names some): the
    /// simulator is then judged with no kernel at hand.
    #[arg(long, value_name = "JSON")]
    kernel_obs: Option<PathBuf>,
    /// Write the kernels' observations (only) to this file, for
    /// --kernel-obs.
    #[arg(long, value_name = "JSON")]
    record_kernels: Option<PathBuf>,
    /// Run only the scenarios whose names match one of these globs.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Seconds one scenario may take on the simulator (a kernel's boot
    /// gets 120 s plus this per scenario).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    #[arg(long)]
    cache: Option<PathBuf>,
    /// The corpus [default: tests/differential].
    dir: Option<PathBuf>,
}

/// One run of one scenario: a kernel's, or the simulator's under a profile.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ColumnRun {
    pub(crate) observations: Observations,
    /// The script's exit status (-1: it did not run to its end).
    pub(crate) status: i32,
    pub(crate) stderr: String,
    pub(crate) seconds: f64,
}

/// Runs the corpus; returns the exit status (1 when an unexplained
/// disagreement is found).
pub(crate) fn main(args: CorpusArgs) -> anyhow::Result<i32> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("tests/differential"));
    let scenarios = load_corpus(&dir, &args.only)?;
    anyhow::ensure!(!scenarios.is_empty(), "no scenario in {}", dir.display());
    let helpers = Helpers::build(&dir)?;
    // The binary's path, once: a rebuild during a run replaces the file,
    // after which the running one's own path reads "(deleted)".
    let exe = std::env::current_exe()?;
    let profiles = profiles(&exe, &args.profiles)?;
    let labels: Vec<&str> = profiles.iter().map(|p| p.label.as_str()).collect();
    let mut runs: BTreeMap<String, BTreeMap<String, ColumnRun>> = BTreeMap::new();
    if let Some(path) = &args.kernel_obs {
        for (name, kernel, run) in load_kernel_obs(path)? {
            runs.entry(name).or_default().insert(kernel, run);
        }
    }
    let timeout = Duration::from_secs(args.timeout);
    for profile in &profiles {
        for (name, run) in run_sims(&exe, &scenarios, profile, &helpers, timeout)? {
            let column = format!("sim:{}", profile.label);
            runs.entry(name).or_default().insert(column, run);
        }
    }
    let kernels = if args.kernels.is_empty() && args.kernel_obs.is_none() {
        Kernel::ALL.to_vec()
    } else {
        args.kernels.clone()
    };
    let testbed = Testbed::open(args.cache.as_deref());
    for &kernel in &kernels {
        for (name, run) in run_kernel(&testbed, kernel, &scenarios, &helpers, args.timeout)? {
            runs.entry(name)
                .or_default()
                .insert(kernel.label().into(), run);
        }
        // Kept as soon as measured: a later failure loses no boot.
        if let Some(path) = &args.json {
            let partial = super::report::judge_all(&scenarios, &runs, &labels);
            std::fs::write(path, serde_json::to_string_pretty(&partial)?)?;
        }
    }
    if let Some(path) = &args.record_kernels {
        std::fs::write(path, serde_json::to_string_pretty(&kernel_obs(&runs))?)?;
    }
    let report = super::report::judge_all(&scenarios, &runs, &labels);
    super::report::print(&report, &labels);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        eprintln!("wrote {}", path.display());
    }
    // Only the rule fails a run: kernels differing from each other, or
    // the simulator from the other kernel's value, are measurements.
    let failed = report
        .totals
        .iter()
        .any(|(name, t)| name.starts_with("rule:") && t.disagree > 0);
    Ok(i32::from(failed))
}

/// The corpus's C helpers (every `*.c` of its directory, such as
/// `usemem.c`), built once with the host's `cc`, dynamically linked (the
/// shim of `memcg run` comes in through the dynamic loader; a guest runs
/// them on the host's libc, shipped with bash). Scenarios find them in
/// `$CORPUS_BIN` on the simulator and beside themselves in a guest.
pub(crate) struct Helpers {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

impl Helpers {
    /// Builds each `*.c` of `corpus` into a temporary directory.
    pub(crate) fn build(corpus: &Path) -> anyhow::Result<Helpers> {
        let dir = tempfile::tempdir()?;
        let mut files = Vec::new();
        let mut sources: Vec<PathBuf> = std::fs::read_dir(corpus)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        sources.sort();
        for source in sources {
            let Some(stem) = source.file_stem() else {
                continue;
            };
            let binary = dir.path().join(stem);
            let status = Command::new("cc")
                .args(["-O1", "-o"])
                .arg(&binary)
                .arg(&source)
                .status()?;
            anyhow::ensure!(status.success(), "cc {} failed", source.display());
            files.push(binary);
        }
        Ok(Helpers { dir, files })
    }
}

/// The scenarios of `dir` (every `*.sh` with a `# machine:` line; the
/// others are support files such as `lib.sh`), filtered by `only`.
pub(crate) fn load_corpus(dir: &Path, only: &[String]) -> anyhow::Result<Vec<Scenario>> {
    let mut scenarios = Vec::new();
    for path in scripts(dir)? {
        let text = std::fs::read_to_string(&path)?;
        if !text.lines().any(|l| l.starts_with("# machine:")) {
            continue;
        }
        let scenario = Scenario::load(&path)?;
        if only.is_empty() || only.iter().any(|g| compare::glob(g, &scenario.name)) {
            scenarios.push(scenario);
        }
    }
    Ok(scenarios)
}

/// Every `*.sh` of `dir`, sorted.
fn scripts(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// A simulator profile: its label and the `--kernel` value (none: the
/// simulator's default, which is v6.14).
#[derive(Debug, Clone)]
pub(crate) struct Profile {
    pub(crate) label: String,
    flag: Option<String>,
}

/// The profiles asked for, or the default ones.
fn profiles(exe: &Path, asked: &[String]) -> anyhow::Result<Vec<Profile>> {
    let help = Command::new(exe).args(["run", "--help"]).output()?;
    let has_flag = String::from_utf8_lossy(&help.stdout).contains("--kernel");
    if asked.is_empty() {
        if !has_flag {
            return Ok(vec![Profile {
                label: "6.14".into(),
                flag: None,
            }]);
        }
        return Ok(["6.12", "6.14", "7.3"]
            .iter()
            .map(|p| Profile {
                label: p.to_string(),
                flag: Some(p.to_string()),
            })
            .collect());
    }
    anyhow::ensure!(
        has_flag || asked.iter().all(|p| p == "6.14"),
        "this memcg has no `run --kernel`: only its default profile, 6.14, can run"
    );
    Ok(asked
        .iter()
        .map(|p| Profile {
            label: p.clone(),
            flag: has_flag.then(|| p.clone()),
        })
        .collect())
}

/// Every scenario on the simulator under `profile`, one by one.
fn run_sims(
    exe: &Path,
    scenarios: &[Scenario],
    profile: &Profile,
    helpers: &Helpers,
    timeout: Duration,
) -> anyhow::Result<Vec<(String, ColumnRun)>> {
    let mut runs = Vec::new();
    for scenario in scenarios {
        let run = run_sim(exe, scenario, profile, helpers, timeout)?;
        eprintln!(
            "sim {:<5} {:<34} {:>3} observations, status {}, {:.1} s",
            profile.label,
            scenario.name,
            run.observations.len(),
            run.status,
            run.seconds
        );
        runs.push((scenario.name.clone(), run));
    }
    Ok(runs)
}

/// `memcg run`'s machine options for `needs`.
pub(crate) fn sim_args(needs: &MachineNeeds) -> Vec<String> {
    let mut args = vec![
        "--mem".to_string(),
        needs.mem_bytes.to_string(),
        "--cpus".to_string(),
        needs.cpus.to_string(),
    ];
    if let Some(bytes) = needs.swap_bytes {
        args.extend(["--swap".to_string(), bytes.to_string()]);
    }
    if let Some(bytes) = needs.fs_bytes {
        args.extend(["--fs".to_string(), format!("/mnt/fs=ram:{bytes}")]);
    }
    args
}

/// Runs one scenario under `memcg run`, killed after `timeout`.
fn run_sim(
    exe: &Path,
    scenario: &Scenario,
    profile: &Profile,
    helpers: &Helpers,
    timeout: Duration,
) -> anyhow::Result<ColumnRun> {
    let out = tempfile::tempfile()?;
    let err = tempfile::tempfile()?;
    let mut command = Command::new(exe);
    command.arg("run");
    if let Some(flag) = &profile.flag {
        command.args(["--kernel", flag]);
    }
    let path = std::fs::canonicalize(&scenario.path)?;
    command
        .args(sim_args(&scenario.machine))
        .arg("--")
        .arg("bash")
        .arg(path)
        .env("MEMCG_ENV", "sim")
        .env("CORPUS_BIN", helpers.dir.path())
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(err.try_clone()?);
    let start = Instant::now();
    let mut child = command.spawn()?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status.code().unwrap_or(-1);
        }
        if start.elapsed() > timeout {
            child.kill()?;
            child.wait()?;
            break -1;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(ColumnRun {
        observations: compare::parse_observations(&read_back(out)?),
        status,
        stderr: read_back(err)?,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What was written to a temporary file.
fn read_back(mut file: std::fs::File) -> anyhow::Result<String> {
    use std::io::{Read, Seek};
    let mut text = String::new();
    file.seek(std::io::SeekFrom::Start(0))?;
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// The delimiter lines of the kernel-side driver.
const BEGIN: &str = "@@corpus-begin ";
const END: &str = "@@corpus-end ";

/// The driver one boot runs: each scenario named in its arguments, in
/// the guest's working directory (where the test bed copies the files),
/// its output between delimiter lines on both streams.
const DRIVER: &str = r#"# memcg testbed corpus's driver: runs each scenario named, delimited.
for s in "$@"; do
	echo "@@corpus-begin $s"
	echo "@@corpus-begin $s" >&2
	timeout "$CORPUS_TIMEOUT" bash "./$s.sh" < /dev/null
	st=$?
	echo "@@corpus-end $s $st"
	echo "@@corpus-end $s $st" >&2
done
"#;

/// Runs every scenario on `kernel`: one boot per set of machine needs.
fn run_kernel(
    testbed: &Testbed,
    kernel: Kernel,
    scenarios: &[Scenario],
    helpers: &Helpers,
    timeout_s: u64,
) -> anyhow::Result<Vec<(String, ColumnRun)>> {
    let mut groups: BTreeMap<MachineNeeds, Vec<&Scenario>> = BTreeMap::new();
    for scenario in scenarios {
        groups.entry(scenario.machine).or_default().push(scenario);
    }
    let mut results = Vec::new();
    for (needs, group) in groups {
        let start = Instant::now();
        eprintln!(
            "kernel {kernel}: booting for {} scenarios ({})",
            group.len(),
            needs.describe()
        );
        let runs = boot_group(testbed, kernel, &needs, &group, helpers, timeout_s);
        let seconds = start.elapsed().as_secs_f64();
        match runs {
            Ok(runs) => {
                eprintln!(
                    "kernel {kernel}: {} scenarios in {seconds:.0} s",
                    runs.len()
                );
                results.extend(runs);
            }
            Err(e) => {
                eprintln!(
                    "kernel {kernel}: the boot for {} failed: {e:#}",
                    needs.describe()
                );
                results.extend(group.iter().map(|s| {
                    let run = ColumnRun {
                        status: -1,
                        stderr: format!("{e:#}"),
                        ..ColumnRun::default()
                    };
                    (s.name.clone(), run)
                }));
            }
        }
    }
    Ok(results)
}

/// One boot of `kernel` running `group`.
fn boot_group(
    testbed: &Testbed,
    kernel: Kernel,
    needs: &MachineNeeds,
    group: &[&Scenario],
    helpers: &Helpers,
    timeout_s: u64,
) -> anyhow::Result<Vec<(String, ColumnRun)>> {
    let work = tempfile::tempdir()?;
    let driver = work.path().join("corpus-driver.sh");
    std::fs::write(&driver, format!("CORPUS_TIMEOUT={timeout_s}\n{DRIVER}"))?;
    let dir = group[0].path.parent().unwrap_or(Path::new("."));
    let mut files: Vec<PathBuf> = group.iter().map(|s| s.path.clone()).collect();
    files.extend(helpers.files.iter().cloned());
    for path in scripts(dir)? {
        let text = std::fs::read_to_string(&path)?;
        if !text.lines().any(|l| l.starts_with("# machine:")) {
            files.push(path);
        }
    }
    let spec = GuestSpec {
        kernel,
        mem_bytes: needs.mem_bytes,
        cpus: needs.cpus,
        swap: needs.swap_bytes.map(GuestSwap::Disk),
        zswap: needs.zswap,
        mglru: false,
        brd_bytes: needs.fs_bytes,
        fs: GuestFs::Xfs,
        timeout: Duration::from_secs(120 + timeout_s * group.len() as u64),
    };
    let args: Vec<String> = group.iter().map(|s| s.name.clone()).collect();
    let out = testbed.run(&spec, &driver, &files, &args)?;
    let stdout = split_delimited(&String::from_utf8_lossy(&out.stdout));
    let stderr = split_delimited(&String::from_utf8_lossy(&out.stderr));
    Ok(group
        .iter()
        .map(|s| {
            let (text, status) = stdout.get(&s.name).cloned().unwrap_or((String::new(), -1));
            let run = ColumnRun {
                observations: compare::parse_observations(&text),
                status,
                stderr: stderr.get(&s.name).map(|e| e.0.clone()).unwrap_or_default(),
                seconds: 0.0,
            };
            (s.name.clone(), run)
        })
        .collect())
}

/// A driver's output cut at its delimiters: each scenario's text and
/// status (-1 when its end line is missing: it did not finish).
pub(crate) fn split_delimited(text: &str) -> BTreeMap<String, (String, i32)> {
    let mut parts: BTreeMap<String, (String, i32)> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix(BEGIN) {
            current = Some(name.trim().to_string());
            parts.insert(name.trim().to_string(), (String::new(), -1));
        } else if let Some(rest) = line.strip_prefix(END) {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(status)) = (words.next(), words.next())
                && let Some(part) = parts.get_mut(name)
            {
                part.1 = status.parse().unwrap_or(-1);
            }
            current = None;
        } else if let Some(part) = current.as_ref().and_then(|n| parts.get_mut(n)) {
            part.0.push_str(line);
            part.0.push('\n');
        }
    }
    parts
}

/// Kernel observations as `--record-kernels` writes them:
/// `kernel -> scenario -> key -> value`.
type KernelObs = BTreeMap<String, BTreeMap<String, Observations>>;

/// The kernels' observations of `runs` (the boots that ran).
fn kernel_obs(runs: &BTreeMap<String, BTreeMap<String, ColumnRun>>) -> KernelObs {
    let mut obs = KernelObs::new();
    for (scenario, columns) in runs {
        for (column, run) in columns {
            let ran = !(run.status == -1 && run.observations.is_empty());
            if ran && !column.starts_with("sim:") {
                obs.entry(column.clone())
                    .or_default()
                    .insert(scenario.clone(), run.observations.clone());
            }
        }
    }
    obs
}

/// The kernels' runs recorded by `--record-kernels`.
fn load_kernel_obs(path: &Path) -> anyhow::Result<Vec<(String, String, ColumnRun)>> {
    let obs: KernelObs = serde_json::from_slice(&std::fs::read(path)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut runs = Vec::new();
    for (kernel, scenarios) in obs {
        for (scenario, observations) in scenarios {
            let run = ColumnRun {
                observations,
                ..ColumnRun::default()
            };
            runs.push((scenario, kernel.clone(), run));
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_output_splits() {
        let text = "boot noise\n@@corpus-begin a\nk=1\n@@corpus-end a 0\nbetween\n\
                    @@corpus-begin b\nk=2\nj=3\n@@corpus-end b 143\n@@corpus-begin c\nk=4\n";
        let parts = split_delimited(text);
        assert_eq!(parts["a"], ("k=1\n".to_string(), 0));
        assert_eq!(parts["b"], ("k=2\nj=3\n".to_string(), 143));
        assert_eq!(parts["c"], ("k=4\n".to_string(), -1));
        assert_eq!(parts.len(), 3);
    }

    #[test]
    fn kernel_observations_round_trip() {
        let mut runs: BTreeMap<String, BTreeMap<String, ColumnRun>> = BTreeMap::new();
        let run = |k: &str, status| ColumnRun {
            observations: [(k.to_string(), "1".to_string())].into(),
            status,
            ..ColumnRun::default()
        };
        runs.entry("s".into())
            .or_default()
            .insert("6.12".into(), run("a", 0));
        runs.entry("s".into())
            .or_default()
            .insert("sim:6.14".into(), run("b", 0));
        let failed = ColumnRun {
            status: -1,
            ..ColumnRun::default()
        };
        runs.entry("s".into())
            .or_default()
            .insert("7.3".into(), failed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        std::fs::write(&path, serde_json::to_string(&kernel_obs(&runs)).unwrap()).unwrap();
        let back = load_kernel_obs(&path).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].0.as_str(), back[0].1.as_str()), ("s", "6.12"));
        assert_eq!(back[0].2.observations["a"], "1");
    }

    #[test]
    fn sim_machine_args() {
        let needs = MachineNeeds::parse("mem=1G swap=64M fs=512M").unwrap();
        assert_eq!(
            sim_args(&needs).join(" "),
            "--mem 1073741824 --cpus 2 --swap 67108864 --fs /mnt/fs=ram:536870912"
        );
    }

    /// Every scenario of the corpus has a header that parses, a unique
    /// name, and a machine the simulator and the test bed both can make
    /// (xfs needs a brd of 300M at least).
    #[test]
    fn the_corpus_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/differential");
        let scenarios = load_corpus(&dir, &[]).unwrap();
        assert!(scenarios.len() >= 40, "{} scenarios", scenarios.len());
        for s in &scenarios {
            assert!(
                !s.description.is_empty(),
                "{}: no `# scenario:` line",
                s.name
            );
            if let Some(fs) = s.machine.fs_bytes {
                assert!(fs >= 300 << 20, "{}: xfs needs fs>=300M", s.name);
            }
        }
    }
}
