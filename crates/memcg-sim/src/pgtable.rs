//! The page tables of a simulated address space: where a task's mapping
//! lies, which page-table pages its faults need, and their charge
//! (x86-64 with 4-level paging, v6.14).
//!
//! # Layout
//!
//! A simulated task has one anonymous mapping and nothing else. It lies
//! where v6.14 puts the first `mmap` of a process whose address space is
//! laid out without randomization (`setarch -R`): top-down below
//! `mmap_base` = `TASK_SIZE` − 128M (x86's `mmap_base()`: the 8M stack
//! rlimit plus the guard gap is under the 128M minimum gap), i.e. ending
//! at `0x7ffff7fff000`. A length that is a multiple of 2M is aligned to
//! 2M (`__get_unmapped_area` → `thp_get_unmapped_area_vmflags`), so a
//! 64M mapping spans `0x7ffff3e00000..0x7ffff7e00000`. Other lengths end
//! at `mmap_base` itself, aligned down to the mapping's folio size so
//! that its large folios are naturally aligned as an mTHP fault needs
//! (the kernel would not align them, and would fault such a mapping's
//! misaligned runs in smaller folios: the simulator's one liberty).
//!
//! # Which tables
//!
//! A PTE table maps 2M, a PMD table 1G, a PUD table 512G; the PGD is
//! the mm's own. Each table of the first three is allocated by the first
//! fault in its range (`__handle_mm_fault`: `pud_alloc`, `pmd_alloc`,
//! then `pte_alloc` in `do_anonymous_page`, before the folio; a PMD-sized
//! THP fault allocates its folio first and then the PTE table it deposits)
//! and freed when the mapping goes (`free_pgtables` at unmap or exit). A
//! populated 64M mapping therefore has 32 PTE tables, one PMD table and
//! one PUD table: 34 pages, 136K. (In a real process the PMD and PUD
//! tables near `mmap_base` already exist for its stack and libraries, so
//! the same `mmap` costs it 128K.) The PGD (`pgd_alloc`, with the mm) is
//! not modelled: it is charged as `kernel` but neither counts in
//! `pagetables` nor in `mm_pgtables_bytes`.
//!
//! # Charge
//!
//! Each table page is charged whole (`GFP_PGTABLE_USER` has
//! `__GFP_ACCOUNT`) to the object cgroup of the faulting task's memory
//! cgroup, counting in `kernel` and `pagetables`
//! ([`memcg::memcontrol::PageTableCharge`]). It reclaims and invokes the
//! OOM path like any charge; if it still fails, the fault fails
//! (`VM_FAULT_OOM`). The charge stays with the table (a task that moves
//! leaves its tables where they were charged; an offline cgroup's go to
//! its parent with its object cgroup). `mm_pgtables_bytes`, what
//! `oom_badness` counts, is exactly the charged tables.
//!
//! Invariant: [`PageTables::nr_pages`] is the number of tables held, each
//! holding its charge.
//!
//! Locking: one mutex per address space, never held while charging (a
//! charge may reclaim and OOM-kill, and a kill frees its victim's
//! tables): a table is charged first and installed under the lock, or
//! dropped if another fault installed it meanwhile (`pte_alloc`'s
//! `pmd_install`). A table installed by a fault in flight after a kill
//! freed the others is freed by that task's exit, which always follows.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use memcg::memcontrol::{CgroupTree, ChargeError, MemCgroup, PageTableCharge};
use memcg::mm_types::PAGE_SIZE;

use crate::lock;

/// `PMD_SIZE`: what a PTE table maps.
pub(crate) const PMD_SIZE: u64 = 1 << 21;

/// `PUD_SIZE`: what a PMD table maps.
pub(crate) const PUD_SIZE: u64 = 1 << 30;

/// `PGDIR_SIZE`: what a PUD table maps (4-level paging).
pub(crate) const PGDIR_SIZE: u64 = 1 << 39;

/// `TASK_SIZE` of a 64-bit task with 4-level paging
/// (`DEFAULT_MAP_WINDOW`: 47 bits less a guard page).
pub(crate) const TASK_SIZE: u64 = (1 << 47) - PAGE_SIZE;

/// `mmap_base` without randomization: `TASK_SIZE` less the 128M minimum
/// gap kept for the stack.
pub(crate) const MMAP_BASE: u64 = TASK_SIZE - (128 << 20);

/// `mmap_min_addr`'s default: nothing is mapped below it.
const MMAP_MIN_ADDR: u64 = 1 << 16;

/// A page-table level below the PGD: the table of that level covering an
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// A PUD table (maps 512G).
    Pud,
    /// A PMD table (maps 1G).
    Pmd,
    /// A PTE table (maps 2M).
    Pte,
}

impl Level {
    /// The span of addresses one table of this level maps.
    pub(crate) const fn span(self) -> u64 {
        match self {
            Level::Pud => PGDIR_SIZE,
            Level::Pmd => PUD_SIZE,
            Level::Pte => PMD_SIZE,
        }
    }
}

/// Where a mapping of `size_bytes` made of `folio_bytes` folios starts
/// (see the module docs), or `None` if it does not fit below
/// `mmap_base` (`mmap` fails with `ENOMEM`).
pub(crate) fn mapping_start(size_bytes: u64, folio_bytes: u64) -> Option<u64> {
    let top = MMAP_BASE.checked_sub(size_bytes)?;
    let align = if size_bytes.is_multiple_of(PMD_SIZE) {
        PMD_SIZE
    } else {
        folio_bytes
    };
    let start = top - top % align;
    (start >= MMAP_MIN_ADDR).then_some(start)
}

/// The page tables of one address space (a task's `mm_struct`'s, below
/// its PGD).
#[derive(Debug, Default)]
pub(crate) struct PageTables {
    /// Each table by its level and the index of the span it maps.
    tables: Mutex<BTreeMap<(Level, u64), PageTableCharge>>,
    /// `tables.len()`, for a look without the lock (`mm_pgtables_bytes`).
    nr_pages: AtomicU64,
}

impl PageTables {
    /// Pages of page tables (`mm_pgtables_bytes / PAGE_SIZE`).
    pub(crate) fn nr_pages(&self) -> u64 {
        // Relaxed: a statistic (the OOM killer's).
        self.nr_pages.load(Ordering::Relaxed)
    }

    /// Makes sure the `level` table covering `addr` exists, charging a
    /// new one to `memcg`'s object cgroup (`pud_alloc`, `pmd_alloc`,
    /// `pte_alloc`). No lock may be held: the charge may reclaim.
    pub(crate) fn alloc(
        &self,
        tree: &CgroupTree,
        memcg: &MemCgroup,
        level: Level,
        addr: u64,
    ) -> Result<(), ChargeError> {
        let key = (level, addr / level.span());
        if lock(&self.tables).contains_key(&key) {
            return Ok(());
        }
        let table = tree.charge_pagetable(&memcg.obj_cgroup())?;
        let mut tables = lock(&self.tables);
        if tables.contains_key(&key) {
            // Installed meanwhile: ours goes (uncharged) after the lock.
            drop(tables);
            drop(table);
            return Ok(());
        }
        tables.insert(key, table);
        self.nr_pages.store(tables.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Frees every table (`free_pgtables`): their charges go, after the
    /// lock is released.
    pub(crate) fn free(&self) {
        let tables = {
            let mut tables = lock(&self.tables);
            self.nr_pages.store(0, Ordering::Relaxed);
            std::mem::take(&mut *tables)
        };
        drop(tables);
    }

    /// The tables of each level (for tests).
    #[cfg(test)]
    pub(crate) fn count(&self, level: Level) -> usize {
        lock(&self.tables)
            .keys()
            .filter(|(l, _)| *l == level)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oom_kill::oom_badness;
    use crate::{Fill, SimError, test_sim, test_sim_without_metadata};
    use memcg::Errno;
    use memcg::memcontrol::{MemcgEvent, MemcgStat};

    #[test]
    fn mappings_lie_below_mmap_base_as_v6_14_places_them() {
        assert_eq!(MMAP_BASE, 0x7fff_f7ff_f000);
        // A multiple of 2M: THP-aligned.
        assert_eq!(mapping_start(64 << 20, 4096), Some(0x7fff_f3e0_0000));
        assert_eq!(mapping_start(2 << 20, 4096), Some(0x7fff_f7c0_0000));
        // Anything else ends at mmap_base, aligned to its folios.
        assert_eq!(mapping_start(8192, 4096), Some(0x7fff_f7ff_d000));
        assert_eq!(mapping_start(64 << 10, 64 << 10), Some(0x7fff_f7fe_0000));
        assert_eq!(mapping_start(MMAP_BASE, 4096), None);
        assert_eq!(mapping_start(u64::MAX, 4096), None);
    }

    /// The tables a mapping of `size` bytes needs once populated.
    fn tables_for(size: u64) -> [u64; 3] {
        let start = mapping_start(size, 4096).unwrap();
        let end = start + size;
        [Level::Pud, Level::Pmd, Level::Pte].map(|l| (end - 1) / l.span() - start / l.span() + 1)
    }

    #[test]
    fn a_mapping_needs_a_table_per_span_it_touches() {
        // 64M: 32 PTE tables in one PMD table's GiB, one PUD table.
        assert_eq!(tables_for(64 << 20), [1, 1, 32]);
        // 8K just below mmap_base shares its 2M with nothing else.
        assert_eq!(tables_for(8192), [1, 1, 1]);
        // 3M (not a multiple of 2M) ends at mmap_base, 0x1ff000 into its
        // 2M: it spans 2 of them.
        assert_eq!(tables_for(3 << 20), [1, 1, 2]);
        // 2G from below 0x7ffff7e00000 reaches down into three GiBs.
        assert_eq!(tables_for(2 << 30), [1, 3, 1024]);
    }

    #[test]
    fn a_64m_alloc_charges_its_page_tables_to_pagetables_and_kernel() {
        // R4 (D23): `alloc /a x 64M` read `pagetables 0`, `kernel 0`.
        let sim = test_sim();
        sim.swapon_ram(80 << 20, None).unwrap();
        sim.alloc("/a", "x", 64 << 20, 1, Fill::Pattern).unwrap();
        let a = sim.fs().memcg("/a").unwrap();
        let mm = &sim.task_of("x").unwrap().mm;
        let tables = &mm.page_tables;
        assert_eq!(
            [Level::Pud, Level::Pmd, Level::Pte].map(|l| tables.count(l)),
            [1, 1, 32]
        );
        assert_eq!(a.stat(MemcgStat::Pagetables), 34);
        assert_eq!(a.stat(MemcgStat::Kernel), 34);
        assert_eq!(a.memory().usage(), 16384 + 34);
        let stat = sim.fs().read("/a/memory.stat").unwrap();
        assert!(stat.contains("\nkernel 139264\n"), "{stat}");
        assert!(stat.contains("\npagetables 139264\n"), "{stat}");
        assert!(
            sim.proc_meminfo()
                .lines()
                .any(|l| l == "PageTables:          136 kB")
        );
        // Swap entries live in the page tables: they stay.
        sim.pageout("x").unwrap();
        assert_eq!((a.memory().usage(), a.swap().usage()), (34, 16384));
        sim.touch("x").unwrap();
        assert_eq!(a.stat(MemcgStat::Pagetables), 34, "no new tables");
        sim.free("x").unwrap();
        assert_eq!(a.memory().usage(), 0);
        assert_eq!(a.stat(MemcgStat::Pagetables), 0);
        assert_eq!(a.stat(MemcgStat::Kernel), 0);
        assert_eq!(mm.pgtable_pages(), 0);
    }

    #[test]
    fn oom_badness_counts_exactly_the_charged_page_tables() {
        // oom_badness counted one table per 512 mapped pages, memory.stat
        // none; both count the tables faulted in now.
        let sim = test_sim_without_metadata();
        sim.swapon_ram(16 << 20, None).unwrap();
        for (cgroup, name, size, folio) in [
            ("/a", "x", 3 << 20, 1),
            ("/b", "y", 8 << 20, 512),
            ("/c", "z", 64 << 10, 16),
        ] {
            if cgroup != "/a" {
                sim.fs().mkdir(cgroup).unwrap();
            }
            sim.alloc(cgroup, name, size, folio, Fill::Zero).unwrap();
            let memcg = sim.fs().memcg(cgroup).unwrap();
            let task = sim.task_of(name).unwrap();
            let charged = memcg.stat(MemcgStat::Pagetables) as u64;
            assert_eq!(task.mm.pgtable_pages(), charged, "{name}");
            let pages = size / PAGE_SIZE;
            assert_eq!(oom_badness(&task, 1 << 20), Some((pages + charged) as i64));
            sim.pageout(name).unwrap();
            assert_eq!(oom_badness(&task, 1 << 20), Some((pages + charged) as i64));
            assert_eq!(memcg.memory().usage(), charged, "{name}");
        }
        // 3M ending at mmap_base spans two 2M; 8M of THPs four; 64K one.
        let tables = |cgroup: &str| sim.fs().memcg(cgroup).unwrap().stat(MemcgStat::Pagetables);
        assert_eq!([tables("/a"), tables("/b"), tables("/c")], [4, 6, 3]);
        for name in ["x", "y", "z"] {
            sim.free(name).unwrap();
        }
        let root = sim.fs().tree().root();
        assert_eq!(root.stat(MemcgStat::Pagetables), 0);
        assert_eq!(root.stat(MemcgStat::Kernel), 0);
    }

    #[test]
    fn a_page_table_that_cannot_be_charged_fails_the_fault_into_the_oom_path() {
        // Room for the PUD and PMD tables only: the PTE table's charge
        // finds nothing to reclaim and OOM-kills the faulting task, the
        // only one (before the fix its two pages fitted).
        let sim = test_sim();
        sim.fs().write("/a/memory.max", "8K").unwrap();
        let err = sim.alloc("/a", "x", 8192, 1, Fill::Zero).unwrap_err();
        assert!(matches!(err, SimError::Killed { .. }), "{err}");
        assert_eq!(err.errno(), Errno::ENOMEM);
        let a = sim.fs().memcg("/a").unwrap();
        assert_eq!(
            (a.event(MemcgEvent::Oom), a.event(MemcgEvent::OomKill)),
            (1, 1)
        );
        assert_eq!(a.memory().usage(), 0);
        assert_eq!(a.stat(MemcgStat::Pagetables), 0);
        assert!(sim.mappings().is_empty());
    }

    #[test]
    fn page_tables_stay_where_charged_and_follow_offline() {
        // Charged to the task's cgroup at fault time; a move leaves them
        // there, an rmdir hands them to the parent with the kmem pages.
        let sim = test_sim_without_metadata();
        sim.fs().mkdir("/b").unwrap();
        let pid = sim.alloc("/a", "x", 2 << 20, 1, Fill::Zero).unwrap();
        sim.fs().write("/b/cgroup.procs", &pid.to_string()).unwrap();
        let (a, b) = (sim.fs().memcg("/a").unwrap(), sim.fs().memcg("/b").unwrap());
        assert_eq!(
            (a.stat(MemcgStat::Pagetables), b.stat(MemcgStat::Pagetables)),
            (3, 0)
        );
        sim.fs().rmdir("/a").unwrap();
        let root = sim.fs().tree().root();
        assert_eq!(a.stat(MemcgStat::Pagetables), 0);
        assert_eq!(a.memory().usage(), 512, "its anon pages stay");
        assert_eq!(root.stat(MemcgStat::Pagetables), 3);
        sim.free("x").unwrap();
        assert_eq!(root.stat(MemcgStat::Pagetables), 0);
        assert_eq!(root.stat(MemcgStat::Kernel), 0);
        assert_eq!(root.memory().usage(), 0);
    }
}
