//! How every benchmark times a phase: wall time from the first timed
//! thread's start to the last one's end, each timed thread's CPU time over
//! the same span, and how many rounds of work make a phase long enough to
//! be believed on a shared machine.
//!
//! Why CPU time: on a machine other work keeps busy, a thread can be off
//! its CPU for part of a phase, and the wall time then measures the
//! scheduler as much as the code (and hurts the faster design more: the
//! same delay on a shorter run). A thread's CPU time divided by the phase's
//! wall time (its *CPU share*) says whether that happened.
//!
//! Why ≥ 200 ms: phases of a few ms are comparable to a scheduler time
//! slice, so one preemption decides the sample; at 200 ms a sample averages
//! over many slices.

use std::sync::Barrier;
use std::time::Instant;

use anyhow::Context;

/// The CPU time the calling thread has used, in seconds.
///
/// `CLOCK_THREAD_CPUTIME_ID` through `libc`, which the workspace already
/// depends on: one call, where a crate such as `cpu-time` would add a
/// dependency for the same call. It counts user and system time, so the
/// file device's page-cache copies count as running.
pub(crate) fn thread_cpu_secs() -> std::io::Result<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` that outlives the call,
    // and CLOCK_THREAD_CPUTIME_ID is a clock every Linux and BSD provides;
    // clock_gettime writes only `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// What one timed phase took, or several summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Timed {
    /// Wall seconds from the first timed thread's start to the last one's
    /// end.
    pub secs: f64,
    /// CPU seconds of each timed thread over its part of the phase.
    pub cpu_secs: Vec<f64>,
}

impl Timed {
    /// The lowest CPU share of any timed thread: its CPU time over the
    /// phase's wall time. A thread that started late or finished early
    /// counts as off its CPU for the rest, because the wall time includes
    /// that span too. 0 when nothing was timed.
    pub fn min_cpu_share(&self) -> f64 {
        let least = self.cpu_secs.iter().copied().fold(f64::INFINITY, f64::min);
        if self.secs > 0.0 && least.is_finite() {
            least / self.secs
        } else {
            0.0
        }
    }

    /// CPU seconds of the busiest timed thread: about what the phase would
    /// take on CPUs of its own (less where threads sleep on locks).
    pub fn busy_secs(&self) -> f64 {
        self.cpu_secs.iter().copied().fold(0.0, f64::max)
    }

    /// Adds `other`'s phase: wall times add, and each thread's CPU time to
    /// the thread with the same index (so a share over summed phases is a
    /// thread's total CPU over the total wall time).
    pub fn add(&mut self, other: &Timed) {
        self.secs += other.secs;
        if self.cpu_secs.len() < other.cpu_secs.len() {
            self.cpu_secs.resize(other.cpu_secs.len(), 0.0);
        }
        for (mine, theirs) in self.cpu_secs.iter_mut().zip(&other.cpu_secs) {
            *mine += theirs;
        }
    }
}

/// One thread's part of a phase.
struct Span {
    start: Instant,
    end: Instant,
    cpu_secs: f64,
}

/// Runs `body` on this thread as a timed phase; returns its result and
/// the phase.
pub(crate) fn timed_here<T>(
    body: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Timed)> {
    let (value, span) = span_of(body)?;
    let timed = Timed {
        secs: (span.end - span.start).as_secs_f64(),
        cpu_secs: vec![span.cpu_secs],
    };
    Ok((value, timed))
}

/// Times `body` on the calling thread. The CPU clock is read inside the
/// wall-clock span (its reads are system calls, ~1 µs), so a thread's CPU
/// time cannot exceed its span and a share above 1 is only clock
/// granularity.
fn span_of<T>(body: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, Span)> {
    let start = Instant::now();
    let cpu0 = thread_cpu_secs().context("reading the thread CPU clock")?;
    let value = body()?;
    let cpu1 = thread_cpu_secs().context("reading the thread CPU clock")?;
    let end = Instant::now();
    let span = Span {
        start,
        end,
        cpu_secs: cpu1 - cpu0,
    };
    Ok((value, span))
}

/// Runs `body(thread)` on `threads` threads released together, as one
/// timed phase. Each thread reads the clocks itself: the releasing thread
/// may not run again until the workers are done when there are more
/// threads than CPUs.
pub(crate) fn timed_threads<F>(threads: usize, body: F) -> anyhow::Result<Timed>
where
    F: Fn(usize) -> anyhow::Result<()> + Sync,
{
    let barrier = Barrier::new(threads);
    let spans = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, body) = (&barrier, &body);
                s.spawn(move || {
                    barrier.wait();
                    span_of(|| body(t)).map(|((), span)| span)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("benchmark thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<Span>>>()
    })?;
    let first = spans.iter().map(|s| s.start).min();
    let last = spans.iter().map(|s| s.end).max();
    let (Some(first), Some(last)) = (first, last) else {
        anyhow::bail!("a phase needs at least one thread");
    };
    Ok(Timed {
        secs: (last - first).as_secs_f64(),
        cpu_secs: spans.iter().map(|s| s.cpu_secs).collect(),
    })
}

/// One repetition's figure and how its phase went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    /// The figure, per operation or per run of the configured size (so it
    /// does not depend on the rounds): Mops/s, µs per run, ...
    pub value: f64,
    /// Wall seconds of the timed phase, every round included.
    pub phase_secs: f64,
    /// [`Timed::min_cpu_share`] of the phase.
    pub cpu_share: f64,
    /// [`Timed::busy_secs`] of the phase.
    pub busy_secs: f64,
}

impl Sample {
    /// `value`, measured over `timed`.
    pub fn new(value: f64, timed: &Timed) -> Self {
        Self {
            value,
            phase_secs: timed.secs,
            cpu_share: timed.min_cpu_share(),
            busy_secs: timed.busy_secs(),
        }
    }
}

/// A measurement whose shortest timed phase calibration can read.
pub(crate) trait Phased {
    /// How long the shortest timed phase it holds would take on a machine
    /// of its own: its [`Timed::busy_secs`]. Calibration reads this rather
    /// than wall time, which a busy machine inflates: a calibration run
    /// that lost half its CPU would settle on half the rounds, and quieter
    /// repetitions would then run phases half the minimum.
    fn calibration_secs(&self) -> f64;
}

impl Phased for Sample {
    fn calibration_secs(&self) -> f64 {
        self.busy_secs
    }
}

/// Calibration aims this far past the minimum phase, so that a repetition
/// that runs faster than the calibration run still lasts the minimum.
const CALIBRATION_MARGIN: f64 = 1.25;
/// Calibration runs at most this many times, and rounds stay below
/// `MAX_ROUNDS` (4 s at 1 ns a round): rounds grow at least 1.5x a step, so
/// either is only reached when the work does not grow with them.
const CALIBRATION_STEPS: usize = 16;
const MAX_ROUNDS: u64 = 1 << 32;
/// One sample may cost at most this many minimum phases of wall time, set-up
/// included. Where each round needs set-up far costlier than its timed part
/// (list-lru's reparenting of cgroups holding 1000 objects: 2000 adds per
/// timed rmdir), the phase stays shorter than the minimum rather than make
/// one sample cost minutes; the report's `shortest_phase_ms` shows it.
const SAMPLE_BUDGET_PHASES: f64 = 20.0;

/// The rounds of work that make `run(rounds)`'s shortest phase last at
/// least `min_secs` (1 when `min_secs` is 0, without running), within the
/// sample budget.
pub(crate) fn calibrate(
    min_secs: f64,
    mut run: impl FnMut(u64) -> anyhow::Result<f64>,
) -> anyhow::Result<u64> {
    let mut rounds = 1;
    if min_secs <= 0.0 {
        return Ok(rounds);
    }
    for _ in 0..CALIBRATION_STEPS {
        let start = Instant::now();
        let phase_secs = run(rounds)?;
        let tried = Tried {
            rounds,
            phase_secs,
            run_secs: start.elapsed().as_secs_f64(),
        };
        match tried.next_rounds(min_secs) {
            Some(more) if more <= MAX_ROUNDS => rounds = more,
            Some(_) => break,
            None => return Ok(rounds),
        }
    }
    anyhow::bail!("calibration: the timed phase did not grow with its rounds of work")
}

/// One calibration run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tried {
    /// Rounds of work it did.
    pub rounds: u64,
    /// Its shortest timed phase, seconds.
    pub phase_secs: f64,
    /// Its whole wall time, set-up included, seconds.
    pub run_secs: f64,
}

impl Tried {
    /// `None` when this run's phase is long enough (or no more rounds fit
    /// the sample budget), or the rounds to try next. The prediction
    /// assumes time grows in proportion to rounds and aims a fifth past the
    /// target, so that a near miss does not cost another step; it grows at
    /// least 1.5x (a fixed cost per run hides the slope) and at most 100x a
    /// step (one freak-fast run cannot make a phase last minutes).
    pub fn next_rounds(self, min_secs: f64) -> Option<u64> {
        let target = min_secs * CALIBRATION_MARGIN;
        if self.phase_secs >= target {
            return None;
        }
        let rounds = self.rounds;
        let per_round = |secs: f64| secs.max(1e-9) / rounds as f64;
        let predicted = (target * 1.2 / per_round(self.phase_secs)).ceil() as u64;
        let least = rounds.saturating_add(rounds.div_ceil(2));
        let wanted = predicted.clamp(least, rounds.saturating_mul(100));
        let affordable = (min_secs * SAMPLE_BUDGET_PHASES / per_round(self.run_secs)) as u64;
        let next = wanted.min(affordable);
        (next > rounds).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_share_is_the_least_busy_threads_over_the_wall_time() {
        let t = Timed {
            secs: 2.0,
            cpu_secs: vec![1.9, 1.0],
        };
        assert_eq!(t.min_cpu_share(), 0.5);
        assert_eq!(Timed::default().min_cpu_share(), 0.0);
        let mut sum = Timed::default();
        sum.add(&t);
        sum.add(&t);
        assert_eq!(sum.min_cpu_share(), 0.5);
        sum.add(&Timed {
            secs: 1.0,
            cpu_secs: vec![1.0, 1.0],
        });
        assert_eq!(sum.cpu_secs, vec![4.8, 3.0]);
        assert_eq!(sum.min_cpu_share(), 0.6);
    }

    #[test]
    fn a_busy_thread_gets_most_of_a_cpu() {
        let (sum, timed) = timed_here(|| {
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed().as_millis() < 30 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            Ok(x)
        })
        .unwrap();
        assert!(sum > 0);
        let share = timed.min_cpu_share();
        // A shared machine may take some of it away, never add to it.
        assert!(share > 0.0 && share <= 1.05, "{share}");
        let timed = timed_threads(2, |_| Ok(())).unwrap();
        assert_eq!(timed.cpu_secs.len(), 2);
    }

    #[test]
    fn calibration_reaches_the_minimum_phase_with_margin() {
        // 3 ms of set-up cost plus 2 ms per round.
        let mut tried = Vec::new();
        let rounds = calibrate(0.2, |r| {
            tried.push(r);
            Ok(0.003 + 0.002 * r as f64)
        })
        .unwrap();
        assert!(0.003 + 0.002 * rounds as f64 >= 0.2 * CALIBRATION_MARGIN);
        assert!(tried.len() <= 3, "{tried:?}");
        assert_eq!(calibrate(0.0, |_| unreachable!()).unwrap(), 1);
        let tried = |rounds, phase_secs, run_secs| Tried {
            rounds,
            phase_secs,
            run_secs,
        };
        assert_eq!(tried(4, 0.3, 0.3).next_rounds(0.2), None);
        assert_eq!(
            tried(2, 0.249, 0.25).next_rounds(0.2),
            Some(3),
            "at least 1.5x"
        );
        assert_eq!(
            tried(1, 1e-6, 1e-6).next_rounds(0.2),
            Some(100),
            "at most 100x"
        );
        // Set-up of 100 ms per round around a 1 ms phase: a sample may cost
        // 20 phases (4 s), so 40 rounds and a 40 ms phase, no more.
        assert_eq!(tried(1, 0.001, 0.1).next_rounds(0.2), Some(40));
        assert_eq!(tried(40, 0.04, 4.0).next_rounds(0.2), None);
        // Work that does not grow with rounds is an error after a bounded
        // number of tries, not an endless calibration.
        let mut calls = 0;
        let stuck = calibrate(0.2, |_| {
            calls += 1;
            Ok(0.001)
        });
        assert!(stuck.is_err());
        assert!(calls <= CALIBRATION_STEPS, "{calls}");
    }
}
