//! Kernel-memory accounting of slab objects through object cgroups
//! (`struct obj_cgroup`, `obj_cgroup_charge`, `memcg_reparent_objcgs` in
//! mm/memcontrol.c, v6.14).
//!
//! A slab object (a dentry, an inode, an open file) is charged in bytes
//! to the [`ObjCgroup`] of the memory cgroup that allocated it, and keeps
//! that object cgroup, not the memory cgroup. Bytes become page charges
//! on the memory cgroup (`kernel` in memory.stat) through a reserve of
//! prepaid bytes per memory cgroup (the kernel's per-CPU `obj_stock` and
//! `nr_charged_bytes`, here one per memory cgroup): a charge takes bytes
//! from the reserve, or charges whole pages and keeps the rest; an
//! uncharge gives bytes back and whole pages go back to the counter. The
//! objects' sizes count in `slab_reclaimable` / `slab_unreclaimable`.
//! Whole pages a freed slab object or zswap entry gives up go to the
//! charge stock of the freeing thread (`stock.rs`), as v6.14's
//! `obj_cgroup_uncharge_pages` refills the per-CPU stock: `memory.current`
//! keeps them until that stock is used or drained. (A memory cgroup's own
//! metadata and page tables, freed where no tree is at hand, go straight
//! back to the counters.)
//!
//! A page-table page is kernel memory charged whole, not by the byte
//! (`__memcg_kmem_charge_page` for a `GFP_PGTABLE_USER` allocation): a
//! [`PageTableCharge`] holds one page charged to an object cgroup, counted
//! in `kernel` and `pagetables`, and uncharges it when dropped. Its page
//! counts among the memory cgroup's kmem pages, so it moves with them at
//! offline like a slab page.
//!
//! When a memory cgroup goes offline its object cgroups are pointed at
//! the parent, with the pages, reserve and statistics they account
//! (`memcg_reparent_objcgs`): slab objects never keep a dying memory
//! cgroup alive, unlike page-cache folios in v6.14.
//!
//! Invariant: for every memory cgroup, `charged_pages * PAGE_SIZE ==
//! live object bytes + reserve_bytes + live page-table pages * PAGE_SIZE`,
//! with `reserve_bytes` below a page once no charge is in flight.
//!
//! An object cgroup is on the `objcg_list` of the memory cgroup it points
//! at, and leaves it when it is freed (`obj_cgroup_release`), in O(1) by
//! its index there: removed cgroups leave nothing on their ancestors'
//! lists.
//!
//! Locking: one mutex per memory cgroup (`SlabAcct`), never held while
//! charging (a charge may reclaim, and reclaim frees slab objects); a
//! reparent takes the child's, then the parent's. An object cgroup's link
//! (its memory cgroup and its index on that one's list) is a mutex, taken
//! before the list's; the memory cgroup is read once per charge; a charge that
//! finds, under the accounting lock, that the memory cgroup it charged was
//! reparented meanwhile gives its pages back and retries at the new one.

use std::sync::Weak;

use super::{ChargeError, ChargeKind, Gfp, MemCgroup, MemcgStat};
use crate::mm_types::PAGE_SIZE;
use crate::sync::{Arc, Mutex, lock};
use crate::weak_slab::WeakSlab;

/// What a memory cgroup accounts for the slab objects of its object
/// cgroups.
#[derive(Debug, Default)]
pub(crate) struct SlabAcct {
    /// Bytes charged as pages and not used by an object.
    reserve_bytes: u64,
    /// Pages charged for objects and the reserve.
    charged_pages: u64,
    /// Set at offline: the accounting moved to the parent.
    reparented: bool,
}

/// An object cgroup: what a slab object points to instead of its memory
/// cgroup, so that the memory cgroup can go away before the object does.
#[derive(Debug)]
pub struct ObjCgroup {
    link: Mutex<ObjcgLink>,
}

/// Where an object cgroup is.
#[derive(Debug)]
struct ObjcgLink {
    /// The memory cgroup charged now: the one it was made for, or after
    /// that one's offline, its nearest online ancestor.
    memcg: Weak<MemCgroup>,
    /// Its index on that memory cgroup's `objcg_list`.
    slot: usize,
}

impl ObjCgroup {
    /// The memory cgroup its objects are charged to now
    /// (`obj_cgroup_memcg`).
    pub fn memcg(&self) -> Arc<MemCgroup> {
        lock(&self.link)
            .memcg
            .upgrade()
            .expect("an object cgroup points at a live memory cgroup")
    }

    /// Gives `bytes` back to the reserve of its memory cgroup; returns that
    /// memory cgroup and the whole pages the reserve gave up, still
    /// charged, for the caller to uncharge.
    fn release_bytes(&self, bytes: u64) -> (Arc<MemCgroup>, u64) {
        loop {
            let memcg = self.memcg();
            let mut acct = lock(&memcg.kmem.acct);
            if acct.reparented {
                continue;
            }
            acct.reserve_bytes += bytes;
            let nr_pages = acct.reserve_bytes / PAGE_SIZE;
            acct.reserve_bytes %= PAGE_SIZE;
            acct.charged_pages -= nr_pages;
            drop(acct);
            return (memcg, nr_pages);
        }
    }

    /// Gives `bytes` back to the reserve of its memory cgroup and whole
    /// pages back to that one's counter; returns that memory cgroup.
    fn uncharge_bytes(&self, bytes: u64) -> Arc<MemCgroup> {
        let (memcg, nr_pages) = self.release_bytes(bytes);
        if nr_pages > 0 {
            memcg.uncharge_pages(nr_pages, ChargeKind::Kmem);
        }
        memcg
    }

    /// Uncharges `bytes` charged with
    /// [`CgroupTree::charge_kernel_bytes`](super::CgroupTree) and their
    /// `stat`.
    pub(super) fn uncharge_kernel_bytes(&self, bytes: u64, stat: Option<MemcgStat>) {
        if bytes == 0 {
            return;
        }
        let memcg = self.uncharge_bytes(bytes);
        if let Some(stat) = stat {
            memcg.mod_stat(stat, -(bytes as i64));
        }
    }

    /// Points `objcg` at `memcg` and puts it on that one's list.
    fn attach(objcg: &Arc<ObjCgroup>, memcg: &Arc<MemCgroup>) {
        let mut link = lock(&objcg.link);
        link.memcg = Arc::downgrade(memcg);
        link.slot = lock(&memcg.kmem.objcg_list).insert(Arc::downgrade(objcg));
    }
}

impl Drop for ObjCgroup {
    fn drop(&mut self) {
        // Released: off its memory cgroup's list (`obj_cgroup_release`). A
        // memory cgroup being freed takes its list with it.
        let memcg = {
            let link = lock(&self.link);
            let memcg = link.memcg.upgrade();
            if let Some(m) = &memcg {
                lock(&m.kmem.objcg_list).remove(link.slot, self);
            }
            memcg
        };
        // Dropped with no lock held: it may be the memory cgroup's last
        // reference.
        drop(memcg);
    }
}

/// A charged page-table page ([`CgroupTree::charge_pagetable`](super::CgroupTree::charge_pagetable)); dropping
/// it frees the page (`pagetable_dtor` + `__memcg_kmem_uncharge_page`):
/// the `pagetables` and `kernel` page and the charge come off the memory
/// cgroup its object cgroup points at then.
#[derive(Debug)]
#[must_use = "dropping it uncharges the page"]
pub struct PageTableCharge {
    objcg: Arc<ObjCgroup>,
}

impl PageTableCharge {
    /// The memory cgroup the page is charged to now.
    pub fn memcg(&self) -> Arc<MemCgroup> {
        self.objcg.memcg()
    }
}

impl Drop for PageTableCharge {
    fn drop(&mut self) {
        uncharge_obj_pages(&self.objcg, 1, |memcg| {
            memcg.mod_stat(MemcgStat::Pagetables, -1);
        });
    }
}

/// Uncharges `nr_pages` whole pages charged by
/// [`CgroupTree::charge_obj_pages`] (`obj_cgroup_uncharge_pages`) from
/// the memory cgroup `objcg` points at; `account` takes their statistics
/// off under the account lock.
fn uncharge_obj_pages(objcg: &ObjCgroup, nr_pages: u64, account: impl Fn(&MemCgroup)) {
    loop {
        let memcg = objcg.memcg();
        let mut acct = lock(&memcg.kmem.acct);
        if acct.reparented {
            continue;
        }
        acct.charged_pages -= nr_pages;
        account(&memcg);
        drop(acct);
        memcg.uncharge_pages(nr_pages, ChargeKind::Kmem);
        return;
    }
}

/// Whether an object counts as reclaimable slab (`SLAB_RECLAIM_ACCOUNT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlabKind {
    /// `slab_reclaimable` (dentries, inodes).
    Reclaimable,
    /// `slab_unreclaimable` (open files, everything else).
    Unreclaimable,
}

impl SlabKind {
    fn stat(self) -> MemcgStat {
        match self {
            SlabKind::Reclaimable => MemcgStat::SlabReclaimable,
            SlabKind::Unreclaimable => MemcgStat::SlabUnreclaimable,
        }
    }
}

impl MemCgroup {
    /// The object cgroup new slab objects of this memory cgroup charge
    /// (`current_obj_cgroup`): its own while online, else the nearest
    /// online ancestor's.
    pub fn obj_cgroup(&self) -> Arc<ObjCgroup> {
        self.self_and_ancestors()
            .find_map(|m| lock(&m.kmem.objcg).clone())
            .expect("the root always has an object cgroup")
    }

    /// Bytes of slab charge held in reserve, and pages charged for slab
    /// (for tests of the invariant).
    pub fn slab_charge(&self) -> (u64, u64) {
        let acct = lock(&self.kmem.acct);
        (acct.reserve_bytes, acct.charged_pages)
    }
}

/// A memory cgroup's kernel-memory state.
#[derive(Debug, Default)]
pub(crate) struct Kmem {
    /// `memcg->objcg`: its own object cgroup while online.
    objcg: Mutex<Option<Arc<ObjCgroup>>>,
    /// `memcg->objcg_list`: every object cgroup pointing here (its own and
    /// those of offline descendants).
    objcg_list: Mutex<WeakSlab<ObjCgroup>>,
    acct: Mutex<SlabAcct>,
}

impl Kmem {
    /// Gives `memcg` its object cgroup (`memcg_online_kmem`).
    pub(crate) fn online(memcg: &Arc<MemCgroup>) {
        let objcg = Arc::new(ObjCgroup {
            link: Mutex::new(ObjcgLink {
                memcg: Weak::new(),
                slot: 0,
            }),
        });
        ObjCgroup::attach(&objcg, memcg);
        *lock(&memcg.kmem.objcg) = Some(objcg);
    }

    /// Object cgroups pointing here (for tests).
    #[cfg(test)]
    pub(crate) fn nr_objcgs(&self) -> usize {
        lock(&self.objcg_list).len()
    }
}

impl super::CgroupTree {
    /// Charges a slab object of `bytes` to `objcg` (`obj_cgroup_charge` +
    /// `mod_objcg_state`) with the effort `gfp` allows: reclaiming like any
    /// charge with [`Gfp::Kernel`] (an xarray node for a readahead page
    /// charges with [`Gfp::NoRetry`]).
    pub fn charge_slab(
        &self,
        objcg: &ObjCgroup,
        bytes: u64,
        kind: SlabKind,
        gfp: Gfp,
    ) -> Result<(), ChargeError> {
        self.charge_obj(objcg, bytes, gfp, |memcg| {
            memcg.mod_stat(kind.stat(), bytes as i64);
        })
    }

    /// Charges a zswap entry of `bytes` compressed to `objcg`
    /// (`obj_cgroup_charge_zswap`): as the kernel's charge from reclaim
    /// (`PF_MEMALLOC`, [`Gfp::MemAlloc`]), forced
    /// past every limit, raising `max` where one is passed; counts the
    /// bytes in `zswap` and the page in `zswapped`.
    pub fn charge_zswap(&self, objcg: &ObjCgroup, bytes: u64) {
        let incomp = self.counts_zswap_incomp(bytes);
        let charged = self.charge_obj(objcg, bytes, Gfp::MemAlloc, |memcg| {
            memcg.mod_stat(MemcgStat::ZswapBytes, bytes as i64);
            memcg.mod_stat(MemcgStat::Zswapped, 1);
            if incomp {
                memcg.mod_stat(MemcgStat::ZswapIncomp, 1);
            }
        });
        debug_assert!(charged.is_ok(), "a forced charge cannot fail");
    }

    /// Charges `bytes` of kernel memory that is not a slab object (a
    /// memory cgroup's own metadata, `metadata.rs`) to `objcg`, counting
    /// them in `stat` if given, reclaiming like any charge.
    pub(super) fn charge_kernel_bytes(
        &self,
        objcg: &ObjCgroup,
        bytes: u64,
        stat: Option<MemcgStat>,
    ) -> Result<(), ChargeError> {
        if bytes == 0 {
            return Ok(());
        }
        self.charge_obj(objcg, bytes, Gfp::Kernel, |memcg| {
            if let Some(stat) = stat {
                memcg.mod_stat(stat, bytes as i64);
            }
        })
    }

    /// Uncharges a freed zswap entry (`obj_cgroup_uncharge_zswap`).
    pub fn uncharge_zswap(&self, objcg: &ObjCgroup, bytes: u64) {
        let memcg = self.uncharge_obj(objcg, bytes);
        memcg.mod_stat(MemcgStat::ZswapBytes, -(bytes as i64));
        memcg.mod_stat(MemcgStat::Zswapped, -1);
        if self.counts_zswap_incomp(bytes) {
            memcg.mod_stat(MemcgStat::ZswapIncomp, -1);
        }
    }

    /// Whether a zswap object of `bytes` is an incompressible page stored
    /// as is (`zswap_incomp`): a whole page, under a kernel that stores
    /// such pages ([`crate::profile::Behaviour::zswap_store_incompressible`]).
    fn counts_zswap_incomp(&self, bytes: u64) -> bool {
        bytes == crate::mm_types::PAGE_SIZE && self.behaviour().zswap_store_incompressible
    }

    /// Charges `bytes` to `objcg`'s memory cgroup through its reserve
    /// (module docs) with the effort `gfp` allows ([`Gfp::MemAlloc`]:
    /// forced past the limits); `account` counts
    /// the object's statistics on the memory cgroup charged, under its
    /// account lock (so a reparent moves them with the charge).
    fn charge_obj(
        &self,
        objcg: &ObjCgroup,
        bytes: u64,
        gfp: Gfp,
        account: impl Fn(&MemCgroup),
    ) -> Result<(), ChargeError> {
        loop {
            let memcg = objcg.memcg();
            let had = {
                let mut acct = lock(&memcg.kmem.acct);
                if acct.reparented {
                    continue;
                }
                if acct.reserve_bytes >= bytes {
                    acct.reserve_bytes -= bytes;
                    account(&memcg);
                    return Ok(());
                }
                std::mem::take(&mut acct.reserve_bytes)
            };
            let nr_pages = (bytes - had).div_ceil(PAGE_SIZE);
            if let Err(e) = self.try_charge(&memcg, nr_pages, ChargeKind::Kmem, gfp) {
                self.return_reserve(&memcg, had);
                return Err(e);
            }
            let mut acct = lock(&memcg.kmem.acct);
            if acct.reparented {
                // Offline moved the accounting meanwhile: undo here and
                // charge where the object cgroup points now.
                drop(acct);
                memcg.uncharge_pages(nr_pages, ChargeKind::Kmem);
                self.return_reserve(&memcg, had);
                continue;
            }
            acct.charged_pages += nr_pages;
            acct.reserve_bytes += nr_pages * PAGE_SIZE + had - bytes;
            account(&memcg);
            return Ok(());
        }
    }

    /// Charges one page-table page to `objcg` (`pagetable_alloc` with
    /// `GFP_PGTABLE_USER`: `__memcg_kmem_charge_page`, reclaiming and
    /// invoking the OOM path like any `GFP_KERNEL` charge, then the
    /// constructor's `NR_PAGETABLE`): a `kernel` and a `pagetables` page
    /// on `objcg`'s memory cgroup until the returned charge is dropped.
    pub fn charge_pagetable(&self, objcg: &Arc<ObjCgroup>) -> Result<PageTableCharge, ChargeError> {
        self.charge_obj_pages(objcg, 1, |memcg| {
            memcg.mod_stat(MemcgStat::Pagetables, 1);
        })?;
        Ok(PageTableCharge {
            objcg: Arc::clone(objcg),
        })
    }

    /// Charges `nr_pages` whole pages to `objcg`'s memory cgroup, past its
    /// reserve (`obj_cgroup_charge_pages`); `account` counts them under
    /// the account lock, as [`CgroupTree::charge_obj`]'s does.
    fn charge_obj_pages(
        &self,
        objcg: &ObjCgroup,
        nr_pages: u64,
        account: impl Fn(&MemCgroup),
    ) -> Result<(), ChargeError> {
        loop {
            let memcg = objcg.memcg();
            if lock(&memcg.kmem.acct).reparented {
                continue;
            }
            self.try_charge(&memcg, nr_pages, ChargeKind::Kmem, Gfp::Kernel)?;
            let mut acct = lock(&memcg.kmem.acct);
            if acct.reparented {
                // Offline moved the accounting meanwhile: undo here and
                // charge where the object cgroup points now.
                drop(acct);
                memcg.uncharge_pages(nr_pages, ChargeKind::Kmem);
                continue;
            }
            acct.charged_pages += nr_pages;
            account(&memcg);
            return Ok(());
        }
    }

    /// Puts reserve bytes a failed charge took back where they belong now.
    fn return_reserve(&self, memcg: &Arc<MemCgroup>, bytes: u64) {
        if bytes > 0 {
            memcg.obj_cgroup().uncharge_bytes(bytes);
        }
    }

    /// Uncharges a freed slab object of `bytes` (`obj_cgroup_uncharge`).
    pub fn uncharge_slab(&self, objcg: &ObjCgroup, bytes: u64, kind: SlabKind) {
        let memcg = self.uncharge_obj(objcg, bytes);
        memcg.mod_stat(kind.stat(), -(bytes as i64));
    }

    /// `obj_cgroup_uncharge`: `bytes` go back to `objcg`'s reserve, and
    /// the whole pages that frees into this thread's charge stock, as
    /// v6.14's `obj_cgroup_uncharge_pages` does (`refill_stock`): they stay
    /// charged (in `memory.current`, no longer in `kernel`) until a charge
    /// of the memory cgroup here takes them or a drain gives them back.
    /// Returns the memory cgroup.
    fn uncharge_obj(&self, objcg: &ObjCgroup, bytes: u64) -> Arc<MemCgroup> {
        let (memcg, nr_pages) = objcg.release_bytes(bytes);
        if nr_pages > 0 {
            self.uncharge_to_stock(&memcg, nr_pages, ChargeKind::Kmem);
        }
        memcg
    }

    /// `memcg_reparent_objcgs`: `child` goes offline; its object cgroups
    /// and their accounting move to `parent`. Called under the cgroup
    /// mutex.
    pub(crate) fn reparent_objcgs(&self, child: &MemCgroup, parent: &Arc<MemCgroup>) {
        lock(&child.kmem.objcg).take();
        // Both accounts locked (child, then parent) while the object
        // cgroups switch: an uncharge through a switched object cgroup
        // must find the parent's account already holding the child's
        // pages.
        let mut from = lock(&child.kmem.acct);
        let mut to = lock(&parent.kmem.acct);
        from.reparented = true;
        let objcgs = lock(&child.kmem.objcg_list).take();
        for objcg in objcgs.iter().filter_map(Weak::upgrade) {
            ObjCgroup::attach(&objcg, parent);
        }
        let pages = std::mem::take(&mut from.charged_pages);
        to.reserve_bytes += std::mem::take(&mut from.reserve_bytes);
        to.charged_pages += pages;
        super::move_charge(child, parent, pages, ChargeKind::Kmem);
        // Two reserves together may hold whole pages: give them back.
        let surplus_pages = to.reserve_bytes / PAGE_SIZE;
        to.reserve_bytes %= PAGE_SIZE;
        to.charged_pages -= surplus_pages;
        drop(to);
        drop(from);
        if surplus_pages > 0 {
            parent.uncharge_pages(surplus_pages, ChargeKind::Kmem);
        }
        let stats = [
            MemcgStat::Percpu,
            MemcgStat::SlabReclaimable,
            MemcgStat::SlabUnreclaimable,
            MemcgStat::ZswapBytes,
            MemcgStat::Zswapped,
            MemcgStat::Pagetables,
        ];
        for stat in stats {
            // Its offline descendants' objects moved here already: the
            // hierarchical figure is all this cgroup's. (Moved as a
            // difference, so an object freed through the parent
            // meanwhile is counted right.)
            let value = child.stat(stat);
            child.mod_stat(stat, -value);
            parent.mod_stat(stat, value);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::errno::Errno;
    use crate::memcontrol::test_tree;

    #[test]
    fn a_page_table_counts_as_kernel_and_pagetables_until_dropped() {
        let t = test_tree(1, 64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        let table = t.charge_pagetable(&c.obj_cgroup()).unwrap();
        for m in [&c, &p] {
            assert_eq!(m.memory().usage(), 1);
            assert_eq!(m.stat(MemcgStat::Kernel), 1);
            assert_eq!(m.stat(MemcgStat::Pagetables), 1);
        }
        assert_eq!(c.slab_charge(), (0, 1), "a whole kmem page, no reserve");
        assert!(Arc::ptr_eq(&table.memcg(), &c));
        drop(table);
        for m in [&c, &p] {
            assert_eq!(m.memory().usage(), 0);
            assert_eq!(m.stat(MemcgStat::Kernel), 0);
            assert_eq!(m.stat(MemcgStat::Pagetables), 0);
        }
        assert_eq!(c.slab_charge(), (0, 0));
    }

    #[test]
    fn a_page_table_follows_its_object_cgroup_at_offline() {
        // A page table outlives the task's cgroup: offline moves its
        // charge and statistics to the parent, which it then leaves from
        // (the dying child is pinned by nothing of it).
        let t = test_tree(1, 64);
        let p = t.mkdir("/p").unwrap().memcg().unwrap();
        let c = t.mkdir("/p/c").unwrap().memcg().unwrap();
        let table = t.charge_pagetable(&c.obj_cgroup()).unwrap();
        t.rmdir("/p/c").unwrap();
        assert!(Arc::ptr_eq(&table.memcg(), &p));
        assert_eq!((c.memory().usage(), c.stat(MemcgStat::Pagetables)), (0, 0));
        assert_eq!(p.memory().usage(), 1);
        assert_eq!(p.stat(MemcgStat::Pagetables), 1);
        assert_eq!(p.slab_charge(), (0, 1));
        drop(table);
        assert_eq!(p.memory().usage(), 0);
        assert_eq!(p.stat(MemcgStat::Pagetables), 0);
        assert_eq!(p.stat(MemcgStat::Kernel), 0);
        assert_eq!(p.slab_charge(), (0, 0));
    }

    #[test]
    fn a_page_table_over_the_limit_fails_with_enomem_and_leaves_nothing() {
        let t = test_tree(1, 64);
        let c = t.mkdir("/c").unwrap().memcg().unwrap();
        c.memory().set_max(1).unwrap();
        let first = t.charge_pagetable(&c.obj_cgroup()).unwrap();
        let err = t.charge_pagetable(&c.obj_cgroup()).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOMEM);
        assert_eq!(c.memory().usage(), 1);
        assert_eq!(c.stat(MemcgStat::Pagetables), 1);
        drop(first);
        assert_eq!(c.memory().usage(), 0);
    }
}
