//! The differential corpus's data and its one rule: scenario headers
//! (machine needs, a comparison per key, known disagreements), the
//! observations scenarios print, and the verdicts.
//!
//! A scenario (`tests/differential/*.sh`) declares in its leading comment:
//!
//! - `# machine: mem=1G swap=64M fs=256M cpus=2 zswap`: what it needs, one
//!   neutral line that the runner maps to `memcg run` and to the test bed;
//! - `# cmp: GLOB RULE [version]`: how keys matching GLOB (`*` and `?`;
//!   the last matching line wins, `exact` by default) compare: `exact`,
//!   `num:10%`, `num:abs=64K`, `num:abs=64K,5%` (numbers within the larger
//!   tolerance), `any` (present on both sides, value free) or `ignore`
//!   (printed, not compared); `version` says 6.12 and 7.3 are expected to
//!   differ (the rule below judges it the same way either way);
//! - `# known: GLOB REASON`: a disagreement that is understood; it is
//!   counted and listed, never a failure.
//!
//! The rule: where 6.12 and 7.3 agree, the simulator must agree with them
//! under every profile; where they differ, the 6.12 profile must match
//! 6.12 and the 7.3 profile 7.3 (the 6.14 profile, between them, either).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A scenario's machine needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub(crate) struct MachineNeeds {
    pub(crate) mem_bytes: u64,
    pub(crate) swap_bytes: Option<u64>,
    pub(crate) fs_bytes: Option<u64>,
    pub(crate) cpus: u32,
    pub(crate) zswap: bool,
}

impl Default for MachineNeeds {
    fn default() -> Self {
        MachineNeeds {
            mem_bytes: 1 << 30,
            swap_bytes: None,
            fs_bytes: None,
            cpus: 2,
            zswap: false,
        }
    }
}

impl MachineNeeds {
    /// Parses `mem=1G swap=64M fs=256M cpus=2 zswap`.
    pub(crate) fn parse(text: &str) -> Result<MachineNeeds, String> {
        let mut needs = MachineNeeds::default();
        for word in text.split_whitespace() {
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            let bytes = || crate::parse_bytes(value);
            match key {
                "mem" => needs.mem_bytes = bytes()?,
                "swap" => needs.swap_bytes = Some(bytes()?).filter(|&b| b > 0),
                "fs" => needs.fs_bytes = Some(bytes()?).filter(|&b| b > 0),
                "cpus" => needs.cpus = value.parse().map_err(|e| format!("cpus={value}: {e}"))?,
                "zswap" if value.is_empty() => needs.zswap = true,
                _ => return Err(format!("unknown machine need {word:?}")),
            }
        }
        Ok(needs)
    }

    /// The neutral line again (for tables and JSON).
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("mem={} cpus={}", size(self.mem_bytes), self.cpus);
        if let Some(b) = self.swap_bytes {
            s += &format!(" swap={}", size(b));
        }
        if let Some(b) = self.fs_bytes {
            s += &format!(" fs={}", size(b));
        }
        if self.zswap {
            s += " zswap";
        }
        s
    }
}

/// `bytes` with the largest exact K/M/G suffix.
fn size(bytes: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// How two values of one key compare.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) enum Rule {
    Exact,
    /// Numbers within the larger of `abs` and `rel` x the larger value;
    /// values that are not both numbers compare exactly.
    Num {
        abs: u64,
        rel: f64,
    },
    /// Present on both sides, any value.
    Any,
    /// Not compared.
    Ignore,
}

impl Rule {
    fn parse(text: &str) -> Result<Rule, String> {
        match text {
            "exact" => return Ok(Rule::Exact),
            "any" => return Ok(Rule::Any),
            "ignore" => return Ok(Rule::Ignore),
            _ => {}
        }
        let spec = text
            .strip_prefix("num:")
            .ok_or_else(|| format!("unknown comparison {text:?}"))?;
        let (mut abs, mut rel) = (0, 0.0);
        for part in spec.split(',') {
            if let Some(pct) = part.strip_suffix('%') {
                rel = pct.parse::<f64>().map_err(|e| format!("{part}: {e}"))? / 100.0;
            } else if let Some(bytes) = part.strip_prefix("abs=") {
                abs = crate::parse_bytes(bytes)?;
            } else {
                return Err(format!("unknown tolerance {part:?} in {text:?}"));
            }
        }
        Ok(Rule::Num { abs, rel })
    }

    /// Whether `a` and `b` (a missing key: `None`) agree.
    pub(crate) fn agrees(&self, a: Option<&str>, b: Option<&str>) -> bool {
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, b) => return a == b || *self == Rule::Ignore,
        };
        match self {
            Rule::Exact => a == b,
            Rule::Any | Rule::Ignore => true,
            Rule::Num { abs, rel } => match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => {
                    let tolerance = (*abs as f64).max(rel * x.abs().max(y.abs()));
                    (x - y).abs() <= tolerance
                }
                _ => a == b,
            },
        }
    }
}

/// `pattern` (with `*` for any run of characters and `?` for one; every
/// other character literal) matches all of `text`.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A key's comparison: the rule and whether the kernels may differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Cmp {
    pub(crate) rule: Rule,
    pub(crate) version: bool,
}

/// One scenario script and its header.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) description: String,
    pub(crate) machine: MachineNeeds,
    cmps: Vec<(String, Cmp)>,
    known: Vec<(String, String)>,
}

impl Scenario {
    /// Reads `path`'s header.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| anyhow::anyhow!("{}: no file name", path.display()))?;
        Scenario::parse(name, path, &text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Parses a scenario's leading comment lines.
    pub(crate) fn parse(name: &str, path: &Path, text: &str) -> Result<Scenario, String> {
        let mut scenario = Scenario {
            name: name.to_string(),
            path: path.to_path_buf(),
            description: String::new(),
            machine: MachineNeeds::default(),
            cmps: Vec::new(),
            known: Vec::new(),
        };
        let mut machine = None;
        for line in text.lines().take_while(|l| l.starts_with('#')) {
            let line = line.trim_start_matches('#').trim();
            if let Some(rest) = line.strip_prefix("machine:") {
                machine = Some(MachineNeeds::parse(rest)?);
            } else if let Some(rest) = line.strip_prefix("cmp:") {
                scenario.cmps.push(parse_cmp(rest)?);
            } else if let Some(rest) = line.strip_prefix("known:") {
                let rest = rest.trim();
                let (key, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                if reason.trim().is_empty() {
                    return Err(format!("`known: {rest}` gives no reason"));
                }
                scenario
                    .known
                    .push((key.to_string(), reason.trim().to_string()));
            } else if let Some(rest) = line.strip_prefix("scenario:") {
                scenario.description = rest.trim().to_string();
            } else if !scenario.description.is_empty()
                && scenario.cmps.is_empty()
                && machine.is_none()
            {
                scenario.description = format!("{} {line}", scenario.description)
                    .trim()
                    .to_string();
            }
        }
        scenario.machine = machine.ok_or("no `# machine:` line")?;
        Ok(scenario)
    }

    /// The comparison of `key` (the last matching `cmp` line; exact).
    pub(crate) fn cmp(&self, key: &str) -> Cmp {
        self.cmps
            .iter()
            .rev()
            .find(|(pattern, _)| glob(pattern, key))
            .map(|(_, cmp)| cmp.clone())
            .unwrap_or(Cmp {
                rule: Rule::Exact,
                version: false,
            })
    }

    /// Why a disagreement of `key` is known, if it is.
    pub(crate) fn known(&self, key: &str) -> Option<&str> {
        self.known
            .iter()
            .find(|(pattern, _)| glob(pattern, key))
            .map(|(_, reason)| reason.as_str())
    }
}

/// `GLOB RULE [version]`.
fn parse_cmp(text: &str) -> Result<(String, Cmp), String> {
    let mut words = text.split_whitespace();
    let key = words.next().ok_or("`cmp:` without a key")?;
    let mut cmp = Cmp {
        rule: Rule::Exact,
        version: false,
    };
    for word in words {
        if word == "version" {
            cmp.version = true;
        } else {
            cmp.rule = Rule::parse(word)?;
        }
    }
    Ok((key.to_string(), cmp))
}

/// What one run of a scenario printed: `key=value` lines (the last of a
/// repeated key wins; other lines are ignored).
pub(crate) type Observations = BTreeMap<String, String>;

/// The observations in a scenario's standard output.
pub(crate) fn parse_observations(stdout: &str) -> Observations {
    stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(key, _)| !key.is_empty() && !key.contains(char::is_whitespace))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

/// The rule, for the simulator's `sim` value under `profile` ("6.12",
/// "6.14", "7.3"), given each kernel's value (outer `None`: that kernel
/// did not run; inner: it ran without printing the key). `None` when
/// there is nothing to judge by: no kernel ran, or only the other
/// kernel of a `version` key.
pub(crate) fn judge(
    cmp: &Cmp,
    profile: &str,
    sim: Option<&str>,
    k612: Option<Option<&str>>,
    k73: Option<Option<&str>>,
) -> Option<bool> {
    let rule = &cmp.rule;
    match (k612, k73) {
        (None, None) => None,
        (Some(a), Some(b)) if rule.agrees(a, b) => Some(rule.agrees(sim, a)),
        (Some(a), Some(b)) => Some(match profile {
            "6.12" => rule.agrees(sim, a),
            "7.3" => rule.agrees(sim, b),
            _ => rule.agrees(sim, a) || rule.agrees(sim, b),
        }),
        (Some(a), None) => (!cmp.version || profile != "7.3").then(|| rule.agrees(sim, a)),
        (None, Some(b)) => (!cmp.version || profile != "6.12").then(|| rule.agrees(sim, b)),
    }
}

/// Every key any column of a scenario printed.
pub(crate) fn all_keys<'a>(columns: impl Iterator<Item = &'a Observations>) -> BTreeSet<String> {
    columns.flat_map(|o| o.keys().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#!/bin/bash\n\
        # scenario: a test of the header\n\
        #   over two lines.\n\
        # machine: mem=512M swap=64M fs=300M cpus=4 zswap\n\
        # cmp: * num:abs=64K\n\
        # cmp: keys version\n\
        # cmp: ratio_* num:10%\n\
        # cmp: blob ignore\n\
        # known: proc_* the simulator serves no /proc/PID files\n\
        . lib.sh\n\
        # cmp: after_code exact\n";

    fn scenario() -> Scenario {
        Scenario::parse("s", Path::new("s.sh"), HEADER).unwrap()
    }

    #[test]
    fn header_parses() {
        let s = scenario();
        assert_eq!(s.description, "a test of the header over two lines.");
        assert_eq!(
            s.machine,
            MachineNeeds {
                mem_bytes: 512 << 20,
                swap_bytes: Some(64 << 20),
                fs_bytes: Some(300 << 20),
                cpus: 4,
                zswap: true,
            }
        );
        assert_eq!(
            s.machine.describe(),
            "mem=512M cpus=4 swap=64M fs=300M zswap"
        );
        assert_eq!(
            s.cmp("x").rule,
            Rule::Num {
                abs: 65536,
                rel: 0.0
            }
        );
        let keys = s.cmp("keys");
        assert!(keys.version && keys.rule == Rule::Exact);
        assert_eq!(s.cmp("ratio_a").rule, Rule::Num { abs: 0, rel: 0.1 });
        assert_eq!(s.cmp("blob").rule, Rule::Ignore);
        // Comment lines after the first command are not header.
        assert_eq!(
            s.cmp("after_code").rule,
            Rule::Num {
                abs: 65536,
                rel: 0.0
            }
        );
        assert!(s.known("proc_cgroup").is_some() && s.known("x").is_none());
    }

    #[test]
    fn header_errors() {
        let parse = |t: &str| Scenario::parse("s", Path::new("s.sh"), t);
        assert!(parse("# cmp: * exact\n").unwrap_err().contains("machine"));
        assert!(parse("# machine: mem=1G disk=3\n").is_err());
        assert!(parse("# machine: mem=1G\n# cmp: k num:x\n").is_err());
        assert!(parse("# machine: mem=1G\n# cmp: k fuzzy\n").is_err());
        assert!(
            parse("# machine: mem=1G\n# known: k\n")
                .unwrap_err()
                .contains("reason")
        );
        let s = parse("# machine: swap=0\n").unwrap();
        assert_eq!(s.machine.swap_bytes, None);
        assert_eq!(s.machine.mem_bytes, 1 << 30);
    }

    #[test]
    fn rules_compare() {
        let num = Rule::parse("num:abs=1K,10%").unwrap();
        assert!(num.agrees(Some("1000"), Some("2000")));
        assert!(num.agrees(Some("100000"), Some("109000")));
        assert!(!num.agrees(Some("100000"), Some("112000")));
        assert!(!num.agrees(Some("0"), Some("1025")));
        assert!(num.agrees(Some("gt0"), Some("gt0")));
        assert!(!num.agrees(Some("gt0"), Some("0")));
        assert!(!num.agrees(Some("1"), None));
        assert!(num.agrees(None, None));
        assert!(Rule::Exact.agrees(Some("a b"), Some("a b")));
        assert!(!Rule::Exact.agrees(Some("1"), Some("1.0")));
        assert!(Rule::Any.agrees(Some("1"), Some("2")));
        assert!(!Rule::Any.agrees(Some("1"), None));
        assert!(Rule::Ignore.agrees(Some("1"), None));
    }

    #[test]
    fn globs_match() {
        assert!(glob("*", "anything"));
        assert!(glob("max[*]", "max[1M]"));
        assert!(glob("max[1?]", "max[1M]"));
        assert!(!glob("max[1?]", "max[1MB]"));
        assert!(glob("a*b*c", "a-b-b-c"));
        assert!(!glob("a*b*c", "a-b-b-d"));
        assert!(glob("", "") && !glob("", "x"));
    }

    #[test]
    fn observations_parse() {
        let o = parse_observations(
            "k=v\nmax[ 1M]=ok\nnoise line\nx=a=b\n=empty\nmax[\\n4M\\n]=ok/4194304\nk=w\n",
        );
        let got: Vec<(&str, &str)> = o.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [("k", "w"), ("max[\\n4M\\n]", "ok/4194304"), ("x", "a=b")]
        );
    }

    #[test]
    fn the_rule() {
        let exact = Cmp {
            rule: Rule::Exact,
            version: false,
        };
        let version = Cmp {
            rule: Rule::Exact,
            version: true,
        };
        let (a, b) = (Some(Some("a")), Some(Some("b")));
        // The kernels agree: every profile must.
        for p in ["6.12", "6.14", "7.3"] {
            assert_eq!(judge(&exact, p, Some("a"), a, a), Some(true));
            assert_eq!(judge(&exact, p, Some("b"), a, a), Some(false));
        }
        // They differ: each profile its kernel, 6.14 either.
        assert_eq!(judge(&exact, "6.12", Some("a"), a, b), Some(true));
        assert_eq!(judge(&exact, "6.12", Some("b"), a, b), Some(false));
        assert_eq!(judge(&exact, "7.3", Some("b"), a, b), Some(true));
        assert_eq!(judge(&exact, "7.3", Some("a"), a, b), Some(false));
        assert_eq!(judge(&exact, "6.14", Some("a"), a, b), Some(true));
        assert_eq!(judge(&exact, "6.14", Some("b"), a, b), Some(true));
        assert_eq!(judge(&exact, "6.14", Some("c"), a, b), Some(false));
        // A key one kernel lacks.
        assert_eq!(judge(&exact, "7.3", None, a, Some(None)), Some(true));
        // One kernel measured: a version key is not judged for the other.
        assert_eq!(judge(&version, "6.12", Some("x"), None, b), None);
        assert_eq!(judge(&version, "7.3", Some("b"), None, b), Some(true));
        assert_eq!(judge(&exact, "6.12", Some("x"), None, b), Some(false));
        assert_eq!(judge(&exact, "6.12", Some("x"), None, None), None);
    }
}
