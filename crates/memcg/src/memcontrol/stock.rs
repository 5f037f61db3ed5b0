//! The per-CPU charge stock (`memcg_stock_pcp` in mm/memcontrol.c, v6.14):
//! a charge takes `MEMCG_CHARGE_BATCH` (64) pages from the page counters
//! at once and keeps what it did not need in its thread slot's stock (one
//! per simulated CPU, threads sharing them by slot), so
//! the next small charges of the same memory cgroup touch no shared
//! counter at all.
//!
//! - `consume`: a charge of at most 64 pages is taken from this slot's
//!   stock when it holds that memory cgroup and enough pages.
//! - `refill`: the surplus of a batch goes into the stock, and so do the
//!   whole pages freed slab objects and zswap entries give back
//!   (`obj_cgroup_uncharge_pages`, `kmem.rs`); a stock holding another
//!   memory cgroup is drained first (its pages uncharged), and one above
//!   64 pages is drained whole.
//! - `drain_all`: every stock holding a memory cgroup of a subtree gives its
//!   pages back (a charge over a limit does it once before retrying; so do
//!   `memory.max`/`memory.high` writes and taking a cgroup offline). The
//!   kernel drains other CPUs' stocks from a work item, later; here they
//!   are drained at once.
//!
//! Stocked pages are charged: `memory.current` and the machine count them,
//! as in the kernel (up to 64 pages per CPU more than the pages in use).
//! [`CgroupTree::set_charge_stock`] turns the stock off for exact figures.
//!
//! Locking: one mutex per slot (the kernel's `local_lock`), a leaf. A
//! charge only try-locks its slot: when another thread sharing the slot
//! holds it, the charge goes to the counters directly. A stock holds a
//! reference to its memory cgroup (`css_get`), dropped when drained.

use super::{CgroupTree, MemCgroup};
use crate::percpu::{NR_CPU_SLOTS, this_cpu};
use crate::sync::{Arc, AtomicBool, CachePadded, Mutex, Ordering, lock};

/// Pages a charge takes from the counters at once (`MEMCG_CHARGE_BATCH`).
pub const MEMCG_CHARGE_BATCH: u64 = 64;

/// One slot's stock.
#[derive(Default)]
struct Stock {
    cached: Option<Arc<MemCgroup>>,
    nr_pages: u64,
}

impl Stock {
    /// `drain_stock`: the pages go back to the counters, the reference is
    /// dropped.
    fn drain(&mut self) {
        if let Some(old) = self.cached.take() {
            if self.nr_pages > 0 {
                old.memory().uncharge(self.nr_pages);
            }
            self.nr_pages = 0;
        }
    }
}

/// Every slot's stock, and whether stocking is on.
pub(crate) struct ChargeStocks {
    slots: Box<[CachePadded<Mutex<Stock>>]>,
    enabled: AtomicBool,
}

impl ChargeStocks {
    /// The stocks of a machine of `nr_cpus` CPUs: one per CPU, as the
    /// kernel's (at most [`NR_CPU_SLOTS`]; threads share them by slot), so
    /// `memory.current` counts at most 64 pages per CPU more than in use.
    pub(crate) fn new(nr_cpus: u32) -> Self {
        let nr = (nr_cpus as usize).clamp(1, NR_CPU_SLOTS);
        Self {
            slots: (0..nr)
                .map(|_| CachePadded(Mutex::new(Stock::default())))
                .collect(),
            enabled: AtomicBool::new(true),
        }
    }

    /// This thread's stock.
    fn slot(&self) -> &Mutex<Stock> {
        &self.slots[this_cpu() % self.slots.len()].0
    }

    /// Whether charges go through the stock.
    pub(crate) fn enabled(&self) -> bool {
        // Relaxed: a setting; a charge racing the switch may use either
        // path, and both keep the counters right.
        self.enabled.load(Ordering::Relaxed)
    }

    /// `consume_stock`: takes `nr_pages` of `memcg`'s from this slot's
    /// stock if it has them.
    pub(crate) fn consume(&self, memcg: &MemCgroup, nr_pages: u64) -> bool {
        if nr_pages > MEMCG_CHARGE_BATCH {
            return false;
        }
        let Some(mut stock) = self.slot().try_lock().ok() else {
            return false;
        };
        let holds = stock
            .cached
            .as_deref()
            .is_some_and(|c| std::ptr::eq(c, memcg));
        if holds && stock.nr_pages >= nr_pages {
            stock.nr_pages -= nr_pages;
            return true;
        }
        false
    }

    /// `refill_stock`: keeps `nr_pages` already charged to `memcg` in this
    /// slot's stock. When the slot is busy they go straight back.
    pub(crate) fn refill(&self, memcg: &Arc<MemCgroup>, nr_pages: u64) {
        let Some(mut stock) = self.slot().try_lock().ok() else {
            memcg.memory().uncharge(nr_pages);
            return;
        };
        let holds = stock
            .cached
            .as_deref()
            .is_some_and(|c| std::ptr::eq(c, &**memcg));
        if !holds {
            stock.drain();
            stock.cached = Some(Arc::clone(memcg));
        }
        stock.nr_pages += nr_pages;
        if stock.nr_pages > MEMCG_CHARGE_BATCH {
            stock.drain();
        }
    }

    /// `drain_all_stock`: every stock holding `root` or a descendant gives
    /// its pages back.
    pub(crate) fn drain_all(&self, root: &MemCgroup) {
        for slot in self.slots.iter() {
            let mut stock = lock(&slot.0);
            let in_subtree = stock
                .cached
                .as_deref()
                .is_some_and(|c| c.is_descendant_of(root));
            if in_subtree {
                stock.drain();
            }
        }
    }

    /// Pages stocked for `memcg` itself, over every slot.
    pub(crate) fn stocked_pages(&self, memcg: &MemCgroup) -> u64 {
        self.slots
            .iter()
            .map(|slot| {
                let stock = lock(&slot.0);
                match stock.cached.as_deref() {
                    Some(c) if std::ptr::eq(c, memcg) => stock.nr_pages,
                    _ => 0,
                }
            })
            .sum()
    }
}

impl CgroupTree {
    /// Turns the per-thread charge stock on (the kernel's behaviour, and
    /// the default) or off (every charge and uncharge exact; what is
    /// stocked is drained at once).
    ///
    /// While it is on, a charge of up to [`MEMCG_CHARGE_BATCH`] (64) pages
    /// takes 64 from the counters and keeps the rest for its thread's next
    /// charges of the same memory cgroup, so `memory().usage()` of that
    /// cgroup and its ancestors reads up to 64 pages more than is in use
    /// for each thread that charged it (threads share 8 stock slots, so
    /// 512 pages at most);
    /// [`CgroupTree::stocked_pages`] says how many, and
    /// [`CgroupTree::drain_all_stock`] gives them back.
    pub fn set_charge_stock(&self, on: bool) {
        self.stocks().enabled.store(on, Ordering::Relaxed);
        if !on {
            self.drain_all_stock(self.root());
        }
    }

    /// Whether the charge stock is on.
    pub fn charge_stock(&self) -> bool {
        self.stocks().enabled()
    }

    /// Gives back every page stocked for `memcg` or below it
    /// (`drain_all_stock`).
    pub fn drain_all_stock(&self, memcg: &MemCgroup) {
        self.stocks().drain_all(memcg);
    }

    /// Pages stocked for `memcg` itself (charged, not in use).
    pub fn stocked_pages(&self, memcg: &MemCgroup) -> u64 {
        self.stocks().stocked_pages(memcg)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::Gfp;
    use crate::memcontrol::{ChargeKind, test_tree};

    #[test]
    fn a_charge_takes_a_batch_and_the_next_ones_come_from_the_stock() {
        let t = test_tree(1, 64);
        t.set_charge_stock(true);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH);
        assert_eq!(t.stocked_pages(&a), MEMCG_CHARGE_BATCH - 1);
        for _ in 0..10 {
            t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        }
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH, "from the stock");
        assert_eq!(t.stocked_pages(&a), MEMCG_CHARGE_BATCH - 11);
        // Uncharges go to the counters; the stock stays.
        t.uncharge(&a, 11, ChargeKind::Anon);
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH - 11);
        t.drain_all_stock(&a);
        assert_eq!(a.memory().usage(), 0);
        assert_eq!(t.root().memory().usage(), 0);
    }

    #[test]
    fn another_cgroup_takes_the_slot_over_and_a_limit_is_met_exactly() {
        let t = test_tree(1, 64);
        t.set_charge_stock(true);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/b").unwrap().memcg().unwrap();
        t.try_charge(&a, 2, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.try_charge(&b, 2, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.memory().usage(), 2, "a's stock drained for b's");
        assert_eq!(b.memory().usage(), MEMCG_CHARGE_BATCH);
        // Under a limit below a batch, the batch fails, the charge does not.
        a.memory().set_max(10).unwrap();
        t.try_charge(&a, 8, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.memory().usage(), 10);
        assert_eq!(a.event(crate::memcontrol::MemcgEvent::Max), 0);
        t.uncharge(&a, 10, ChargeKind::Anon);
        t.uncharge(&b, 2, ChargeKind::Anon);
        t.set_charge_stock(false);
        assert_eq!((a.memory().usage(), b.memory().usage()), (0, 0));
    }

    #[test]
    fn freed_kernel_pages_go_to_the_stock_not_the_counter() {
        // v6.14's obj_cgroup_uncharge_pages refills the per-CPU stock: a
        // freed slab object's whole pages stay in memory.current (out of
        // `kernel`) until the stock is used or drained.
        use crate::memcontrol::Gfp;
        use crate::memcontrol::{MemcgStat, SlabKind};
        use crate::mm_types::PAGE_SIZE;
        let t = test_tree(1, 64);
        t.set_charge_stock(true);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let objcg = a.obj_cgroup();
        t.charge_slab(&objcg, 3 * PAGE_SIZE, SlabKind::Reclaimable, Gfp::Kernel)
            .unwrap();
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH);
        assert_eq!(t.stocked_pages(&a), MEMCG_CHARGE_BATCH - 3);
        assert_eq!(a.stat(MemcgStat::Kernel), 3);
        t.uncharge_slab(&objcg, 3 * PAGE_SIZE, SlabKind::Reclaimable);
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH, "stocked");
        assert_eq!(t.stocked_pages(&a), MEMCG_CHARGE_BATCH);
        assert_eq!(a.stat(MemcgStat::Kernel), 0);
        assert_eq!(a.stat(MemcgStat::SlabReclaimable), 0);
        // The next charges of `a` here take them.
        t.try_charge(&a, 4, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.memory().usage(), MEMCG_CHARGE_BATCH);
        t.uncharge(&a, 4, ChargeKind::Anon);
        t.drain_all_stock(&a);
        assert_eq!(a.memory().usage(), 0);
        assert_eq!(t.root().memory().usage(), 0);
    }

    #[test]
    fn rmdir_drains_the_stock_so_a_removed_cgroup_is_released() {
        let t = test_tree(1, 64);
        t.set_charge_stock(true);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.uncharge(&a, 1, ChargeKind::Anon);
        let weak = Arc::downgrade(&a);
        drop(a);
        t.rmdir("/a").unwrap();
        assert!(weak.upgrade().is_none(), "no stock pins it");
        assert_eq!(t.root().memory().usage(), 0);
    }
}
