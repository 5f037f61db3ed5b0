//! Lockless hierarchical page counters (mm/page_counter.c, v6.14).
//!
//! A [`PageCounter`] counts pages charged to one cgroup and, through its
//! parent chain, to every ancestor. A charge adds at every level up to the
//! root; [`PageCounter::try_charge`] undoes its additions from the first
//! level that went over `max` and reports that level. Limits (`max`,
//! `high`), protection (`min`, `low`), the peak (`watermark`) and `failcnt`
//! are per level. Every figure is in pages.
//!
//! A [`CgroupTree`](crate::memcontrol::CgroupTree) gives each memory
//! cgroup a `memory` and a `swap` counter (`MemCgroup::memory()`); a
//! counter can also be used on its own, for any hierarchical budget:
//!
//! ```
//! use std::sync::Arc;
//! use memcg::page_counter::PageCounter;
//!
//! // root -> parent (max 100 pages, low 60) -> a, b (low 40 each).
//! let root = Arc::new(PageCounter::new(None, true));
//! let parent = Arc::new(PageCounter::new(Some(Arc::clone(&root)), true));
//! let a = PageCounter::new(Some(Arc::clone(&parent)), true);
//! let b = PageCounter::new(Some(Arc::clone(&parent)), true);
//! parent.set_max(100)?;
//! parent.set_low(60);
//! a.set_low(40);
//! b.set_low(40);
//!
//! a.try_charge(50).unwrap();
//! b.try_charge(30).unwrap();
//! assert_eq!((parent.usage(), root.usage()), (80, 80));
//! // A charge past a limit names the level that refused it and leaves
//! // nothing charged.
//! let refused = b.try_charge(30).unwrap_err();
//! assert!(std::ptr::eq(refused, &*parent));
//! assert_eq!((b.usage(), parent.failcnt(), parent.watermark()), (30, 1, 80));
//!
//! // Effective protection, top-down for a reclaim of the root: a and b
//! // claim 40 + 30 protected pages of the parent's 60, so each gets its
//! // share scaled by 60/70.
//! for counter in [&*parent, &a, &b] {
//!     counter.calculate_protection(&root, false);
//! }
//! assert_eq!((parent.elow(), a.elow(), b.elow()), (60, 34, 25));
//!
//! a.uncharge(50);
//! b.uncharge(30);
//! assert_eq!(root.usage(), 0);
//! # Ok::<(), memcg::page_counter::SetMaxBusy>(())
//! ```
//!
//! # Why `try_charge` and `set_max` need no lock
//!
//! `try_charge` adds to `usage` first and compares with `max` afterwards
//! (speculative charging: no compare-and-swap loop, at the price that a
//! failing large charge can briefly lock out a racing small one).
//! `set_max` reads `usage`, swaps in the new `max`, and reads `usage` again;
//! if usage grew in between and the new limit is lower, it restores the old
//! limit and retries. Both sides write then read with `SeqCst` accesses
//! (the kernel gets the same from the full barriers of
//! `atomic_long_add_return` and `xchg`), which all fall in one total order:
//! if the charger's add comes first, the setter's second read sees the
//! charge and retries; if the setter's swap comes first, the charger sees
//! the new limit and backs out. Either way usage never stays above a limit
//! that `set_max` reported as set. (On x86 this costs no fence: the RMW is
//! a locked instruction. Loom models `SeqCst` fences but not `SeqCst`
//! accesses, so under loom a fence is added between the two; see
//! `sync::seqcst_store_load`.)
//!
//! # Protection
//!
//! For counters with protection support (the memory counter, not swap),
//! every usage change recomputes `min(usage, min)` and `min(usage, low)` and
//! adds the change to the parent's `children_min_usage` /
//! `children_low_usage` (`propagate_protected_usage`). Reclaim then computes
//! effective protection top-down with [`PageCounter::calculate_protection`]:
//! a child gets its own setting, scaled down when its siblings together
//! claim more than the parent has, and (with recursive protection, the
//! `memory_recursiveprot` mount option) a share of what the parent has
//! left in proportion to its unprotected usage.
//!
//! # Layout
//!
//! As the kernel's `struct page_counter` (v6.12+): `usage` alone on one
//! cache line (with the `failcnt` that only a refused charge writes, as in
//! v6.14, and the count of underflows only a caller's bug writes), the
//! protection fields and peaks on a second, the read-mostly
//! limits and the parent on a third. A charge writes only the first line
//! at every level, so CPUs charging under a shared ancestor fight over one
//! line per level, and the lines every charge reads stay shared in every
//! CPU's cache.
//!
//! # Designs
//!
//! [`PageCounter`] is what the kernel and this crate charge. Its
//! predecessor is kept beside it as a baseline, picked by
//! [`PageCounterDesign`] and driven through [`Counter`] (which
//! `memcg bench page-counter` uses to compare the two):
//!
//! | design | kernel | a charge of `nr_pages` at depth D |
//! |---|---|---|
//! | `res_counter` | until v3.19 (kernel/res_counter.c) | D lock/unlock pairs: each level's lock in turn, undone level by level on failure |
//! | **`page_counter`** (default) | since v3.19 (2014) | D atomic adds, no lock |

use std::fmt;

use crate::errno::Errno;
use crate::mm_types::PAGE_SIZE;
use crate::sync::{Arc, AtomicI64, AtomicU64, Mutex, Ordering, lock, seqcst_store_load, spin_loop};

/// The "unlimited" value (`PAGE_COUNTER_MAX` on 64-bit: `LONG_MAX /
/// PAGE_SIZE`).
pub const PAGE_COUNTER_MAX: u64 = i64::MAX as u64 / PAGE_SIZE;

/// `set_max` found usage above the new limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("usage {usage} pages exceeds the new limit of {max} pages")]
pub struct SetMaxBusy {
    /// Pages in use.
    pub usage: u64,
    /// The limit asked for.
    pub max: u64,
}

impl SetMaxBusy {
    /// `EBUSY`.
    pub fn errno(&self) -> Errno {
        Errno::EBUSY
    }
}

/// Line 0 of a [`PageCounter`]: `usage` alone, the one field every charge
/// and uncharge writes at every level, so that a CPU charging a shared
/// ancestor transfers only this line (the kernel's `usage` followed by
/// `CACHELINE_PADDING(_pad1_)`). `failcnt` shares it, as in v6.14 (where
/// it is the v1-only field next to `usage`): it is written only by a
/// refused charge, which has just written `usage` on the same line, and
/// read by nobody on the charge path.
#[repr(align(64))]
struct UsageLine {
    usage: AtomicI64,
    failcnt: AtomicU64,
    /// Uncharges of more than was charged (a caller's bug), clamped; only
    /// that bug writes it.
    underflows: AtomicU64,
}

/// Line 1: protection and peak tracking (the kernel's fields between
/// `_pad1_` and `_pad2_`). A charge reads `min_usage`, `low_usage` and
/// `local_watermark` here and writes them only when they change;
/// a child's `propagate_protected_usage` writes its parent's
/// `children_*_usage` and reclaim writes `emin`/`elow`, none of which
/// then lands on the `usage` or limits lines.
#[repr(align(64))]
struct ProtectionLine {
    emin: AtomicU64,
    min_usage: AtomicI64,
    children_min_usage: AtomicI64,
    elow: AtomicU64,
    low_usage: AtomicI64,
    children_low_usage: AtomicI64,
    watermark: AtomicU64,
    local_watermark: AtomicU64,
}

/// Line 2: read-mostly settings and the parent link (the kernel's fields
/// after `_pad2_`): read by every charge at every level, written only by
/// the interface files, so every CPU keeps a shared copy.
#[repr(align(64))]
struct ReadMostlyLine {
    protection_support: bool,
    min: AtomicU64,
    low: AtomicU64,
    high: AtomicU64,
    max: AtomicU64,
    parent: Option<Arc<PageCounter>>,
}

/// One level of a hierarchical page counter (`struct page_counter`).
///
/// Laid out as the kernel's (v6.12+), one group per 64-byte cache line
/// (x86's line, the kernel's `L1_CACHE_BYTES`): `usage`; protection and
/// peaks; read-mostly limits and the parent. With the fields on fewer
/// lines, two CPUs charging under a shared ancestor made each level cost
/// two or three line transfers instead of one (docs/BENCHMARKS.md,
/// page-counter). The groups are `#[repr(align(64))]` structs rather than
/// a generic padding wrapper: memcg does not depend on crossbeam-utils,
/// and named groups say which fields share a line; `repr(C)` keeps them
/// in the kernel's order (usage first).
#[repr(C)]
pub struct PageCounter {
    hot: UsageLine,
    prot: ProtectionLine,
    limits: ReadMostlyLine,
}

impl PageCounter {
    /// A counter at 0 with no limits under `parent`.
    pub fn new(parent: Option<Arc<PageCounter>>, protection_support: bool) -> Self {
        Self {
            hot: UsageLine {
                usage: AtomicI64::new(0),
                failcnt: AtomicU64::new(0),
                underflows: AtomicU64::new(0),
            },
            prot: ProtectionLine {
                emin: AtomicU64::new(0),
                min_usage: AtomicI64::new(0),
                children_min_usage: AtomicI64::new(0),
                elow: AtomicU64::new(0),
                low_usage: AtomicI64::new(0),
                children_low_usage: AtomicI64::new(0),
                watermark: AtomicU64::new(0),
                local_watermark: AtomicU64::new(0),
            },
            limits: ReadMostlyLine {
                protection_support,
                min: AtomicU64::new(0),
                low: AtomicU64::new(0),
                high: AtomicU64::new(PAGE_COUNTER_MAX),
                max: AtomicU64::new(PAGE_COUNTER_MAX),
                parent,
            },
        }
    }

    /// The parent level.
    pub fn parent(&self) -> Option<&Arc<PageCounter>> {
        self.limits.parent.as_ref()
    }

    /// Pages charged (`page_counter_read`).
    pub fn usage(&self) -> u64 {
        // Relaxed: a snapshot; charging and limit setting order themselves
        // with the fences described in the module docs.
        self.hot.usage.load(Ordering::Relaxed).max(0) as u64
    }

    /// The limit in pages.
    pub fn max(&self) -> u64 {
        self.limits.max.load(Ordering::Relaxed)
    }

    /// The high threshold in pages.
    pub fn high(&self) -> u64 {
        self.limits.high.load(Ordering::Relaxed)
    }

    /// The low protection in pages.
    pub fn low(&self) -> u64 {
        self.limits.low.load(Ordering::Relaxed)
    }

    /// The min protection in pages.
    pub fn min(&self) -> u64 {
        self.limits.min.load(Ordering::Relaxed)
    }

    /// Effective min protection from the last [`calculate_protection`](Self::calculate_protection).
    pub fn emin(&self) -> u64 {
        self.prot.emin.load(Ordering::Relaxed)
    }

    /// Effective low protection from the last [`calculate_protection`](Self::calculate_protection).
    pub fn elow(&self) -> u64 {
        self.prot.elow.load(Ordering::Relaxed)
    }

    /// The highest usage seen (`watermark`, `memory.peak`).
    pub fn watermark(&self) -> u64 {
        self.prot.watermark.load(Ordering::Relaxed)
    }

    /// Uncharges at this level of more than it held (a caller's bug,
    /// clamped: see [`PageCounter::cancel`]).
    pub fn underflows(&self) -> u64 {
        self.hot.underflows.load(Ordering::Relaxed)
    }

    /// Counts an uncharge of `nr_pages` that would have left `usage` at
    /// `left` (negative), and reports the first one (`WARN_ONCE`).
    pub(crate) fn note_underflow(&self, left: i64, nr_pages: u64) {
        // Relaxed: a statistic of caller bugs.
        if self.hot.underflows.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "memcg: page_counter underflow: {left} nr_pages={nr_pages} \
                 (uncharged more than was charged; clamped, reported once per counter)"
            );
        }
    }

    /// Charges refused at this level (`failcnt`).
    pub fn failcnt(&self) -> u64 {
        self.hot.failcnt.load(Ordering::Relaxed)
    }

    /// Protected usage of the children (`children_min_usage`).
    pub fn children_min_usage(&self) -> u64 {
        self.prot.children_min_usage.load(Ordering::Relaxed).max(0) as u64
    }

    /// Protected usage of the children (`children_low_usage`).
    pub fn children_low_usage(&self) -> u64 {
        self.prot.children_low_usage.load(Ordering::Relaxed).max(0) as u64
    }

    /// Pages that can still be charged here before `max`
    /// (`mem_cgroup_margin` for one level).
    pub fn margin(&self) -> u64 {
        self.max().saturating_sub(self.usage())
    }

    /// Levels from this one to the root.
    fn levels(&self) -> impl Iterator<Item = &PageCounter> {
        std::iter::successors(Some(self), |c| c.limits.parent.as_deref())
    }

    /// Charges `nr_pages` at every level regardless of limits
    /// (`page_counter_charge`).
    pub fn charge(&self, nr_pages: u64) {
        for c in self.levels() {
            // Relaxed: an unconditional charge orders nothing.
            let new = c.hot.usage.fetch_add(nr_pages as i64, Ordering::Relaxed) + nr_pages as i64;
            c.after_charge(new);
        }
    }

    /// Charges `nr_pages` at every level unless one would go over its
    /// `max`; on failure nothing stays charged and the refusing level is
    /// returned (`page_counter_try_charge`).
    pub fn try_charge(&self, nr_pages: u64) -> Result<(), &PageCounter> {
        for c in self.levels() {
            // SeqCst add, then a SeqCst read of the limit: pairs with the
            // SeqCst swap and re-read in `set_max` (module docs), so either
            // this charge sees the new limit or the setter sees this charge.
            let new = c.hot.usage.fetch_add(nr_pages as i64, Ordering::SeqCst) + nr_pages as i64;
            seqcst_store_load();
            if new > c.limits.max.load(Ordering::SeqCst) as i64 {
                c.hot.usage.fetch_sub(nr_pages as i64, Ordering::Relaxed);
                // Relaxed: a statistic.
                c.hot.failcnt.fetch_add(1, Ordering::Relaxed);
                for undo in self.levels().take_while(|l| !std::ptr::eq(*l, c)) {
                    undo.cancel(nr_pages);
                }
                return Err(c);
            }
            c.after_charge(new);
        }
        Ok(())
    }

    /// Uncharges `nr_pages` at every level (`page_counter_uncharge`).
    pub fn uncharge(&self, nr_pages: u64) {
        for c in self.levels() {
            c.cancel(nr_pages);
        }
    }

    /// Uncharges `nr_pages` at this level only (`page_counter_cancel`).
    /// More uncharges than charges is a caller's bug, handled as the
    /// kernel's `WARN_ONCE` does: usage is clamped to 0, the bug is
    /// counted ([`PageCounter::underflows`]) and reported on stderr the
    /// first time for this counter; nothing panics.
    pub fn cancel(&self, nr_pages: u64) {
        let mut new =
            self.hot.usage.fetch_sub(nr_pages as i64, Ordering::Relaxed) - nr_pages as i64;
        if new < 0 {
            // Relaxed: repairing a statistic after a caller bug.
            self.hot.usage.store(0, Ordering::Relaxed);
            self.note_underflow(new, nr_pages);
            new = 0;
        }
        if self.limits.protection_support {
            self.propagate_protected_usage(new as u64);
        }
    }

    fn after_charge(&self, new: i64) {
        if self.limits.protection_support {
            self.propagate_protected_usage(new.max(0) as u64);
        }
        // Racy by design (as in the kernel): a statistic, and a lost
        // update only ever under-reports a concurrent peak briefly.
        let new = new.max(0) as u64;
        if new > self.prot.local_watermark.load(Ordering::Relaxed) {
            self.prot.local_watermark.store(new, Ordering::Relaxed);
            if new > self.prot.watermark.load(Ordering::Relaxed) {
                self.prot.watermark.store(new, Ordering::Relaxed);
            }
        }
    }

    /// Resets both peaks to the current usage
    /// (`page_counter_reset_watermark`: cgroup v1's `max_usage_in_bytes`;
    /// v2 never resets the global peak, see [`PageCounter::reset_local_watermark`]).
    #[cfg(test)]
    pub(crate) fn reset_watermark(&self) {
        let usage = self.usage();
        self.prot.watermark.store(usage, Ordering::Relaxed);
        self.prot.local_watermark.store(usage, Ordering::Relaxed);
    }

    /// The highest usage since the last [`PageCounter::reset_local_watermark`]
    /// (`local_watermark`, what a `memory.peak` file descriptor that was
    /// written to reads).
    pub(crate) fn local_watermark(&self) -> u64 {
        self.prot.local_watermark.load(Ordering::Relaxed)
    }

    /// Restarts the local peak at the current usage and returns that usage
    /// (a write to `memory.peak`); the global peak is kept.
    pub(crate) fn reset_local_watermark(&self) -> u64 {
        let usage = self.usage();
        self.prot.local_watermark.store(usage, Ordering::Relaxed);
        usage
    }

    fn propagate_protected_usage(&self, usage: u64) {
        let Some(parent) = &self.limits.parent else {
            return;
        };
        let pairs = [
            (
                &self.limits.min,
                &self.prot.min_usage,
                &parent.prot.children_min_usage,
            ),
            (
                &self.limits.low,
                &self.prot.low_usage,
                &parent.prot.children_low_usage,
            ),
        ];
        for (setting, protected_usage, children) in pairs {
            let protected = usage.min(setting.load(Ordering::Relaxed)) as i64;
            if protected != protected_usage.load(Ordering::Relaxed) {
                // Relaxed swap: the exchange makes each delta counted once
                // even when updates race; the sum is a statistic.
                let old = protected_usage.swap(protected, Ordering::Relaxed);
                let delta = protected - old;
                if delta != 0 {
                    children.fetch_add(delta, Ordering::Relaxed);
                }
            }
        }
    }

    /// Sets `max`; fails with EBUSY if usage already exceeds it
    /// (`page_counter_set_max`, race-free against charges: module docs).
    pub fn set_max(&self, nr_pages: u64) -> Result<(), SetMaxBusy> {
        loop {
            let usage = self.usage();
            if usage > nr_pages {
                return Err(SetMaxBusy {
                    usage,
                    max: nr_pages,
                });
            }
            // SeqCst swap, then a SeqCst re-read of usage: pairs with
            // `try_charge` (module docs).
            let old = self.limits.max.swap(nr_pages, Ordering::SeqCst);
            seqcst_store_load();
            if self.hot.usage.load(Ordering::SeqCst).max(0) as u64 <= usage || nr_pages >= old {
                return Ok(());
            }
            self.limits.max.store(old, Ordering::Relaxed);
            spin_loop();
        }
    }

    /// Sets `max` even below usage (what writing `memory.max` does before
    /// reclaiming down to it); returns the previous limit.
    pub(crate) fn force_max(&self, nr_pages: u64) -> u64 {
        self.limits.max.swap(nr_pages, Ordering::SeqCst)
    }

    /// Sets the high threshold.
    pub(crate) fn set_high(&self, nr_pages: u64) {
        self.limits.high.store(nr_pages, Ordering::Relaxed);
    }

    /// Sets min protection and propagates protected usage up.
    pub fn set_min(&self, nr_pages: u64) {
        self.limits.min.store(nr_pages, Ordering::Relaxed);
        self.repropagate();
    }

    /// Sets low protection and propagates protected usage up.
    pub fn set_low(&self, nr_pages: u64) {
        self.limits.low.store(nr_pages, Ordering::Relaxed);
        self.repropagate();
    }

    fn repropagate(&self) {
        if !self.limits.protection_support {
            return;
        }
        for c in self.levels() {
            c.propagate_protected_usage(c.usage());
        }
    }

    /// Computes `emin`/`elow` of `self` for reclaim rooted at `root`
    /// (`page_counter_calculate_protection`). Call top-down: the parent's
    /// effective values must be current.
    pub fn calculate_protection(&self, root: &PageCounter, recursive_protection: bool) {
        if std::ptr::eq(self, root) {
            return;
        }
        let usage = self.usage();
        if usage == 0 {
            return;
        }
        let Some(parent) = self.limits.parent.as_deref() else {
            return;
        };
        if std::ptr::eq(parent, root) {
            self.prot.emin.store(self.min(), Ordering::Relaxed);
            self.prot.elow.store(self.low(), Ordering::Relaxed);
            return;
        }
        let parent_usage = parent.usage();
        let emin = effective_protection(
            usage,
            parent_usage,
            self.min(),
            parent.emin(),
            parent.children_min_usage(),
            recursive_protection,
        );
        let elow = effective_protection(
            usage,
            parent_usage,
            self.low(),
            parent.elow(),
            parent.children_low_usage(),
            recursive_protection,
        );
        self.prot.emin.store(emin, Ordering::Relaxed);
        self.prot.elow.store(elow, Ordering::Relaxed);
    }
}

/// The kernel's `effective_protection`: a child's share of what its parent
/// is protected with (see the module docs).
pub(crate) fn effective_protection(
    usage: u64,
    parent_usage: u64,
    setting: u64,
    parent_effective: u64,
    siblings_protected: u64,
    recursive_protection: bool,
) -> u64 {
    let protected = usage.min(setting);
    // Siblings claim more than the parent affords: scale by utilisation.
    if siblings_protected > parent_effective {
        return (u128::from(protected) * u128::from(parent_effective)
            / u128::from(siblings_protected)) as u64;
    }
    let mut ep = protected;
    if !recursive_protection {
        return ep;
    }
    // Hand out the parent's unclaimed protection in proportion to each
    // child's unprotected usage.
    if parent_effective > siblings_protected
        && parent_usage > siblings_protected
        && usage > protected
    {
        let unclaimed = u128::from(parent_effective - siblings_protected)
            * u128::from(usage - protected)
            / u128::from(parent_usage - siblings_protected);
        ep += unclaimed as u64;
    }
    ep
}

/// Which hierarchical counter to use (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PageCounterDesign {
    /// Before v3.19: the locked `res_counter`, one lock per level.
    ResCounter,
    /// Since v3.19: the lockless [`PageCounter`].
    #[default]
    PageCounter,
}

// The baseline first: reports and charts list the designs in this order.
crate::named_enum!(PageCounterDesign {
    ResCounter => "res_counter",
    PageCounter => "page_counter",
}, unknown: UnknownPageCounterDesign = UnknownPageCounterDesign);

/// A design name that is not one of [`PageCounterDesign::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown page_counter design {0:?} (expected res_counter or page_counter)")]
pub struct UnknownPageCounterDesign(pub String);

/// One level of a hierarchical counter in either [`PageCounterDesign`],
/// without limits or protection: enough to charge and uncharge both designs
/// the same way and compare them. Everything else charges a [`PageCounter`]
/// directly.
pub struct Counter {
    repr: Repr,
}

enum Repr {
    ResCounter(Arc<ResCounter>),
    PageCounter(Arc<PageCounter>),
}

impl Counter {
    /// A counter at 0 with no parent and no limit.
    pub fn new(design: PageCounterDesign) -> Self {
        let repr = match design {
            PageCounterDesign::ResCounter => Repr::ResCounter(Arc::new(ResCounter::new(None))),
            // With protection support, as the memory counter it stands for.
            PageCounterDesign::PageCounter => {
                Repr::PageCounter(Arc::new(PageCounter::new(None, true)))
            }
        };
        Self { repr }
    }

    /// A counter at 0 with no limit under this one, of the same design.
    pub fn child(&self) -> Self {
        let repr = match &self.repr {
            Repr::ResCounter(c) => Repr::ResCounter(Arc::new(ResCounter::new(Some(Arc::clone(c))))),
            Repr::PageCounter(c) => {
                Repr::PageCounter(Arc::new(PageCounter::new(Some(Arc::clone(c)), true)))
            }
        };
        Self { repr }
    }

    /// Charges `nr_pages` at every level; `false`, with nothing charged,
    /// when a level refused.
    // Inline, with res_counter's charge path: the match sits in the
    // caller's loop and res_counter is compiled into it, as it was when the
    // baseline lived in the benchmark (its figures in docs/ were measured
    // so); page_counter stays a call, as it always was.
    #[inline]
    pub fn try_charge(&self, nr_pages: u64) -> bool {
        match &self.repr {
            Repr::ResCounter(c) => c.try_charge(nr_pages),
            Repr::PageCounter(c) => c.try_charge(nr_pages).is_ok(),
        }
    }

    /// Uncharges `nr_pages` at every level.
    #[inline]
    pub fn uncharge(&self, nr_pages: u64) {
        match &self.repr {
            Repr::ResCounter(c) => c.uncharge(nr_pages),
            Repr::PageCounter(c) => c.uncharge(nr_pages),
        }
    }

    /// Pages charged at this level.
    pub fn usage(&self) -> u64 {
        match &self.repr {
            Repr::ResCounter(c) => c.usage(),
            Repr::PageCounter(c) => c.usage(),
        }
    }
}

/// What one `res_counter` level guards with its lock.
#[derive(Default)]
struct ResLevel {
    usage: u64,
    /// `limit`.
    max: u64,
    /// `max_usage`.
    watermark: u64,
    failcnt: u64,
}

/// The kernel's `res_counter` (kernel/res_counter.c, removed in v3.19 when
/// [`PageCounter`] replaced it): a level's usage, limit, peak and failcnt
/// behind one lock, and a charge that walks up the hierarchy taking each
/// level's lock in turn, so every charge in a subtree serialises on the
/// shared ancestors' locks. The kernel's lock was a spinlock taken with
/// interrupts off; here it is a `Mutex`, which spins briefly before it
/// sleeps.
struct ResCounter {
    level: Mutex<ResLevel>,
    parent: Option<Arc<ResCounter>>,
}

impl ResCounter {
    fn new(parent: Option<Arc<ResCounter>>) -> Self {
        Self {
            level: Mutex::new(ResLevel {
                max: PAGE_COUNTER_MAX,
                ..ResLevel::default()
            }),
            parent,
        }
    }

    /// Levels from this one to the root.
    #[inline]
    fn levels(&self) -> impl Iterator<Item = &ResCounter> {
        std::iter::successors(Some(self), |c| c.parent.as_deref())
    }

    /// `res_counter_charge`: charges level by level, each under its own
    /// lock; a level that would go over its limit counts a failure and the
    /// levels below it are uncharged again.
    #[inline]
    fn try_charge(&self, nr_pages: u64) -> bool {
        for (i, c) in self.levels().enumerate() {
            let mut l = lock(&c.level);
            if l.usage + nr_pages > l.max {
                l.failcnt += 1;
                drop(l);
                self.levels().take(i).for_each(|u| u.uncharge_one(nr_pages));
                return false;
            }
            l.usage += nr_pages;
            l.watermark = l.watermark.max(l.usage);
        }
        true
    }

    #[inline]
    /// `res_counter_uncharge_locked`: more than the usage is a caller's
    /// bug, which it clamped (after a `WARN_ON`).
    fn uncharge_one(&self, nr_pages: u64) {
        let mut level = lock(&self.level);
        level.usage = level.usage.saturating_sub(nr_pages);
    }

    /// `res_counter_uncharge`: level by level, each under its own lock.
    #[inline]
    fn uncharge(&self, nr_pages: u64) {
        self.levels().for_each(|c| c.uncharge_one(nr_pages));
    }

    fn usage(&self) -> u64 {
        lock(&self.level).usage
    }
}

impl fmt::Debug for PageCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCounter")
            .field("usage", &self.usage())
            .field("max", &self.max())
            .field("watermark", &self.watermark())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn chain(depth: usize) -> Vec<Arc<PageCounter>> {
        let mut levels: Vec<Arc<PageCounter>> = vec![Arc::new(PageCounter::new(None, true))];
        for _ in 1..depth {
            let parent = Arc::clone(levels.last().unwrap());
            levels.push(Arc::new(PageCounter::new(Some(parent), true)));
        }
        levels
    }

    /// The kernel's layout (see [`PageCounter`]): `usage` on a line of its
    /// own (with only `failcnt`), protection and peaks on a second,
    /// read-mostly settings and the parent on a third.
    #[test]
    fn field_groups_sit_on_distinct_cache_lines() {
        use std::mem::offset_of;
        const LINE: usize = 64;
        let line = |offset: usize| offset / LINE;
        let usage_line = [
            offset_of!(PageCounter, hot.usage),
            offset_of!(PageCounter, hot.failcnt),
            offset_of!(PageCounter, hot.underflows),
        ]
        .map(line);
        let protection_line = [
            offset_of!(PageCounter, prot.emin),
            offset_of!(PageCounter, prot.min_usage),
            offset_of!(PageCounter, prot.children_min_usage),
            offset_of!(PageCounter, prot.elow),
            offset_of!(PageCounter, prot.low_usage),
            offset_of!(PageCounter, prot.children_low_usage),
            offset_of!(PageCounter, prot.watermark),
            offset_of!(PageCounter, prot.local_watermark),
        ]
        .map(line);
        let read_mostly_line = [
            offset_of!(PageCounter, limits.protection_support),
            offset_of!(PageCounter, limits.min),
            offset_of!(PageCounter, limits.low),
            offset_of!(PageCounter, limits.high),
            offset_of!(PageCounter, limits.max),
            offset_of!(PageCounter, limits.parent),
        ]
        .map(line);
        for group in [&usage_line[..], &protection_line, &read_mostly_line] {
            assert!(group.iter().all(|&l| l == group[0]), "{group:?}: one line");
        }
        assert_eq!(
            [usage_line[0], protection_line[0], read_mostly_line[0]],
            [0, 1, 2],
            "usage, protection, read-mostly: three lines in the kernel's order"
        );
        assert_eq!(align_of::<PageCounter>(), LINE);
        assert_eq!(size_of::<PageCounter>(), 3 * LINE);
        // An Arc'ed counter (how parents are held) starts on a line too, so
        // the groups are real lines, not just 64 bytes apart.
        let counter = Arc::new(PageCounter::new(None, true));
        assert_eq!(Arc::as_ptr(&counter) as usize % LINE, 0);
    }

    #[test]
    fn charges_propagate_and_failures_undo() {
        let l = chain(3);
        let (root, mid, leaf) = (&l[0], &l[1], &l[2]);
        leaf.charge(5);
        assert_eq!((root.usage(), mid.usage(), leaf.usage()), (5, 5, 5));
        mid.set_max(8).unwrap();
        let failed = leaf.try_charge(4).unwrap_err();
        assert!(std::ptr::eq(failed, &**mid), "mid refused");
        assert_eq!(
            (root.usage(), mid.usage(), leaf.usage()),
            (5, 5, 5),
            "undone"
        );
        assert_eq!((mid.failcnt(), leaf.failcnt()), (1, 0));
        leaf.try_charge(3).unwrap();
        assert_eq!(root.watermark(), 8);
        leaf.uncharge(8);
        assert_eq!(root.usage(), 0);
        assert_eq!(root.watermark(), 8, "peak stays");
        root.reset_watermark();
        assert_eq!(root.watermark(), 0);
    }

    #[test]
    fn set_max_refuses_below_usage() {
        let c = PageCounter::new(None, false);
        c.charge(10);
        assert_eq!(c.set_max(9), Err(SetMaxBusy { usage: 10, max: 9 }));
        assert_eq!(c.set_max(9).unwrap_err().errno(), Errno::EBUSY);
        c.set_max(10).unwrap();
        assert_eq!(c.max(), 10);
        assert_eq!(c.force_max(3), 10);
        assert_eq!(c.margin(), 0);
    }

    /// The kernel's `page_counter_cancel` WARNs once and clamps: no panic
    /// in any build, usage 0, the bug counted at each level it hit.
    #[test]
    fn underflow_clamps_and_is_counted() {
        let l = chain(2);
        let (parent, child) = (&l[0], &l[1]);
        child.charge(3);
        parent.charge(5);
        child.uncharge(4);
        assert_eq!((child.usage(), child.underflows()), (0, 1));
        assert_eq!((parent.usage(), parent.underflows()), (4, 0));
        PageCounter::new(None, false).uncharge(1);
        child.uncharge(1);
        assert_eq!((child.usage(), child.underflows()), (0, 2));
    }

    #[test]
    fn protected_usage_propagates_to_the_parent() {
        let l = chain(2);
        let (parent, child) = (&l[0], &l[1]);
        child.set_min(10);
        child.set_low(20);
        child.charge(15);
        assert_eq!(
            (parent.children_min_usage(), parent.children_low_usage()),
            (10, 15)
        );
        child.uncharge(12);
        assert_eq!(
            (parent.children_min_usage(), parent.children_low_usage()),
            (3, 3)
        );
        child.set_min(0);
        assert_eq!(parent.children_min_usage(), 0);
    }

    #[test]
    fn effective_protection_matches_the_kernel_examples() {
        // Within budget: the setting, capped by usage.
        assert_eq!(effective_protection(50, 100, 30, 60, 40, false), 30);
        // Siblings over-claim: scaled by parent_effective / siblings_protected.
        assert_eq!(effective_protection(50, 200, 50, 60, 120, false), 25);
        // Recursive: a share of the unclaimed rest by unprotected usage.
        assert_eq!(
            effective_protection(50, 100, 10, 60, 20, true),
            10 + 40 * 40 / 80
        );
        assert_eq!(effective_protection(50, 100, 10, 60, 20, false), 10);
    }

    #[test]
    fn calculate_protection_top_down() {
        // root -> a -> {b, c}: a.low = 100 pages; b.low = 80, c.low = 80.
        let root = Arc::new(PageCounter::new(None, true));
        let a = Arc::new(PageCounter::new(Some(Arc::clone(&root)), true));
        let b = PageCounter::new(Some(Arc::clone(&a)), true);
        let c = PageCounter::new(Some(Arc::clone(&a)), true);
        a.set_low(100);
        b.set_low(80);
        c.set_low(80);
        b.charge(100);
        c.charge(60);
        a.calculate_protection(&root, false);
        b.calculate_protection(&root, false);
        c.calculate_protection(&root, false);
        assert_eq!(a.elow(), 100);
        // Siblings protect 80 + 60 = 140 > 100: shares 80*100/140, 60*100/140.
        assert_eq!((b.elow(), c.elow()), (57, 42));
    }

    #[test]
    fn res_counter_refuses_and_undoes_like_page_counter() {
        let top = Arc::new(ResCounter::new(Some(Arc::new(ResCounter::new(None)))));
        let leaves = [ResCounter::new(Some(Arc::clone(&top)))];
        top.level.lock().unwrap().max = 2;
        assert!(leaves[0].try_charge(2));
        assert!(!leaves[0].try_charge(1));
        assert_eq!((leaves[0].usage(), top.usage()), (2, 2));
        assert_eq!(top.level.lock().unwrap().failcnt, 1);
        leaves[0].uncharge(2);
        assert_eq!(top.usage(), 0);
    }

    #[test]
    fn both_designs_charge_every_level_through_counter() {
        for design in PageCounterDesign::ALL {
            let root = Counter::new(design);
            let leaves = [root.child().child(), root.child()];
            assert!(
                leaves[0].try_charge(3) && leaves[1].try_charge(4),
                "{design}"
            );
            assert_eq!((root.usage(), leaves[0].usage()), (7, 3), "{design}");
            leaves.iter().for_each(|l| l.uncharge(l.usage()));
            assert_eq!(root.usage(), 0, "{design}");
        }
    }

    #[test]
    fn design_names_round_trip() {
        for design in PageCounterDesign::ALL {
            assert_eq!(design.name().parse(), Ok(design));
        }
        assert_eq!(PageCounterDesign::ALL[0].to_string(), "res_counter");
        assert_eq!(
            "res_counter (locked)".parse::<PageCounterDesign>(),
            Err(UnknownPageCounterDesign("res_counter (locked)".into()))
        );
    }
}
