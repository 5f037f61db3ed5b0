//! Tasks and their address spaces: what a page table and an `mm_struct`
//! are to the kernel, reduced to one anonymous mapping per task.
//!
//! A [`Mapping`] is a list of [`Block`]s, one per folio-sized run of its
//! pages as first populated. A block holds the [`Extent`]s covering it
//! (one, or several once a large folio was split) behind its own lock,
//! the way a page-table lock covers its entries: a task working on one
//! block does not stop reclaim from unmapping a folio of another.
//!
//! Every resident folio is on its memory cgroup's LRU with its block as
//! the reverse map ([`Rmap`]): reclaim asks the block to unmap and swap
//! the folio out, which it does only if its lock is free (`folio_trylock`
//! and the page-table lock in one), so reclaim never waits for a task
//! that is itself waiting for reclaim.
//!
//! A mapping lies at a fixed virtual address and its task's [`Mm`] keeps
//! the page tables its faults allocated, charged, until the mapping goes
//! (`pgtable.rs`).
//!
//! Invariants: a task's [`Mm`] counters equal the resident and swapped
//! pages of its blocks (updated under each block's lock); an extent's
//! resident folio is on an LRU list or isolated by a reclaimer that will
//! hand it back to the block; a mapping's page tables are held until
//! none of its blocks is left.
//!
//! Locking: block locks are taken one at a time. A thread may wait for a
//! block's lock only while it holds none; with one held (a fault that
//! charges, and so may reclaim or OOM-kill) it only try-locks others.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

use memcg::cgroup::Cgroup;
use memcg::folio::Folio;
use memcg::lruvec::{self, FolioRef, Rmap, RmapOutcome};
use memcg::memcontrol::{CgroupTree, MemCgroup};
use memcg::mm_types::PAGE_BYTES;
use memcg::psi::PsiTask;
use memcg::swapops::SwapEntry;

use crate::fill::Fill;
use crate::freezer::TaskFreezer;
use crate::pgtable::PageTables;
use crate::{Inner, lock};

/// `OOM_SCORE_ADJ_MIN`: a task the OOM killer never picks.
pub const OOM_SCORE_ADJ_MIN: i32 = -1000;

/// `OOM_SCORE_ADJ_MAX`.
pub const OOM_SCORE_ADJ_MAX: i32 = 1000;

/// A simulated task: a pid in a cgroup, with its memory counters. It runs
/// on simulated CPU `pid % nr_cpus` (consecutive pids, as the simulator
/// hands out, take the CPUs in turn; a host process's pid decides its).
#[derive(Debug)]
pub struct Task {
    pub(crate) pid: u32,
    pub(crate) cgroup: Mutex<Arc<Cgroup>>,
    pub(crate) mm: Arc<Mm>,
    cpu: usize,
    /// Its threads running now (an operation each, see
    /// `oom_kill::CurrentTask`), for pressure accounting: a move takes
    /// their state along.
    pub(crate) threads: Mutex<Vec<Weak<PsiTask>>>,
    /// `/proc/PID/oom_score_adj`.
    oom_score_adj: AtomicI32,
    /// Killed (by the OOM killer or `cgroup.kill`): gone from its cgroup,
    /// its memory reaped as soon as no operation holds it.
    killed: AtomicBool,
    /// Stands for a host process ([`crate::Sim::adopt_task`]).
    pub(crate) adopted: bool,
    /// Its freezer state (`freezer.rs`).
    pub(crate) freezer: TaskFreezer,
    /// Never killed: the host's init or a kernel thread
    /// (`oom_unkillable_task`; `cgroup.kill` skips kernel threads and a
    /// SIGKILL cannot reach global init).
    unkillable: AtomicBool,
}

impl Task {
    /// A task `pid` in `cgroup`; `adopted`: it stands for a host process.
    pub(crate) fn new(pid: u32, cgroup: Arc<Cgroup>, adopted: bool, nr_cpus: u32) -> Self {
        Self {
            pid,
            cgroup: Mutex::new(cgroup),
            mm: Arc::new(Mm::default()),
            cpu: (pid % nr_cpus.max(1)) as usize,
            threads: Mutex::new(Vec::new()),
            oom_score_adj: AtomicI32::new(0),
            killed: AtomicBool::new(false),
            adopted,
            freezer: TaskFreezer::default(),
            unkillable: AtomicBool::new(false),
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The simulated CPU it runs on.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Moves it to `cg` (a `cgroup.procs` write): its charges stay, the
    /// pressure state of its running threads moves along
    /// (`cgroup_move_task`).
    pub(crate) fn move_to(&self, tree: &CgroupTree, cg: &Arc<Cgroup>) {
        let mut cgroup = lock(&self.cgroup);
        *cgroup = Arc::clone(cg);
        let mut threads = lock(&self.threads);
        threads.retain(|t| t.strong_count() > 0);
        for t in threads.iter().filter_map(Weak::upgrade) {
            tree.psi_move(&t, cg);
        }
    }

    /// The cgroup it is in.
    pub fn cgroup(&self) -> Arc<Cgroup> {
        Arc::clone(&lock(&self.cgroup))
    }

    /// The memory cgroup its new memory is charged to, and its faults are
    /// counted in: its cgroup's, or the nearest ancestor's.
    pub fn memcg(&self) -> Arc<MemCgroup> {
        self.cgroup().effective_memcg()
    }

    /// `/proc/PID/oom_score_adj`.
    pub fn oom_score_adj(&self) -> i32 {
        // Relaxed: a setting read by the OOM killer.
        self.oom_score_adj.load(Ordering::Relaxed)
    }

    /// Sets `oom_score_adj`; `EINVAL` outside -1000..=1000.
    pub fn set_oom_score_adj(&self, adj: i32) -> Result<(), memcg::Errno> {
        if !(OOM_SCORE_ADJ_MIN..=OOM_SCORE_ADJ_MAX).contains(&adj) {
            return Err(memcg::Errno::EINVAL);
        }
        self.oom_score_adj.store(adj, Ordering::Relaxed);
        Ok(())
    }

    /// Whether it was killed.
    pub fn is_killed(&self) -> bool {
        // Acquire: pairs with the Release in `kill`.
        self.killed.load(Ordering::Acquire)
    }

    /// Makes it a task no kill reaches (the OOM killer passes it over,
    /// `cgroup.kill` leaves it in its cgroup): what a host layer marks the
    /// host's init and kernel threads as.
    pub fn set_unkillable(&self) {
        // Relaxed: a setting, made before the task is handed out by its
        // adopter; read by killers under no ordering with other data.
        self.unkillable.store(true, Ordering::Relaxed);
    }

    /// Whether no kill reaches it ([`Task::set_unkillable`]).
    pub fn is_unkillable(&self) -> bool {
        // Relaxed: see `set_unkillable`.
        self.unkillable.load(Ordering::Relaxed)
    }

    /// Marks it killed; false if it already was, or no kill reaches it.
    pub(crate) fn kill(&self) -> bool {
        if self.is_unkillable() {
            return false;
        }
        // AcqRel: one killer wins; pairs with `is_killed`.
        !self.killed.swap(true, Ordering::AcqRel)
    }
}

/// A task's memory counters (`mm_struct`'s `MM_ANONPAGES`,
/// `MM_SWAPENTS`) and page tables, what `oom_badness` weighs.
#[derive(Debug, Default)]
pub struct Mm {
    resident_pages: AtomicU64,
    swap_pages: AtomicU64,
    /// A host process's anonymous memory (`host_mm.rs`), counted too.
    pub(crate) host: Mutex<Weak<crate::host_mm::HostMm>>,
    /// Its page tables and their charges (`pgtable.rs`).
    pub(crate) page_tables: PageTables,
}

impl Mm {
    /// Resident pages (`get_mm_rss`).
    pub fn resident_pages(&self) -> u64 {
        // Relaxed: statistics.
        self.resident_pages.load(Ordering::Relaxed) + self.host_residency().resident
    }

    /// Pages on swap (`MM_SWAPENTS`).
    pub fn swap_pages(&self) -> u64 {
        self.swap_pages.load(Ordering::Relaxed) + self.host_residency().swapped
    }

    fn host_residency(&self) -> crate::host_mm::HostResidency {
        let host = lock(&self.host).upgrade();
        host.map(|h| h.residency()).unwrap_or_default()
    }

    /// Pages of page tables (`mm_pgtables_bytes / PAGE_SIZE`): the PTE,
    /// PMD and PUD tables its faults allocated, each one charged.
    pub fn pgtable_pages(&self) -> u64 {
        self.page_tables.nr_pages()
    }

    fn apply(&self, before: Residency, after: Residency) {
        let adjust = |c: &AtomicU64, from: u64, to: u64| {
            if to >= from {
                c.fetch_add(to - from, Ordering::Relaxed);
            } else {
                c.fetch_sub(from - to, Ordering::Relaxed);
            }
        };
        adjust(&self.resident_pages, before.resident, after.resident);
        adjust(&self.swap_pages, before.swapped, after.swapped);
    }
}

/// Pages of a mapping by where they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residency {
    /// In memory.
    pub resident: u64,
    /// On swap.
    pub swapped: u64,
}

impl std::ops::AddAssign for Residency {
    fn add_assign(&mut self, other: Self) {
        self.resident += other.resident;
        self.swapped += other.swapped;
    }
}

/// Where a run of a mapping's pages is.
pub(crate) enum State {
    Resident(Arc<Folio>),
    Swapped(SwapEntry),
}

/// A folio-sized run of a mapping.
pub(crate) struct Extent {
    pub(crate) first_page: u64,
    pub(crate) nr: u32,
    pub(crate) state: State,
}

impl Extent {
    /// Whether this run is on swap and covers the slot `entry`.
    pub(crate) fn swapped_at(&self, entry: SwapEntry) -> bool {
        let State::Swapped(first) = self.state else {
            return false;
        };
        first.swp_type() == entry.swp_type()
            && (first.swp_offset()..first.swp_offset() + u64::from(self.nr))
                .contains(&entry.swp_offset())
    }
}

fn residency(extents: &[Extent]) -> Residency {
    let mut r = Residency::default();
    for ext in extents {
        match ext.state {
            State::Resident(_) => r.resident += u64::from(ext.nr),
            State::Swapped(_) => r.swapped += u64::from(ext.nr),
        }
    }
    r
}

/// A block's extents, locked; dropping it brings the task's counters up
/// to date with whatever changed.
pub(crate) struct BlockGuard<'a> {
    block: &'a Block,
    extents: MutexGuard<'a, Vec<Extent>>,
    before: Residency,
}

impl std::ops::Deref for BlockGuard<'_> {
    type Target = Vec<Extent>;
    fn deref(&self) -> &Vec<Extent> {
        &self.extents
    }
}

impl std::ops::DerefMut for BlockGuard<'_> {
    fn deref_mut(&mut self) -> &mut Vec<Extent> {
        &mut self.extents
    }
}

impl Drop for BlockGuard<'_> {
    fn drop(&mut self) {
        self.block.mm.apply(self.before, residency(&self.extents));
    }
}

/// A folio-sized run of a mapping's pages and its lock; see the module
/// docs.
pub(crate) struct Block {
    me: Weak<Block>,
    sim: Weak<Inner>,
    mm: Arc<Mm>,
    extents: Mutex<Vec<Extent>>,
}

impl Block {
    /// A block of `extents` just faulted in by `mm`'s task: its folios go
    /// on the LRU with the block as their reverse map.
    pub(crate) fn new(sim: &Arc<Inner>, mm: &Arc<Mm>, extents: Vec<Extent>) -> Arc<Self> {
        let block = Arc::new_cyclic(|me| Block {
            me: me.clone(),
            sim: Arc::downgrade(sim),
            mm: Arc::clone(mm),
            extents: Mutex::new(Vec::new()),
        });
        {
            let mut guard = block.lock();
            for ext in &extents {
                if let State::Resident(folio) = &ext.state {
                    lruvec::folio_add_lru(folio, block.rmap());
                }
            }
            *guard = extents;
        }
        block
    }

    /// Its reverse-map handle for the LRU.
    pub(crate) fn rmap(&self) -> Weak<dyn Rmap> {
        self.me.clone()
    }

    /// Locks its extents, waiting (only with no other block held).
    pub(crate) fn lock(&self) -> BlockGuard<'_> {
        self.guard(lock(&self.extents))
    }

    /// Locks its extents if free.
    pub(crate) fn try_lock(&self) -> Option<BlockGuard<'_>> {
        match self.extents.try_lock() {
            Ok(extents) => Some(self.guard(extents)),
            Err(TryLockError::Poisoned(p)) => Some(self.guard(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn guard<'a>(&'a self, extents: MutexGuard<'a, Vec<Extent>>) -> BlockGuard<'a> {
        let before = residency(&extents);
        BlockGuard {
            block: self,
            extents,
            before,
        }
    }
}

impl Rmap for Block {
    /// The reference check, then `try_to_unmap` + `pageout`: only if the
    /// block's lock is free and the folio still mapped here; a large folio
    /// that finds no contiguous swap is split, and pieces that stay go
    /// back to the LRU active.
    fn reclaim(
        &self,
        folio: Arc<Folio>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> RmapOutcome {
        let Some(sim) = self.sim.upgrade() else {
            return RmapOutcome::Gone;
        };
        let Some(extents) = self.try_lock() else {
            return RmapOutcome::Busy(folio);
        };
        let outcome = self.reclaim_locked(&sim, extents, folio, target, references);
        // Its task may have been killed while the block was held here.
        sim.after_unlock();
        outcome
    }
}

impl Block {
    /// [`Rmap::reclaim`] with the block locked by `extents`.
    fn reclaim_locked(
        &self,
        sim: &Inner,
        mut extents: BlockGuard<'_>,
        folio: Arc<Folio>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> RmapOutcome {
        let Some(index) = extents
            .iter()
            .position(|e| matches!(&e.state, State::Resident(f) if Arc::ptr_eq(f, &folio)))
        else {
            return RmapOutcome::Gone;
        };
        match references(&folio) {
            FolioRef::Reclaim => {}
            referenced => return RmapOutcome::Referenced(folio, referenced),
        }
        // Ours must be the only other reference for a split to succeed.
        drop(folio);
        let ext = extents.remove(index);
        let State::Resident(folio) = ext.state else {
            unreachable!("matched as resident")
        };
        let mut pieces = sim.machine.reclaim_pageout(folio, target);
        if let [piece] = pieces.as_slice()
            && piece.outcome.is_err()
        {
            let Some(piece) = pieces.pop() else {
                unreachable!("one piece")
            };
            let Err((folio, _)) = piece.outcome else {
                unreachable!("checked")
            };
            extents.insert(
                index,
                Extent {
                    first_page: ext.first_page,
                    nr: ext.nr,
                    state: State::Resident(Arc::clone(&folio)),
                },
            );
            return RmapOutcome::NoSwap(folio);
        }
        let mut nr_pages = 0;
        let replaced: Vec<Extent> = pieces
            .into_iter()
            .map(|piece| {
                let state = match piece.outcome {
                    Ok(entry) => {
                        nr_pages += u64::from(piece.nr);
                        State::Swapped(entry)
                    }
                    Err((folio, _)) => {
                        lruvec::folio_putback_lru(&folio, self.rmap(), true);
                        State::Resident(folio)
                    }
                };
                Extent {
                    first_page: ext.first_page + u64::from(piece.first_page),
                    nr: piece.nr,
                    state,
                }
            })
            .collect();
        extents.splice(index..index, replaced);
        RmapOutcome::Reclaimed { nr_pages }
    }
}

/// One task's anonymous mapping.
pub(crate) struct Mapping {
    pub(crate) task: Arc<Task>,
    pub(crate) fill: Fill,
    pub(crate) stream: u64,
    /// The virtual address of its first page (`vm_start`).
    start: u64,
    blocks: Mutex<Vec<Arc<Block>>>,
}

impl Mapping {
    pub(crate) fn new(task: Arc<Task>, fill: Fill, stream: u64, start: u64) -> Self {
        Self {
            task,
            fill,
            stream,
            start,
            blocks: Mutex::new(Vec::new()),
        }
    }

    /// The virtual address of its page `page`.
    pub(crate) fn addr(&self, page: u64) -> u64 {
        self.start + page * PAGE_BYTES as u64
    }

    /// Its blocks, in page order.
    pub(crate) fn blocks(&self) -> Vec<Arc<Block>> {
        lock(&self.blocks).clone()
    }

    pub(crate) fn push_block(&self, block: Arc<Block>) {
        lock(&self.blocks).push(block);
    }

    /// Takes every block out (unmapping), for the caller to release.
    pub(crate) fn take_blocks(&self) -> Vec<Arc<Block>> {
        std::mem::take(&mut *lock(&self.blocks))
    }

    /// Pages in memory and on swap.
    pub(crate) fn residency(&self) -> Residency {
        let mut r = Residency::default();
        for block in self.blocks() {
            r += residency(&block.lock());
        }
        r
    }
}

/// Releases a block's pages: resident folios are dropped (uncharged),
/// swap slots freed. Waits for the lock if `wait`, else leaves a busy
/// block alone and returns false.
pub(crate) fn release_block(
    sim: &Inner,
    block: &Block,
    wait: bool,
    first_error: &mut Option<memcg::swapfile::SwapError>,
) -> bool {
    let guard = if wait {
        Some(block.lock())
    } else {
        block.try_lock()
    };
    let Some(mut extents) = guard else {
        return false;
    };
    for ext in extents.drain(..) {
        if let State::Swapped(entry) = ext.state
            && let Err(e) = sim.machine.swap().swap_free(entry, ext.nr)
        {
            first_error.get_or_insert(e);
        }
    }
    true
}
