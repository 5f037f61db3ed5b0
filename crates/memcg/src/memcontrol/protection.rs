//! What reclaim asks of a memory cgroup: its effective protection
//! (`memory.min`/`memory.low` through `effective_protection`, with the
//! `memory_recursiveprot` mount option), whether it is below it, and how
//! much swap it may still use (mm/memcontrol.c, include/linux/memcontrol.h,
//! v6.14).

use super::{CgroupTree, MemCgroup};

impl CgroupTree {
    /// Computes `memcg`'s effective `min`/`low` for a reclaim of `root`'s
    /// subtree (the tree's root when `None`), with the tree's
    /// `memory_recursiveprot` option (`mem_cgroup_calculate_protection`).
    /// Reclaim calls it top-down, so parents' values are current.
    pub fn calculate_protection(&self, root: Option<&MemCgroup>, memcg: &MemCgroup) {
        let root = root.unwrap_or(self.root());
        let recursive = self.mount_options().memory_recursiveprot;
        memcg
            .memory()
            .calculate_protection(root.memory(), recursive);
    }

    /// Whether `memcg`'s usage is within its effective `memory.min` for a
    /// reclaim aimed at `target` (`mem_cgroup_below_min`); never for the
    /// root or the target itself.
    pub fn below_min(&self, target: &MemCgroup, memcg: &MemCgroup) -> bool {
        !unprotected(target, memcg) && memcg.memory().emin() >= memcg.memory().usage()
    }

    /// Whether `memcg`'s usage is within its effective `memory.low`
    /// (`mem_cgroup_below_low`); never for the root or the target itself.
    pub(crate) fn below_low(&self, target: &MemCgroup, memcg: &MemCgroup) -> bool {
        !unprotected(target, memcg) && memcg.memory().elow() >= memcg.memory().usage()
    }

    /// The swap pages `memcg` may still use: `free_slots` (the system's),
    /// capped by the room under `memory.swap.max` of it and of every
    /// ancestor below the root (`mem_cgroup_get_nr_swap_pages`).
    pub(crate) fn nr_swap_pages(&self, memcg: &MemCgroup, free_slots: u64) -> u64 {
        memcg
            .self_and_ancestors()
            .take_while(|m| !m.is_root())
            .map(|m| m.swap().max().saturating_sub(m.swap().usage()))
            .fold(free_slots, u64::min)
    }

    /// Whether swap counts as full for `memcg`'s pages
    /// (`mem_cgroup_swap_full`): the system's swap is (`system_full`, the
    /// kernel's `vm_swap_full`: more than half used), or some level below
    /// the root uses half of its `memory.swap.high` or `memory.swap.max`.
    #[cfg(test)]
    pub(crate) fn swap_full(&self, memcg: &MemCgroup, system_full: bool) -> bool {
        system_full
            || memcg
                .self_and_ancestors()
                .take_while(|m| !m.is_root())
                .any(|m| {
                    let usage = m.swap().usage().saturating_mul(2);
                    usage >= m.swap().high() || usage >= m.swap().max()
                })
    }
}

/// `mem_cgroup_unprotected`: the root and the reclaim target itself are
/// never protected.
fn unprotected(target: &MemCgroup, memcg: &MemCgroup) -> bool {
    memcg.is_root() || std::ptr::eq(target, memcg)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::memcontrol::Gfp;
    use crate::memcontrol::{CgroupTree, ChargeKind, MountOptions};

    /// The documented distribution (cgroup-v2.rst, test_memcg_protection's
    /// layout): P.low = 100 and both children use 100 with low = 100 and 0.
    /// Without `memory_recursiveprot` the unprotected child gets nothing;
    /// with it, it shares what its sibling does not claim.
    #[test]
    fn recursiveprot_hands_unclaimed_protection_down() {
        let t = CgroupTree::default();
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let a = t.mkdir("/p/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/p/b").unwrap().memcg().unwrap();
        p.memory().set_low(300);
        a.memory().set_low(100);
        for c in [&a, &b] {
            t.try_charge(c, 100, ChargeKind::Anon, Gfp::Kernel).unwrap();
        }
        let calc = |t: &CgroupTree| {
            for m in [&p, &a, &b] {
                t.calculate_protection(None, m);
            }
            (a.memory().elow(), b.memory().elow())
        };
        assert_eq!(calc(&t), (100, 0));
        assert!(t.below_low(t.root(), &a) && !t.below_low(t.root(), &b));
        assert!(!t.below_low(&a, &a), "never the target itself");
        t.set_mount_options(MountOptions {
            memory_recursiveprot: true,
            ..MountOptions::default()
        });
        let (ea, eb) = calc(&t);
        assert_eq!(ea, 100);
        assert!(eb > 0, "b inherits unclaimed protection: {eb}");
        for c in [&a, &b] {
            t.uncharge(c, 100, ChargeKind::Anon);
        }
    }

    #[test]
    fn swap_headroom_and_fullness_look_up_the_hierarchy() {
        let t = CgroupTree::default();
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        p.swap().set_max(100).unwrap();
        c.swap().set_max(1000).unwrap();
        assert_eq!(t.nr_swap_pages(&c, 500), 100, "the parent's limit");
        assert_eq!(t.nr_swap_pages(&c, 50), 50, "the system's free slots");
        assert_eq!(t.nr_swap_pages(t.root(), 50), 50);
        assert!(!t.swap_full(&c, false));
        c.swap().charge(50);
        assert!(t.swap_full(&c, false), "half of the parent's max");
        assert!(t.swap_full(t.root(), true));
        c.swap().uncharge(50);
    }
}
