//! Charging memory to cgroups and the limits that refuse it (the charge
//! half of mm/memcontrol.c, v6.14).
//!
//! Every cgroup has a `memory` and a `swap` [`PageCounter`] whose parents
//! are its parent's counters, so a charge counts at every level. The root
//! itself is never charged (as in the kernel); its counters only sum its
//! children's.
//!
//! # Charging (`try_charge_memcg`)
//!
//! Try the counter; when a level refuses, raise `max` on that cgroup (the
//! one over its limit), ask the [`MemcgReclaim`](super::MemcgReclaim) hook to free the shortfall
//! there, and retry while that made room, once more after a "drain", again
//! while reclaim freed anything (small charges), and up to
//! `MAX_RECLAIM_RETRIES` times. Then invoke the OOM path: raise `oom`, and
//! ask the [`OomHandler`](super::OomHandler) hook for a victim; if one was killed, raise
//! `oom_kill` where it lived and start over; else fail with ENOMEM. A
//! successful charge that leaves any level above `memory.high` raises
//! `high` there and asks reclaim to bring it back, on the way back to user
//! space or, past a batch of pages over high in one system call, at once
//! (`entry.rs`).
//!
//! Swap accounting lives in `swap.rs`, events and statistics in
//! `stat.rs`, the reclaim and OOM hooks in `hooks.rs`.
//!
//! Locking: none of its own. Page counters are lock-free (charges race
//! freely and a refused level is retried or reported); the hooks run with
//! no memcontrol lock held.

use std::fmt;

use super::stat::{Counts, MemcgEvent, MemcgStat};
use super::{CgroupTree, MEMCG_CHARGE_BATCH, MemCgroup, OomOutcome, ReclaimOptions};
use crate::clock::{HZ, jiffies};
use crate::errno::Errno;
use crate::page_alloc::PageBuf;
use crate::page_counter::{PAGE_COUNTER_MAX, PageCounter};
use crate::swap_cgroup::SwapCgroupError;
use crate::swapfile::MachinePages;
use crate::sync::{Arc, AtomicU64, Ordering};

/// How often a charge retries reclaim before invoking the OOM path
/// (`MAX_RECLAIM_RETRIES`).
pub(super) const MAX_RECLAIM_RETRIES: u32 = 16;

/// OOM passes in a row that freed nothing (no usage came off the cgroup
/// over its limit) after which a charge, or a `memory.max` write, gives
/// up. v6.14 retries for as long as the OOM killer acts, relying on its
/// victims to free their memory (the OOM reaper sees to it); this bound
/// only keeps a victim that never lets go, or a hook that kills without
/// freeing, from holding the caller forever. Kills that free memory reset
/// it, so a charge goes on while they make progress.
const MAX_FRUITLESS_OOM_PASSES: u32 = 16;

/// Charges up to this many pages retry after any reclaim progress
/// (`1 << PAGE_ALLOC_COSTLY_ORDER`).
const COSTLY_PAGES: u64 = 8;

/// What kind of page a charge is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChargeKind {
    /// Anonymous memory.
    Anon,
    /// Page cache.
    File,
    /// Kernel pages charged through an object cgroup
    /// (`obj_cgroup_charge_pages`): `kernel` pages (slab pages, whose
    /// objects' bytes count in `slab_*`, and page tables, which count in
    /// `pagetables` too: `kmem.rs`).
    Kmem,
}

impl MemCgroup {
    /// The statistics of `nr_pages` (negative: uncharged) of `kind`.
    pub(super) fn account(&self, kind: ChargeKind, nr_pages: i64) {
        match kind {
            ChargeKind::Anon => self.mod_stat(MemcgStat::Anon, nr_pages),
            ChargeKind::File => self.mod_stat(MemcgStat::File, nr_pages),
            ChargeKind::Kmem => self.mod_stat(MemcgStat::Kernel, nr_pages),
        }
    }
}

/// How hard a charge may try: the part of the kernel's gfp flags that
/// `try_charge_memcg` looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Gfp {
    /// `GFP_KERNEL`: reclaim, retry, and for up to 8 pages the OOM killer.
    #[default]
    Kernel,
    /// Cannot block (`GFP_TRANSHUGE_LIGHT`, an mTHP fault in a VMA that is
    /// not `MADV_HUGEPAGE`): over the limit it fails at once, with no
    /// reclaim and no event; the fault falls back to smaller folios.
    NoReclaim,
    /// Made by reclaim itself (`PF_MEMALLOC`: a zswap entry stored to free
    /// a page): it never fails; over a limit it is forced through, raising
    /// `max` on the cgroup whose limit it passes (`try_charge_memcg`'s
    /// `force:`), with no reclaim and no `memory.high` work.
    MemAlloc,
    /// `__GFP_NORETRY` (readahead's `readahead_gfp_mask`): reclaims, and
    /// retries once after draining the charge stocks, then fails quietly:
    /// no reclaim retries and no OOM killer.
    NoRetry,
}

/// Why a charge failed. Nothing stays charged when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChargeError {
    /// The simulated machine has no memory left (its size is the root's
    /// limit; the kernel would reclaim globally, then OOM-kill).
    #[error("the machine is out of memory ({total_pages} pages in all)")]
    MachineOutOfMemory {
        /// The machine's size in pages.
        total_pages: u64,
    },
    /// Over `memory.max` with nothing reclaimable and nothing to kill.
    #[error("{path}: out of memory (memory.max reached)")]
    OutOfMemory {
        /// The cgroup whose limit refused the charge.
        path: String,
    },
    /// Over `memory.swap.max`.
    #[error("{path}: swap limit reached (memory.swap.max)")]
    SwapLimit {
        /// The cgroup whose limit refused the charge.
        path: String,
    },
    /// The swap entry could not be recorded.
    #[error("swap_cgroup: {0}")]
    SwapMap(#[from] SwapCgroupError),
}

impl ChargeError {
    /// The errno a faulting task would see (ENOMEM), or the swap map's.
    pub fn errno(&self) -> Errno {
        match self {
            ChargeError::OutOfMemory { .. }
            | ChargeError::SwapLimit { .. }
            | ChargeError::MachineOutOfMemory { .. } => Errno::ENOMEM,
            ChargeError::SwapMap(e) => e.errno(),
        }
    }
}

/// A cgroup's page counters, and its events and statistics.
pub(crate) struct Accounting {
    memory: Arc<PageCounter>,
    swap: Arc<PageCounter>,
    /// `memory.zswap.max` in pages.
    zswap_max: AtomicU64,
    pub(super) counts: Counts,
}

impl Accounting {
    pub(crate) fn new(parent: Option<&Accounting>) -> Self {
        let acct = Self {
            memory: Arc::new(PageCounter::new(
                parent.map(|p| Arc::clone(&p.memory)),
                true,
            )),
            swap: Arc::new(PageCounter::new(parent.map(|p| Arc::clone(&p.swap)), false)),
            zswap_max: AtomicU64::new(PAGE_COUNTER_MAX),
            counts: Counts::default(),
        };
        // A new cgroup starts with nothing charged and no limit.
        debug_assert!(acct.memory.usage() == 0 && acct.swap.usage() == 0);
        debug_assert_eq!(acct.memory.max(), PAGE_COUNTER_MAX);
        acct
    }
}

impl MemCgroup {
    /// Takes back `nr_pages` of `kind` charged here, at every level (what
    /// [`CgroupTree::uncharge`] does; a folio needs no tree for it). More
    /// than was charged here is clamped (see [`CgroupTree::uncharge`]).
    pub(crate) fn uncharge_pages(&self, nr_pages: u64, kind: ChargeKind) {
        let asked = nr_pages;
        let nr_pages = self.unpin_pages(nr_pages);
        // An over-uncharge is clamped to what this cgroup holds, never raised.
        debug_assert!(nr_pages <= asked);
        self.memory().uncharge(nr_pages);
        self.account(kind, -(nr_pages as i64));
    }

    /// The memory counter (`memory.current`, `.max`, `.high`, ...).
    pub fn memory(&self) -> &PageCounter {
        &self.acct.memory
    }

    /// The swap counter (`memory.swap.current`, `.max`, ...).
    pub fn swap(&self) -> &PageCounter {
        &self.acct.swap
    }

    /// `memory.zswap.max` in pages.
    pub fn zswap_max(&self) -> u64 {
        self.acct.zswap_max.load(Ordering::Relaxed)
    }

    /// Sets `memory.zswap.max` in pages.
    pub fn set_zswap_max(&self, nr_pages: u64) {
        self.acct.zswap_max.store(nr_pages, Ordering::Relaxed);
    }
}

impl CgroupTree {
    /// Charges `nr_pages` of `kind` to `cg` (`charge_memcg`) with the
    /// effort `gfp` allows: with [`Gfp::Kernel`], reclaiming and invoking
    /// the OOM path as the kernel does (module docs).
    pub fn try_charge(
        &self,
        cg: &Arc<MemCgroup>,
        nr_pages: u64,
        kind: ChargeKind,
        gfp: Gfp,
    ) -> Result<(), ChargeError> {
        self.try_charge_memcg(cg, nr_pages, gfp)?;
        cg.pin_pages(nr_pages);
        cg.account(kind, nr_pages as i64);
        Ok(())
    }

    /// Uncharges `nr_pages` of `kind` from `cg` (`mem_cgroup_uncharge`).
    ///
    /// Uncharging more than `cg` has charged is a caller's bug. As the
    /// kernel's `page_counter_cancel` (a `WARN_ONCE`, then a clamp), it
    /// neither panics nor corrupts anything: only what `cg` itself has
    /// charged is uncharged (so its ancestors keep what other cgroups
    /// charged), the bug is counted on `cg.memory()`
    /// ([`PageCounter::underflows`](crate::page_counter::PageCounter::underflows))
    /// and reported on stderr the first time. (The root keeps no count of
    /// its own pages: its counter alone clamps.)
    pub fn uncharge(&self, cg: &MemCgroup, nr_pages: u64, kind: ChargeKind) {
        cg.uncharge_pages(nr_pages, kind);
    }

    /// Uncharges `nr_pages` of `kind` from `cg` into this thread's charge
    /// stock (`refill_stock`): the pages leave `cg`'s own count and `kind`'s
    /// statistic but stay charged, stocked for its next charges here, until
    /// drained. The root, or a tree without a stock, uncharges them at once.
    pub(super) fn uncharge_to_stock(&self, cg: &Arc<MemCgroup>, nr_pages: u64, kind: ChargeKind) {
        let stocks = self.stocks();
        if !stocks.enabled() || cg.is_root() {
            cg.uncharge_pages(nr_pages, kind);
            return;
        }
        let asked = nr_pages;
        let nr_pages = cg.unpin_pages(nr_pages);
        debug_assert!(nr_pages <= asked);
        cg.account(kind, -(nr_pages as i64));
        stocks.refill(cg, nr_pages);
    }

    /// Takes `nr_pages` of the machine for the kernel itself (a RAM disk's
    /// pages, swap tables): they belong to no cgroup.
    pub fn charge_kernel(&self, nr_pages: u64) -> Result<(), ChargeError> {
        self.root()
            .memory()
            .try_charge(nr_pages)
            .map_err(|_| ChargeError::MachineOutOfMemory {
                total_pages: self.machine_pages(),
            })?;
        Ok(())
    }

    /// Gives back pages taken by [`CgroupTree::charge_kernel`] or
    /// [`CgroupTree::charge_kernel_reclaim`].
    pub fn uncharge_kernel(&self, nr_pages: u64) {
        self.root().memory().uncharge(nr_pages);
    }

    /// The bytes of `nr_pages` of a folio or RAM-disk page, from the
    /// machine's frames (zeroed if `zeroed`; see `page_alloc`).
    pub(crate) fn alloc_pages(&self, nr_pages: u32, zeroed: bool) -> PageBuf {
        self.shared.ids.pages.alloc(nr_pages, zeroed)
    }

    /// Gives back what [`CgroupTree::alloc_pages`] gave.
    pub(crate) fn free_pages(&self, buf: PageBuf) {
        self.shared.ids.pages.free(buf);
    }

    /// Faults in host memory for `nr_pages` of the machine's frames (up to
    /// its size), so that what runs next pays no host page faults.
    pub fn prefault_frames(&self, nr_pages: u64) {
        self.shared.ids.pages.prefault(nr_pages);
    }

    fn try_charge_memcg(
        &self,
        cg: &Arc<MemCgroup>,
        nr_pages: u64,
        gfp: Gfp,
    ) -> Result<(), ChargeError> {
        let mut retry = ChargeRetry::default();
        // The root's charges are the machine's: no stock there (the
        // kernel never charges the root memory cgroup at all).
        let stocks = self.stocks();
        let stocking = stocks.enabled() && !cg.is_root();
        let mut batch = if stocking {
            nr_pages.max(MEMCG_CHARGE_BATCH)
        } else {
            nr_pages
        };
        loop {
            // The loop's bounds: it ends (each retry spends one of these).
            debug_assert!(batch >= nr_pages && (batch == nr_pages || stocking));
            debug_assert!(retry.retries <= MAX_RECLAIM_RETRIES);
            debug_assert!(retry.fruitless_oom_passes <= MAX_FRUITLESS_OOM_PASSES);
            if stocking && stocks.consume(cg, nr_pages) {
                return Ok(());
            }
            let Err(over) = self.charge_batch(cg, batch, nr_pages, gfp) else {
                return Ok(());
            };
            // A batch that does not fit is retried as the charge alone.
            if batch > nr_pages {
                batch = nr_pages;
                continue;
            }
            match self.charge_refused(cg, &over, nr_pages, gfp, &mut retry) {
                Refused::Retry => continue,
                Refused::Forced => return Ok(()),
                Refused::Fail => return Err(self.nomem(&over)),
            }
        }
    }

    /// One try of `batch` pages for a charge of `nr_pages`: on success the
    /// surplus goes to the stock and memory.high's work is done (now, or on
    /// the way back to user space: `entry.rs`); on failure, the memory
    /// cgroup whose limit refused it.
    fn charge_batch(
        &self,
        cg: &Arc<MemCgroup>,
        batch: u64,
        nr_pages: u64,
        gfp: Gfp,
    ) -> Result<(), Arc<MemCgroup>> {
        if let Err(counter) = cg.memory().try_charge(batch) {
            let over = owner_of_counter(cg, counter, |c| c.memory());
            debug_assert!(Arc::ptr_eq(cg, &over) || cg.ancestors().any(|a| Arc::ptr_eq(a, &over)));
            return Err(over);
        }
        if batch > nr_pages {
            // Less than a batch is left over for the stock.
            debug_assert!(batch - nr_pages < MEMCG_CHARGE_BATCH);
            self.stocks().refill(cg, batch - nr_pages);
        }
        self.charged_over_high(cg, batch, gfp);
        // A charge that may not reclaim is made under locks reclaim
        // takes: it leaves kswapd to the next one.
        if gfp == Gfp::Kernel {
            self.wake_kswapd_if_low();
        }
        Ok(())
    }

    /// What a charge of `nr_pages` refused by `over`'s limit does next, as
    /// `try_charge_memcg` decides: force it through (`PF_MEMALLOC`), fail
    /// (no reclaim allowed, or retries and OOM kills spent), or retry
    /// after reclaim, a drain of the stocks or an OOM kill. The root's
    /// counter is the machine: running out of it is the page allocator's
    /// business (global reclaim, then the global OOM killer), with no
    /// memory cgroup events.
    fn charge_refused(
        &self,
        cg: &Arc<MemCgroup>,
        over: &Arc<MemCgroup>,
        nr_pages: u64,
        gfp: Gfp,
        retry: &mut ChargeRetry,
    ) -> Refused {
        let global = over.is_root();
        if gfp == Gfp::MemAlloc {
            if !global {
                over.memory_event(MemcgEvent::Max);
            }
            cg.memory().charge(nr_pages);
            return Refused::Forced;
        }
        if gfp == Gfp::NoReclaim {
            return Refused::Fail;
        }
        if !global {
            over.memory_event(MemcgEvent::Max);
        }
        let reclaimed = {
            let _stall = self.memstall(true);
            self.reclaim_memcg(over, nr_pages, ReclaimOptions::default())
        };
        if global && reclaimed > 0 {
            self.note_direct_reclaim_progress();
        }
        if over.memory().margin() >= nr_pages {
            return Refused::Retry;
        }
        if !retry.drained {
            // Pages stocked for the subtree may be what is missing.
            self.drain_all_stock(over);
            retry.drained = true;
            return Refused::Retry;
        }
        if gfp == Gfp::NoRetry {
            return Refused::Fail;
        }
        if (reclaimed > 0 && nr_pages <= COSTLY_PAGES) || retry.spend_retry() {
            return Refused::Retry;
        }
        self.charge_oom(over, nr_pages, retry)
    }

    /// The OOM step of a refused charge, once reclaim retries are spent: a
    /// task the OOM killer chose stops retrying (`task_is_dying`); else up
    /// to [`MAX_FRUITLESS_OOM_PASSES`] kills that free nothing, each
    /// followed by a fresh set of reclaim retries.
    fn charge_oom(&self, over: &Arc<MemCgroup>, nr_pages: u64, retry: &mut ChargeRetry) -> Refused {
        if retry.passed_oom && self.oom_handler().current_is_dying() {
            return Refused::Fail;
        }
        if retry.fruitless_oom_passes >= MAX_FRUITLESS_OOM_PASSES {
            return Refused::Fail;
        }
        let usage = over.memory().usage();
        if !self.mem_cgroup_oom(over, nr_pages) {
            return Refused::Fail;
        }
        retry.fruitless_oom_passes = if over.memory().usage() < usage {
            0
        } else {
            retry.fruitless_oom_passes + 1
        };
        retry.passed_oom = true;
        retry.retries = MAX_RECLAIM_RETRIES;
        Refused::Retry
    }

    /// The error of a charge refused by `over`'s limit.
    fn nomem(&self, over: &MemCgroup) -> ChargeError {
        if over.is_root() {
            ChargeError::MachineOutOfMemory {
                total_pages: self.machine_pages(),
            }
        } else {
            ChargeError::OutOfMemory { path: over.path() }
        }
    }

    /// The OOM path of a charge of `nr_pages` (`mem_cgroup_oom`, or the
    /// page allocator's `out_of_memory` at the root): a charge above
    /// `PAGE_ALLOC_COSTLY_ORDER` (more than 8 pages) fails without an
    /// `oom` event or a kill; a smaller one raises `oom` (not at the
    /// root), then [`CgroupTree::out_of_memory`] decides. `true` means
    /// "try again".
    fn mem_cgroup_oom(&self, cg: &Arc<MemCgroup>, nr_pages: u64) -> bool {
        if nr_pages > COSTLY_PAGES {
            return false;
        }
        if !cg.is_root() {
            cg.memory_event(MemcgEvent::Oom);
        }
        self.out_of_memory(cg, nr_pages)
    }

    /// `mem_cgroup_out_of_memory`: if the margin came back meanwhile,
    /// nothing is killed and the caller retries; so does a charging task
    /// that is itself dying (`task_is_dying()`: it frees its memory as it
    /// exits); else the OOM hook is asked for a victim. `true` if there is
    /// reason to try again.
    fn out_of_memory(&self, cg: &Arc<MemCgroup>, nr_pages: u64) -> bool {
        // `1 << order` of the allocation: the charge rounded up to a power
        // of two.
        if cg.memory().margin() >= nr_pages.next_power_of_two() {
            return true;
        }
        let oom = self.oom_handler();
        if oom.current_is_dying() {
            return true;
        }
        match oom.kill(cg) {
            OomOutcome::Killed(killed) => {
                for victim in &killed {
                    victim.memory_event(MemcgEvent::OomKill);
                }
                true
            }
            // An earlier victim still exiting: wait for it, kill no one.
            OomOutcome::VictimExiting => true,
            OomOutcome::NoVictim => false,
        }
    }

    /// The memory cgroup whose tasks all die with an OOM victim in
    /// `victim` for an OOM in `oom_domain`'s subtree
    /// (`mem_cgroup_get_oom_group`): the highest ancestor of `victim`, up
    /// to `oom_domain`, with `memory.oom.group` set; none for a global OOM
    /// of a task in the root, when no level has it set, or when the victim
    /// is not under `oom_domain` (it moved meanwhile: better not to kill
    /// outside the domain). Raises `oom_group_kill` there.
    pub fn oom_group(
        &self,
        victim: &Arc<MemCgroup>,
        oom_domain: &MemCgroup,
    ) -> Option<Arc<MemCgroup>> {
        let chain = || std::iter::once(victim).chain(victim.ancestors());
        if victim.is_root() || !chain().any(|m| std::ptr::eq(&**m, oom_domain)) {
            return None;
        }
        let mut group = None;
        for m in chain() {
            // The root has no `memory.oom.group`.
            if m.oom_group() && !m.is_root() {
                group = Some(Arc::clone(m));
            }
            if std::ptr::eq(&**m, oom_domain) {
                break;
            }
        }
        if let Some(g) = &group {
            g.memory_event(MemcgEvent::OomGroupKill);
        }
        group
    }

    /// `mem_cgroup_handle_over_high` for `nr_pages` charged over high,
    /// on the way back to user space or inside a system call that charged
    /// more than a batch over high (`entry.rs`): if any level is above
    /// its `memory.high` or `memory.swap.high`, reclaim every level above
    /// `memory.high` (`reclaim_high`, raising `high` there), then throttle:
    /// the penalty grows with the square of the worst overage
    /// ([`calculate_high_delay`]); while reclaim makes progress (or 16
    /// fruitless retries remain) reclaim again instead; else sleep the
    /// penalty, at most 2 s, on the tree's clock. Levels over
    /// `memory.swap.high` raise swap `high` each time they are weighed.
    pub(super) fn handle_over_high(&self, charged: &Arc<MemCgroup>, nr_pages: u64) {
        let over_high = std::iter::once(charged)
            .chain(charged.ancestors())
            .any(|c| c.memory().usage() > c.memory().high() || c.swap().usage() > c.swap().high());
        if !over_high {
            return;
        }
        // The work falls on the charging task's own memory cgroup
        // (`get_mem_cgroup_from_mm(current->mm)`), which differs from the
        // charged one when a swap-in is charged to the page's owner; a
        // charge with no task (a direct charge) works on the charged one.
        let current = self
            .task_hooks()
            .current_cgroup()
            .map(|c| c.effective_memcg());
        let cg = current.as_ref().unwrap_or(charged);
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut in_retry = false;
        loop {
            if self.oom_handler().current_is_dying() {
                return;
            }
            let goal = if in_retry {
                crate::mm_types::SWAP_CLUSTER_MAX
            } else {
                nr_pages
            };
            let nr_reclaimed = self.reclaim_high(cg, goal);
            let penalty = (calculate_high_delay(nr_pages, mem_find_max_overage(cg))
                + calculate_high_delay(nr_pages, swap_find_max_overage(cg)))
            .min(MEMCG_MAX_HIGH_DELAY_JIFFIES);
            debug_assert!(retries <= MAX_RECLAIM_RETRIES);
            if penalty <= HZ / 100 {
                return;
            }
            if nr_reclaimed > 0 {
                in_retry = true;
                continue;
            }
            if retries > 0 {
                retries -= 1;
                in_retry = true;
                continue;
            }
            let _stall = self.memstall(false);
            self.clock().sleep(jiffies(penalty));
            return;
        }
    }

    /// `reclaim_high`: every level from `cg` up (below the root) that is
    /// above its `memory.high` raises `high` and is reclaimed by `nr_pages`.
    fn reclaim_high(&self, cg: &Arc<MemCgroup>, nr_pages: u64) -> u64 {
        let mut nr_reclaimed = 0;
        for c in std::iter::once(cg).chain(cg.ancestors()) {
            if c.is_root() {
                break;
            }
            if c.memory().usage() <= c.memory().high() {
                continue;
            }
            c.memory_event(MemcgEvent::High);
            let _stall = self.memstall(true);
            nr_reclaimed += self.reclaim_memcg(c, nr_pages, ReclaimOptions::default());
        }
        nr_reclaimed
    }

    /// Writes `memory.max` (`memory_max_write`): the limit is set even below
    /// usage, then reclaim works towards it; when reclaim cannot, `oom` is
    /// raised and the OOM handler asked, as the kernel does. Returns whether
    /// usage ended at or below the limit.
    pub fn set_memory_max(&self, cg: &Arc<MemCgroup>, nr_pages: u64) -> bool {
        cg.memory().force_max(nr_pages);
        let mut reclaims = MAX_RECLAIM_RETRIES;
        let mut fruitless_oom_passes = 0;
        let mut drained = false;
        loop {
            let usage = cg.memory().usage();
            if usage <= nr_pages {
                return true;
            }
            if !drained {
                self.drain_all_stock(cg);
                drained = true;
                continue;
            }
            if reclaims > 0 {
                if self.reclaim_memcg(cg, usage - nr_pages, ReclaimOptions::default()) == 0 {
                    reclaims -= 1;
                }
                continue;
            }
            cg.memory_event(MemcgEvent::Oom);
            if fruitless_oom_passes >= MAX_FRUITLESS_OOM_PASSES || !self.out_of_memory(cg, 1) {
                return false;
            }
            if cg.memory().usage() < usage {
                fruitless_oom_passes = 0;
            } else {
                fruitless_oom_passes += 1;
            }
        }
    }

    /// Writes `memory.reclaim` (`memory_reclaim`): reclaims `nr_pages`
    /// from `cg`'s subtree in batches of a quarter of what is left, failing
    /// with `EAGAIN` once `MAX_RECLAIM_RETRIES` (16) batches in a row freed
    /// nothing. `swappiness` (0..=200) overrides `vm.swappiness` for this
    /// reclaim.
    pub(crate) fn reclaim_proactive(
        &self,
        cg: &Arc<MemCgroup>,
        nr_pages: u64,
        swappiness: Option<u32>,
    ) -> Result<(), Errno> {
        let opts = ReclaimOptions {
            may_swap: true,
            proactive: true,
            swappiness,
            kswapd: false,
        };
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut reclaimed_total = 0;
        while reclaimed_total < nr_pages {
            let batch = (nr_pages - reclaimed_total) / 4;
            debug_assert!(batch < nr_pages - reclaimed_total || batch == 0);
            let reclaimed = self.reclaim_memcg(cg, batch, opts);
            if reclaimed == 0 {
                if retries == 0 {
                    return Err(Errno::EAGAIN);
                }
                retries -= 1;
            }
            reclaimed_total += reclaimed;
        }
        debug_assert!(reclaimed_total >= nr_pages);
        Ok(())
    }

    /// Writes `memory.high` (`memory_high_write`): sets the threshold, then
    /// reclaims towards it until reclaim stops making progress. No events.
    pub(crate) fn set_memory_high(&self, cg: &Arc<MemCgroup>, nr_pages: u64) {
        cg.memory().set_high(nr_pages);
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        loop {
            let usage = cg.memory().usage();
            if usage <= nr_pages {
                return;
            }
            if !drained {
                self.drain_all_stock(cg);
                drained = true;
                continue;
            }
            if self.reclaim_memcg(cg, usage - nr_pages, ReclaimOptions::default()) == 0 {
                if retries == 0 {
                    return;
                }
                retries -= 1;
            }
        }
    }
}

/// What is left of one charge's retries (`try_charge_memcg`'s locals).
struct ChargeRetry {
    /// Reclaim retries before the OOM killer.
    retries: u32,
    /// Whether the stocks were drained for it.
    drained: bool,
    /// OOM kills in a row that freed nothing.
    fruitless_oom_passes: u32,
    /// Whether it went through the OOM killer.
    passed_oom: bool,
}

impl Default for ChargeRetry {
    fn default() -> Self {
        Self {
            retries: MAX_RECLAIM_RETRIES,
            drained: false,
            fruitless_oom_passes: 0,
            passed_oom: false,
        }
    }
}

impl ChargeRetry {
    /// Spends one reclaim retry; false when none is left.
    fn spend_retry(&mut self) -> bool {
        let left = self.retries > 0;
        self.retries = self.retries.saturating_sub(1);
        left
    }
}

/// What a refused charge does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// Try the charge again.
    Retry,
    /// Forced through the limit (`PF_MEMALLOC`): charged.
    Forced,
    /// Give up: `ENOMEM`.
    Fail,
}

/// The longest one throttle sleeps (`MEMCG_MAX_HIGH_DELAY_JIFFIES`).
pub(super) const MEMCG_MAX_HIGH_DELAY_JIFFIES: u64 = 2 * HZ;

/// `MEMCG_DELAY_PRECISION_SHIFT`: overages are in 1/2^20 of `high`.
const MEMCG_DELAY_PRECISION_SHIFT: u32 = 20;

/// `MEMCG_DELAY_SCALING_SHIFT`: how gently the penalty starts.
const MEMCG_DELAY_SCALING_SHIFT: u32 = 14;

/// `calculate_high_delay`: the jiffies a task that charged `nr_pages`
/// sleeps for an overage of `max_overage` (from `calculate_overage`):
/// `overage^2 * HZ`, scaled down by 2^34, times `nr_pages / 64`. Not yet
/// capped at [`MEMCG_MAX_HIGH_DELAY_JIFFIES`].
pub(super) fn calculate_high_delay(nr_pages: u64, max_overage: u64) -> u64 {
    if max_overage == 0 {
        return 0;
    }
    let squared = u128::from(max_overage) * u128::from(max_overage) * u128::from(HZ);
    let penalty = (squared >> MEMCG_DELAY_PRECISION_SHIFT) >> MEMCG_DELAY_SCALING_SHIFT;
    u64::try_from(penalty * u128::from(nr_pages) / u128::from(MEMCG_CHARGE_BATCH))
        .unwrap_or(u64::MAX)
}

/// `mem_find_max_overage`: the worst memory overage from `cg` up.
fn mem_find_max_overage(cg: &MemCgroup) -> u64 {
    cg.self_and_ancestors()
        .take_while(|c| !c.is_root())
        .map(|c| calculate_overage(c.memory().usage(), c.memory().high()))
        .max()
        .unwrap_or(0)
}

/// `swap_find_max_overage`: the worst swap overage from `cg` up; every
/// level over its `memory.swap.high` raises swap `high`.
fn swap_find_max_overage(cg: &MemCgroup) -> u64 {
    let mut max = 0;
    for c in cg.self_and_ancestors().take_while(|c| !c.is_root()) {
        let overage = calculate_overage(c.swap().usage(), c.swap().high());
        if overage > 0 {
            c.memory_event(MemcgEvent::SwapHigh);
        }
        max = max.max(overage);
    }
    max
}

/// `calculate_overage`: how far `usage` is over `high`, in 1/2^20 of
/// `high` (0 when not over, or over by too little to show).
fn calculate_overage(usage: u64, high: u64) -> u64 {
    if usage <= high {
        return 0;
    }
    let over = u128::from(usage - high) << 20;
    let overage = u64::try_from(over / u128::from(high.max(1))).unwrap_or(u64::MAX);
    // Over by at least 1/2^20 of high, or by any page when high is 0.
    debug_assert!(overage > 0 || (high > 0 && (usage - high) << 20 < high));
    overage
}

/// The kernel's own pages come out of the machine: the root's counter,
/// and bytes from the machine's frames.
impl MachinePages for CgroupTree {
    fn take_page(&self) -> Option<PageBuf> {
        self.charge_kernel_reclaim(1).ok()?;
        Some(self.alloc_pages(1, false))
    }

    fn give_back_page(&self, page: PageBuf) {
        self.free_pages(page);
        self.uncharge_kernel(1);
    }
}

/// The ancestor-or-self of `cg` whose counter (picked by `which`) is
/// `counter`.
pub(super) fn owner_of_counter(
    cg: &Arc<MemCgroup>,
    counter: &PageCounter,
    which: fn(&MemCgroup) -> &PageCounter,
) -> Arc<MemCgroup> {
    let owner = std::iter::once(cg)
        .chain(cg.ancestors())
        .find(|c| std::ptr::eq(which(c), counter))
        .cloned()
        .expect("the refusing counter is on the cgroup's chain");
    debug_assert!(std::ptr::eq(which(&owner), counter));
    owner
}

impl fmt::Debug for Accounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Accounting")
            .field("memory", &self.memory)
            .field("swap", &self.swap)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::{Clock, VirtualClock};
    use crate::memcontrol::test_tree;
    use crate::memcontrol::{MemcgReclaim, OomHandler};
    use crate::swap_cgroup::{Design, SwapCgroup};
    use crate::swapops::SwapEntry;
    use std::time::Duration;

    fn tree() -> CgroupTree {
        test_tree(1, 64)
    }

    #[test]
    fn charges_count_up_the_hierarchy_and_balance() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
        t.try_charge(&b, 10, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.try_charge(&a, 5, ChargeKind::File, Gfp::Kernel).unwrap();
        assert_eq!((a.memory().usage(), b.memory().usage()), (15, 10));
        assert_eq!(t.root().memory().usage(), 15);
        assert_eq!((a.stat(MemcgStat::Anon), a.stat(MemcgStat::File)), (10, 5));
        t.uncharge(&b, 10, ChargeKind::Anon);
        t.uncharge(&a, 5, ChargeKind::File);
        for c in [&a, &b, t.root()] {
            assert_eq!(c.memory().usage(), 0);
            assert_eq!(c.stat(MemcgStat::Anon), 0);
        }
        assert_eq!(a.memory().watermark(), 15);
    }

    #[test]
    fn over_max_fails_with_max_and_oom_events_up_the_hierarchy() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
        a.memory().set_max(8).unwrap();
        t.try_charge(&b, 6, ChargeKind::Anon, Gfp::Kernel).unwrap();
        let err = t
            .try_charge(&b, 3, ChargeKind::Anon, Gfp::Kernel)
            .unwrap_err();
        assert_eq!(err, ChargeError::OutOfMemory { path: "/a".into() });
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert_eq!(b.memory().usage(), 6, "nothing stays charged");
        // max and oom are raised on /a, the cgroup over its limit.
        assert!(a.event_local(MemcgEvent::Max) > 0);
        assert_eq!(a.event_local(MemcgEvent::Oom), 1);
        assert_eq!((b.event(MemcgEvent::Max), b.event(MemcgEvent::Oom)), (0, 0));
        assert_eq!(a.event(MemcgEvent::Oom), 1);
        assert_eq!(
            t.root().event(MemcgEvent::Oom),
            0,
            "the root keeps no events"
        );
    }

    struct KillOnce(std::sync::Mutex<Option<(CgroupTree, Arc<MemCgroup>, u64)>>);

    impl OomHandler for KillOnce {
        fn kill(&self, _: &Arc<MemCgroup>) -> OomOutcome {
            let Some((t, victim, pages)) = self.0.lock().unwrap().take() else {
                return OomOutcome::NoVictim;
            };
            t.uncharge(&victim, pages, ChargeKind::Anon);
            OomOutcome::Killed(vec![victim])
        }
    }

    #[test]
    fn an_oom_kill_frees_memory_and_the_charge_succeeds() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let v = t.mkdir("/a/victim").unwrap().memcg().unwrap();
        a.memory().set_max(10).unwrap();
        t.try_charge(&v, 8, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.set_oom_handler(Arc::new(KillOnce(std::sync::Mutex::new(Some((
            t.clone(),
            Arc::clone(&v),
            8,
        ))))));
        t.try_charge(&a, 5, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(v.event(MemcgEvent::OomKill), 1);
        assert_eq!(a.event(MemcgEvent::OomKill), 1, "hierarchical");
        assert_eq!(a.event_local(MemcgEvent::OomKill), 0);
        assert_eq!(a.memory().usage(), 5);
    }

    /// Kills one page of `victim` on every `every`th kill; `NoVictim` once
    /// it has nothing left.
    struct KillSlowly {
        tree: CgroupTree,
        victim: Arc<MemCgroup>,
        every: u64,
        kills: AtomicU64,
    }

    impl OomHandler for KillSlowly {
        fn kill(&self, _: &Arc<MemCgroup>) -> OomOutcome {
            if self.victim.memory().usage() == 0 {
                return OomOutcome::NoVictim;
            }
            let n = self.kills.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(self.every) {
                self.tree.uncharge(&self.victim, 1, ChargeKind::Anon);
            }
            OomOutcome::Killed(vec![Arc::clone(&self.victim)])
        }
    }

    /// v6.14's `try_charge_memcg` retries for as long as the OOM killer
    /// acts: 24 kills, every third freeing a page, make room for 8 pages.
    /// Only kills that free nothing, 16 in a row, end a charge (and a
    /// `memory.max` write).
    #[test]
    fn oom_kills_go_on_while_they_free_memory() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let v = t.mkdir("/a/victim").unwrap().memcg().unwrap();
        a.memory().set_max(16).unwrap();
        t.try_charge(&v, 16, ChargeKind::Anon, Gfp::Kernel).unwrap();
        let killer = |every| {
            Arc::new(KillSlowly {
                tree: t.clone(),
                victim: Arc::clone(&v),
                every,
                kills: AtomicU64::new(0),
            })
        };
        let slow = killer(3);
        t.set_oom_handler(slow.clone());
        t.try_charge(&a, 8, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert_eq!(slow.kills.load(Ordering::Relaxed), 24);
        assert_eq!(v.event(MemcgEvent::OomKill), 24);
        // Kills that never free: the charge gives up after 16.
        let never = killer(u64::MAX);
        t.set_oom_handler(never.clone());
        assert!(t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).is_err());
        assert_eq!(never.kills.load(Ordering::Relaxed), 16);
        assert!(!t.set_memory_max(&a, 4));
        assert_eq!(never.kills.load(Ordering::Relaxed), 32);
        // memory.max written below usage kills while kills free pages.
        t.set_oom_handler(killer(2));
        assert!(t.set_memory_max(&a, 12));
        assert_eq!(v.memory().usage(), 4);
        t.uncharge(&a, 8, ChargeKind::Anon);
        t.uncharge(&v, 4, ChargeKind::Anon);
    }

    /// `mem_cgroup_get_oom_group`: the highest `memory.oom.group` from the
    /// victim up to the OOM domain, none if the victim is not under the
    /// domain (it moved).
    #[test]
    fn the_oom_group_is_found_only_under_the_oom_domain() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let v = t.mkdir("/a/v").unwrap().memcg().unwrap();
        let b = t.mkdir("/b").unwrap().memcg().unwrap();
        a.set_oom_group(true);
        assert!(Arc::ptr_eq(&t.oom_group(&v, &a).unwrap(), &a));
        assert!(Arc::ptr_eq(&t.oom_group(&v, t.root()).unwrap(), &a));
        assert!(t.oom_group(&v, &v).is_none(), "a is above the domain");
        assert!(t.oom_group(&v, &b).is_none(), "not under the domain");
        assert_eq!(a.event(MemcgEvent::OomGroupKill), 2);
    }

    #[test]
    fn the_oom_killer_rechecks_the_margin_of_the_rounded_order() {
        struct CountKills(AtomicU64);
        impl OomHandler for CountKills {
            fn kill(&self, _: &Arc<MemCgroup>) -> OomOutcome {
                self.0.fetch_add(1, Ordering::Relaxed);
                OomOutcome::NoVictim
            }
        }
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.memory().set_max(10).unwrap();
        let kills = Arc::new(CountKills(AtomicU64::new(0)));
        t.set_oom_handler(kills.clone());
        t.try_charge(&a, 6, ChargeKind::Anon, Gfp::Kernel).unwrap();
        // Margin 4: a charge of 3 is an order-2 allocation (4 pages), so
        // the margin came back and no one is killed; the caller retries.
        assert!(t.out_of_memory(&a, 3));
        assert!(t.out_of_memory(&a, 4));
        assert_eq!(kills.0.load(Ordering::Relaxed), 0);
        // Margin 3: not enough for order 2 any more; the killer is asked.
        t.try_charge(&a, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert!(!t.out_of_memory(&a, 3), "no victim: give up");
        assert_eq!(kills.0.load(Ordering::Relaxed), 1);
        t.uncharge(&a, 7, ChargeKind::Anon);
    }

    #[test]
    fn high_raises_events_and_asks_for_reclaim() {
        struct Count(AtomicU64);
        impl MemcgReclaim for Count {
            fn reclaim(&self, _: &Arc<MemCgroup>, n: u64, _: ReclaimOptions) -> u64 {
                self.0.fetch_add(n, Ordering::Relaxed);
                0
            }
        }
        let t = tree();
        let clock = Arc::new(VirtualClock::default());
        t.set_clock(clock.clone());
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let asked = Arc::new(Count(AtomicU64::new(0)));
        t.set_reclaimer(asked.clone());
        a.memory().set_high(4);
        t.try_charge(&a, 6, ChargeKind::Anon, Gfp::Kernel).unwrap();
        // Reclaim the charge's 6 pages, then (nothing reclaimed, the
        // penalty large) 16 retries of 32, then sleep the penalty:
        // overage 2/4 of high → (2^19)^2 * HZ >> 34 = 16000 jiffies for 64
        // pages, 1500 for 6.
        assert_eq!(a.event(MemcgEvent::High), 17);
        assert_eq!(asked.0.load(Ordering::Relaxed), 6 + 16 * 32);
        assert_eq!(clock.now(), Duration::from_millis(1500));
        t.uncharge(&a, 6, ChargeKind::Anon);
    }

    /// The table in mm/memcontrol.c's comment above `calculate_high_delay`
    /// (memory.high 100M, a 64-page charge, HZ 1000).
    #[test]
    fn the_throttle_follows_the_kernels_table() {
        let high = 100 << 8;
        let delay = |usage_mb: u64| {
            calculate_high_delay(MEMCG_CHARGE_BATCH, calculate_overage(usage_mb << 8, high))
                .min(MEMCG_MAX_HIGH_DELAY_JIFFIES)
        };
        assert_eq!(delay(100), 0);
        assert_eq!(delay(101), 6);
        assert_eq!(delay(102), 25);
        assert_eq!(delay(105), 159);
        assert_eq!(delay(110), 639);
        assert_eq!(delay(115), 1439);
        assert_eq!(delay(118), 2000);
        assert_eq!(delay(200), 2000);
        // A 16-page charge weighs a quarter of a 64-page one.
        let overage = calculate_overage(110 << 8, high);
        assert_eq!(calculate_high_delay(16, overage), 639 / 4);
    }

    #[test]
    fn memory_max_below_usage_is_accepted_and_raises_oom() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        t.try_charge(&a, 10, ChargeKind::File, Gfp::Kernel).unwrap();
        assert!(
            a.memory().set_max(5).is_err(),
            "the counter alone refuses (EBUSY)"
        );
        assert!(
            !t.set_memory_max(&a, 5),
            "the file accepts it; nothing reclaimable"
        );
        assert_eq!(a.memory().max(), 5);
        assert_eq!(a.event(MemcgEvent::Oom), 1);
    }

    #[test]
    fn swap_high_is_raised_by_the_next_memory_charge_at_every_level() {
        let t = tree();
        let sc = SwapCgroup::new(Design::Memcg);
        sc.swapon(0, 64).unwrap();
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        p.swap().set_high(1);
        c.swap().set_high(1);
        t.swapout_charge(&c, &sc, SwapEntry::new(0, 0).unwrap(), 4)
            .unwrap();
        assert_eq!(p.event(MemcgEvent::SwapHigh), 0, "never from swap-out (F5)");
        let clock = Arc::new(VirtualClock::default());
        t.set_clock(clock.clone());
        t.try_charge(&c, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        // Weighed once per throttle round: the first, 16 fruitless retries
        // (nothing is reclaimable), then the 2 s sleep.
        assert_eq!(c.event_local(MemcgEvent::SwapHigh), 17);
        assert_eq!(
            p.event_local(MemcgEvent::SwapHigh),
            17,
            "the parent's own swap.high"
        );
        assert_eq!(
            p.event(MemcgEvent::SwapHigh),
            34,
            "and the child's, propagated"
        );
        assert_eq!(clock.now(), Duration::from_secs(2), "the longest sleep");
        assert_eq!(c.event(MemcgEvent::High), 0, "memory.high is not exceeded");
        t.uncharge(&c, 1, ChargeKind::Anon);
        t.swap_uncharge(&sc, SwapEntry::new(0, 0).unwrap(), 4)
            .unwrap();
    }

    #[test]
    fn localevents_keeps_events_where_they_happen() {
        let t = tree();
        t.set_mount_options(crate::memcontrol::MountOptions {
            memory_localevents: true,
            ..Default::default()
        });
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        c.memory().set_max(1).unwrap();
        t.try_charge(&c, 1, ChargeKind::Anon, Gfp::Kernel).unwrap();
        assert!(t.try_charge(&c, 1, ChargeKind::Anon, Gfp::Kernel).is_err());
        assert_eq!(c.event(MemcgEvent::Oom), 1);
        assert_eq!(p.event(MemcgEvent::Oom), 0, "not propagated");
        t.uncharge(&c, 1, ChargeKind::Anon);
    }

    #[test]
    fn costly_charges_fail_without_oom_and_non_blocking_ones_without_events() {
        let t = tree();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.memory().set_max(16).unwrap();
        t.try_charge(&a, 10, ChargeKind::Anon, Gfp::Kernel).unwrap();
        // 9 pages: above PAGE_ALLOC_COSTLY_ORDER, no oom (F3).
        assert!(t.try_charge(&a, 9, ChargeKind::Anon, Gfp::Kernel).is_err());
        assert_eq!(
            (a.event(MemcgEvent::Max), a.event(MemcgEvent::Oom)),
            (18, 0)
        );
        // A non-blocking charge fails at once, without even `max`.
        assert!(
            t.try_charge(&a, 9, ChargeKind::Anon, Gfp::NoReclaim)
                .is_err()
        );
        assert_eq!(a.event(MemcgEvent::Max), 18);
        // 8 pages: the OOM path.
        assert!(t.try_charge(&a, 8, ChargeKind::Anon, Gfp::Kernel).is_err());
        assert_eq!(a.event(MemcgEvent::Oom), 1);
        assert_eq!(a.event(MemcgEvent::OomKill), 0, "nothing to kill");
        t.uncharge(&a, 10, ChargeKind::Anon);
    }

    /// qa minor 9: uncharging more than was charged panicked in debug
    /// builds (`page_counter underflow`). Now it is clamped to what the
    /// cgroup charged, counted, and leaves every other count right.
    #[test]
    fn over_uncharge_is_clamped_counted_and_corrupts_nothing() {
        let t = tree();
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let a = t.mkdir("/p/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/p/b").unwrap().memcg().unwrap();
        t.try_charge(&a, 3, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.try_charge(&b, 5, ChargeKind::Anon, Gfp::Kernel).unwrap();
        t.uncharge(&a, 10, ChargeKind::Anon);
        assert_eq!((a.memory().usage(), a.memory().underflows()), (0, 1));
        assert_eq!(a.stat(MemcgStat::Anon), 0);
        assert_eq!(p.memory().usage(), 5, "b's pages stay on the parent");
        assert_eq!(p.memory().underflows(), 0);
        assert_eq!(p.stat(MemcgStat::Anon), 5, "in pages");
        t.uncharge(&a, 1, ChargeKind::Anon);
        assert_eq!(a.memory().underflows(), 2);
        // The pages' pin went with the last real page: a removed `a` is
        // released at once.
        t.rmdir("/p/a").unwrap();
        drop(a);
        assert_eq!(p.cgroup().nr_dying_subsys_memory(), 0);
        t.uncharge(&b, 5, ChargeKind::Anon);
        assert_eq!(t.root().memory().usage(), 0);
    }
}
