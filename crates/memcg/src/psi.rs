//! Pressure stall information for memory (kernel/sched/psi.c, v6.14):
//! how much of the time tasks of a cgroup were stalled on memory, as
//! `memory.pressure` and, for the root, `/proc/pressure/memory`.
//!
//! Every cgroup has a [`PsiGroup`] counting its tasks and its descendants'
//! (a task counts in its cgroup and every ancestor): those running, those
//! in a memory stall, and those stalled while running (in reclaim, say).
//! From the counts:
//!
//! - **some**: at least one task is in a memory stall;
//! - **full**: some task is stalled and every running task is stalled
//!   (no task runs productively).
//!
//! Each state's time accrues between count changes (`total`, shown in µs),
//! and every `PSI_FREQ` (2 s) its share of the last period feeds three
//! exponentially decaying averages over 10, 60 and 300 s, in the kernel's
//! fixed point (`calc_load` with `EXP_10s` = 1677, `EXP_60s` = 1981,
//! `EXP_300s` = 2034 over 2048), shown as percentages with two decimals.
//! The periods are worked out exactly when the counts next change or the
//! file is read (the kernel's `psi_avgs_work` runs them on a timer); a
//! stretch of periods in one state is folded in one step (`calc_load_n`).
//!
//! Where stalls are recorded is the kernel's: around memory cgroup reclaim
//! on a charge (`try_charge_memcg`), `memory.high` reclaim and its
//! throttle sleep. Time comes from the tree's clock (simulated in
//! `memcg sh`, where only sleeps advance it).
//!
//! Not modelled: CPUs. The kernel keeps these counts per CPU and weighs
//! each CPU's stall time by its non-idle time; the simulator has no CPUs,
//! so a group's tasks count as if on one. Poll triggers (writes to
//! `memory.pressure`) are not supported.
//!
//! Locking: one mutex per group, taken leaf first, then ancestors, never
//! while holding another group's.

use std::fmt::Write;
use std::time::Duration;

use crate::sync::{Mutex, lock};

/// How often the averages take a sample (`PSI_FREQ`, 2 s).
pub const PSI_FREQ: Duration = Duration::from_secs(2);

/// `FSHIFT`/`FIXED_1`: the averages' fixed point.
const FSHIFT: u32 = 11;
const FIXED_1: u64 = 1 << FSHIFT;

/// Decay per period of the 10 s, 60 s and 300 s averages (`EXP_10s`, ...).
const EXP: [u64; 3] = [1677, 1981, 2034];

/// A change of a task's state, for `PsiGroup::change`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PsiDelta {
    /// Tasks running (`NR_RUNNING`).
    pub running: i32,
    /// Tasks in a memory stall (`NR_MEMSTALL`).
    pub memstall: i32,
    /// Tasks in a memory stall while running (`NR_MEMSTALL_RUNNING`).
    pub memstall_running: i32,
}

/// One resource's two states: some and full.
const SOME: usize = 0;
const FULL: usize = 1;

#[derive(Debug, Default)]
struct State {
    running: u32,
    memstall: u32,
    memstall_running: u32,
    /// When the counts last changed (the clock's time).
    since: Duration,
    /// Stall time accrued up to `since`, ns: some, full.
    total_ns: [u64; 2],
    /// The averages, in `FIXED_1` percent: [some, full][10 s, 60 s, 300 s].
    avg: [[u64; 3]; 2],
    /// The totals the averages have taken in, ns.
    avg_total_ns: [u64; 2],
    /// The end of the current averaging period.
    next_update: Duration,
}

impl State {
    /// Which states hold with the current counts (`test_state`).
    fn holds(&self) -> [bool; 2] {
        let some = self.memstall > 0;
        [some, some && self.running == self.memstall_running]
    }

    /// The totals at `at` (not before `since`), the counts unchanged.
    fn totals_at(&self, at: Duration) -> [u64; 2] {
        let elapsed = duration_ns(at.saturating_sub(self.since));
        let holds = self.holds();
        [SOME, FULL].map(|s| self.total_ns[s].saturating_add(if holds[s] { elapsed } else { 0 }))
    }

    /// Runs every averaging period that ended by `now`
    /// (`update_averages`, as the timer would have).
    fn catch_up(&mut self, now: Duration) {
        let period_ns = duration_ns(PSI_FREQ);
        // (A `next_update` at the end of time is never reached.)
        while self.next_update <= now && self.next_update < Duration::MAX {
            let boundary = self.next_update;
            let totals = self.totals_at(boundary);
            let mut pcts = [0u64; 2];
            for s in [SOME, FULL] {
                let sample = totals[s]
                    .saturating_sub(self.avg_total_ns[s])
                    .min(period_ns);
                self.avg_total_ns[s] = self.avg_total_ns[s].saturating_add(sample);
                // Whole percent, then fixed point (`calc_avgs`).
                pcts[s] = sample * 100 / period_ns * FIXED_1;
            }
            // Periods after this one, whole, in the same state: one step
            // (past 2^32 of them the averages have long converged).
            let rest_periods = (now - boundary).as_nanos() / PSI_FREQ.as_nanos();
            let rest = u32::try_from(rest_periods).unwrap_or(u32::MAX);
            let holds = self.holds();
            for s in [SOME, FULL] {
                for (w, &exp) in EXP.iter().enumerate() {
                    self.avg[s][w] = calc_load(self.avg[s][w], exp, pcts[s]);
                }
            }
            if rest == 0 {
                self.next_update = after_periods(boundary, 1);
                continue;
            }
            for s in [SOME, FULL] {
                let pct = if holds[s] { 100 * FIXED_1 } else { 0 };
                for (w, &exp) in EXP.iter().enumerate() {
                    self.avg[s][w] = calc_load_n(self.avg[s][w], exp, pct, rest);
                }
                if holds[s] {
                    self.avg_total_ns[s] =
                        self.avg_total_ns[s].saturating_add(u64::from(rest) * period_ns);
                }
            }
            self.next_update = after_periods(boundary, rest_periods + 1);
        }
    }
}

/// `n` periods after `t`; the end of time if that is past what a
/// `Duration` holds.
fn after_periods(t: Duration, n: u128) -> Duration {
    let ns = n.saturating_mul(PSI_FREQ.as_nanos());
    let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
    let step = Duration::new(secs, (ns % 1_000_000_000) as u32);
    t.checked_add(step).unwrap_or(Duration::MAX)
}

/// `calc_load`: one decay step of a fixed-point average towards `active`.
fn calc_load(load: u64, exp: u64, active: u64) -> u64 {
    let mut newload = load * exp + active * (FIXED_1 - exp);
    if active >= load {
        newload += FIXED_1 - 1;
    }
    newload / FIXED_1
}

/// `calc_load_n`: `n` steps with the same `active` (`exp^n` by squaring,
/// `fixed_power_int`).
fn calc_load_n(load: u64, exp: u64, active: u64, n: u32) -> u64 {
    calc_load(load, fixed_power_int(exp, n), active)
}

/// `fixed_power_int`: `x^n` in `FSHIFT` fixed point, rounded.
fn fixed_power_int(mut x: u64, mut n: u32) -> u64 {
    let mut result = FIXED_1;
    if n > 0 {
        loop {
            if n & 1 != 0 {
                result = (result * x + FIXED_1 / 2) >> FSHIFT;
            }
            n >>= 1;
            if n == 0 {
                break;
            }
            x = (x * x + FIXED_1 / 2) >> FSHIFT;
        }
    }
    result
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One cgroup's pressure state (`struct psi_group`, memory only).
#[derive(Debug)]
pub struct PsiGroup {
    state: Mutex<State>,
}

impl Default for PsiGroup {
    fn default() -> Self {
        Self::new(Duration::ZERO)
    }
}

impl PsiGroup {
    /// A group whose first averaging period starts at `now`.
    pub(crate) fn new(now: Duration) -> Self {
        Self {
            state: Mutex::new(State {
                since: now,
                next_update: now + PSI_FREQ,
                ..State::default()
            }),
        }
    }

    /// Applies a task state change at `now` (`psi_group_change`).
    pub(crate) fn change(&self, now: Duration, delta: PsiDelta) {
        let mut st = lock(&self.state);
        let now = now.max(st.since);
        st.catch_up(now);
        st.total_ns = st.totals_at(now);
        st.since = now;
        let apply = |count: &mut u32, d: i32| {
            *count = count.saturating_add_signed(d);
        };
        apply(&mut st.running, delta.running);
        apply(&mut st.memstall, delta.memstall);
        apply(&mut st.memstall_running, delta.memstall_running);
    }

    /// Total stall time so far, µs: (some, full).
    pub fn total_us(&self, now: Duration) -> (u64, u64) {
        let st = lock(&self.state);
        let t = st.totals_at(now.max(st.since));
        (t[SOME] / 1000, t[FULL] / 1000)
    }

    /// The file's text (`psi_show`): a `some` and a `full` line.
    pub fn show(&self, now: Duration) -> String {
        let mut st = lock(&self.state);
        let now = now.max(st.since);
        st.catch_up(now);
        let totals = st.totals_at(now);
        let mut out = String::new();
        for (s, name) in [(SOME, "some"), (FULL, "full")] {
            let avg = st.avg[s];
            let fmt = |x: u64| {
                format!(
                    "{}.{:02}",
                    x >> FSHIFT,
                    ((x & (FIXED_1 - 1)) * 100) >> FSHIFT
                )
            };
            let _ = writeln!(
                out,
                "{name} avg10={} avg60={} avg300={} total={}",
                fmt(avg[0]),
                fmt(avg[1]),
                fmt(avg[2]),
                totals[s] / 1000
            );
        }
        out
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn stall(g: &PsiGroup, at: Duration, running: bool) {
        g.change(
            at,
            PsiDelta {
                running: 0,
                memstall: 1,
                memstall_running: i32::from(running),
            },
        );
    }

    fn unstall(g: &PsiGroup, at: Duration, running: bool) {
        g.change(
            at,
            PsiDelta {
                running: 0,
                memstall: -1,
                memstall_running: -i32::from(running),
            },
        );
    }

    #[test]
    fn a_lone_stalled_task_is_some_and_full() {
        let g = PsiGroup::new(Duration::ZERO);
        let run = PsiDelta {
            running: 1,
            ..PsiDelta::default()
        };
        g.change(Duration::ZERO, run);
        stall(&g, Duration::from_millis(100), true);
        unstall(&g, Duration::from_millis(400), true);
        assert_eq!(g.total_us(Duration::from_secs(1)), (300_000, 300_000));
        // A second task running productively: the stall is some, not full.
        g.change(Duration::from_secs(1), run);
        stall(&g, Duration::from_secs(1), true);
        unstall(&g, Duration::from_millis(1500), true);
        assert_eq!(g.total_us(Duration::from_secs(2)), (800_000, 300_000));
    }

    #[test]
    fn averages_follow_the_kernels_fixed_point() {
        let g = PsiGroup::new(Duration::ZERO);
        // Stalled (sleeping, not running) for the whole of 10 s.
        stall(&g, Duration::ZERO, false);
        let text = g.show(Duration::from_secs(10));
        // 5 periods at 100%: 100 * (1 - (1677/2048)^5) = 63.x for avg10.
        assert!(text.starts_with("some avg10=63."), "{text}");
        assert!(text.ends_with("total=10000000\n"), "{text}");
        unstall(&g, Duration::from_secs(10), false);
        // A long quiet stretch decays in one step, and to zero.
        let text = g.show(Duration::from_secs(3600));
        assert!(
            text.starts_with("some avg10=0.00 avg60=0.00 avg300=0.00 total=10000000\n"),
            "{text}"
        );
    }

    #[test]
    fn centuries_of_stall_saturate_rather_than_wrap() {
        let g = PsiGroup::new(Duration::ZERO);
        stall(&g, Duration::ZERO, false);
        let far = Duration::from_secs(u64::MAX / 1_000_000_000);
        let text = g.show(far);
        assert!(text.starts_with("some avg10=100.00"), "{text}");
        let later = g.show(Duration::MAX);
        assert!(later.contains("total="), "{later}");
    }

    #[test]
    fn fixed_power_matches_repeated_steps() {
        let mut load = 50 * FIXED_1;
        for _ in 0..7 {
            load = calc_load(load, EXP[0], 0);
        }
        let folded = calc_load_n(50 * FIXED_1, EXP[0], 0, 7);
        // Each step rounds down; the power rounds once: within 0.03%.
        assert!(load.abs_diff(folded) <= FIXED_1 / 32, "{load} vs {folded}");
    }
}
