//! The superblock's shrinker: counting and pruning the dentry and inode
//! lists of one memory cgroup (`super_cache_count`, `super_cache_scan`,
//! `prune_dcache_sb`, `prune_icache_sb`). See the module docs of `fs` for
//! the LRU rules.

use super::{DENTRY_BYTES, INODE_BYTES, Namespace, Pruned, SB_SHRINK_BATCH, Superblock};
use crate::list_lru::{ItemId, ListLru, Walked};
use crate::memcontrol::MemCgroup;
use crate::shrinker::{ShrinkControl, ShrinkCount, ShrinkScan, Shrinker};
use crate::sync::{Mutex, MutexGuard, lock};

impl Superblock {
    /// `prune_dcache_sb` for one memory cgroup: walks up to `nr_to_scan`
    /// dentries of its list (`dentry_lru_isolate`): one in use again is
    /// taken off the list, a referenced one gets another round, the rest
    /// are freed.
    fn prune_dcache(&self, memcg: &MemCgroup, nr_to_scan: u64) -> Pruned {
        self.prune(
            &self.dentry_lru,
            memcg,
            nr_to_scan,
            |ns, item| {
                let name = ns.dentry_of_item.get(&item)?.clone();
                let dentry = ns.dcache.get_mut(&name)?;
                let verdict =
                    lru_verdict(&mut dentry.on_lru, &mut dentry.referenced, dentry.count > 0);
                Some((name, verdict))
            },
            |ns, item, name| {
                // The same dentry, still unused and unlisted (taken again
                // since: it stays, off the LRU until its next close).
                let free = ns
                    .dcache
                    .get(&name)
                    .is_some_and(|d| d.item == item && d.count == 0 && !d.on_lru);
                if free {
                    self.kill_dentry(ns, &name);
                }
                free.then_some(DENTRY_BYTES)
            },
        )
    }

    /// `prune_icache_sb` for one memory cgroup (`inode_lru_isolate`): one
    /// in use again or whose mapping is not shrinkable (folios, or shadow
    /// nodes) is taken off the list (an `iput`, or its mapping becoming
    /// shrinkable, puts it back), a referenced one gets another round, the
    /// rest are evicted, a lone shadow at index 0 with them.
    fn prune_icache(&self, memcg: &MemCgroup, nr_to_scan: u64) -> Pruned {
        self.prune(
            &self.inode_lru,
            memcg,
            nr_to_scan,
            |ns, item| {
                let ino = *ns.inode_of_item.get(&item)?;
                let inode = ns.icache.get_mut(&ino)?;
                let busy = inode.count > 0 || !inode.mapping.is_shrinkable();
                let verdict = lru_verdict(&mut inode.on_lru, &mut inode.referenced, busy);
                Some((ino, verdict))
            },
            |ns, item, ino| {
                // The same inode, still unused and unlisted.
                let free = ns
                    .icache
                    .get(&ino)
                    .is_some_and(|i| i.item == item && i.count == 0 && !i.on_lru);
                if free {
                    self.evict_inode(ns, ino);
                }
                free.then_some(INODE_BYTES)
            },
        )
    }

    /// Walks `memcg`'s list of `lru` (`list_lru_shrink_walk`) under the
    /// namespace lock, tried (a held lock skips the item): `isolate` names
    /// each item's object and says what to do with it; the objects to
    /// dispose of are then freed by `dispose` (which returns the bytes it
    /// freed, if it still could) under the lock taken again. Every item
    /// taken off the list counts as freed, as the kernel's walk result
    /// does.
    fn prune<K>(
        &self,
        lru: &ListLru,
        memcg: &MemCgroup,
        nr_to_scan: u64,
        mut isolate: impl FnMut(&mut Namespace, ItemId) -> Option<(K, LruVerdict)>,
        mut dispose: impl FnMut(&mut Namespace, ItemId, K) -> Option<u64>,
    ) -> Pruned {
        let mut doomed = Vec::new();
        let mut pruned = Pruned::default();
        let mut budget = usize::try_from(nr_to_scan).unwrap_or(usize::MAX);
        let _ = lru.walk_one(0, memcg, &mut budget, |item, guard| {
            let Some(mut ns) = try_lock(&self.ns) else {
                return Walked::Skip(guard);
            };
            let Some((key, verdict)) = isolate(&mut ns, item) else {
                return Walked::Skip(guard);
            };
            match verdict {
                LruVerdict::Rotate => Walked::Rotate(guard),
                LruVerdict::Remove | LruVerdict::Dispose => {
                    if matches!(verdict, LruVerdict::Dispose) {
                        doomed.push((item, key));
                    }
                    pruned.objects += 1;
                    let (list, token) = guard.isolate();
                    Walked::Removed(list, token)
                }
            }
        });
        let mut ns = lock(&self.ns);
        for (item, key) in doomed {
            pruned.bytes += dispose(&mut ns, item, key).unwrap_or(0);
        }
        pruned
    }
}

/// What a shrinker walk does with a listed dentry or inode.
enum LruVerdict {
    /// In use (or holding page cache): off the list, not freed.
    Remove,
    /// Referenced since the last look: another round.
    Rotate,
    /// Off the list and freed.
    Dispose,
}

/// The verdict on a listed object, updating its flags: `busy` ones leave
/// the list, referenced ones lose the mark and rotate, the rest go.
fn lru_verdict(on_lru: &mut bool, referenced: &mut bool, busy: bool) -> LruVerdict {
    if busy {
        *on_lru = false;
        return LruVerdict::Remove;
    }
    if std::mem::take(referenced) {
        return LruVerdict::Rotate;
    }
    *on_lru = false;
    LruVerdict::Dispose
}

/// `spin_trylock` on the namespace.
fn try_lock(ns: &Mutex<Namespace>) -> Option<MutexGuard<'_, Namespace>> {
    match ns.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// The superblock's shrinker (`super_cache_count`, `super_cache_scan`).
pub(super) struct SbShrinker(pub(super) std::sync::Weak<Superblock>);

impl Shrinker for SbShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
        let Some(sb) = self.0.upgrade() else {
            return ShrinkCount::Empty;
        };
        let dentries = sb.dentry_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0);
        let inodes = sb.inode_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0);
        match (dentries + inodes) as u64 {
            0 => ShrinkCount::Empty,
            // vfs_cache_pressure 100: as counted.
            n => ShrinkCount::Objects(n),
        }
    }

    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
        let Some(sb) = self.0.upgrade() else {
            return ShrinkScan::Stop;
        };
        let dentries = sb.dentry_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) as u64;
        let inodes = sb.inode_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) as u64;
        let total = dentries + inodes + 1;
        // Proportional shares, each at least one (`mult_frac` + 1).
        let dentry_scan = sc.nr_to_scan * dentries / total + 1;
        let inode_scan = sc.nr_to_scan * inodes / total + 1;
        let d = sb.prune_dcache(&sc.memcg, dentry_scan);
        let i = sb.prune_icache(&sc.memcg, inode_scan);
        sc.reclaimed_pages += (d.bytes + i.bytes) / crate::mm_types::PAGE_SIZE;
        ShrinkScan::Freed(d.objects + i.objects)
    }

    fn batch(&self) -> u64 {
        SB_SHRINK_BATCH
    }
}
