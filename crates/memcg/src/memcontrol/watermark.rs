//! The simulated machine's size, its watermarks and kswapd.
//!
//! A tree may be given a machine size (`set_machine_pages`): every page
//! charged anywhere and the kernel's own pages must fit in it. As in the
//! kernel's page allocator (v6.14 `mm/page_alloc.c`), `vm.min_free_kbytes`
//! keeps a reserve below the **min** watermark that only reclaim's own
//! allocations may use (`ALLOC_NO_WATERMARKS` for `PF_MEMALLOC`): the
//! root's limit is the machine less that reserve, so an ordinary charge
//! past it runs direct global reclaim, while a zswap pool page or a RAM
//! swap device's page taken to free a page may still be had
//! ([`CgroupTree::charge_kernel_reclaim`]).
//!
//! The **low** and **high** watermarks (`__setup_per_zone_wmarks` with the
//! default `watermark_scale_factor` of 10) drive kswapd: a charge that
//! leaves less than the low watermark free wakes it, and it runs
//! `balance_pgdat` (`vmscan`) until more than the high watermark is free,
//! counting `pgscan_kswapd`/`pgsteal_kswapd`. Each run aims at the high
//! watermark, visits every memory cgroup and never reclaims below
//! `memory.low` (kswapd has no `memcg_low_reclaim` pass, so it raises no
//! `low` events). After `MAX_RECLAIM_RETRIES` runs that free nothing it
//! stays asleep until a reclaim makes progress (`kswapd_failures`).
//!
//! Deviation: the kernel's kswapd is a thread per node; here the task
//! whose charge woke it runs the balance inline, once its own charge is
//! done (one at a time: a task that finds kswapd running goes on, as a
//! wakeup of a running kswapd does nothing). That keeps seeded runs
//! deterministic; the allocating task pays kswapd's time, not a stall.
//! kswapd itself counts as a task of the root cgroup stalled on memory
//! while it balances (`balance_pgdat`'s `psi_memstall_enter`), on the CPU
//! after the waker's, so its time shows in `/proc/pressure/memory`.
//!
//! Settings are plain atomics read with `Relaxed` loads: like the
//! kernel's watermark reads, a charge racing a change may use the old
//! value once.

use super::charge::MAX_RECLAIM_RETRIES;
use super::{CgroupTree, ChargeError, ReclaimOptions};
use crate::mm_types::PAGE_SIZE;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The machine's memory, `vm.min_free_kbytes` and kswapd's state.
#[derive(Default)]
pub(super) struct MachineSize {
    /// Pages of memory; 0 until set (then the root has no limit).
    total_pages: AtomicU64,
    /// `vm.min_free_kbytes`.
    min_free_kbytes: AtomicU64,
    /// A task is running kswapd's balance.
    kswapd_running: AtomicBool,
    /// Consecutive kswapd runs that freed nothing (`kswapd_failures`).
    kswapd_failures: AtomicU32,
}

/// The default `watermark_scale_factor`: the gap between watermarks is at
/// least this many ten-thousandths of the machine.
const WATERMARK_SCALE_FACTOR: u64 = 10;

/// The three watermarks, in pages of free memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// Below it only reclaim's own allocations succeed.
    pub min_pages: u64,
    /// Below it kswapd is woken.
    pub low_pages: u64,
    /// kswapd reclaims until this much is free.
    pub high_pages: u64,
}

/// v6.14's `calculate_min_free_kbytes` for a machine of `nr_pages`: the
/// square root of 16 times its KiB, clamped to 128 KiB..256 MiB.
fn default_min_free_kbytes(nr_pages: u64) -> u64 {
    let machine_kb = nr_pages.saturating_mul(PAGE_SIZE / 1024);
    machine_kb.saturating_mul(16).isqrt().clamp(128, 262_144)
}

impl CgroupTree {
    /// Sets the simulated machine's memory to `nr_pages`: every page
    /// charged anywhere, and the kernel's own pages ([`CgroupTree::charge_kernel`]),
    /// must fit in it. `vm.min_free_kbytes` takes v6.14's default for that
    /// size, and the root's limit (`PAGE_COUNTER_MAX`, no limit, until set)
    /// becomes the machine less that reserve.
    pub fn set_machine_pages(&self, nr_pages: u64) {
        let machine = &self.shared.machine;
        // Relaxed: settings (module docs); the root's limit, which
        // charges obey, is set last.
        machine.total_pages.store(nr_pages, Ordering::Relaxed);
        machine
            .min_free_kbytes
            .store(default_min_free_kbytes(nr_pages), Ordering::Relaxed);
        self.shared.ids.pages.set_limit(nr_pages);
        self.apply_min_free();
    }

    /// The machine's memory in pages (the root's limit, `PAGE_COUNTER_MAX`,
    /// if never set).
    pub fn machine_pages(&self) -> u64 {
        // Relaxed: a setting (module docs).
        match self.shared.machine.total_pages.load(Ordering::Relaxed) {
            0 => self.root().memory().max(),
            total => total,
        }
    }

    /// Pages of the machine in use: charged to any cgroup, or the kernel's.
    pub fn machine_used_pages(&self) -> u64 {
        self.root().memory().usage()
    }

    /// `vm.min_free_kbytes` (the machine's sysctl,
    /// [`Machine::set_vm_min_free_kbytes`](crate::machine::Machine::set_vm_min_free_kbytes),
    /// sets it).
    pub(crate) fn min_free_kbytes(&self) -> u64 {
        // Relaxed: a setting (module docs).
        self.shared.machine.min_free_kbytes.load(Ordering::Relaxed)
    }

    /// Sets the reserve to `kbytes` and moves the root's limit and the
    /// watermarks with it (`setup_per_zone_wmarks`). A reserve as large
    /// as the machine leaves ordinary charges nothing, as it would the
    /// kernel's allocations.
    pub(crate) fn set_min_free_kbytes(&self, kbytes: u64) {
        // Relaxed: a setting (module docs).
        let machine = &self.shared.machine;
        machine.min_free_kbytes.store(kbytes, Ordering::Relaxed);
        self.apply_min_free();
    }

    /// The watermarks (`__setup_per_zone_wmarks` for one zone); all 0 on a
    /// tree with no machine size.
    pub fn watermarks(&self) -> Watermarks {
        // Relaxed: settings (module docs).
        let total = self.shared.machine.total_pages.load(Ordering::Relaxed);
        if total == 0 {
            return Watermarks {
                min_pages: 0,
                low_pages: 0,
                high_pages: 0,
            };
        }
        let min_pages = self.min_free_kbytes() / (PAGE_SIZE / 1024);
        let gap = (min_pages / 4).max(total * WATERMARK_SCALE_FACTOR / 10_000);
        Watermarks {
            min_pages,
            low_pages: min_pages + gap,
            high_pages: min_pages + 2 * gap,
        }
    }

    /// Pages of the machine free (0 once reclaim dipped into the reserve
    /// past the machine's size).
    pub fn machine_free_pages(&self) -> u64 {
        self.machine_pages()
            .saturating_sub(self.machine_used_pages())
    }

    /// The root's limit: the machine less the reserve.
    fn apply_min_free(&self) {
        // Relaxed: a setting (module docs).
        let total = self.shared.machine.total_pages.load(Ordering::Relaxed);
        if total > 0 {
            let min_pages = self.watermarks().min_pages;
            self.root()
                .memory()
                .force_max(total.saturating_sub(min_pages));
        }
    }

    /// Takes `nr_pages` of the machine for the kernel from reclaim's own
    /// context: a zswap pool page or a RAM swap device's page, allocated
    /// to free one. Past the root's limit it may still use the reserve up
    /// to the machine's size (module docs): without it, swapping to zswap
    /// or a RAM device at the machine's size could never make progress.
    /// The pages are given back with [`CgroupTree::uncharge_kernel`].
    pub fn charge_kernel_reclaim(&self, nr_pages: u64) -> Result<(), ChargeError> {
        let memory = self.root().memory();
        if memory.try_charge(nr_pages).is_ok() {
            return Ok(());
        }
        // Check, then charge: reclaimers racing here can overshoot by one
        // charge each, as the kernel's watermark check (read, then take)
        // can; the frames behind them come from the host's heap then.
        if memory.usage() + nr_pages > self.machine_pages() {
            return Err(ChargeError::MachineOutOfMemory {
                total_pages: self.machine_pages(),
            });
        }
        memory.charge(nr_pages);
        Ok(())
    }

    /// After a charge: wakes kswapd if less than the low watermark is
    /// free (`wakeup_kswapd` from the allocator's slow path), and runs it.
    pub(super) fn wake_kswapd_if_low(&self) {
        let machine = &self.shared.machine;
        // Relaxed: a setting (module docs).
        if machine.total_pages.load(Ordering::Relaxed) == 0 {
            return;
        }
        let marks = self.watermarks();
        if self.machine_free_pages() >= marks.low_pages
            || machine.kswapd_failures.load(Ordering::Relaxed) >= MAX_RECLAIM_RETRIES
        {
            return;
        }
        // Acquire pairs with the Release store that ends a balance, so a
        // task that runs next sees that balance's failure count.
        if machine
            .kswapd_running
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        {
            // kswapd's time in the root's pressure (`balance_pgdat`).
            let _kswapd = self.kswapd_stall();
            self.kswapd();
        }
        // Release: pairs with the Acquire above.
        machine.kswapd_running.store(false, Ordering::Release);
    }

    /// kswapd's work from its wakeup until it sleeps again (the `kswapd`
    /// thread's loop): `balance_pgdat` runs (each one vmscan's
    /// `try_to_free_mem_cgroup_pages` with `kswapd` set) until more than the high watermark is free
    /// (`prepare_kswapd_sleep`) or `MAX_RECLAIM_RETRIES` runs in a row
    /// freed nothing. Everything kswapd does happens inside this call:
    /// its time on the machine is this call's time.
    fn kswapd(&self) {
        let opts = ReclaimOptions {
            kswapd: true,
            ..ReclaimOptions::default()
        };
        let machine = &self.shared.machine;
        loop {
            let high_pages = self.watermarks().high_pages;
            // Relaxed: a heuristic count (kswapd_failures is racy in the
            // kernel too).
            if self.machine_free_pages() > high_pages
                || machine.kswapd_failures.load(Ordering::Relaxed) >= MAX_RECLAIM_RETRIES
            {
                return;
            }
            if self.reclaim_memcg(self.root(), high_pages, opts) > 0 {
                // `shrink_node` with progress. Relaxed: see above.
                machine.kswapd_failures.store(0, Ordering::Relaxed);
            } else if self.machine_free_pages() <= high_pages {
                // Relaxed: see above.
                machine.kswapd_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A direct reclaim of the machine made progress: kswapd may be woken
    /// again (`shrink_node` clears `kswapd_failures`).
    pub(super) fn note_direct_reclaim_progress(&self) {
        // Relaxed: see `kswapd`.
        self.shared
            .machine
            .kswapd_failures
            .store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::test_tree;

    #[test]
    fn default_min_free_kbytes_is_the_kernels_formula() {
        assert_eq!(default_min_free_kbytes(1), 128);
        // 64 MiB: sqrt(65536 * 16) = 1024 KiB.
        assert_eq!(default_min_free_kbytes(16384), 1024);
        // 1 GiB: 4096 KiB.
        assert_eq!(default_min_free_kbytes(262_144), 4096);
        // Huge machines stop at 256 MiB.
        assert_eq!(default_min_free_kbytes(1 << 40), 262_144);
    }

    #[test]
    fn the_root_limit_is_the_machine_less_the_reserve() {
        let tree = test_tree(1, 16);
        assert_eq!(tree.watermarks().min_pages, 0);
        tree.set_machine_pages(16384);
        let marks = tree.watermarks();
        assert_eq!(marks.min_pages, 256);
        assert_eq!(marks.low_pages, 256 + 64);
        assert_eq!(marks.high_pages, 256 + 128);
        assert_eq!(tree.root().memory().max(), 16384 - 256);
        assert_eq!(tree.machine_pages(), 16384);
        tree.set_min_free_kbytes(4096);
        assert_eq!(tree.root().memory().max(), 16384 - 1024);
        assert_eq!(tree.min_free_kbytes(), 4096);
    }

    #[test]
    fn reclaim_may_take_the_reserve_but_not_past_the_machine() {
        let tree = test_tree(1, 16);
        tree.set_machine_pages(1024);
        let min = tree.watermarks().min_pages;
        tree.charge_kernel(1024 - min).unwrap();
        assert!(tree.charge_kernel(1).is_err());
        tree.charge_kernel_reclaim(min).unwrap();
        assert_eq!(tree.machine_free_pages(), 0);
        assert!(tree.charge_kernel_reclaim(1).is_err());
        tree.uncharge_kernel(1024);
        assert_eq!(tree.machine_used_pages(), 0);
    }
}
