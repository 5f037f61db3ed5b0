//! Per-thread slots (the kernel's per-CPU data, `this_cpu_*`): a thread
//! picks one of [`NR_CPU_SLOTS`] slots and keeps it for its life, so hot
//! counters and allocation hints split by thread instead of bouncing one
//! cache line between cores.
//!
//! A slot is not exclusive: threads may share one (more threads than
//! slots, or a hash collision). Everything kept per slot is therefore
//! either atomic ([`PerCpuCounter`]) or a hint checked under a lock.
//!
//! Locking: none. A thread's slot comes from the address of one of its
//! thread-locals, so no shared state picks it. Under loom every thread
//! uses slot 0 (loom runs its threads on one OS thread).

use crate::sync::{AtomicU64, Ordering};

/// Slots: above the thread counts the simulator and benchmarks use.
pub(crate) const NR_CPU_SLOTS: usize = 8;

/// This thread's slot, `0..NR_CPU_SLOTS`.
pub(crate) fn this_cpu() -> usize {
    #[cfg(not(loom))]
    {
        thread_local!(static MARK: u8 = const { 0 });
        let addr = MARK.with(|mark| std::ptr::from_ref(mark) as usize);
        (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) % NR_CPU_SLOTS
    }
    #[cfg(loom)]
    0
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
}
