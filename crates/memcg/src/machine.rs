//! The simulated machine: the kernel's global state that is not a cgroup's
//! (`pglist_data`, `swap_info[]`, the mount table, the vm sysctls), and the
//! one memory-cgroup reclaimer that ties the library's mechanisms together.
//!
//! A [`Machine`] owns the cgroup v2 hierarchy ([`CgroupFs`] over its
//! [`CgroupTree`]), the swap system ([`SwapSystem`]: devices, swap cache,
//! `swap_cgroup`, zswap), the mounted filesystems (`mounts.rs`: the
//! mount table, `sync`, `drop_caches`) and the vm sysctls of reclaim
//! (`vm.swappiness`, `vm.min_free_kbytes`, with the sysctls' bounds; the
//! watermarks derived from the latter stay with the tree's charge path,
//! as the kernel's zones keep theirs, and `vm.dirty_*` with
//! [`page_writeback`](crate::page_writeback), which reads them).
//! [`Machine::new`] sizes the machine and installs, on the tree and on
//! zswap, the two hooks that make them one kernel:
//!
//! - **reclaim**: every charge over a limit, `memory.reclaim`, `memory.high`'s
//!   work and kswapd reach `vmscan`'s
//!   [`try_to_free_mem_cgroup_pages`](crate::vmscan::try_to_free_mem_cgroup_pages)
//!   through the machine, with this machine's swap space. A bare
//!   [`CgroupTree`] has no reclaimer (its charges over a limit fail or
//!   OOM at once): anything that wants reclaim builds a `Machine`;
//! - **zswap writeback** to this machine's swap devices
//!   ([`SwapSystem::install_zswap_writeback`]).
//!
//! # The address-space seam
//!
//! The machine owns memory; it does not own processes. Whatever maps its
//! folios (the simulator's tasks today) provides the kernel's reverse map:
//! each folio is put on an LRU together with a [`Rmap`](crate::lruvec::Rmap)
//! of its owner ([`folio_add_lru`](crate::lruvec::folio_add_lru)), and
//! reclaim hands a folio it chose back to that owner
//! ([`Rmap::reclaim`](crate::lruvec::Rmap::reclaim): `folio_check_references`,
//! `try_to_unmap` and `pageout` under the owner's lock). The owner
//! swaps it out with [`Machine::reclaim_pageout`] and records where it
//! went; a fault on it later brings it back with
//! [`SwapSystem::do_swap_page`] and puts it on the LRU again. Swapoff's
//! walk over every address space (`try_to_unuse`) is a closure the owner
//! passes to [`SwapSystem::swapoff`].
//!
//! That seam is what lets a second kind of address space plug in beside the
//! simulated one: the memory of a real host process, whose pages the
//! simulator reads, drops and refills (over `userfaultfd`). Its owner
//! implements the same [`Rmap`](crate::lruvec::Rmap):
//!
//! - **read**: in `reclaim`, under its lock, the host page's bytes are
//!   copied into the folio (the folio's bytes are what swap-out writes);
//! - **drop**: once [`Machine::reclaim_pageout`] gave the folio a swap
//!   slot, the host page is discarded (`MADV_DONTNEED`), so the next
//!   access faults;
//! - **refill**: the fault (a `userfaultfd` missing-page event) runs
//!   [`SwapSystem::do_swap_page`] as the faulting task and copies the
//!   folio's bytes into the host page (`UFFDIO_COPY`) before waking it;
//! - **accessed bits**, which reclaim reads through `references`, come from
//!   whatever the owner can observe of the host page (a minor fault after
//!   write-protection, say); [`folio_mark_young`](crate::lruvec::folio_mark_young)
//!   records them.
//!
//! Nothing in the machine changes for it: charges, reclaim, swap and
//! zswap see folios and their owners' `Rmap`, whichever kind they are.
//!
//! Invariant: a machine's tree has exactly one reclaimer, this machine's,
//! installed before [`Machine::new`] returns and never replaced by the
//! library (a test may watch it through [`Machine::set_reclaim_probe`]).
//!
//! Locking: the machine adds one lock of its own per table (the RAM disk
//! counter, the mount table, the reclaim probe), each held only for a
//! lookup or an insertion, never across reclaim or I/O. The hooks hold a
//! weak reference to the machine, so dropping the last `Arc<Machine>`
//! tears the machine down; a hook that finds it gone reclaims nothing.

mod mounts;

use std::path::Path;

use crate::cgroupfs::CgroupFs;
use crate::errno::Errno;
use crate::folio::Folio;
use crate::huge_memory::ThpSettings;
use crate::list_lru::LruDesign;
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgReclaim, ReclaimOptions, TreeConfig};
use crate::mm_types::PAGE_BYTES;
use crate::mm_types::{DEFAULT_SWAPPINESS, MAX_SWAPPINESS};
use crate::profile::{Behaviour, KernelVersion};
use crate::swap_cgroup::Design;
use crate::swap_state::{SwapOutPiece, SwapSystem};
use crate::swapfile::{SwapBackend, SwapError};
use crate::sync::{Arc, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering, lock};
use crate::vmscan::{self, SwapSpace};

pub use mounts::MountError;

/// How to build a [`Machine`].
#[derive(Debug, Clone, Copy)]
pub struct MachineConfig {
    /// The `swap_cgroup` design recording swap owners.
    pub swap_cgroup: Design,
    /// The machine's memory in bytes (rounded down to pages): every
    /// charged page and the kernel's own (RAM disk pages, swap tables)
    /// must fit in it. Pages are real, so this also bounds the host
    /// memory the machine takes.
    pub mem_bytes: u64,
    /// Charges go through the per-thread charge stock (the kernel's
    /// behaviour): `memory.current` counts up to a batch of 64 pages per
    /// thread more than the pages in use. Off: exact figures.
    pub charge_stock: bool,
    /// Bytes of its own metadata each new memory cgroup charges to its
    /// parent, overriding the v6.14 model (`None`, the default:
    /// [`crate::memcontrol::MemcgMetadata::v6_14`], 14 KiB on 2 CPUs;
    /// `Some(0)`: none). See `CgroupTree::set_memcg_metadata`.
    pub memcg_metadata_bytes: Option<u64>,
    /// The machine's CPUs ([`TreeConfig::nr_cpus`]).
    pub nr_cpus: u32,
    /// The list_lru design of zswap and of mounted filesystems' dentry
    /// and inode caches.
    pub list_lru: LruDesign,
    /// Offline reparents LRU folios to the parent (2026) instead of
    /// leaving them to pin the dying memory cgroup (v6.14, the default).
    pub reparent_lru_folios: bool,
    /// Swap-ins bring large folios back whole even once zswap was enabled,
    /// loading their pages from zswap one by one (beyond v6.14, which
    /// swaps in single pages then: [`crate::zswap::Zswap::large_folio_loads`]).
    pub zswap_large_folio_loads: bool,
    /// Refaults check the evicting memory cgroup's serial besides its id
    /// (beyond v6.14: [`CgroupTree::shadow_memcg_serial`]).
    pub shadow_memcg_serial: bool,
    /// The kernel version's interface and mechanism switches
    /// ([`crate::profile`]; v6.14's by default).
    pub behaviour: Behaviour,
}

impl MachineConfig {
    /// A 1 GiB machine as `kernel` builds it: its swap_cgroup design, its
    /// list_lru design, what its rmdir does with LRU folios, and its
    /// behaviour switches ([`KernelVersion::behaviour`]). The table of
    /// every switch, with the kernel function behind each value, is
    /// `docs/kernel-profiles.md`.
    pub fn for_kernel(kernel: KernelVersion) -> Self {
        let (swap_cgroup, list_lru, reparent_lru_folios) = match kernel {
            // One spinlock per device around plain ids (mm/swap_cgroup.c),
            // one lock per node for every list (mm/list_lru.c), folios
            // left on the dying cgroup's LRU.
            KernelVersion::V6_12 => (Design::Locked, LruDesign::Legacy, false),
            // The seed: two ids per atomic word; per-list locks.
            KernelVersion::V6_14 => (Design::Packed, LruDesign::Split, false),
            // Ids in a per-cluster table under the cluster lock
            // (mm/swap_table.h), per-list locks, and offline moves the
            // LRU folios to the parent (`lru_reparent_memcg`).
            KernelVersion::V7_3 => (Design::Cluster, LruDesign::Split, true),
        };
        Self {
            swap_cgroup,
            list_lru,
            reparent_lru_folios,
            behaviour: kernel.behaviour(),
            ..Self::default()
        }
    }
}

impl Default for MachineConfig {
    /// A 1 GiB machine with the kernel's defaults.
    fn default() -> Self {
        Self {
            swap_cgroup: Design::default(),
            mem_bytes: 1 << 30,
            charge_stock: true,
            memcg_metadata_bytes: None,
            nr_cpus: crate::memcontrol::DEFAULT_NR_CPUS,
            list_lru: LruDesign::default(),
            reparent_lru_folios: false,
            zswap_large_folio_loads: false,
            shadow_memcg_serial: false,
            behaviour: Behaviour::default(),
        }
    }
}

/// Told of every memory-cgroup reclaim as it starts, with the memory
/// cgroup it is for (a test's fault injection: see
/// [`Machine::set_reclaim_probe`]).
pub(crate) type ReclaimProbe = Arc<dyn Fn(&Arc<MemCgroup>) + Send + Sync>;

/// The simulated machine; see the module docs.
pub struct Machine {
    fs: CgroupFs,
    swap: Arc<SwapSystem>,
    /// The number of the next RAM disk (`/dev/ramN`).
    next_ram: Mutex<u32>,
    /// Mounted filesystems (`mounts.rs`).
    mounts: mounts::Mounts,
    /// Where reclaim's time goes, when a benchmark asks.
    reclaim_timing: ReclaimTiming,
    /// Told of each reclaim (see [`Machine::set_reclaim_probe`]).
    reclaim_probe: Mutex<Option<ReclaimProbe>>,
    /// `vm.swappiness`.
    swappiness: AtomicU32,
    /// Transparent huge pages for anonymous memory.
    thp: ThpSettings,
}

/// Time spent in reclaim, and in its swap-outs, summed over threads; kept
/// only while switched on (a clock read per reclaimed folio is not free).
#[derive(Debug, Default)]
struct ReclaimTiming {
    on: AtomicBool,
    reclaim_ns: AtomicU64,
    pageout_ns: AtomicU64,
}

impl ReclaimTiming {
    /// Runs `f`, adding its time to `counter` if timing is on.
    fn time<T>(&self, counter: &AtomicU64, f: impl FnOnce() -> T) -> T {
        // Relaxed: a switch and statistics, read after the threads joined.
        if !self.on.load(Ordering::Relaxed) {
            return f();
        }
        let start = std::time::Instant::now();
        let out = f();
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(ns, Ordering::Relaxed);
        out
    }
}

/// Seconds spent in reclaim (summed over threads) since timing was
/// switched on: see [`Machine::set_reclaim_timing`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReclaimTimes {
    /// In `try_to_free_mem_cgroup_pages`, everything included.
    pub reclaim_secs: f64,
    /// Of that, in unmapping and swapping folios out (the swap device
    /// write, the swap cache, swap accounting and `swap_cgroup`).
    pub pageout_secs: f64,
}

/// Connects charges over a limit to reclaim (`vmscan`) with the machine's
/// swap space: the tree's one [`MemcgReclaim`].
struct Reclaimer(std::sync::Weak<Machine>);

impl MemcgReclaim for Reclaimer {
    fn reclaim(&self, cg: &Arc<MemCgroup>, nr_pages: u64, mut opts: ReclaimOptions) -> u64 {
        let Some(machine) = self.0.upgrade() else {
            return 0;
        };
        opts.swappiness.get_or_insert(machine.vm_swappiness());
        let probe = lock(&machine.reclaim_probe).clone();
        if let Some(probe) = probe {
            probe(cg);
        }
        let timing = &machine.reclaim_timing;
        timing.time(&timing.reclaim_ns, || {
            vmscan::try_to_free_mem_cgroup_pages(
                machine.tree(),
                cg,
                nr_pages,
                &|| machine.swap_space(),
                opts,
            )
        })
    }
}

impl Machine {
    /// A machine of `config.mem_bytes` with a fresh hierarchy, no swap and
    /// nothing mounted; its reclaimer and zswap's writeback are installed.
    pub fn new(config: MachineConfig) -> Arc<Self> {
        let fs = CgroupFs::new(TreeConfig {
            nr_cpus: config.nr_cpus,
            behaviour: config.behaviour,
            ..TreeConfig::default()
        });
        let tree = fs.tree();
        tree.set_machine_pages(config.mem_bytes / PAGE_BYTES as u64);
        tree.set_charge_stock(config.charge_stock);
        if let Some(bytes) = config.memcg_metadata_bytes {
            tree.set_memcg_metadata_bytes(bytes);
        }
        tree.set_reparent_lru_folios(config.reparent_lru_folios);
        tree.set_shadow_memcg_serial(config.shadow_memcg_serial);
        let swap = SwapSystem::with_lru_design(tree, config.swap_cgroup, config.list_lru);
        swap.zswap()
            .set_large_folio_loads(config.zswap_large_folio_loads);
        Self::assemble(fs, swap, config.list_lru)
    }

    /// The machine around `tree` as it is configured (its size, stock and
    /// metadata settings untouched), with the default `swap_cgroup` and
    /// list_lru designs: for a program that built its tree itself and now
    /// wants reclaim. Its reclaimer and zswap's writeback are installed.
    pub fn with_tree(tree: CgroupTree) -> Arc<Self> {
        let swap = SwapSystem::new(&tree, Design::default());
        Self::assemble(CgroupFs::with_tree(tree), swap, LruDesign::default())
    }

    /// Installs the hooks that make `fs` and `swap` one machine.
    fn assemble(fs: CgroupFs, swap: SwapSystem, lru_design: LruDesign) -> Arc<Self> {
        let swap = Arc::new(swap);
        swap.install_zswap_writeback();
        Arc::new_cyclic(|me| {
            fs.tree().set_reclaimer(Arc::new(Reclaimer(me.clone())));
            Self {
                fs,
                swap,
                next_ram: Mutex::new(0),
                mounts: mounts::Mounts::new(lru_design),
                reclaim_timing: ReclaimTiming::default(),
                reclaim_probe: Mutex::new(None),
                swappiness: AtomicU32::new(DEFAULT_SWAPPINESS),
                thp: ThpSettings::default(),
            }
        })
    }

    /// The transparent huge page settings of anonymous memory
    /// (`/sys/kernel/mm/transparent_hugepage/`).
    pub fn thp(&self) -> &ThpSettings {
        &self.thp
    }

    /// The cgroup v2 interface.
    pub fn fs(&self) -> &CgroupFs {
        &self.fs
    }

    /// The cgroup tree (`fs().tree()`).
    pub fn tree(&self) -> &CgroupTree {
        self.fs.tree()
    }

    /// Swap devices, cache and accounting.
    pub fn swap(&self) -> &SwapSystem {
        &self.swap
    }

    /// The swap space the devices have now (`total_swap_pages` and
    /// `nr_swap_pages`: a device being swapped off counts no more).
    pub fn swap_space(&self) -> SwapSpace {
        self.swap.swap_space()
    }

    /// Swaps on a RAM disk of `size_bytes` with priority `prio` (or the
    /// next default); returns its name (`/dev/ram0`, ...). Its pages come
    /// out of the machine's memory as they are written.
    pub fn swapon_ram(&self, size_bytes: u64, prio: Option<i32>) -> Result<String, SwapError> {
        let mut next = lock(&self.next_ram);
        let name = format!("/dev/ram{next}");
        self.swap.swapon_ram(&name, size_bytes, prio)?;
        *next += 1;
        Ok(name)
    }

    /// The name the next [`Machine::swapon_ram`] gives its device.
    pub fn next_ram_name(&self) -> String {
        format!("/dev/ram{}", lock(&self.next_ram))
    }

    /// Swaps on the file `path` of `size_bytes` with priority `prio` (or
    /// the next default); returns its name.
    pub fn swapon_file(
        &self,
        path: &Path,
        size_bytes: u64,
        prio: Option<i32>,
    ) -> Result<String, SwapError> {
        Ok(self
            .swap
            .swapon_file(path, size_bytes, prio)?
            .name()
            .to_owned())
    }

    /// Swaps on any backend (a fault-injecting wrapper, say) as `name`.
    pub fn swapon_backend(
        &self,
        name: &str,
        backend: Box<dyn SwapBackend>,
    ) -> Result<(), SwapError> {
        self.swap.swapon(name, backend, None)?;
        Ok(())
    }

    /// `/proc/swaps`.
    pub fn proc_swaps(&self) -> String {
        self.swap.swapfiles().proc_swaps()
    }

    /// Swaps `folio` out for reclaim, split into pages if it finds no
    /// contiguous swap space (`pageout` after `try_to_unmap`; what an
    /// [`Rmap`](crate::lruvec::Rmap) calls once its reference check says
    /// reclaim), timed if asked. `target` is the memory cgroup the reclaim
    /// is for.
    pub fn reclaim_pageout(&self, folio: Arc<Folio>, target: &MemCgroup) -> Vec<SwapOutPiece> {
        let timing = &self.reclaim_timing;
        timing.time(&timing.pageout_ns, || {
            self.swap.swap_out_or_split(folio, target)
        })
    }

    /// Starts (clearing the sums) or stops timing reclaim; see
    /// [`Machine::reclaim_times`].
    pub fn set_reclaim_timing(&self, on: bool) {
        let t = &self.reclaim_timing;
        // Relaxed: a switch and statistics (`ReclaimTiming::time`).
        t.reclaim_ns.store(0, Ordering::Relaxed);
        t.pageout_ns.store(0, Ordering::Relaxed);
        t.on.store(on, Ordering::Relaxed);
    }

    /// Time spent in reclaim since [`Machine::set_reclaim_timing`] turned
    /// timing on.
    pub fn reclaim_times(&self) -> ReclaimTimes {
        let t = &self.reclaim_timing;
        // Relaxed: see `set_reclaim_timing`.
        let secs = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 * 1e-9;
        ReclaimTimes {
            reclaim_secs: secs(&t.reclaim_ns),
            pageout_secs: secs(&t.pageout_ns),
        }
    }

    /// Installs `probe`, called at the start of every memory-cgroup
    /// reclaim from then on, on the reclaiming thread, before `vmscan`
    /// runs.
    pub fn set_reclaim_probe(&self, probe: ReclaimProbe) {
        *lock(&self.reclaim_probe) = Some(probe);
    }
}

/// The vm sysctls of reclaim.
impl Machine {
    /// `vm.swappiness` (0..=200): how readily reclaim swaps.
    pub fn vm_swappiness(&self) -> u32 {
        // Relaxed: a setting; reclaim reads it once per call.
        self.swappiness.load(Ordering::Relaxed)
    }

    /// Sets `vm.swappiness`; `EINVAL` above 200, as the sysctl's bounds.
    pub fn set_vm_swappiness(&self, swappiness: u32) -> Result<(), Errno> {
        if swappiness > MAX_SWAPPINESS {
            return Err(Errno::EINVAL);
        }
        // Relaxed: see `vm_swappiness`.
        self.swappiness.store(swappiness, Ordering::Relaxed);
        Ok(())
    }

    /// `vm.min_free_kbytes`: v6.14's default for the machine's size until
    /// set.
    pub fn vm_min_free_kbytes(&self) -> u64 {
        self.tree().min_free_kbytes()
    }

    /// Sets `vm.min_free_kbytes` (`min_free_kbytes_sysctl_handler`: an int
    /// of at least 0, else `EINVAL`) and moves the root's limit and the
    /// watermarks with it.
    pub fn set_vm_min_free_kbytes(&self, kbytes: i64) -> Result<(), Errno> {
        let kbytes = u64::try_from(kbytes)
            .ok()
            .filter(|&kb| kb <= i32::MAX as u64)
            .ok_or(Errno::EINVAL)?;
        self.tree().set_min_free_kbytes(kbytes);
        Ok(())
    }
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("swap", &self.swap)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lruvec::{FolioRef, Rmap, RmapOutcome};
    use crate::memcontrol::{Gfp, VmEvent};
    use crate::swapops::SwapEntry;

    /// A page of [`Pages`].
    enum Page {
        Resident(Arc<Folio>),
        Swapped(SwapEntry),
        /// Being swapped out.
        Moving,
    }

    /// The smallest address space: pages resident or swapped, reclaimed
    /// through [`Machine::reclaim_pageout`].
    struct Pages {
        machine: Arc<Machine>,
        pages: Mutex<Vec<Page>>,
    }

    impl Rmap for Pages {
        fn reclaim(
            &self,
            folio: Arc<Folio>,
            target: &MemCgroup,
            references: &mut dyn FnMut(&Folio) -> FolioRef,
        ) -> RmapOutcome {
            let Ok(mut pages) = self.pages.try_lock() else {
                return RmapOutcome::Busy(folio);
            };
            let Some(i) = pages
                .iter()
                .position(|p| matches!(p, Page::Resident(f) if Arc::ptr_eq(f, &folio)))
            else {
                return RmapOutcome::Gone;
            };
            match references(&folio) {
                FolioRef::Reclaim => {}
                referenced => return RmapOutcome::Referenced(folio, referenced),
            }
            drop(folio);
            let Page::Resident(folio) = std::mem::replace(&mut pages[i], Page::Moving) else {
                unreachable!("resident")
            };
            let [piece] =
                <[SwapOutPiece; 1]>::try_from(self.machine.reclaim_pageout(folio, target))
                    .expect("a single page is never split");
            match piece.outcome {
                Ok(entry) => {
                    pages[i] = Page::Swapped(entry);
                    RmapOutcome::Reclaimed { nr_pages: 1 }
                }
                Err((folio, _)) => {
                    pages[i] = Page::Resident(Arc::clone(&folio));
                    RmapOutcome::NoSwap(folio)
                }
            }
        }
    }

    #[test]
    fn the_sysctls_keep_their_bounds() {
        let machine = Machine::new(MachineConfig {
            mem_bytes: 64 << 20,
            ..MachineConfig::default()
        });
        assert_eq!(machine.vm_swappiness(), 60);
        assert_eq!(machine.set_vm_swappiness(201), Err(Errno::EINVAL));
        machine.set_vm_swappiness(200).unwrap();
        assert_eq!(machine.vm_swappiness(), 200);
        assert_eq!(machine.vm_min_free_kbytes(), 1024);
        machine.set_vm_min_free_kbytes(4096).unwrap();
        assert_eq!(machine.set_vm_min_free_kbytes(-1), Err(Errno::EINVAL));
        assert_eq!(machine.set_vm_min_free_kbytes(1 << 31), Err(Errno::EINVAL));
        assert_eq!(machine.vm_min_free_kbytes(), 4096);
        assert_eq!(machine.tree().root().memory().max(), 16384 - 1024);
    }

    /// Reclaim with swap and no simulator: charges past `memory.max`
    /// swap the coldest anonymous pages out to a RAM device.
    #[test]
    fn a_charge_past_memory_max_swaps_out_with_no_simulator() {
        let machine = Machine::new(MachineConfig {
            mem_bytes: 64 << 20,
            charge_stock: false,
            memcg_metadata_bytes: Some(0),
            ..MachineConfig::default()
        });
        machine.swapon_ram(16 << 20, None).unwrap();
        let fs = machine.fs();
        fs.write("/cgroup.subtree_control", "+memory").unwrap();
        fs.mkdir("/a").unwrap();
        fs.write("/a/memory.max", "1M").unwrap();
        let a = fs.memcg("/a").unwrap();
        let owner = Arc::new(Pages {
            machine: Arc::clone(&machine),
            pages: Mutex::new(Vec::new()),
        });
        let rmap = Arc::downgrade(&(Arc::clone(&owner) as Arc<dyn Rmap>));
        for i in 0..512u32 {
            let folio = Arc::new(Folio::new(machine.tree(), &a, 1, Gfp::Kernel).unwrap());
            folio.bytes().fill(i as u8);
            crate::lruvec::folio_add_lru(&folio, rmap.clone());
            lock(&owner.pages).push(Page::Resident(folio));
        }
        let swapped = lock(&owner.pages)
            .iter()
            .filter(|p| matches!(p, Page::Swapped(_)))
            .count() as u64;
        assert!(swapped >= 256, "{swapped} pages swapped");
        // (Read through the rstat flush, which may lag by a batch.)
        let pswpout = a.vm_event(VmEvent::Pswpout);
        assert!((256..=swapped).contains(&pswpout), "{pswpout}");
        assert!(a.memory().usage() <= 256);
        assert_eq!(a.swap().usage(), swapped);
        for (i, page) in std::mem::take(&mut *lock(&owner.pages))
            .into_iter()
            .enumerate()
        {
            let folio = match page {
                Page::Resident(folio) => folio,
                Page::Swapped(entry) => machine
                    .swap()
                    .do_swap_page(entry, 1, &a, Gfp::Kernel)
                    .unwrap(),
                Page::Moving => unreachable!("reclaim is done"),
            };
            assert!(folio.bytes().iter().all(|&b| b == i as u8), "page {i}");
        }
    }
}
