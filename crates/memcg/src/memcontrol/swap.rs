//! Swap accounting (the swap half of mm/memcontrol.c's charge paths,
//! v6.14): charging a folio's swap on the way out, uncharging when its
//! slots are freed, and choosing whom a swap-in charges.
//!
//! Swap-out charges the folio's memory cgroup's `swap` counter (or the
//! nearest ancestor whose id can still be pinned), raising swap `max` and
//! `fail` on refusal; it pins the id once per page and records it in
//! `swap_cgroup`. Freeing the slots clears the record, uncharges the
//! recorded (possibly dying) cgroup and unpins. Swap-in charges memory to
//! the recorded cgroup if it is still online, else to the faulting task's.
//!
//! Invariant: for every slot recorded in `swap_cgroup`, the recorded
//! memory cgroup holds one swap page of charge (below the root) and one id
//! pin; both go exactly when the record is cleared.
//!
//! Locking: none of its own. The counters are lock-free, the record is
//! `swap_cgroup`'s, and a caller serialises a slot's swap-out, swap-in and
//! free (the swap cache and slot counts do).

use super::charge::owner_of_counter;
use super::stat::{MemcgEvent, MemcgStat};
use super::{CgroupTree, ChargeError, ChargeKind, Gfp, MemCgroup};
use crate::swap_cgroup::SwapCgroup;
use crate::swapops::SwapEntry;
use crate::sync::Arc;

impl CgroupTree {
    /// Charges swap for `nr` pages of `cg` being written to `entry`, pins
    /// the id once per page and records it in `swap_cgroup`
    /// (`__mem_cgroup_try_charge_swap`). Returns the cgroup charged (the
    /// nearest one whose id could still be pinned).
    pub fn swapout_charge(
        &self,
        cg: &Arc<MemCgroup>,
        swap_cgroup: &SwapCgroup,
        entry: SwapEntry,
        nr: u32,
    ) -> Result<Arc<MemCgroup>, ChargeError> {
        self.swapout_charge_runs(cg, swap_cgroup, &[(entry, nr)])
    }

    /// [`CgroupTree::swapout_charge`] for several runs of slots charged as
    /// one: a single try of the swap counters for all their pages (so a
    /// refusal moves no watermark and raises each event once), then one
    /// record per run. All or nothing.
    pub(crate) fn swapout_charge_runs(
        &self,
        cg: &Arc<MemCgroup>,
        swap_cgroup: &SwapCgroup,
        runs: &[(SwapEntry, u32)],
    ) -> Result<Arc<MemCgroup>, ChargeError> {
        let nr_pages: u64 = runs.iter().map(|&(_, nr)| u64::from(nr)).sum();
        assert!(nr_pages > 0, "a swap-out charges at least one page");
        let owner = cg.id_get_online();
        if !owner.is_root()
            && let Err(counter) = owner.swap().try_charge(nr_pages)
        {
            // Both events on the charging memory cgroup (and up), whichever
            // level refused.
            let refused = owner_of_counter(&owner, counter, |c| c.swap());
            owner.memory_event(MemcgEvent::SwapMax);
            owner.memory_event(MemcgEvent::SwapFail);
            owner.id_put_many(1);
            return Err(ChargeError::SwapLimit {
                path: refused.path(),
            });
        }
        for (done, &(entry, nr)) in runs.iter().enumerate() {
            if let Err(e) = swap_cgroup.record(entry, owner.id(), nr) {
                for &(entry, nr) in &runs[..done] {
                    swap_cgroup.clear(entry, nr).expect("recorded just above");
                }
                if !owner.is_root() {
                    owner.swap().uncharge(nr_pages);
                }
                owner.id_put_many(1);
                return Err(e.into());
            }
        }
        if nr_pages > 1 {
            owner.id_get_many(nr_pages - 1);
        }
        owner.mod_stat(MemcgStat::Swap, nr_pages as i64);
        Ok(owner)
    }

    /// Raises the swap `fail` event for a swap-out that found no slot (no
    /// slot at all, or no contiguous run for a large folio, which is then
    /// split: `folio_alloc_swap` with `entry.val == 0`).
    pub(crate) fn swapout_failed(&self, cg: &MemCgroup) {
        cg.memory_event(MemcgEvent::SwapFail);
    }

    /// The slots `entry..entry + nr` were freed: clears their record,
    /// uncharges the recorded cgroup's swap (dying or not) and unpins its
    /// id once per page (`__mem_cgroup_uncharge_swap`). Returns the id that
    /// was recorded (0: none).
    pub fn swap_uncharge(
        &self,
        swap_cgroup: &SwapCgroup,
        entry: SwapEntry,
        nr: u32,
    ) -> Result<u16, ChargeError> {
        let id = swap_cgroup.clear(entry, nr)?;
        // Borrowed from the id table, not counted: a reference count
        // touched on every page would be one more line the threads of a
        // cgroup fight over. The id's release, if this was its last pin,
        // comes after the borrow ends (it writes the table).
        let last = self.with_memcg(id, |cg| {
            if !cg.is_root() {
                cg.swap().uncharge(u64::from(nr));
            }
            cg.mod_stat(MemcgStat::Swap, -i64::from(nr));
            cg.id_drop_pins(u64::from(nr))
        });
        if last == Some(true) {
            self.release_memcg_id(id);
        }
        Ok(id)
    }

    /// Charges a folio being swapped in from `entry` (`nr` pages): to the
    /// cgroup recorded for it if that is still online, else to `faulting`
    /// (`mem_cgroup_swapin_charge_folio`), with the effort `gfp` allows (a
    /// large folio's swap-in charges without reclaim and falls back to
    /// pages). Returns the cgroup charged.
    pub fn swapin_charge(
        &self,
        swap_cgroup: &SwapCgroup,
        entry: SwapEntry,
        faulting: &Arc<MemCgroup>,
        nr: u64,
        kind: ChargeKind,
        gfp: Gfp,
    ) -> Result<Arc<MemCgroup>, ChargeError> {
        let id = swap_cgroup.lookup(entry)?;
        let target = self
            .lookup(id)
            .filter(|c| !c.is_dying())
            .unwrap_or_else(|| Arc::clone(faulting));
        self.try_charge(&target, nr, kind, gfp)?;
        Ok(target)
    }
}

impl MemCgroup {
    /// Pins the id of this cgroup or, if it was released, of the nearest
    /// ancestor whose id still resolves (`mem_cgroup_id_get_online`).
    fn id_get_online(self: &Arc<Self>) -> Arc<MemCgroup> {
        let mut at = Arc::clone(self);
        loop {
            if at.try_id_get() {
                return at;
            }
            at = Arc::clone(at.parent.as_ref().expect("the root's id is never released"));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::CgroupTree;
    use crate::memcontrol::test_tree;
    use crate::swap_cgroup::Design;

    /// A small tree and a swap_cgroup table with type 0 of `nr_pages` on.
    fn tree_with_swap(nr_pages: u64) -> (CgroupTree, SwapCgroup) {
        let sc = SwapCgroup::new(Design::Memcg);
        sc.swapon(0, nr_pages).unwrap();
        (test_tree(1, 64), sc)
    }

    #[test]
    fn swap_accounting_pins_ids_and_follows_the_owner() {
        let (t, sc) = tree_with_swap(1024);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let other = t.mkdir("/other").unwrap().memcg().unwrap();
        let e = SwapEntry::new(0, 16).unwrap();
        t.try_charge(&a, 4, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert!(Arc::ptr_eq(&t.swapout_charge(&a, &sc, e, 4).unwrap(), &a));
        t.uncharge(&a, 4, ChargeKind::Anon);
        assert_eq!((a.swap().usage(), a.id_pins()), (4, 5));
        assert_eq!(sc.lookup(e).unwrap(), a.id());
        // The owner is removed: id pinned, dying descendant of the root.
        t.rmdir("/a").unwrap();
        assert!(t.lookup(a.id()).is_some());
        assert_eq!(t.root_cgroup().nr_dying_descendants(), 1);
        // Swap-in by a task elsewhere charges that task's cgroup.
        let charged = t
            .swapin_charge(&sc, e, &other, 4, ChargeKind::Anon, Gfp::Kernel)
            .unwrap();
        assert!(Arc::ptr_eq(&charged, &other));
        assert_eq!(other.memory().usage(), 4);
        // Freeing the slots uncharges the dead owner and releases its id.
        assert_eq!(t.swap_uncharge(&sc, e, 4).unwrap(), a.id());
        assert_eq!(a.swap().usage(), 0);
        assert!(t.lookup(a.id()).is_none(), "last pin released the id");
        assert_eq!(
            t.root_cgroup().nr_dying_descendants(),
            1,
            "our own reference still holds it"
        );
        drop(a);
        assert_eq!(t.root_cgroup().nr_dying_descendants(), 0);
        t.uncharge(&other, 4, ChargeKind::Anon);
        assert_eq!(t.root().memory().usage(), 0);
        assert_eq!(t.ids_in_use(), 2);
    }

    #[test]
    fn swap_events_go_on_the_swapping_cgroup_and_up() {
        let (t, sc) = tree_with_swap(64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        p.swap().set_max(1).unwrap();
        assert!(
            t.swapout_charge(&c, &sc, SwapEntry::new(0, 0).unwrap(), 2)
                .is_err()
        );
        // `max` and `fail` on the child (the charging cgroup), and so on the
        // parent through propagation, whichever level refused (F4).
        for (m, local) in [(&c, 1), (&p, 0)] {
            assert_eq!(
                (m.event(MemcgEvent::SwapMax), m.event(MemcgEvent::SwapFail)),
                (1, 1)
            );
            assert_eq!(m.event_local(MemcgEvent::SwapMax), local);
        }
    }

    #[test]
    fn swap_max_refuses_with_max_and_fail_events() {
        let (t, sc) = tree_with_swap(64);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.swap().set_max(2).unwrap();
        let err = t
            .swapout_charge(&a, &sc, SwapEntry::new(0, 0).unwrap(), 4)
            .unwrap_err();
        assert_eq!(err, ChargeError::SwapLimit { path: "/a".into() });
        assert_eq!(
            (a.event(MemcgEvent::SwapMax), a.event(MemcgEvent::SwapFail)),
            (1, 1)
        );
        assert_eq!((a.swap().usage(), a.id_pins()), (0, 1), "nothing held");
        assert_eq!(sc.lookup(SwapEntry::new(0, 0).unwrap()).unwrap(), 0);
    }
}
