//! # memcg-sim
//!
//! Simulated tasks with real pages over the `memcg` library: enough of an
//! address space to move bytes between memory and swap and watch the
//! cgroup accounting follow them.
//!
//! A [`Sim`] owns a [`Machine`] (the library's simulated kernel: a cgroup
//! v2 hierarchy, a [`SwapSystem`] with `swap_cgroup` in any design, the
//! mounts, the one memcg reclaimer) and the processes on it: tasks, their
//! address spaces (`mm.rs`, the [`Rmap`](memcg::vmscan::Rmap) reclaim
//! reaches their folios through), the OOM victim choice and workloads.
//! Each [`Sim::alloc`]
//! creates a task in a cgroup with one anonymous mapping of 4 KiB or larger
//! folios, charged as they are populated and filled with zeros, seeded
//! random bytes or a per-page pattern. [`Sim::pageout`] swaps a mapping out
//! (like `MADV_PAGEOUT`; a large folio that finds no contiguous swap space
//! is split into pages, as the kernel does), [`Sim::touch`] faults it back
//! in, [`Sim::verify`] checks every byte wherever it lives (memory, swap
//! cache or device), [`Sim::free`] unmaps it. Tasks move between cgroups by
//! writing `cgroup.procs`; their charges stay where they were made. A
//! task whose cgroup freezes (`cgroup.freeze`) stops at its next freeze
//! point (an operation's start, or between its faults) until thawed or
//! killed; [`FrozenOps`] says whether an operation of a frozen task waits
//! (the default) or fails at once.
//!
//! Locking: a mapping's extents are behind one mutex, held for a whole
//! operation on the mapping, so operations on different mappings run in
//! parallel and swapoff's walk sees each mapping between operations.

#![warn(unreachable_pub)]

mod charges;
pub mod fill;
mod freezer;
pub mod host_mm;
pub mod kbuild;
pub mod mm;
mod mounts;
pub mod oom_kill;
mod pgtable;
mod proc_pid;
pub mod usemem;

pub use charges::{ChargeTarget, LedgerError};
pub use freezer::{FrozenOps, HostTasks};
pub use memcg::machine::{MountError, ReclaimTimes};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub use fill::Fill;
use host_mm::{HostMm, HostPages};
use memcg::Errno;
use memcg::cgroup::{Cgroup, TaskHooks};
use memcg::cgroupfs::{CgroupFs, FsError};
use memcg::folio::Folio;
use memcg::lruvec;
use memcg::machine::{Machine, MachineConfig};
use memcg::memcontrol::{ChargeError, Gfp, MemCgroup, VmEvent};
use memcg::mm_types::PAGE_BYTES;
use memcg::psi::PsiTask;
use memcg::swap_cgroup::Design;
use memcg::swap_state::{SwapInError, SwapOutError, SwapSystem, SwapoffError};
use memcg::swapfile::SwapError;
use memcg::swapops::SwapEntry;
use mm::{Block, Extent, Mapping, State};
pub use mm::{Residency, Task};
pub use oom_kill::CurrentTask;
use oom_kill::OomKiller;
use pgtable::Level;

/// `HPAGE_PMD_NR`: the pages of a PMD-mapped THP.
const HPAGE_PMD_NR: u32 = 512;

/// How a new mapping's faults reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Faults {
    /// The task touches each page: every fault is a kernel entry of its own.
    Touched,
    /// One system call faults them all (`mlock`, `MAP_POPULATE`).
    OneCall,
}

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
    /// Charges go through the per-thread charge stock (the kernel's
    /// behaviour): `memory.current` counts up to a batch of 64 pages per
    /// thread more than the pages in use. Off: exact figures.
    pub charge_stock: bool,
    /// Bytes of its own metadata each new memory cgroup charges to its
    /// parent, overriding the v6.14 model (`None`, the default:
    /// [`memcg::memcontrol::MemcgMetadata::v6_14`], 14 KiB on 2 CPUs;
    /// `Some(0)`: none). See `CgroupTree::set_memcg_metadata`.
    pub memcg_metadata_bytes: Option<u64>,
    /// The simulated machine's CPUs ([`memcg::memcontrol::TreeConfig::nr_cpus`]).
    pub nr_cpus: u32,
    /// The list_lru design of mounted filesystems' dentry and inode caches.
    pub list_lru: memcg::list_lru::LruDesign,
    /// Offline reparents LRU folios to the parent (2026) instead of
    /// leaving them to pin the dying memory cgroup (v6.14, the default).
    pub reparent_lru_folios: bool,
    /// Swap-ins bring large folios back whole even once zswap was enabled,
    /// loading their pages from zswap one by one (beyond v6.14, which
    /// swaps in single pages then: [`memcg::zswap::Zswap::large_folio_loads`]).
    pub zswap_large_folio_loads: bool,
    /// Refaults check the evicting memory cgroup's serial besides its id
    /// (beyond v6.14: [`memcg::memcontrol::CgroupTree::shadow_memcg_serial`]).
    pub shadow_memcg_serial: bool,
    /// The kernel version's interface and mechanism switches
    /// ([`memcg::profile`]; v6.14's by default).
    pub behaviour: memcg::profile::Behaviour,
    /// The pid of the first task the simulator starts. A simulator that
    /// also tracks host processes ([`Sim::adopt_task`]) starts its own at
    /// [`PID_MAX_LIMIT`], above every pid a Linux host hands out.
    pub first_pid: u32,
}

/// Linux's largest `pid_max` (`PID_MAX_LIMIT` on 64-bit): host pids are
/// below it.
pub const PID_MAX_LIMIT: u32 = 1 << 22;

impl SimConfig {
    /// The machine part of the configuration.
    pub fn machine(&self) -> MachineConfig {
        MachineConfig {
            swap_cgroup: self.swap_cgroup,
            mem_bytes: self.mem_bytes,
            charge_stock: self.charge_stock,
            memcg_metadata_bytes: self.memcg_metadata_bytes,
            nr_cpus: self.nr_cpus,
            list_lru: self.list_lru,
            reparent_lru_folios: self.reparent_lru_folios,
            zswap_large_folio_loads: self.zswap_large_folio_loads,
            shadow_memcg_serial: self.shadow_memcg_serial,
            behaviour: self.behaviour,
        }
    }

    /// The default configuration with `kernel`'s designs and switches
    /// ([`MachineConfig::for_kernel`]).
    pub fn for_kernel(kernel: memcg::profile::KernelVersion) -> Self {
        let m = MachineConfig::for_kernel(kernel);
        Self {
            swap_cgroup: m.swap_cgroup,
            list_lru: m.list_lru,
            reparent_lru_folios: m.reparent_lru_folios,
            zswap_large_folio_loads: m.zswap_large_folio_loads,
            shadow_memcg_serial: m.shadow_memcg_serial,
            behaviour: m.behaviour,
            ..Self::default()
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0x5eed,
            swap_cgroup: Design::default(),
            mem_bytes: default_mem_bytes(),
            charge_stock: true,
            memcg_metadata_bytes: None,
            nr_cpus: memcg::memcontrol::DEFAULT_NR_CPUS,
            list_lru: memcg::list_lru::LruDesign::default(),
            reparent_lru_folios: false,
            zswap_large_folio_loads: false,
            shadow_memcg_serial: false,
            behaviour: memcg::profile::Behaviour::default(),
            first_pid: 100,
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
    /// A mapping that does not fit in the address space below
    /// `mmap_base` (`mmap`'s `ENOMEM`).
    #[error("size {0} does not fit in the address space")]
    NoAddressSpace(u64),
    /// A cgroup path or file problem.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A mount or a file under one.
    #[error(transparent)]
    Mount(#[from] MountError),
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
    /// The task was killed (by the OOM killer, `kill` or `cgroup.kill`);
    /// a shell reports it as "Killed", status 137.
    #[error("task {pid}: Killed")]
    Killed {
        /// The task.
        pid: u32,
    },
    /// No task with that pid.
    #[error("{0}: no such process")]
    NoSuchTask(u32),
    /// The task is frozen (`cgroup.freeze`) and [`FrozenOps::Refuse`] is
    /// set: the operation would wait until it is thawed.
    #[error("task {pid} is frozen (cgroup.freeze of {cgroup} or an ancestor): it runs once thawed")]
    Frozen {
        /// The task.
        pid: u32,
        /// Its cgroup.
        cgroup: String,
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
            SimError::NoAddressSpace(_) => Errno::ENOMEM,
            SimError::Fs(e) => e.errno,
            SimError::Mount(e) => e.errno(),
            SimError::Task { errno, .. } => *errno,
            SimError::Ledger(_) => Errno::EINVAL,
            SimError::SwapOut(e) => e.errno(),
            SimError::Charge(e) => e.errno(),
            SimError::SwapIn(e) => e.errno(),
            SimError::Swap(e) => e.errno(),
            SimError::Swapoff(e) => e.errno(),
            SimError::Pageout { .. } => Errno::ENOMEM,
            SimError::Corrupt { .. } => Errno::EIO,
            // A signal, not an errno: what the lost fault would have said.
            SimError::Killed { .. } => Errno::ENOMEM,
            SimError::NoSuchTask(_) => Errno::ESRCH,
            // Not an errno a program sees (it would wait): "would block".
            SimError::Frozen { .. } => Errno::EAGAIN,
        }
    }
}

/// Told the pid of every task the simulator kills (see
/// [`Sim::set_kill_hook`]).
pub type KillHook = Arc<dyn Fn(u32) + Send + Sync>;

struct Inner {
    /// The simulated kernel the tasks run on.
    machine: Arc<Machine>,
    tasks: Mutex<BTreeMap<u32, Arc<Task>>>,
    /// Told of each kill (the FUSE server kills the host process).
    kill_hook: Mutex<Option<KillHook>>,
    /// Stops and lists adopted host processes (`freezer.rs`).
    host_tasks: Mutex<Option<Arc<dyn HostTasks>>>,
    /// Operations of frozen tasks fail instead of waiting
    /// ([`FrozenOps::Refuse`]).
    refuse_frozen_ops: AtomicBool,
    mappings: Mutex<BTreeMap<String, Arc<Mapping>>>,
    next_pid: AtomicU32,
    /// Hands CPUs to tasks that are nobody's ([`Sim::run_in`]).
    transient_cpu: AtomicUsize,
    /// Direct charges (`charges.rs`).
    ledger: Mutex<charges::Ledger>,
    /// Mappings of killed tasks with blocks an operation still held.
    killed_mappings: Mutex<Vec<Arc<Mapping>>>,
    /// `killed_mappings.len()`, for a look without its lock
    /// ([`Inner::after_unlock`]).
    killed_pending: AtomicUsize,
    /// Host processes' anonymous memory (`host_mm.rs`), by pid: a kill
    /// releases it at once, as the oom_reaper would.
    host_mms: Mutex<BTreeMap<u32, Weak<HostMm>>>,
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
        inner.move_task(&task, cg);
        Ok(())
    }

    fn threads(&self, cg: &Cgroup) -> Vec<u32> {
        let Some(inner) = self.0.upgrade() else {
            return Vec::new();
        };
        let tasks = inner.tasks_in(cg);
        let host = lock(&inner.host_tasks).clone();
        let mut tids = Vec::with_capacity(tasks.len());
        for t in tasks {
            match &host {
                Some(host) if t.adopted => tids.extend(host.threads(t.pid)),
                _ => tids.push(t.pid),
            }
        }
        tids
    }

    fn cgroup_of(&self, pid: u32) -> Option<Arc<Cgroup>> {
        let inner = self.0.upgrade()?;
        let task = lock(&inner.tasks).get(&pid).cloned()?;
        Some(task.cgroup())
    }

    fn freeze(&self, cg: &Cgroup, freeze: bool) {
        if let Some(inner) = self.0.upgrade() {
            for t in inner.tasks_in(cg) {
                inner.freeze_task(&t, freeze);
            }
        }
    }

    fn kill(&self, cg: &Arc<Cgroup>) {
        if let Some(inner) = self.0.upgrade() {
            inner.kill_cgroup(cg);
        }
    }

    fn current_task(&self) -> Option<Arc<PsiTask>> {
        oom_kill::current_task()
    }
}

impl Inner {
    /// Kills `task` (OOM or `cgroup.kill`): it leaves its cgroup and the
    /// task list, its mappings are unmapped, and every block no operation
    /// holds is released now (the rest by whoever lets go of them last:
    /// see [`Inner::after_unlock`]). False if it was already killed.
    fn kill_task(&self, task: &Arc<Task>) -> bool {
        if !task.kill() {
            return false;
        }
        self.remove_task(task);
        // No lock of ours is held here: the hook may take its own.
        let hook = lock(&self.kill_hook).clone();
        if let Some(hook) = hook {
            hook(task.pid);
        }
        let host_mm = lock(&self.host_mms).remove(&task.pid);
        if let Some(mm) = host_mm.and_then(|w| w.upgrade()) {
            mm.release();
        }
        let gone: Vec<Arc<Mapping>> = {
            let mut mappings = lock(&self.mappings);
            let names: Vec<String> = mappings
                .iter()
                .filter(|(_, m)| Arc::ptr_eq(&m.task, task))
                .map(|(n, _)| n.clone())
                .collect();
            names.iter().filter_map(|n| mappings.remove(n)).collect()
        };
        let mut left_busy = false;
        for m in gone {
            // An operation in flight may hold some blocks (its own, or a
            // reclaimer of any task unmapping a folio): left for the reaping.
            if !self.release_unheld_blocks(&m) {
                continue;
            }
            let mut pending = lock(&self.killed_mappings);
            pending.push(m);
            self.killed_pending.store(pending.len(), Ordering::Relaxed);
            left_busy = true;
        }
        if left_busy {
            // The holders may have let go meanwhile: look again. SeqCst:
            // pairs with the fence in `after_unlock`, so that either this
            // look finds a block free or its holder, once it let go, sees
            // the mapping pending and reaps it.
            fence(Ordering::SeqCst);
            self.reap_killed();
        }
        true
    }

    /// The tasks in exactly `cg`, ascending by pid (a snapshot).
    fn tasks_in(&self, cg: &Cgroup) -> Vec<Arc<Task>> {
        lock(&self.tasks)
            .values()
            .filter(|t| std::ptr::eq(&*t.cgroup(), cg))
            .cloned()
            .collect()
    }

    /// Whether operations of frozen tasks fail rather than wait.
    pub(crate) fn frozen_ops(&self) -> FrozenOps {
        // Relaxed: a setting.
        if self.refuse_frozen_ops.load(Ordering::Relaxed) {
            FrozenOps::Refuse
        } else {
            FrozenOps::Wait
        }
    }

    /// Kills every task in `cg`'s subtree (`cgroup.kill`).
    fn kill_cgroup(&self, cg: &Arc<Cgroup>) {
        let tasks: Vec<Arc<Task>> = lock(&self.tasks)
            .values()
            .filter(|t| {
                let tcg = t.cgroup();
                std::iter::once(&tcg)
                    .chain(tcg.ancestors())
                    .any(|c| Arc::ptr_eq(c, cg))
            })
            .cloned()
            .collect();
        for t in tasks {
            self.kill_task(&t);
        }
        self.reap_killed();
    }

    /// Releases what kills left behind of mappings no longer busy. The
    /// list stays locked throughout (blocks are only try-locked under it),
    /// so a reaper never finds it empty while another one has its
    /// mappings out.
    fn reap_killed(&self) {
        let mut pending = lock(&self.killed_mappings);
        pending.retain(|m| self.release_unheld_blocks(m));
        self.killed_pending.store(pending.len(), Ordering::Relaxed);
    }

    /// Releases every block of a killed task's mapping that no operation
    /// holds (try-locking each); the held ones stay in the mapping. Once
    /// none is left, its page tables go too (`exit_mmap`). True if any is
    /// still held.
    fn release_unheld_blocks(&self, m: &Mapping) -> bool {
        let mut first_error = None;
        let held: Vec<Arc<Block>> = m
            .take_blocks()
            .into_iter()
            .filter(|b| !mm::release_block(self, b, false, &mut first_error))
            .collect();
        let still_held = !held.is_empty();
        for b in held {
            m.push_block(b);
        }
        if !still_held {
            m.task.mm.page_tables.free();
        }
        still_held
    }

    /// Called by whoever held blocks (an operation on a mapping, reclaim
    /// unmapping a folio) once it let go of them: if a kill found one of
    /// them busy meanwhile, it is released now, by the last holder, as
    /// the kernel's exit path or oom_reaper would. Without this a killed
    /// task's pages stayed charged until some later kill or exit reaped.
    pub(crate) fn after_unlock(&self) {
        // SeqCst: pairs with the fence in `kill_task`.
        fence(Ordering::SeqCst);
        if self.killed_pending.load(Ordering::Relaxed) > 0 {
            self.reap_killed();
        }
    }
}

impl Sim {
    /// A simulation with a fresh hierarchy and no swap.
    pub fn new(config: SimConfig) -> Self {
        let inner = Arc::new(Inner {
            machine: Machine::new(config.machine()),
            tasks: Mutex::new(BTreeMap::new()),
            kill_hook: Mutex::new(None),
            host_tasks: Mutex::new(None),
            refuse_frozen_ops: AtomicBool::new(false),
            mappings: Mutex::new(BTreeMap::new()),
            next_pid: AtomicU32::new(config.first_pid),
            transient_cpu: AtomicUsize::new(0),
            ledger: Mutex::new(charges::Ledger::default()),
            killed_mappings: Mutex::new(Vec::new()),
            killed_pending: AtomicUsize::new(0),
            host_mms: Mutex::new(BTreeMap::new()),
            seed: config.seed,
        });
        let tree = inner.machine.tree();
        tree.set_task_hooks(Arc::new(Hooks(Arc::downgrade(&inner))));
        tree.set_oom_handler(Arc::new(OomKiller(Arc::downgrade(&inner))));
        Self { inner }
    }

    /// The simulated kernel: cgroups, swap, mounts, reclaim.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.inner.machine
    }

    /// The seed of every random fill.
    pub fn seed(&self) -> u64 {
        self.inner.seed
    }

    /// The cgroup v2 interface (the machine's).
    pub fn fs(&self) -> &CgroupFs {
        self.inner.machine.fs()
    }

    /// Swap devices, cache and accounting (the machine's).
    pub fn swap(&self) -> &SwapSystem {
        self.inner.machine.swap()
    }

    /// [`Machine::swapon_ram`].
    pub fn swapon_ram(&self, size_bytes: u64, prio: Option<i32>) -> Result<String, SimError> {
        Ok(self.inner.machine.swapon_ram(size_bytes, prio)?)
    }

    /// Swaps off the device named `name`, faulting every page on it back
    /// into its mapping (charged as a swap-in would be). If a page cannot
    /// come back, the device stays on.
    pub fn swapoff(&self, name: &str) -> Result<(), SimError> {
        let device = self
            .inner
            .machine
            .swap()
            .swapfiles()
            .by_name(name)
            .ok_or_else(|| SwapError::NoSuchDevice(name.to_owned()))?;
        let result = self
            .inner
            .machine
            .swap()
            .swapoff(device.ty(), |entry| self.unuse(entry));
        // Bringing pages back may have OOM-killed their tasks.
        self.inner.reap_killed();
        result?;
        Ok(())
    }

    /// Faults in the page at `entry` wherever it is mapped (swapoff's walk).
    fn unuse(&self, entry: SwapEntry) -> Result<(), SwapInError> {
        let mappings: Vec<Arc<Mapping>> = lock(&self.inner.mappings).values().cloned().collect();
        let mut busy: Vec<(Arc<Mapping>, Arc<Block>)> = mappings
            .iter()
            .flat_map(|m| m.blocks().into_iter().map(move |b| (Arc::clone(m), b)))
            .collect();
        // Blocks whose lock is free are searched at once; a busy one is
        // retried until its lock is free or the slot was freed meanwhile
        // (its task faulted the page in itself), so a task working on its
        // mapping in a loop cannot starve swapoff.
        while !busy.is_empty() {
            let mut still_busy = Vec::new();
            for (m, block) in busy {
                let Some(mut extents) = block.try_lock() else {
                    still_busy.push((m, block));
                    continue;
                };
                if let Some(ext) = extents.iter_mut().find(|ext| ext.swapped_at(entry)) {
                    let State::Swapped(first) = ext.state else {
                        unreachable!("swapped_at checked it")
                    };
                    let folio =
                        self.inner
                            .machine
                            .swap()
                            .swap_in(first, ext.nr, &m.task.memcg())?;
                    lruvec::folio_add_lru(&folio, block.rmap());
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
            .machine
            .swap()
            .swapfiles()
            .get(entry.swp_type())
            .is_none_or(|d| d.count(entry).is_ok_and(|c| c == 0))
    }

    /// `/proc/meminfo` of the simulated machine (the lines it can fill;
    /// see [`memcg::meminfo`]).
    pub fn proc_meminfo(&self) -> String {
        memcg::meminfo::render(self.fs().tree(), self.swap())
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
    /// the task's pid. Populating charges, so it may reclaim (swapping out
    /// colder pages, this mapping's earlier ones included) and OOM-kill;
    /// when it fails, or the task itself is killed, the task exits and
    /// nothing it took stays charged.
    pub fn alloc(
        &self,
        cgroup: &str,
        name: &str,
        size_bytes: u64,
        folio_pages: u32,
        fill: Fill,
    ) -> Result<u32, SimError> {
        self.alloc_faulting(cgroup, name, size_bytes, folio_pages, fill, Faults::Touched)
    }

    /// [`Sim::alloc`] with every fault in one system call, as `mlock` or
    /// `mmap(MAP_POPULATE)` populate a mapping (`populate_vma_page_range`):
    /// the `memory.high` work of its charges waits for that call's return
    /// to user space, unless more than a charge batch goes over high
    /// before it (then a charge does it at once: see
    /// [`memcg::memcontrol::KernelEntry`]). `mlock`'s pages would also be
    /// unevictable; that is not modelled.
    pub fn alloc_populate(
        &self,
        cgroup: &str,
        name: &str,
        size_bytes: u64,
        folio_pages: u32,
        fill: Fill,
    ) -> Result<u32, SimError> {
        self.alloc_faulting(cgroup, name, size_bytes, folio_pages, fill, Faults::OneCall)
    }

    fn alloc_faulting(
        &self,
        cgroup: &str,
        name: &str,
        size_bytes: u64,
        folio_pages: u32,
        fill: Fill,
        faults: Faults,
    ) -> Result<u32, SimError> {
        let start = mapping_start(size_bytes, folio_pages)?;
        let cg = self.inner.machine.fs().cgroup(cgroup)?;
        if lock(&self.inner.mappings).contains_key(name) {
            return Err(SimError::MappingExists(name.to_owned()));
        }
        // The task forks into the cgroup first (refused where a task may
        // not be: the no-internal-process rule), maps, then populates.
        let task = self.fork_into(cgroup, &cg)?;
        let stream = fill::stream(self.inner.seed, name);
        let mapping = Arc::new(Mapping::new(Arc::clone(&task), fill, stream, start));
        {
            let mut mappings = lock(&self.inner.mappings);
            if mappings.contains_key(name) {
                drop(mappings);
                self.inner.remove_task(&task);
                return Err(SimError::MappingExists(name.to_owned()));
            }
            mappings.insert(name.to_owned(), Arc::clone(&mapping));
        }
        // A kill between populate's last look and its last block going in
        // left that block out of the unmapping: the exit takes it. (The
        // kill flag is set before the kill takes the blocks, under the
        // lock that adding one takes: one of the two sees the other.)
        let populated = self
            .populate(&mapping, size_bytes, folio_pages, faults)
            .and_then(|()| match task.is_killed() {
                true => Err(SimError::Killed { pid: task.pid() }),
                false => Ok(()),
            });
        match populated {
            Ok(()) => Ok(task.pid),
            Err(e) => {
                let e = killed_or(&task, e);
                self.exit(name, &mapping);
                Err(e)
            }
        }
    }

    /// A new task forked into `cg` (named `cgroup` in the error), entered
    /// under the tree's attach rules and frozen if `cg` is.
    fn fork_into(&self, cgroup: &str, cg: &Arc<Cgroup>) -> Result<Arc<Task>, SimError> {
        let task = Arc::new(Task::new(
            self.inner.next_pid.fetch_add(1, Ordering::Relaxed),
            Arc::clone(cg),
            false,
            self.nr_cpus(),
        ));
        self.inner
            .machine
            .fs()
            .tree()
            .enter(cg, || {
                lock(&self.inner.tasks).insert(task.pid, Arc::clone(&task));
                self.inner.freeze_new_task(&task, cg);
            })
            .map_err(|errno| SimError::Task {
                cgroup: cgroup.to_owned(),
                errno,
            })?;
        Ok(task)
    }

    /// Faults in every folio of a new mapping, filling its pages.
    fn populate(
        &self,
        m: &Mapping,
        size_bytes: u64,
        folio_pages: u32,
        faults: Faults,
    ) -> Result<(), SimError> {
        let running = self.inner.begin_op(&m.task)?;
        let _current = CurrentTask::enter(self.inner.machine.fs().tree(), &m.task);
        // Dropped before `_current`: the return to user space is the
        // task's own.
        let _call =
            (faults == Faults::OneCall).then(|| self.inner.machine.fs().tree().kernel_entry());
        let mut memcg = m.task.memcg();
        for first_page in (0..size_bytes / PAGE_BYTES as u64).step_by(folio_pages as usize) {
            if running.freeze_point()? {
                // It may have moved while it was frozen.
                memcg = m.task.memcg();
            }
            let folios = self.fault_anon(m, &memcg, first_page, folio_pages)?;
            if m.task.is_killed() {
                return Err(SimError::Killed { pid: m.task.pid() });
            }
            let mut extents = Vec::with_capacity(folios.len());
            for (first_page, folio) in folios {
                for (i, page) in folio.bytes().chunks_exact_mut(PAGE_BYTES).enumerate() {
                    fill::fill_page(m.fill, m.stream, first_page + i as u64, page);
                }
                extents.push(Extent {
                    first_page,
                    nr: folio.nr(),
                    state: State::Resident(Arc::new(folio)),
                });
            }
            m.push_block(Block::new(&self.inner, &m.task.mm, extents));
        }
        Ok(())
    }

    /// The task of mapping `name` exits: the mapping goes, its memory and
    /// swap are released, the task leaves its cgroup.
    fn exit(&self, name: &str, m: &Arc<Mapping>) {
        {
            let mut mappings = lock(&self.inner.mappings);
            if mappings.get(name).is_some_and(|x| Arc::ptr_eq(x, m)) {
                mappings.remove(name);
            }
        }
        let mut first_error = None;
        for block in m.take_blocks() {
            mm::release_block(&self.inner, &block, true, &mut first_error);
        }
        m.task.mm.page_tables.free();
        self.inner.remove_task(&m.task);
        self.inner.reap_killed();
    }

    /// After an operation on `m`: if its task was killed meanwhile, release
    /// what the kill could not (the blocks this operation held).
    fn finish(&self, m: &Arc<Mapping>) -> Result<(), SimError> {
        if !m.task.is_killed() {
            return Ok(());
        }
        self.inner.reap_killed();
        Err(SimError::Killed { pid: m.task.pid() })
    }

    /// The anonymous faults that populate the `folio_pages` pages from
    /// `first_page` of `m` (`__handle_mm_fault`): the page tables over
    /// them first (`pud_alloc`, `pmd_alloc`, `pte_alloc`; `pgtable.rs`),
    /// then the folio (`alloc_anon_folio`): a large folio is charged
    /// without reclaim (`GFP_TRANSHUGE_LIGHT`, the default `defrag` for a
    /// VMA not `MADV_HUGEPAGE`); when that fails, each page faults in as a
    /// single page charged with the full reclaim and OOM path. A PMD-sized
    /// folio is charged before its PTE table, which it deposits
    /// (`__do_huge_pmd_anonymous_page`). A table whose charge fails fails
    /// the fault (`VM_FAULT_OOM`). Every fault counts one `pgfault` on the
    /// task's memory cgroup, failed ones too (`mm_account_fault`).
    fn fault_anon(
        &self,
        m: &Mapping,
        memcg: &Arc<MemCgroup>,
        first_page: u64,
        folio_pages: u32,
    ) -> Result<Vec<(u64, Folio)>, SimError> {
        let tree = self.inner.machine.fs().tree();
        let (task, addr) = (&m.task, m.addr(first_page));
        let tables = &task.mm.page_tables;
        let table = |level| {
            tables.alloc(tree, memcg, level, addr).map_err(|e| {
                memcg.count_vm_event(VmEvent::Pgfault, 1);
                SimError::from(e)
            })
        };
        table(Level::Pud)?;
        table(Level::Pmd)?;
        if folio_pages == HPAGE_PMD_NR
            && let Ok(folio) = Folio::new(tree, memcg, folio_pages, Gfp::NoReclaim)
        {
            // The folio goes back (uncharged) if its table cannot come.
            table(Level::Pte)?;
            memcg.count_vm_event(VmEvent::Pgfault, 1);
            return Ok(vec![(first_page, folio)]);
        }
        table(Level::Pte)?;
        if folio_pages > 1
            && folio_pages < HPAGE_PMD_NR
            && let Ok(folio) = Folio::new(tree, memcg, folio_pages, Gfp::NoReclaim)
        {
            memcg.count_vm_event(VmEvent::Pgfault, 1);
            return Ok(vec![(first_page, folio)]);
        }
        let mut pages = Vec::with_capacity(folio_pages as usize);
        for i in 0..u64::from(folio_pages) {
            // A killed task faults no more (it dies on its way back).
            if task.is_killed() {
                return Err(SimError::Killed { pid: task.pid() });
            }
            memcg.count_vm_event(VmEvent::Pgfault, 1);
            pages.push((first_page + i, Folio::new(tree, memcg, 1, Gfp::Kernel)?));
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

    /// Runs the calling thread as `task` until the guard drops: the
    /// kernel's `current` for what the thread does meanwhile (charges,
    /// reclaim, the OOM killer's choices), and a task running in its
    /// cgroup's pressure, on its CPU (a FUSE request of a host process,
    /// say).
    pub fn run_as(&self, task: &Arc<Task>) -> CurrentTask {
        CurrentTask::enter(self.inner.machine.fs().tree(), task)
    }

    /// Runs the calling thread as a short-lived task of `cg` that nobody
    /// lists (a file read or write made "as a task of a cgroup"), unless
    /// it runs as a task already. Such tasks take the CPUs in turn.
    pub(crate) fn run_in(&self, cg: &Arc<Cgroup>) -> CurrentTask {
        // Relaxed: a counter that only spreads tasks over CPUs.
        let n = self.inner.transient_cpu.fetch_add(1, Ordering::Relaxed);
        let cpu = n % self.nr_cpus().max(1) as usize;
        CurrentTask::enter_cgroup(self.inner.machine.fs().tree(), cg, cpu)
    }

    /// The simulated machine's CPUs.
    pub fn nr_cpus(&self) -> u32 {
        self.inner.machine.fs().tree().nr_cpus()
    }

    /// Adds a task with pid `pid` in `cgroup` that the simulator did not
    /// start (a host process, as the FUSE server sees them): it has no
    /// mappings; its file reads and writes are charged through its cgroup.
    /// Refused where a task may not be (the no-internal-process rule).
    /// If a task with that pid lives already, it is returned unchanged.
    pub fn adopt_task(&self, pid: u32, cgroup: &str) -> Result<Arc<Task>, SimError> {
        if let Some(task) = self.task(pid) {
            return Ok(task);
        }
        let cg = self.inner.machine.fs().cgroup(cgroup)?;
        let task = Arc::new(Task::new(pid, Arc::clone(&cg), true, self.nr_cpus()));
        self.inner
            .machine
            .fs()
            .tree()
            .enter(&cg, || {
                let adopted = lock(&self.inner.tasks)
                    .entry(pid)
                    .or_insert_with(|| Arc::clone(&task))
                    .clone();
                if Arc::ptr_eq(&adopted, &task) {
                    self.inner.freeze_new_task(&task, &cg);
                }
                adopted
            })
            .map_err(|errno| SimError::Task {
                cgroup: cgroup.to_owned(),
                errno,
            })
    }

    /// Puts the anonymous memory of host process `task` (adopted) under
    /// the simulator (`host_mm.rs`), reached through `host`. A process that
    /// exec'd replaces its old memory, which is released.
    pub fn attach_host_mm(&self, task: &Arc<Task>, host: Box<dyn HostPages>) -> Arc<HostMm> {
        let mm = HostMm::new(&self.inner, Arc::clone(task), host);
        *lock(&task.mm.host) = Arc::downgrade(&mm);
        let old = lock(&self.inner.host_mms).insert(task.pid, Arc::downgrade(&mm));
        if let Some(old) = old.and_then(|w| w.upgrade()) {
            old.release();
        }
        mm
    }

    /// The process `mm` belongs to is gone (it exited or exec'd): its
    /// memory is released.
    pub fn detach_host_mm(&self, mm: &Arc<HostMm>) {
        let pid = mm.task().pid;
        let mut mms = lock(&self.inner.host_mms);
        if mms
            .get(&pid)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(mm)))
        {
            mms.remove(&pid);
        }
        drop(mms);
        mm.release();
    }

    /// Installs `hook`, called with the pid of every task the simulator
    /// kills (`cgroup.kill`, the OOM killer), with none of the
    /// simulator's locks held: how an adopted host process is killed on
    /// the host too.
    pub fn set_kill_hook(&self, hook: KillHook) {
        *lock(&self.inner.kill_hook) = Some(hook);
    }

    /// Removes task `pid` that exited on its own (an adopted host process
    /// gone): it leaves its cgroup; what it charged stays charged, as a
    /// process's page cache outlives it. False if there was no such task.
    pub fn release_task(&self, pid: u32) -> bool {
        self.task(pid)
            .is_some_and(|task| self.inner.remove_task(&task))
    }

    /// Installs the hook through which adopted host processes are stopped
    /// and continued as their cgroups freeze and thaw, and their threads
    /// listed in `cgroup.threads`.
    pub fn set_host_tasks(&self, host: Arc<dyn HostTasks>) {
        *lock(&self.inner.host_tasks) = Some(host);
    }

    /// Sets what an operation of a frozen task does (see [`FrozenOps`];
    /// waiting by default).
    pub fn set_frozen_ops(&self, ops: FrozenOps) {
        // Relaxed: a setting.
        self.inner
            .refuse_frozen_ops
            .store(ops == FrozenOps::Refuse, Ordering::Relaxed);
    }

    /// The task with pid `pid`, if it lives.
    pub fn task(&self, pid: u32) -> Option<Arc<Task>> {
        lock(&self.inner.tasks).get(&pid).cloned()
    }

    /// Kills task `pid` (SIGKILL): it leaves its cgroup, its memory and
    /// swap are freed. `ESRCH` if there is no such task.
    pub fn kill(&self, pid: u32) -> Result<(), SimError> {
        let task = self.task(pid).ok_or(SimError::NoSuchTask(pid))?;
        self.inner.kill_task(&task);
        self.inner.reap_killed();
        Ok(())
    }

    /// Swaps out every resident page of `name` (like `MADV_PAGEOUT`);
    /// returns the pages swapped. Pages that cannot go stay resident and are
    /// reported as an error after the others went.
    pub fn pageout(&self, name: &str) -> Result<u64, SimError> {
        let m = self.mapping(name)?;
        let _running = self.inner.begin_op(&m.task)?;
        let (mut swapped, mut kept, mut first_error) = (0, 0, None);
        for block in m.blocks() {
            let mut extents = block.lock();
            let mut out = Vec::with_capacity(extents.len());
            for ext in extents.drain(..) {
                let State::Resident(folio) = ext.state else {
                    out.push(ext);
                    continue;
                };
                let whole = folio.nr();
                // MADV_PAGEOUT reclaims for no memory cgroup: the shadows
                // record the root's clock.
                let root = self.inner.machine.fs().tree().root();
                for piece in self.inner.machine.swap().swap_out_or_split(folio, root) {
                    let state = match piece.outcome {
                        Ok(entry) => {
                            swapped += u64::from(piece.nr);
                            State::Swapped(entry)
                        }
                        Err((folio, e)) => {
                            first_error.get_or_insert(e);
                            kept += u64::from(piece.nr);
                            if piece.nr != whole {
                                // A piece of a split: a new folio.
                                lruvec::folio_add_lru(&folio, block.rmap());
                            }
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
        }
        self.inner.after_unlock();
        match first_error {
            None => Ok(swapped),
            Some(source) => Err(SimError::Pageout {
                name: name.to_owned(),
                pages: kept,
                source,
            }),
        }
    }

    /// Accesses every page of `name`: resident pages are marked accessed
    /// (their page-table entries' accessed bits), swapped ones fault back
    /// in, charged per the swap-in rule to the task's current cgroup or
    /// the recorded owner; returns the pages faulted in. Stops at the
    /// first fault that fails.
    pub fn touch(&self, name: &str) -> Result<u64, SimError> {
        let m = self.mapping(name)?;
        let running = self.inner.begin_op(&m.task)?;
        let mut memcg = m.task.memcg();
        let _current = CurrentTask::enter(self.inner.machine.fs().tree(), &m.task);
        let mut faulted = 0;
        let mut result = Ok(());
        for block in m.blocks() {
            if result.is_err() || m.task.is_killed() {
                break;
            }
            match running.freeze_point() {
                // It may have moved while it was frozen.
                Ok(true) => memcg = m.task.memcg(),
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            let mut extents = block.lock();
            faulted += self.touch_extents(&memcg, &block, &mut extents, &mut result);
        }
        self.inner.after_unlock();
        if m.task.is_killed() {
            return Err(self.finish(&m).unwrap_err());
        }
        result.map(|()| faulted)
    }

    /// [`Sim::touch`] over one block's extents (under its lock): marks
    /// resident folios young and faults swapped runs back in while
    /// `result` is still `Ok`, recording the first error there; returns the
    /// pages faulted in.
    fn touch_extents(
        &self,
        memcg: &Arc<MemCgroup>,
        block: &Block,
        extents: &mut Vec<Extent>,
        result: &mut Result<(), SimError>,
    ) -> u64 {
        let mut faulted = 0;
        let mut i = 0;
        while i < extents.len() {
            let (entry, first_page, nr) = match &extents[i].state {
                State::Resident(folio) => {
                    lruvec::folio_mark_young(folio);
                    i += 1;
                    continue;
                }
                State::Swapped(entry) if result.is_ok() => {
                    (*entry, extents[i].first_page, extents[i].nr)
                }
                State::Swapped(_) => {
                    i += 1;
                    continue;
                }
            };
            // The common case, the folio back whole, changes the extent
            // in place; a fallback to pages replaces it with pieces.
            let pieces = match self.fault_whole(memcg, entry, nr) {
                Ok(folio) => {
                    lruvec::folio_add_lru(&folio, block.rmap());
                    extents[i].state = State::Resident(folio);
                    faulted += u64::from(nr);
                    i += 1;
                    continue;
                }
                Err(Some(e)) => {
                    *result = Err(e.into());
                    i += 1;
                    continue;
                }
                Err(None) => match self.fault_pages(memcg, entry, first_page, nr) {
                    Ok(pieces) => {
                        faulted += u64::from(nr);
                        pieces
                    }
                    Err((e, left)) => {
                        *result = Err(e);
                        left
                    }
                },
            };
            for piece in &pieces {
                if let State::Resident(folio) = &piece.state {
                    lruvec::folio_add_lru(folio, block.rmap());
                }
            }
            let n = pieces.len();
            extents.splice(i..i + 1, pieces);
            i += n;
        }
        faulted
    }

    /// The fault that brings back a swapped run of `nr` pages from `entry`
    /// whole (`do_swap_page`): a large folio is charged without reclaim
    /// (`alloc_swap_folio`); `Err(None)` when that charge fails, or when
    /// the run may not come back whole at all
    /// ([`SwapSystem::may_swap_in_large`]: zswap was ever enabled, or the
    /// device is not synchronous), and each page must then fault on its own
    /// ([`Sim::fault_pages`]). One `pgfault` on the faulting task's memory
    /// cgroup, whoever the page is charged to.
    fn fault_whole(
        &self,
        memcg: &Arc<MemCgroup>,
        entry: SwapEntry,
        nr: u32,
    ) -> Result<Arc<Folio>, Option<SwapInError>> {
        let swap = self.inner.machine.swap();
        memcg.count_vm_event(VmEvent::Pgfault, 1);
        if nr > 1 && !swap.may_swap_in_large(entry) {
            return Err(None);
        }
        let whole = if nr > 1 {
            swap.do_swap_page(entry, nr, memcg, Gfp::NoReclaim)
        } else {
            swap.do_swap_page(entry, nr, memcg, Gfp::Kernel)
        };
        whole.map_err(|e| match e {
            SwapInError::Charge(_) if nr > 1 => None,
            e => Some(e),
        })
    }

    /// The page-by-page fallback of [`Sim::fault_whole`], each page with the
    /// full charge path (the first page's fault was already counted). On
    /// failure, returns the extents as they are (pages brought in so far
    /// and the rest still swapped).
    fn fault_pages(
        &self,
        memcg: &Arc<MemCgroup>,
        entry: SwapEntry,
        first_page: u64,
        nr: u32,
    ) -> Result<Vec<Extent>, (SimError, Vec<Extent>)> {
        let swap = self.inner.machine.swap();
        let still_swapped = |from: u32| Extent {
            first_page: first_page + u64::from(from),
            nr: nr - from,
            state: State::Swapped(entry.add(u64::from(from)).expect("inside the run")),
        };
        let mut pieces = Vec::with_capacity(nr as usize);
        for i in 0..nr {
            if i > 0 {
                memcg.count_vm_event(VmEvent::Pgfault, 1);
            }
            let page_entry = entry.add(u64::from(i)).expect("inside the run");
            match swap.do_swap_page(page_entry, 1, memcg, Gfp::Kernel) {
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
        let result = self.verify_blocks(name, &m);
        self.inner.after_unlock();
        result
    }

    fn verify_blocks(&self, name: &str, m: &Mapping) -> Result<(), SimError> {
        let mut expected = vec![0u8; PAGE_BYTES];
        for block in m.blocks() {
            let extents = block.lock();
            for ext in extents.iter() {
                let bytes = match &ext.state {
                    State::Resident(folio) => folio.bytes().to_vec(),
                    State::Swapped(entry) => self.inner.machine.swap().peek(*entry, ext.nr)?,
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
        }
        Ok(())
    }

    /// Unmaps `name` and ends its task: resident pages are uncharged, swap
    /// slots released (uncharging swap and unpinning the owner).
    pub fn free(&self, name: &str) -> Result<(), SimError> {
        let task = self.task_of(name)?;
        let _running = self.inner.begin_op(&task)?;
        let m = lock(&self.inner.mappings)
            .remove(name)
            .ok_or_else(|| SimError::NoSuchMapping(name.to_owned()))?;
        let mut first_error = None;
        for block in m.take_blocks() {
            mm::release_block(&self.inner, &block, true, &mut first_error);
        }
        m.task.mm.page_tables.free();
        self.inner.remove_task(&m.task);
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    /// Pages of `name` in memory and on swap.
    pub fn residency(&self, name: &str) -> Result<Residency, SimError> {
        let residency = self.mapping(name)?.residency();
        self.inner.after_unlock();
        Ok(residency)
    }

    /// Names of every mapping.
    pub fn mappings(&self) -> Vec<String> {
        lock(&self.inner.mappings).keys().cloned().collect()
    }
}

/// `e`, or [`SimError::Killed`] if `task` was killed meanwhile (its charge
/// failing because of it).
fn killed_or(task: &Task, e: SimError) -> SimError {
    if task.is_killed() {
        SimError::Killed { pid: task.pid() }
    } else {
        e
    }
}

/// Where a new mapping of `size_bytes` in folios of `folio_pages` pages
/// starts, after checking both sizes.
fn mapping_start(size_bytes: u64, folio_pages: u32) -> Result<u64, SimError> {
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
    pgtable::mapping_start(size_bytes, folio_bytes).ok_or(SimError::NoAddressSpace(size_bytes))
}

impl Drop for Sim {
    fn drop(&mut self) {
        // Release everything so the hierarchy tears down balanced.
        for name in self.mappings() {
            let _ = self.free(&name);
        }
        let killed = std::mem::take(&mut *lock(&self.inner.killed_mappings));
        let mut first_error = None;
        for m in &killed {
            for block in m.take_blocks() {
                mm::release_block(&self.inner, &block, true, &mut first_error);
            }
            m.task.mm.page_tables.free();
        }
        self.release_charges();
    }
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("mappings", &self.mappings())
            .field("machine", &self.inner.machine)
            .finish()
    }
}

/// A simulator for unit tests: memory enabled below the root and one
/// cgroup, `/a`.
#[cfg(test)]
pub(crate) fn test_sim() -> Sim {
    test_sim_with(SimConfig::default())
}

/// [`test_sim`] where memory cgroups charge none of their own structures
/// to their parents: only what the tasks make is charged.
#[cfg(test)]
pub(crate) fn test_sim_without_metadata() -> Sim {
    test_sim_with(SimConfig {
        memcg_metadata_bytes: Some(0),
        ..SimConfig::default()
    })
}

#[cfg(test)]
fn test_sim_with(config: SimConfig) -> Sim {
    let sim = Sim::new(config);
    // Exact figures (no charge stock).
    sim.fs().tree().set_charge_stock(false);
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.fs().mkdir("/a").unwrap();
    sim
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcg::memcontrol::{ChargeKind, MemcgEvent, MemcgStat};
    use memcg::meminfo;

    fn sim() -> Sim {
        test_sim()
    }

    fn small_machine(mem_bytes: u64) -> Sim {
        let sim = Sim::new(SimConfig {
            mem_bytes,
            ..SimConfig::default()
        });
        sim.fs().tree().set_charge_stock(false);
        sim.fs()
            .write("/cgroup.subtree_control", "+memory")
            .unwrap();
        sim.fs().mkdir("/a").unwrap();
        sim
    }

    #[test]
    fn the_machine_size_bounds_every_charge() {
        let sim = small_machine(8 << 20);
        // 100G in an unlimited cgroup with no swap: the machine fills, and
        // the global OOM killer picks the largest task, the allocating one.
        let err = sim
            .alloc("/a", "big", 100 << 30, 16, Fill::Zero)
            .unwrap_err();
        assert!(matches!(err, SimError::Killed { .. }), "{err}");
        // Only /a's own structures, 14 KiB charged to the root, are left.
        assert_eq!(sim.fs().tree().machine_used_pages(), 4);
        assert!(sim.mappings().is_empty());
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(
            (a.event(MemcgEvent::Max), a.event(MemcgEvent::Oom)),
            (0, 0),
            "not memory cgroup events"
        );
        assert_eq!(a.event(MemcgEvent::OomKill), 1, "where the victim lived");
        // A charge that is not a task's fault just fails.
        assert!(matches!(
            sim.charge(
                "/a",
                4096,
                ChargeTarget::Memory(memcg::memcontrol::ChargeKind::Anon)
            ),
            Err(SimError::Charge(ChargeError::MachineOutOfMemory {
                total_pages: 2048
            }))
        ));
        sim.alloc("/a", "fits", 2 << 20, 1, Fill::Pattern).unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(meminfo::value_kb(&info, "MemTotal"), Some(8192));
        // 2M of pages and 3 page tables (a PUD, a PMD and a PTE table).
        assert_eq!(meminfo::value_kb(&info, "MemFree"), Some(6144 - 16 - 12));
        assert_eq!(meminfo::value_kb(&info, "AnonPages"), Some(2048));
        assert_eq!(meminfo::value_kb(&info, "PageTables"), Some(12));
        assert_eq!(meminfo::value_kb(&info, "Percpu"), Some(6752 / 1024));
        assert_eq!(meminfo::value_kb(&info, "SUnreclaim"), Some(3088 / 1024));
        sim.swapon_ram(4 << 20, None).unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(meminfo::value_kb(&info, "SwapTotal"), Some(4092));
        assert_eq!(meminfo::value_kb(&info, "SwapFree"), Some(4092));
        assert_eq!(
            meminfo::value_kb(&info, "MemFree"),
            Some(6144 - 16 - 12 - 4),
            "swap tables"
        );
        // Swapping out to a RAM disk moves pages; it frees no memory.
        sim.pageout("fits").unwrap();
        let info = sim.proc_meminfo();
        assert_eq!(
            meminfo::value_kb(&info, "MemFree"),
            Some(6144 - 16 - 12 - 4)
        );
        assert_eq!(meminfo::value_kb(&info, "AnonPages"), Some(0));
        assert_eq!(meminfo::value_kb(&info, "SwapFree"), Some(4092 - 2048));
        sim.free("fits").unwrap();
    }

    /// A 16M machine with a 32M file swap device (its pages are not the
    /// machine's) and `/b` beside `/a`.
    fn kswapd_machine() -> (Sim, tempfile::TempDir) {
        let sim = small_machine(16 << 20);
        let dir = tempfile::tempdir().unwrap();
        sim.machine()
            .swapon_file(&dir.path().join("swap"), 32 << 20, None)
            .unwrap();
        sim.fs().mkdir("/b").unwrap();
        (sim, dir)
    }

    /// Charges `/c` directly (nothing reclaimable) until `below` pages
    /// under the low watermark are free: the charge wakes kswapd without
    /// reaching the min watermark (no direct reclaim).
    fn wake_kswapd(sim: &Sim, below: u64) {
        let tree = sim.fs().tree();
        let marks = tree.watermarks();
        assert!(marks.low_pages - below > marks.min_pages);
        let _ = sim.fs().mkdir("/c");
        let pages = tree.machine_free_pages() - (marks.low_pages - below);
        sim.charge("/c", pages, ChargeTarget::Memory(ChargeKind::Anon))
            .unwrap();
    }

    /// kswapd (`balance_pgdat`) has no `memcg_low_reclaim` pass: with only
    /// memory below `memory.low` to take, it frees nothing, raises no
    /// `low` event and leaves the protected pages resident, where direct
    /// reclaim would have broken into them.
    #[test]
    fn kswapd_never_breaches_memory_low() {
        let (sim, _dir) = kswapd_machine();
        sim.fs().write("/a/memory.low", "16M").unwrap();
        sim.alloc("/a", "x", 8 << 20, 1, Fill::Pattern).unwrap();
        wake_kswapd(&sim, 8);
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.event(MemcgEvent::Low), 0);
        assert_eq!(a.vm_event(VmEvent::PgscanKswapd), 0, "skipped, not scanned");
        assert_eq!(sim.residency("x").unwrap().swapped, 0);
        let tree = sim.fs().tree();
        assert!(tree.machine_free_pages() < tree.watermarks().low_pages);
        sim.free("x").unwrap();
    }

    /// kswapd walks every memory cgroup at each priority (no shared
    /// cursor, no stop at the goal) and works until more than the high
    /// watermark is free.
    #[test]
    fn kswapd_walks_every_memcg_to_the_high_watermark() {
        let (sim, _dir) = kswapd_machine();
        sim.alloc("/a", "x", 6 << 20, 1, Fill::Pattern).unwrap();
        sim.alloc("/b", "y", 6 << 20, 1, Fill::Pattern).unwrap();
        wake_kswapd(&sim, 8);
        let tree = sim.fs().tree();
        assert!(tree.machine_free_pages() > tree.watermarks().high_pages);
        for cg in ["/a", "/b"] {
            let m = sim.fs().memcg(cg).unwrap();
            assert!(m.vm_event(VmEvent::PgstealKswapd) > 0, "{cg}");
            assert_eq!(m.vm_event(VmEvent::PgstealDirect), 0, "{cg}");
        }
        sim.verify("x").unwrap();
        sim.verify("y").unwrap();
        sim.free("x").unwrap();
        sim.free("y").unwrap();
    }

    /// The page and major fault counts of `/a` after 1M of 64K folios went
    /// out and came back (fidelity R1).
    fn swap_in_faults(sim: &Sim) -> (u64, u64) {
        sim.alloc("/a", "x", 1 << 20, 16, Fill::Text).unwrap();
        assert_eq!(sim.pageout("x").unwrap(), 256);
        sim.touch("x").unwrap();
        sim.verify("x").unwrap();
        sim.free("x").unwrap();
        let a = sim.fs().memcg("/a").unwrap();
        (
            a.vm_event(VmEvent::Pgfault),
            a.vm_event(VmEvent::Pgmajfault),
        )
    }

    /// Once zswap has ever been enabled, v6.14 swaps in single pages
    /// (`alloc_swap_folio` falls back): 16 faults map 1M of 64K folios,
    /// then 256 major faults bring it back. The machine option for large
    /// zswap loads (beyond v6.14) brings each folio back whole.
    #[test]
    fn once_zswap_was_enabled_swap_ins_are_single_pages() {
        for (large, faults) in [(false, (16 + 256, 256)), (true, (16 + 16, 16))] {
            let sim = test_sim();
            sim.swap().zswap().set_large_folio_loads(large);
            sim.swapon_ram(64 << 20, None).unwrap();
            sim.swap().zswap().set_enabled(true);
            assert_eq!(swap_in_faults(&sim), faults, "large loads {large}");
            let a = sim.fs().memcg("/a").unwrap();
            assert_eq!(a.vm_event(VmEvent::Zswpout), 256);
            assert_eq!(a.vm_event(VmEvent::Zswpin), 256);
        }
        // Enabled once, then off: still single pages.
        let sim = test_sim();
        sim.swapon_ram(64 << 20, None).unwrap();
        sim.swap().zswap().set_enabled(true);
        sim.swap().zswap().set_enabled(false);
        assert!(!sim.swap().zswap().never_enabled());
        assert_eq!(swap_in_faults(&sim), (16 + 256, 256));
        // Never enabled, on a RAM disk: whole folios.
        let sim = test_sim();
        sim.swapon_ram(64 << 20, None).unwrap();
        assert_eq!(swap_in_faults(&sim), (16 + 16, 16));
    }

    /// `zswpin` counts on the entry's owner (`zswap_load`'s
    /// `count_objcg_events`): after its cgroup is removed, the parent its
    /// object cgroup went to, not the faulting task's cgroup, which the
    /// page is charged to now.
    #[test]
    fn zswpin_counts_on_the_entrys_reparented_owner() {
        let sim = test_sim();
        sim.swapon_ram(16 << 20, None).unwrap();
        sim.swap().zswap().set_enabled(true);
        sim.fs()
            .write("/a/cgroup.subtree_control", "+memory")
            .unwrap();
        sim.fs().mkdir("/a/b").unwrap();
        sim.fs().mkdir("/c").unwrap();
        let pid = sim.alloc("/a/b", "x", 64 << 10, 1, Fill::Text).unwrap();
        assert_eq!(sim.pageout("x").unwrap(), 16);
        sim.fs().write("/c/cgroup.procs", &pid.to_string()).unwrap();
        sim.fs().rmdir("/a/b").unwrap();
        sim.touch("x").unwrap();
        let (a, c) = (sim.fs().memcg("/a").unwrap(), sim.fs().memcg("/c").unwrap());
        assert_eq!(c.memory().usage(), 16, "charged to the faulting cgroup");
        assert_eq!(c.vm_event(VmEvent::Zswpin), 0);
        assert_eq!(a.vm_event(VmEvent::Zswpin), 16);
        sim.free("x").unwrap();
    }

    /// A device that is not synchronous (a file) is read through
    /// `swapin_readahead`, a page at a time.
    #[test]
    fn a_file_device_swaps_in_single_pages() {
        let sim = test_sim();
        let dir = tempfile::tempdir().unwrap();
        sim.machine()
            .swapon_file(&dir.path().join("swap"), 8 << 20, None)
            .unwrap();
        assert_eq!(swap_in_faults(&sim), (16 + 256, 256));
    }

    #[test]
    fn an_unkillable_task_is_passed_over_by_the_oom_killer_and_cgroup_kill() {
        // The host's init moved into /a (as root may): the OOM killer
        // skips it (`oom_unkillable_task`) however high its score, and
        // `cgroup.kill` leaves it there (a SIGKILL cannot reach it).
        let sim = sim();
        let init = sim.adopt_task(1, "/a").unwrap();
        init.set_unkillable();
        init.set_oom_score_adj(mm::OOM_SCORE_ADJ_MAX).unwrap();
        sim.fs().write("/a/memory.max", "64K").unwrap();
        let err = sim.alloc("/a", "m", 128 << 10, 1, Fill::Zero).unwrap_err();
        assert!(matches!(err, SimError::Killed { .. }), "{err}");
        assert!(!init.is_killed());
        sim.fs().write("/a/cgroup.kill", "1").unwrap();
        assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap(), "1\n");
        assert!(!init.is_killed());
        sim.release_task(1);
        assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap(), "");
    }

    #[test]
    fn large_folios_fall_back_to_pages_when_the_charge_fails() {
        let sim = sim();
        sim.fs().write("/a/memory.max", "96K").unwrap();
        // 128K of 64K folios under a 96K limit and no swap: the 3 page
        // tables and the first folio fit, the second's non-blocking charge
        // fails without events and it faults in page by page; the page
        // over the limit finds nothing reclaimable and the OOM killer picks
        // the only task.
        let err = sim.alloc("/a", "m", 128 << 10, 16, Fill::Zero).unwrap_err();
        assert!(matches!(err, SimError::Killed { .. }), "{err}");
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.memory().usage(), 0, "nothing left behind");
        assert_eq!(a.vm_event(VmEvent::Pgfault), 1 + 6, "a folio, then 6 pages");
        assert_eq!(
            (a.event(MemcgEvent::Oom), a.event(MemcgEvent::OomKill)),
            (1, 1),
            "only for a single page"
        );
    }

    #[test]
    fn large_swap_ins_fall_back_to_pages_and_lose_nothing() {
        let sim = sim();
        sim.swapon_ram(16 << 20, None).unwrap();
        sim.fs().write("/a/memory.max", "104K").unwrap();
        sim.alloc("/a", "big", 64 << 10, 16, Fill::Pattern).unwrap();
        sim.pageout("big").unwrap();
        sim.alloc("/a", "fill", 64 << 10, 1, Fill::Pattern).unwrap();
        // 4 pages of room (each task has 3 page tables): the 16-page
        // folio's charge fails without events (no reclaim for a large
        // folio), the pages come in one by one, and the 5th on reclaims:
        // `fill`'s pages, never touched since their fault, go to swap.
        assert_eq!(sim.touch("big").unwrap(), 16);
        assert_eq!(
            sim.residency("big").unwrap(),
            Residency {
                resident: 16,
                swapped: 0
            }
        );
        let fill = sim.residency("fill").unwrap();
        assert_eq!(fill.resident + fill.swapped, 16);
        assert!(fill.swapped >= 12, "{fill:?}");
        sim.verify("big").unwrap();
        sim.verify("fill").unwrap();
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(a.vm_event(VmEvent::Pgmajfault), 16);
        assert_eq!(a.event(MemcgEvent::Oom), 0);
        assert!(a.vm_event(VmEvent::PgstealDirect) >= 12);
        assert!(a.memory().usage() <= 26);
        sim.free("fill").unwrap();
        sim.free("big").unwrap();
        assert_eq!((a.memory().usage(), a.swap().usage()), (0, 0));
    }

    #[test]
    fn a_busy_mapping_keeps_its_folios_accessed_bits() {
        // Reclaim meets the folio while its block is locked: it keeps it
        // without looking at (and clearing) its references, as the
        // kernel's `folio_trylock` comes before `folio_check_references`.
        let sim = sim();
        sim.swapon_ram(1 << 20, None).unwrap();
        sim.alloc("/a", "m", 4096, 1, Fill::Pattern).unwrap();
        let block = Arc::clone(&sim.mapping("m").unwrap().blocks()[0]);
        let folio = {
            let held = block.lock();
            let State::Resident(folio) = &held[0].state else {
                panic!("resident")
            };
            let folio = Arc::clone(folio);
            let err = sim.fs().write("/a/memory.reclaim", "4K").unwrap_err();
            assert_eq!(err.errno, Errno::EAGAIN, "nothing else to reclaim");
            folio
        };
        assert_eq!(
            memcg::vmscan::folio_check_references(&folio),
            lruvec::FolioRef::Keep,
            "the fault's access is still there"
        );
        drop(folio);
        sim.free("m").unwrap();
    }

    #[test]
    fn memory_high_work_falls_on_the_faulting_tasks_cgroup() {
        // A swap-in is charged to the page's owner, /a, which ends over its
        // memory.high; the reclaim and throttle the kernel does on the way
        // back to user space are for the task's own memory cgroup, /b,
        // which is under its high: nothing happens (no `high` on /a).
        let sim = sim();
        sim.fs()
            .tree()
            .set_clock(Arc::new(memcg::clock::VirtualClock::default()));
        sim.fs().mkdir("/b").unwrap();
        sim.swapon_ram(16 << 20, None).unwrap();
        let pid = sim.alloc("/a", "x", 256 << 10, 1, Fill::Pattern).unwrap();
        sim.pageout("x").unwrap();
        sim.fs().write("/b/cgroup.procs", &pid.to_string()).unwrap();
        sim.fs().write("/a/memory.high", "128K").unwrap();
        sim.touch("x").unwrap();
        let (a, b) = (sim.fs().memcg("/a").unwrap(), sim.fs().memcg("/b").unwrap());
        assert_eq!(
            a.memory().usage(),
            64 + 3,
            "charged to the owner, beside the 3 page tables its fault charged there"
        );
        assert_eq!(a.event(MemcgEvent::High), 0);
        assert_eq!(b.event(MemcgEvent::High), 0);
        sim.verify("x").unwrap();
        sim.free("x").unwrap();
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
        // the major fault to /b, the faulting task's cgroup (F13, M9). The
        // page tables stay in /a, where the first faults charged them.
        assert_eq!(a.memory().usage(), 16 + 3);
        assert_eq!(b.memory().usage(), 0);
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
        // Each task has 3 page tables (a PUD, a PMD and a PTE table).
        assert_eq!(a.memory().usage(), 192 + 9);
        for name in ["z", "r", "p"] {
            assert_eq!(sim.pageout(name).unwrap(), 64);
            sim.verify(name).unwrap();
        }
        assert_eq!((a.memory().usage(), a.swap().usage()), (9, 192));
        // The zero mapping is marked, not written.
        assert_eq!(a.vm_event(VmEvent::Pswpout), 128);
        assert_eq!(a.vm_event(VmEvent::SwpoutZero), 64);
        for name in ["z", "r", "p"] {
            assert_eq!(sim.touch(name).unwrap(), 64);
            sim.verify(name).unwrap();
        }
        assert_eq!((a.memory().usage(), a.swap().usage()), (192 + 9, 0));
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
        assert_eq!(a.stat(MemcgStat::Pagetables), 0);
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
            let block = &m.blocks()[1];
            let extents = block.lock();
            let State::Resident(folio) = &extents[0].state else {
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
            (4 + 3, 0),
            "charges stay, the page tables' too"
        );
        assert_eq!(
            sim.fs().write("/b/cgroup.procs", "999").unwrap_err().errno,
            Errno::ESRCH
        );
        sim.fs().rmdir("/a").unwrap();
        sim.free("m").unwrap();
        assert_eq!(a.memory().usage(), 0);
    }

    /// Waits until `block` has `count` references (an operation took its
    /// snapshot of the blocks and is waiting for this one's lock).
    fn wait_for_refs(block: &Arc<Block>, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(block) < count {
            assert!(std::time::Instant::now() < deadline, "never got there");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_killed_tasks_block_is_released_by_the_operation_that_held_it() {
        // Regression: a kill leaves a block an operation holds for that
        // operation; verify (and pageout, residency) let go of it without
        // reaping, so its pages stayed charged until some later kill.
        let sim = sim();
        let a = sim.fs().memcg("/a").unwrap();
        let pid = sim.alloc("/a", "m", 4 * 4096, 1, Fill::Pattern).unwrap();
        let block = Arc::clone(&sim.mapping("m").unwrap().blocks()[0]);
        let guard = block.lock();
        let refs = Arc::strong_count(&block);
        std::thread::scope(|s| {
            let verifier = s.spawn(|| sim.verify("m"));
            // The verifier has the blocks and waits for the first one.
            wait_for_refs(&block, refs + 1);
            sim.kill(pid).unwrap();
            assert_eq!(
                a.memory().usage(),
                1 + 3,
                "the held page and the page tables stay for now"
            );
            drop(guard);
            verifier.join().unwrap().unwrap();
        });
        assert_eq!(a.memory().usage(), 0, "the verifier reaped it");
        assert_eq!(a.lruvec().size(lruvec::LruList::InactiveAnon), 0);
    }

    #[test]
    fn a_killed_tasks_block_held_by_reclaim_is_released_by_it() {
        // Regression: the same with reclaim holding the block while it
        // swaps a folio out: the swapped page stayed charged to swap.
        let sim = sim();
        sim.swapon_ram(1 << 20, None).unwrap();
        let a = sim.fs().memcg("/a").unwrap();
        let pid = sim.alloc("/a", "m", 2 * 4096, 1, Fill::Pattern).unwrap();
        let block = Arc::clone(&sim.mapping("m").unwrap().blocks()[0]);
        let folio = {
            let extents = block.lock();
            let State::Resident(folio) = &extents[0].state else {
                panic!("resident")
            };
            Arc::clone(folio)
        };
        {
            // A reclaimer holds it (as `reclaim` does, by try_lock) when
            // the kill comes...
            let _held = block.try_lock().unwrap();
            sim.kill(pid).unwrap();
            assert_eq!((a.memory().usage(), a.swap().usage()), (1 + 3, 0));
        }
        // ... and goes on to swap the folio out and let go.
        let outcome = lruvec::Rmap::reclaim(&*block, folio, &a, &mut |_| lruvec::FolioRef::Reclaim);
        assert!(
            matches!(outcome, lruvec::RmapOutcome::Reclaimed { nr_pages: 1 }),
            "{outcome:?}"
        );
        assert_eq!((a.memory().usage(), a.swap().usage()), (0, 0));
        assert_eq!(a.id_pins(), 1);
        for device in sim.swap().swapfiles().iter() {
            assert_eq!(device.inuse_pages(), 0);
        }
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
