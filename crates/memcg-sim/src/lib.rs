//! # memcg-sim
//!
//! Simulated tasks with real pages over the `memcg` library: enough of an
//! address space to move bytes between memory and swap and watch the
//! cgroup accounting follow them.
//!
//! A [`Sim`] owns a cgroup v2 hierarchy ([`CgroupFs`]) and a [`SwapSystem`]
//! (devices, swap cache, `swap_cgroup` in any design). Each [`Sim::alloc`]
//! creates a task in a cgroup with one anonymous mapping of 4 KiB or larger
//! folios, charged as they are populated and filled with zeros, seeded
//! random bytes or a per-page pattern. [`Sim::pageout`] swaps a mapping out
//! (like `MADV_PAGEOUT`; a large folio that finds no contiguous swap space
//! is split into pages, as the kernel does), [`Sim::touch`] faults it back
//! in, [`Sim::verify`] checks every byte wherever it lives (memory, swap
//! cache or device), [`Sim::free`] unmaps it. Tasks move between cgroups by
//! writing `cgroup.procs`; their charges stay where they were made.
//!
//! Locking: a mapping's extents are behind one mutex, held for a whole
//! operation on the mapping, so operations on different mappings run in
//! parallel and swapoff's walk sees each mapping between operations.

mod charges;
pub mod fill;
pub mod meminfo;

pub use charges::{ChargeTarget, LedgerError};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub use fill::Fill;
use memcg::Errno;
use memcg::cgroupfs::{CgroupFs, FsError};
use memcg::folio::Folio;
use memcg::memcontrol::{Cgroup, ChargeError, Gfp, MemCgroup, TaskHooks, TreeConfig, VmEvent};
use memcg::mm_types::PAGE_BYTES;
use memcg::swap_cgroup::Design;
use memcg::swap_state::{SwapInError, SwapOutError, SwapSystem, SwapoffError};
use memcg::swapfile::SwapError;
use memcg::swapops::SwapEntry;

/// How to build a [`Sim`].
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// Seed of every random fill.
    pub seed: u64,
    /// The `swap_cgroup` design recording swap owners.
    pub swap_cgroup: Design,
    /// The simulated machine's memory in bytes (rounded down to pages):
    /// every charged page and the kernel's own (RAM disk pages, swap
    /// tables) must fit in it. Pages are real, so this also bounds the host
    /// memory the simulation takes.
    pub mem_bytes: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0x5eed,
            swap_cgroup: Design::default(),
            mem_bytes: default_mem_bytes(),
        }
    }
}

/// Machine size when none is given: half of the host's available memory,
/// so a simulation can never take the host down (1 GiB if the host does
/// not say).
pub fn default_mem_bytes() -> u64 {
    host_meminfo_kb("MemAvailable").map_or(1 << 30, |kb| kb * 1024 / 2)
}

/// The host's memory in bytes (`MemTotal`), if it says.
pub fn host_mem_bytes() -> Option<u64> {
    host_meminfo_kb("MemTotal").map(|kb| kb * 1024)
}

/// A `kB` line of the host's `/proc/meminfo`.
fn host_meminfo_kb(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Why a simulation step failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// No mapping of that name.
    #[error("{0}: no such mapping")]
    NoSuchMapping(String),
    /// A mapping of that name exists.
    #[error("{0}: mapping exists")]
    MappingExists(String),
    /// A folio size an anonymous fault cannot allocate.
    #[error("an anonymous folio is 1 page or 4..=512 pages, a power of two, not {0}")]
    BadFolioSize(u32),
    /// A mapping size that is not a whole number of folios.
    #[error("size {size_bytes} is not a positive multiple of the {folio_bytes}-byte folio")]
    BadMappingSize {
        /// The mapping size asked for.
        size_bytes: u64,
        /// The folio size.
        folio_bytes: u64,
    },
    /// A cgroup path or file problem.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A direct uncharge asked back more than was charged.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A swap slot could not be taken.
    #[error(transparent)]
    SwapOut(#[from] SwapOutError),
    /// A task cannot be created in that cgroup.
    #[error("{cgroup}: cannot start a task there: {errno}")]
    Task {
        /// The cgroup.
        cgroup: String,
        /// Why (`EBUSY`: it has controllers in its subtree control).
        errno: Errno,
    },
    /// The memory charge failed.
    #[error(transparent)]
    Charge(#[from] ChargeError),
    /// A fault could not bring a page in.
    #[error(transparent)]
    SwapIn(#[from] SwapInError),
    /// A swap device operation failed.
    #[error(transparent)]
    Swap(#[from] SwapError),
    /// A swapoff failed; the device stays on.
    #[error(transparent)]
    Swapoff(#[from] SwapoffError),
    /// Some pages could not be swapped out.
    #[error("{name}: {pages} pages could not be swapped out: {source}")]
    Pageout {
        /// The mapping.
        name: String,
        /// Pages left in memory.
        pages: u64,
        /// The first failure.
        source: SwapOutError,
    },
    /// A page does not hold what was written to it.
    #[error(
        "{name}: page {page} differs at byte {offset}: expected {expected:#04x}, found {found:#04x}"
    )]
    Corrupt {
        /// The mapping.
        name: String,
        /// Page index in the mapping.
        page: u64,
        /// Byte in the page.
        offset: usize,
        /// What was written.
        expected: u8,
        /// What is there.
        found: u8,
    },
}

impl SimError {
    /// The errno a program would see.
    pub fn errno(&self) -> Errno {
        match self {
            SimError::NoSuchMapping(_) => Errno::ENOENT,
            SimError::MappingExists(_) => Errno::EEXIST,
            SimError::BadFolioSize(_) | SimError::BadMappingSize { .. } => Errno::EINVAL,
            SimError::Fs(e) => e.errno,
            SimError::Task { errno, .. } => *errno,
            SimError::Ledger(_) => Errno::EINVAL,
            SimError::SwapOut(e) => e.errno(),
            SimError::Charge(e) => e.errno(),
            SimError::SwapIn(e) => e.errno(),
            SimError::Swap(e) => e.errno(),
            SimError::Swapoff(e) => e.errno(),
            SimError::Pageout { .. } => Errno::ENOMEM,
            SimError::Corrupt { .. } => Errno::EIO,
        }
    }
}

/// A simulated task: a pid in a cgroup.
#[derive(Debug)]
pub struct Task {
    pid: u32,
    cgroup: Mutex<Arc<Cgroup>>,
}

impl Task {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.pid
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
}

/// Where a run of a mapping's pages is.
enum State {
    Resident(Arc<Folio>),
    Swapped(SwapEntry),
}

/// A folio-sized run of a mapping.
struct Extent {
    first_page: u64,
    nr: u32,
    state: State,
}

impl Extent {
    /// Whether this run is on swap and covers the slot `entry`.
    fn swapped_at(&self, entry: SwapEntry) -> bool {
        let State::Swapped(first) = self.state else {
            return false;
        };
        first.swp_type() == entry.swp_type()
            && (first.swp_offset()..first.swp_offset() + u64::from(self.nr))
                .contains(&entry.swp_offset())
    }
}

/// One task's anonymous mapping.
struct Mapping {
    task: Arc<Task>,
    fill: Fill,
    stream: u64,
    extents: Mutex<Vec<Extent>>,
}

/// Pages of a mapping by where they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residency {
    /// In memory.
    pub resident: u64,
    /// On swap.
    pub swapped: u64,
}

struct Inner {
    fs: CgroupFs,
    swap: SwapSystem,
    tasks: Mutex<BTreeMap<u32, Arc<Task>>>,
    mappings: Mutex<BTreeMap<String, Arc<Mapping>>>,
    next_pid: AtomicU32,
    /// The number of the next RAM disk (`/dev/ramN`).
    next_ram: Mutex<u32>,
    /// Direct charges (`charges.rs`).
    ledger: Mutex<charges::Ledger>,
    seed: u64,
}

/// The simulator; see the crate docs.
pub struct Sim {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Connects `cgroup.procs` and populated-cgroup checks to the tasks.
struct Hooks(Weak<Inner>);

impl TaskHooks for Hooks {
    fn procs(&self, cg: &Cgroup) -> Vec<u32> {
        let Some(inner) = self.0.upgrade() else {
            return Vec::new();
        };
        let tasks = lock(&inner.tasks);
        tasks
            .values()
            .filter(|t| std::ptr::eq(&*t.cgroup(), cg))
            .map(|t| t.pid)
            .collect()
    }

    fn attach(&self, pid: u32, cg: &Arc<Cgroup>) -> Result<(), Errno> {
        let inner = self.0.upgrade().ok_or(Errno::ESRCH)?;
        let task = lock(&inner.tasks).get(&pid).cloned().ok_or(Errno::ESRCH)?;
        *lock(&task.cgroup) = Arc::clone(cg);
        Ok(())
    }
}

impl Sim {
    /// A simulation with a fresh hierarchy and no swap.
    pub fn new(config: SimConfig) -> Self {
        let fs = CgroupFs::new(TreeConfig::default());
        fs.tree()
            .set_machine_pages(config.mem_bytes / PAGE_BYTES as u64);
        let swap = SwapSystem::new(fs.tree(), config.swap_cgroup);
        let inner = Arc::new(Inner {
            fs,
            swap,
            tasks: Mutex::new(BTreeMap::new()),
            mappings: Mutex::new(BTreeMap::new()),
            next_pid: AtomicU32::new(100),
            next_ram: Mutex::new(0),
            ledger: Mutex::new(charges::Ledger::default()),
            seed: config.seed,
        });
        inner
            .fs
            .tree()
            .set_task_hooks(Arc::new(Hooks(Arc::downgrade(&inner))));
        Self { inner }
    }

    /// The cgroup v2 interface.
    pub fn fs(&self) -> &CgroupFs {
        &self.inner.fs
    }

    /// Swap devices, cache and accounting.
    pub fn swap(&self) -> &SwapSystem {
        &self.inner.swap
    }

    /// Swaps on a RAM disk of `size_bytes` with priority `prio` (or the
    /// next default); returns its name (`/dev/ram0`, ...). Its pages come
    /// out of the machine's memory as they are written.
    pub fn swapon_ram(&self, size_bytes: u64, prio: Option<i32>) -> Result<String, SimError> {
        let mut next = lock(&self.inner.next_ram);
        let name = format!("/dev/ram{next}");
        self.inner.swap.swapon_ram(&name, size_bytes, prio)?;
        *next += 1;
        Ok(name)
    }

    /// The name the next [`Sim::swapon_ram`] gives its device.
    pub fn next_ram_name(&self) -> String {
        format!("/dev/ram{}", lock(&self.inner.next_ram))
    }

    /// Swaps on the file `path` of `size_bytes` with priority `prio` (or
    /// the next default); returns its name.
    pub fn swapon_file(
        &self,
        path: &Path,
        size_bytes: u64,
        prio: Option<i32>,
    ) -> Result<String, SimError> {
        Ok(self
            .inner
            .swap
            .swapon_file(path, size_bytes, prio)?
            .name()
            .to_owned())
    }

    /// Swaps on any backend (a fault-injecting wrapper, say) as `name`.
    pub fn swapon_backend(
        &self,
        name: &str,
        backend: Box<dyn memcg::swapfile::SwapBackend>,
    ) -> Result<(), SimError> {
        self.inner.swap.swapon(name, backend, None)?;
        Ok(())
    }

    /// Swaps off the device named `name`, faulting every page on it back
    /// into its mapping (charged as a swap-in would be). If a page cannot
    /// come back, the device stays on.
    pub fn swapoff(&self, name: &str) -> Result<(), SimError> {
        let device = self
            .inner
            .swap
            .swapfiles()
            .by_name(name)
            .ok_or_else(|| SwapError::NoSuchDevice(name.to_owned()))?;
        self.inner
            .swap
            .swapoff(device.ty(), |entry| self.unuse(entry))?;
        Ok(())
    }

    /// Faults in the page at `entry` wherever it is mapped (swapoff's walk).
    fn unuse(&self, entry: SwapEntry) -> Result<(), SwapInError> {
        let mut busy: Vec<Arc<Mapping>> = lock(&self.inner.mappings).values().cloned().collect();
        // Mappings whose lock is free are searched at once; a busy one is
        // retried until its lock is free or the slot was freed meanwhile
        // (its task faulted the page in itself), so a task working on its
        // mapping in a loop cannot starve swapoff.
        while !busy.is_empty() {
            let mut still_busy = Vec::new();
            for m in busy {
                let locked = match m.extents.try_lock() {
                    Ok(extents) => Some(extents),
                    Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => None,
                };
                let Some(mut extents) = locked else {
                    still_busy.push(Arc::clone(&m));
                    continue;
                };
                if let Some(ext) = extents.iter_mut().find(|ext| ext.swapped_at(entry)) {
                    let State::Swapped(first) = ext.state else {
                        unreachable!("swapped_at checked it")
                    };
                    let folio = self.inner.swap.swap_in(first, ext.nr, &m.task.memcg())?;
                    ext.state = State::Resident(folio);
                    return Ok(());
                }
            }
            if still_busy.is_empty() || self.slot_free(entry) {
                break;
            }
            std::thread::yield_now();
            busy = still_busy;
        }
        // Not mapped (anymore): a concurrent fault or free is releasing it.
        Ok(())
    }

    /// Whether the slot at `entry` is no longer in use.
    fn slot_free(&self, entry: SwapEntry) -> bool {
        self.inner
            .swap
            .swapfiles()
            .get(entry.swp_type())
            .is_none_or(|d| d.count(entry).is_ok_and(|c| c == 0))
    }

    /// `/proc/swaps`.
    pub fn proc_swaps(&self) -> String {
        self.inner.swap.swapfiles().proc_swaps()
    }

    /// `/proc/meminfo` of the simulated machine (the lines it can fill;
    /// see [`meminfo`]).
    pub fn proc_meminfo(&self) -> String {
        meminfo::render(self.fs().tree(), self.swap())
    }

    /// Faults in host memory for `bytes` of the simulated machine's pages
    /// (up to its size), so that what runs next, a timed benchmark phase,
    /// pays no host page faults: a real machine's memory is already there.
    pub fn prefault(&self, bytes: u64) {
        self.fs()
            .tree()
            .prefault_frames(bytes.div_ceil(PAGE_BYTES as u64));
    }

    /// Creates a task in `cgroup` with a mapping `name` of `size_bytes`
    /// populated with `folio_pages`-page folios filled per `fill`; returns
    /// the task's pid. Nothing is left charged if memory runs out.
    pub fn alloc(
        &self,
        cgroup: &str,
        name: &str,
        size_bytes: u64,
        folio_pages: u32,
        fill: Fill,
    ) -> Result<u32, SimError> {
        let folio_bytes = u64::from(folio_pages) * PAGE_BYTES as u64;
        // Anonymous mTHP orders are 2..=9 (THP_ORDERS_ALL_ANON has no
        // order 1), besides single pages.
        if !folio_pages.is_power_of_two() || folio_pages > 512 || folio_pages == 2 {
            return Err(SimError::BadFolioSize(folio_pages));
        }
        if size_bytes == 0 || !size_bytes.is_multiple_of(folio_bytes) {
            return Err(SimError::BadMappingSize {
                size_bytes,
                folio_bytes,
            });
        }
        let cg = self.inner.fs.cgroup(cgroup)?;
        if lock(&self.inner.mappings).contains_key(name) {
            return Err(SimError::MappingExists(name.to_owned()));
        }
        // The task forks into the cgroup first (refused where a task may
        // not be: the no-internal-process rule), then populates.
        let task = Arc::new(Task {
            pid: self.inner.next_pid.fetch_add(1, Ordering::Relaxed),
            cgroup: Mutex::new(Arc::clone(&cg)),
        });
        self.inner
            .fs
            .tree()
            .enter(&cg, || {
                lock(&self.inner.tasks).insert(task.pid, Arc::clone(&task));
            })
            .map_err(|errno| SimError::Task {
                cgroup: cgroup.to_owned(),
                errno,
            })?;
        let exit = |e: SimError| {
            lock(&self.inner.tasks).remove(&task.pid);
            e
        };
        let stream = fill::stream(self.inner.seed, name);
        let memcg = task.memcg();
        let mut extents = Vec::new();
        for first_page in (0..size_bytes / PAGE_BYTES as u64).step_by(folio_pages as usize) {
            // On failure `extents` drops, uncharging what was populated.
            for (first_page, folio) in self
                .fault_anon(&memcg, first_page, folio_pages)
                .map_err(exit)?
            {
                for (i, page) in folio.bytes().chunks_exact_mut(PAGE_BYTES).enumerate() {
                    fill::fill_page(fill, stream, first_page + i as u64, page);
                }
                extents.push(Extent {
                    first_page,
                    nr: folio.nr(),
                    state: State::Resident(Arc::new(folio)),
                });
            }
        }
        let mapping = Arc::new(Mapping {
            task: Arc::clone(&task),
            fill,
            stream,
            extents: Mutex::new(extents),
        });
        let mut mappings = lock(&self.inner.mappings);
        if mappings.contains_key(name) {
            return Err(exit(SimError::MappingExists(name.to_owned())));
        }
        mappings.insert(name.to_owned(), mapping);
        Ok(task.pid)
    }

    /// The anonymous faults that populate the `folio_pages` pages from
    /// `first_page` (`alloc_anon_folio`): a large folio is charged without
    /// reclaim (`GFP_TRANSHUGE_LIGHT`, the default `defrag` for a VMA not
    /// `MADV_HUGEPAGE`); when that fails, each page faults in as a single
    /// page charged with the full reclaim and OOM path. Every fault counts
    /// one `pgfault` on the task's memory cgroup.
    fn fault_anon(
        &self,
        memcg: &Arc<MemCgroup>,
        first_page: u64,
        folio_pages: u32,
    ) -> Result<Vec<(u64, Folio)>, SimError> {
        let tree = self.inner.fs.tree();
        if folio_pages > 1
            && let Ok(folio) = Folio::new_gfp(tree, memcg, folio_pages, Gfp::NoReclaim)
        {
            memcg.count_vm_event(VmEvent::Pgfault, 1);
            return Ok(vec![(first_page, folio)]);
        }
        let mut pages = Vec::with_capacity(folio_pages as usize);
        for i in 0..u64::from(folio_pages) {
            memcg.count_vm_event(VmEvent::Pgfault, 1);
            pages.push((first_page + i, Folio::new(tree, memcg, 1)?));
        }
        Ok(pages)
    }

    fn mapping(&self, name: &str) -> Result<Arc<Mapping>, SimError> {
        lock(&self.inner.mappings)
            .get(name)
            .cloned()
            .ok_or_else(|| SimError::NoSuchMapping(name.to_owned()))
    }

    /// The task owning mapping `name`.
    pub fn task_of(&self, name: &str) -> Result<Arc<Task>, SimError> {
        Ok(Arc::clone(&self.mapping(name)?.task))
    }

    /// Swaps out every resident page of `name` (like `MADV_PAGEOUT`);
    /// returns the pages swapped. Pages that cannot go stay resident and are
    /// reported as an error after the others went.
    pub fn pageout(&self, name: &str) -> Result<u64, SimError> {
        let m = self.mapping(name)?;
        let mut extents = lock(&m.extents);
        let mut out = Vec::with_capacity(extents.len());
        let (mut swapped, mut kept, mut first_error) = (0, 0, None);
        for ext in extents.drain(..) {
            let State::Resident(folio) = ext.state else {
                out.push(ext);
                continue;
            };
            for piece in self.inner.swap.swap_out_or_split(folio) {
                let state = match piece.outcome {
                    Ok(entry) => {
                        swapped += u64::from(piece.nr);
                        State::Swapped(entry)
                    }
                    Err((folio, e)) => {
                        first_error.get_or_insert(e);
                        kept += u64::from(piece.nr);
                        State::Resident(folio)
                    }
                };
                out.push(Extent {
                    first_page: ext.first_page + u64::from(piece.first_page),
                    nr: piece.nr,
                    state,
                });
            }
        }
        *extents = out;
        match first_error {
            None => Ok(swapped),
            Some(source) => Err(SimError::Pageout {
                name: name.to_owned(),
                pages: kept,
                source,
            }),
        }
    }

    /// Faults every swapped page of `name` back in, charged per the swap-in
    /// rule to the task's current cgroup or the recorded owner; returns the
    /// pages faulted in. Stops at the first fault that fails.
    pub fn touch(&self, name: &str) -> Result<u64, SimError> {
        let m = self.mapping(name)?;
        let memcg = m.task.memcg();
        let mut extents = lock(&m.extents);
        let mut faulted = 0;
        let mut out = Vec::with_capacity(extents.len());
        let mut result = Ok(());
        for ext in extents.drain(..) {
            let State::Swapped(entry) = ext.state else {
                out.push(ext);
                continue;
            };
            if result.is_err() {
                out.push(ext);
                continue;
            }
            match self.fault_swapped(&memcg, entry, ext.first_page, ext.nr) {
                Ok(pieces) => {
                    faulted += u64::from(ext.nr);
                    out.extend(pieces);
                }
                Err((e, left)) => {
                    out.extend(left);
                    result = Err(e);
                }
            }
        }
        *extents = out;
        result.map(|()| faulted)
    }

    /// The faults that bring back a swapped run of `nr` pages from
    /// `first_page` (`do_swap_page`): a large folio is charged without
    /// reclaim (`alloc_swap_folio`), and when that fails each page faults
    /// in on its own with the full charge path. One `pgfault` per fault on
    /// the faulting task's memory cgroup, whoever the page is charged to.
    /// On failure, returns the extents as they are (pages brought in so far
    /// and the rest still swapped).
    fn fault_swapped(
        &self,
        memcg: &Arc<MemCgroup>,
        entry: SwapEntry,
        first_page: u64,
        nr: u32,
    ) -> Result<Vec<Extent>, (SimError, Vec<Extent>)> {
        let swap = &self.inner.swap;
        memcg.count_vm_event(VmEvent::Pgfault, 1);
        let whole = if nr > 1 {
            swap.do_swap_page_gfp(entry, nr, memcg, Gfp::NoReclaim)
        } else {
            swap.do_swap_page(entry, nr, memcg)
        };
        let err = match whole {
            Ok(folio) => {
                return Ok(vec![Extent {
                    first_page,
                    nr,
                    state: State::Resident(folio),
                }]);
            }
            Err(SwapInError::Charge(_)) if nr > 1 => None,
            Err(e) => Some(e),
        };
        let still_swapped = |from: u32| Extent {
            first_page: first_page + u64::from(from),
            nr: nr - from,
            state: State::Swapped(entry.add(u64::from(from)).expect("inside the run")),
        };
        if let Some(e) = err {
            return Err((e.into(), vec![still_swapped(0)]));
        }
        let mut pieces = Vec::with_capacity(nr as usize);
        for i in 0..nr {
            if i > 0 {
                memcg.count_vm_event(VmEvent::Pgfault, 1);
            }
            let page_entry = entry.add(u64::from(i)).expect("inside the run");
            match swap.do_swap_page(page_entry, 1, memcg) {
                Ok(folio) => pieces.push(Extent {
                    first_page: first_page + u64::from(i),
                    nr: 1,
                    state: State::Resident(folio),
                }),
                Err(e) => {
                    pieces.push(still_swapped(i));
                    return Err((e.into(), pieces));
                }
            }
        }
        Ok(pieces)
    }

    /// Checks every byte of `name` against what was written, wherever each
    /// page is; the first difference names the page.
    pub fn verify(&self, name: &str) -> Result<(), SimError> {
        let m = self.mapping(name)?;
        let extents = lock(&m.extents);
        let mut expected = vec![0u8; PAGE_BYTES];
        for ext in extents.iter() {
            let bytes = match &ext.state {
                State::Resident(folio) => folio.bytes().to_vec(),
                State::Swapped(entry) => self.inner.swap.peek(*entry, ext.nr)?,
            };
            for (i, page) in bytes.chunks_exact(PAGE_BYTES).enumerate() {
                let index = ext.first_page + i as u64;
                fill::fill_page(m.fill, m.stream, index, &mut expected);
                if let Some(offset) = (0..PAGE_BYTES).find(|&b| page[b] != expected[b]) {
                    return Err(SimError::Corrupt {
                        name: name.to_owned(),
                        page: index,
                        offset,
                        expected: expected[offset],
                        found: page[offset],
                    });
                }
            }
        }
        Ok(())
    }

    /// Unmaps `name` and ends its task: resident pages are uncharged, swap
    /// slots released (uncharging swap and unpinning the owner).
    pub fn free(&self, name: &str) -> Result<(), SimError> {
        let m = lock(&self.inner.mappings)
            .remove(name)
            .ok_or_else(|| SimError::NoSuchMapping(name.to_owned()))?;
        let extents = std::mem::take(&mut *lock(&m.extents));
        let mut first_error = None;
        for ext in extents {
            if let State::Swapped(entry) = ext.state
                && let Err(e) = self.inner.swap.swap_free(entry, ext.nr)
            {
                first_error.get_or_insert(e);
            }
        }
        lock(&self.inner.tasks).remove(&m.task.pid);
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    /// Pages of `name` in memory and on swap.
    pub fn residency(&self, name: &str) -> Result<Residency, SimError> {
        let m = self.mapping(name)?;
        let extents = lock(&m.extents);
        let mut r = Residency::default();
        for ext in extents.iter() {
            match ext.state {
                State::Resident(_) => r.resident += u64::from(ext.nr),
                State::Swapped(_) => r.swapped += u64::from(ext.nr),
            }
        }
        Ok(r)
    }

    /// Names of every mapping.
    pub fn mappings(&self) -> Vec<String> {
        lock(&self.inner.mappings).keys().cloned().collect()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        // Release everything so the hierarchy tears down balanced.
        for name in self.mappings() {
            let _ = self.free(&name);
        }
        self.release_charges();
    }
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("mappings", &self.mappings())
            .field("swap", &self.inner.swap)
            .finish()
    }
}

/// A simulator for unit tests: memory enabled below the root and one
/// cgroup, `/a`.
#[cfg(test)]
pub(crate) fn test_sim() -> Sim {
    let sim = Sim::new(SimConfig::default());
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.fs().mkdir("/a").unwrap();
    sim
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcg::memcontrol::MemcgStat;

    fn sim() -> Sim {
        test_sim()
    }

    fn small_machine(mem_bytes: u64) -> Sim {
        let sim = Sim::new(SimConfig {
            mem_bytes,
            ..SimConfig::default()
        });
        sim.fs()
            .write("/cgroup.subtree_control", "+memory")
            .unwrap();
        sim.fs().mkdir("/a").unwrap();
        sim
    }

    #[test]
    fn the_machine_size_bounds_every_charge() {
        let sim = small_machine(8 << 20);
        // 100G in an unlimited cgroup: refused by the machine, nothing taken.
        let err = sim
            .alloc("/a", "big", 100 << 30, 16, Fill::Zero)
            .unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert!(matches!(
            err,
            SimError::Charge(ChargeError::MachineOutOfMemory { total_pages: 2048 })
        ));
        assert_eq!(sim.fs().tree().machine_used_pages(), 0);
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(
            a.event(memcg::memcontrol::MemcgEvent::Max),
            0,
            "not a memcg event"
        );
        sim.alloc("/a", "fits", 2 << 20, 1, Fill::Pattern).unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(meminfo::value_kb(&info, "MemTotal"), Some(8192));
        assert_eq!(meminfo::value_kb(&info, "MemFree"), Some(6144));
        assert_eq!(meminfo::value_kb(&info, "AnonPages"), Some(2048));
        sim.swapon_ram(4 << 20, None).unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(meminfo::value_kb(&info, "SwapTotal"), Some(4092));
        assert_eq!(meminfo::value_kb(&info, "SwapFree"), Some(4092));
        assert_eq!(
            meminfo::value_kb(&info, "MemFree"),
            Some(6144 - 4),
            "swap tables"
        );
        // Swapping out to a RAM disk moves pages; it frees no memory.
        sim.pageout("fits").unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(meminfo::value_kb(&info, "MemFree"), Some(6144 - 4));
        assert_eq!(meminfo::value_kb(&info, "AnonPages"), Some(0));
        assert_eq!(meminfo::value_kb(&info, "SwapFree"), Some(4092 - 2048));
        sim.free("fits").unwrap();
    }

    #[test]
    fn large_folios_fall_back_to_pages_when_the_charge_fails() {
        let sim = sim();
        sim.fs().write("/a/memory.max", "96K").unwrap();
        // 128K of 64K folios under a 96K limit: the first folio fits, the
        // second's non-blocking charge fails without events and it faults
        // in page by page; the page over the limit fails the alloc.
        let err = sim.alloc("/a", "m", 128 << 10, 16, Fill::Zero).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.memory().usage(), 0, "nothing left behind");
        assert_eq!(a.vm_event(VmEvent::Pgfault), 1 + 9, "a folio, then 9 pages");
        assert_eq!(
            a.event(memcg::memcontrol::MemcgEvent::Oom),
            1,
            "only for a single page"
        );
        // (Without reclaim, pages fit exactly when the folio would have; the
        // fallback succeeds once reclaim can make room for single pages.)
    }

    #[test]
    fn large_swap_ins_fall_back_to_pages_and_lose_nothing() {
        let sim = sim();
        sim.swapon_ram(16 << 20, None).unwrap();
        sim.fs().write("/a/memory.max", "104K").unwrap();
        sim.alloc("/a", "big", 64 << 10, 16, Fill::Pattern).unwrap();
        sim.pageout("big").unwrap();
        sim.alloc("/a", "fill", 64 << 10, 1, Fill::Pattern).unwrap();
        // 10 pages of room: the 16-page folio's charge fails without
        // events, the pages come in one by one until the 11th finds none.
        let err = sim.touch("big").unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert_eq!(
            sim.residency("big").unwrap(),
            Residency {
                resident: 10,
                swapped: 6
            }
        );
        sim.verify("big").unwrap();
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.vm_event(VmEvent::Pgmajfault), 10);
        assert_eq!(
            a.event(memcg::memcontrol::MemcgEvent::Oom),
            1,
            "the 11th page"
        );
        sim.free("fill").unwrap();
        assert_eq!(sim.touch("big").unwrap(), 6);
        sim.verify("big").unwrap();
        assert_eq!(a.swap().usage(), 0);
        sim.free("big").unwrap();
        assert_eq!(a.memory().usage(), 0);
    }

    #[test]
    fn faults_count_once_each_on_the_faulting_tasks_cgroup() {
        let sim = sim();
        sim.fs().mkdir("/b").unwrap();
        sim.swapon_ram(16 << 20, None).unwrap();
        let pid = sim.alloc("/a", "x", 64 << 10, 16, Fill::Pattern).unwrap();
        sim.pageout("x").unwrap();
        sim.fs().write("/b/cgroup.procs", &pid.to_string()).unwrap();
        sim.touch("x").unwrap();
        let (a, b) = (sim.fs().memcg("/a").unwrap(), sim.fs().memcg("/b").unwrap());
        // The charge and pswpin go to /a (the online owner); the fault and
        // the major fault to /b, the faulting task's cgroup (F13, M9).
        assert_eq!(a.memory().usage(), 16);
        assert_eq!(a.vm_event(VmEvent::Pswpin), 16);
        assert_eq!(
            (
                a.vm_event(VmEvent::Pgfault),
                a.vm_event(VmEvent::Pgmajfault)
            ),
            (1, 0)
        );
        assert_eq!(
            (
                b.vm_event(VmEvent::Pgfault),
                b.vm_event(VmEvent::Pgmajfault)
            ),
            (1, 1)
        );
        sim.free("x").unwrap();
    }

    #[test]
    fn no_internal_processes() {
        let sim = sim();
        sim.fs().mkdir("/b").unwrap();
        let pid = sim.alloc("/a", "x", 4096, 1, Fill::Zero).unwrap();
        // A cgroup with a task cannot enable controllers for children...
        assert_eq!(
            sim.fs()
                .write("/a/cgroup.subtree_control", "+memory")
                .unwrap_err()
                .errno,
            Errno::EBUSY
        );
        // ... and a cgroup with them takes no task, moved or new (F12, M4).
        sim.fs()
            .write("/b/cgroup.subtree_control", "+memory")
            .unwrap();
        assert_eq!(
            sim.alloc("/b", "y", 4096, 1, Fill::Zero)
                .unwrap_err()
                .errno(),
            Errno::EBUSY
        );
        assert!(sim.fs().read("/b/cgroup.procs").unwrap().is_empty());
        assert_eq!(
            sim.fs()
                .write("/b/cgroup.procs", &pid.to_string())
                .unwrap_err()
                .errno,
            Errno::EBUSY
        );
        sim.fs().mkdir("/b/leaf").unwrap();
        sim.fs()
            .write("/b/leaf/cgroup.procs", &pid.to_string())
            .unwrap();
        sim.fs()
            .write("/a/cgroup.subtree_control", "+memory")
            .unwrap();
        // The root is exempt.
        sim.fs().write("/cgroup.procs", &pid.to_string()).unwrap();
        assert_eq!(
            sim.fs().read("/b/cgroup.events").unwrap(),
            "populated 0\nfrozen 0\n"
        );
        sim.free("x").unwrap();
    }

    #[test]
    fn a_removed_cgroup_with_charged_pages_stays_dying() {
        let sim = sim();
        sim.fs().mkdir("/b").unwrap();
        let pid = sim.alloc("/a", "x", 1 << 20, 1, Fill::Zero).unwrap();
        assert_eq!(
            sim.fs().read("/a/cgroup.events").unwrap(),
            "populated 1\nfrozen 0\n"
        );
        sim.fs().write("/b/cgroup.procs", &pid.to_string()).unwrap();
        sim.fs().rmdir("/a").unwrap();
        let stat = |sim: &Sim| sim.fs().read("/cgroup.stat").unwrap();
        assert_eq!(
            stat(&sim),
            "nr_descendants 1\nnr_subsys_memory 2\nnr_dying_descendants 1\nnr_dying_subsys_memory 1\n",
            "t's pages pin /a (F7, M3)"
        );
        sim.free("x").unwrap();
        assert_eq!(
            stat(&sim),
            "nr_descendants 1\nnr_subsys_memory 2\nnr_dying_descendants 0\nnr_dying_subsys_memory 0\n"
        );
    }

    #[test]
    fn alloc_pageout_touch_verify_free_balance() {
        let sim = sim();
        sim.swapon_ram(8 << 20, None).unwrap();
        for (name, pages, fill) in [
            ("z", 16, Fill::Zero),
            ("r", 1, Fill::Random),
            ("p", 16, Fill::Pattern),
        ] {
            sim.alloc("/a", name, 256 << 10, pages, fill).unwrap();
        }
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.memory().usage(), 192);
        for name in ["z", "r", "p"] {
            assert_eq!(sim.pageout(name).unwrap(), 64);
            sim.verify(name).unwrap();
        }
        assert_eq!((a.memory().usage(), a.swap().usage()), (0, 192));
        // The zero mapping is marked, not written.
        assert_eq!(a.vm_event(VmEvent::Pswpout), 128);
        assert_eq!(a.vm_event(VmEvent::SwpoutZero), 64);
        for name in ["z", "r", "p"] {
            assert_eq!(sim.touch(name).unwrap(), 64);
            sim.verify(name).unwrap();
        }
        assert_eq!((a.memory().usage(), a.swap().usage()), (192, 0));
        assert_eq!(a.vm_event(VmEvent::Pswpin), 128);
        assert_eq!(a.vm_event(VmEvent::SwpinZero), 64);
        for name in ["z", "r", "p"] {
            sim.free(name).unwrap();
        }
        assert_eq!(
            (a.memory().usage(), a.swap().usage(), a.id_pins()),
            (0, 0, 1)
        );
        assert_eq!(a.stat(MemcgStat::Anon), 0);
    }

    #[test]
    fn large_folios_split_when_swap_is_fragmented() {
        let sim = sim();
        // 2 clusters: the header's (single pages only) and one free.
        sim.swapon_ram(1024 * 4096, None).unwrap();
        sim.alloc("/a", "small", 4096 * 8, 1, Fill::Pattern)
            .unwrap();
        sim.pageout("small").unwrap();
        sim.alloc("/a", "big", 64 << 10, 16, Fill::Pattern).unwrap();
        sim.alloc("/a", "big2", 2 << 20, 16, Fill::Pattern).unwrap();
        sim.pageout("big2").unwrap();
        // The free cluster is full of big2's folios: big must split.
        assert_eq!(sim.pageout("big").unwrap(), 16);
        sim.verify("big").unwrap();
        sim.touch("big").unwrap();
        sim.verify("big").unwrap();
    }

    #[test]
    fn verify_names_a_corrupted_page() {
        let sim = sim();
        sim.alloc("/a", "m", 8192, 1, Fill::Pattern).unwrap();
        {
            let m = sim.mapping("m").unwrap();
            let extents = lock(&m.extents);
            let State::Resident(folio) = &extents[1].state else {
                panic!()
            };
            folio.bytes()[10] ^= 0xff;
        }
        let err = sim.verify("m").unwrap_err();
        assert!(
            matches!(
                err,
                SimError::Corrupt {
                    page: 1,
                    offset: 10,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn tasks_move_but_charges_stay() {
        let sim = sim();
        sim.fs().mkdir("/b").unwrap();
        let pid = sim.alloc("/a", "m", 4 * 4096, 1, Fill::Zero).unwrap();
        assert_eq!(
            sim.fs().read("/a/cgroup.procs").unwrap(),
            format!("{pid}\n")
        );
        assert_eq!(sim.fs().rmdir("/a").unwrap_err().errno, Errno::EBUSY);
        sim.fs().write("/b/cgroup.procs", &pid.to_string()).unwrap();
        assert_eq!(
            sim.fs().read("/b/cgroup.procs").unwrap(),
            format!("{pid}\n")
        );
        let (a, b) = (sim.fs().memcg("/a").unwrap(), sim.fs().memcg("/b").unwrap());
        assert_eq!(
            (a.memory().usage(), b.memory().usage()),
            (4, 0),
            "charges stay"
        );
        assert_eq!(
            sim.fs().write("/b/cgroup.procs", "999").unwrap_err().errno,
            Errno::ESRCH
        );
        sim.fs().rmdir("/a").unwrap();
        sim.free("m").unwrap();
        assert_eq!(a.memory().usage(), 0);
    }

    #[test]
    fn alloc_past_the_limit_fails_and_leaves_nothing() {
        let sim = sim();
        sim.fs().write("/a/memory.max", "64K").unwrap();
        let err = sim.alloc("/a", "m", 128 << 10, 1, Fill::Zero).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert_eq!(sim.fs().memcg("/a").unwrap().memory().usage(), 0);
        assert!(sim.mappings().is_empty());
        assert!(sim.alloc("/a", "bad", 5000, 1, Fill::Zero).is_err());
        assert!(sim.alloc("/a", "bad", 4096, 3, Fill::Zero).is_err());
    }
}
