//! Opt-in timing of swap_cgroup calls: how long a call spends in the map,
//! and, for the designs with locks (`locked`, `cluster`), how long it waits
//! for a lock and how long it holds one (the critical section).
//!
//! Timing every call would double the cost of the cheapest designs (a clock
//! read is about as long as a whole lock-free call), so one call in
//! [`SAMPLE_EVERY`] per thread is timed; the others run the untimed code,
//! which is the same machine code as with timing off (the probe is a type
//! parameter, and [`NoProbe`] compiles to nothing). Each timed interval
//! contains one clock read's worth of overhead; it is measured once per
//! table ([`clock_overhead_ns`]) and subtracted.
//!
//! Locking: none. The sums are statistics: plain `std` atomics added to
//! once per sampled call. Under loom nothing is ever sampled, so the models
//! see none of this.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::sync::{Mutex, MutexGuard, lock};

/// One call in this many, per thread, is timed.
pub const SAMPLE_EVERY: u64 = 64;

/// How a design takes its locks: [`NoProbe`] just takes them; [`Timer`]
/// also times the wait and the hold.
pub(super) trait Probe {
    /// Locks `mutex`.
    fn lock<'a, T>(&mut self, mutex: &'a Mutex<T>) -> MutexGuard<'a, T>;
    /// Unlocks `guard`, a guard [`Probe::lock`] returned.
    fn unlock<T>(&mut self, guard: MutexGuard<'_, T>);
}

/// The untimed probe.
pub(super) struct NoProbe;

impl Probe for NoProbe {
    #[inline(always)]
    fn lock<'a, T>(&mut self, mutex: &'a Mutex<T>) -> MutexGuard<'a, T> {
        lock(mutex)
    }

    #[inline(always)]
    fn unlock<T>(&mut self, guard: MutexGuard<'_, T>) {
        drop(guard);
    }
}

/// The probe of one sampled call.
pub(super) struct Timer {
    /// Clock reads taken inside the call's own interval (each adds one
    /// clock overhead to it).
    inner_reads: u64,
    wait_ns: u64,
    held_ns: u64,
    acquired: Option<Instant>,
    clock_ns: u64,
}

impl Probe for Timer {
    fn lock<'a, T>(&mut self, mutex: &'a Mutex<T>) -> MutexGuard<'a, T> {
        let asked = Instant::now();
        let guard = lock(mutex);
        let acquired = Instant::now();
        self.wait_ns += net_ns(acquired - asked, self.clock_ns);
        self.acquired = Some(acquired);
        self.inner_reads += 2;
        guard
    }

    fn unlock<T>(&mut self, guard: MutexGuard<'_, T>) {
        let released = Instant::now();
        drop(guard);
        if let Some(acquired) = self.acquired.take() {
            self.held_ns += net_ns(released - acquired, self.clock_ns);
        }
        self.inner_reads += 1;
    }
}

/// `elapsed` less one clock read's overhead.
fn net_ns(elapsed: std::time::Duration, clock_ns: u64) -> u64 {
    u64::try_from(elapsed.as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_sub(clock_ns)
}

/// The cost of one `Instant::now()`: the least of many back-to-back pairs
/// (the least, since anything larger is an interruption, not the clock).
pub(super) fn clock_overhead_ns() -> u64 {
    (0..1000)
        .map(|_| {
            let a = Instant::now();
            let b = Instant::now();
            u64::try_from((b - a).as_nanos()).unwrap_or(u64::MAX)
        })
        .min()
        .unwrap_or(0)
}

/// The sums of a table's sampled calls (shared by the table and every map
/// it created, so a device swapped off still counts).
#[derive(Debug)]
pub(super) struct Timing {
    on: AtomicBool,
    clock_ns: AtomicU64,
    sampled_calls: AtomicU64,
    in_map_ns: AtomicU64,
    lock_wait_ns: AtomicU64,
    lock_held_ns: AtomicU64,
}

impl Timing {
    pub(super) fn new() -> Self {
        Self {
            on: AtomicBool::new(false),
            clock_ns: AtomicU64::new(0),
            sampled_calls: AtomicU64::new(0),
            in_map_ns: AtomicU64::new(0),
            lock_wait_ns: AtomicU64::new(0),
            lock_held_ns: AtomicU64::new(0),
        }
    }

    /// Clears the sums and switches sampling on or off.
    pub(super) fn set(&self, on: bool) {
        // Relaxed throughout: statistics; a call racing the switch may be
        // counted either way.
        if on {
            self.clock_ns.store(clock_overhead_ns(), Ordering::Relaxed);
        }
        for sum in [
            &self.sampled_calls,
            &self.in_map_ns,
            &self.lock_wait_ns,
            &self.lock_held_ns,
        ] {
            sum.store(0, Ordering::Relaxed);
        }
        self.on.store(on, Ordering::Relaxed);
    }

    /// Whether this call is one to time: timing is on and this thread's
    /// call count reached the next sample.
    #[inline]
    pub(super) fn sample_now(&self) -> bool {
        // Relaxed: see `set`.
        self.on.load(Ordering::Relaxed) && this_threads_turn()
    }

    /// Runs `call` with a [`Timer`] and adds what it measured.
    pub(super) fn time<R>(&self, call: impl FnOnce(&mut Timer) -> R) -> R {
        // Relaxed: see `set`.
        let clock_ns = self.clock_ns.load(Ordering::Relaxed);
        let mut timer = Timer {
            inner_reads: 0,
            wait_ns: 0,
            held_ns: 0,
            acquired: None,
            clock_ns,
        };
        let start = Instant::now();
        let out = call(&mut timer);
        let in_map = net_ns(start.elapsed(), clock_ns * (1 + timer.inner_reads));
        self.sampled_calls.fetch_add(1, Ordering::Relaxed);
        self.in_map_ns.fetch_add(in_map, Ordering::Relaxed);
        self.lock_wait_ns
            .fetch_add(timer.wait_ns, Ordering::Relaxed);
        self.lock_held_ns
            .fetch_add(timer.held_ns, Ordering::Relaxed);
        out
    }

    /// The sums so far.
    pub(super) fn snapshot(&self) -> SwapCgroupTimes {
        // Relaxed: see `set`.
        let get = |sum: &AtomicU64| sum.load(Ordering::Relaxed);
        SwapCgroupTimes {
            sampled_calls: get(&self.sampled_calls),
            in_map_ns: get(&self.in_map_ns),
            lock_wait_ns: get(&self.lock_wait_ns),
            lock_held_ns: get(&self.lock_held_ns),
            clock_overhead_ns: get(&self.clock_ns),
        }
    }
}

/// Counts this thread's calls; true on every [`SAMPLE_EVERY`]th.
#[cfg(not(loom))]
fn this_threads_turn() -> bool {
    use std::cell::Cell;
    thread_local!(static CALLS: Cell<u64> = const { Cell::new(0) });
    CALLS.with(|calls| {
        let n = calls.get().wrapping_add(1);
        calls.set(n);
        n % SAMPLE_EVERY == 0
    })
}

/// Under loom nothing is sampled (its threads share one OS thread).
#[cfg(loom)]
fn this_threads_turn() -> bool {
    false
}

/// What the sampled calls of a [`super::SwapCgroup`] measured since
/// [`super::SwapCgroup::set_timing`] switched timing on. Times are sums
/// over the sampled calls, clock overhead subtracted; multiply a mean by
/// the number of calls for a total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapCgroupTimes {
    /// Calls timed (about one in [`SAMPLE_EVERY`]).
    pub sampled_calls: u64,
    /// Time inside the map (after the range check, the whole operation).
    pub in_map_ns: u64,
    /// Of that, waiting for a lock (`locked`, `cluster`; 0 for the others).
    pub lock_wait_ns: u64,
    /// Of that, holding a lock: the critical section.
    pub lock_held_ns: u64,
    /// One clock read, subtracted from every interval.
    pub clock_overhead_ns: u64,
}

impl SwapCgroupTimes {
    /// Mean nanoseconds per call in the map (0 with no samples).
    pub fn mean_in_map_ns(&self) -> f64 {
        self.per_call(self.in_map_ns)
    }

    /// Mean nanoseconds per call waiting for a lock.
    pub fn mean_lock_wait_ns(&self) -> f64 {
        self.per_call(self.lock_wait_ns)
    }

    /// Mean nanoseconds per call holding a lock.
    pub fn mean_lock_held_ns(&self) -> f64 {
        self.per_call(self.lock_held_ns)
    }

    fn per_call(&self, ns: u64) -> f64 {
        if self.sampled_calls == 0 {
            0.0
        } else {
            ns as f64 / self.sampled_calls as f64
        }
    }
}
