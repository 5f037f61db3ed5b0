//! The order of a benchmark's runs and how many rounds of work each does:
//! repetitions outermost, every design of a configuration back to back in
//! each repetition, and each design's rounds calibrated first so that its
//! timed phase lasts the minimum.

use super::timing::{self, Phased, Sample};
use crate::report::{PhaseFacts, Progress};

/// One timed run in a benchmark's order: the repetition, the
/// configuration, and the arm of that configuration (a design, or a
/// hardware limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub rep: usize,
    pub config: usize,
    pub arm: usize,
}

/// Every run of `reps` repetitions of configurations with `arms[c]` arms.
/// Repetitions are outermost, so drift on the machine spreads over every
/// configuration; inside one, every arm of a configuration runs back to
/// back (A, B, A, B, ...: never all of A then all of B), and the arm order
/// rotates by one each repetition so that no arm always runs first, right
/// after a different configuration.
pub(crate) fn schedule(reps: usize, arms: &[usize]) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(reps * arms.iter().sum::<usize>());
    for rep in 0..reps {
        for (config, &n) in arms.iter().enumerate() {
            slots.extend((0..n).map(|k| Slot {
                rep,
                config,
                arm: (k + rep) % n,
            }));
        }
    }
    slots
}

/// How a benchmark's runs are repeated: [`schedule`], each arm's rounds of
/// work settled first by calibration.
pub(crate) struct Interleaved<'a> {
    /// Repetitions of every arm.
    pub reps: usize,
    /// Arms of each configuration.
    pub arms: &'a [usize],
    /// Shortest timed phase, seconds: each arm's rounds are calibrated to
    /// reach it (0: one round, no calibration).
    pub min_phase_secs: f64,
    /// Run the first arm of every configuration once, untimed, before
    /// calibrating it or repeating it: for set-up the arms share (swap
    /// files, allocator and page-cache state), which would otherwise land
    /// in the first run and make calibration settle on too few rounds.
    pub warm_up: bool,
}

/// Every arm's runs: `rounds[config][arm]` and
/// `samples[config][arm][rep]`.
pub(crate) struct Runs<S> {
    pub rounds: Vec<Vec<u64>>,
    pub samples: Vec<Vec<Vec<S>>>,
}

impl Runs<Sample> {
    /// The figures of one arm, in repetition order.
    pub fn values(&self, config: usize, arm: usize) -> Vec<f64> {
        self.samples[config][arm].iter().map(|s| s.value).collect()
    }

    /// How one arm's phases went.
    pub fn facts(&self, config: usize, arm: usize) -> PhaseFacts {
        let phases = self.samples[config][arm].iter();
        PhaseFacts::of(
            self.rounds[config][arm],
            phases.map(|s| (s.phase_secs, s.cpu_share)),
        )
    }
}

impl<'a> Interleaved<'a> {
    /// `reps` repetitions of configurations with `arms[c]` arms each,
    /// phases of at least `min_phase_ms`; `warm_up` as in the field.
    pub fn new(reps: usize, min_phase_ms: u64, arms: &'a [usize], warm_up: bool) -> Self {
        Self {
            reps,
            arms,
            min_phase_secs: min_phase_ms as f64 / 1e3,
            warm_up,
        }
    }

    fn calibrating(&self) -> bool {
        self.min_phase_secs > 0.0
    }

    /// Progress steps of [`Interleaved::run`].
    pub fn steps(&self) -> u64 {
        let arms: usize = self.arms.iter().sum();
        let calibration = if self.calibrating() { arms } else { 0 };
        let warm_up = if self.warm_up { self.arms.len() } else { 0 };
        (self.reps * arms + calibration + warm_up) as u64
    }

    /// Runs `run(config, arm, rounds)` for every slot of the schedule after
    /// settling each arm's rounds, showing `name(config, arm)` on
    /// `progress`.
    pub fn run<S: Phased>(
        &self,
        progress: &mut Progress,
        name: impl Fn(usize, usize) -> String,
        mut run: impl FnMut(usize, usize, u64) -> anyhow::Result<S>,
    ) -> anyhow::Result<Runs<S>> {
        let rounds = self.rounds(progress, &name, &mut run)?;
        let mut samples: Vec<Vec<Vec<S>>> = self
            .arms
            .iter()
            .map(|&n| (0..n).map(|_| Vec::with_capacity(self.reps)).collect())
            .collect();
        for Slot { rep, config, arm } in schedule(self.reps, self.arms) {
            samples[config][arm].push(run(config, arm, rounds[config][arm])?);
            progress.step(1, &format!("rep {} {}", rep + 1, name(config, arm)));
        }
        Ok(Runs { rounds, samples })
    }

    /// The warm-up, or each arm's calibration; the rounds of every arm.
    fn rounds<S: Phased>(
        &self,
        progress: &mut Progress,
        name: &impl Fn(usize, usize) -> String,
        run: &mut impl FnMut(usize, usize, u64) -> anyhow::Result<S>,
    ) -> anyhow::Result<Vec<Vec<u64>>> {
        let mut rounds = Vec::with_capacity(self.arms.len());
        for (config, &n) in self.arms.iter().enumerate() {
            if self.warm_up {
                run(config, 0, 1)?;
                progress.step(1, &format!("warm-up {}", name(config, 0)));
            }
            let mut by_arm = Vec::with_capacity(n);
            for arm in 0..n {
                let r = timing::calibrate(self.min_phase_secs, |r| {
                    Ok(run(config, arm, r)?.calibration_secs())
                })?;
                if self.calibrating() {
                    progress.step(1, &format!("calibrate {}: {r} rounds", name(config, arm)));
                }
                by_arm.push(r);
            }
            rounds.push(by_arm);
        }
        Ok(rounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_repetition_runs_every_arm_back_to_back_in_rotated_order() {
        let order: Vec<(usize, usize, usize)> = schedule(3, &[2, 1])
            .into_iter()
            .map(|s| (s.rep, s.config, s.arm))
            .collect();
        assert_eq!(
            order,
            [
                (0, 0, 0),
                (0, 0, 1),
                (0, 1, 0),
                (1, 0, 1),
                (1, 0, 0),
                (1, 1, 0),
                (2, 0, 0),
                (2, 0, 1),
                (2, 1, 0),
            ]
        );
        // Five designs: each repetition has every design once per
        // configuration, and each design leads once in five repetitions.
        let slots = schedule(5, &[5]);
        for rep in slots.chunks(5) {
            let mut arms: Vec<usize> = rep.iter().map(|s| s.arm).collect();
            arms.sort_unstable();
            assert_eq!(arms, [0, 1, 2, 3, 4]);
        }
        let mut leads: Vec<usize> = slots.chunks(5).map(|r| r[0].arm).collect();
        leads.sort_unstable();
        assert_eq!(leads, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn interleaved_runs_follow_the_schedule_after_calibrating() {
        let arms = [2, 1];
        let plan = Interleaved {
            reps: 2,
            arms: &arms,
            min_phase_secs: 0.01,
            warm_up: true,
        };
        let mut progress = Progress::new("test", plan.steps());
        let mut timed = Vec::new();
        let runs = plan
            .run(
                &mut progress,
                |c, a| format!("{c}/{a}"),
                |config, arm, rounds| {
                    // 1 ms per round: calibration settles on at least 13.
                    let sample = Sample {
                        value: 1.0,
                        phase_secs: rounds as f64 * 1e-3,
                        cpu_share: 1.0,
                        busy_secs: rounds as f64 * 1e-3,
                    };
                    if rounds > 1 && sample.phase_secs >= 0.0125 {
                        timed.push((config, arm));
                    }
                    Ok(sample)
                },
            )
            .unwrap();
        progress.finish();
        // The last calibration run of each arm, then the schedule.
        let calibration = [(0, 0), (0, 1), (1, 0)];
        let scheduled = schedule(2, &arms).into_iter().map(|s| (s.config, s.arm));
        let want: Vec<_> = calibration.into_iter().chain(scheduled).collect();
        assert_eq!(timed, want);
        assert!(runs.rounds.iter().flatten().all(|&r| r >= 13));
        assert_eq!(runs.values(0, 1), vec![1.0, 1.0]);
        assert_eq!(runs.facts(1, 0).cpu_shares, vec![1.0, 1.0]);
    }
}
