//! Pressure stall information for memory (kernel/sched/psi.c, v6.14):
//! how much of the time tasks of a cgroup were stalled on memory, as
//! `memory.pressure` and, for the root, `/proc/pressure/memory`, with poll
//! triggers on both.
//!
//! # Tasks and CPUs
//!
//! A [`PsiTask`] is one task as the scheduler's pressure hooks see it: its
//! cgroup, the simulated CPU it runs on (`task_cpu`) and its state flags
//! (`TSK_RUNNING`, `TSK_MEMSTALL`, `TSK_MEMSTALL_RUNNING`). A task counts
//! in its cgroup and every ancestor (the root is the whole machine), in
//! that CPU's slot of each [`PsiGroup`]. The simulator decides which
//! tasks exist, where they run and when they run; this module only counts.
//! There is no scheduler: a CPU's tasks are not time-shared, so the
//! kernel's "the task on the CPU is reclaiming" rule (`PSI_ONCPU` with
//! `in_memstall`) is not modelled; every other rule is.
//!
//! Per CPU, from its task counts (`test_state`):
//!
//! - **some**: at least one task is in a memory stall;
//! - **full**: some task is stalled and every running task is stalled
//!   (none runs productively);
//! - **non-idle**: a task runs or is stalled.
//!
//! Each CPU accrues the time it spends in each state (`record_times`).
//!
//! # Aggregation
//!
//! As the kernel's `collect_percpu_times`: the time each CPU spent in a
//! state since the last aggregation is weighted by that CPU's non-idle
//! time in whole jiffies, summed and divided by the total non-idle time;
//! the result adds to the group's `total`. One stalled task and one
//! running task on two CPUs therefore read 50 % some and 50 % full; a lone
//! task reads exactly its own stall (as long as the stretch aggregated
//! holds at least a jiffy of non-idle time: below that the kernel's
//! weight rounds to zero and the time is dropped, and so it is here).
//!
//! Every `PSI_FREQ` (`2*HZ+1` jiffies: 2.001 s) the averages take the
//! share of the period the total grew by, in whole percent, into three
//! exponentially decaying averages over 10, 60 and 300 s (`calc_load`
//! with `EXP_10s` = 1677, `EXP_60s` = 1981, `EXP_300s` = 2034 over 2048),
//! shown with two decimals. The kernel runs this on a timer
//! (`psi_avgs_work`); here the periods are worked out, on their exact
//! boundaries, whenever the group is next touched (a task change, a read,
//! a trigger poll); a stretch of periods with no change between them is
//! worked out at once (idle ones decay in one step, `calc_load_n`, as the
//! kernel's missed periods do). Reads aggregate too
//! (`psi_show`), so a read moves `total` but not the averages.
//!
//! # Triggers
//!
//! Writing `some|full THRESHOLD_US WINDOW_US` to a pressure file makes a
//! trigger for that open file ([`TriggerSlot`], `psi_trigger_create`):
//! the window at most 10 s and not 0, the threshold not 0 and at most the
//! window, one trigger per open file (`EBUSY`), else `EINVAL`. A
//! privileged opener's (`CAP_SYS_RESOURCE`) trigger is served by the
//! real-time poller (`psi_rtpoll_work`): once a stall starts, the group's
//! totals are sampled every tenth of the smallest window for ten of those
//! periods after the last change, each jiffy-aligned as the kernel's
//! timer is. An unprivileged opener's window must be a multiple of 2 s,
//! and its trigger is updated with the averages. A trigger fires when the
//! stall time grown within its sliding window (`window_update`: the
//! growth since the window started, plus the previous window's growth
//! for the part not yet covered) reaches the threshold, at most once per
//! window; [`TriggerSlot::poll`] then reports `POLLPRI` once. As in v6.14,
//! a new trigger's window starts from the real-time poller's total even
//! for an averages trigger, so an unprivileged trigger on a group with a
//! stall history fires at its first update (fixed after v6.16).
//!
//! # Switching off
//!
//! `cgroup.pressure` 0 ([`CgroupTree::set_psi_enabled`]) stops a group's
//! accounting: task counts are kept, but the first change on each CPU
//! concludes the time of the state it was in and no state holds after
//! it; 1 again restarts each CPU's state from its counts
//! (`psi_cgroup_restart`).
//!
//! Locking: one mutex per group, taken for one group at a time (a task
//! change walks leaf to root, locking each in turn), and a task's own
//! mutex outside them, so a task's changes reach every group in order.

use std::fmt::Write;
use std::time::Duration;

use crate::cgroup::Cgroup;
use crate::clock::HZ;
use crate::errno::Errno;
use crate::memcontrol::CgroupTree;
use crate::sync::{Arc, Mutex, lock};

/// Nanoseconds per jiffy.
const NSEC_PER_JIFFY: u64 = 1_000_000_000 / HZ;

/// How often the averages take a sample (`PSI_FREQ`: `2*HZ+1` jiffies).
pub const PSI_FREQ: Duration = Duration::from_nanos((2 * HZ + 1) * NSEC_PER_JIFFY);

/// The largest trigger window (`WINDOW_MAX_US`), µs.
pub(crate) const WINDOW_MAX_US: u32 = 10_000_000;

/// Real-time poller updates per trigger window (`UPDATES_PER_WINDOW`).
const UPDATES_PER_WINDOW: u64 = 10;

/// `FSHIFT`/`FIXED_1`: the averages' fixed point.
const FSHIFT: u32 = 11;
const FIXED_1: u64 = 1 << FSHIFT;

/// Decay per period of the 10 s, 60 s and 300 s averages (`EXP_10s`, ...).
const EXP: [u64; 3] = [1677, 1981, 2034];

/// Task counts (`NR_RUNNING`, `NR_MEMSTALL`, `NR_MEMSTALL_RUNNING`) and the
/// task flags that raise them (`TSK_*`: bit `i` raises count `i`).
const NR_RUNNING: usize = 0;
const NR_MEMSTALL: usize = 1;
const NR_MEMSTALL_RUNNING: usize = 2;
const TSK_RUNNING: u8 = 1 << NR_RUNNING;
const TSK_MEMSTALL: u8 = 1 << NR_MEMSTALL;
const TSK_MEMSTALL_RUNNING: u8 = 1 << NR_MEMSTALL_RUNNING;

/// The states a CPU accrues time in, and the bits of its state mask.
const SOME: usize = 0;
const FULL: usize = 1;
const NONIDLE: usize = 2;

/// The two aggregators: the averages' and the real-time poller's.
const AVGS: usize = 0;
const POLL: usize = 1;

/// Which stall state a trigger watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PsiState {
    /// Some task stalled.
    Some,
    /// Every non-idle task stalled.
    Full,
}

impl PsiState {
    fn index(self) -> usize {
        match self {
            PsiState::Some => SOME,
            PsiState::Full => FULL,
        }
    }
}

/// One CPU's slot of a group (`struct psi_group_cpu`).
#[derive(Debug, Default, Clone)]
struct CpuState {
    tasks: [u32; 3],
    /// Which of some, full and non-idle hold (bit per state).
    mask: u8,
    /// When the mask last changed, ns.
    state_start: u64,
    /// Time spent in each state up to `state_start`, ns.
    times: [u64; 3],
    /// What each aggregator took in last.
    times_prev: [[u64; 3]; 2],
}

impl CpuState {
    /// `test_state` for memory (no I/O or CPU pressure here).
    fn test_states(&self) -> u8 {
        let t = &self.tasks;
        let mut mask = 0;
        if t[NR_MEMSTALL] > 0 {
            mask |= 1 << SOME;
            if t[NR_RUNNING] == t[NR_MEMSTALL_RUNNING] {
                mask |= 1 << FULL;
            }
        }
        if t[NR_RUNNING] > 0 || t[NR_MEMSTALL] > 0 {
            mask |= 1 << NONIDLE;
        }
        mask
    }

    /// `record_times`: the time since `state_start` goes to the states of
    /// the mask.
    fn record_times(&mut self, now: u64) {
        let delta = now.saturating_sub(self.state_start);
        self.state_start = now;
        for s in [SOME, FULL, NONIDLE] {
            if self.mask & (1 << s) != 0 {
                self.times[s] = self.times[s].saturating_add(delta);
            }
        }
    }

    /// The times at `now`, the running state included.
    fn times_at(&self, now: u64) -> [u64; 3] {
        let delta = now.saturating_sub(self.state_start);
        [SOME, FULL, NONIDLE].map(|s| {
            let running = if self.mask & (1 << s) != 0 { delta } else { 0 };
            self.times[s].saturating_add(running)
        })
    }
}

/// A trigger's sliding window (`struct psi_window`).
#[derive(Debug, Clone, Copy)]
struct Window {
    size: u64,
    start_time: u64,
    start_value: u64,
    prev_growth: u64,
}

impl Window {
    fn reset(&mut self, now: u64, value: u64, prev_growth: u64) {
        self.start_time = now;
        self.start_value = value;
        self.prev_growth = prev_growth;
    }

    /// `window_update`: the growth within the window ending now, the
    /// previous window's growth interpolated over the part not covered
    /// yet. As the kernel, the remaining time is a `u32` (it wraps for
    /// windows over 4.29 s) and the growth a wrapping difference.
    fn update(&mut self, now: u64, value: u64) -> u64 {
        let elapsed = now.wrapping_sub(self.start_time);
        let mut growth = value.wrapping_sub(self.start_value);
        if elapsed > self.size {
            self.reset(now, value, growth);
        } else {
            let remaining = u64::from((self.size - elapsed) as u32);
            let extra =
                u128::from(self.prev_growth) * u128::from(remaining) / u128::from(self.size);
            growth = growth.wrapping_add(extra as u64);
        }
        growth
    }
}

/// One trigger (`struct psi_trigger`).
#[derive(Debug)]
struct Trigger {
    id: u64,
    state: usize,
    threshold: u64,
    win: Window,
    /// Fired and not yet polled.
    event: bool,
    last_event_time: u64,
    pending_event: bool,
    aggregator: usize,
}

/// The real-time poller's state (`rtpoll_*`).
#[derive(Debug)]
struct Rtpoll {
    /// Stall states with a privileged trigger (bit per state).
    states: u8,
    nr_triggers: [u32; 2],
    min_period: u64,
    until: u64,
    next_update: u64,
    total: [u64; 2],
    /// Set while a poll is scheduled (`rtpoll_scheduled`).
    scheduled: bool,
    /// When the poll timer fires, if armed.
    timer: Option<u64>,
}

impl Default for Rtpoll {
    fn default() -> Self {
        Self {
            states: 0,
            nr_triggers: [0; 2],
            min_period: u64::MAX,
            until: 0,
            next_update: u64::MAX,
            total: [0; 2],
            scheduled: false,
            timer: None,
        }
    }
}

/// How long after a change timer events are all worked through, and how
/// far back of `now` a skipped stretch resumes (see [`State::advance`]):
/// two of the largest windows and two averaging periods, so every window
/// a trigger looks at is built from events in one state.
const HORIZON: u64 = 2 * WINDOW_MAX_US as u64 * 1000 + 2 * (2 * HZ + 1) * NSEC_PER_JIFFY;

#[derive(Debug)]
struct State {
    cpus: Vec<CpuState>,
    enabled: bool,
    /// Times accounting was switched off (each released the open files).
    switch_offs: u64,
    /// The latest time seen: clocks read on different threads may come
    /// in slightly out of order; time never goes back here.
    now: u64,
    /// When a task count, the switch or a trigger last changed.
    last_change: u64,
    /// Stall time, ns, per aggregator: [aggregator][some, full].
    total: [[u64; 2]; 2],
    /// The averages, in `FIXED_1` percent: [some, full][10 s, 60 s, 300 s].
    avg: [[u64; 3]; 2],
    /// The totals the averages have taken in, ns.
    avg_total: [u64; 2],
    avg_last_update: u64,
    avg_next_update: u64,
    triggers: Vec<Trigger>,
    next_trigger_id: u64,
    rtpoll: Rtpoll,
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A jiffy-aligned timer `delay` jiffies from `now` (`mod_timer(jiffies +
/// delay)`).
fn timer_at(now: u64, delay_jiffies: u64) -> u64 {
    (now / NSEC_PER_JIFFY)
        .saturating_add(delay_jiffies)
        .saturating_mul(NSEC_PER_JIFFY)
}

impl State {
    fn new(start: u64) -> Self {
        let period = duration_ns(PSI_FREQ);
        Self {
            cpus: Vec::new(),
            enabled: true,
            switch_offs: 0,
            now: start,
            last_change: start,
            total: [[0; 2]; 2],
            avg: [[0; 3]; 2],
            avg_total: [0; 2],
            avg_last_update: start,
            avg_next_update: start.saturating_add(period),
            triggers: Vec::new(),
            next_trigger_id: 0,
            rtpoll: Rtpoll::default(),
        }
    }

    /// Moves time on to `now`, running every timer event due by then in
    /// order: averaging periods and real-time polls. Returns the time
    /// used (`now`, or the latest seen if `now` is behind it).
    ///
    /// A long stretch with no change is not worked through event by
    /// event: averaging periods with no trigger to look at them fold into
    /// one step (exact); with triggers, and for the real-time poller, the
    /// events more than [`HORIZON`] after the last change and before
    /// `now` are skipped, the totals taken in at once (every window a
    /// trigger looks at is then rebuilt from events in the same state).
    fn advance(&mut self, now: u64) -> u64 {
        let now = now.max(self.now);
        loop {
            // (A time at the end of time is never reached.)
            let due = |t: &u64| *t <= now && *t < u64::MAX;
            let avgs = Some(self.avg_next_update).filter(due);
            let poll = self.rtpoll.timer.filter(due);
            match (avgs, poll) {
                (Some(a), p) if p.is_none_or(|p| a <= p) => self.avgs_work(a, now),
                (_, Some(p)) => {
                    if self.steady_at(p) && now - p > HORIZON {
                        self.skip_rtpoll(now - HORIZON);
                        continue;
                    }
                    self.rtpoll.timer = None;
                    self.rtpoll_work(p);
                }
                _ => break,
            }
        }
        self.now = now;
        now
    }

    /// Whether nothing changed for a [`HORIZON`] before `t`.
    fn steady_at(&self, t: u64) -> bool {
        t > self.last_change.saturating_add(HORIZON)
    }

    /// `psi_avgs_work` at the period boundary `at`; then the later
    /// boundaries up to `now` that can be folded (see [`Self::advance`]).
    fn avgs_work(&mut self, at: u64, now: u64) {
        self.collect(AVGS, at);
        self.update_triggers(AVGS, at);
        self.update_averages(at);
        let period = duration_ns(PSI_FREQ);
        let ahead = (now - at) / period;
        let has_avg_triggers = self.triggers.iter().any(|t| t.aggregator == AVGS);
        let fold = if !has_avg_triggers {
            ahead
        } else if self.steady_at(at) {
            ahead.saturating_sub(HORIZON / period + 1)
        } else {
            0
        };
        if fold > 0 {
            self.fold_periods(fold);
        }
    }

    /// `n` whole periods in the current per-CPU states, at once: the
    /// totals grow by `n` equal samples and the averages decay towards
    /// that sample `n` times.
    fn fold_periods(&mut self, n: u64) {
        let period = duration_ns(PSI_FREQ);
        let mut weighted = [0u128; 2];
        let mut nonidle_total = 0u128;
        for cpu in &mut self.cpus {
            if cpu.mask & (1 << NONIDLE) == 0 {
                continue;
            }
            let nonidle = u128::from(period / NSEC_PER_JIFFY);
            nonidle_total += nonidle;
            for s in [SOME, FULL] {
                if cpu.mask & (1 << s) != 0 {
                    weighted[s] += u128::from(period) * nonidle;
                }
            }
            // The averages' aggregator has taken these periods in.
            for s in [SOME, FULL, NONIDLE] {
                if cpu.mask & (1 << s) != 0 {
                    let grown = period.saturating_mul(n);
                    cpu.times_prev[AVGS][s] = cpu.times_prev[AVGS][s].saturating_add(grown);
                }
            }
        }
        let idle = nonidle_total == 0;
        for s in [SOME, FULL] {
            let sample = (weighted[s] / nonidle_total.max(1)) as u64;
            let grown = sample.saturating_mul(n);
            self.total[AVGS][s] = self.total[AVGS][s].saturating_add(grown);
            self.avg_total[s] = self.avg_total[s].saturating_add(grown);
            let pct = sample * 100 / period * FIXED_1;
            for (w, &exp) in EXP.iter().enumerate() {
                self.avg[s][w] = if idle {
                    // The kernel's timer stops when all is idle; the
                    // periods missed decay in one step (`calc_avgs`).
                    calc_load_n(self.avg[s][w], exp, 0, u32::try_from(n).unwrap_or(u32::MAX))
                } else {
                    // The timer runs every period: a step each, until the
                    // average reached its fixed point (long before 4096
                    // steps, even for the 300 s one).
                    let mut avg = self.avg[s][w];
                    for _ in 0..n.min(4096) {
                        avg = calc_load(avg, exp, pct);
                    }
                    avg
                };
            }
        }
        let step = period.saturating_mul(n);
        self.avg_last_update = self.avg_last_update.saturating_add(step);
        self.avg_next_update = self.avg_next_update.saturating_add(step);
    }

    /// `collect_percpu_times`: each CPU's state time since the
    /// aggregator's last look, weighted by its non-idle jiffies, into the
    /// aggregator's totals. Returns which states grew (bit per state).
    fn collect(&mut self, aggregator: usize, now: u64) -> u8 {
        let mut weighted = [0u128; 2];
        let mut nonidle_total = 0u128;
        let mut changed = 0;
        for cpu in &mut self.cpus {
            let times = cpu.times_at(now);
            let mut delta = [0u64; 3];
            for s in [SOME, FULL, NONIDLE] {
                delta[s] = times[s].saturating_sub(cpu.times_prev[aggregator][s]);
                cpu.times_prev[aggregator][s] = times[s];
                if delta[s] != 0 {
                    changed |= 1 << s;
                }
            }
            let nonidle = u128::from(delta[NONIDLE] / NSEC_PER_JIFFY);
            nonidle_total += nonidle;
            for s in [SOME, FULL] {
                weighted[s] += u128::from(delta[s]) * nonidle;
            }
        }
        for s in [SOME, FULL] {
            let grown = u64::try_from(weighted[s] / nonidle_total.max(1)).unwrap_or(u64::MAX);
            self.total[aggregator][s] = self.total[aggregator][s].saturating_add(grown);
        }
        changed
    }

    /// `update_averages` at a period boundary (`now` is the boundary: the
    /// timer is taken to run on time).
    fn update_averages(&mut self, now: u64) {
        let period = now.saturating_sub(self.avg_last_update).max(1);
        self.avg_last_update = now;
        self.avg_next_update = self.avg_next_update.saturating_add(duration_ns(PSI_FREQ));
        for s in [SOME, FULL] {
            let sample = self.total[AVGS][s]
                .saturating_sub(self.avg_total[s])
                .min(period);
            self.avg_total[s] = self.avg_total[s].saturating_add(sample);
            let pct = (u128::from(sample) * 100 / u128::from(period)) as u64 * FIXED_1;
            for (w, &exp) in EXP.iter().enumerate() {
                self.avg[s][w] = calc_load(self.avg[s][w], exp, pct);
            }
        }
    }

    /// `update_triggers` for one aggregator's triggers at `now`.
    fn update_triggers(&mut self, aggregator: usize, now: u64) {
        let total = self.total[aggregator];
        let seen = if aggregator == AVGS {
            self.avg_total
        } else {
            self.rtpoll.total
        };
        for t in self
            .triggers
            .iter_mut()
            .filter(|t| t.aggregator == aggregator)
        {
            let new_stall = seen[t.state] != total[t.state];
            if !new_stall && !t.pending_event {
                continue;
            }
            if new_stall {
                let growth = t.win.update(now, total[t.state]);
                if !t.pending_event {
                    if growth < t.threshold {
                        continue;
                    }
                    t.pending_event = true;
                }
            }
            // At most one event per window.
            if now < t.last_event_time.saturating_add(t.win.size) {
                continue;
            }
            t.event = true;
            t.last_event_time = now;
            t.pending_event = false;
        }
    }

    /// `psi_schedule_rtpoll_work`: arms the poll timer `delay` jiffies
    /// from `now` unless a poll is scheduled already (and not `force`).
    fn schedule_rtpoll(&mut self, now: u64, delay: u64, force: bool) {
        let was = std::mem::replace(&mut self.rtpoll.scheduled, true);
        if was && !force {
            return;
        }
        if self.rtpoll.nr_triggers == [0, 0] {
            self.rtpoll.scheduled = false;
            return;
        }
        self.rtpoll.timer = Some(timer_at(now, delay));
    }

    /// `psi_rtpoll_work` when its timer fires at `now`.
    fn rtpoll_work(&mut self, now: u64) {
        let mut force = false;
        if now > self.rtpoll.until {
            self.rtpoll.scheduled = false;
        } else {
            force = true;
        }
        let changed = self.collect(POLL, now);
        let watched = changed & self.rtpoll.states;
        if watched != 0 {
            if now > self.rtpoll.until {
                self.init_rtpoll_triggers(now);
            }
            self.rtpoll.until =
                now.saturating_add(self.rtpoll.min_period.saturating_mul(UPDATES_PER_WINDOW));
        }
        if now > self.rtpoll.until {
            self.rtpoll.next_update = u64::MAX;
            return;
        }
        if now >= self.rtpoll.next_update {
            if watched != 0 {
                self.update_triggers(POLL, now);
                self.rtpoll.total = self.total[POLL];
            }
            self.rtpoll.next_update = now.saturating_add(self.rtpoll.min_period);
        }
        let delay = self.rtpoll.next_update.saturating_sub(now) / NSEC_PER_JIFFY + 1;
        self.schedule_rtpoll(now, delay, force);
    }

    /// `init_rtpoll_triggers`: polling starts; every privileged trigger's
    /// window starts now.
    fn init_rtpoll_triggers(&mut self, now: u64) {
        let total = self.total[POLL];
        for t in self.triggers.iter_mut().filter(|t| t.aggregator == POLL) {
            t.win.reset(now, total[t.state], 0);
        }
        self.rtpoll.total = total;
        self.rtpoll.next_update = now.saturating_add(self.rtpoll.min_period);
    }

    /// Skips the real-time polls of a long stretch in one state (see
    /// [`Self::advance`]): the poller's totals catch up to `resume`, every
    /// privileged trigger's window starts there, and polling goes on.
    fn skip_rtpoll(&mut self, resume: u64) {
        self.collect(POLL, resume);
        let total = self.total[POLL];
        for t in self.triggers.iter_mut().filter(|t| t.aggregator == POLL) {
            t.win.reset(resume, total[t.state], 0);
        }
        let r = &mut self.rtpoll;
        r.total = total;
        r.until = resume.saturating_add(r.min_period.saturating_mul(UPDATES_PER_WINDOW));
        r.next_update = resume;
        r.scheduled = true;
        r.timer = Some(resume);
    }

    /// `psi_group_change` on `cpu`: the counts change, then (if enabled)
    /// the time of the state the CPU was in is concluded and the new
    /// state starts.
    fn change(&mut self, cpu: usize, clear: u8, set: u8, now: u64) {
        if self.cpus.len() <= cpu {
            self.cpus.resize(cpu + 1, CpuState::default());
            // A CPU first seen now has been idle until now.
            self.cpus[cpu].state_start = now;
        }
        self.last_change = now;
        let c = &mut self.cpus[cpu];
        for t in [NR_RUNNING, NR_MEMSTALL, NR_MEMSTALL_RUNNING] {
            if clear & (1 << t) != 0 {
                debug_assert!(c.tasks[t] > 0, "psi: task count underflow");
                c.tasks[t] = c.tasks[t].saturating_sub(1);
            }
            if set & (1 << t) != 0 {
                c.tasks[t] += 1;
            }
        }
        if !self.enabled {
            // The first change after switching off concludes the state
            // the CPU was in; nothing holds after it.
            if c.mask & (1 << NONIDLE) != 0 {
                c.record_times(now);
            }
            c.mask = 0;
            return;
        }
        let mask = c.test_states();
        c.record_times(now);
        c.mask = mask;
        if mask & self.rtpoll.states != 0 {
            self.schedule_rtpoll(now, 1, false);
        }
    }

    /// A new trigger (`psi_trigger_create` once parsed and checked).
    fn add_trigger(&mut self, now: u64, spec: TriggerSpec, privileged: bool) -> u64 {
        let state = spec.state.index();
        let size = u64::from(spec.window_us) * 1000;
        let id = self.next_trigger_id;
        self.next_trigger_id += 1;
        self.last_change = now;
        let aggregator = if privileged { POLL } else { AVGS };
        self.triggers.push(Trigger {
            id,
            state,
            threshold: u64::from(spec.threshold_us) * 1000,
            // v6.14 starts every trigger's window from the real-time
            // poller's total (module docs).
            win: Window {
                size,
                start_time: now,
                start_value: self.total[POLL][state],
                prev_growth: 0,
            },
            event: false,
            last_event_time: 0,
            pending_event: false,
            aggregator,
        });
        if privileged {
            let r = &mut self.rtpoll;
            r.min_period = r.min_period.min(size / UPDATES_PER_WINDOW);
            r.nr_triggers[state] += 1;
            r.states |= 1 << state;
        }
        id
    }

    /// `psi_trigger_destroy`.
    fn remove_trigger(&mut self, id: u64) {
        let Some(i) = self.triggers.iter().position(|t| t.id == id) else {
            return;
        };
        let t = self.triggers.remove(i);
        if t.aggregator != POLL {
            return;
        }
        let r = &mut self.rtpoll;
        r.nr_triggers[t.state] -= 1;
        if r.nr_triggers[t.state] == 0 {
            r.states &= !(1 << t.state);
        }
        if r.min_period == t.win.size / UPDATES_PER_WINDOW {
            r.min_period = self
                .triggers
                .iter()
                .filter(|t| t.aggregator == POLL)
                .map(|t| t.win.size / UPDATES_PER_WINDOW)
                .min()
                .unwrap_or(u64::MAX);
        }
        if r.states == 0 {
            r.until = 0;
            r.timer = None;
            r.scheduled = false;
        }
    }

    /// Every trigger goes (its file was hidden), the poller stops.
    fn remove_all_triggers(&mut self) {
        self.triggers.clear();
        self.rtpoll = Rtpoll {
            total: self.rtpoll.total,
            ..Rtpoll::default()
        };
    }
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
            state: Mutex::new(State::new(duration_ns(now))),
        }
    }

    /// Applies a task flag change on `cpu` at `now` (`psi_group_change`).
    fn change(&self, cpu: usize, clear: u8, set: u8, now: Duration) {
        let mut st = lock(&self.state);
        let now = st.advance(duration_ns(now));
        st.change(cpu, clear, set, now);
    }

    /// Whether accounting is on (`cgroup.pressure`).
    pub fn enabled(&self) -> bool {
        lock(&self.state).enabled
    }

    /// How many times accounting was switched off: an open pressure file
    /// whose count changed was released (kernfs drains a hidden file).
    pub(crate) fn switch_offs(&self) -> u64 {
        lock(&self.state).switch_offs
    }

    /// Switches accounting off or on at `now` (`psi_cgroup_restart` when
    /// it comes back on).
    fn set_enabled(&self, on: bool, now: Duration) {
        let mut st = lock(&self.state);
        let now = st.advance(duration_ns(now));
        if st.enabled == on {
            return;
        }
        st.enabled = on;
        st.last_change = now;
        if !on {
            st.switch_offs += 1;
        }
        if on {
            for cpu in 0..st.cpus.len() {
                st.change(cpu, 0, 0, now);
            }
        }
    }

    /// Total stall time so far, µs: (some, full). Reading aggregates, as
    /// reading the file does.
    #[cfg(test)]
    pub(crate) fn total_us(&self, now: Duration) -> (u64, u64) {
        let mut st = lock(&self.state);
        let now = st.advance(duration_ns(now));
        st.collect(AVGS, now);
        (st.total[AVGS][SOME] / 1000, st.total[AVGS][FULL] / 1000)
    }

    /// The file's text (`psi_show`): a `some` and a `full` line.
    pub fn show(&self, now: Duration) -> String {
        let mut st = lock(&self.state);
        let now = st.advance(duration_ns(now));
        st.collect(AVGS, now);
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
                st.total[AVGS][s] / 1000
            );
        }
        out
    }

    fn add_trigger(&self, now: Duration, spec: TriggerSpec, privileged: bool) -> u64 {
        let mut st = lock(&self.state);
        let now = st.advance(duration_ns(now));
        st.add_trigger(now, spec, privileged)
    }

    fn remove_trigger(&self, id: u64) {
        lock(&self.state).remove_trigger(id);
    }

    /// `psi_trigger_poll`'s check at `now`: `None` if the trigger is gone,
    /// else whether it fired since the last consuming look.
    fn trigger_event(&self, id: u64, now: Duration, consume: bool) -> Option<bool> {
        let mut st = lock(&self.state);
        st.advance(duration_ns(now));
        let t = st.triggers.iter_mut().find(|t| t.id == id)?;
        let fired = t.event;
        if consume {
            t.event = false;
        }
        Some(fired)
    }
}

/// A task as pressure accounting sees it: its cgroup, its CPU and its
/// state flags (`task_struct`'s `psi_flags`, `in_memstall`, `cpu`). Made
/// by whoever runs tasks (the simulator); see [`CgroupTree::psi_run`].
#[derive(Debug)]
pub struct PsiTask {
    cpu: usize,
    inner: Mutex<TaskState>,
}

#[derive(Debug)]
struct TaskState {
    cgroup: Arc<Cgroup>,
    flags: u8,
    in_memstall: bool,
}

impl PsiTask {
    /// A task of `cgroup` on CPU `cpu`, neither running nor stalled.
    pub fn new(cgroup: Arc<Cgroup>, cpu: usize) -> Arc<Self> {
        Arc::new(Self {
            cpu,
            inner: Mutex::new(TaskState {
                cgroup,
                flags: 0,
                in_memstall: false,
            }),
        })
    }

    /// The cgroup it counts in.
    pub fn cgroup(&self) -> Arc<Cgroup> {
        Arc::clone(&lock(&self.inner).cgroup)
    }

    /// The CPU it runs on.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

/// Applies a flag change of a task on `cpu` to `cg` and every ancestor
/// (`psi_task_change`).
fn task_change(tree: &CgroupTree, cg: &Cgroup, cpu: usize, clear: u8, set: u8) {
    if clear == 0 && set == 0 {
        return;
    }
    let now = tree.clock().now();
    for c in cg.self_and_ancestors() {
        c.psi().change(cpu, clear, set, now);
    }
}

/// Changes a task's flags: clears `clear`, sets `set`, and counts it.
fn task_flags(tree: &CgroupTree, task: &PsiTask, clear: u8, set: u8) {
    let mut st = lock(&task.inner);
    let clear = clear & st.flags;
    let set = set & !st.flags & !clear;
    st.flags = (st.flags & !clear) | set;
    task_change(tree, &st.cgroup, task.cpu, clear, set);
}

/// A task running (see [`CgroupTree::psi_run`]); dropping it puts the
/// task to sleep (or ends it).
#[must_use = "the task stops running when this is dropped"]
pub struct PsiRunning {
    tree: CgroupTree,
    task: Arc<PsiTask>,
}

impl PsiRunning {
    /// The task that runs.
    pub fn task(&self) -> &Arc<PsiTask> {
        &self.task
    }
}

impl Drop for PsiRunning {
    fn drop(&mut self) {
        task_flags(&self.tree, &self.task, TSK_RUNNING, 0);
    }
}

/// A task asleep (see [`CgroupTree::psi_sleep`]); dropping it wakes the
/// task.
#[must_use = "the task runs again when this is dropped"]
pub struct PsiSleeping {
    tree: CgroupTree,
    task: Arc<PsiTask>,
}

impl Drop for PsiSleeping {
    /// `psi_enqueue` on a wakeup: running again, and running stalled if
    /// it is in a memory stall.
    fn drop(&mut self) {
        let set = TSK_RUNNING | memstall_running(&self.task);
        task_flags(&self.tree, &self.task, 0, set);
    }
}

/// `TSK_MEMSTALL_RUNNING` if `task` is in a memory stall, else nothing:
/// what running adds for a stalled task.
fn memstall_running(task: &PsiTask) -> u8 {
    if lock(&task.inner).in_memstall {
        TSK_MEMSTALL_RUNNING
    } else {
        0
    }
}

/// A memory stall in progress (`psi_memstall_enter` until dropped, then
/// `psi_memstall_leave`).
pub(crate) struct Memstall {
    tree: CgroupTree,
    task: Arc<PsiTask>,
    /// Flags set on entry, cleared on leaving.
    set: u8,
    /// Flags cleared on entry (a sleep stops the task running), set again
    /// on leaving.
    cleared: u8,
}

impl Drop for Memstall {
    fn drop(&mut self) {
        lock(&self.task.inner).in_memstall = false;
        task_flags(&self.tree, &self.task, self.set, self.cleared);
    }
}

impl CgroupTree {
    /// Marks `task` running until the guard drops (`psi_enqueue` when it
    /// wakes, `psi_dequeue` when it sleeps). A task already running stays
    /// so, and the guard then changes nothing when dropped.
    pub fn psi_run(&self, task: &Arc<PsiTask>) -> Option<PsiRunning> {
        let already = lock(&task.inner).flags & TSK_RUNNING != 0;
        if already {
            return None;
        }
        task_flags(self, task, 0, TSK_RUNNING);
        Some(PsiRunning {
            tree: self.clone(),
            task: Arc::clone(task),
        })
    }

    /// A running `task` sleeps until the guard drops (the sleep's
    /// `psi_task_switch`: it stops running, and running stalled if it is
    /// in a memory stall, while a memory stall itself persists across the
    /// sleep; `psi_enqueue` when it wakes). Nothing if it is not running.
    pub fn psi_sleep(&self, task: &Arc<PsiTask>) -> Option<PsiSleeping> {
        if lock(&task.inner).flags & TSK_RUNNING == 0 {
            return None;
        }
        task_flags(self, task, TSK_RUNNING | TSK_MEMSTALL_RUNNING, 0);
        Some(PsiSleeping {
            tree: self.clone(),
            task: Arc::clone(task),
        })
    }

    /// Moves `task` to `to` (`cgroup_move_task`): its flags leave its old
    /// cgroup's groups and join the new one's.
    pub fn psi_move(&self, task: &PsiTask, to: &Arc<Cgroup>) {
        let mut st = lock(&task.inner);
        let flags = st.flags;
        task_change(self, &st.cgroup, task.cpu, flags, 0);
        st.cgroup = Arc::clone(to);
        task_change(self, to, task.cpu, 0, flags);
    }

    /// `task` stalls on memory until the guard drops: `running`, it keeps
    /// running meanwhile (reclaim); else it sleeps (a throttle, a read).
    /// Nothing when it is stalled already (the kernel's nesting through
    /// `in_memstall`).
    pub(crate) fn memstall_of(&self, task: &Arc<PsiTask>, running: bool) -> Option<Memstall> {
        let flags = {
            let mut st = lock(&task.inner);
            if st.in_memstall {
                return None;
            }
            st.in_memstall = true;
            st.flags
        };
        let runs = flags & TSK_RUNNING != 0;
        let (set, cleared) = match (running, runs) {
            (true, true) => (TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0),
            (false, true) => (TSK_MEMSTALL, TSK_RUNNING),
            (_, false) => (TSK_MEMSTALL, 0),
        };
        task_flags(self, task, cleared, set);
        Some(Memstall {
            tree: self.clone(),
            task: Arc::clone(task),
            set,
            cleared,
        })
    }

    /// Switches pressure accounting of `cg` on or off (`cgroup.pressure`):
    /// off, its pressure files are hidden and their triggers destroyed.
    pub fn set_psi_enabled(&self, cg: &Cgroup, on: bool) {
        let psi = cg.psi();
        if !on && psi.enabled() {
            lock(&psi.state).remove_all_triggers();
        }
        psi.set_enabled(on, self.clock().now());
    }
}

/// A parsed trigger: `some|full THRESHOLD_US WINDOW_US`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TriggerSpec {
    /// The state watched.
    pub state: PsiState,
    /// Stall time within the window that fires it, µs.
    pub threshold_us: u32,
    /// The window, µs.
    pub window_us: u32,
}

/// Why a trigger was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    /// The open file has a trigger already (`EBUSY`).
    #[error("this open file has a trigger already (one per open file)")]
    Busy,
    /// The text is not `some|full THRESHOLD WINDOW` (`EINVAL`).
    #[error("expected \"some THRESHOLD_US WINDOW_US\" or \"full THRESHOLD_US WINDOW_US\"")]
    Syntax,
    /// The window is 0 or over 10 s (`EINVAL`).
    #[error("window {0} us: it must be 1..=10000000 us")]
    Window(u32),
    /// An unprivileged opener's window is not a multiple of 2 s
    /// (`EINVAL`).
    #[error("window {0} us: without CAP_SYS_RESOURCE the window must be a multiple of 2000000 us")]
    UnprivilegedWindow(u32),
    /// The threshold is 0 or over the window (`EINVAL`).
    #[error("threshold {threshold_us} us: it must be 1..=window ({window_us} us)")]
    Threshold {
        /// The threshold given.
        threshold_us: u32,
        /// The window given.
        window_us: u32,
    },
    /// The file is gone (its cgroup removed, or pressure accounting
    /// switched off there: `ENODEV`).
    #[error("the pressure file is gone")]
    Gone,
}

impl TriggerError {
    /// The errno the write returns.
    pub fn errno(&self) -> Errno {
        match self {
            TriggerError::Busy => Errno::EBUSY,
            TriggerError::Gone => Errno::ENODEV,
            _ => Errno::EINVAL,
        }
    }
}

/// The kernel's `sscanf(buf, "WORD %u %u", ..)`: the word, then two
/// unsigned numbers, whitespace (or none) between; digits wrap to `u32`
/// as `simple_strtoull` then the `unsigned int` store do. What follows
/// the second number is ignored.
fn scan_word_u32_u32(text: &str, word: &str) -> Option<(u32, u32)> {
    let rest = text.strip_prefix(word)?;
    let number = |s: &str| -> Option<(u32, usize)> {
        let s = s.trim_start();
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let value = s[..digits].bytes().fold(0u64, |v, d| {
            v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        });
        Some((value as u32, digits))
    };
    let trimmed = rest.trim_start();
    let (first, used) = number(trimmed)?;
    let after = &trimmed[used..];
    let (second, _) = number(after)?;
    Some((first, second))
}

impl TriggerSpec {
    /// Parses and checks a trigger as `psi_trigger_create` does, for an
    /// opener with (`privileged`) or without `CAP_SYS_RESOURCE`.
    pub(crate) fn parse(text: &str, privileged: bool) -> Result<Self, TriggerError> {
        let (state, (threshold_us, window_us)) = match scan_word_u32_u32(text, "some") {
            Some(v) => (PsiState::Some, v),
            None => (
                PsiState::Full,
                scan_word_u32_u32(text, "full").ok_or(TriggerError::Syntax)?,
            ),
        };
        if window_us == 0 || window_us > WINDOW_MAX_US {
            return Err(TriggerError::Window(window_us));
        }
        if !privileged && window_us % 2_000_000 != 0 {
            return Err(TriggerError::UnprivilegedWindow(window_us));
        }
        if threshold_us == 0 || threshold_us > window_us {
            return Err(TriggerError::Threshold {
                threshold_us,
                window_us,
            });
        }
        Ok(Self {
            state,
            threshold_us,
            window_us,
        })
    }
}

/// What `poll(2)` on a pressure file reports (`psi_trigger_poll`): it is
/// always readable and writable; `POLLPRI` when the trigger fired (or
/// there is none: then `POLLERR` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PressurePoll {
    /// `POLLPRI`.
    pub pri: bool,
    /// `POLLERR`.
    pub err: bool,
}

/// A trigger of one open pressure file (`seq->private`,
/// `ctx->psi.trigger`); it is destroyed when the slot drops (the file's
/// release).
#[derive(Debug, Default)]
pub struct TriggerSlot {
    trigger: Option<TriggerRef>,
}

#[derive(Debug)]
struct TriggerRef {
    cgroup: Arc<Cgroup>,
    id: u64,
}

impl Drop for TriggerRef {
    fn drop(&mut self) {
        self.cgroup.psi().remove_trigger(self.id);
    }
}

impl TriggerSlot {
    /// Writes a trigger on `cg`'s pressure (the root's is the machine's).
    pub fn write(
        &mut self,
        tree: &CgroupTree,
        cg: &Arc<Cgroup>,
        text: &str,
        privileged: bool,
    ) -> Result<(), TriggerError> {
        if self.trigger.is_some() {
            return Err(TriggerError::Busy);
        }
        let spec = TriggerSpec::parse(text, privileged)?;
        let id = cg.psi().add_trigger(tree.clock().now(), spec, privileged);
        self.trigger = Some(TriggerRef {
            cgroup: Arc::clone(cg),
            id,
        });
        Ok(())
    }

    /// `psi_trigger_poll`: `consume` takes the event in, as a `poll(2)`
    /// does; without it the event is only looked at (to decide whether to
    /// wake a poller).
    pub fn poll(&self, tree: &CgroupTree, consume: bool) -> PressurePoll {
        let gone = PressurePoll {
            pri: true,
            err: true,
        };
        let Some(t) = &self.trigger else {
            return gone;
        };
        match t
            .cgroup
            .psi()
            .trigger_event(t.id, tree.clock().now(), consume)
        {
            Some(pri) => PressurePoll { pri, err: false },
            None => gone,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::{Clock, VirtualClock};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A task on `cpu` starts running.
    fn run(g: &PsiGroup, cpu: usize, at: Duration) {
        g.change(cpu, 0, TSK_RUNNING, at);
    }

    /// A task on `cpu` enters (`running`: reclaim) a stall.
    fn stall(g: &PsiGroup, cpu: usize, at: Duration, running: bool) {
        let set = if running {
            TSK_MEMSTALL | TSK_MEMSTALL_RUNNING
        } else {
            TSK_MEMSTALL
        };
        let clear = if running { 0 } else { TSK_RUNNING };
        g.change(cpu, clear, set, at);
    }

    fn unstall(g: &PsiGroup, cpu: usize, at: Duration, running: bool) {
        let clear = if running {
            TSK_MEMSTALL | TSK_MEMSTALL_RUNNING
        } else {
            TSK_MEMSTALL
        };
        let set = if running { 0 } else { TSK_RUNNING };
        g.change(cpu, clear, set, at);
    }

    #[test]
    fn psi_freq_is_two_seconds_and_a_jiffy() {
        assert_eq!(PSI_FREQ, Duration::from_millis(2001));
    }

    #[test]
    fn a_lone_stalled_task_is_some_and_full() {
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, ms(100), true);
        unstall(&g, 0, ms(400), true);
        assert_eq!(g.total_us(Duration::from_secs(1)), (300_000, 300_000));
        // A second task running productively on the same CPU: some, not
        // full.
        run(&g, 0, Duration::from_secs(1));
        stall(&g, 0, Duration::from_secs(1), true);
        unstall(&g, 0, ms(1500), true);
        assert_eq!(g.total_us(Duration::from_secs(2)), (800_000, 300_000));
    }

    #[test]
    fn one_stalled_and_one_running_task_on_two_cpus_is_half_some_half_full() {
        // Before the fix: one set of counts for the group read 100 % some
        // and 0 % full.
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 0, Duration::ZERO);
        run(&g, 1, Duration::ZERO);
        stall(&g, 0, Duration::ZERO, true);
        let (some, full) = g.total_us(Duration::from_secs(1));
        assert_eq!((some, full), (500_000, 500_000));
        // Averages: a whole period of it reads 50 % in the first sample.
        let text = g.show(Duration::from_millis(2001));
        // 50 % into avg10 from 0: 50 * (1 - 1677/2048) = 9.05...
        assert!(text.starts_with("some avg10=9.0"), "{text}");
        assert!(text.contains("full avg10=9.0"), "{text}");
    }

    #[test]
    fn idle_cpus_do_not_dilute_pressure() {
        // One stalled task on CPU 1; CPUs 0 and 2 idle (never used).
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 2, Duration::ZERO);
        g.change(2, TSK_RUNNING, 0, Duration::ZERO);
        run(&g, 1, Duration::ZERO);
        stall(&g, 1, Duration::ZERO, false);
        assert_eq!(g.total_us(Duration::from_secs(1)), (1_000_000, 1_000_000));
    }

    #[test]
    fn less_than_a_jiffy_of_non_idle_time_is_dropped_as_the_kernel_does() {
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, Duration::ZERO, false);
        unstall(&g, 0, Duration::from_micros(500), false);
        g.change(0, TSK_RUNNING, 0, Duration::from_micros(500));
        assert_eq!(g.total_us(Duration::from_micros(600)), (0, 0));
        // A jiffy or more is kept whole.
        run(&g, 0, ms(1));
        stall(&g, 0, ms(1), false);
        unstall(&g, 0, Duration::from_micros(2500), false);
        assert_eq!(g.total_us(ms(3)), (1500, 1500));
    }

    #[test]
    fn averages_follow_the_kernels_fixed_point() {
        let g = PsiGroup::new(Duration::ZERO);
        // Stalled (sleeping, not running) for the whole of 10 s.
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, Duration::ZERO, false);
        let text = g.show(Duration::from_secs(10));
        // 4 whole periods of 2.001 s at 100 %: 100 * (1 - (1677/2048)^4)
        // = 55.0 for avg10.
        assert!(text.starts_with("some avg10=55."), "{text}");
        assert!(text.ends_with("total=10000000\n"), "{text}");
        unstall(&g, 0, Duration::from_secs(10), false);
        // A long quiet stretch decays in one step, and to zero.
        let text = g.show(Duration::from_secs(3600));
        assert!(
            text.starts_with("some avg10=0.00 avg60=0.00 avg300=0.00 total=10000000\n"),
            "{text}"
        );
    }

    #[test]
    fn folded_periods_match_period_by_period() {
        // The same stall seen once at the end, and read every period.
        let folded = PsiGroup::new(Duration::ZERO);
        let stepped = PsiGroup::new(Duration::ZERO);
        for g in [&folded, &stepped] {
            run(g, 0, Duration::ZERO);
            run(g, 1, Duration::ZERO);
            stall(g, 0, Duration::ZERO, true);
        }
        for k in 1..30 {
            stepped.show(Duration::from_millis(2001 * k));
        }
        let end = Duration::from_secs(61);
        assert_eq!(folded.show(end), stepped.show(end));
    }

    #[test]
    fn centuries_of_stall_saturate_rather_than_wrap() {
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, Duration::ZERO, false);
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

    #[test]
    fn switched_off_a_group_concludes_its_state_at_the_next_change() {
        let g = PsiGroup::new(Duration::ZERO);
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, Duration::ZERO, false);
        g.set_enabled(false, Duration::from_secs(1));
        // No change yet: the state still runs (the kernel's quirk).
        assert_eq!(g.total_us(Duration::from_secs(2)).0, 2_000_000);
        // The first change concludes it; nothing accrues after.
        unstall(&g, 0, Duration::from_secs(2), false);
        stall(&g, 0, Duration::from_secs(2), false);
        assert_eq!(g.total_us(Duration::from_secs(5)).0, 2_000_000);
        // Back on: the counts say stalled, so it accrues again.
        g.set_enabled(true, Duration::from_secs(5));
        assert_eq!(g.total_us(Duration::from_secs(6)).0, 3_000_000);
    }

    #[test]
    fn trigger_text_parses_as_sscanf_does() {
        let some = TriggerSpec::parse("some 150000 1000000", true).unwrap();
        assert_eq!(
            some,
            TriggerSpec {
                state: PsiState::Some,
                threshold_us: 150_000,
                window_us: 1_000_000
            }
        );
        assert_eq!(
            TriggerSpec::parse("full150000    2000000 junk", false)
                .unwrap()
                .state,
            PsiState::Full
        );
        let err = |t: &str, p| TriggerSpec::parse(t, p).unwrap_err();
        assert_eq!(err("some", true), TriggerError::Syntax);
        assert_eq!(err("Some 1 2", true), TriggerError::Syntax);
        assert_eq!(err("some -1 2", true), TriggerError::Syntax);
        assert_eq!(err("some 1 0", true), TriggerError::Window(0));
        assert_eq!(
            err("some 1 10000001", true),
            TriggerError::Window(10_000_001)
        );
        assert_eq!(
            err("some 1 1000000", false),
            TriggerError::UnprivilegedWindow(1_000_000)
        );
        assert!(matches!(
            err("some 0 1000000", true),
            TriggerError::Threshold { .. }
        ));
        assert!(matches!(
            err("some 1000001 1000000", true),
            TriggerError::Threshold { .. }
        ));
        // 2^32 + 500000 wraps to 500000, as the kernel's store does.
        assert_eq!(
            TriggerSpec::parse("some 4295467296 1000000", true)
                .unwrap()
                .threshold_us,
            500_000
        );
        for e in [err("x", true), TriggerError::Busy, TriggerError::Gone] {
            assert!(matches!(
                e.errno(),
                Errno::EINVAL | Errno::EBUSY | Errno::ENODEV
            ));
        }
    }

    /// A group with a privileged trigger: stalls of `stall_ms` every
    /// second on one CPU, polled every 10 ms; when the polls saw events.
    fn rtpoll_events(threshold_us: u32, stall_ms: u64) -> Vec<u64> {
        let g = PsiGroup::new(Duration::ZERO);
        let spec = TriggerSpec::parse(&format!("some {threshold_us} 1000000"), true).unwrap();
        let id = g.add_trigger(Duration::ZERO, spec, true);
        let mut events = Vec::new();
        for sec in 0..6u64 {
            let start = sec * 1000 + 100;
            run(&g, 0, ms(start));
            stall(&g, 0, ms(start), true);
            unstall(&g, 0, ms(start + stall_ms), true);
            g.change(0, TSK_RUNNING, 0, ms(start + stall_ms));
            for t in (start..start + 1000).step_by(10) {
                if g.trigger_event(id, ms(t), true) == Some(true) {
                    events.push(t);
                }
            }
        }
        events
    }

    #[test]
    fn a_privileged_trigger_fires_once_per_window_over_its_threshold() {
        // 200 ms of stall a second against 150 ms per 1 s window: an
        // event at most once per window, from the first second on (the
        // window cannot end before 1 s: `last_event_time` starts at 0).
        let events = rtpoll_events(150_000, 200);
        assert!(!events.is_empty());
        assert!(events[0] >= 1000, "{events:?}");
        assert!(events.windows(2).all(|w| w[1] - w[0] >= 1000), "{events:?}");
        // 50 ms a second never reaches 150 ms in a window, even with the
        // previous window's growth interpolated in.
        assert!(rtpoll_events(150_000, 50).is_empty());
    }

    #[test]
    fn an_unprivileged_trigger_is_updated_with_the_averages() {
        let g = PsiGroup::new(Duration::ZERO);
        let spec = TriggerSpec::parse("some 500000 2000000", false).unwrap();
        let id = g.add_trigger(Duration::ZERO, spec, false);
        run(&g, 0, Duration::ZERO);
        stall(&g, 0, ms(100), false);
        // Not before the first period ends, whatever the stall; then once
        // per period (each over the 2 s window's rate limit).
        assert_eq!(g.trigger_event(id, ms(2000), true), Some(false));
        assert_eq!(g.trigger_event(id, ms(2001), true), Some(true));
        assert_eq!(g.trigger_event(id, ms(2002), true), Some(false));
        assert_eq!(g.trigger_event(id, ms(4001), true), Some(false));
        assert_eq!(g.trigger_event(id, ms(4002), true), Some(true));
    }

    /// A tree on a virtual clock with one cgroup, `/a`.
    fn tree_with_a() -> (CgroupTree, Arc<VirtualClock>, Arc<Cgroup>) {
        let tree = CgroupTree::new(crate::memcontrol::TreeConfig::default());
        let clock = Arc::new(VirtualClock::default());
        tree.set_clock(clock.clone());
        let a = tree.mkdir("/a").unwrap();
        (tree, clock, a)
    }

    #[test]
    fn a_stall_persists_across_a_sleep_and_runs_again_on_waking() {
        // A lone task reclaiming (a running stall) sleeps and wakes in
        // the middle of it: full throughout. Waking without running
        // stalled again (TSK_MEMSTALL_RUNNING) would read the running
        // task as productive, sleeping with it would leave a stalled task
        // running: full drops either way.
        let (tree, clock, a) = tree_with_a();
        let task = PsiTask::new(Arc::clone(&a), 0);
        let running = tree.psi_run(&task).expect("not running yet");
        let stall = tree.memstall_of(&task, true).expect("not stalled yet");
        clock.advance(ms(100));
        let sleeping = tree.psi_sleep(&task).expect("it runs");
        assert!(tree.psi_sleep(&task).is_none(), "asleep already");
        clock.advance(ms(100));
        drop(sleeping);
        clock.advance(ms(100));
        drop(stall);
        drop(running);
        assert_eq!(lock(&task.inner).flags, 0);
        assert_eq!(a.psi().total_us(clock.now()), (300_000, 300_000));
    }

    #[test]
    fn a_sleeping_task_leaves_its_cpu_idle() {
        // A task reclaims on CPU 1. While a task of the same cgroup runs
        // on CPU 0 only half the cgroup's potential is lost; once that
        // task sleeps, CPU 0 is idle and all of it is.
        let (tree, clock, a) = tree_with_a();
        let (sleeper, reclaimer) = (
            PsiTask::new(Arc::clone(&a), 0),
            PsiTask::new(Arc::clone(&a), 1),
        );
        let _reclaiming = tree.psi_run(&reclaimer);
        let _stall = tree.memstall_of(&reclaimer, true);
        let _running = tree.psi_run(&sleeper);
        clock.advance(ms(100));
        assert_eq!(a.psi().total_us(clock.now()), (50_000, 50_000));
        let sleeping = tree.psi_sleep(&sleeper);
        clock.advance(ms(100));
        assert_eq!(a.psi().total_us(clock.now()), (150_000, 150_000));
        drop(sleeping);
        clock.advance(ms(100));
        assert_eq!(a.psi().total_us(clock.now()), (200_000, 200_000));
    }

    #[test]
    fn slots_take_one_trigger_and_poll_like_psi_trigger_poll() {
        let tree = CgroupTree::new(crate::memcontrol::TreeConfig::default());
        let root = Arc::clone(tree.root().cgroup());
        let mut slot = TriggerSlot::default();
        assert_eq!(
            slot.poll(&tree, true),
            PressurePoll {
                pri: true,
                err: true
            }
        );
        slot.write(&tree, &root, "some 1000 1000000", true).unwrap();
        assert_eq!(
            slot.write(&tree, &root, "some 1000 1000000", true),
            Err(TriggerError::Busy)
        );
        assert_eq!(slot.poll(&tree, true), PressurePoll::default());
        drop(slot);
        assert!(lock(&root.psi().state).triggers.is_empty());
    }
}
