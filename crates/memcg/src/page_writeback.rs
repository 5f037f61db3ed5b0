//! Dirty page cache: the `vm.dirty_*` settings, the dirty limits of the
//! global and the memory cgroup writeback domains, the throttling of tasks
//! that dirty pages, and the check that keeps background writeback going
//! (mm/page-writeback.c, v6.14).
//!
//! # What it does
//!
//! Page cache written and not yet written back is *dirty*. Two kinds of
//! writeback domain bound it (`struct dirty_throttle_control`,
//! [`DirtyDomain`]):
//!
//! - the **global** domain: its dirtyable memory is the machine's free
//!   pages above the reserve (the high watermark, `totalreserve_pages` of a
//!   machine with one zone) plus its page cache
//!   (`global_dirtyable_memory`);
//! - a **memory cgroup**'s domain (cgroup writeback; every memory cgroup
//!   but the root): its page cache plus the smaller of its headroom (under
//!   `memory.max` and `memory.high`, its own and every ancestor's) and the
//!   clean memory the rest of the machine has (`mem_cgroup_wb_stats`,
//!   `mdtc_calc_avail`).
//!
//! Of a domain's dirtyable memory, `vm.dirty_ratio` percent (or
//! `vm.dirty_bytes`) is its dirty threshold and `vm.dirty_background_ratio`
//! percent (or `vm.dirty_background_bytes`) its background threshold; a
//! memory cgroup's domain turns the byte settings into ratios of the
//! global domain's memory, and a background threshold at or above the
//! threshold becomes half of it (`domain_dirty_limits`). The settings are
//! the sysctls, each pair mutually exclusive as the kernel's handlers make
//! them ([`CgroupTree::set_dirty_ratio`] and the rest).
//!
//! A task that dirtied pages calls `balance_dirty_pages_ratelimited`
//! after each page; once it has dirtied its allowance (`nr_dirtied_pause`)
//! it is balanced (`balance_dirty_pages`): below the freerun ceiling
//! (halfway between the background threshold and the threshold) of the
//! global domain and of its memory cgroup's, it goes on and looks again
//! after `dirty_poll_interval` more pages; above it, it wakes background
//! writeback and sleeps, on the tree's clock, a pause that grows as the
//! dirty pages near the threshold (the position ratio of the domain that
//! is worse off), and over the threshold it sleeps again and again until
//! the flusher brings them under. Background writeback, once woken, goes
//! on while either domain is over its background threshold
//! (`wb_over_bg_thresh`).
//!
//! The flushers themselves are the filesystems' (`filemap::writeback`);
//! they register here (`register_flusher`) so that reclaim can wake them
//! all (`wakeup_flusher_threads`) and the shell's simulated clock can
//! run what came due ([`run_due_flushers`]).
//!
//! Simplifications, each a documented deviation from v6.14:
//!
//! - a writeback's write bandwidth and its base dirty rate stay the
//!   kernel's initial estimate (100 MB/s, `INIT_BW`): the writes here
//!   (a RAM disk, a host file) finish at once, so nothing would be
//!   measured; the slow decline of a domain's hard limit
//!   (`dom->dirty_limit`) is not kept, so the hard limit is the threshold;
//! - each writeback of a domain gets the domain's whole threshold (the
//!   kernel shares it out among a domain's writebacks by their recent
//!   writeout, `__wb_calc_thresh`, which with one writeback per domain is
//!   the same);
//! - a task's allowance is per thread (`current`); the per-CPU catch-all
//!   count (`bdp_ratelimits`), the real-time boost and `strictlimit` are
//!   not modelled;
//! - a task over the threshold pauses again only while its writeback's
//!   flusher made progress since its last look: a device whose writes fail
//!   does not hold it forever (the kernel's would sleep until killed).
//!
//! # Invariants
//!
//! - A domain's background threshold is below its threshold unless both
//!   are 0; the threshold fits 32 bits (`UINT_MAX` pages at most).
//! - Exactly one of `dirty_ratio` and `dirty_bytes` is in effect (the
//!   other reads 0), and likewise for the background pair, unless a ratio
//!   was written 0.
//!
//! # Locking
//!
//! The settings sit behind one mutex, held only to read or change them.
//! The registry of flushers has its own mutex, held only to copy the list
//! out: flushers run with no lock of this module held. A task's dirtying
//! state is its thread's own.

use std::cell::Cell;
use std::time::Duration;

use crate::clock::HZ;
use crate::errno::Errno;
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use crate::mm_types::PAGE_SIZE;
use crate::sync::{Arc, lock, thread_local};
use crate::writeback::{DIRTY_BYTES_MIN, DirtySettings, Flusher};

/// A writeback's bandwidth and base dirty rate in pages per second: the
/// kernel's initial estimate, 100 MB/s (`INIT_BW`), kept for good.
pub(crate) const INIT_BW: u64 = (100 << 20) / PAGE_SIZE;
/// Fixed-point shift of position ratios (`RATELIMIT_CALC_SHIFT`).
const RATELIMIT_CALC_SHIFT: u32 = 10;
/// The longest pause, in jiffies (`MAX_PAUSE`: 200 ms).
const MAX_PAUSE: u64 = if HZ / 5 > 1 { HZ / 5 } else { 1 };
/// Pages a task dirties between looks when it was not throttled
/// (`DIRTY_POLL_THRESH`, 128 KiB) and its first allowance.
const DIRTY_POLL_THRESH: u64 = 128 * 1024 / PAGE_SIZE;
/// A task's allowance while its writeback's domain is over its threshold
/// (`32 >> (PAGE_SHIFT - 10)`).
const DIRTY_EXCEEDED_RATELIMIT: u64 = 32 * 1024 / PAGE_SIZE;
/// The largest threshold in pages (`UINT_MAX`).
const MAX_THRESH: u64 = u32::MAX as u64;

/// Registers a filesystem's flusher with its tree, for the wakeups of
/// reclaim and the simulated clock; it stays until dropped.
pub(crate) fn register_flusher(tree: &CgroupTree, flusher: std::sync::Weak<dyn Flusher>) {
    let mut flushers = lock(&tree.writeback().flushers);
    flushers.retain(|f| f.strong_count() > 0);
    flushers.push(flusher);
}

/// The live flushers, copied out.
fn flushers(tree: &CgroupTree) -> Vec<Arc<dyn Flusher>> {
    lock(&tree.writeback().flushers)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect()
}

/// `wakeup_flusher_threads`: every filesystem writes back everything dirty
/// (reclaim found only dirty pages; a new `dirty_writeback_centisecs`).
pub(crate) fn wakeup_flusher_threads(tree: &CgroupTree) {
    for flusher in flushers(tree) {
        flusher.wakeup_all();
    }
}

/// Runs the periodic writeback that came due on the tree's clock, for a
/// caller that moves simulated time on (the shell's `sleep`): with a
/// [`VirtualClock`](crate::clock::VirtualClock) nothing else notices that
/// time passed.
pub fn run_due_flushers(tree: &CgroupTree) {
    let now = tree.clock().now();
    for flusher in flushers(tree) {
        flusher.run_due(now);
    }
}

impl CgroupTree {
    /// The `vm.dirty_*` sysctls.
    pub fn dirty_settings(&self) -> DirtySettings {
        *lock(&self.writeback().settings)
    }

    /// Sets `vm.dirty_ratio` (`dirty_ratio_handler`: an int of 0..=100,
    /// else `EINVAL`); a changed ratio turns `dirty_bytes` off.
    pub fn set_dirty_ratio(&self, ratio: i64) -> Result<(), Errno> {
        let ratio = int_in(ratio, 0, 100)?;
        let mut s = lock(&self.writeback().settings);
        if s.dirty_ratio != ratio {
            s.dirty_ratio = ratio;
            s.dirty_bytes = 0;
        }
        Ok(())
    }

    /// Sets `vm.dirty_bytes` (`dirty_bytes_handler`: at least two pages,
    /// else `EINVAL`; more than `UINT_MAX` pages is `ERANGE`); a changed
    /// value turns `dirty_ratio` off.
    pub fn set_dirty_bytes(&self, bytes: u64) -> Result<(), Errno> {
        if bytes < DIRTY_BYTES_MIN {
            return Err(Errno::EINVAL);
        }
        let mut s = lock(&self.writeback().settings);
        if s.dirty_bytes != bytes {
            if bytes.div_ceil(PAGE_SIZE) > MAX_THRESH {
                return Err(Errno::ERANGE);
            }
            s.dirty_bytes = bytes;
            s.dirty_ratio = 0;
        }
        Ok(())
    }

    /// Sets `vm.dirty_background_ratio` (an int of 0..=100, else
    /// `EINVAL`); any write turns `dirty_background_bytes` off.
    pub fn set_dirty_background_ratio(&self, ratio: i64) -> Result<(), Errno> {
        let ratio = int_in(ratio, 0, 100)?;
        let mut s = lock(&self.writeback().settings);
        s.dirty_background_ratio = ratio;
        s.dirty_background_bytes = 0;
        Ok(())
    }

    /// Sets `vm.dirty_background_bytes` (at least 1, else `EINVAL`; more
    /// than `UINT_MAX` pages is `ERANGE`); any write turns
    /// `dirty_background_ratio` off.
    pub fn set_dirty_background_bytes(&self, bytes: u64) -> Result<(), Errno> {
        if bytes < 1 {
            return Err(Errno::EINVAL);
        }
        if bytes.div_ceil(PAGE_SIZE) > MAX_THRESH {
            return Err(Errno::ERANGE);
        }
        let mut s = lock(&self.writeback().settings);
        s.dirty_background_bytes = bytes;
        s.dirty_background_ratio = 0;
        Ok(())
    }

    /// Sets `vm.dirty_writeback_centisecs` (`proc_dointvec`: any int, else
    /// `EINVAL`; 0 stops periodic writeback). A new non-zero value wakes
    /// every flusher to write everything back
    /// (`dirty_writeback_centisecs_handler`), and the new period takes
    /// effect from their next run.
    pub fn set_dirty_writeback_centisecs(&self, centisecs: i64) -> Result<(), Errno> {
        let centisecs = int_in(centisecs, i32::MIN, i32::MAX)?;
        let changed = {
            let mut s = lock(&self.writeback().settings);
            let old = std::mem::replace(&mut s.dirty_writeback_centisecs, centisecs);
            centisecs != 0 && centisecs != old
        };
        if changed {
            wakeup_flusher_threads(self);
        }
        Ok(())
    }

    /// Sets `vm.dirty_expire_centisecs` (an int of at least 0, else
    /// `EINVAL`).
    pub fn set_dirty_expire_centisecs(&self, centisecs: i64) -> Result<(), Errno> {
        let centisecs = int_in(centisecs, 0, i32::MAX)?;
        lock(&self.writeback().settings).dirty_expire_centisecs = centisecs;
        Ok(())
    }

    /// The global domain and, for a memory cgroup other than the root,
    /// its own, with dirty and writeback pages counted as dirty (what
    /// `balance_dirty_pages` weighs).
    pub fn dirty_limits(&self, memcg: &MemCgroup) -> DirtyLimits {
        let settings = self.dirty_settings();
        let global = global_domain(self, &settings, true);
        let memcg = memcg_domain(&settings, memcg, &global, true);
        DirtyLimits { global, memcg }
    }
}

/// `proc_dointvec_minmax`'s conversion: an int within `min..=max`.
fn int_in(value: i64, min: i32, max: i32) -> Result<i32, Errno> {
    i32::try_from(value)
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or(Errno::EINVAL)
}

/// One writeback domain at one moment, in pages
/// (`struct dirty_throttle_control`'s domain half).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirtyDomain {
    /// Dirtyable memory (`avail`).
    pub avail: u64,
    /// Dirty pages, and pages under writeback where the caller counts
    /// them (`dirty`).
    pub dirty: u64,
    /// The dirty threshold (`thresh`).
    pub thresh: u64,
    /// The background threshold (`bg_thresh`).
    pub bg_thresh: u64,
}

impl DirtyDomain {
    /// Halfway between the two thresholds: below it a writer is not
    /// throttled (`dirty_freerun_ceiling`).
    pub(crate) fn freerun_ceiling(&self) -> u64 {
        (self.thresh + self.bg_thresh) / 2
    }

    /// Whether a writer may go on unthrottled (`domain_dirty_freerun`).
    pub fn freerun(&self) -> bool {
        self.dirty <= self.freerun_ceiling()
    }
}

/// The domains a memory cgroup's writer is weighed against
/// ([`CgroupTree::dirty_limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtyLimits {
    /// The machine's.
    pub global: DirtyDomain,
    /// The memory cgroup's (none for the root).
    pub memcg: Option<DirtyDomain>,
}

/// A statistic of `memcg` and its descendants, in pages.
fn pages(memcg: &MemCgroup, stat: MemcgStat) -> u64 {
    u64::try_from(memcg.stat(stat)).unwrap_or(0)
}

/// `global_dirtyable_memory`: free pages above the reserve, plus the page
/// cache, plus one (never 0).
fn global_dirtyable_memory(tree: &CgroupTree) -> u64 {
    let root = tree.root();
    let free = tree.machine_free_pages();
    let reserve = tree.watermarks().high_pages;
    let file = pages(root, MemcgStat::InactiveFile) + pages(root, MemcgStat::ActiveFile);
    (free - free.min(reserve))
        .saturating_add(file)
        .saturating_add(1)
}

/// The global domain (`domain_dirty_avail` + `domain_dirty_limits` for
/// the global `dtc`); `include_writeback` counts pages under writeback as
/// dirty.
fn global_domain(
    tree: &CgroupTree,
    settings: &DirtySettings,
    include_writeback: bool,
) -> DirtyDomain {
    let root = tree.root();
    let mut dirty = pages(root, MemcgStat::FileDirty);
    if include_writeback {
        dirty += pages(root, MemcgStat::FileWriteback);
    }
    let avail = global_dirtyable_memory(tree);
    let (thresh, bg_thresh) = domain_dirty_limits(settings, avail, None);
    DirtyDomain {
        avail,
        dirty,
        thresh,
        bg_thresh,
    }
}

/// A memory cgroup's domain (`mem_cgroup_wb_stats` + `mdtc_calc_avail` +
/// `domain_dirty_limits`), weighed against the global domain `global`
/// computed the same way; none for the root.
fn memcg_domain(
    settings: &DirtySettings,
    memcg: &MemCgroup,
    global: &DirtyDomain,
    include_writeback: bool,
) -> Option<DirtyDomain> {
    if memcg.is_root() {
        return None;
    }
    let mut dirty = pages(memcg, MemcgStat::FileDirty);
    if include_writeback {
        dirty += pages(memcg, MemcgStat::FileWriteback);
    }
    let filepages = pages(memcg, MemcgStat::InactiveFile) + pages(memcg, MemcgStat::ActiveFile);
    // The room left under every `memory.max` and `memory.high` on the way
    // up, the root's excepted.
    let headroom = memcg
        .self_and_ancestors()
        .filter(|m| !m.is_root())
        .map(|m| {
            let ceiling = m.memory().max().min(m.memory().high());
            ceiling - ceiling.min(m.memory().usage())
        })
        .min()
        .unwrap_or(u64::MAX);
    // What more the domain could take is capped by the clean memory the
    // rest of the machine has.
    let clean = filepages - filepages.min(dirty);
    let global_clean = global.avail - global.avail.min(global.dirty);
    let other_clean = global_clean - global_clean.min(clean);
    let avail = filepages.saturating_add(headroom.min(other_clean));
    let (thresh, bg_thresh) = domain_dirty_limits(settings, avail, Some(global.avail));
    Some(DirtyDomain {
        avail,
        dirty,
        thresh,
        bg_thresh,
    })
}

/// `domain_dirty_limits`: the threshold and background threshold of a
/// domain with `avail` dirtyable pages; `global_avail` is the global
/// domain's for a memory cgroup's domain, which takes the byte settings as
/// ratios of it.
fn domain_dirty_limits(
    settings: &DirtySettings,
    avail: u64,
    global_avail: Option<u64>,
) -> (u64, u64) {
    // Ratios in PAGE_SIZE-ths, for precision.
    let per_page = |percent: i32| u64::from(percent.max(0) as u32) * PAGE_SIZE / 100;
    let mut ratio = per_page(settings.dirty_ratio);
    let mut bg_ratio = per_page(settings.dirty_background_ratio);
    let (mut bytes, mut bg_bytes) = (settings.dirty_bytes, settings.dirty_background_bytes);
    if let Some(global_avail) = global_avail {
        let as_ratio = |bytes: u64| bytes.div_ceil(global_avail.max(1)).min(PAGE_SIZE);
        if bytes > 0 {
            ratio = as_ratio(bytes);
        }
        if bg_bytes > 0 {
            bg_ratio = as_ratio(bg_bytes);
        }
        bytes = 0;
        bg_bytes = 0;
    }
    let of_avail =
        |ratio: u64| (u128::from(ratio) * u128::from(avail) / u128::from(PAGE_SIZE)) as u64;
    let thresh = if bytes > 0 {
        bytes.div_ceil(PAGE_SIZE)
    } else {
        of_avail(ratio)
    };
    let bg_thresh = if bg_bytes > 0 {
        bg_bytes.div_ceil(PAGE_SIZE)
    } else {
        of_avail(bg_ratio)
    };
    let thresh = thresh.min(MAX_THRESH);
    let bg_thresh = if bg_thresh >= thresh {
        thresh / 2
    } else {
        bg_thresh
    };
    (thresh, bg_thresh)
}

/// `wb_over_bg_thresh`: whether background writeback for a writeback of
/// `memcg` goes on: the global domain or the memory cgroup's has more
/// dirty pages (not counting those under writeback) than its background
/// threshold.
pub(crate) fn wb_over_bg_thresh(tree: &CgroupTree, memcg: &MemCgroup) -> bool {
    let settings = tree.dirty_settings();
    let global = global_domain(tree, &settings, false);
    if global.dirty > global.bg_thresh {
        return true;
    }
    memcg_domain(&settings, memcg, &global, false).is_some_and(|m| m.dirty > m.bg_thresh)
}

/// `writeback_chunk_size` of a writeback that is not a sync: what one
/// inode writes per turn, at least 4 MiB (`MIN_WRITEBACK_PAGES`), for
/// a writeback of `nr_pages` in all.
pub(crate) fn writeback_chunk_size(tree: &CgroupTree, nr_pages: u64) -> u64 {
    const MIN_WRITEBACK_PAGES: u64 = 4096 * 1024 / PAGE_SIZE;
    const DIRTY_SCOPE: u64 = 8;
    let settings = tree.dirty_settings();
    let global_limit = global_domain(tree, &settings, true).thresh;
    let pages = (INIT_BW / 2).min(global_limit / DIRTY_SCOPE).min(nr_pages);
    (pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES
}

/// A task's dirtying state (`current->nr_dirtied`, `nr_dirtied_pause`,
/// `dirty_paused_when`).
#[derive(Debug, Clone, Copy)]
struct TaskDirty {
    /// Pages dirtied since the last balance.
    nr_dirtied: u64,
    /// Pages it may dirty before the next balance.
    nr_dirtied_pause: u64,
    /// When its last pause ended, in jiffies (its "virtual time").
    paused_when: Option<u64>,
}

impl TaskDirty {
    /// A task that dirtied nothing yet.
    const INITIAL: Self = Self {
        nr_dirtied: 0,
        nr_dirtied_pause: DIRTY_POLL_THRESH,
        paused_when: None,
    };
}

// Loom's `thread_local!` takes no `const` initializer.
#[cfg(not(loom))]
thread_local! {
    static TASK: Cell<TaskDirty> = const { Cell::new(TaskDirty::INITIAL) };
}
#[cfg(loom)]
thread_local! {
    static TASK: Cell<TaskDirty> = Cell::new(TaskDirty::INITIAL);
}

fn task() -> TaskDirty {
    TASK.with(Cell::get)
}

fn set_task(task: TaskDirty) {
    TASK.with(|t| t.set(task));
}

/// The running task dirtied `nr` pages (`folio_account_dirtied`'s
/// `current->nr_dirtied`).
pub(crate) fn account_task_dirtied(nr: u64) {
    let mut t = task();
    t.nr_dirtied += nr;
    set_task(t);
}

/// Whether the running task may be due a balance: it dirtied at least the
/// smallest allowance (a cheap look before finding its writeback).
pub(crate) fn task_may_need_balance() -> bool {
    let t = task();
    t.nr_dirtied >= t.nr_dirtied_pause.min(DIRTY_EXCEEDED_RATELIMIT)
}

/// The writeback a balancing task dirties pages for: the one of its
/// memory cgroup on the filesystem written (`wb_get_create_current`).
pub(crate) trait ThrottledWb {
    /// Its memory cgroup (the root's writeback has no domain of its own).
    fn memcg(&self) -> &Arc<MemCgroup>;
    /// Its dirty and under-writeback pages (`WB_RECLAIMABLE` +
    /// `WB_WRITEBACK`).
    fn wb_dirty(&self) -> u64;
    /// `wb->dirty_exceeded`.
    fn dirty_exceeded(&self) -> bool;
    /// Sets `wb->dirty_exceeded`.
    fn set_dirty_exceeded(&self, exceeded: bool);
    /// `writeback_in_progress`: its flusher is running.
    fn writeback_in_progress(&self) -> bool;
    /// `wb_start_background_writeback`: wakes its flusher for background
    /// writeback.
    fn start_background_writeback(&self);
    /// Sleeps `pause` on the tree's clock, the flusher running meanwhile.
    fn pause(&self, pause: Duration);
}

/// `balance_dirty_pages_ratelimited`: after a task dirtied a page of
/// `wb`'s, balances it once it used up its allowance (a small one while
/// `wb`'s domain is over its threshold).
pub(crate) fn balance_dirty_pages_ratelimited(tree: &CgroupTree, wb: &dyn ThrottledWb) {
    let t = task();
    let mut ratelimit = t.nr_dirtied_pause;
    if wb.dirty_exceeded() {
        ratelimit = ratelimit.min(DIRTY_EXCEEDED_RATELIMIT);
    }
    if t.nr_dirtied >= ratelimit {
        balance_dirty_pages(tree, wb, t.nr_dirtied);
    }
}

/// `wb_stat_error`: how far a writeback's per-CPU counts may be off, which
/// the kernel takes as "nothing left" (`nr_cpu_ids * WB_STAT_BATCH`).
fn wb_stat_error(nr_cpus: u32) -> u64 {
    let batch = 8 * (1 + u64::from(nr_cpus.max(1).ilog2()));
    u64::from(nr_cpus) * batch
}

/// The tree's clock in jiffies.
fn jiffies_now(tree: &CgroupTree) -> u64 {
    let ms = tree.clock().now().as_millis();
    u64::try_from(ms * u128::from(HZ) / 1000).unwrap_or(u64::MAX)
}

/// `dirty_poll_interval`: pages a task may dirty before it looks again,
/// near the square root of the room left under the threshold.
fn dirty_poll_interval(dirty: u64, thresh: u64) -> u64 {
    if thresh > dirty {
        1 << ((thresh - dirty).ilog2() >> 1)
    } else {
        1
    }
}

/// What a balance weighs in one domain for one writeback
/// (`balance_wb_limits`): its position ratio and whether the writeback is
/// over its share.
#[derive(Debug, Clone, Copy)]
struct WbLimits {
    /// `pos_ratio`, in `1 << RATELIMIT_CALC_SHIFT`ths.
    pos_ratio: u64,
    /// The writeback's dirty pages (`wb_dirty`).
    wb_dirty: u64,
    /// `dirty_exceeded`.
    exceeded: bool,
}

/// `pos_ratio_polynom`: 1 at the setpoint, 2 at the freerun ceiling, 0 at
/// the limit, a cubic in between, clamped to 0..=2.
fn pos_ratio_polynom(setpoint: u64, dirty: u64, limit: u64) -> i64 {
    let unit = 1i64 << RATELIMIT_CALC_SHIFT;
    let span = (limit.saturating_sub(setpoint) | 1) as i64;
    let x = ((setpoint as i64 - dirty as i64) << RATELIMIT_CALC_SHIFT) / span;
    let mut pos_ratio = x;
    pos_ratio = (pos_ratio * x) >> RATELIMIT_CALC_SHIFT;
    pos_ratio = (pos_ratio * x) >> RATELIMIT_CALC_SHIFT;
    (pos_ratio + unit).clamp(0, 2 * unit)
}

/// `wb_dirty_limits` + `wb_dirty_exceeded` + `wb_position_ratio` for a
/// writeback with `wb_dirty` pages that has the whole domain `dtc` to
/// itself (wb_thresh = thresh; module docs).
fn wb_limits(dtc: &DirtyDomain, wb_dirty: u64) -> WbLimits {
    let exceeded = wb_dirty > dtc.thresh && dtc.dirty > dtc.thresh;
    let limit = dtc.thresh;
    if dtc.dirty >= limit {
        return WbLimits {
            pos_ratio: 0,
            wb_dirty,
            exceeded,
        };
    }
    let setpoint = (dtc.freerun_ceiling() + limit) / 2;
    let mut pos_ratio = pos_ratio_polynom(setpoint, dtc.dirty, limit) as u64;
    // The writeback's control line: with the whole threshold its
    // setpoint is the domain's, and its span eight seconds of writeout.
    let span = 8 * INIT_BW;
    let x_intercept = setpoint + span;
    if wb_dirty < x_intercept - span / 4 {
        pos_ratio = mul_div(
            pos_ratio,
            x_intercept - wb_dirty,
            (x_intercept - setpoint) | 1,
        );
    } else {
        pos_ratio /= 4;
    }
    // Its reserve: a writeback with less than half its threshold dirty is
    // let go faster, so its device does not run dry.
    let reserve = dtc.thresh / 2;
    if wb_dirty < reserve {
        if wb_dirty > reserve / 8 {
            pos_ratio = mul_div(pos_ratio, reserve, wb_dirty);
        } else {
            pos_ratio *= 8;
        }
    }
    WbLimits {
        pos_ratio,
        wb_dirty,
        exceeded,
    }
}

/// `a * b / c` without overflow.
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    u64::try_from(u128::from(a) * u128::from(b) / u128::from(c.max(1))).unwrap_or(u64::MAX)
}

/// `wb_max_pause`: the longest pause, shorter when little is dirty so the
/// device does not go idle.
fn wb_max_pause(wb_dirty: u64) -> u64 {
    let t = wb_dirty / (1 + INIT_BW / (1 + HZ / 8).next_power_of_two()) + 1;
    t.min(MAX_PAUSE)
}

/// `wb_min_pause`: the shortest pause worth sleeping, and the pages the
/// task may dirty before its next balance.
fn wb_min_pause(max_pause: u64, task_ratelimit: u64) -> (u64, u64) {
    let dirty_ratelimit = INIT_BW;
    let hz_pow2 = HZ.next_power_of_two();
    // With bandwidth and base rate equal, the target is 10 ms.
    let mut t = (HZ / 100).max(1).min(1 + max_pause / 2);
    let mut pages = dirty_ratelimit * t / hz_pow2;
    if pages < DIRTY_POLL_THRESH {
        t = max_pause;
        pages = dirty_ratelimit * t / hz_pow2;
        if pages > DIRTY_POLL_THRESH {
            pages = DIRTY_POLL_THRESH;
            t = HZ * DIRTY_POLL_THRESH / dirty_ratelimit;
        }
    }
    let pause = HZ * pages / (task_ratelimit + 1);
    if pause > max_pause {
        t = max_pause;
        pages = task_ratelimit * t / hz_pow2;
    }
    let min_pause = if pages >= DIRTY_POLL_THRESH {
        1 + t / 2
    } else {
        t
    };
    (min_pause, pages)
}

/// `balance_dirty_pages`: see the module docs. `pages_dirtied` is what the
/// task dirtied since its last balance.
fn balance_dirty_pages(tree: &CgroupTree, wb: &dyn ThrottledWb, pages_dirtied: u64) {
    let settings = tree.dirty_settings();
    let error = wb_stat_error(tree.nr_cpus());
    loop {
        let mut now = jiffies_now(tree);
        let global = global_domain(tree, &settings, true);
        let memcg = memcg_domain(&settings, wb.memcg(), &global, true);
        let nr_dirty = pages(tree.root(), MemcgStat::FileDirty);
        let wb_dirty_before = wb.wb_dirty();
        if nr_dirty > global.bg_thresh && !wb.writeback_in_progress() {
            wb.start_background_writeback();
        }
        if global.freerun() && memcg.is_none_or(|m| m.freerun()) {
            let intv = dirty_poll_interval(global.dirty, global.thresh);
            let m_intv = memcg.map_or(u64::MAX, |m| dirty_poll_interval(m.dirty, m.thresh));
            set_task(TaskDirty {
                nr_dirtied: 0,
                nr_dirtied_pause: intv.min(m_intv),
                paused_when: Some(now),
            });
            return;
        }
        if !wb.writeback_in_progress() {
            wb.start_background_writeback();
        }
        // The writeback's own count is read after the kick; the domains'
        // were read before it, as the kernel's are.
        let wb_dirty = wb.wb_dirty();
        let g = wb_limits(&global, wb_dirty);
        let m = memcg.map(|m| wb_limits(&m, wb_dirty));
        let sdtc = match m {
            Some(m) if m.pos_ratio < g.pos_ratio => m,
            _ => g,
        };
        wb.set_dirty_exceeded(g.exceeded || m.is_some_and(|m| m.exceeded));
        let task_ratelimit = (INIT_BW * sdtc.pos_ratio) >> RATELIMIT_CALC_SHIFT;
        let max_pause = wb_max_pause(sdtc.wb_dirty);
        let (min_pause, nr_dirtied_pause) = wb_min_pause(max_pause, task_ratelimit);
        let mut t = task();
        let Some(pause) = throttle_pause(
            &mut t,
            &mut now,
            pages_dirtied,
            task_ratelimit,
            (min_pause, max_pause),
        ) else {
            set_task(t);
            return;
        };
        wb.pause(Duration::from_millis(pause * 1000 / HZ));
        t.paused_when = Some(now + pause);
        t.nr_dirtied = 0;
        t.nr_dirtied_pause = nr_dirtied_pause;
        set_task(t);
        // Under the threshold: one pause is the throttle. Over it: again,
        // unless this writeback has nothing left to write, or its flusher
        // got nowhere since the last look (writes failing: the kernel's
        // task would wait until killed; here it goes on).
        if task_ratelimit > 0 || sdtc.wb_dirty <= error || wb.wb_dirty() >= wb_dirty_before {
            return;
        }
    }
}

/// The pause, in jiffies, for a task that dirtied `pages_dirtied` at
/// `task_ratelimit` (pages per second) since it last paused, between
/// `min_pause` and `max_pause` (`pauses`); `None` when it is not worth a
/// sleep, the debt carried into `t`'s virtual time instead. A pause cut to
/// `max_pause` moves `now` on by what was cut (at most `max_pause`).
fn throttle_pause(
    t: &mut TaskDirty,
    now: &mut u64,
    pages_dirtied: u64,
    task_ratelimit: u64,
    (min_pause, max_pause): (u64, u64),
) -> Option<u64> {
    // Over the limit (a zero rate): the longest pause.
    let Some(period) = (HZ * pages_dirtied).checked_div(task_ratelimit) else {
        return Some(max_pause);
    };
    let mut pause = period as i64;
    if let Some(when) = t.paused_when {
        pause -= *now as i64 - when as i64;
    }
    if pause < min_pause as i64 {
        // Not worth a sleep: carry the debt into the task's
        // virtual time (or forgive it after a second of thinking).
        if pause < -(HZ as i64) {
            t.paused_when = Some(*now);
            t.nr_dirtied = 0;
        } else if period > 0 {
            t.paused_when = Some(t.paused_when.unwrap_or(*now) + period);
            t.nr_dirtied = 0;
        } else if t.nr_dirtied_pause <= pages_dirtied {
            t.nr_dirtied_pause += pages_dirtied;
        }
        return None;
    }
    let mut pause = pause as u64;
    if pause > max_pause {
        *now += (pause - max_pause).min(max_pause);
        pause = max_pause;
    }
    Some(pause)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::Gfp;

    #[test]
    fn limits_follow_the_ratios_and_halve_a_background_above_the_threshold() {
        let s = DirtySettings::default();
        // 20% and 10% of 1000 pages, in PAGE_SIZE-ths: 819/4096 and 409/4096.
        assert_eq!(domain_dirty_limits(&s, 1000, None), (199, 99));
        let s = DirtySettings {
            dirty_background_ratio: 30,
            ..s
        };
        assert_eq!(
            domain_dirty_limits(&s, 1000, None),
            (199, 99),
            "bg >= thresh: half"
        );
        let s = DirtySettings {
            dirty_bytes: 1 << 20,
            dirty_ratio: 0,
            ..DirtySettings::default()
        };
        assert_eq!(domain_dirty_limits(&s, 1000, None).0, 256, "bytes in pages");
        // A memory cgroup's domain takes 1M as a ratio of a global domain
        // of 1024 pages (4M): 1024/4096, a quarter.
        assert_eq!(domain_dirty_limits(&s, 400, Some(1024)).0, 100);
    }

    #[test]
    fn the_position_ratio_is_two_at_freerun_one_at_the_setpoint_zero_at_the_limit() {
        let unit = 1 << RATELIMIT_CALC_SHIFT;
        let (freerun, limit) = (750, 1000);
        let setpoint = (freerun + limit) / 2;
        assert_eq!(pos_ratio_polynom(setpoint, setpoint, limit), unit);
        assert_eq!(pos_ratio_polynom(setpoint, freerun, limit), 2 * unit);
        assert_eq!(pos_ratio_polynom(setpoint, limit, limit), 0);
        let between = pos_ratio_polynom(setpoint, 950, limit);
        assert!(0 < between && between < unit, "{between}");
    }

    #[test]
    fn pauses_are_bounded() {
        assert_eq!(wb_max_pause(0), 1);
        assert_eq!(wb_max_pause(1 << 30), MAX_PAUSE);
        // At the base rate the target pause is 10 ms: 250 pages between
        // looks, and a pause under 6 jiffies is not worth sleeping.
        assert_eq!(wb_min_pause(MAX_PAUSE, INIT_BW), (6, 250));
        // Slowed to a crawl: max_pause's worth of pages.
        let (min, pages) = wb_min_pause(MAX_PAUSE, 10);
        assert_eq!(pages, 10 * MAX_PAUSE / 1024);
        assert_eq!(min, MAX_PAUSE);
    }

    #[test]
    fn sysctls_parse_and_exclude_each_other_as_the_kernels() {
        let t = CgroupTree::default();
        assert_eq!(t.set_dirty_ratio(101), Err(Errno::EINVAL));
        assert_eq!(t.set_dirty_ratio(-1), Err(Errno::EINVAL));
        assert_eq!(t.set_dirty_bytes(DIRTY_BYTES_MIN - 1), Err(Errno::EINVAL));
        assert_eq!(t.set_dirty_bytes(u64::MAX), Err(Errno::ERANGE));
        t.set_dirty_bytes(1 << 20).unwrap();
        let s = t.dirty_settings();
        assert_eq!((s.dirty_ratio, s.dirty_bytes), (0, 1 << 20));
        // The same ratio written twice still turns the bytes off the
        // first time (it changed from 0).
        t.set_dirty_ratio(20).unwrap();
        let s = t.dirty_settings();
        assert_eq!((s.dirty_ratio, s.dirty_bytes), (20, 0));
        t.set_dirty_background_bytes(1).unwrap();
        assert_eq!(t.dirty_settings().dirty_background_ratio, 0);
        assert_eq!(t.set_dirty_background_bytes(0), Err(Errno::EINVAL));
        t.set_dirty_background_ratio(10).unwrap();
        assert_eq!(t.dirty_settings().dirty_background_bytes, 0);
        assert_eq!(t.set_dirty_expire_centisecs(-1), Err(Errno::EINVAL));
        t.set_dirty_writeback_centisecs(-1).unwrap();
        assert_eq!(t.dirty_settings().dirty_writeback_centisecs, -1);
        assert!(t.dirty_settings().writeback_interval().unwrap() > Duration::from_secs(1 << 20));
        t.set_dirty_writeback_centisecs(0).unwrap();
        assert_eq!(t.dirty_settings().writeback_interval(), None);
        assert_eq!(t.set_dirty_writeback_centisecs(1 << 31), Err(Errno::EINVAL));
    }

    #[test]
    fn a_memcg_domain_is_its_page_cache_plus_its_headroom() {
        let t = CgroupTree::default();
        t.set_charge_stock(false);
        t.set_machine_pages(1 << 16);
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        a.memory().set_max(5120).unwrap();
        // 1000 file pages charged, 200 of them dirty: avail is the file
        // pages plus the 4120 pages of headroom.
        t.try_charge(&a, 1000, crate::memcontrol::ChargeKind::File, Gfp::Kernel)
            .unwrap();
        a.mod_stat(MemcgStat::InactiveFile, 1000);
        a.mod_stat(MemcgStat::FileDirty, 200);
        let limits = t.dirty_limits(&a);
        let m = limits.memcg.unwrap();
        assert_eq!(m.avail, 1000 + 4120);
        assert_eq!(m.dirty, 200);
        assert_eq!(
            (m.thresh, m.bg_thresh),
            (5120 * 819 / 4096, 5120 * 409 / 4096)
        );
        assert!(limits.global.thresh > m.thresh);
        assert_eq!(t.dirty_limits(t.root()).memcg, None);
        a.mod_stat(MemcgStat::FileDirty, -200);
        a.mod_stat(MemcgStat::InactiveFile, -1000);
        t.uncharge(&a, 1000, crate::memcontrol::ChargeKind::File);
    }
}
