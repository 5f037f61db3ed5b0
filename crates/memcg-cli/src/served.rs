//! Workloads inside a served machine (`memcg mount --workload`, `memcg run
//! --workload`): simulator workloads running in the background in their
//! cgroups, so that an outside controller (senpai, oomd, a test's Python)
//! has real memory pressure to read and real limits to set.
//!
//! Each workload runs on its own thread, one build after another, until
//! the machine stops; what they did goes to stderr then.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use memcg_sim::Sim;
use memcg_sim::kbuild::{self, KbuildConfig};

/// A `--workload` argument, parsed.
#[derive(Debug, Clone)]
pub(crate) enum WorkloadSpec {
    /// `kbuild --jobs J --cgroup /PATH`.
    Kbuild(KbuildConfig),
}

/// `kbuild` as `--workload` takes it.
#[derive(Debug, Parser)]
#[command(name = "kbuild", no_binary_name = true)]
struct KbuildWords {
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// The cgroup the build runs in (made if missing; no limit is set:
    /// that is the controller's job).
    #[arg(long, default_value = "/build")]
    cgroup: String,
    /// Compile tasks per job in one build.
    #[arg(long, default_value_t = 8)]
    tasks: usize,
    /// The largest heap of a task (K/M/G).
    #[arg(long, value_parser = crate::parse_bytes, default_value = "24M")]
    heap_max: u64,
    /// Seed of the jobs' choices.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
}

impl std::str::FromStr for WorkloadSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        match words.next() {
            Some("kbuild") => {
                let w = KbuildWords::try_parse_from(words).map_err(|e| e.to_string())?;
                let config = KbuildConfig {
                    tasks_per_job: w.tasks,
                    heap_min_bytes: (w.heap_max / 16).max(1 << 20).min(w.heap_max),
                    heap_max_bytes: w.heap_max,
                    seed: w.seed,
                    files_dir: format!("/kbuild{}", w.cgroup.trim_end_matches('/')),
                    cgroup: w.cgroup,
                    ..KbuildConfig::scaled(w.jobs)
                };
                config.validate().map_err(|e| e.to_string())?;
                Ok(WorkloadSpec::Kbuild(config))
            }
            Some(other) => Err(format!("{other:?}: the workloads are: kbuild")),
            None => Err("an empty workload".to_owned()),
        }
    }
}

/// Running workloads; dropping stops them (after the build in progress).
pub(crate) struct Workloads {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workloads {
    /// Starts every workload of `specs` on `sim`.
    pub(crate) fn start(sim: &Arc<Sim>, specs: &[WorkloadSpec]) -> anyhow::Result<Self> {
        let cgroups: std::collections::BTreeSet<&str> = specs
            .iter()
            .map(|WorkloadSpec::Kbuild(c)| c.cgroup.as_str())
            .collect();
        if cgroups.len() != specs.len() {
            anyhow::bail!("--workload: two workloads in one cgroup; give each its own --cgroup");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let threads = specs
            .iter()
            .map(|spec| {
                let (sim, stop, spec) = (Arc::clone(sim), Arc::clone(&stop), spec.clone());
                std::thread::Builder::new()
                    .name("memcg-workload".into())
                    .spawn(move || run_until(&sim, &spec, &stop))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { stop, threads })
    }
}

/// Builds one after another until `stop`; says what they did at the end.
fn run_until(sim: &Sim, spec: &WorkloadSpec, stop: &AtomicBool) {
    let WorkloadSpec::Kbuild(config) = spec;
    let (mut builds, mut tasks, mut oom_kills) = (0u64, 0u64, 0u64);
    let mut failure = None;
    while !stop.load(Ordering::Relaxed) {
        let config = KbuildConfig {
            seed: config.seed.wrapping_add(builds),
            ..config.clone()
        };
        match kbuild::run_in(sim, &config) {
            Ok(r) => {
                builds += 1;
                tasks += r.tasks;
                oom_kills += r.oom_kills;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    eprintln!(
        "memcg: kbuild in {}: {}, {}, {}{}",
        config.cgroup,
        plural(builds, "build"),
        plural(tasks, "task"),
        plural(oom_kills, "OOM kill"),
        failure.map_or(String::new(), |e| format!("; stopped: {e}"))
    );
}

impl Drop for Workloads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_words_parse_or_say_why_not() {
        let WorkloadSpec::Kbuild(c) = "kbuild --jobs 4 --cgroup /build".parse().unwrap();
        assert_eq!((c.jobs, c.cgroup.as_str()), (4, "/build"));
        assert_eq!(c.files_dir, "/kbuild/build");
        assert!("make --jobs 4".parse::<WorkloadSpec>().is_err());
        assert!("kbuild --jobs 0".parse::<WorkloadSpec>().is_err());
        assert!("kbuild --cgroup build".parse::<WorkloadSpec>().is_err());
        assert!("".parse::<WorkloadSpec>().is_err());
    }
}
