//! A memory cgroup's shrinker state and the tree's shrinker list, as the
//! memory controller holds them (the kernel's `struct shrinker_info` of
//! `mem_cgroup_per_node`, and mm/shrinker.c's `shrinker_list`).
//!
//! `shrinker.rs`, above the memory controller, runs the shrinkers; this is
//! only the state the tree and its memory cgroups keep for it: per memory
//! cgroup and node, a bit per memcg-aware shrinker id and the scans each
//! deferred ([`ShrinkerInfo`]); per tree, the registered shrinkers
//! ([`ShrinkerList`]), kept type-erased (as a cgroup's css is) so that the
//! tree names nothing of the module that defines them.
//!
//! Invariants: a bit set means the shrinker may have objects here (a
//! hint: reclaim clears it when the shrinker reports empty, and looks once
//! more); deferred scans of a memory cgroup going offline move to its
//! parent's. Every entry of a `ShrinkerList` is a `shrinker.rs`
//! registration.
//!
//! Locking: the bits are atomics; the deferred counts are one mutex per
//! memory cgroup and node, and the list one mutex per tree, leaves all
//! (the list's is held only to copy it out or edit it).

use std::any::Any;

use super::{MAX_SHRINKERS, ShrinkerId};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, lock};

/// One memory cgroup's shrinker state on one node (`struct
/// shrinker_info`): which memcg-aware shrinkers may have objects here, and
/// the scans each deferred here.
pub(crate) struct ShrinkerInfo {
    /// A bit per shrinker id (`map`).
    map: Box<[AtomicU64]>,
    /// Deferred scans by shrinker id (`nr_deferred`), grown to the largest
    /// id that deferred any.
    nr_deferred: Mutex<Vec<u64>>,
}

impl Default for ShrinkerInfo {
    fn default() -> Self {
        Self {
            map: (0..MAX_SHRINKERS / 64).map(|_| AtomicU64::new(0)).collect(),
            nr_deferred: Mutex::new(Vec::new()),
        }
    }
}

impl ShrinkerInfo {
    fn word(&self, id: ShrinkerId) -> (&AtomicU64, u64) {
        (&self.map[id.get() / 64], 1 << (id.get() % 64))
    }

    /// Sets `id`'s bit (`set_shrinker_bit`).
    pub(crate) fn set_bit(&self, id: ShrinkerId) {
        let (word, bit) = self.word(id);
        // Relaxed: a hint for reclaim, which rescans the lists themselves.
        word.fetch_or(bit, Ordering::Relaxed);
    }

    /// Whether `id`'s bit is set.
    pub(crate) fn bit(&self, id: ShrinkerId) -> bool {
        let (word, bit) = self.word(id);
        word.load(Ordering::Relaxed) & bit != 0
    }

    /// Clears `id`'s bit (reclaim found the shrinker empty here).
    pub(crate) fn clear_bit(&self, id: ShrinkerId) {
        let (word, bit) = self.word(id);
        word.fetch_and(!bit, Ordering::Relaxed);
    }

    /// Takes `id`'s deferred scans, leaving 0 (`xchg_nr_deferred_memcg`).
    pub(crate) fn take_deferred(&self, id: ShrinkerId) -> u64 {
        lock(&self.nr_deferred)
            .get_mut(id.get())
            .map_or(0, std::mem::take)
    }

    /// Adds to `id`'s deferred scans (`add_nr_deferred_memcg`).
    pub(crate) fn add_deferred(&self, id: ShrinkerId, nr: u64) {
        let mut deferred = lock(&self.nr_deferred);
        if deferred.len() <= id.get() {
            deferred.resize(id.get() + 1, 0);
        }
        deferred[id.get()] += nr;
    }

    /// Deferred scans of `id` (for tests).
    #[cfg(test)]
    pub(crate) fn deferred(&self, id: ShrinkerId) -> u64 {
        lock(&self.nr_deferred).get(id.get()).copied().unwrap_or(0)
    }

    /// Adds every deferred count to `parent`'s: its memory cgroup goes
    /// offline (`reparent_shrinker_deferred`).
    pub(crate) fn reparent_deferred(&self, parent: &ShrinkerInfo) {
        let mine = std::mem::take(&mut *lock(&self.nr_deferred));
        if mine.iter().all(|&n| n == 0) {
            return;
        }
        let mut theirs = lock(&parent.nr_deferred);
        if theirs.len() < mine.len() {
            theirs.resize(mine.len(), 0);
        }
        for (to, from) in theirs.iter_mut().zip(mine) {
            *to += from;
        }
    }

    /// Forgets shrinker `id`, whose id is freed: its bit and its deferred
    /// scans go, so that the id's next shrinker starts clean.
    pub(crate) fn forget(&self, id: ShrinkerId) {
        self.clear_bit(id);
        self.take_deferred(id);
    }
}

/// The tree's registered shrinkers (`shrinker_list`), each a
/// `shrinker.rs` registration.
#[derive(Default)]
pub(crate) struct ShrinkerList {
    pub(crate) list: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}
