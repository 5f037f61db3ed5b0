//! System calls, as far as `memory.high` cares: its work waits for the
//! charging task's return to user space (v6.14 `try_charge_memcg` and
//! `mem_cgroup_handle_over_high`, mm/memcontrol.c).
//!
//! A charge that leaves a level above its `memory.high` (or
//! `memory.swap.high`) adds its batch to the task's pages over high
//! (`current->memcg_nr_pages_over_high`, `set_notify_resume`); the task
//! reclaims and is throttled for them on its way back to user space. One
//! system call can charge a great deal before it returns (an `mlock` or a
//! `MAP_POPULATE` of a whole mapping), so once more than
//! `MEMCG_CHARGE_BATCH` pages are waiting, the charge does the work at
//! once (the synchronous path), if it may block and is not reclaim's own.
//!
//! [`CgroupTree::kernel_entry`] opens such a system call on the calling
//! thread ([`KernelEntry`]); dropping it is the return to user space.
//! Outside one, every charge is its own kernel entry (a page fault of a
//! task touching its memory, or a direct charge through the library), so
//! its work is done right after it, as before this module existed.
//!
//! Invariant: a thread's waiting pages are `None` outside an entry; inside
//! one they never exceed `MEMCG_CHARGE_BATCH` once a blocking charge
//! returns, and they are handled (or dropped with a dying task) when the
//! entry ends.
//!
//! Locking: none. The waiting pages are the thread's own (the kernel keeps
//! them in `current`): a thread-local, not shared state.

use std::cell::RefCell;

use super::charge::Gfp;
use super::{CgroupTree, MEMCG_CHARGE_BATCH, MemCgroup};
use crate::sync::Arc;

/// The pages over high waiting for this thread's return to user space.
#[derive(Default)]
struct Waiting {
    nr_pages: u64,
    /// The memory cgroup last charged over high: where the work falls
    /// when no task runs on the thread (a task's own memory cgroup takes
    /// it otherwise, see `handle_over_high`).
    charged: Option<Arc<MemCgroup>>,
}

thread_local! {
    /// This thread's open kernel entry's waiting pages; `None` outside one.
    static WAITING: RefCell<Option<Waiting>> = const { RefCell::new(None) };
}

/// A system call of the task on this thread (module docs), from
/// [`CgroupTree::kernel_entry`] until it drops: the return to user space,
/// where the `memory.high` work its charges left waiting is done. Entries
/// nest (an inner one's end hands nothing back to the outer one: the
/// kernel has one per task, and an inner entry here is a call made
/// inside the outer one's).
#[must_use = "the system call returns to user space when this drops"]
pub struct KernelEntry<'a> {
    tree: &'a CgroupTree,
    outer: Option<Waiting>,
}

impl CgroupTree {
    /// Opens a system call on this thread (module docs): until the
    /// returned guard drops, the `memory.high` work of this thread's
    /// charges waits for its end, unless more than a charge batch goes
    /// over high meanwhile.
    pub fn kernel_entry(&self) -> KernelEntry<'_> {
        let outer = WAITING.with(|w| w.replace(Some(Waiting::default())));
        KernelEntry { tree: self, outer }
    }

    /// After a successful charge of `batch` pages to `cg` with `gfp`: the
    /// `memory.high` work for it, now or on the way back to user space
    /// (module docs). A charge from reclaim's own context
    /// ([`Gfp::MemAlloc`]) never does it itself.
    pub(super) fn charged_over_high(&self, cg: &Arc<MemCgroup>, batch: u64, gfp: Gfp) {
        let over_high = std::iter::once(cg)
            .chain(cg.ancestors())
            .any(|c| c.memory().usage() > c.memory().high() || c.swap().usage() > c.swap().high());
        let sync_allowed = matches!(gfp, Gfp::Kernel | Gfp::NoRetry);
        let now = WAITING.with(|w| {
            let mut w = w.borrow_mut();
            let Some(waiting) = w.as_mut() else {
                // Its own kernel entry: back to user space right away.
                return (over_high && gfp != Gfp::MemAlloc).then(|| (Arc::clone(cg), batch));
            };
            if over_high {
                waiting.nr_pages += batch;
                waiting.charged = Some(Arc::clone(cg));
            }
            if waiting.nr_pages > MEMCG_CHARGE_BATCH && sync_allowed {
                let taken = std::mem::take(waiting);
                return taken.charged.map(|c| (c, taken.nr_pages));
            }
            None
        });
        if let Some((charged, nr_pages)) = now {
            self.handle_over_high(&charged, nr_pages);
        }
    }
}

impl Drop for KernelEntry<'_> {
    fn drop(&mut self) {
        let waiting = WAITING.with(|w| w.replace(self.outer.take()));
        if let Some(Waiting {
            nr_pages,
            charged: Some(charged),
        }) = waiting
            && nr_pages > 0
        {
            self.tree.handle_over_high(&charged, nr_pages);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::{ChargeKind, MemcgEvent, test_tree};

    /// A tree with the charge stock on (batches of 64, as the kernel
    /// charges), throttling on a simulated clock, and `/a` with
    /// `memory.high` at 100 pages.
    fn tree_over_100() -> (CgroupTree, Arc<MemCgroup>) {
        let t = test_tree(1, 64);
        t.set_charge_stock(true);
        t.set_clock(Arc::new(crate::clock::VirtualClock::default()));
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.memory().set_high(100);
        (t, a)
    }

    #[test]
    fn outside_an_entry_each_charge_over_high_is_handled_at_once() {
        let (t, a) = tree_over_100();
        t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.event(MemcgEvent::High), 0, "not over high yet");
        t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert!(a.event(MemcgEvent::High) > 0, "128 > 100: handled now");
    }

    #[test]
    fn one_batch_over_high_waits_for_the_return_to_user_space() {
        let (t, a) = tree_over_100();
        let entry = t.kernel_entry();
        t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(a.event(MemcgEvent::High), 0, "64 pages waiting");
        drop(entry);
        assert!(a.event(MemcgEvent::High) > 0, "handled on the way back");
    }

    #[test]
    fn more_than_a_batch_over_high_is_handled_inside_the_call() {
        // `test_memcg_high_sync`'s mechanism: a big allocation in one
        // system call meets memory.high before it returns.
        let (t, a) = tree_over_100();
        let entry = t.kernel_entry();
        for _ in 0..3 {
            t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        }
        let high = a.event(MemcgEvent::High);
        assert!(high > 0, "128 pages waiting > 64: synchronous");
        drop(entry);
        assert_eq!(a.event(MemcgEvent::High), high, "nothing left waiting");
    }

    #[test]
    fn a_charge_that_may_not_block_leaves_the_work_to_the_return() {
        let (t, a) = tree_over_100();
        let entry = t.kernel_entry();
        t.try_charge(&a, 64, ChargeKind::Anon, Gfp::Kernel).unwrap();
        for _ in 0..3 {
            t.try_charge(&a, 64, ChargeKind::Anon, Gfp::NoReclaim)
                .unwrap();
        }
        assert_eq!(a.event(MemcgEvent::High), 0, "no synchronous path");
        drop(entry);
        assert!(a.event(MemcgEvent::High) > 0);
    }
}
