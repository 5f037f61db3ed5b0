//! The split design (the kernel since "split the list_lru lock to
//! per-cgroup scope", v6.14, with the 2026 reparenting-order fix).
//!
//! Every list has its own lock; a cgroup's lists are the set at the
//! cgroup's stable id in the shared table; lists are allocated top-down
//! (the topmost ancestor lacking lists first) and never for a dying cgroup.
//!
//! # Invariants
//!
//! - A list is used for a cgroup only while it is live and owned by that
//!   cgroup (owner serial: ids are reused, serials never). An offline
//!   cgroup's lists are drained and marked dead before its id can be
//!   reused; the set then waits at the id for the next cgroup that gets it
//!   (type-stable sets, `list.rs`).
//! - A set's owner and dead mark change only under each list's own lock:
//!   a claim sets the owner and revives the list in one critical section,
//!   a reparent splices the items away and marks the list dead in another.
//!
//! # Locking
//!
//! - Locating a list loads the set at the id without any guard (the set
//!   is never freed or moved while the list_lru lives), takes the list's
//!   own lock, and only then checks that the list is the cgroup's and not
//!   dead: between the load and the lock the cgroup may have been
//!   reparented and its id, with the set, given to another cgroup. A dead
//!   or foreign list sends a dying cgroup to its parent, a live cgroup to
//!   the allocation.
//! - Claims happen under the allocation lock (the xa lock), which is also
//!   the barrier between a lazy allocation and the reparent.
//! - Reparenting locks the child's list, then the parent's (child before
//!   parent is the only order two lists are ever taken in).

use crate::memcontrol::MemCgroup;
use crate::sync::lock;

use super::{Design, ListGuard, Locate, LruDesign, Shared};

/// The split design's own state: none. Each list carries its lock, and the
/// shared table is indexed by cgroup id.
pub(super) struct SplitState;

impl Design for SplitState {
    fn design(&self) -> LruDesign {
        LruDesign::Split
    }

    fn has_memcg_lists(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        shared.memcg.is_live_for(cg.id().into(), cg)
    }

    fn has_memcg_lists_locked(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        shared.memcg.get(cg.id().into()).is_some_and(|set| {
            let last = &set[set.len() - 1];
            let _list_lock = lock(&last.lock);
            last.is_live_for(cg)
        })
    }

    fn count_memcg(&self, shared: &Shared, nid: usize, cg: &MemCgroup) -> usize {
        let id = cg.id().into();
        match shared.memcg.get(id) {
            Some(set) if shared.memcg.is_live(id) => set[nid].count(),
            _ => 0,
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
        let mut at = cg;
        loop {
            if !shared.memcg_aware || at.is_root() {
                let view = shared.root_view(nid);
                let guard = ListGuard {
                    _lock: lock(&view.list.lock),
                    view,
                };
                return Some(f(guard, at));
            }
            f = match with_live_list(shared, nid, at, f) {
                Ok(done) => return Some(done),
                Err(unused) => unused,
            };
            if mode == Locate::SkipEmpty {
                return None;
            }
            if !at.is_dying() {
                // A live cgroup made before this list_lru: lists on first use.
                if mode != Locate::Allocate {
                    return None;
                }
                // Through the allocation lock even if another thread's
                // claim already shows: it finishes before we look again.
                self.alloc_lists(shared, at);
                continue;
            }
            at = at.parent().expect("only the root has no parent");
        }
    }

    fn alloc_lists(&self, shared: &Shared, cg: &MemCgroup) {
        loop {
            let pos = self.topmost_without_lists(shared, cg);
            store_lists(shared, pos);
            if std::ptr::eq(pos, cg) || pos.is_dying() {
                return;
            }
        }
    }

    fn reparent(&self, shared: &Shared, cg: &MemCgroup, parent: &MemCgroup) {
        // The allocation lock is the barrier (the kernel's xa lock, "using
        // the XArray lock as barrier"): `cg` is dying already, so an
        // allocation that checked it under this lock before us has stored
        // its lists (and we see them here), and one after us sees it dying
        // and stores nothing. Reading the slot without the lock let a late
        // store leave a dying cgroup with lists nobody would reparent.
        let Some(set) = shared.live_set_locked(cg.id().into()) else {
            return;
        };
        for (nid, src_list) in set.iter().enumerate() {
            let _src_lock = lock(&src_list.lock);
            debug_assert!(
                src_list.is_live_for(cg),
                "an online cgroup's set is its own and live"
            );
            let src = shared.view(src_list);
            self.with_list(shared, nid, parent, Locate::Allocate, |dst, owner| {
                shared.splice_into(nid, &src, &dst, owner);
            });
            // Drained, then dead, under the same lock (the 2026 order): a
            // reader that locks the list after this moves on to the parent,
            // where the items are now. The dead mark is also what frees the
            // set for the id's next cgroup.
            src_list.mark_dead();
        }
    }
}

impl SplitState {
    /// The topmost ancestor of `cg` (or `cg` itself) without lists.
    fn topmost_without_lists<'a>(&self, shared: &Shared, cg: &'a MemCgroup) -> &'a MemCgroup {
        let mut pos = cg;
        while let Some(parent) = pos.parent() {
            if self.has_lists(shared, parent) {
                break;
            }
            pos = parent;
        }
        pos
    }
}

/// Calls `f` with `cg`'s own list on `nid` locked, or hands `f` back when
/// `cg` has no lists (no set at its id, or the set is dead or another
/// cgroup's).
#[inline]
fn with_live_list<R, F>(shared: &Shared, nid: usize, cg: &MemCgroup, f: F) -> Result<R, F>
where
    F: FnOnce(ListGuard<'_>, &MemCgroup) -> R,
{
    let Some(set) = shared.memcg.get(cg.id().into()) else {
        return Err(f);
    };
    let list = &set[nid];
    let held = lock(&list.lock);
    // The re-check, under the lock that orders it against the claim and the
    // dead mark (module docs): the set may have been reparented, and given
    // to the next cgroup with this id, since we loaded it.
    if !list.is_live_for(cg) {
        return Err(f);
    }
    let guard = ListGuard {
        _lock: held,
        view: shared.view(list),
    };
    Ok(f(guard, cg))
}

/// Claims the set at `pos`'s id for `pos` unless `pos` has live lists or
/// is dying, under the allocation lock (which a reparent takes to read the
/// set): each list gets its owner and is revived under its own lock.
fn store_lists(shared: &Shared, pos: &MemCgroup) {
    let _xa_lock = lock(&shared.alloc_lock);
    let id = pos.id().into();
    debug_assert!(
        !shared.memcg.is_live(id) || shared.memcg.is_live_for(id, pos),
        "{}'s id holds a removed cgroup's live lists",
        pos.path()
    );
    if !shared.memcg.is_live(id) && !pos.is_dying() {
        for list in shared.memcg.get_or_alloc(id, &shared.links) {
            let _list_lock = lock(&list.lock);
            list.claim(pos);
        }
    }
}
