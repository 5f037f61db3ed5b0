//! Per-thread slots (the kernel's per-CPU data, `this_cpu_*`): a thread
//! picks one of [`NR_CPU_SLOTS`] slots and keeps it for its life, so hot
//! counters and allocation hints split by thread instead of bouncing one
//! cache line between cores.
//!
//! A slot is not exclusive: threads may share one (more threads than
//! slots, or a hash collision). Everything kept per slot is therefore
//! either atomic ([`PerCpuCounter`]) or a hint checked under a lock.
//!
//! Locking: none. A thread's slot comes from its std thread id, so no
//! state of ours picks it. Under loom every thread uses slot 0 (loom runs
//! its threads on one OS thread).

use crate::sync::{AtomicU64, Ordering};

/// Slots: above the thread counts the simulator and benchmarks use.
pub(crate) const NR_CPU_SLOTS: usize = 8;

/// This thread's slot, `0..NR_CPU_SLOTS`: its std thread id modulo the
/// slots, worked out once per thread. Ids are handed out in order, so
/// threads started together get distinct slots (a hash of, say, a
/// thread-local's address collides far more often).
pub(crate) fn this_cpu() -> usize {
    #[cfg(not(loom))]
    {
        thread_local!(static SLOT: usize = slot_of(std::thread::current().id()));
        SLOT.with(|slot| *slot)
    }
    #[cfg(loom)]
    0
}

/// The slot of thread `id`: the number inside it, modulo the slots.
#[cfg(not(loom))]
fn slot_of(id: std::thread::ThreadId) -> usize {
    use std::hash::{Hash, Hasher};
    /// Keeps the last integer hashed: a `ThreadId` hashes its number.
    struct Number(u64);
    impl Hasher for Number {
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = self.0.wrapping_shl(8) | u64::from(b);
            }
        }
        fn write_u64(&mut self, n: u64) {
            self.0 = n;
        }
        fn finish(&self) -> u64 {
            self.0
        }
    }
    let mut number = Number(0);
    id.hash(&mut number);
    slot_of_number(number.0)
}

/// The slot of the thread numbered `n`: consecutive numbers take
/// consecutive slots.
#[cfg(not(loom))]
fn slot_of_number(n: u64) -> usize {
    (n % NR_CPU_SLOTS as u64) as usize
}

/// One slot's counter on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicU64);

/// A counter split per slot (`percpu_counter`): adding touches only the
/// caller's slot; reading sums them all. A unit may be added in one slot
/// and taken in another, so a slot may wrap below zero; the sum is exact
/// (modulo 2^64) once no change is in flight.
#[derive(Default)]
pub(crate) struct PerCpuCounter {
    slots: [Slot; NR_CPU_SLOTS],
}

impl PerCpuCounter {
    pub(crate) fn add(&self, n: u64) {
        // Relaxed: a count; what it counts is ordered by its own locks.
        self.slots[this_cpu()].0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sub(&self, n: u64) {
        // Relaxed: as `add`.
        self.slots[this_cpu()].0.fetch_sub(n, Ordering::Relaxed);
    }

    /// The total (a snapshot: slots are read one after another).
    pub(crate) fn sum(&self) -> u64 {
        self.slots
            .iter()
            // Relaxed: as `add`.
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// Eight counters on one cache line.
#[repr(align(64))]
#[derive(Default)]
struct Line([AtomicU64; 8]);

/// `len` counters split per slot (a memory cgroup's per-CPU statistics,
/// `memcg_vmstats_percpu`): each slot's counters sit on cache lines of
/// their own, so threads counting in one cgroup do not share a line.
/// Values are unsigned and wrap; a caller keeping signed values adds
/// two's-complement deltas and reads the sum back as signed.
pub(crate) struct PerCpuArray {
    lines: Box<[Line]>,
    lines_per_slot: usize,
}

impl PerCpuArray {
    pub(crate) fn new(len: usize) -> Self {
        let lines_per_slot = len.div_ceil(8);
        Self {
            lines: (0..lines_per_slot * NR_CPU_SLOTS)
                .map(|_| Line::default())
                .collect(),
            lines_per_slot,
        }
    }

    /// Adds `delta` (wrapping) to counter `i` in this thread's slot.
    pub(crate) fn add(&self, i: usize, delta: u64) {
        let line = &self.lines[this_cpu() * self.lines_per_slot + i / 8];
        // Relaxed: a statistic; nothing is published through it.
        line.0[i % 8].fetch_add(delta, Ordering::Relaxed);
    }

    /// Counter `i` summed over the slots (a snapshot, wrapping).
    pub(crate) fn sum(&self, i: usize) -> u64 {
        (0..NR_CPU_SLOTS)
            .map(|slot| &self.lines[slot * self.lines_per_slot + i / 8].0[i % 8])
            // Relaxed: as `add`.
            .map(|counter| counter.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

impl std::fmt::Debug for PerCpuArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerCpuArray")
            .field("lines_per_slot", &self.lines_per_slot)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PerCpuCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PerCpuCounter").field(&self.sum()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_split_by_thread_sum_exactly() {
        let counter = PerCpuCounter::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counter.add(3);
                    }
                });
            }
        });
        // Taken back elsewhere than added: slots wrap, the sum does not.
        counter.sub(4000);
        assert_eq!(counter.sum(), 8000);
        assert!(this_cpu() < NR_CPU_SLOTS);
    }

    #[test]
    fn threads_numbered_in_a_row_get_distinct_slots() {
        // A thread's slot is its id's slot, kept for its life.
        let pairs: Vec<(usize, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..NR_CPU_SLOTS)
                .map(|_| s.spawn(|| (this_cpu(), slot_of(std::thread::current().id()))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(pairs.iter().all(|(a, b)| a == b), "{pairs:?}");
        // Ids come in order (other tests' threads may take some of them
        // meanwhile, so only the arithmetic is checked here): any
        // `NR_CPU_SLOTS` consecutive ids take every slot once.
        let slots: std::collections::BTreeSet<usize> = (1000..1000 + NR_CPU_SLOTS as u64)
            .map(slot_of_number)
            .collect();
        assert_eq!(slots.len(), NR_CPU_SLOTS);
    }

    #[test]
    fn per_slot_arrays_keep_signed_sums() {
        let stats = PerCpuArray::new(10);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let stats = &stats;
                s.spawn(move || {
                    stats.add(9, 5);
                    stats.add(t as usize, 1);
                });
            }
        });
        stats.add(9, (-20i64) as u64);
        assert_eq!(stats.sum(9) as i64, -5);
        assert_eq!((0..3).map(|i| stats.sum(i)).sum::<u64>(), 3);
        assert_eq!(stats.sum(8), 0);
    }
}
