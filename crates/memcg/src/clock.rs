//! Time, for the mechanisms that sleep or measure stalls (the kernel's
//! jiffies and `schedule_timeout`): `memory.high` throttling sleeps its
//! penalty on the tree's [`Clock`].
//!
//! Two clocks: [`RealClock`] sleeps the calling thread (workloads and
//! benchmarks), [`VirtualClock`] only advances a counter (a `memcg sh`
//! script stays deterministic and instant; its `sleep` verb advances the
//! same counter).
//!
//! `HZ` is 1000, a common distribution `CONFIG_HZ`: one jiffy is a
//! millisecond, and the kernel's throttle constants read the same.

use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};

/// Jiffies per second (`CONFIG_HZ`).
pub const HZ: u64 = 1000;

/// A source of time that tasks can sleep on.
pub trait Clock: Send + Sync {
    /// Time since the clock started.
    fn now(&self) -> Duration;
    /// Puts the calling task to sleep for `duration`.
    fn sleep(&self, duration: Duration);
}

/// Wall-clock time; sleeping blocks the thread.
#[derive(Debug)]
pub struct RealClock {
    start: Instant,
}

impl Default for RealClock {
    fn default() -> Self {
        Self {
            start: Instant::now(),
        }
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Simulated time: sleeping advances it at once, nothing blocks.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now_ns: AtomicU64,
}

impl VirtualClock {
    /// Advances the clock by `duration` (the shell's `sleep`).
    pub fn advance(&self, duration: Duration) {
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the counter is the only data; readers need no ordering
        // with anything else. Saturates: time stops at ~584 years rather
        // than wrapping around.
        let _ = self
            .now_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now.saturating_add(ns))
            });
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns.load(Ordering::Relaxed))
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// Jiffies as a duration.
pub fn jiffies(j: u64) -> Duration {
    Duration::from_millis(j * 1000 / HZ)
}
