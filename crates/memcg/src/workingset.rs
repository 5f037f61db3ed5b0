//! Workingset detection: shadow entries and refault distances
//! (mm/workingset.c, v6.14, classic LRU).
//!
//! When reclaim drops a page-cache folio, the file's mapping keeps a
//! [`Shadow`] in its place: the memory cgroup the reclaim was for (its
//! target; the root for the machine's reclaim), that cgroup's eviction
//! clock (`nonresident_age`) just before, and whether the folio had been
//! in the working set (`PG_workingset`). The clock of a memory cgroup and
//! of all its ancestors advances with every eviction and every activation
//! below it.
//!
//! When the page is read again (a refault), the distance `now - then` on
//! the evicting cgroup's clock is how many pages were evicted or
//! activated since: had the active file list (plus the anon lists when
//! the cgroup can swap) been that much bigger, the folio would have
//! stayed. If the distance fits in it, the refaulting folio goes straight
//! to the active list (`workingset_activate_*`), and if it had been in
//! the working set before, it is a `workingset_restore_*`; every refault
//! counts `workingset_refault_*`. Activations are what reclaim watches to
//! decide that the active lists are too big (`prepare_scan_control`).
//!
//! Anonymous pages get the same treatment through the swap cache, which
//! keeps a shadow per swapped-out folio until its slots are freed
//! (`swap_state.rs`). `workingset_nodereclaim` stays 0: there is no
//! shadow-node shrinker (a mapping's shadows go with its file, a swap
//! slot's with the slot).
//!
//! Locking: none of its own. The clocks are relaxed atomics (a statistic
//! whose exact interleaving does not matter); statistics are the memory
//! cgroup's.

use crate::folio::Folio;
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use crate::sync::Ordering;
use crate::vmscan::lru_note_cost;

/// What a mapping keeps in place of an evicted folio (`pack_shadow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shadow {
    /// The id of the memory cgroup the evicting reclaim was for.
    pub memcg_id: u16,
    /// Its serial, checked only with [`CgroupTree::shadow_memcg_serial`]:
    /// v6.14 takes a reused id for the same cgroup (it only costs
    /// accuracy).
    serial: u64,
    /// Its `nonresident_age` before the eviction.
    eviction: u64,
    /// `PG_workingset` at eviction.
    workingset: bool,
}

impl Shadow {
    /// Whether the evicted folio had been in the working set
    /// (`PG_workingset`): reading it back is a memory stall.
    pub fn workingset(&self) -> bool {
        self.workingset
    }
}

/// Advances the eviction clock of `memcg` and every ancestor by `nr_pages`
/// (`workingset_age_nonresident`).
fn age_nonresident(memcg: &MemCgroup, nr_pages: u64) {
    for m in memcg.self_and_ancestors() {
        // Relaxed: a clock read for distances only.
        m.lruvec()
            .nonresident_age
            .fetch_add(nr_pages, Ordering::Relaxed);
    }
}

/// A folio is leaving the page cache or going to swap by a reclaim of
/// `target` (`workingset_eviction`; the root for reclaim of the whole
/// machine): the shadow records the target's eviction clock as it was,
/// then the clock of the target and its ancestors advances.
pub fn workingset_eviction(folio: &Folio, target: &MemCgroup) -> Shadow {
    // Relaxed: see `age_nonresident`.
    let eviction = target.lruvec().nonresident_age.load(Ordering::Relaxed);
    age_nonresident(target, u64::from(folio.nr()));
    Shadow {
        memcg_id: target.id(),
        serial: target.serial(),
        eviction,
        workingset: folio.lru().workingset(),
    }
}

/// A folio was activated by an access (`workingset_activation`).
pub fn workingset_activation(folio: &Folio) {
    age_nonresident(&folio.memcg(), u64::from(folio.nr()));
}

/// `workingset_test_recent`: whether the refault distance on the
/// evicting cgroup's clock fits in its working set: its active file list,
/// plus for anon its inactive file list, plus, when it can swap, its
/// active anon list (and for file its inactive anon list too).
/// `swap_free_pages` tells the swap devices' free space
/// (`get_nr_swap_pages`), asked only if needed.
pub fn workingset_test_recent(
    tree: &CgroupTree,
    shadow: &Shadow,
    file: bool,
    swap_free_pages: &dyn Fn() -> u64,
) -> bool {
    tree.with_memcg(shadow.memcg_id, |memcg| {
        if tree.shadow_memcg_serial() && memcg.serial() != shadow.serial {
            return false;
        }
        // Relaxed: see `age_nonresident`.
        let now = memcg.lruvec().nonresident_age.load(Ordering::Relaxed);
        let distance = now.wrapping_sub(shadow.eviction);
        let pages = |s| u64::try_from(memcg.stat(s)).unwrap_or(0);
        let mut workingset_size = pages(MemcgStat::ActiveFile);
        if !file {
            workingset_size += pages(MemcgStat::InactiveFile);
        }
        if distance <= workingset_size {
            return true;
        }
        if tree.nr_swap_pages(memcg, swap_free_pages()) > 0 {
            workingset_size += pages(MemcgStat::ActiveAnon);
            if file {
                workingset_size += pages(MemcgStat::InactiveAnon);
            }
        }
        distance <= workingset_size
    })
    .unwrap_or(false)
}

/// A folio is coming back where `shadow` was (`workingset_refault`), a
/// page-cache read or a swap-in, charged to its new memory cgroup already
/// and not yet on a list. Counts the refault there; if the distance fits
/// in the working set, marks the folio to go on the active list (counting
/// the activation, and the restore if it had been in the working set,
/// which also makes reclaiming its type look more costly, and marks it
/// `PG_workingset`: reading it in is a memory stall). Returns whether it
/// did.
pub fn workingset_refault(
    tree: &CgroupTree,
    folio: &Folio,
    shadow: &Shadow,
    swap_free_pages: &dyn Fn() -> u64,
) -> bool {
    let file = folio.is_file();
    let memcg = folio.memcg();
    let nr = i64::from(folio.nr());
    let (refault, activate, restore) = if file {
        (
            MemcgStat::WorkingsetRefaultFile,
            MemcgStat::WorkingsetActivateFile,
            MemcgStat::WorkingsetRestoreFile,
        )
    } else {
        (
            MemcgStat::WorkingsetRefaultAnon,
            MemcgStat::WorkingsetActivateAnon,
            MemcgStat::WorkingsetRestoreAnon,
        )
    };
    memcg.mod_stat(refault, nr);
    if !workingset_test_recent(tree, shadow, file, swap_free_pages) {
        return false;
    }
    folio.lru().set_active();
    age_nonresident(&memcg, nr as u64);
    memcg.mod_stat(activate, nr);
    if shadow.workingset {
        folio.lru().set_workingset();
        lru_note_cost(&memcg, file, nr as u64, 0);
        memcg.mod_stat(restore, nr);
    }
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::test_tree;

    /// A shadow whose memory cgroup is gone and whose id a new cgroup
    /// took: v6.14 measures the refault on the new cgroup's clock (here
    /// a distance of 0: recent); the serial check, an option, refuses.
    #[test]
    fn a_recycled_memcg_id_is_taken_for_the_evicting_cgroup() {
        let t = test_tree(1, 8);
        let a = t.mkdir("/a").unwrap();
        let shadow = Shadow {
            memcg_id: a.id(),
            serial: a.serial(),
            eviction: 0,
            workingset: false,
        };
        t.rmdir("/a").unwrap();
        drop(a);
        let b = t.mkdir("/b").unwrap();
        assert_eq!(b.id(), shadow.memcg_id, "the id was recycled");
        let no_swap = || 0;
        assert!(workingset_test_recent(&t, &shadow, true, &no_swap));
        t.set_shadow_memcg_serial(true);
        assert!(!workingset_test_recent(&t, &shadow, true, &no_swap));
    }
}
