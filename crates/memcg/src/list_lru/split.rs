//! The split design (the kernel since "split the list_lru lock to
//! per-cgroup scope", v6.14, with the 2026 reparenting-order fix).
//!
//! Every list has its own lock; a cgroup's lists live in the shared table at
//! the cgroup's stable id; lists are allocated top-down (the topmost
//! ancestor lacking lists first) and never for a dying cgroup.
//!
//! # Invariants
//!
//! - A slot holds only its cgroup's lists (checked by owner serial: ids are
//!   reused, serials never); an offline cgroup's slot is erased only after
//!   its lists were drained and marked dead.
//!
//! # Locking
//!
//! - Locating a list loads the slot lock-free (the guard keeps the lists
//!   alive, as `rcu_read_lock`), then takes the list's own lock; a dead
//!   (`nr_items == DEAD`) or missing list sends a dying cgroup to its
//!   parent.
//! - Stores to the table happen under the allocation lock (the xa lock),
//!   which is also the barrier between a lazy allocation and the reparent.
//! - Reparenting locks the child's list, then the parent's (child before
//!   parent is the only order two lists are ever taken in).

use crate::memcontrol::MemCgroup;
use crate::sync::{Ordering, lock};

use super::list::ListLruMemcg;
use super::{DEAD, Design, ListGuard, Locate, LruDesign, Shared};

/// The split design's own state: none. Each list carries its lock, and the
/// shared table is indexed by cgroup id.
pub(super) struct SplitState;

impl Design for SplitState {
    fn design(&self) -> LruDesign {
        LruDesign::Split
    }

    fn has_memcg_lists(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        shared
            .memcg
            .with(cg.id().into(), |m| ListLruMemcg::of(m, cg).is_some())
    }

    fn count_memcg(&self, shared: &Shared, nid: usize, cg: &MemCgroup) -> usize {
        shared
            .memcg
            .with(cg.id().into(), |m| m.map_or(0, |m| m.lists[nid].count()))
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
                self.memcg_alloc(shared, at);
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
        let Some(mlru) = shared.load_slot_locked(cg.id().into()) else {
            return;
        };
        debug_assert_eq!(
            mlru.owner_serial,
            cg.serial(),
            "an online cgroup's slot is its own"
        );
        for (nid, src_list) in mlru.lists.iter().enumerate() {
            let _src_lock = lock(&src_list.lock);
            let src = shared.view(src_list);
            self.with_list(shared, nid, parent, Locate::Allocate, |dst, owner| {
                debug_assert!(src.nr_items() >= 0, "reparenting a dead list");
                shared.splice_into(nid, &src, &dst, owner);
            });
            // Relaxed: under the list lock, like every nr_items store.
            src_list.nr_items.store(DEAD, Ordering::Relaxed);
        }
        // Only now erase the slot (the 2026 order); readers still holding
        // the lists see them dead and move on to the parent.
        shared.erase_slot(cg.id().into());
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
/// `cg` has no lists (none stored, or another cgroup's) or its list is dead.
fn with_live_list<R, F>(shared: &Shared, nid: usize, cg: &MemCgroup, f: F) -> Result<R, F>
where
    F: FnOnce(ListGuard<'_>, &MemCgroup) -> R,
{
    shared.memcg.with(cg.id().into(), |mlru| {
        let Some(lists) = ListLruMemcg::of(mlru, cg) else {
            return Err(f);
        };
        let list = &lists.lists[nid];
        let held = lock(&list.lock);
        // Relaxed: the list lock orders it against the reparent that stores
        // the dead mark under the same lock.
        if list.nr_items.load(Ordering::Relaxed) == DEAD {
            return Err(f);
        }
        let guard = ListGuard {
            _lock: held,
            view: shared.view(list),
        };
        Ok(f(guard, cg))
    })
}

/// Stores lists for `pos` unless it has some or is dying, under the
/// allocation lock (which a reparent takes to read the slot).
fn store_lists(shared: &Shared, pos: &MemCgroup) {
    let _xa_lock = lock(&shared.alloc_lock);
    debug_assert!(
        shared.memcg.with(pos.id().into(), |m| m
            .is_none_or(|m| m.owner_serial == pos.serial())),
        "{}'s slot holds a removed cgroup's lists",
        pos.path()
    );
    if !shared.memcg.contains(pos.id().into()) && !pos.is_dying() {
        shared
            .memcg
            .store(pos.id().into(), Some(shared.new_lists(pos)));
    }
}
