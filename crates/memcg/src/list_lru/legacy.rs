//! The legacy design (the kernel before "split the list_lru lock to
//! per-cgroup scope"), kept as the baseline the split design is measured
//! against.
//!
//! One lock per node covers every cgroup's list on that node and the root
//! list; a cgroup's lists live in the shared table at its list index (the
//! kernel's `kmemcg_id`), which offline redirects to the parent's;
//! allocation collects the ancestors lacking lists into an intermediate
//! table, then stores them topmost first.
//!
//! The redirects are this design's own table, cgroup id → list index,
//! written when the design reparents a cgroup (the kernel's
//! `memcg_reparent_list_lrus` redirecting the dying cgroup's `kmemcg_id` to
//! its parent's): the cgroups themselves carry no trace of this baseline.
//!
//! # Invariants
//!
//! - A cgroup's list index is its own id until this list_lru reparents it,
//!   then its parent's index at that moment; the root's is the root lists.
//!   A redirect names an ancestor, whose lists are used only if they are
//!   that ancestor's (an ancestor that died after the cgroup did may have
//!   had its id reused by an unrelated cgroup).
//! - A redirect applies only to the cgroup that wrote it (checked by serial:
//!   ids are reused once released, serials never). A newer cgroup with the
//!   same id overwrites it only when it is reparented in turn. A dying
//!   cgroup without one of its own (not yet reparented here, or dead before
//!   this list_lru existed) keeps its own id, where it finds no lists of its
//!   own, so locating its list moves on to the parent.
//! - A reparented list is marked dead, not just emptied, so nothing adds to
//!   a list that is no longer its owner's; the dead set stays at its index
//!   until the id's next cgroup claims it (type-stable sets, `list.rs`).
//! - A list's owner and dead mark change only under its node's lock (the
//!   lock that covers it in this design), and a list is used only after
//!   both were checked under it.
//!
//! # Locking
//!
//! - Every list operation holds the node lock for its whole duration,
//!   including the walk up a chain of redirected indexes, and drops it only
//!   to allocate lists. Links and counts of every list on the node, the
//!   root's included, change only under it.
//! - Claims of the table's sets happen under the allocation lock (each
//!   list under its node's lock inside it); the reparent stores the
//!   redirect first, then reads the dying cgroup's set under that lock, so
//!   an allocation either claimed its lists before (and the reparent moves
//!   them) or reads the parent's index.
//! - The redirect is stored before the reparent takes any node lock, so a
//!   list operation that takes a node lock after the reparent's sees it.
//!   Readers load it lock-free (an `IdTable` guard); writers are the
//!   reparents, serialised by `cgroup_mutex`.

use crate::idr::IdTable;
use crate::memcontrol::MemCgroup;
use crate::sync::{Arc, Mutex, MutexGuard, lock};

use super::{Design, ListGuard, Locate, LruDesign, Shared};

/// Where a cgroup's lists are found (the kernel's `kmemcg_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListIndex {
    /// The node's root lists (the kernel's -1).
    Root,
    /// The lists stored at this id in the shared table.
    Slot(u16),
}

/// A reparented cgroup's list index: its parent's at the offline.
struct Redirect {
    /// The reparented cgroup's serial (see the module docs).
    owner_serial: u64,
    /// The parent's list index when the cgroup was reparented.
    to: ListIndex,
}

/// The legacy design's own state.
pub(super) struct LegacyState {
    /// Per node, the one lock over the root list and every cgroup's list on
    /// that node.
    node_locks: Box<[Mutex<()>]>,
    /// By cgroup id: where the lists of a cgroup this list_lru reparented
    /// went.
    redirects: IdTable<Redirect>,
}

impl LegacyState {
    pub(super) fn new(nr_nodes: usize, max_ids: usize) -> Self {
        Self {
            node_locks: (0..nr_nodes).map(|_| Mutex::new(())).collect(),
            redirects: IdTable::new(max_ids + 1),
        }
    }

    /// Where `cg`'s lists are found now (its `kmemcg_id`).
    fn list_index(&self, cg: &MemCgroup) -> ListIndex {
        if cg.is_root() {
            return ListIndex::Root;
        }
        // Only a dying cgroup can have a redirect (the reparent stores it
        // after the cgroup is marked dying), so live cgroups, nearly every
        // call, skip the table.
        if !cg.is_dying() {
            return ListIndex::Slot(cg.id());
        }
        self.redirects
            .with(cg.id().into(), |redirect| match redirect {
                Some(r) if r.owner_serial == cg.serial() => r.to,
                _ => ListIndex::Slot(cg.id()),
            })
    }

    /// Points `cg`'s index at `parent`'s (the offline's redirect).
    fn redirect(&self, cg: &MemCgroup, parent: &MemCgroup) {
        let redirect = Redirect {
            owner_serial: cg.serial(),
            to: self.list_index(parent),
        };
        self.redirects
            .store(cg.id().into(), Some(Arc::new(redirect)));
    }

    /// The cgroup whose lists `cg` uses, with their index: `cg`'s (possibly
    /// redirected) index followed to its owner in `cg`'s own ancestry.
    /// `None`: the root lists. A dying owner's lists are still used until
    /// reparenting erases them, as the legacy kernel does.
    fn resolve_owner<'a>(
        &self,
        shared: &Shared,
        cg: &'a MemCgroup,
    ) -> Option<(&'a MemCgroup, u16)> {
        match self.list_index(cg) {
            ListIndex::Slot(idx) if shared.memcg_aware => Some((owner_with_id(cg, idx), idx)),
            _ => None,
        }
    }
}

impl Design for LegacyState {
    fn design(&self) -> LruDesign {
        LruDesign::Legacy
    }

    fn has_memcg_lists(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        match self.list_index(cg) {
            ListIndex::Root => true,
            ListIndex::Slot(idx) => shared.memcg.is_live(idx.into()),
        }
    }

    fn has_memcg_lists_locked(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        match self.list_index(cg) {
            ListIndex::Root => true,
            ListIndex::Slot(idx) => {
                let _node_lock = lock(&self.node_locks[self.node_locks.len() - 1]);
                shared.memcg.is_live(idx.into())
            }
        }
    }

    fn count_memcg(&self, shared: &Shared, nid: usize, cg: &MemCgroup) -> usize {
        match self.list_index(cg) {
            ListIndex::Root => shared.nodes[nid].root.count(),
            ListIndex::Slot(idx) => match shared.memcg.get(idx.into()) {
                Some(set) if shared.memcg.is_live(idx.into()) => set[nid].count(),
                _ => 0,
            },
        }
    }

    fn with_list<R>(
        &self,
        shared: &Shared,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        mut f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R> {
        let mut node_lock = lock(&self.node_locks[nid]);
        let mut at = cg;
        loop {
            let Some((owner, idx)) = self.resolve_owner(shared, at) else {
                let guard = ListGuard {
                    _lock: node_lock,
                    view: shared.root_view(nid),
                };
                return Some(f(guard, shared.tree.root()));
            };
            (node_lock, f) = match with_owner_list(shared, nid, owner, idx, node_lock, f) {
                Ok(done) => return Some(done),
                Err(unused) => unused,
            };
            if mode == Locate::SkipEmpty {
                return None;
            }
            if !owner.is_dying() && owner.id() == idx {
                // A live cgroup made before this list_lru: lists on first use.
                if mode != Locate::Allocate {
                    return None;
                }
                drop(node_lock);
                self.memcg_alloc(shared, owner);
                node_lock = lock(&self.node_locks[nid]);
                continue;
            }
            // The owner's lists are gone: its items were moved up.
            at = match owner.parent() {
                Some(parent) => parent,
                None => shared.tree.root(),
            };
        }
    }

    /// The pre-series allocation: collect the ancestors lacking lists into
    /// an intermediate table, allocate (outside the allocation lock), then
    /// give them their lists topmost first (each list claimed under its
    /// node's lock, which covers it in this design).
    fn alloc_lists(&self, shared: &Shared, cg: &MemCgroup) {
        let mut table = Vec::with_capacity(cg.level() as usize);
        let mut at = Some(cg);
        while let Some(c) = at {
            if self.has_lists(shared, c) {
                break;
            }
            // Allocated now if the id never had a set; a set allocated
            // here and not claimed below waits for the id's next claim.
            shared.memcg.get_or_alloc(c.id().into(), &shared.links);
            table.push(c);
            at = c.parent().map(|p| &**p);
        }
        let _xa_lock = lock(&shared.alloc_lock);
        for c in table.into_iter().rev() {
            if let ListIndex::Slot(idx) = self.list_index(c)
                && !shared.memcg.is_live(idx.into())
            {
                let set = shared.memcg.get_or_alloc(idx.into(), &shared.links);
                for (nid, list) in set.iter().enumerate() {
                    let _node_lock = lock(&self.node_locks[nid]);
                    list.claim(c);
                }
            }
        }
    }

    fn reparent(&self, shared: &Shared, cg: &MemCgroup, parent: &MemCgroup) {
        // Redirect first, before the allocation lock and any node lock (see
        // the module docs); the cgroup's own lists are still at its id.
        self.redirect(cg, parent);
        let src_idx = usize::from(cg.id());
        // Under the allocation lock, as in the split design: the redirect is
        // stored, so an allocation that read the old index under the lock
        // has claimed its lists (seen here) and a later one finds the
        // parent's index.
        let Some(set) = shared.live_set_locked(src_idx) else {
            return;
        };
        for (nid, src_list) in set.iter().enumerate() {
            let src = shared.view(src_list);
            self.with_list(shared, nid, parent, Locate::Allocate, |dst, owner| {
                shared.splice_into(nid, &src, &dst, owner);
                // Dead, not just empty: a removed descendant whose index
                // still names this cgroup (our tree unlinks dead children,
                // so the redirect cannot reach them, unlike the kernel's)
                // must not add to a list that is no longer its owner's.
                // Under the node lock, which covers every list of the node
                // in this design. The dead set waits at the id for reuse.
                src_list.mark_dead();
            });
        }
    }
}

/// Calls `f` with `owner`'s list on `nid` under the node lock, or hands the
/// lock and `f` back when the lists at `idx` are not `owner`'s (none there,
/// another cgroup's, or `idx` names no ancestor) or its list is dead.
fn with_owner_list<'l, R, F>(
    shared: &Shared,
    nid: usize,
    owner: &MemCgroup,
    idx: u16,
    node_lock: MutexGuard<'l, ()>,
    f: F,
) -> Result<R, (MutexGuard<'l, ()>, F)>
where
    F: FnOnce(ListGuard<'_>, &MemCgroup) -> R,
{
    if owner.id() != idx {
        return Err((node_lock, f));
    }
    let Some(set) = shared.memcg.get(idx.into()) else {
        return Err((node_lock, f));
    };
    let list = &set[nid];
    // Under the node lock, which orders it against the claim and the dead
    // mark (both made under it).
    if !list.is_live_for(owner) {
        return Err((node_lock, f));
    }
    let guard = ListGuard {
        _lock: node_lock,
        view: shared.view(list),
    };
    Ok(f(guard, owner))
}

/// The ancestor-or-self of `cg` whose id is `idx` (the owner of a legacy
/// list reached through a redirected index), or the root if none is.
fn owner_with_id(cg: &MemCgroup, idx: u16) -> &MemCgroup {
    let mut at = cg;
    while at.id() != idx {
        match at.parent() {
            Some(parent) => at = parent,
            None => break,
        }
    }
    at
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::list_lru::{ListLru, ListLruConfig, Locator};
    use crate::memcontrol::CgroupTree;

    /// memcontrol's `kmemcg_id_redirects_to_the_parent_at_offline`, now
    /// that the index lives here.
    #[test]
    fn list_index_redirects_to_the_parent_at_offline() {
        let t = CgroupTree::default();
        let lru = ListLru::new(
            &t,
            ListLruConfig {
                design: LruDesign::Legacy,
                ..ListLruConfig::default()
            },
        )
        .unwrap();
        let Locator::Legacy(legacy) = &lru.inner.locator else {
            panic!("a legacy list_lru has the legacy locator");
        };
        let a = t.mkdir("/a").unwrap().memcg().unwrap();
        let b = t.mkdir("/a/b").unwrap().memcg().unwrap();
        assert_eq!(legacy.list_index(t.root()), ListIndex::Root);
        assert_eq!(legacy.list_index(&b), ListIndex::Slot(b.id()));
        t.rmdir("/a/b").unwrap();
        assert_eq!(legacy.list_index(&b), ListIndex::Slot(a.id()));
        t.rmdir("/a").unwrap();
        assert_eq!(legacy.list_index(&a), ListIndex::Root);
    }
}
