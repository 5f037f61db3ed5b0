//! The seeds' published figures, verbatim from their messages
//! (`../shared/seeds/*.txt`), and the verdicts of `memcg reproduce`:
//! whether a run shows each seed's effect, by a criterion stated with it,
//! and if not, why not, in the run's own numbers.
//!
//! Every figure is kept as the seed printed it (a string) and parsed where
//! a ratio is needed, so the report can quote it unchanged. The verdicts
//! are pure functions of measured numbers: no sentence in the report says
//! "reproduced" or "not reproduced" unless a criterion computed it.

use std::fmt;

use crate::report::Stats;

/// A figure a seed published before and after its change, as printed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Published {
    /// Before the change (the old design).
    pub before: &'static str,
    /// After it (the new design).
    pub after: &'static str,
    /// The unit the seed gave.
    pub unit: &'static str,
}

impl Published {
    /// After over before.
    pub fn ratio(&self) -> f64 {
        parse(self.after) / parse(self.before)
    }

    /// `before unit → after unit`, as published.
    pub fn quoted(&self) -> String {
        format!(
            "{} {} → {} {}",
            self.before, self.unit, self.after, self.unit
        )
    }
}

/// A figure the seeds printed; they are all plain decimals.
fn parse(figure: &str) -> f64 {
    figure
        .parse()
        .unwrap_or_else(|_| unreachable!("a seed figure is a decimal: {figure}"))
}

/// Seeds 000/003 (the merged patch, 6 runs of `make -j96`): 4K folios in a
/// 1.5G memory cgroup, "Sys time" and "Real time", seconds.
pub(crate) const KBUILD_4K_SYS: Published = Published {
    before: "10782.29",
    after: "9617.23",
    unit: "s",
};
pub(crate) const KBUILD_4K_REAL: Published = Published {
    before: "171.49",
    after: "159.65",
    unit: "s",
};
/// Seeds 000/003: 64K folios in a 2G memory cgroup.
pub(crate) const KBUILD_64K_SYS: Published = Published {
    before: "8176.94",
    after: "7358.98",
    unit: "s",
};
pub(crate) const KBUILD_64K_REAL: Published = Published {
    before: "141.98",
    after: "134.07",
    unit: "s",
};
/// Seed 001 (the patch's first version, 10 runs), the same builds.
pub(crate) const KBUILD_V1_4K_SYS: Published = Published {
    before: "10730.08",
    after: "9612.24",
    unit: "s",
};
pub(crate) const KBUILD_V1_64K_SYS: Published = Published {
    before: "7626.77",
    after: "6936.03",
    unit: "s",
};
/// Seed 000: sequential swap-out of 8G of 64K zero folios (24 runs), µs.
pub(crate) const SWAPOUT_64K_ZERO: Published = Published {
    before: "5461409.12",
    after: "5420447.26",
    unit: "us",
};
/// Seed 000: sequential swap-in of 8G of 4K zero folios (24 runs), µs.
pub(crate) const SWAPIN_4K_ZERO: Published = Published {
    before: "19736958.916667",
    after: "19662182.629630",
    unit: "us",
};

/// Seed 002's `time read_in_all`, the `real` of each of its 10 runs,
/// before the patch (list_lru `legacy`) and after (`split`).
pub(crate) const READERS_BEFORE: [&str; 10] = [
    "0m3.498s",
    "1m33.860s",
    "1m31.883s",
    "1m32.394s",
    "1m31.017s",
    "1m31.931s",
    "1m32.758s",
    "1m35.198s",
    "1m30.531s",
    "1m31.142s",
];
pub(crate) const READERS_AFTER: [&str; 10] = [
    "0m3.489s",
    "1m10.893s",
    "1m29.129s",
    "1m29.944s",
    "1m31.208s",
    "1m25.944s",
    "1m28.599s",
    "1m26.746s",
    "1m30.668s",
    "1m29.258s",
];

/// Seconds of a `time` figure (`1m33.860s`).
fn time_secs(figure: &str) -> f64 {
    let (minutes, rest) = figure
        .split_once('m')
        .unwrap_or_else(|| unreachable!("a time figure has minutes: {figure}"));
    parse(minutes) * 60.0 + parse(rest.trim_end_matches('s'))
}

/// A seed 002 series' run 1 and the median of its later runs, seconds,
/// and the median of the later runs' figures as printed.
pub(crate) fn readers_runs(runs: &[&'static str; 10]) -> (f64, f64, &'static str) {
    let mut later: Vec<&'static str> = runs[1..].to_vec();
    later.sort_by(|a, b| time_secs(a).total_cmp(&time_secs(b)));
    let median = later[later.len() / 2];
    (time_secs(runs[0]), time_secs(median), median)
}

/// A seed 002 series' later runs (median) over its first.
pub(crate) fn readers_later_over_first(runs: &[&'static str; 10]) -> f64 {
    let (first, later, _) = readers_runs(runs);
    later / first
}

/// The noise of a ratio of two medians: twice its standard error, or
/// `None` with fewer than two samples on either side, when a difference
/// cannot be told from noise at all. A median's standard error is about
/// 1.2533 standard deviations over the square root of its samples; the
/// standard deviation is estimated robustly, as 1.4826 median absolute
/// deviations, so that one repetition the scheduler spoiled does not
/// drown the comparison (the medians ignore it too).
pub(crate) fn ratio_noise(new: &[f64], old: &[f64]) -> Option<f64> {
    let relative_error = |samples: &[f64]| {
        (samples.len() >= 2).then(|| {
            let median = Stats::of(samples).median;
            let deviations: Vec<f64> = samples.iter().map(|s| (s - median).abs()).collect();
            let sigma = 1.4826 * Stats::of(&deviations).median;
            1.2533 * sigma / median.abs().max(f64::MIN_POSITIVE) / (samples.len() as f64).sqrt()
        })
    };
    let ratio = Stats::of(new).median / Stats::of(old).median;
    Some(2.0 * ratio * relative_error(new)?.hypot(relative_error(old)?))
}

/// `±x.x%`, or why there is no figure.
fn fmt_noise(noise: Option<f64>) -> String {
    noise.map_or("no noise estimate: a single sample".to_owned(), |n| {
        format!("noise ±{:.1}%", n * 100.0)
    })
}

/// Whether a run reproduces a seed's effect, by which criterion, and what
/// the run's numbers say about it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// The criterion held.
    pub reproduced: bool,
    /// The criterion, with its threshold.
    pub criterion: String,
    /// What was measured against it, and why not when it was not.
    pub why: String,
}

impl Verdict {
    /// `reproduced` or `not reproduced`.
    pub fn word(&self) -> &'static str {
        if self.reproduced {
            "reproduced"
        } else {
            "not reproduced"
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = if self.reproduced {
            "Reproduced"
        } else {
            "Not reproduced"
        };
        write!(
            f,
            "**{word}**: {}. Criterion: {}.",
            self.why, self.criterion
        )
    }
}

/// What a kernel build measured for the seeds' lock: `packed`'s CPU over
/// `locked`'s, its noise, and `locked`'s own swap_cgroup calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KbuildFacts {
    /// Median CPU of `packed` over `locked`'s.
    pub packed_over_locked: f64,
    /// The ratio's noise ([`ratio_noise`]).
    pub noise: Option<f64>,
    /// Share of `locked`'s build CPU in swap_cgroup calls.
    pub locked_share: f64,
    /// `locked`'s mean wait for its lock per call, ns.
    pub locked_wait_ns: f64,
    /// `locked`'s swap_cgroup calls per build.
    pub locked_calls: u64,
    /// Jobs of the build and CPUs of this machine.
    pub jobs: usize,
    pub cpus: usize,
}

/// Seeds 000/003's kernel build: `packed` saves at least half of the
/// seed's sys reduction against `locked`, by more than the noise, and no
/// more than `locked` spends in swap_cgroup calls (a saving larger than
/// that cannot come from them).
pub(crate) fn kbuild(seed: Published, m: KbuildFacts) -> Verdict {
    let seed_saving = 1.0 - seed.ratio();
    let threshold = 1.0 - seed_saving / 2.0;
    let saving = 1.0 - m.packed_over_locked;
    let above_noise = m.noise.is_some_and(|n| saving > n);
    let explained = saving <= m.locked_share;
    let reproduced = m.packed_over_locked <= threshold && above_noise && explained;
    let criterion = format!(
        "`packed`'s build CPU at most {threshold:.3} of `locked`'s (half the seed's {:.1}% \
         saving), lower by more than the noise (twice the ratio's standard error over the \
         repetitions), and no lower than `locked`'s CPU less its swap_cgroup calls (a larger \
         saving cannot come from them)",
        seed_saving * 100.0
    );
    let measured = format!(
        "`packed`'s CPU is {:.3} of `locked`'s ({}; the seed's sys: {:.3}, {}); \
         swap_cgroup calls take {:.2}% of `locked`'s build CPU here (its lock waited {:.1} ns \
         per call)",
        m.packed_over_locked,
        fmt_noise(m.noise),
        seed.ratio(),
        seed.quoted(),
        m.locked_share * 100.0,
        m.locked_wait_ns,
    );
    let why = if reproduced {
        measured
    } else if m.locked_calls == 0 {
        format!("{measured}: the builds did not swap at this scale, so they cannot show it")
    } else if m.locked_share < seed_saving / 2.0 {
        format!(
            "{measured}, so no design of them can save the seed's {:.1}%: with {} jobs on {} \
             CPUs the lock is rarely contended, where the seed's 96 CPUs queue on it{}",
            seed_saving * 100.0,
            m.jobs,
            m.cpus,
            if saving > m.locked_share {
                "; the difference measured is the build's own variation"
            } else {
                ""
            }
        )
    } else if !above_noise {
        format!("{measured}: the difference is within the noise")
    } else {
        format!("{measured}: `packed` does not save enough of it")
    };
    Verdict {
        reproduced,
        criterion,
        why,
    }
}

/// A seed that found the new design "better or at least not worse":
/// reproduced when `new_over_old` (time) is not above 1 by more than the
/// noise or 1%, whichever is larger, and the noise is under 5% (a noisier
/// run cannot tell).
pub(crate) fn not_worse(
    seed_ratio: f64,
    new_over_old: f64,
    noise: Option<f64>,
    what: &str,
) -> Verdict {
    let tolerance = noise.map(|n| n.max(0.01));
    let precise = noise.is_some_and(|n| n < 0.05);
    let reproduced = precise && tolerance.is_some_and(|t| new_over_old <= 1.0 + t);
    let criterion = format!(
        "{what} no slower than the old by more than the noise (twice the ratio's standard \
         error) or 1%, whichever is larger, with a noise under 5%: the seed found it \
         \"better or at least not worse\" ({seed_ratio:.4})"
    );
    let change = (new_over_old - 1.0) * 100.0;
    let mut why = format!(
        "{what} takes {new_over_old:.3} of the old's time ({change:+.1}%, {}; the seed: \
         {seed_ratio:.4})",
        fmt_noise(noise)
    );
    if !precise && new_over_old <= 1.0 + tolerance.unwrap_or(0.0).max(0.01) {
        why.push_str(": too noisy to tell");
    }
    Verdict {
        reproduced,
        criterion,
        why,
    }
}

/// What the projection of `locked` to 96 jobs gives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProjectionFacts {
    /// `locked`'s projected CPU over its uncontended CPU at 96 jobs.
    pub cpu_ratio: f64,
    /// Its lock's projected utilisation there.
    pub utilisation: f64,
    /// The service time measured here, and the one at which the model
    /// gives the seed's ratio, µs.
    pub service_us: f64,
    pub service_for_seed_us: f64,
}

/// Seeds 000/003 projected: `locked`'s CPU at 96 jobs exceeds its
/// uncontended CPU by at least half of what the seed's sys ratio says
/// (`locked` over `packed`: 1/0.892).
pub(crate) fn projection(m: ProjectionFacts) -> Verdict {
    let seed = 1.0 / KBUILD_4K_SYS.ratio();
    let threshold = 1.0 + (seed - 1.0) / 2.0;
    let reproduced = m.cpu_ratio >= threshold;
    let criterion = format!(
        "`locked`'s projected CPU at 96 jobs at least {threshold:.3} of its uncontended CPU \
         (half the seed's excess: {} / {} s = {seed:.3})",
        KBUILD_4K_SYS.before, KBUILD_4K_SYS.after
    );
    let mut why = format!(
        "with the service time measured here (`S` = {:.3} µs) the model puts `locked`'s lock \
         at {:.0}% utilisation and its CPU at {:.3} of uncontended",
        m.service_us,
        m.utilisation * 100.0,
        m.cpu_ratio
    );
    if !reproduced {
        why.push_str(&format!(
            ". It would give the seed's ratio at `S` = {:.3} µs ({:.1}x the measured): what \
             each hand-over of the lock's cache line would have to cost among 96 CPUs on two \
             sockets spinning with interrupts off, which two cores of one VM cannot measure",
            m.service_for_seed_us,
            m.service_for_seed_us / m.service_us
        ));
    }
    Verdict {
        reproduced,
        criterion,
        why,
    }
}

/// What seed 002's readers measured, per design.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadersFacts {
    /// Wall seconds of run 1 and the median of the later runs.
    pub first_secs: f64,
    pub later_secs: f64,
    /// `bench`'s reclaim calls in run 1 and (median) in a later run.
    pub first_reclaims: u64,
    pub later_reclaims: u64,
    /// Memory cgroups each later reclaim visited (median of runs).
    pub later_visited_per_reclaim: f64,
    /// Cgroups dying when run 2 started (left by run 1).
    pub dying_at_run2: u64,
    /// `bench`'s usage at the end of the last run and its limit, bytes.
    pub bench_usage_bytes: u64,
    pub bench_max_bytes: u64,
    /// Bytes each memory cgroup charges to its parent.
    pub memcg_metadata_bytes: u64,
}

/// Seed 002's later-run slowdown: later runs at least half the seed's
/// later/first ratio (`legacy`, before the patch).
pub(crate) fn readers(m: &ReadersFacts) -> Verdict {
    let seed = readers_later_over_first(&READERS_BEFORE);
    let threshold = readers_threshold();
    let ratio = m.later_secs / m.first_secs.max(1e-9);
    let reproduced = readers_slowdown_reproduced(ratio);
    let criterion = format!(
        "later runs at least {threshold:.1}x run 1's wall time (half the seed's {seed:.1}x)"
    );
    let measured = format!(
        "later runs take {ratio:.2}x run 1 ({:.3} s → {:.3} s)",
        m.first_secs, m.later_secs
    );
    let why = if reproduced {
        format!(
            "{measured}: `bench` reclaimed {} times in run 1 and {} in a later run, visiting {:.0} \
             memory cgroups each",
            m.first_reclaims, m.later_reclaims, m.later_visited_per_reclaim
        )
    } else if m.later_reclaims == 0 {
        format!(
            "{measured}: `bench` never reached its memory.max ({} MiB of {} MiB at the end), so \
             nothing reclaimed over the {} cgroups run 1 left dying. In the kernel each memory \
             cgroup's per-CPU metadata is charged to `bench` and freed asynchronously after \
             rmdir, so `bench` sits at its limit and every later reader reclaims over tens of \
             thousands of dying cgroups; here {}",
            m.bench_usage_bytes >> 20,
            m.bench_max_bytes >> 20,
            m.dying_at_run2,
            metadata_note(m.memcg_metadata_bytes)
        )
    } else {
        format!(
            "{measured}: `bench` reclaimed {} times in run 1 and {} in a later run (visiting {:.0} \
             memory cgroups each), so run 1 pays what only later runs pay in the kernel: here \
             {}",
            m.first_reclaims,
            m.later_reclaims,
            m.later_visited_per_reclaim,
            metadata_note(m.memcg_metadata_bytes)
        )
    };
    Verdict {
        reproduced,
        criterion,
        why,
    }
}

/// The later/first ratio from which seed 002's slowdown counts as
/// reproduced: half the seed's (`legacy`, before the patch).
pub(crate) fn readers_threshold() -> f64 {
    readers_later_over_first(&READERS_BEFORE) / 2.0
}

/// Whether later runs taking `later_over_first` times run 1 reproduce
/// seed 002's slowdown.
pub(crate) fn readers_slowdown_reproduced(later_over_first: f64) -> bool {
    later_over_first >= readers_threshold()
}

fn metadata_note(bytes: u64) -> String {
    if bytes == 0 {
        "no metadata is charged (`--memcg-metadata 0`)".to_owned()
    } else {
        format!(
            "each memory cgroup charges {bytes} bytes of metadata, freed synchronously when the \
             cgroup is released"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_noise_is_twice_the_standard_error() {
        assert_eq!(ratio_noise(&[1.0], &[1.0, 2.0]), None);
        let n = ratio_noise(&[1.0, 1.0, 1.0, 1.0], &[0.9, 1.0, 1.1, 1.0]).unwrap();
        // MAD 0.05, median 1.0, 4 samples: 1.2533 * 1.4826 * 0.05 / 2.
        assert!((n - 2.0 * 0.04645).abs() < 1e-4, "{n}");
        // One wild repetition of nine moves it little.
        let steady = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99];
        let mut wild = steady;
        wild[4] = 1.5;
        let (a, b) = (ratio_noise(&steady, &steady), ratio_noise(&wild, &steady));
        assert!(b.unwrap() < 1.5 * a.unwrap(), "{a:?} {b:?}");
    }

    #[test]
    fn the_seeds_ratios_come_from_their_verbatim_figures() {
        assert!((KBUILD_4K_SYS.ratio() - 0.8919).abs() < 1e-4);
        assert!((KBUILD_64K_SYS.ratio() - 0.9000).abs() < 1e-4);
        assert!((SWAPIN_4K_ZERO.ratio() - 0.99621).abs() < 1e-5);
        assert_eq!(KBUILD_4K_SYS.quoted(), "10782.29 s → 9617.23 s");
        assert_eq!(time_secs("1m33.860s"), 93.86);
        let (first, later, median) = readers_runs(&READERS_BEFORE);
        assert_eq!((first, median), (3.498, "1m31.931s"));
        assert!((later / first - 26.28).abs() < 0.01);
        assert!((readers_later_over_first(&READERS_AFTER) - 25.55).abs() < 0.01);
    }

    fn kbuild_facts(ratio: f64, noise: f64, share: f64) -> KbuildFacts {
        KbuildFacts {
            packed_over_locked: ratio,
            noise: Some(noise),
            locked_share: share,
            locked_wait_ns: 8.9,
            locked_calls: 697561,
            jobs: 4,
            cpus: 2,
        }
    }

    #[test]
    fn the_kbuild_verdict_follows_the_measured_ratio() {
        let v = kbuild(KBUILD_4K_SYS, kbuild_facts(0.972, 0.01, 0.007));
        assert!(!v.reproduced, "{v}");
        assert!(v.criterion.contains("at most 0.946"), "{}", v.criterion);
        assert!(v.why.contains("0.70% of `locked`'s build CPU"), "{}", v.why);
        assert!(v.to_string().starts_with("**Not reproduced**"), "{v}");
        let v = kbuild(KBUILD_4K_SYS, kbuild_facts(0.90, 0.01, 0.15));
        assert!(
            v.reproduced && v.to_string().starts_with("**Reproduced**"),
            "{v}"
        );
        // Within the noise is not a saving.
        assert!(!kbuild(KBUILD_4K_SYS, kbuild_facts(0.93, 0.08, 0.15)).reproduced);
        // Nor is one that swap_cgroup calls cannot account for, or one
        // without a noise estimate.
        let v = kbuild(KBUILD_4K_SYS, kbuild_facts(0.815, 0.01, 0.0));
        assert!(
            !v.reproduced && v.why.contains("the build's own variation"),
            "{v}"
        );
        let one_rep = KbuildFacts {
            noise: None,
            ..kbuild_facts(0.90, 0.0, 0.15)
        };
        assert!(!kbuild(KBUILD_4K_SYS, one_rep).reproduced);
        let no_swap = KbuildFacts {
            locked_calls: 0,
            ..kbuild_facts(0.80, 0.01, 0.0)
        };
        let v = kbuild(KBUILD_4K_SYS, no_swap);
        assert!(!v.reproduced && v.why.contains("did not swap"), "{v}");
    }

    #[test]
    fn the_projection_verdict_follows_the_projected_ratio() {
        let facts = ProjectionFacts {
            cpu_ratio: 1.004,
            utilisation: 0.458,
            service_us: 0.035,
            service_for_seed_us: 0.083,
        };
        let v = projection(facts);
        assert!(!v.reproduced && v.why.contains("2.4x the measured"), "{v}");
        assert!(v.criterion.contains("at least 1.061"), "{}", v.criterion);
        let v = projection(ProjectionFacts {
            cpu_ratio: 1.12,
            ..facts
        });
        assert!(v.reproduced && !v.why.contains("would give"), "{v}");
    }

    #[test]
    fn not_worse_allows_the_spread_or_one_percent() {
        assert!(not_worse(0.9925, 1.009, Some(0.002), "packed").reproduced);
        assert!(!not_worse(0.9925, 1.023, Some(0.01), "packed").reproduced);
        assert!(not_worse(0.9925, 1.023, Some(0.03), "packed").reproduced);
        let v = not_worse(0.9925, 1.06, Some(0.49), "packed");
        assert!(!v.reproduced && v.why.contains("too noisy to tell"), "{v}");
        assert!(!not_worse(0.9925, 0.9, None, "packed").reproduced);
        let v = not_worse(0.9925, 1.2, Some(0.02), "packed");
        assert!(!v.reproduced && !v.why.contains("too noisy"), "{v}");
    }

    fn readers_facts(first: f64, later: f64, later_reclaims: u64) -> ReadersFacts {
        ReadersFacts {
            first_secs: first,
            later_secs: later,
            first_reclaims: 0,
            later_reclaims,
            later_visited_per_reclaim: 0.0,
            dying_at_run2: 1000,
            bench_usage_bytes: 42 << 20,
            bench_max_bytes: 768 << 20,
            memcg_metadata_bytes: 0,
        }
    }

    #[test]
    fn the_readers_verdict_follows_the_later_over_first_ratio() {
        let v = readers(&readers_facts(0.2, 0.21, 0));
        assert!(!v.reproduced);
        assert!(
            v.why.contains("1.05x run 1") && v.why.contains("never reached"),
            "{v}"
        );
        assert!(v.criterion.contains("at least 13.1x"), "{}", v.criterion);
        let v = readers(&readers_facts(0.2, 0.3, 50));
        assert!(
            !v.reproduced && v.why.contains("reclaimed 0 times in run 1"),
            "{v}"
        );
        assert!(readers(&readers_facts(0.2, 5.4, 50)).reproduced);
    }
}
