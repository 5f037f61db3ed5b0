//! The corpus's verdicts: every observation judged by the rule
//! ([`compare::judge`]), counted per scenario and in total, printed as an
//! agreement table and kept as JSON (which `--kernel-obs` reads back).

use std::collections::BTreeMap;

use super::compare::{self, Scenario};
use super::corpus::ColumnRun;

/// Counts of one comparison (a pair of columns, or a profile's rule).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Totals {
    /// Observations compared.
    pub(crate) compared: u64,
    pub(crate) agree: u64,
    /// Disagreements a scenario declares `known`.
    pub(crate) known: u64,
    /// Disagreements no `known` line explains (for a pair of columns:
    /// every disagreement; only a profile's rule fails a run).
    pub(crate) disagree: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.compared += other.compared;
        self.agree += other.agree;
        self.known += other.known;
        self.disagree += other.disagree;
    }

    /// `agree/compared`.
    fn cell(&self) -> String {
        format!("{}/{}", self.agree, self.compared)
    }

    fn percent(&self) -> f64 {
        if self.compared == 0 {
            return 100.0;
        }
        100.0 * self.agree as f64 / self.compared as f64
    }
}

/// One key of one scenario, in every column.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct KeyReport {
    pub(crate) key: String,
    /// The comparison, as the header gives it.
    pub(crate) cmp: String,
    pub(crate) known: Option<String>,
    /// Each column's value (`null`: the column ran without it).
    pub(crate) values: BTreeMap<String, Option<String>>,
    /// Each profile's verdict: agree, disagree, known or unjudged.
    pub(crate) verdicts: BTreeMap<String, String>,
}

/// One scenario's runs and verdicts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ScenarioReport {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) machine: String,
    /// "6.12", "7.3", "sim:PROFILE".
    pub(crate) columns: BTreeMap<String, ColumnRun>,
    pub(crate) keys: Vec<KeyReport>,
    /// "6.12~7.3", "sim:P~6.12", "sim:P~7.3", "rule:P".
    pub(crate) totals: BTreeMap<String, Totals>,
}

/// The whole corpus's.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Report {
    pub(crate) profiles: Vec<String>,
    pub(crate) scenarios: Vec<ScenarioReport>,
    pub(crate) totals: BTreeMap<String, Totals>,
}

/// Judges every scenario's runs (`runs[scenario][column]`).
pub(crate) fn judge_all(
    scenarios: &[Scenario],
    runs: &BTreeMap<String, BTreeMap<String, ColumnRun>>,
    profiles: &[&str],
) -> Report {
    let empty = BTreeMap::new();
    let mut report = Report {
        profiles: profiles.iter().map(|p| p.to_string()).collect(),
        scenarios: Vec::new(),
        totals: BTreeMap::new(),
    };
    for scenario in scenarios {
        let columns = runs.get(&scenario.name).unwrap_or(&empty);
        let judged = judge_scenario(scenario, columns, profiles);
        for (name, totals) in &judged.totals {
            report.totals.entry(name.clone()).or_default().add(totals);
        }
        report.scenarios.push(judged);
    }
    report
}

/// A column's value of `key`: `None` when the column did not run (a
/// kernel boot that failed), `Some(None)` when it ran without the key.
fn value<'a>(
    columns: &'a BTreeMap<String, ColumnRun>,
    column: &str,
    key: &str,
) -> Option<Option<&'a str>> {
    let run = columns.get(column)?;
    if run.status == -1 && run.observations.is_empty() {
        return None;
    }
    Some(run.observations.get(key).map(String::as_str))
}

fn judge_scenario(
    scenario: &Scenario,
    columns: &BTreeMap<String, ColumnRun>,
    profiles: &[&str],
) -> ScenarioReport {
    let mut report = ScenarioReport {
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        machine: scenario.machine.describe(),
        columns: columns.clone(),
        keys: Vec::new(),
        totals: BTreeMap::new(),
    };
    for key in compare::all_keys(columns.values().map(|r| &r.observations)) {
        let cmp = scenario.cmp(&key);
        if cmp.rule == compare::Rule::Ignore {
            continue;
        }
        let known = scenario.known(&key).map(str::to_string);
        let (k612, k73) = (value(columns, "6.12", &key), value(columns, "7.3", &key));
        if let (Some(a), Some(b)) = (k612, k73) {
            let agree = cmp.rule.agrees(a, b);
            count(&mut report.totals, "6.12~7.3".into(), agree, false);
        }
        let verdicts = profiles
            .iter()
            .map(|&p| {
                let verdict =
                    judge_key(&mut report.totals, &cmp, known.is_some(), columns, &key, p);
                (p.to_string(), verdict.to_string())
            })
            .collect();
        let values = columns
            .keys()
            .map(|c| {
                (
                    c.clone(),
                    value(columns, c, &key).flatten().map(str::to_string),
                )
            })
            .collect();
        let version = if cmp.version { " version" } else { "" };
        report.keys.push(KeyReport {
            key,
            cmp: format!("{:?}{version}", cmp.rule),
            known,
            values,
            verdicts,
        });
    }
    report
}

/// One key under one profile: counts the simulator against each kernel
/// and the rule's verdict into `totals`; returns the verdict.
fn judge_key(
    totals: &mut BTreeMap<String, Totals>,
    cmp: &compare::Cmp,
    known: bool,
    columns: &BTreeMap<String, ColumnRun>,
    key: &str,
    profile: &str,
) -> &'static str {
    let (k612, k73) = (value(columns, "6.12", key), value(columns, "7.3", key));
    let sim_column = format!("sim:{profile}");
    let sim = value(columns, &sim_column, key).flatten();
    for (kernel, k) in [("6.12", k612), ("7.3", k73)] {
        if let Some(k) = k {
            let agree = cmp.rule.agrees(sim, k);
            count(totals, format!("{sim_column}~{kernel}"), agree, false);
        }
    }
    let Some(agree) = compare::judge(cmp, profile, sim, k612, k73) else {
        return "unjudged";
    };
    count(totals, format!("rule:{profile}"), agree, known);
    match (agree, known) {
        (true, _) => "agree",
        (false, true) => "known",
        (false, false) => "disagree",
    }
}

/// Counts one comparison under `name`.
fn count(totals: &mut BTreeMap<String, Totals>, name: String, agree: bool, known: bool) {
    let t = totals.entry(name).or_default();
    t.compared += 1;
    match (agree, known) {
        (true, _) => t.agree += 1,
        (false, true) => t.known += 1,
        (false, false) => t.disagree += 1,
    }
}

/// Prints the table (scenario x kernel pair and profile), the totals and
/// every disagreement.
pub(crate) fn print(report: &Report, profiles: &[&str]) {
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::ASCII_MARKDOWN);
    let mut header = vec!["scenario".to_string(), "keys".into(), "6.12~7.3".into()];
    for p in profiles {
        header.extend([
            format!("sim {p}~6.12"),
            format!("sim {p}~7.3"),
            format!("rule {p}"),
        ]);
    }
    table.set_header(header);
    for s in &report.scenarios {
        table.add_row(row(&s.name, s.keys.len(), &s.totals, profiles));
    }
    let nkeys = report.scenarios.iter().map(|s| s.keys.len()).sum();
    table.add_row(row("TOTAL", nkeys, &report.totals, profiles));
    println!("{table}");
    print_totals(report, profiles);
    print_disagreements(report, profiles);
}

fn row(
    name: &str,
    keys: usize,
    totals: &BTreeMap<String, Totals>,
    profiles: &[&str],
) -> Vec<String> {
    let cell = |k: &str| totals.get(k).map_or("-".to_string(), Totals::cell);
    let mut row = vec![name.to_string(), keys.to_string(), cell("6.12~7.3")];
    for p in profiles {
        row.push(cell(&format!("sim:{p}~6.12")));
        row.push(cell(&format!("sim:{p}~7.3")));
        row.push(totals.get(&format!("rule:{p}")).map_or("-".into(), |t| {
            let mut text = if t.disagree == 0 {
                "ok".to_string()
            } else {
                format!("{} FAIL", t.disagree)
            };
            if t.known > 0 {
                text += &format!(" ({} known)", t.known);
            }
            text
        }));
    }
    row
}

fn print_totals(report: &Report, profiles: &[&str]) {
    let line = |name: &str, t: &Totals| {
        println!(
            "{name:<18} {:>5} compared, {:>5} agree ({:.1}%)",
            t.compared,
            t.agree,
            t.percent()
        );
    };
    if let Some(t) = report.totals.get("6.12~7.3") {
        line("6.12 ~ 7.3", t);
    }
    for p in profiles {
        for k in ["6.12", "7.3"] {
            if let Some(t) = report.totals.get(&format!("sim:{p}~{k}")) {
                line(&format!("sim {p} ~ {k}"), t);
            }
        }
        if let Some(t) = report.totals.get(&format!("rule:{p}")) {
            println!(
                "{:<18} {:>5} judged, {:>5} agree, {} known, {} disagree",
                format!("rule, profile {p}"),
                t.compared,
                t.agree,
                t.known,
                t.disagree
            );
        }
    }
}

fn print_disagreements(report: &Report, profiles: &[&str]) {
    for wanted in ["disagree", "known"] {
        for s in &report.scenarios {
            for k in &s.keys {
                let which: Vec<&str> = profiles
                    .iter()
                    .copied()
                    .filter(|p| k.verdicts.get(*p).is_some_and(|v| v == wanted))
                    .collect();
                if which.is_empty() {
                    continue;
                }
                let values: Vec<String> = k
                    .values
                    .iter()
                    .map(|(c, v)| format!("{c}={}", v.as_deref().unwrap_or("(none)")))
                    .collect();
                let tag = if wanted == "known" {
                    "known"
                } else {
                    "DISAGREE"
                };
                println!(
                    "{tag} {}:{} [{}] {}",
                    s.name,
                    k.key,
                    which.join(","),
                    values.join(" ")
                );
                if let Some(reason) = &k.known {
                    println!("    known: {reason}");
                }
            }
        }
    }
}
