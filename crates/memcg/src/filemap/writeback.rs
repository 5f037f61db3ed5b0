//! The flushers: a filesystem's backing device, its writebacks (one per
//! memory cgroup that dirties its files), and the work that writes dirty
//! page cache back (fs/fs-writeback.c, mm/backing-dev.c, v6.14).
//!
//! # What it does
//!
//! A [`Bdi`] is one filesystem's backing device. It keeps the device's
//! readahead size (`ra_pages`, `/sys/class/bdi/*/read_ahead_kb`), which
//! each file takes at open (`readahead.rs`). Its dirty page cache is
//! written back by writebacks ([`Wb`], `struct bdi_writeback`), one per
//! memory cgroup (cgroup writeback): an inode belongs to the writeback of
//! the memory cgroup charged for the page that made it dirty
//! (`inode_attach_wb`), and sits on that writeback's list of dirty inodes,
//! oldest dirtied first (`b_dirty`, `dirtied_when`), until it is clean
//! again. (The kernel leaves a clean inode attached and moves it to another
//! writeback when foreign memory cgroups dirty most of it; here it simply
//! attaches afresh the next time it is dirtied.)
//!
//! The flusher (`wb_workfn` → `wb_do_writeback`) does, in order:
//!
//! 1. queued syncs (`sync_inodes_sb`, an fsync's `filemap_write_and_wait`):
//!    every dirty page of the inodes asked for, waited on;
//! 2. a wakeup to write everything (`wb_check_start_all`: reclaim met only
//!    dirty pages, or `dirty_writeback_centisecs` changed);
//! 3. the periodic writeback (`wb_check_old_data_flush`, at most once every
//!    `dirty_writeback_centisecs`): the inodes dirty for
//!    `dirty_expire_centisecs`;
//! 4. background writeback (`wb_check_background_flush`): for each
//!    writeback whose domain is over its background threshold, until it is
//!    not ([`wb_over_bg_thresh`]).
//!
//! A writeback pass goes over its inodes oldest first, each writing up to a
//! chunk (`writeback_chunk_size`, 4 MiB at least; a sync all) from where
//! its last writeback stopped (`range_cyclic`), and goes round again while
//! it makes progress; periodic and background passes yield to a queued
//! sync. After a run, while anything is dirty, the flusher sleeps
//! `dirty_writeback_centisecs` (`wb_wakeup_delayed`). Reclaim reaches every
//! flusher through the tree ([`page_writeback::wakeup_flusher_threads`]);
//! a dirtying task through its writeback ([`Bdi::balance`]).
//!
//! How a flusher runs:
//!
//! - **inline** (the default): woken, it runs at once on the waking task's
//!   thread, as a flusher thread would on a machine with a CPU to spare
//!   (the backing stores here finish a write at once, as `brd` does); its
//!   periodic work runs when the tree's clock has passed its deadline, at
//!   the next point that looks (a dirtying task's balance or pause, a
//!   sync, [`page_writeback::run_due_flushers`]), each missed period in
//!   turn. On a virtual clock this is deterministic;
//! - **a thread** ([`Bdi::spawn_thread`], for the FUSE server on the real
//!   clock): it waits for work or its deadline, and runs it.
//!
//! # Invariants
//!
//! - Every write of a bdi's folios runs in its flusher, one run at a time
//!   (inline: the run flag; threaded: the thread), so no two writers race
//!   on a folio, and a sync that finds the flusher idle has nothing in
//!   flight.
//! - An inode with dirty pages is on exactly one writeback's list, one
//!   without is on none. A writeback's reclaimable count is the dirty
//!   pages of its inodes; its writeback count the pages in flight it
//!   started.
//! - A writeback lives while it has dirty inodes or pages in flight, and
//!   pins its memory cgroup meanwhile (the kernel's cgwb pins its css).
//!
//! # Locking
//!
//! One mutex per bdi over its writebacks' lists and its work: a leaf, taken
//! under a mapping's lock (an inode dirtied or cleaned) and never held
//! while writing or calling out. Its condvar wakes the thread and the
//! tasks waiting for a sync.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use super::{AddressSpace, BackingError};
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use crate::page_writeback::{self, ThrottledWb, wb_over_bg_thresh};
use crate::readahead;
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, MutexGuard, Ordering, lock};
use crate::writeback::Flusher;

/// One memory cgroup's writeback on one backing device (`struct
/// bdi_writeback`).
pub(crate) struct Wb {
    memcg: Arc<MemCgroup>,
    /// Dirty pages of its inodes (`WB_RECLAIMABLE`).
    reclaimable: AtomicU64,
    /// Pages it is writing (`WB_WRITEBACK`).
    writeback: AtomicU64,
    /// `dirty_exceeded`: its domain was over the threshold at the last
    /// balance.
    dirty_exceeded: AtomicBool,
}

impl Wb {
    /// Adds `delta` pages to its dirty count.
    pub(super) fn add_reclaimable(&self, delta: i64) {
        // Relaxed: counts read as a snapshot by balances; the pages they
        // count change under their mappings' locks.
        self.reclaimable.fetch_add(delta as u64, Ordering::Relaxed);
    }

    /// Adds `delta` pages to its in-flight count.
    pub(super) fn add_writeback(&self, delta: i64) {
        // Relaxed: as `add_reclaimable`.
        self.writeback.fetch_add(delta as u64, Ordering::Relaxed);
    }

    fn dirty_pages(&self) -> u64 {
        // Relaxed: as `add_reclaimable`.
        self.reclaimable.load(Ordering::Relaxed) + self.writeback.load(Ordering::Relaxed)
    }
}

/// A dirty inode on a writeback's list.
struct DirtyInode {
    /// When it became dirty (`dirtied_when`).
    when: Duration,
    mapping: std::sync::Weak<AddressSpace>,
}

/// A writeback and its dirty inodes, by the order they were dirtied in.
struct WbEntry {
    wb: Arc<Wb>,
    inodes: BTreeMap<u64, DirtyInode>,
}

/// A queued sync (`struct wb_writeback_work` with `WB_SYNC_ALL`).
struct SyncWork {
    id: u64,
    /// One inode (fsync), or all (`None`: syncfs).
    inode: Option<std::sync::Weak<AddressSpace>>,
}

/// What the flusher has to do, and its writebacks.
#[derive(Default)]
struct BdiState {
    /// By memory cgroup serial, for a deterministic order.
    wbs: BTreeMap<u64, WbEntry>,
    next_seq: u64,
    syncs: VecDeque<SyncWork>,
    next_sync: u64,
    done: HashMap<u64, Result<u64, BackingError>>,
    /// `WB_start_all`.
    start_all: bool,
    /// Woken (`wb_wakeup`): a run is owed.
    woken: bool,
    /// The periodic wakeup's deadline (the delayed work), if armed.
    timer: Option<Duration>,
    /// The last periodic writeback (`last_old_flush`).
    last_old_flush: Duration,
    /// A run is in progress (`WB_writeback_running`).
    running: bool,
    /// A thread runs the work.
    threaded: bool,
    /// The thread is asked to stop.
    #[cfg(not(loom))]
    stop: bool,
}

impl BdiState {
    fn has_dirty(&self) -> bool {
        self.wbs.values().any(|e| !e.inodes.is_empty())
    }

    /// Whether a run is owed at `now`.
    fn has_work(&self, now: Duration) -> bool {
        !self.syncs.is_empty()
            || self.start_all
            || self.woken
            || self.timer.is_some_and(|t| t <= now)
    }

    /// Drops writebacks with nothing dirty and nothing in flight.
    fn prune(&mut self) {
        self.wbs
            .retain(|_, e| !e.inodes.is_empty() || e.wb.writeback.load(Ordering::Relaxed) > 0);
    }
}

/// The kind of a writeback pass that is not a sync (`wb_writeback_work`'s
/// purpose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Everything dirty now (`WB_REASON_VMSCAN` and the like).
    StartAll,
    /// What has been dirty for the expire interval (`for_kupdate`).
    Kupdate,
    /// While the domain is over its background threshold
    /// (`for_background`).
    Background,
}

/// A filesystem's backing device: its readahead size and its flusher
/// (`struct backing_dev_info`).
pub struct Bdi {
    tree: CgroupTree,
    /// Its readahead size in pages (`ra_pages`, `read_ahead_kb` / 4),
    /// taken by each file at open.
    ra_pages: AtomicU64,
    state: Mutex<BdiState>,
    /// Work queued (for the thread), a run or a sync done (for waiters).
    cond: Condvar,
}

impl std::fmt::Debug for Bdi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = lock(&self.state);
        f.debug_struct("Bdi")
            .field("writebacks", &st.wbs.len())
            .field("running", &st.running)
            .finish_non_exhaustive()
    }
}

impl Bdi {
    /// A backing device of `tree`'s machine, its flusher inline,
    /// registered for the tree's wakeups.
    pub fn new(tree: &CgroupTree) -> Arc<Self> {
        let bdi = Arc::new(Self {
            tree: tree.clone(),
            ra_pages: AtomicU64::new(readahead::ra_pages_of_kb(readahead::DEFAULT_READ_AHEAD_KB)),
            state: Mutex::new(BdiState {
                last_old_flush: tree.clock().now(),
                ..BdiState::default()
            }),
            cond: Condvar::new(),
        });
        let weak: std::sync::Weak<dyn Flusher> = Arc::downgrade(&bdi) as _;
        page_writeback::register_flusher(tree, weak);
        bdi
    }

    /// Its `read_ahead_kb` (`/sys/class/bdi/*/read_ahead_kb`): the most a
    /// readahead window reads, in KiB (128 by default).
    pub fn read_ahead_kb(&self) -> u64 {
        readahead::kb_of_ra_pages(self.ra_pages())
    }

    /// Sets `read_ahead_kb` (`read_ahead_kb_store`: rounded down to whole
    /// pages; 0 turns readahead off). Files opened from now on use it.
    pub fn set_read_ahead_kb(&self, read_ahead_kb: u64) {
        // Relaxed: a setting each open reads once; no other memory depends
        // on it.
        self.ra_pages
            .store(readahead::ra_pages_of_kb(read_ahead_kb), Ordering::Relaxed);
    }

    /// `bdi->ra_pages`, for a file being opened (`file_ra_state_init`).
    pub(crate) fn ra_pages(&self) -> u64 {
        // Relaxed: see `set_read_ahead_kb`.
        self.ra_pages.load(Ordering::Relaxed)
    }

    /// Pages dirty or in flight on it.
    pub fn nr_dirty_pages(&self) -> u64 {
        lock(&self.state)
            .wbs
            .values()
            .map(|e| e.wb.dirty_pages())
            .sum()
    }

    /// Inodes on its writebacks' dirty lists.
    pub fn nr_dirty_inodes(&self) -> usize {
        lock(&self.state).wbs.values().map(|e| e.inodes.len()).sum()
    }

    /// Writebacks it keeps (memory cgroups with dirty inodes on it).
    pub fn nr_writebacks(&self) -> usize {
        lock(&self.state).wbs.len()
    }

    /// `memcg`'s writeback on this device, made if missing
    /// (`wb_get_create`).
    fn wb_locked(st: &mut BdiState, memcg: &Arc<MemCgroup>) -> Arc<Wb> {
        let entry = st.wbs.entry(memcg.serial()).or_insert_with(|| WbEntry {
            wb: Arc::new(Wb {
                memcg: Arc::clone(memcg),
                reclaimable: AtomicU64::new(0),
                writeback: AtomicU64::new(0),
                dirty_exceeded: AtomicBool::new(false),
            }),
            inodes: BTreeMap::new(),
        });
        Arc::clone(&entry.wb)
    }

    /// An inode got its first dirty page, charged to `memcg`
    /// (`__mark_inode_dirty` with `I_DIRTY_PAGES`): it goes on that memory
    /// cgroup's writeback's list, and the periodic wakeup is armed if it
    /// was not. Returns the writeback and the inode's place on its list.
    /// Called under the mapping's lock.
    pub(super) fn inode_dirtied(
        &self,
        memcg: &Arc<MemCgroup>,
        mapping: std::sync::Weak<AddressSpace>,
    ) -> (Arc<Wb>, u64) {
        let now = self.tree.clock().now();
        let interval = self.tree.dirty_settings().writeback_interval();
        let mut st = lock(&self.state);
        let wb = Self::wb_locked(&mut st, memcg);
        let seq = st.next_seq;
        st.next_seq += 1;
        if let Some(entry) = st.wbs.get_mut(&memcg.serial()) {
            entry.inodes.insert(seq, DirtyInode { when: now, mapping });
        }
        if st.timer.is_none()
            && let Some(interval) = interval
        {
            st.timer = Some(now + interval);
            if st.threaded {
                self.cond.notify_all();
            }
        }
        (wb, seq)
    }

    /// An inode's last dirty page was cleaned (or went): off its
    /// writeback's list. Called under the mapping's lock.
    pub(super) fn inode_cleaned(&self, wb: &Wb, seq: u64) {
        let mut st = lock(&self.state);
        if let Some(entry) = st.wbs.get_mut(&wb.memcg.serial()) {
            entry.inodes.remove(&seq);
        }
        st.prune();
    }

    /// After the running task dirtied a page of this device as a task of
    /// `memcg` (`balance_dirty_pages_ratelimited`): once it used up its
    /// allowance, its writeback's domains are weighed and it may be
    /// throttled.
    pub(super) fn balance(&self, memcg: &Arc<MemCgroup>) {
        if !page_writeback::task_may_need_balance() {
            return;
        }
        self.run_due(self.tree.clock().now());
        let wb = Self::wb_locked(&mut lock(&self.state), memcg);
        page_writeback::balance_dirty_pages_ratelimited(&self.tree, &Throttle { bdi: self, wb });
    }

    /// Writes back every dirty page of `inode`, or of every inode of the
    /// device (`None`), and waits for it (`WB_SYNC_ALL`): `syncfs(2)` and
    /// `fsync(2)`. Returns the pages written, or the first error met (of
    /// this pass, or of an earlier writeback of the inodes synced, which a
    /// sync reports once).
    pub fn sync(&self, inode: Option<std::sync::Weak<AddressSpace>>) -> Result<u64, BackingError> {
        let id = {
            let mut st = lock(&self.state);
            let id = st.next_sync;
            st.next_sync += 1;
            st.syncs.push_back(SyncWork { id, inode });
            id
        };
        self.kick(|_| {});
        let mut st = lock(&self.state);
        loop {
            if let Some(result) = st.done.remove(&id) {
                return result;
            }
            st = self.wait(st);
        }
    }

    fn wait<'a>(&self, st: MutexGuard<'a, BdiState>) -> MutexGuard<'a, BdiState> {
        self.cond.wait(st).unwrap_or_else(|p| p.into_inner())
    }

    /// Queues work (`update`) and wakes the flusher: notifies the thread,
    /// or runs inline unless a run is in progress (which will see it).
    fn kick(&self, update: impl FnOnce(&mut BdiState)) {
        let mut st = lock(&self.state);
        update(&mut st);
        if st.threaded {
            self.cond.notify_all();
            return;
        }
        if st.running {
            return;
        }
        st.running = true;
        drop(st);
        self.run_inline();
    }

    /// Runs until no work is owed, then clears the run flag.
    fn run_inline(&self) {
        loop {
            let now = self.tree.clock().now();
            self.workfn(now);
            let mut st = lock(&self.state);
            if !st.has_work(self.tree.clock().now()) {
                st.running = false;
                self.cond.notify_all();
                return;
            }
        }
    }

    /// Runs the periodic work due by `now`, each missed period in turn
    /// (inline flushers; a thread keeps its own time). Periods in which
    /// nothing could expire are skipped over.
    pub(crate) fn run_due(&self, now: Duration) {
        loop {
            let at = {
                let mut st = lock(&self.state);
                if st.threaded || st.running {
                    return;
                }
                match st.timer {
                    Some(at) if at <= now => {
                        st.running = true;
                        at
                    }
                    _ => return,
                }
            };
            let written = self.workfn(at);
            let mut st = lock(&self.state);
            st.running = false;
            self.cond.notify_all();
            let settings = self.tree.dirty_settings();
            let (Some(interval), Some(next)) = (settings.writeback_interval(), st.timer) else {
                return;
            };
            // The next period that finds something expired; none before
            // `now` (or a period that wrote nothing though something had
            // expired: writes failing) leaves the timer at the first
            // period after `now`.
            let oldest = st
                .wbs
                .values()
                .filter_map(|e| e.inodes.values().map(|i| i.when).min())
                .min();
            let expire = settings.expire_interval();
            let useful = oldest.map(|when| next_tick(next, interval, when + expire));
            let stuck = written == 0 && oldest.is_some_and(|when| when + expire <= at);
            st.timer = Some(match useful {
                Some(t) if t <= now && !stuck => t,
                _ => next_tick(next, interval, now + Duration::from_nanos(1)),
            });
        }
    }

    /// One run of the flusher at time `at` (`wb_workfn`); returns the pages
    /// written.
    fn workfn(&self, at: Duration) -> u64 {
        let settings = self.tree.dirty_settings();
        let (syncs, start_all) = {
            let mut st = lock(&self.state);
            st.woken = false;
            if st.timer.is_some_and(|t| t <= at) {
                st.timer = None;
            }
            (
                std::mem::take(&mut st.syncs),
                std::mem::take(&mut st.start_all),
            )
        };
        let mut written = 0;
        for work in syncs {
            let result = self.sync_pass(work.inode.as_ref());
            if let Ok(n) = result {
                written += n;
            }
            lock(&self.state).done.insert(work.id, result);
            self.cond.notify_all();
        }
        if start_all {
            written += self.each_wb(Pass::StartAll, at);
        }
        if let Some(interval) = settings.writeback_interval() {
            let due = {
                let mut st = lock(&self.state);
                let due = at >= st.last_old_flush + interval;
                if due {
                    st.last_old_flush = at;
                }
                due
            };
            if due {
                written += self.each_wb(Pass::Kupdate, at);
            }
        }
        written += self.each_wb(Pass::Background, at);
        let mut st = lock(&self.state);
        st.prune();
        if st.timer.is_none()
            && st.has_dirty()
            && let Some(interval) = settings.writeback_interval()
        {
            st.timer = Some(at + interval);
        }
        written
    }

    /// A pass of kind `pass` over every writeback, in order.
    fn each_wb(&self, pass: Pass, at: Duration) -> u64 {
        let wbs: Vec<Arc<Wb>> = lock(&self.state)
            .wbs
            .values()
            .map(|e| Arc::clone(&e.wb))
            .collect();
        wbs.iter().map(|wb| self.wb_writeback(wb, pass, at)).sum()
    }

    /// A sync: every dirty page of `inode` (or of all inodes), waited on;
    /// reports the first error, this pass's or an earlier writeback's.
    fn sync_pass(
        &self,
        inode: Option<&std::sync::Weak<AddressSpace>>,
    ) -> Result<u64, BackingError> {
        let inodes: Vec<Arc<AddressSpace>> = match inode {
            Some(inode) => inode.upgrade().into_iter().collect(),
            None => {
                let st = lock(&self.state);
                st.wbs
                    .values()
                    .flat_map(|e| e.inodes.values().filter_map(|i| i.mapping.upgrade()))
                    .collect()
            }
        };
        let mut written = 0;
        let mut first_error = None;
        for inode in inodes {
            let (n, result) = inode.writepages(u64::MAX, false);
            written += n;
            if let Err(e) = result.and(inode.take_error()) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(written), Err)
    }

    /// `wb_writeback` of one writeback for a pass that is not a sync:
    /// rounds over its inodes dirtied by the pass's cutoff, oldest first, a
    /// chunk each, while they make progress and the pass's reason holds.
    fn wb_writeback(&self, wb: &Arc<Wb>, pass: Pass, at: Duration) -> u64 {
        let settings = self.tree.dirty_settings();
        // Kupdate takes what was dirtied at least the expire interval ago
        // (nothing, that early on the clock).
        let cutoff = match pass {
            Pass::Kupdate => match at.checked_sub(settings.expire_interval()) {
                Some(cutoff) => cutoff,
                None => return 0,
            },
            Pass::StartAll | Pass::Background => at,
        };
        let mut budget = match pass {
            Pass::Background => u64::MAX,
            // `get_nr_dirty_pages`: what the machine has dirty now.
            Pass::StartAll | Pass::Kupdate => {
                u64::try_from(self.tree.root().stat(MemcgStat::FileDirty)).unwrap_or(0)
            }
        };
        let mut written = 0;
        loop {
            if budget == 0 {
                break;
            }
            if matches!(pass, Pass::Kupdate | Pass::Background)
                && !lock(&self.state).syncs.is_empty()
            {
                break;
            }
            if pass == Pass::Background && !wb_over_bg_thresh(&self.tree, &wb.memcg) {
                break;
            }
            let inodes = self.dirty_inodes(wb, cutoff);
            if inodes.is_empty() {
                break;
            }
            let chunk = page_writeback::writeback_chunk_size(&self.tree, budget);
            let mut progress = 0;
            for inode in inodes {
                if budget == 0 {
                    break;
                }
                // An error leaves the page dirty and the error for the
                // next sync to report (`mapping_set_error`).
                let (n, _) = inode.writepages(chunk.min(budget), true);
                budget -= n;
                progress += n;
            }
            written += progress;
            if progress == 0 {
                break;
            }
        }
        written
    }

    /// `wb`'s dirty inodes dirtied at or before `cutoff`, oldest first.
    fn dirty_inodes(&self, wb: &Wb, cutoff: Duration) -> Vec<Arc<AddressSpace>> {
        let st = lock(&self.state);
        st.wbs.get(&wb.memcg.serial()).map_or_else(Vec::new, |e| {
            e.inodes
                .values()
                .filter(|i| i.when <= cutoff)
                .filter_map(|i| i.mapping.upgrade())
                .collect()
        })
    }
}

/// The first of the periods `first + k * interval` (k ≥ 0) at or after
/// `at`.
fn next_tick(first: Duration, interval: Duration, at: Duration) -> Duration {
    if at <= first {
        return first;
    }
    let step = interval.as_nanos().max(1);
    let k = (at - first).as_nanos().div_ceil(step);
    first + Duration::from_nanos(u64::try_from(k * step).unwrap_or(u64::MAX))
}

impl Flusher for Bdi {
    fn wakeup_all(&self) {
        self.kick(|st| {
            if st.has_dirty() {
                st.start_all = true;
            }
        });
    }

    fn run_due(&self, now: Duration) {
        Bdi::run_due(self, now);
    }
}

/// A balancing task's writeback ([`ThrottledWb`]).
struct Throttle<'a> {
    bdi: &'a Bdi,
    wb: Arc<Wb>,
}

impl ThrottledWb for Throttle<'_> {
    fn memcg(&self) -> &Arc<MemCgroup> {
        &self.wb.memcg
    }

    fn wb_dirty(&self) -> u64 {
        self.wb.dirty_pages()
    }

    fn dirty_exceeded(&self) -> bool {
        // Relaxed: a hint for the ratelimit.
        self.wb.dirty_exceeded.load(Ordering::Relaxed)
    }

    fn set_dirty_exceeded(&self, exceeded: bool) {
        // Relaxed: a hint for the ratelimit.
        self.wb.dirty_exceeded.store(exceeded, Ordering::Relaxed);
    }

    fn writeback_in_progress(&self) -> bool {
        lock(&self.bdi.state).running
    }

    fn start_background_writeback(&self) {
        self.bdi.kick(|st| st.woken = true);
    }

    fn pause(&self, pause: Duration) {
        let clock = self.bdi.tree.clock();
        clock.sleep(pause);
        page_writeback::run_due_flushers(&self.bdi.tree);
    }
}

/// A flusher thread ([`Bdi::spawn_thread`]): stopped and joined when
/// dropped, the device's flusher inline again (running what was left
/// queued).
#[cfg(not(loom))]
pub struct FlusherThread {
    bdi: Arc<Bdi>,
    handle: Option<std::thread::JoinHandle<()>>,
}

#[cfg(not(loom))]
impl Bdi {
    /// Runs this device's flusher on a thread of its own from now on (a
    /// real clock's: it sleeps its deadlines in real time).
    pub fn spawn_thread(self: &Arc<Self>) -> std::io::Result<FlusherThread> {
        lock(&self.state).threaded = true;
        let bdi = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("memcg-flush".into())
            .spawn(move || bdi.thread_main());
        match spawned {
            Ok(handle) => Ok(FlusherThread {
                bdi: Arc::clone(self),
                handle: Some(handle),
            }),
            Err(e) => {
                lock(&self.state).threaded = false;
                Err(e)
            }
        }
    }

    fn thread_main(&self) {
        let mut st = lock(&self.state);
        loop {
            if st.stop {
                return;
            }
            let now = self.tree.clock().now();
            if st.has_work(now) {
                st.running = true;
                drop(st);
                self.workfn(now);
                st = lock(&self.state);
                st.running = false;
                self.cond.notify_all();
                continue;
            }
            st = match st.timer {
                Some(at) => {
                    let (st, _) = self
                        .cond
                        .wait_timeout(st, at.saturating_sub(now))
                        .unwrap_or_else(|p| p.into_inner());
                    st
                }
                None => self.wait(st),
            };
        }
    }
}

#[cfg(not(loom))]
impl Drop for FlusherThread {
    fn drop(&mut self) {
        lock(&self.bdi.state).stop = true;
        self.bdi.cond.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
        {
            let mut st = lock(&self.bdi.state);
            st.stop = false;
            st.threaded = false;
        }
        // Work queued while it stopped (a sync someone waits for) runs
        // inline now.
        self.bdi.kick(|_| {});
    }
}

#[cfg(not(loom))]
impl std::fmt::Debug for FlusherThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlusherThread").finish_non_exhaustive()
    }
}
