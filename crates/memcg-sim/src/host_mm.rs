//! A host process's anonymous memory under the simulator (`memcg run`):
//! the page table of a real address space whose pages the simulated memcg
//! charges, reclaims to the simulated swap and brings back.
//!
//! The process's memory is registered with `userfaultfd` (by the shim, in
//! the process), and the server's handler for that process turns each
//! fault into a call here ([`HostMm::fault`]); the process's own unmaps
//! and `MADV_DONTNEED`s arrive as [`HostMm::remove`], moves as
//! [`HostMm::remap`]. The bytes stay in the process: a resident page is a
//! charged folio with no frame of its own ([`Folio::new_unbacked`]) on its
//! memory cgroup's LRU, with this table as its reverse map.
//!
//! - First touch (`do_anonymous_page`): the page is charged to the
//!   process's memory cgroup through the charge path simulated tasks use
//!   (stock, reclaim, `memory.high` throttling, OOM), then the handler maps
//!   a zero page (read) or a zeroed copy (write).
//! - Reclaim ([`Rmap::reclaim`]): the page is write-protected in the
//!   process (a write now waits in the handler), copied out of it into a
//!   frame, and swapped out as any anonymous folio (swap cache,
//!   `swap_cgroup` record, zswap); the folio goes, uncharging it; the
//!   process is asked to drop its copy ([`HostPages::drop_pages`]), and its
//!   word that it did ([`HostMm::dropped`]) completes the eviction and
//!   wakes any writer.
//! - Next touch (`do_swap_page`): swapped in with the kernel's charge rule
//!   (the recorded memory cgroup, refault/workingset, `pgmajfault`), copied
//!   into the process, and its frame given back.
//! - Pages touched before their range was registered (the heap's first
//!   chunk, mapped by the loader before the process had its
//!   `userfaultfd`): charged when the range is registered
//!   ([`HostMm::adopt`]).
//! - Write-protect fault on a page this table does not hold: a page the
//!   process inherited from its parent, written first (copy on write):
//!   charged to this process from then on.
//!
//! What the simulator sees of accesses: faults only (first touch, swap-in,
//! a write during eviction). A resident page is young once, when faulted;
//! it is not seen again, so reclaim ages host pages by fault order.
//!
//! Invariants: every page in the table as [`Page::Resident`] holds one
//! folio charged to it, listed in `by_folio` under its address, and on an
//! LRU list or isolated by a reclaimer; a [`Page::Swapped`] or
//! [`Page::Dropping`] page holds one reference to its swap entry. When the
//! process dies ([`HostMm::release`]) every folio and entry goes.
//!
//! Locking: `pages` is held only for table changes and the handler's calls
//! into the process that cannot wait on it (`UFFDIO_COPY`/`ZEROPAGE`);
//! charging and reclaim's copy-out run without it, the page marked
//! (`Faulting`, `Evicting`) meanwhile. Reclaim only
//! try-locks it. One handler thread serves a process's faults and
//! events in order, so no two faults of a process are in flight at once.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError, Weak};

use memcg::folio::Folio;
use memcg::lruvec::{self, FolioRef, Rmap, RmapOutcome};
use memcg::memcontrol::{Gfp, MemCgroup, VmEvent};
use memcg::mm_types::PAGE_BYTES;
use memcg::swapops::SwapEntry;

use crate::mm::Task;
use crate::oom_kill::CurrentTask;
use crate::{Inner, SimError, lock};

/// Bytes of a page, as an address step.
const PAGE: u64 = PAGE_BYTES as u64;

/// What the simulator needs of the process beyond the fault handler:
/// implemented over `userfaultfd`, `process_vm_readv` and the shim's agent
/// by the server.
pub trait HostPages: Send + Sync {
    /// Write-protects (`on`) or unprotects the pages of `[start, start +
    /// len)` (`UFFDIO_WRITEPROTECT`; unprotecting wakes their waiting
    /// writers).
    fn write_protect(&self, start: u64, len: u64, on: bool) -> io::Result<()>;
    /// Copies `buf.len()` bytes of the process from `addr` on into `buf`
    /// (whole pages).
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Asks the process to drop the (write-protected) pages at `addrs`;
    /// its word that it did comes back as [`HostMm::dropped`], page by
    /// page.
    fn drop_pages(&self, addrs: &[u64]);
    /// Whether the process has a page at `addr` (present, or on the
    /// host's own swap): false once it was dropped or unmapped.
    fn mapped(&self, addr: u64) -> bool;
}

/// How the handler resolves a fault in the process (`userfaultfd`
/// ioctls). `EAGAIN` (the address space is changing: an event is waiting
/// to be read) makes the fault come back later as [`FaultOutcome::Again`].
pub trait FaultIo {
    /// Maps a zero page at `addr` (`UFFDIO_ZEROPAGE`), or a zeroed copy
    /// for a `write`.
    fn zero(&mut self, addr: u64, write: bool) -> io::Result<()>;
    /// Maps a copy of `bytes` at `addr` (`UFFDIO_COPY`).
    fn copy(&mut self, addr: u64, bytes: &[u8]) -> io::Result<()>;
    /// Maps `nr` zeroed pages from `start` on, in one `UFFDIO_COPY`: how
    /// many were mapped before a page already there (or a change of the
    /// address space) stopped it; an error if none was.
    fn fill_zero(&mut self, start: u64, nr: u64) -> io::Result<u64>;
    /// Clears the write protection of the page at `addr` and wakes.
    fn unprotect(&mut self, addr: u64) -> io::Result<()>;
    /// Wakes the threads waiting on a fault at `addr` (`UFFDIO_WAKE`).
    fn wake(&mut self, addr: u64);
}

/// What a fault came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOutcome {
    /// Resolved: the faulting thread runs on.
    Done,
    /// Not now (`EAGAIN`): hand it in again after the pending events.
    Again,
    /// Left waiting: the page is on its way out; the drop that completes
    /// the eviction wakes it.
    Parked,
    /// The process was killed (or is gone): left for its death to end.
    Killed,
}

/// Which fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// No page there (`UFFD_PAGEFAULT_FLAG_WRITE` says `write`).
    Missing {
        /// A write access.
        write: bool,
    },
    /// A write to a write-protected page (`UFFD_PAGEFAULT_FLAG_WP`).
    WriteProtect,
}

/// Where one page of the process is.
enum Page {
    /// In the process, charged.
    Resident(Arc<Folio>),
    /// Being charged by the handler (no lock held meanwhile).
    Faulting,
    /// Swapped in and charged, its bytes in the folio, not yet mapped
    /// (the copy met `EAGAIN`): mapped at the fault's retry.
    Filled(Arc<Folio>),
    /// Being copied out by a reclaimer, which holds the folio.
    /// `removed`: unmapped meanwhile, so the eviction is dropped.
    Evicting { removed: bool },
    /// Swapped out; the process's copy not yet dropped (write-protected).
    Dropping(SwapEntry),
    /// Swapped out and gone from the process.
    Swapped(SwapEntry),
}

#[derive(Default)]
struct Pages {
    map: BTreeMap<u64, Page>,
    /// Resident folios by address of the folio, to their page address.
    by_folio: HashMap<usize, u64>,
    /// Drops asked of the agent and not yet answered, by address. A page
    /// with one outstanding is not evicted: a drop asked for an earlier
    /// page at that address (since unmapped, the address mapped again)
    /// would otherwise take the new page as it is write-protected for its
    /// own eviction.
    drops: HashMap<u64, u32>,
}

fn key(folio: &Arc<Folio>) -> usize {
    Arc::as_ptr(folio) as usize
}

impl Pages {
    /// A drop asked of the agent at `addr` was answered.
    fn answered(&mut self, addr: u64) {
        if let Some(n) = self.drops.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.drops.remove(&addr);
            }
        }
    }

    fn insert_resident(&mut self, addr: u64, folio: Arc<Folio>) {
        self.by_folio.insert(key(&folio), addr);
        let old = self.map.insert(addr, Page::Resident(folio));
        debug_assert!(
            !matches!(old, Some(Page::Resident(_))),
            "a page charged twice"
        );
    }
}

/// A host process's anonymous memory; see the module docs.
pub struct HostMm {
    me: Weak<HostMm>,
    sim: Weak<Inner>,
    task: Arc<Task>,
    host: Box<dyn HostPages>,
    pages: Mutex<Pages>,
    /// Released: the process died or exec'd; nothing is charged again.
    dead: AtomicBool,
    /// Reclaim leaves it alone (a fork is copying it).
    pinned: AtomicBool,
}

/// Pages of a host process by where they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostResidency {
    /// Resident and charged.
    pub resident: u64,
    /// On swap (dropped from the process or being dropped).
    pub swapped: u64,
}

impl HostMm {
    pub(crate) fn new(sim: &Arc<Inner>, task: Arc<Task>, host: Box<dyn HostPages>) -> Arc<Self> {
        Arc::new_cyclic(|me| HostMm {
            me: me.clone(),
            sim: Arc::downgrade(sim),
            task,
            host,
            pages: Mutex::new(Pages::default()),
            dead: AtomicBool::new(false),
            pinned: AtomicBool::new(false),
        })
    }

    /// The task it belongs to.
    pub fn task(&self) -> &Arc<Task> {
        &self.task
    }

    fn rmap(&self) -> Weak<dyn Rmap> {
        self.me.clone()
    }

    fn is_dead(&self) -> bool {
        // Acquire: pairs with the store in `release`.
        self.dead.load(Ordering::Acquire) || self.task.is_killed()
    }

    /// Its pages by where they are.
    pub fn residency(&self) -> HostResidency {
        let pages = lock(&self.pages);
        let mut r = HostResidency::default();
        for page in pages.map.values() {
            match page {
                Page::Resident(_) | Page::Evicting { .. } | Page::Faulting | Page::Filled(_) => {
                    r.resident += 1
                }
                Page::Dropping(_) | Page::Swapped(_) => r.swapped += 1,
            }
        }
        r
    }

    /// Keeps reclaim away (`on`) while a fork copies the address space,
    /// or lets it back.
    pub fn pin(&self, on: bool) {
        // Relaxed: a hint reclaim reads under the table lock.
        self.pinned.store(on, Ordering::Relaxed);
    }

    /// A fork: every page of it on swap (or on its way there) gets a
    /// second reference (`swap_duplicate`, as `copy_pte_range` takes for
    /// a swap entry), for the child to inherit ([`HostMm::inherit`]).
    /// Pages still in the process are copied by the fork itself.
    pub fn fork_swap(&self) -> Vec<(u64, SwapEntry)> {
        let Some(sim) = self.sim.upgrade() else {
            return Vec::new();
        };
        let pages = lock(&self.pages);
        pages
            .map
            .iter()
            .filter_map(|(&addr, page)| match page {
                Page::Swapped(e) | Page::Dropping(e) => Some((addr, *e)),
                _ => None,
            })
            .filter(|&(_, e)| sim.machine.swap().swap_dup(e, 1).is_ok())
            .collect()
    }

    /// The child of a fork takes the swap references [`HostMm::fork_swap`]
    /// made for it: those pages fault in from swap (charged by the swap-in
    /// rule). A page the fork copied after all (it was still being
    /// dropped) gives its reference back at its first write.
    pub fn inherit(&self, swapped: Vec<(u64, SwapEntry)>) {
        let mut pages = lock(&self.pages);
        for (addr, entry) in swapped {
            let old = pages.map.insert(addr, Page::Swapped(entry));
            debug_assert!(old.is_none(), "a new process holds nothing yet");
        }
    }

    /// Gives back swap references made by [`HostMm::fork_swap`] for a
    /// child that never came.
    pub fn drop_swap(sim: &crate::Sim, swapped: Vec<(u64, SwapEntry)>) {
        release(
            &sim.inner,
            swapped.into_iter().map(|(_, e)| Freed::Entry(e)).collect(),
        );
    }

    /// The fast path of a first touch or a swap-in, for the handler's
    /// reader: a page that needs no reclaim and no `memory.high` work
    /// (every memory cgroup up the tree below its `high` and `max`) is
    /// charged without reclaim and mapped at once, with no hop to the
    /// handler thread. `None` when the fault needs the handler (any other
    /// fault, a page shared with a fork, or a charge that would reclaim).
    pub fn fault_fast(
        &self,
        addr: u64,
        kind: FaultKind,
        io: &mut dyn FaultIo,
    ) -> Option<FaultOutcome> {
        let FaultKind::Missing { write } = kind else {
            return None;
        };
        let sim = self.sim.upgrade()?;
        let memcg = self.task.memcg();
        let roomy = |c: &Arc<MemCgroup>| c.memory().usage() < c.memory().high();
        if self.is_dead() || !std::iter::once(&memcg).chain(memcg.ancestors()).all(roomy) {
            return None;
        }
        let mut pages = lock(&self.pages);
        let entry = match pages.map.get(&addr) {
            None => None,
            Some(Page::Swapped(entry)) => Some(*entry),
            Some(_) => return None,
        };
        if entry.is_none()
            && write
            && let Some(outcome) = self.fill_folio(&sim, &mut pages, addr, io)
        {
            return Some(outcome);
        }
        let tree = sim.machine.fs().tree();
        let swap = sim.machine.swap();
        let folio = {
            let _current = CurrentTask::enter(tree, &self.task);
            match entry {
                // Shared with a fork: the handler's copying path.
                Some(e) if swap.swapfiles().count(e).ok()? > 1 => return None,
                Some(e) => swap.do_swap_page(e, 1, &memcg, Gfp::NoReclaim).ok()?,
                None => Arc::new(Folio::new_unbacked(tree, &memcg, 1, Gfp::NoReclaim).ok()?),
            }
        };
        memcg.count_vm_event(VmEvent::Pgfault, 1);
        if entry.is_some() {
            pages.map.insert(addr, Page::Filled(folio));
            return match self.map_filled(&mut pages, addr, io) {
                // A copy that must wait stays filled, for the handler.
                FaultOutcome::Again => None,
                other => Some(other),
            };
        }
        match settled(io.zero(addr, write), addr, io) {
            FaultOutcome::Done => {
                lruvec::folio_add_lru(&folio, self.rmap());
                pages.insert_resident(addr, folio);
                Some(FaultOutcome::Done)
            }
            // The handler does it properly (the charge goes back).
            _ => None,
        }
    }

    /// A fault at `addr` (page aligned), resolved through `io`.
    pub fn fault(
        &self,
        addr: u64,
        kind: FaultKind,
        io: &mut dyn FaultIo,
    ) -> Result<FaultOutcome, SimError> {
        debug_assert_eq!(addr % PAGE, 0);
        let Some(sim) = self.sim.upgrade() else {
            return Ok(FaultOutcome::Killed);
        };
        if self.is_dead() {
            return Ok(FaultOutcome::Killed);
        }
        let mut pages = lock(&self.pages);
        let entry = match (pages.map.get(&addr), kind) {
            (Some(Page::Resident(_)), FaultKind::WriteProtect) => {
                return Ok(settled(io.unprotect(addr), addr, io));
            }
            (Some(Page::Resident(_)), FaultKind::Missing { .. }) => {
                // Another thread's fault on the same page got there first
                // (`EEXIST`: wake this one), or a reclaimer's read of a
                // page the process dropped as it evicted it.
                return Ok(settled(io.zero(addr, false), addr, io));
            }
            (Some(Page::Evicting { .. }), FaultKind::Missing { .. }) => {
                if let Some(Page::Evicting { removed }) = pages.map.get_mut(&addr) {
                    *removed = true;
                }
                return Ok(settled(io.zero(addr, false), addr, io));
            }
            (Some(Page::Evicting { .. } | Page::Dropping(_)), FaultKind::WriteProtect) => {
                return Ok(FaultOutcome::Parked);
            }
            (Some(Page::Swapped(_)) | None, FaultKind::WriteProtect) if !self.host.mapped(addr) => {
                // A write that met the protection of a page being dropped,
                // heard of only after the drop (the server may read the
                // agent's word before the fault's message): its page is
                // on swap and gone from the process. The writer, woken by
                // the drop, faults on the missing page and swaps it in.
                io.wake(addr);
                return Ok(FaultOutcome::Done);
            }
            (Some(Page::Swapped(_)), FaultKind::WriteProtect) => {
                // A page inherited as swapped that the fork copied after
                // all (it was being dropped): its copy is here; its swap
                // reference goes, and its first write charges it.
                if let Some(Page::Swapped(entry)) = pages.map.remove(&addr) {
                    release(&sim, vec![Freed::Entry(entry)]);
                }
                None
            }
            (Some(Page::Filled(_)), _) => return Ok(self.map_filled(&mut pages, addr, io)),
            (Some(Page::Swapped(e) | Page::Dropping(e)), FaultKind::Missing { .. }) => Some(*e),
            (Some(Page::Faulting), _) => unreachable!("one fault of a process at a time"),
            (None, FaultKind::Missing { write: true }) => {
                if let Some(outcome) = self.fill_folio(&sim, &mut pages, addr, io) {
                    return Ok(outcome);
                }
                None
            }
            (None, _) => None,
        };
        pages.map.insert(addr, Page::Faulting);
        drop(pages);
        self.charge_and_map(&sim, addr, kind, entry, io)
    }

    /// A fault of `kind` at `addr`, [`Page::Faulting`] there: the charge
    /// (no lock held), then the page mapped in the process.
    fn charge_and_map(
        &self,
        sim: &Inner,
        addr: u64,
        kind: FaultKind,
        entry: Option<SwapEntry>,
        io: &mut dyn FaultIo,
    ) -> Result<FaultOutcome, SimError> {
        let charged = self.charge(sim, entry);
        let mut pages = lock(&self.pages);
        debug_assert!(matches!(pages.map.get(&addr), Some(Page::Faulting)));
        let folio = match charged {
            Ok(folio) => folio,
            Err(e) => {
                // A failed swap-in keeps its entry.
                match entry {
                    Some(entry) => pages.map.insert(addr, Page::Swapped(entry)),
                    None => pages.map.remove(&addr),
                };
                drop(pages);
                return match self.is_dead() {
                    true => Ok(FaultOutcome::Killed),
                    false => Err(e),
                };
            }
        };
        if self.is_dead() {
            pages.map.remove(&addr);
            return Ok(FaultOutcome::Killed);
        }
        if entry.is_some() {
            pages.map.insert(addr, Page::Filled(folio));
            return Ok(self.map_filled(&mut pages, addr, io));
        }
        let write = matches!(kind, FaultKind::Missing { write: true });
        let mapped = match kind {
            FaultKind::WriteProtect => io.unprotect(addr),
            FaultKind::Missing { .. } => io.zero(addr, write),
        };
        match settled(mapped, addr, io) {
            FaultOutcome::Done => {
                lruvec::folio_add_lru(&folio, self.rmap());
                pages.insert_resident(addr, folio);
                Ok(FaultOutcome::Done)
            }
            other => {
                // Not mapped: the charge goes back with the folio.
                pages.map.remove(&addr);
                Ok(other)
            }
        }
    }

    /// The folio for a fault: swapped in from `entry` (`do_swap_page`:
    /// the kernel's charge rule, `pgmajfault`) or a new page charged to
    /// the process's memory cgroup, as its task (`current`).
    fn charge(&self, sim: &Inner, entry: Option<SwapEntry>) -> Result<Arc<Folio>, SimError> {
        let tree = sim.machine.fs().tree();
        let memcg = self.task.memcg();
        let _current = CurrentTask::enter(tree, &self.task);
        memcg.count_vm_event(VmEvent::Pgfault, 1);
        let swap = sim.machine.swap();
        match entry {
            Some(entry) if swap.swapfiles().count(entry)? > 1 => {
                // Shared with a fork's child (or parent): a copy of its
                // own, so that no process's page is another's folio.
                let bytes = swap.peek(entry, 1)?;
                let folio = Folio::new_unbacked(tree, &memcg, 1, Gfp::Kernel)?;
                folio.backed_bytes().copy_from_slice(&bytes);
                swap.swap_free(entry, 1)?;
                memcg.count_vm_event(VmEvent::Pgmajfault, 1);
                Ok(Arc::new(folio))
            }
            Some(entry) => Ok(swap.do_swap_page(entry, 1, &memcg, Gfp::Kernel)?),
            None => Ok(Arc::new(Folio::new_unbacked(tree, &memcg, 1, Gfp::Kernel)?)),
        }
    }

    /// A first write at `addr` as an mTHP fault (`alloc_anon_folio`): the
    /// largest folio size the THP settings allow
    /// ([`memcg::huge_memory`]; up to [`MAX_FILL_ORDER`]) whose naturally
    /// aligned range holds no page
    /// the table knows and whose charge needs no reclaim is charged as one
    /// folio and filled with zeros in one copy; its pages are then kept
    /// one by one (the folio split at once). `None` when no size fits (or
    /// the fill did not reach `addr`): the caller maps the single page.
    /// Pages the fill mapped are charged and kept either way.
    fn fill_folio(
        &self,
        sim: &Inner,
        pages: &mut Pages,
        addr: u64,
        io: &mut dyn FaultIo,
    ) -> Option<FaultOutcome> {
        let tree = sim.machine.fs().tree();
        let memcg = self.task.memcg();
        let orders = sim.machine.thp().anon_fault_orders();
        for order in orders.into_iter().filter(|&o| o <= MAX_FILL_ORDER) {
            let nr = 1u64 << order;
            let start = addr & !(nr * PAGE - 1);
            if pages.map.range(start..start + nr * PAGE).next().is_some() {
                continue;
            }
            let folios = {
                let _current = CurrentTask::enter(tree, &self.task);
                // `nr` is at most 512 (`MAX_ANON_ORDER`).
                match Folio::new_unbacked_split(tree, &memcg, nr as u32, Gfp::NoReclaim) {
                    Ok(folios) => folios,
                    Err(_) => continue,
                }
            };
            // Not mapped (another mapping there, the range not all ours):
            // the charge goes back with the folios; a single page then.
            let mapped = io.fill_zero(start, nr).ok()?;
            debug_assert!(mapped <= nr);
            for (i, folio) in folios.into_iter().take(mapped as usize).enumerate() {
                let folio = Arc::new(folio);
                lruvec::folio_add_lru(&folio, self.rmap());
                pages.insert_resident(start + i as u64 * PAGE, folio);
            }
            if addr < start + mapped * PAGE {
                memcg.count_vm_event(VmEvent::Pgfault, 1);
                return Some(FaultOutcome::Done);
            }
            return None;
        }
        None
    }

    /// Maps the swapped-in folio waiting at `addr` ([`Page::Filled`]) and
    /// gives its frame back; on `EAGAIN` it keeps waiting.
    fn map_filled(&self, pages: &mut Pages, addr: u64, io: &mut dyn FaultIo) -> FaultOutcome {
        let Some(Page::Filled(folio)) = pages.map.remove(&addr) else {
            unreachable!("called on a filled page")
        };
        let copied = io.copy(addr, &folio.bytes());
        match settled(copied, addr, io) {
            FaultOutcome::Again => {
                pages.map.insert(addr, Page::Filled(folio));
                FaultOutcome::Again
            }
            FaultOutcome::Done => {
                // Its bytes live in the process now (unless the swap cache
                // still shares the folio).
                if Arc::strong_count(&folio) == 1 {
                    folio.release_bytes();
                }
                lruvec::folio_add_lru(&folio, self.rmap());
                pages.insert_resident(addr, folio);
                FaultOutcome::Done
            }
            // The range is gone: so is the page.
            other => other,
        }
    }

    /// A fault the handler's reader resolves at once, before the handler
    /// sees it: a reclaimer's own read of a page the process dropped while
    /// it was being evicted (the reclaimer may be the handler itself). It
    /// reads zeros, as the process would, and the eviction is dropped.
    /// False for any other fault.
    pub fn fault_by_reclaim(&self, addr: u64, io: &mut dyn FaultIo) -> bool {
        let mut pages = lock(&self.pages);
        let Some(Page::Evicting { removed }) = pages.map.get_mut(&addr) else {
            return false;
        };
        *removed = true;
        let _ = io.zero(addr, false);
        true
    }

    /// The pages of `[start, end)` the process touched before the range
    /// was registered (the heap's first chunk, mapped by the loader's
    /// first `malloc` before the process had its `userfaultfd`): each page
    /// present in the process and unknown here is charged as its first
    /// touch was in the kernel, and kept as resident. A page whose charge
    /// fails stays the host's. How many were charged.
    pub fn adopt(&self, start: u64, end: u64) -> u64 {
        let Some(sim) = self.sim.upgrade() else {
            return 0;
        };
        let mut adopted = 0;
        for addr in (start..end).step_by(PAGE as usize) {
            let mut pages = lock(&self.pages);
            if self.is_dead() {
                break;
            }
            if pages.map.contains_key(&addr) || !self.host.mapped(addr) {
                continue;
            }
            // Marked while charging (no lock held): the reader's fast
            // path leaves a marked page to the handler, which is here.
            pages.map.insert(addr, Page::Faulting);
            drop(pages);
            let charged = self.charge(&sim, None);
            let mut pages = lock(&self.pages);
            pages.map.remove(&addr);
            if let Ok(folio) = charged
                && !self.is_dead()
            {
                lruvec::folio_add_lru(&folio, self.rmap());
                pages.insert_resident(addr, folio);
                adopted += 1;
            }
        }
        adopted
    }

    /// The process's agent dropped the page at `addr` as reclaim asked
    /// ([`HostPages::drop_pages`]): it is only on swap now, and its waiting
    /// writers fault again.
    pub fn dropped(&self, addr: u64, io: &mut dyn FaultIo) {
        let mut pages = lock(&self.pages);
        pages.answered(addr);
        if let Some(Page::Dropping(entry)) = pages.map.get(&addr) {
            let entry = *entry;
            pages.map.insert(addr, Page::Swapped(entry));
            io.wake(addr);
        }
    }

    /// The process's agent did not drop the page at `addr` (no longer
    /// write-protected: written or replaced since; or locked): the drop
    /// asked is answered.
    pub fn not_dropped(&self, addr: u64) {
        lock(&self.pages).answered(addr);
    }

    /// The process dropped (`MADV_DONTNEED`/`MADV_FREE`) `[start, end)`:
    /// its pages and swap entries there go.
    pub fn remove(&self, start: u64, end: u64) {
        self.forget(start, end);
    }

    /// The process unmapped `[start, end)`: its pages and swap entries
    /// there go.
    pub fn unmap(&self, start: u64, end: u64) {
        self.forget(start, end);
    }

    fn forget(&self, start: u64, end: u64) {
        let Some(sim) = self.sim.upgrade() else {
            return;
        };
        let mut freed = Vec::new();
        let mut pages = lock(&self.pages);
        let addrs: Vec<u64> = pages.map.range(start..end).map(|(&a, _)| a).collect();
        for addr in addrs {
            match pages.map.remove(&addr) {
                Some(Page::Resident(folio)) => {
                    pages.by_folio.remove(&key(&folio));
                    freed.push(Freed::Folio(folio));
                }
                Some(Page::Evicting { .. }) => {
                    pages.map.insert(addr, Page::Evicting { removed: true });
                }
                Some(Page::Dropping(entry) | Page::Swapped(entry)) => {
                    freed.push(Freed::Entry(entry));
                }
                Some(Page::Filled(folio)) => freed.push(Freed::Folio(folio)),
                Some(Page::Faulting) => unreachable!("one handler per process"),
                None => {}
            }
        }
        drop(pages);
        release(&sim, freed);
    }

    /// The process moved `[from, from + len)` to `to` (`mremap`): its
    /// pages move with it.
    pub fn remap(&self, from: u64, to: u64, len: u64) {
        let mut pages = lock(&self.pages);
        let moved: Vec<(u64, Page)> = pages
            .map
            .range(from..from + len)
            .map(|(&a, _)| a)
            .collect::<Vec<_>>()
            .into_iter()
            .filter_map(|a| pages.map.remove(&a).map(|p| (a, p)))
            .collect();
        for (addr, page) in moved {
            let new = addr - from + to;
            if let Page::Resident(folio) = &page {
                pages.by_folio.insert(key(folio), new);
            }
            pages.map.insert(new, page);
        }
    }

    /// The process is gone (exit, exec, kill): every page's charge and
    /// swap entry goes. Pages a reclaimer or the handler holds go when
    /// they let go (they find it dead).
    pub fn release(&self) {
        // Release: pairs with the load in `is_dead`.
        self.dead.store(true, Ordering::Release);
        let Some(sim) = self.sim.upgrade() else {
            return;
        };
        let mut pages = lock(&self.pages);
        let mut freed = Vec::new();
        let all = std::mem::take(&mut pages.map);
        pages.by_folio.clear();
        pages.drops.clear();
        for (addr, page) in all {
            match page {
                Page::Resident(folio) | Page::Filled(folio) => freed.push(Freed::Folio(folio)),
                Page::Dropping(entry) | Page::Swapped(entry) => freed.push(Freed::Entry(entry)),
                Page::Evicting { .. } | Page::Faulting => {
                    // Its holder sees the mm dead and frees it.
                    pages.map.insert(addr, page);
                }
            }
        }
        drop(pages);
        release(&sim, freed);
    }
}

/// What a table change let go of, released with no lock held.
enum Freed {
    Folio(Arc<Folio>),
    Entry(SwapEntry),
}

fn release(sim: &Inner, freed: Vec<Freed>) {
    for f in freed {
        match f {
            Freed::Folio(folio) => drop(folio),
            Freed::Entry(entry) => {
                // An entry we hold a reference to: only a broken device
                // fails here, and there is nothing left to undo.
                let _ = sim.machine.swap().swap_free(entry, 1);
            }
        }
    }
}

/// What an ioctl's result means for the fault: done (`EEXIST`: another
/// fault mapped it first, wake this one), again (`EAGAIN`), or gone
/// (`ENOENT`/`ESRCH`: the range or the process went).
fn settled(result: io::Result<()>, addr: u64, io: &mut dyn FaultIo) -> FaultOutcome {
    match result.map_err(|e| e.raw_os_error()) {
        Ok(()) => FaultOutcome::Done,
        Err(Some(e)) if e == EEXIST => {
            io.wake(addr);
            FaultOutcome::Done
        }
        Err(Some(e)) if e == EAGAIN => FaultOutcome::Again,
        Err(_) => FaultOutcome::Killed,
    }
}

const EEXIST: i32 = 17;
/// Tries of a write protection that meets `EAGAIN` before the eviction is
/// given up (the folio stays, busy).
const MAX_PROTECT_TRIES: u32 = 10_000;
const EAGAIN: i32 = 11;

/// The largest folio a first write fills: 1M. A PMD-sized THP (order 9,
/// which the kernel's defaults allow) is not filled: the kernel maps and
/// counts it as one huge page (`anon_thp`, `thp_fault_alloc`), which a
/// fill of small pages split at once would misrepresent; such faults take
/// single pages, as before folio fills.
const MAX_FILL_ORDER: u32 = memcg::huge_memory::MAX_ANON_ORDER - 1;

/// Pages of a reclaim batch copied out of the process together (a run of
/// adjacent pages: one write protection, one read).
const MAX_RUN_PAGES: usize = 64;

/// A page reclaim took: the caller's index for its outcome, its address,
/// its folio.
struct Evictee {
    index: usize,
    addr: u64,
    folio: Arc<Folio>,
}

impl Rmap for HostMm {
    /// Reclaim of a host page: [`Rmap::reclaim_batch`] of one.
    fn reclaim(
        &self,
        folio: Arc<Folio>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> RmapOutcome {
        let mut outcomes = self.reclaim_batch(vec![folio], target, references);
        debug_assert_eq!(outcomes.len(), 1);
        outcomes.pop().unwrap_or(RmapOutcome::Gone)
    }

    /// Reclaim of host pages: each is write-protected in the process,
    /// copied out, swapped out, and the process asked to drop it (module
    /// docs); adjacent pages are protected and copied together, and the
    /// drops asked in one message. Only try-locks the table; the copy-out
    /// runs without it.
    fn reclaim_batch(
        &self,
        folios: Vec<Arc<Folio>>,
        target: &MemCgroup,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> Vec<RmapOutcome> {
        let Some(sim) = self.sim.upgrade() else {
            return folios.iter().map(|_| RmapOutcome::Gone).collect();
        };
        let mut outcomes: Vec<Option<RmapOutcome>> = folios.iter().map(|_| None).collect();
        let mut chosen = Vec::new();
        {
            let mut pages = match self.pages.try_lock() {
                Ok(p) => p,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    return folios.into_iter().map(RmapOutcome::Busy).collect();
                }
            };
            for (index, folio) in folios.into_iter().enumerate() {
                match self.choose(&mut pages, folio, references) {
                    Ok((addr, folio)) => chosen.push(Evictee { index, addr, folio }),
                    Err(outcome) => outcomes[index] = Some(outcome),
                }
            }
        }
        if !chosen.is_empty() {
            for (index, outcome) in self.evict(&sim, chosen, target) {
                outcomes[index] = Some(outcome);
            }
            sim.after_unlock();
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or(RmapOutcome::Gone))
            .collect()
    }
}

impl HostMm {
    /// Whether reclaim takes `folio` now (the table locked): its page is
    /// marked evicting and its address returned; or what becomes of a
    /// folio left.
    fn choose(
        &self,
        pages: &mut Pages,
        folio: Arc<Folio>,
        references: &mut dyn FnMut(&Folio) -> FolioRef,
    ) -> Result<(u64, Arc<Folio>), RmapOutcome> {
        let Some(&addr) = pages.by_folio.get(&key(&folio)) else {
            return Err(RmapOutcome::Gone);
        };
        match references(&folio) {
            FolioRef::Reclaim => {}
            referenced => return Err(RmapOutcome::Referenced(folio, referenced)),
        }
        // Relaxed: set around a fork by the handler, a hint here.
        if self.is_dead() || self.pinned.load(Ordering::Relaxed) || pages.drops.contains_key(&addr)
        {
            return Err(RmapOutcome::Busy(folio));
        }
        pages.by_folio.remove(&key(&folio));
        pages.map.insert(addr, Page::Evicting { removed: false });
        Ok((addr, folio))
    }

    /// `MADV_PAGEOUT` of `[start, end)`: each resident page there is
    /// swapped out now, referenced or not (`reclaim_pages`); returns the
    /// pages that went. A page that cannot go stays, back on its LRU.
    pub fn pageout(&self, start: u64, end: u64) -> u64 {
        let Some(sim) = self.sim.upgrade() else {
            return 0;
        };
        let root = Arc::clone(sim.machine.fs().tree().root());
        let chosen: Vec<Evictee> = {
            let mut pages = lock(&self.pages);
            let resident: Vec<(u64, Arc<Folio>)> = pages
                .map
                .range(start..end)
                .filter_map(|(&addr, page)| match page {
                    Page::Resident(folio) => Some((addr, Arc::clone(folio))),
                    _ => None,
                })
                .collect();
            let mut chosen = Vec::new();
            for (addr, folio) in resident {
                if pages.drops.contains_key(&addr) {
                    continue;
                }
                pages.by_folio.remove(&key(&folio));
                pages.map.insert(addr, Page::Evicting { removed: false });
                let index = chosen.len();
                chosen.push(Evictee { index, addr, folio });
            }
            chosen
        };
        let mut nr = 0;
        for (_, outcome) in self.evict(&sim, chosen, &root) {
            match outcome {
                RmapOutcome::Reclaimed { nr_pages } => nr += nr_pages,
                RmapOutcome::Busy(f) | RmapOutcome::NoSwap(f) => {
                    lruvec::folio_putback_lru(&f, self.rmap(), false);
                }
                _ => {}
            }
        }
        nr
    }

    /// Evicts the pages `chosen` (each marked evicting): copies them out
    /// run by run of adjacent pages, swaps each out, then asks the process
    /// to drop them all at once. Each page's outcome, by its index.
    fn evict(
        &self,
        sim: &Inner,
        mut chosen: Vec<Evictee>,
        target: &MemCgroup,
    ) -> Vec<(usize, RmapOutcome)> {
        chosen.sort_by_key(|e| e.addr);
        let mut outcomes = Vec::with_capacity(chosen.len());
        let mut drops = Vec::new();
        let mut rest = chosen.into_iter().peekable();
        while let Some(first) = rest.next() {
            let mut run = vec![first];
            while run.len() < MAX_RUN_PAGES
                && let Some(next) = rest.peek()
                && next.addr == run[run.len() - 1].addr + PAGE
            {
                run.extend(rest.next());
            }
            let together = self.copy_out_run(&run).is_ok();
            for Evictee { index, addr, folio } in run {
                let outcome = if together || self.copy_out(addr, &folio).is_ok() {
                    self.swap_out_copied(sim, addr, folio, target, &mut drops)
                } else {
                    self.keep(addr, folio)
                        .map_or(RmapOutcome::Gone, RmapOutcome::Busy)
                };
                outcomes.push((index, outcome));
            }
        }
        if !drops.is_empty() {
            self.host.drop_pages(&drops);
        }
        outcomes
    }

    /// Write-protects the adjacent pages of `run` and copies them out into
    /// their folios, in one protection and one read.
    fn copy_out_run(&self, run: &[Evictee]) -> io::Result<()> {
        let start = run[0].addr;
        let len = run.len() as u64 * PAGE;
        self.protect(start, len)?;
        let mut bytes = vec![0u8; run.len() * PAGE_BYTES];
        self.host.read(start, &mut bytes)?;
        for (e, page) in run.iter().zip(bytes.chunks_exact(PAGE_BYTES)) {
            e.folio.backed_bytes().copy_from_slice(page);
        }
        Ok(())
    }

    /// Write-protects the page at `addr` and copies it out into `folio`.
    fn copy_out(&self, addr: u64, folio: &Folio) -> io::Result<()> {
        self.protect(addr, PAGE)?;
        let mut bytes = folio.backed_bytes();
        self.host.read(addr, &mut bytes)
    }

    /// Swaps out the page at `addr`, evicting and copied out into
    /// `folio`; its drop is added to `drops` unless it went meanwhile.
    fn swap_out_copied(
        &self,
        sim: &Inner,
        addr: u64,
        folio: Arc<Folio>,
        target: &MemCgroup,
        drops: &mut Vec<u64>,
    ) -> RmapOutcome {
        let mut pieces = sim.machine.reclaim_pageout(folio, target);
        debug_assert_eq!(pieces.len(), 1, "a single page is one piece");
        let Some(piece) = pieces.pop() else {
            return RmapOutcome::Gone;
        };
        let mut pages = lock(&self.pages);
        let removed = !matches!(
            pages.map.get(&addr),
            Some(Page::Evicting { removed: false })
        );
        match piece.outcome {
            Ok(entry) if removed || self.is_dead() => {
                pages.map.remove(&addr);
                drop(pages);
                release(sim, vec![Freed::Entry(entry)]);
                RmapOutcome::Reclaimed { nr_pages: 1 }
            }
            Ok(entry) => {
                pages.map.insert(addr, Page::Dropping(entry));
                *pages.drops.entry(addr).or_default() += 1;
                drops.push(addr);
                RmapOutcome::Reclaimed { nr_pages: 1 }
            }
            Err((folio, _)) => {
                drop(pages);
                folio.release_bytes();
                self.keep(addr, folio)
                    .map_or(RmapOutcome::Gone, RmapOutcome::NoSwap)
            }
        }
    }

    /// Write-protects `[start, start + len)`, waiting out `EAGAIN` (an
    /// event not yet read: the handler's reader takes it at once).
    fn protect(&self, start: u64, len: u64) -> io::Result<()> {
        let mut tries = 0;
        loop {
            match self.host.write_protect(start, len, true) {
                Err(e) if e.raw_os_error() == Some(EAGAIN) && tries < MAX_PROTECT_TRIES => {
                    tries += 1;
                    std::thread::yield_now();
                }
                other => return other,
            }
        }
    }

    /// An eviction that did not happen: the page stays resident (and is
    /// unprotected), unless it went meanwhile; the folio is returned for
    /// the reclaimer to put back if it stays.
    fn keep(&self, addr: u64, folio: Arc<Folio>) -> Option<Arc<Folio>> {
        let mut pages = lock(&self.pages);
        let removed = !matches!(
            pages.map.get(&addr),
            Some(Page::Evicting { removed: false })
        );
        if removed || self.is_dead() {
            pages.map.remove(&addr);
            return None;
        }
        // A failure leaves writers waiting on a page the process keeps:
        // nothing more can be done for them from here.
        let _ = self.host.write_protect(addr, PAGE, false);
        pages.insert_resident(addr, Arc::clone(&folio));
        Some(folio)
    }
}
