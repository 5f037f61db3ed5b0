//! Time, for the mechanisms that sleep or measure stalls (the kernel's
//! jiffies and `schedule_timeout`): `memory.high` throttling sleeps its
//! penalty on the tree's [`Clock`], and pressure stall accounting reads it.
//!
//! Two clocks: [`RealClock`] sleeps the calling thread (workloads and
//! benchmarks), [`VirtualClock`] only advances a counter (a `memcg sh`
//! script stays deterministic and instant; its `sleep` verb advances the
//! same counter).
//!
//! # Reclaim's cost on the virtual clock
//!
//! On the real clock reclaim takes the time it takes. On a virtual clock
//! nothing takes time unless modelled, so a reclaim stall would last 0 µs:
//! reclaim reports its [`Work`] to the clock ([`Clock::work`]), and a
//! [`VirtualClock`] made with a [`ReclaimCost`] advances by it. The work
//! counted is what the kernel does inside a memory stall, or as the same
//! reclaim on other paths: pages scanned off an inactive LRU list (every
//! reclaim: direct, `memory.high`, kswapd, `memory.reclaim`, a
//! `memory.max` write), pages reclaim writes out (swap-out to a device or
//! zswap), and pages read back on a refault of the working set (the read
//! a task waits for). Other reads and writes take no simulated time.
//!
//! [`ReclaimCost::MEASURED`] holds figures measured on the development
//! machine (a 2-CPU Linux 6.18 VM on a virtio disk, December 2026), each
//! with the command that gave it:
//!
//! - `scan` 1.5 µs a page: the memory stall time (`/proc/pressure/memory`
//!   `some total`) per page of memcg direct reclaim of clean page cache
//!   in 4 KiB folios: a 512 MiB file read with `POSIX_FADV_RANDOM` (one
//!   page a folio) by a task in a 32 MiB memory cgroup (cgroup v1
//!   `memory.limit_in_bytes`): 212 ms and 186 ms for 131072 pages in two
//!   runs;
//! - `write` 16 µs a page: the disk's sequential write throughput (249
//!   MB/s, 1 MiB `O_DIRECT` writes), the pace swap-out goes at once its
//!   writes queue up (swap slots are allocated in clusters, so swap-out
//!   writes are sequential);
//! - `read` 140 µs a page: the disk's 4 KiB random `O_DIRECT` read
//!   latency (142.5 µs over 3000 reads), what a refault waits for.
//!
//! `memcg sh --reclaim-cost scan=1.5us,write=16us,read=140us` sets them
//! (a machine option of the shell: the only user of the virtual clock);
//! a RAM swap device would cost a few µs a page instead.
//!
//! `HZ` is 1000, a common distribution `CONFIG_HZ`: one jiffy is a
//! millisecond, and the kernel's throttle constants read the same.

use std::fmt;
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
    /// The calling task did `work` (module docs): a clock that models
    /// its cost advances; the real clock has let the real time pass.
    fn work(&self, work: Work) {
        let _ = work;
    }
}

/// Reclaim work whose cost a virtual clock models; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Pages scanned off an inactive LRU list (`pgscan`).
    Scanned(u64),
    /// Pages reclaim wrote out (swap-out).
    Written(u64),
    /// Pages read back, waited for, on a refault of the working set.
    RefaultRead(u64),
}

/// The modelled cost of reclaim work, per 4 KiB page; see the module
/// docs for where [`ReclaimCost::MEASURED`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReclaimCost {
    /// A page scanned.
    pub scan: Duration,
    /// A page written out.
    pub write: Duration,
    /// A page read back on a refault.
    pub read: Duration,
}

impl ReclaimCost {
    /// Nothing takes time (only sleeps advance a virtual clock).
    pub const ZERO: Self = Self {
        scan: Duration::ZERO,
        write: Duration::ZERO,
        read: Duration::ZERO,
    };

    /// The figures measured on the development machine (module docs).
    pub const MEASURED: Self = Self {
        scan: Duration::from_nanos(1500),
        write: Duration::from_micros(16),
        read: Duration::from_micros(140),
    };

    /// What `work` costs.
    pub fn of(&self, work: Work) -> Duration {
        let (per_page, pages) = match work {
            Work::Scanned(n) => (self.scan, n),
            Work::Written(n) => (self.write, n),
            Work::RefaultRead(n) => (self.read, n),
        };
        let ns = per_page.as_nanos().saturating_mul(u128::from(pages));
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Parses `scan=T,write=T,read=T` (any of them, in any order; the
    /// others keep [`ReclaimCost::MEASURED`]'s), each `T` a number with a
    /// unit: `ns`, `us`, `ms` or `s` (`1.5us`).
    pub fn parse(text: &str) -> Result<Self, BadReclaimCost> {
        let bad = || BadReclaimCost(text.to_owned());
        let mut cost = Self::MEASURED;
        for item in text.split(',') {
            let (key, value) = item.split_once('=').ok_or_else(bad)?;
            let value = parse_duration(value.trim()).ok_or_else(bad)?;
            match key.trim() {
                "scan" => cost.scan = value,
                "write" => cost.write = value,
                "read" => cost.read = value,
                _ => return Err(bad()),
            }
        }
        Ok(cost)
    }
}

impl fmt::Display for ReclaimCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = |d: Duration| d.as_nanos();
        write!(
            f,
            "scan={}ns,write={}ns,read={}ns",
            ns(self.scan),
            ns(self.write),
            ns(self.read)
        )
    }
}

/// A reclaim cost that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a reclaim cost: scan=T,write=T,read=T, each T a number with ns, us, ms or s (1.5us)"
)]
pub struct BadReclaimCost(pub String);

/// `1.5us`, `16us`, `140us`, `2ms`, `0`, `1s` as a duration.
fn parse_duration(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" if value == 0.0 => 0.0,
        _ => return None,
    };
    let ns = value * scale;
    (0.0..1e18)
        .contains(&ns)
        .then(|| Duration::from_nanos(ns.round() as u64))
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

/// Simulated time: sleeping advances it at once, nothing blocks; reclaim
/// work advances it by its modelled cost (none by default).
#[derive(Debug)]
pub struct VirtualClock {
    now_ns: AtomicU64,
    cost: ReclaimCost,
}

impl Default for VirtualClock {
    fn default() -> Self {
        Self::with_reclaim_cost(ReclaimCost::ZERO)
    }
}

impl VirtualClock {
    /// A clock at 0 on which reclaim work costs `cost`.
    pub fn with_reclaim_cost(cost: ReclaimCost) -> Self {
        Self {
            now_ns: AtomicU64::new(0),
            cost,
        }
    }

    /// What reclaim work costs on this clock.
    pub fn reclaim_cost(&self) -> ReclaimCost {
        self.cost
    }

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

    fn work(&self, work: Work) {
        self.advance(self.cost.of(work));
    }
}

/// Jiffies as a duration.
pub fn jiffies(j: u64) -> Duration {
    Duration::from_millis(j * 1000 / HZ)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn reclaim_work_advances_only_a_costed_virtual_clock() {
        let free = VirtualClock::default();
        free.work(Work::Scanned(1000));
        assert_eq!(free.now(), Duration::ZERO);
        let costed = VirtualClock::with_reclaim_cost(ReclaimCost::MEASURED);
        costed.work(Work::Scanned(1000));
        costed.work(Work::Written(10));
        costed.work(Work::RefaultRead(1));
        assert_eq!(costed.now(), Duration::from_micros(1500 + 160 + 140));
    }

    #[test]
    fn reclaim_cost_parses_units_and_keeps_the_rest() {
        let c = ReclaimCost::parse("read=2us, scan=0.5us").unwrap();
        assert_eq!(c.read, Duration::from_micros(2));
        assert_eq!(c.scan, Duration::from_nanos(500));
        assert_eq!(c.write, ReclaimCost::MEASURED.write);
        assert_eq!(ReclaimCost::parse("scan=0").unwrap().scan, Duration::ZERO);
        assert_eq!(
            ReclaimCost::parse(&ReclaimCost::MEASURED.to_string()).unwrap(),
            ReclaimCost::MEASURED
        );
        for bad in [
            "",
            "scan",
            "scan=1",
            "scan=1h",
            "disk=1us",
            "scan=-1us",
            "scan=1e30s",
        ] {
            assert!(ReclaimCost::parse(bad).is_err(), "{bad}");
        }
    }
}
