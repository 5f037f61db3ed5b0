//! Reclaim: the scan that frees a memory cgroup's folios, or the
//! machine's (mm/vmscan.c, v6.14, classic LRU: `lru_gen` off).
//!
//! # What it does
//!
//! The lists it scans are `lruvec.rs`'s: every memory cgroup has an
//! inactive and an active list of its anonymous folios and of its page
//! cache. [`try_to_free_mem_cgroup_pages`] frees at least
//! `SWAP_CLUSTER_MAX` pages of a subtree the kernel's way:
//!
//! - priorities 12 down to 0; at each, every memory cgroup of the subtree
//!   (dying ones included) is visited through a cursor shared by all
//!   reclaimers of that subtree (`mem_cgroup_iter`), so concurrent
//!   reclaimers spread over the children; a partial walk stops once the
//!   goal is met;
//! - protection: below `memory.min` a cgroup is skipped, below
//!   `memory.low` too unless nothing else was reclaimable (then `low`
//!   events are raised); scan targets shrink by the protected share;
//! - `get_scan_count`: anon is scanned only when the cgroup may swap
//!   (free slots under every `memory.swap.max`, `may_swap`, and for a
//!   memory cgroup's reclaim swappiness above 0), in proportion to
//!   swappiness and the recorded costs; plenty of inactive page cache and
//!   no refaults trims the cache alone (`cache_trim_mode`), and the
//!   machine's reclaim scans anon alone when page cache and free pages
//!   together are under the high watermark (`file_is_tiny`);
//! - `shrink_lruvec` in 32-page batches: the inactive list's oldest folios
//!   go to their owner's [`Rmap`], which try-locks the mapping (busy:
//!   kept, bits untouched), checks references under that lock (accessed
//!   twice → activated, once → kept for another round, not at all →
//!   reclaimed) and unmaps and swaps out the unreferenced anon, or drops
//!   the unreferenced clean page cache; the active list is aged when the
//!   inactive one is low (`inactive_is_low`);
//! - reclaim never writes a file page (`shrink_folio_list`, memory cgroup
//!   and kswapd alike: our filesystems have no `->writepage`, so even
//!   kswapd's `pageout` would activate): page cache found under writeback,
//!   or unreferenced but dirty, is marked `PG_reclaim` and activated
//!   (`pgactivate`); a batch whose every page was dirty and not queued for
//!   writeback wakes every flusher (`wakeup_flusher_threads`), and the end
//!   of a marked folio's writeback moves it to the inactive list's oldest
//!   end (`folio_rotate_reclaimable`), where the next scan frees it;
//! - when nothing was reclaimed: a full walk, then forced deactivation,
//!   then ignoring `memory.low` (`memcg_low_reclaim`).
//!
//! kswapd's reclaim of the machine (`balance_pgdat`, asked for with
//! `ReclaimOptions::kswapd`) has none of those fallbacks: each pass aims at
//! the high watermark, walks every memory cgroup in full and never takes
//! memory below `memory.low` or `memory.min`.
//!
//! After a memory cgroup's lists, its shrinkers run (`shrinker.rs`; what
//! they free counts as progress for the machine's reclaim only). Shadow
//! entries and refaults are `workingset.rs`'s. Proactive reclaim counts in
//! `pgscan_direct`/`pgsteal_direct`, as v6.14 does; under the 7.3 profile
//! ([`crate::profile::StatLayout::V7_3`]) in `pgscan_proactive`/
//! `pgsteal_proactive`.
//!
//! # Invariants
//!
//! - Every folio a scan isolates goes back to a list (kept, or
//!   activated) or is freed through its owner before the scan of that
//!   batch returns; the lists' own invariants are `lruvec.rs`'s.
//! - A reclaim returns what it freed of its target's subtree; shrinkers'
//!   pages count only for a reclaim of the whole machine.
//!
//! # Locking
//!
//! No lock is held while an [`Rmap`] or a shrinker runs. The lru lock and
//! the per-target reclaim cursor (`mem_cgroup_reclaim_iter`) are leaves,
//! each taken alone (`lruvec.rs`).

use std::collections::HashMap;
use std::sync::Weak;

use crate::clock::Work;
use crate::folio::Folio;
use crate::lruvec::{
    FolioRef, LruList, NR_LRU_LISTS, Rmap, RmapOutcome, lru_note_cost, stat_pages,
};
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgEvent, MemcgStat, ReclaimOptions, VmEvent};
use crate::mm_types::{DEFAULT_SWAPPINESS, MAX_SWAPPINESS, SWAP_CLUSTER_MAX};
use crate::profile::StatLayout;
use crate::shrinker::shrink_slab;
use crate::sync::{Arc, lock};

/// The first (gentlest) scan priority: a list is scanned `size >> priority`
/// at a time (`DEF_PRIORITY`).
pub(crate) const DEF_PRIORITY: u32 = 12;

/// What the swap devices can take (read afresh whenever reclaim weighs
/// anon, as `get_nr_swap_pages` is).
#[derive(Debug, Clone, Copy, Default)]
pub struct SwapSpace {
    /// Free slots on every device (`get_nr_swap_pages`).
    pub free_pages: u64,
    /// Slots of every device (`total_swap_pages`).
    pub total_pages: u64,
}

/// One reclaim's state (`struct scan_control`).
#[derive(Debug)]
struct ScanControl {
    nr_to_reclaim: u64,
    priority: u32,
    may_swap: bool,
    swappiness: u32,
    nr_scanned: u64,
    nr_reclaimed: u64,
    anon_cost: u64,
    file_cost: u64,
    may_deactivate_anon: bool,
    may_deactivate_file: bool,
    cache_trim_mode: bool,
    file_is_tiny: bool,
    force_deactivate: bool,
    skipped_deactivate: bool,
    memcg_low_reclaim: bool,
    memcg_low_skipped: bool,
    memcg_full_walk: bool,
    /// Run by kswapd (`current_is_kswapd()`).
    kswapd: bool,
    /// Proactive (`memory.reclaim`) and counted apart from direct reclaim
    /// (`sc->proactive` with 7.3's `pgscan_proactive`/`pgsteal_proactive`).
    count_proactive: bool,
    /// Pages shrinkers freed since the last flush (`reclaim_state`):
    /// progress only for a root reclaim ([`Reclaim::flush_reclaim_state`]).
    reclaim_state: u64,
}

impl ScanControl {
    /// A reclaim of at least `max(nr_pages, SWAP_CLUSTER_MAX)` pages at
    /// the first priority, nothing done yet.
    fn new(nr_pages: u64, may_swap: bool, swappiness: u32) -> Self {
        Self {
            nr_to_reclaim: nr_pages.max(SWAP_CLUSTER_MAX),
            priority: DEF_PRIORITY,
            may_swap,
            swappiness,
            nr_scanned: 0,
            nr_reclaimed: 0,
            anon_cost: 0,
            file_cost: 0,
            may_deactivate_anon: false,
            may_deactivate_file: false,
            cache_trim_mode: false,
            file_is_tiny: false,
            force_deactivate: false,
            skipped_deactivate: false,
            memcg_low_reclaim: false,
            memcg_low_skipped: false,
            memcg_full_walk: false,
            kswapd: false,
            count_proactive: false,
            reclaim_state: 0,
        }
    }

    fn may_deactivate(&self, file: bool) -> bool {
        if file {
            self.may_deactivate_file
        } else {
            self.may_deactivate_anon
        }
    }
}

/// `get_scan_count`'s choice of what to scan (`enum scan_balance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScanBalance {
    /// Both types, in full (priority 0).
    Equal,
    /// Both types, in proportion `(anon share, denominator)`.
    Fract(u64, u64),
    /// Anon only.
    Anon,
    /// File only.
    File,
    /// Nothing: anon only was asked for and anon cannot be reclaimed.
    Nothing,
}

/// The swappiness `memory.reclaim`'s `swappiness=max` asks for on 7.3
/// (`SWAPPINESS_ANON_ONLY`, one above `MAX_SWAPPINESS`): reclaim anonymous
/// memory only, and nothing when it cannot swap.
pub const SWAPPINESS_ANON_ONLY: u32 = MAX_SWAPPINESS + 1;

/// Reclaim's view of the world: the tree, the subtree and the swap space.
struct Reclaim<'a> {
    tree: &'a CgroupTree,
    target: &'a Arc<MemCgroup>,
    /// A memory cgroup was named as the target (`cgroup_reclaim`: the
    /// kernel's `target_mem_cgroup` is set). False for the machine's own
    /// reclaim (direct reclaim at the root's counter, kswapd), true for
    /// every memory cgroup's, including `memory.reclaim` at the root.
    cgroup_reclaim: bool,
    /// The target is the whole machine (`root_reclaim`: no target, or the
    /// root): what shrinkers free counts as progress.
    root_reclaim: bool,
    subtree: Subtree,
    swap: &'a dyn Fn() -> SwapSpace,
}

/// Frees at least `max(nr_pages, SWAP_CLUSTER_MAX)` pages charged to
/// `target`'s subtree, if it can (`try_to_free_mem_cgroup_pages`);
/// returns the pages reclaimed. `swap` tells the swap space the devices
/// have at the moment; `opts.swappiness` is the swappiness to reclaim
/// with (the machine's reclaimer fills in its `vm.swappiness`; a direct
/// call without one gets [`DEFAULT_SWAPPINESS`]).
///
/// With `opts.kswapd` this is one kswapd run instead (`balance_pgdat`):
/// `target` is the root and `nr_pages` the machine's high watermark;
/// see `Reclaim::balance_pgdat`.
pub fn try_to_free_mem_cgroup_pages(
    tree: &CgroupTree,
    target: &Arc<MemCgroup>,
    nr_pages: u64,
    swap: &dyn Fn() -> SwapSpace,
    opts: ReclaimOptions,
) -> u64 {
    let swappiness = opts.swappiness.unwrap_or(DEFAULT_SWAPPINESS);
    let mut sc = ScanControl::new(nr_pages, opts.may_swap, swappiness);
    sc.kswapd = opts.kswapd;
    sc.count_proactive = opts.proactive && tree.behaviour().stat_layout == StatLayout::V7_3;
    let subtree = Subtree::of(target);
    tree.note_reclaim();
    let r = Reclaim {
        tree,
        target,
        cgroup_reclaim: !target.is_root() || opts.proactive,
        root_reclaim: target.is_root(),
        subtree,
        swap,
    };
    if opts.kswapd {
        debug_assert!(target.is_root(), "kswapd reclaims the machine");
        return r.balance_pgdat(&mut sc);
    }
    r.do_try_to_free_pages(&mut sc)
}

impl Reclaim<'_> {
    /// `do_try_to_free_pages`: priorities 12..=0 until the goal is met;
    /// then, if nothing at all was freed, the fallbacks in turn.
    fn do_try_to_free_pages(&self, sc: &mut ScanControl) -> u64 {
        loop {
            loop {
                sc.nr_scanned = 0;
                self.shrink_node(sc);
                if sc.nr_reclaimed >= sc.nr_to_reclaim || sc.priority == 0 {
                    break;
                }
                sc.priority -= 1;
            }
            self.snapshot_refaults();
            if sc.nr_reclaimed > 0 {
                return sc.nr_reclaimed;
            }
            sc.priority = DEF_PRIORITY;
            if !sc.memcg_full_walk {
                sc.memcg_full_walk = true;
            } else if sc.skipped_deactivate {
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
            } else if sc.memcg_low_skipped {
                sc.force_deactivate = false;
                sc.memcg_low_reclaim = true;
                sc.memcg_low_skipped = false;
            } else {
                return 0;
            }
        }
    }

    /// `balance_pgdat` for the machine's one node, run by kswapd: from
    /// priority 12 down to 1, while the node is not balanced (more than
    /// the high watermark free), age the anon lists and shrink the node
    /// (`kswapd_shrink_node`: a goal of the high watermark, every memory
    /// cgroup visited, none cut short). The priority drops after a pass
    /// that freed nothing or fell short of its goal. Unlike direct
    /// reclaim there are no fallbacks: memory below `memory.low` is never
    /// taken (no `memcg_low_reclaim` pass, so no `low` events), and
    /// neither is memory below `memory.min`. Returns the pages reclaimed.
    fn balance_pgdat(&self, sc: &mut ScanControl) -> u64 {
        let pgdat_balanced = || self.tree.machine_free_pages() > self.tree.watermarks().high_pages;
        sc.priority = DEF_PRIORITY;
        while sc.priority >= 1 && !pgdat_balanced() {
            self.kswapd_age_node();
            let nr_reclaimed = sc.nr_reclaimed;
            let raise_priority = !self.kswapd_shrink_node(sc);
            if raise_priority || sc.nr_reclaimed == nr_reclaimed {
                sc.priority -= 1;
            }
        }
        self.snapshot_refaults();
        sc.nr_reclaimed
    }

    /// `kswapd_age_node`: when swap exists and the machine's inactive anon
    /// list is low, every memory cgroup's active anon list is aged by one
    /// batch.
    fn kswapd_age_node(&self) {
        if (self.swap)().total_pages == 0 || !inactive_is_low(self.target, false) {
            return;
        }
        for memcg in &self.subtree.members {
            self.shrink_active_list(SWAP_CLUSTER_MAX, memcg, LruList::ActiveAnon);
        }
    }

    /// `kswapd_shrink_node`: one pass over the node aiming at the high
    /// watermark (at least `SWAP_CLUSTER_MAX`); true when it scanned or
    /// freed as much as it aimed for.
    fn kswapd_shrink_node(&self, sc: &mut ScanControl) -> bool {
        sc.nr_to_reclaim = self.tree.watermarks().high_pages.max(SWAP_CLUSTER_MAX);
        sc.nr_scanned = 0;
        let nr_reclaimed = sc.nr_reclaimed;
        self.shrink_node(sc);
        sc.nr_scanned.max(sc.nr_reclaimed - nr_reclaimed) >= sc.nr_to_reclaim
    }

    /// `snapshot_refaults`: the target's workingset activations so far,
    /// so the next reclaim sees whether new ones came (a sign the active
    /// lists hold too little and should be deactivated).
    fn snapshot_refaults(&self) {
        let mut cost = lock(&self.target.lruvec().cost);
        cost.refaults_anon = self.target.stat(MemcgStat::WorkingsetActivateAnon);
        cost.refaults_file = self.target.stat(MemcgStat::WorkingsetActivateFile);
    }

    /// `shrink_node` (no compaction, no writeback throttling): prepare,
    /// walk the subtree, then count what shrinkers freed.
    fn shrink_node(&self, sc: &mut ScanControl) {
        self.prepare_scan_control(sc);
        self.shrink_node_memcgs(sc);
        self.flush_reclaim_state(sc);
    }

    /// `flush_reclaim_state`: pages shrinkers freed count as progress only
    /// for a reclaim of the whole machine (`root_reclaim`: kswapd, direct
    /// reclaim at the root's counter, `memory.reclaim` at the root); a
    /// memory cgroup's limit is met by its LRU pages, as slab freed by a
    /// cgroup reclaim may belong to anyone.
    fn flush_reclaim_state(&self, sc: &mut ScanControl) {
        if self.root_reclaim {
            sc.nr_reclaimed += sc.reclaim_state;
            sc.reclaim_state = 0;
        }
    }

    /// `prepare_scan_control`: the target's costs; whether each active
    /// list may be deactivated (refaults came since the last reclaim, its
    /// inactive list is low, or forced); `cache_trim_mode` (plenty of
    /// inactive file and no refaults: trim the cache alone); for the
    /// machine's reclaim, `file_is_tiny`.
    fn prepare_scan_control(&self, sc: &mut ScanControl) {
        let target = self.target;
        let cost = *lock(&target.lruvec().cost);
        sc.anon_cost = cost.anon;
        sc.file_cost = cost.file;
        if sc.force_deactivate {
            sc.may_deactivate_anon = true;
            sc.may_deactivate_file = true;
        } else {
            let refaults_anon = target.stat(MemcgStat::WorkingsetActivateAnon);
            let refaults_file = target.stat(MemcgStat::WorkingsetActivateFile);
            sc.may_deactivate_anon =
                refaults_anon != cost.refaults_anon || inactive_is_low(target, false);
            sc.may_deactivate_file =
                refaults_file != cost.refaults_file || inactive_is_low(target, true);
        }
        let inactive_file = stat_pages(target, MemcgStat::InactiveFile);
        sc.cache_trim_mode = (inactive_file >> sc.priority) > 0 && !sc.may_deactivate_file;
        if !self.cgroup_reclaim {
            let file = inactive_file + stat_pages(target, MemcgStat::ActiveFile);
            let free = self.tree.machine_free_pages();
            let high_wmark = self.tree.watermarks().high_pages;
            let anon = stat_pages(target, MemcgStat::InactiveAnon);
            sc.file_is_tiny =
                file + free <= high_wmark && !sc.may_deactivate_anon && (anon >> sc.priority) > 0;
        }
    }

    /// `shrink_node_memcgs`: every memory cgroup of the subtree through
    /// the shared cursor (a partial walk stops at the goal; a full walk,
    /// kswapd's always, visits all from the top), skipping the protected.
    fn shrink_node_memcgs(&self, sc: &mut ScanControl) {
        let partial = !(sc.kswapd || sc.memcg_full_walk);
        let mut walk = SubtreeWalk::new(self.target, &self.subtree, partial);
        while let Some(memcg) = walk.next() {
            self.tree.note_reclaim_visit();
            self.tree.calculate_protection(Some(self.target), &memcg);
            if self.tree.below_min(self.target, &memcg) {
                continue;
            }
            if self.tree.below_low(self.target, &memcg) {
                if !sc.memcg_low_reclaim {
                    sc.memcg_low_skipped = true;
                    continue;
                }
                memcg.memory_event(MemcgEvent::Low);
            }
            self.shrink_lruvec(&memcg, sc);
            let slab = shrink_slab(self.tree, 0, &memcg, sc.priority);
            sc.reclaim_state += slab.reclaimed_pages;
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
    }

    /// `shrink_lruvec`: scan the four lists in 32-page batches until the
    /// scan targets are spent. Once the goal is met, the type with less
    /// left to scan stops and the other is cut to the share of its target
    /// the first had left, so both types are scanned in the proportion
    /// `get_scan_count` chose (the machine's direct reclaim at the first
    /// priority scans everything: `proportional_reclaim`, never kswapd's).
    /// Then the active anon list is aged if its inactive one is low.
    fn shrink_lruvec(&self, memcg: &Arc<MemCgroup>, sc: &mut ScanControl) {
        let targets = self.get_scan_count(memcg, sc);
        let mut nr = targets;
        let mut nr_reclaimed = 0;
        let proportional = !self.cgroup_reclaim && !sc.kswapd && sc.priority == DEF_PRIORITY;
        while nr[LruList::InactiveAnon as usize] > 0
            || nr[LruList::ActiveFile as usize] > 0
            || nr[LruList::InactiveFile as usize] > 0
        {
            for list in LruList::ALL {
                let left = &mut nr[list as usize];
                if *left > 0 {
                    let nr_to_scan = (*left).min(SWAP_CLUSTER_MAX);
                    *left -= nr_to_scan;
                    nr_reclaimed += self.shrink_list(list, nr_to_scan, memcg, sc);
                }
            }
            if nr_reclaimed < sc.nr_to_reclaim || proportional {
                continue;
            }
            // One nudge towards proportion: the next round finds one type
            // at zero and stops.
            if !scale_remaining_scan(&mut nr, &targets) {
                break;
            }
        }
        sc.nr_reclaimed += nr_reclaimed;
        if (self.swap)().total_pages > 0 && inactive_is_low(memcg, false) {
            self.shrink_active_list(SWAP_CLUSTER_MAX, memcg, LruList::ActiveAnon);
        }
    }

    /// `shrink_list`: an active list is only deactivated when allowed.
    fn shrink_list(
        &self,
        list: LruList,
        nr_to_scan: u64,
        memcg: &Arc<MemCgroup>,
        sc: &mut ScanControl,
    ) -> u64 {
        if list.is_active() {
            if sc.may_deactivate(list.is_file()) {
                self.shrink_active_list(nr_to_scan, memcg, list);
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.shrink_inactive_list(nr_to_scan, memcg, list, sc)
    }

    /// `get_scan_count`: how many pages of each list to scan at this
    /// priority.
    fn get_scan_count(&self, memcg: &MemCgroup, sc: &mut ScanControl) -> [u64; NR_LRU_LISTS] {
        let balance = self.scan_balance(memcg, sc);
        let (min, low) = self.protection(memcg);
        let online = !memcg.is_dying();
        let lruvec = memcg.lruvec();
        // memory.low scaling, with a retry before OOM: the fallback pass
        // that ignores it (`memcg_low_reclaim`) is owed.
        let scale_by_low = (min > 0 || low > 0) && !sc.memcg_low_reclaim && low > min;
        if scale_by_low {
            sc.memcg_low_skipped = true;
        }
        LruList::ALL.map(|list| {
            let size = lruvec.size(list);
            let mut scan = if min > 0 || low > 0 {
                let protection = if scale_by_low { low } else { min };
                let cgroup_size = memcg.memory().usage().max(protection);
                let unprotected = size - mul_div(size, protection, cgroup_size + 1);
                unprotected.max(SWAP_CLUSTER_MAX)
            } else {
                size
            };
            scan >>= sc.priority;
            // A dying memory cgroup is scraped even at low priorities, so
            // that its last pages go and it can be freed.
            if scan == 0 && !online {
                scan = size.min(SWAP_CLUSTER_MAX);
            }
            match balance {
                ScanBalance::Equal => scan,
                ScanBalance::Fract(anon, denominator) => {
                    let share = if list.is_file() {
                        denominator - anon
                    } else {
                        anon
                    };
                    if online {
                        mul_div(scan, share, denominator)
                    } else {
                        mul_div_round_up(scan, share, denominator)
                    }
                }
                ScanBalance::Nothing => 0,
                ScanBalance::Anon if list.is_file() => 0,
                ScanBalance::File if !list.is_file() => 0,
                ScanBalance::Anon | ScanBalance::File => scan,
            }
        })
    }

    /// The first half of `get_scan_count`: which types to scan, and in
    /// what proportion.
    fn scan_balance(&self, memcg: &MemCgroup, sc: &ScanControl) -> ScanBalance {
        let can_swap = sc.may_swap && self.tree.nr_swap_pages(memcg, (self.swap)().free_pages) > 0;
        if sc.swappiness == SWAPPINESS_ANON_ONLY {
            return if can_swap {
                ScanBalance::Anon
            } else {
                ScanBalance::Nothing
            };
        }
        if !can_swap || (self.cgroup_reclaim && sc.swappiness == 0) {
            return ScanBalance::File;
        }
        if sc.priority == 0 && sc.swappiness > 0 {
            return ScanBalance::Equal;
        }
        if sc.file_is_tiny {
            return ScanBalance::Anon;
        }
        if sc.cache_trim_mode {
            return ScanBalance::File;
        }
        let (anon, denominator) = anon_fraction(sc);
        ScanBalance::Fract(anon, denominator)
    }

    /// The memory cgroup whose clock shadows record: the target (for the
    /// machine's reclaim the root: `target_mem_cgroup` NULL resolves to
    /// the root's lruvec).
    fn shadow_target(&self) -> &MemCgroup {
        self.target
    }

    /// `mem_cgroup_protection`: the effective min and low of `memcg` for
    /// this reclaim (none for the target itself).
    fn protection(&self, memcg: &MemCgroup) -> (u64, u64) {
        if std::ptr::eq(memcg, &**self.target) {
            return (0, 0);
        }
        (memcg.memory().emin(), memcg.memory().elow())
    }

    /// `shrink_inactive_list`: isolate, try to reclaim each folio, put the
    /// rest back, count and record the cost.
    fn shrink_inactive_list(
        &self,
        nr_to_scan: u64,
        memcg: &Arc<MemCgroup>,
        list: LruList,
        sc: &mut ScanControl,
    ) -> u64 {
        let lruvec = memcg.lruvec();
        let (isolated, nr_scanned) = lruvec.isolate(memcg, list, nr_to_scan);
        let (pgscan, pgsteal) = if sc.kswapd {
            (VmEvent::PgscanKswapd, VmEvent::PgstealKswapd)
        } else if sc.count_proactive {
            (VmEvent::PgscanProactive, VmEvent::PgstealProactive)
        } else {
            (VmEvent::PgscanDirect, VmEvent::PgstealDirect)
        };
        memcg.count_vm_event(pgscan, nr_scanned);
        sc.nr_scanned += nr_scanned;
        if isolated.is_empty() {
            return 0;
        }
        let nr_taken: u64 = isolated.iter().map(|(f, _)| u64::from(f.nr())).sum();
        let (mut nr_reclaimed, mut nr_unqueued_dirty) = (0, 0);
        let (mut keep, mut activate) = (Vec::new(), Vec::new());
        for (verdict, unqueued_dirty) in shrink_folio_list(isolated, self.shadow_target()) {
            nr_unqueued_dirty += unqueued_dirty;
            match verdict {
                Verdict::Reclaimed(nr) => nr_reclaimed += nr,
                Verdict::Keep(f, r) => keep.push((f, r)),
                Verdict::Activate(f, r) => activate.push((f, r)),
                Verdict::Gone => {}
            }
        }
        let nr_activate: u64 = activate.iter().map(|(f, _)| u64::from(f.nr())).sum();
        memcg.count_vm_event(VmEvent::Pgactivate, nr_activate);
        lruvec.putback(memcg, keep, list);
        let active = LruList::of(list.is_file(), true);
        lruvec.putback(memcg, activate, active);
        memcg.count_vm_event(pgsteal, nr_reclaimed);
        // Anon: every page swapped is I/O; the rest scanned were rotated.
        // File: reclaim writes none (`nr_pageout` 0), only rotations count.
        let nr_rotated = nr_scanned.saturating_sub(nr_reclaimed);
        let nr_io = if list.is_file() { 0 } else { nr_reclaimed };
        lru_note_cost(memcg, list.is_file(), nr_io, nr_rotated);
        // What this took, on a clock that models it (clock.rs).
        let clock = self.tree.clock();
        clock.work(Work::Scanned(nr_scanned));
        if nr_io > 0 {
            clock.work(Work::Written(nr_io));
        }
        // Everything taken was dirty and not queued for writeback: the
        // flushers are behind (or asleep); wake them all.
        if nr_unqueued_dirty == nr_taken {
            crate::page_writeback::wakeup_flusher_threads(self.tree);
        }
        nr_reclaimed
    }

    /// `shrink_active_list`: every isolated folio loses its accessed bit
    /// and moves to the inactive list, marked as having been in the
    /// working set (anon is never kept active for being referenced; only
    /// executable file pages would be, and there are none).
    fn shrink_active_list(&self, nr_to_scan: u64, memcg: &Arc<MemCgroup>, list: LruList) {
        let lruvec = memcg.lruvec();
        let (isolated, nr_scanned) = lruvec.isolate(memcg, list, nr_to_scan);
        memcg.count_vm_event(VmEvent::Pgrefill, nr_scanned);
        let mut nr_deactivate = 0;
        for (folio, _) in &isolated {
            // folio_referenced clears the accessed bit.
            folio.lru().clear_young();
            folio.lru().set_workingset();
            nr_deactivate += u64::from(folio.nr());
        }
        lruvec.putback(memcg, isolated, LruList::of(list.is_file(), false));
        memcg.count_vm_event(VmEvent::Pgdeactivate, nr_deactivate);
    }
}

/// `shrink_lruvec`'s proportional cut once the goal is met: the type with
/// less left stops; the other keeps the share of its target that the
/// first had left, minus what it scanned already. False when one type has
/// nothing left (stop scanning).
fn scale_remaining_scan(nr: &mut [u64; NR_LRU_LISTS], targets: &[u64; NR_LRU_LISTS]) -> bool {
    let (ia, aa) = (LruList::InactiveAnon as usize, LruList::ActiveAnon as usize);
    let (ifl, af) = (LruList::InactiveFile as usize, LruList::ActiveFile as usize);
    let nr_file = nr[ifl] + nr[af];
    let nr_anon = nr[ia] + nr[aa];
    if nr_file == 0 || nr_anon == 0 {
        return false;
    }
    let (stop, keep, percentage) = if nr_file > nr_anon {
        let scan_target = targets[ia] + targets[aa] + 1;
        ((ia, aa), (ifl, af), nr_anon * 100 / scan_target)
    } else {
        let scan_target = targets[ifl] + targets[af] + 1;
        ((ifl, af), (ia, aa), nr_file * 100 / scan_target)
    };
    nr[stop.0] = 0;
    nr[stop.1] = 0;
    for lru in [keep.0, keep.1] {
        let scanned = targets[lru] - nr[lru];
        nr[lru] = targets[lru] * (100 - percentage) / 100;
        nr[lru] -= nr[lru].min(scanned);
    }
    true
}

/// What `shrink_folio_list` made of one folio.
enum Verdict {
    /// Its pages were freed.
    Reclaimed(u64),
    /// Back to the inactive list.
    Keep(Arc<Folio>, Weak<dyn Rmap>),
    /// To the active list (`activate_locked`, counting `pgactivate`).
    Activate(Arc<Folio>, Weak<dyn Rmap>),
    /// Unmapped or truncated meanwhile: dropped.
    Gone,
}

/// `shrink_folio_list`: the isolated folios, each run of one owner's
/// handed to it at once ([`Rmap::reclaim_batch`]); one verdict per folio,
/// in order ([`verdict`]).
fn shrink_folio_list(
    isolated: Vec<(Arc<Folio>, Weak<dyn Rmap>)>,
    target: &MemCgroup,
) -> Vec<(Verdict, u64)> {
    let mut verdicts = Vec::with_capacity(isolated.len());
    let mut rest = isolated.into_iter().peekable();
    while let Some((folio, rmap)) = rest.next() {
        let mut run = vec![folio];
        while let Some((_, next)) = rest.peek()
            && next.ptr_eq(&rmap)
        {
            run.extend(rest.next().map(|(f, _)| f));
        }
        let Some(owner) = rmap.upgrade() else {
            // Its owner is gone: the folios are being freed with it.
            verdicts.extend(run.iter().map(|_| (Verdict::Gone, 0)));
            continue;
        };
        let outcomes = owner.reclaim_batch(run, target, &mut folio_check_references);
        verdicts.extend(outcomes.into_iter().map(|o| verdict(o, &rmap)));
    }
    verdicts
}

/// What reclaim makes of one isolated folio by its owner's outcome: by
/// its references it is activated, kept, or was reclaimed; page cache
/// found dirty or under writeback is marked for immediate reclaim and
/// activated (reclaim never writes file pages: the flusher does, and the
/// end of its writeback rotates the folio back). Also returns the pages
/// found dirty and not queued for writeback (`nr_unqueued_dirty`).
fn verdict(outcome: RmapOutcome, rmap: &Weak<dyn Rmap>) -> (Verdict, u64) {
    let rmap = Weak::clone(rmap);
    let unqueued_dirty = |folio: &Folio| {
        let dirty = folio.is_file() && folio.is_dirty() && !folio.is_writeback();
        if dirty { u64::from(folio.nr()) } else { 0 }
    };
    match outcome {
        RmapOutcome::Reclaimed { nr_pages } => (Verdict::Reclaimed(nr_pages), 0),
        RmapOutcome::Busy(folio) => (Verdict::Keep(folio, rmap), 0),
        RmapOutcome::Referenced(folio, FolioRef::Keep) => {
            let dirty = unqueued_dirty(&folio);
            (Verdict::Keep(folio, rmap), dirty)
        }
        RmapOutcome::Referenced(folio, _) => {
            let dirty = unqueued_dirty(&folio);
            (Verdict::Activate(folio, rmap), dirty)
        }
        RmapOutcome::NoSwap(folio) => (Verdict::Activate(folio, rmap), 0),
        RmapOutcome::Dirty(folio) => {
            folio.lru().set_reclaim();
            let dirty = u64::from(folio.nr());
            (Verdict::Activate(folio, rmap), dirty)
        }
        RmapOutcome::Writeback(folio) => {
            folio.lru().set_reclaim();
            (Verdict::Activate(folio, rmap), 0)
        }
        RmapOutcome::Gone => (Verdict::Gone, 0),
    }
}

/// `folio_check_references`: a folio whose mapping accessed it since the
/// last look is marked referenced and kept for one more round; accessed
/// again while marked, it is activated; not accessed, it is reclaimed
/// (for anon the referenced mark alone does not save it; page cache
/// marked by a `read()` is reclaimed only if clean). Reads and clears the
/// bits: a reclaimer calls it with the folio's owner locked.
pub fn folio_check_references(folio: &Folio) -> FolioRef {
    let lru = folio.lru();
    let referenced_ptes = lru.test_clear_young();
    let referenced_folio = lru.test_clear_referenced();
    if referenced_ptes {
        lru.set_referenced();
        return if referenced_folio {
            FolioRef::Activate
        } else {
            FolioRef::Keep
        };
    }
    if referenced_folio && folio.is_file() {
        return FolioRef::ReclaimClean;
    }
    FolioRef::Reclaim
}

/// `inactive_is_low` on the hierarchical anon or file lists: the inactive
/// list is low when `inactive * sqrt(10 * GiB) < active` (ratio 1 under
/// 1 GiB).
fn inactive_is_low(memcg: &MemCgroup, file: bool) -> bool {
    let inactive = stat_pages(memcg, LruList::of(file, false).stat());
    let active = stat_pages(memcg, LruList::of(file, true).stat());
    let gb = (inactive + active) >> (30 - 12);
    let ratio = if gb > 0 { (10 * gb).isqrt() } else { 1 };
    inactive * ratio < active
}

/// The anon share of a `SCAN_FRACT` scan: `(ap, ap + fp)` from
/// swappiness and the recorded costs.
fn anon_fraction(sc: &ScanControl) -> (u64, u64) {
    let total = sc.anon_cost + sc.file_cost;
    let anon_cost = total + sc.anon_cost;
    let file_cost = total + sc.file_cost;
    let total = anon_cost + file_cost;
    let swappiness = u64::from(sc.swappiness);
    let ap = swappiness * (total + 1) / (anon_cost + 1);
    let fp = (u64::from(MAX_SWAPPINESS) - swappiness) * (total + 1) / (file_cost + 1);
    (ap, ap + fp)
}

/// `a * b / c` without overflow (the kernel's `div64_u64` of a product
/// that fits its 64 bits; ours may not).
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    (u128::from(a) * u128::from(b) / u128::from(c.max(1))) as u64
}

/// `a * b / c` rounded up (`DIV64_U64_ROUND_UP`).
fn mul_div_round_up(a: u64, b: u64, c: u64) -> u64 {
    (u128::from(a) * u128::from(b)).div_ceil(u128::from(c.max(1))) as u64
}

/// A reclaim's view of its subtree: `target` and every memory cgroup below
/// it, online or dying, in pre-order, taken once per reclaim call (the
/// kernel walks the live tree; a cgroup created during one reclaim call is
/// seen by the next).
struct Subtree {
    members: Vec<Arc<MemCgroup>>,
    /// Serial → index, for subtrees too big to search.
    index_of: Option<HashMap<u64, usize>>,
}

impl Subtree {
    fn of(target: &Arc<MemCgroup>) -> Self {
        let members = subtree_pre(target);
        let index_of = (members.len() > 16).then(|| {
            members
                .iter()
                .enumerate()
                .map(|(i, m)| (m.serial(), i))
                .collect()
        });
        Self { members, index_of }
    }

    fn index(&self, serial: u64) -> Option<usize> {
        match &self.index_of {
            Some(map) => map.get(&serial).copied(),
            None => self.members.iter().position(|m| m.serial() == serial),
        }
    }
}

/// `mem_cgroup_iter` over a subtree for reclaim, target first. A partial
/// walk resumes after the position the last reclaimer of this subtree
/// reached and ends at the end of the subtree (or when another walker
/// completed a round); a full walk visits everything from the top.
struct SubtreeWalk<'a> {
    target: &'a MemCgroup,
    subtree: &'a Subtree,
    partial: bool,
    started: Option<u64>,
    next_full: usize,
}

impl<'a> SubtreeWalk<'a> {
    fn new(target: &'a Arc<MemCgroup>, subtree: &'a Subtree, partial: bool) -> Self {
        Self {
            target,
            subtree,
            partial,
            started: None,
            next_full: 0,
        }
    }

    fn next(&mut self) -> Option<Arc<MemCgroup>> {
        let members = &self.subtree.members;
        if !self.partial {
            let m = members.get(self.next_full).cloned();
            self.next_full += 1;
            return m;
        }
        let mut iter = lock(&self.target.lruvec().iter);
        let first = match self.started {
            None => {
                self.started = Some(iter.generation);
                true
            }
            Some(generation) if generation != iter.generation => return None,
            Some(_) => false,
        };
        let after = iter
            .position
            .and_then(|serial| self.subtree.index(serial))
            .map_or(0, |i| i + 1);
        let index = if after < members.len() {
            after
        } else {
            // The end: a round is complete. A walker that just joined
            // starts over from the top rather than seeing nothing.
            iter.generation += 1;
            if !first {
                iter.position = None;
                return None;
            }
            self.started = Some(iter.generation);
            0
        };
        let m = Arc::clone(&members[index]);
        iter.position = Some(m.serial());
        Some(m)
    }
}

/// `drop_slab` (`echo 2 > /proc/sys/vm/drop_caches`): every shrinker on
/// every memory cgroup, the root and dying ones included (a dying one
/// returns at once: its list_lrus went to its parent), at priority 0,
/// round after round while a round frees more than `2 << round` objects.
/// Returns the objects freed.
pub fn drop_slab(tree: &CgroupTree) -> u64 {
    let mut total = 0;
    let mut shift = 0;
    loop {
        let freed: u64 = all_memcgs(tree)
            .iter()
            .map(|memcg| shrink_slab(tree, 0, memcg, 0).freed)
            .sum();
        total += freed;
        if (freed >> shift) <= 1 {
            return total;
        }
        shift += 1;
    }
}

/// Every memory cgroup of `tree`, online or dying, parents before children
/// (`mem_cgroup_iter(NULL, ...)` over the whole hierarchy).
pub(crate) fn all_memcgs(tree: &CgroupTree) -> Vec<Arc<MemCgroup>> {
    subtree_pre(tree.root())
}

/// `target` and every memory cgroup below it, online or dying, parents
/// before children.
///
/// Each memory cgroup appears once, even if it went offline (and moved
/// from its parent's online children to its dying ones) during the walk:
/// the shared reclaim cursor finds a position by serial, and a serial
/// listed twice would send it back forever.
fn subtree_pre(target: &Arc<MemCgroup>) -> Vec<Arc<MemCgroup>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![Arc::clone(target)];
    while let Some(m) = stack.pop() {
        if !seen.insert(m.serial()) {
            continue;
        }
        let children = m.reclaim_children();
        stack.extend(children.into_iter().rev());
        out.push(m);
    }
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lruvec::folio_mark_young;
    use crate::memcontrol::Gfp;

    #[test]
    fn fractions_follow_swappiness_and_costs() {
        let mut sc = ScanControl::new(32, true, 60);
        assert_eq!(anon_fraction(&sc), (60, 200));
        sc.anon_cost = 100;
        // total 100: anon 200, file 100, sum 300 → ap = 60*301/201 = 89,
        // fp = 140*301/101 = 417.
        assert_eq!(anon_fraction(&sc), (89, 89 + 417));
        sc.swappiness = 200;
        assert_eq!(anon_fraction(&sc).0, 299);
    }

    #[test]
    fn the_inactive_ratio_grows_with_the_square_root_of_the_size() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.mod_stat(MemcgStat::InactiveAnon, 100);
        a.mod_stat(MemcgStat::ActiveAnon, 101);
        assert!(inactive_is_low(&a, false), "ratio 1 under 1 GiB");
        a.mod_stat(MemcgStat::ActiveAnon, -1);
        assert!(!inactive_is_low(&a, false));
        // Just under 4 GiB in all: ratio sqrt(10 * 3) = 5.
        let gib = 1 << 18;
        a.mod_stat(MemcgStat::InactiveAnon, gib - 100);
        a.mod_stat(MemcgStat::ActiveAnon, 3 * gib - 100);
        assert!(!inactive_is_low(&a, false), "1 GiB * 5 > 3 GiB");
        a.mod_stat(MemcgStat::InactiveAnon, -(gib / 2));
        assert!(inactive_is_low(&a, false), "0.5 GiB * 5 < 3 GiB");
        a.mod_stat(MemcgStat::InactiveAnon, -(gib / 2));
        a.mod_stat(MemcgStat::ActiveAnon, -(3 * gib));
    }

    #[test]
    fn references_keep_then_activate() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let folio = Folio::new(&t, &a, 1, Gfp::Kernel).unwrap();
        assert_eq!(folio_check_references(&folio), FolioRef::Reclaim);
        folio_mark_young(&folio);
        assert_eq!(folio_check_references(&folio), FolioRef::Keep);
        assert_eq!(
            folio_check_references(&folio),
            FolioRef::Reclaim,
            "a mark alone does not save anon"
        );
        folio_mark_young(&folio);
        assert_eq!(folio_check_references(&folio), FolioRef::Keep);
        folio_mark_young(&folio);
        assert_eq!(folio_check_references(&folio), FolioRef::Activate);
    }
}
