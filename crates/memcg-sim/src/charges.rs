//! Charges made directly, without pages behind them (`memcg sh`'s `charge`
//! and `uncharge` verbs, or a tool driving the counters).
//!
//! A ledger per (cgroup path, what) remembers which memory cgroup took each
//! charge, so that an uncharge takes back no more than was given, newest
//! first, from the memory cgroup that took it, even after its cgroup was
//! removed (the charge keeps it dying until then, as the kernel's pages
//! do). Swap charges take real single-page slots of the simulator's swap
//! devices, so the `swap_cgroup` design records them and `/proc/swaps`
//! counts them, and they fail as a swap-out does (`ENOSPC` with no device,
//! `ENOMEM` over `memory.swap.max`, with one charge of all the pages so a
//! refusal moves no watermark).
//!
//! Locking: the ledger's mutex is held across a whole charge or uncharge,
//! so two uncharges of one path cannot both take the same record. Under
//! it the tree's counters and the swap system's locks are taken, never the
//! other way round (neither calls back into the simulator).

use std::collections::HashMap;
use std::sync::Arc;

use memcg::memcontrol::{ChargeKind, MemCgroup};
use memcg::swapops::SwapEntry;

use crate::{Sim, SimError, lock};
use memcg::memcontrol::Gfp;

/// What a direct charge charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChargeTarget {
    /// Memory of a kind (`memory.current`, `anon`/`file` of `memory.stat`).
    Memory(ChargeKind),
    /// Swap (`memory.swap.current`): one slot per page.
    Swap,
}

/// One charge in the ledger.
#[derive(Debug)]
enum Held {
    /// `pages` of memory charged to `memcg`.
    Memory { memcg: Arc<MemCgroup>, pages: u64 },
    /// Single-page swap slots, oldest first.
    Swap { slots: Vec<SwapEntry> },
}

impl Held {
    fn pages(&self) -> u64 {
        match self {
            Held::Memory { pages, .. } => *pages,
            Held::Swap { slots } => slots.len() as u64,
        }
    }
}

/// The ledger of direct charges, per (cgroup path, what).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    charges: HashMap<(String, ChargeTarget), Vec<Held>>,
}

/// Why a direct charge or uncharge was refused (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// More was asked back than that cgroup holds of that kind.
    #[error("{path} holds {held} pages of that charge, not {asked}")]
    NotHeld {
        /// The cgroup path.
        path: String,
        /// Pages it holds.
        held: u64,
        /// Pages asked back.
        asked: u64,
    },
}

impl Sim {
    /// Charges `pages` of `what` to the memory cgroup that accounts
    /// `cgroup` (its own, or its nearest ancestor's): all or nothing. The
    /// charge is made as a short-lived task of `cgroup` (its reclaim
    /// stalls there), unless a task runs on this thread.
    pub fn charge(&self, cgroup: &str, pages: u64, what: ChargeTarget) -> Result<(), SimError> {
        let cg = self.fs().cgroup(cgroup)?;
        let _current = self.run_in(&cg);
        let memcg = cg.effective_memcg();
        let held = match what {
            ChargeTarget::Memory(kind) => {
                self.fs()
                    .tree()
                    .try_charge(&memcg, pages, kind, Gfp::Kernel)?;
                Held::Memory { memcg, pages }
            }
            ChargeTarget::Swap => Held::Swap {
                slots: self.swap().reserve_slots(&memcg, pages)?,
            },
        };
        lock(&self.inner.ledger)
            .charges
            .entry((cgroup.to_owned(), what))
            .or_default()
            .push(held);
        Ok(())
    }

    /// Takes back `pages` of `what` charged under `cgroup`, newest charge
    /// first, from the memory cgroups that took them.
    pub fn uncharge(&self, cgroup: &str, pages: u64, what: ChargeTarget) -> Result<(), SimError> {
        let mut ledger = lock(&self.inner.ledger);
        let key = (cgroup.to_owned(), what);
        let records = ledger.charges.get_mut(&key);
        let held: u64 = records
            .as_ref()
            .map_or(0, |r| r.iter().map(Held::pages).sum());
        let records = match records {
            Some(records) if held >= pages => records,
            _ => {
                return Err(LedgerError::NotHeld {
                    path: cgroup.to_owned(),
                    held,
                    asked: pages,
                }
                .into());
            }
        };
        let mut left = pages;
        while left > 0 {
            let last = records.last_mut().expect("enough pages are held");
            let take = left.min(last.pages());
            match last {
                Held::Memory { memcg, pages } => {
                    self.fs().tree().uncharge(memcg, take, memory_kind(what));
                    *pages -= take;
                }
                Held::Swap { slots } => {
                    // Newest slot first; a slot leaves the ledger only once
                    // it is freed.
                    for _ in 0..take {
                        let &entry = slots.last().expect("take <= slots held");
                        self.swap().swap_free(entry, 1)?;
                        slots.pop();
                    }
                }
            }
            if last.pages() == 0 {
                records.pop();
            }
            left -= take;
        }
        if records.is_empty() {
            ledger.charges.remove(&key);
        }
        Ok(())
    }

    /// Gives every direct charge back (the simulator is going away).
    pub(crate) fn release_charges(&self) {
        let charges = std::mem::take(&mut lock(&self.inner.ledger).charges);
        for ((_, what), records) in charges {
            for held in records.into_iter().rev() {
                match held {
                    Held::Memory { memcg, pages } => {
                        self.fs().tree().uncharge(&memcg, pages, memory_kind(what));
                    }
                    Held::Swap { slots } => {
                        for entry in slots {
                            let _ = self.swap().swap_free(entry, 1);
                        }
                    }
                }
            }
        }
    }
}

/// The charge kind of a memory target.
fn memory_kind(what: ChargeTarget) -> ChargeKind {
    match what {
        ChargeTarget::Memory(kind) => kind,
        ChargeTarget::Swap => unreachable!("swap charges hold slots, not pages"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sim as sim;
    use memcg::Errno;

    #[test]
    fn charges_come_back_from_whoever_took_them() {
        let sim = sim();
        let a = sim.fs().memcg("/a").unwrap();
        sim.charge("/a", 8, ChargeTarget::Memory(ChargeKind::File))
            .unwrap();
        sim.charge("/a", 2, ChargeTarget::Memory(ChargeKind::File))
            .unwrap();
        assert_eq!(
            sim.uncharge("/a", 11, ChargeTarget::Memory(ChargeKind::File))
                .unwrap_err()
                .errno(),
            Errno::EINVAL
        );
        sim.fs().rmdir("/a").unwrap();
        assert_eq!(a.memory().usage(), 10, "charged pages outlive the rmdir");
        sim.uncharge("/a", 10, ChargeTarget::Memory(ChargeKind::File))
            .unwrap();
        assert_eq!(a.memory().usage(), 0);
    }

    #[test]
    fn uncharges_take_the_newest_charge_first() {
        let sim = sim();
        sim.swapon_ram(1 << 20, None).unwrap();
        let old = sim.fs().memcg("/a").unwrap();
        for what in [ChargeTarget::Memory(ChargeKind::Anon), ChargeTarget::Swap] {
            sim.charge("/a", 2, what).unwrap();
        }
        // The path gets a new memory cgroup; the old one keeps its charges.
        sim.fs().rmdir("/a").unwrap();
        sim.fs().mkdir("/a").unwrap();
        let new = sim.fs().memcg("/a").unwrap();
        for what in [ChargeTarget::Memory(ChargeKind::Anon), ChargeTarget::Swap] {
            sim.charge("/a", 1, what).unwrap();
            sim.uncharge("/a", 2, what).unwrap();
        }
        assert_eq!((new.memory().usage(), new.swap().usage()), (0, 0));
        assert_eq!((old.memory().usage(), old.swap().usage()), (1, 1));
        for what in [ChargeTarget::Memory(ChargeKind::Anon), ChargeTarget::Swap] {
            sim.uncharge("/a", 1, what).unwrap();
        }
        assert_eq!((old.memory().usage(), old.swap().usage()), (0, 0));
    }

    #[test]
    fn a_refused_swap_charge_moves_no_watermark() {
        let sim = sim();
        sim.swapon_ram(1 << 20, None).unwrap();
        sim.fs().write("/a/memory.swap.max", "8K").unwrap();
        let err = sim.charge("/a", 3, ChargeTarget::Swap).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!((a.swap().usage(), a.swap().watermark()), (0, 0));
        assert_eq!(
            sim.fs().read("/a/memory.swap.events").unwrap(),
            "high 0\nmax 1\nfail 1\n"
        );
        assert_eq!(
            sim.uncharge("/a", 1, ChargeTarget::Swap)
                .unwrap_err()
                .errno(),
            Errno::EINVAL,
            "nothing was recorded"
        );
    }

    #[test]
    fn swap_charges_take_real_slots() {
        let sim = sim();
        assert_eq!(
            sim.charge("/a", 1, ChargeTarget::Swap).unwrap_err().errno(),
            Errno::ENOSPC,
            "no swap device"
        );
        sim.swapon_ram(1 << 20, None).unwrap();
        sim.fs().write("/a/memory.swap.max", "12K").unwrap();
        sim.charge("/a", 2, ChargeTarget::Swap).unwrap();
        assert_eq!(
            sim.charge("/a", 2, ChargeTarget::Swap).unwrap_err().errno(),
            Errno::ENOMEM,
            "over swap.max: all or nothing"
        );
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.swap().usage(), 2);
        assert!(
            sim.machine().proc_swaps().contains("\t8\t\t"),
            "{}",
            sim.machine().proc_swaps()
        );
        sim.uncharge("/a", 2, ChargeTarget::Swap).unwrap();
        assert_eq!((a.swap().usage(), a.id_pins()), (0, 1));
    }
}
