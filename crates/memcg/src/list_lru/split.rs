//! The split design (the kernel since "split the list_lru lock to
//! per-cgroup scope", v6.14, with the 2026 reparenting-order fix).
//!
//! Every list has its own lock; a cgroup's lists live in the shared table at
//! the cgroup's stable id; lists are allocated top-down (the topmost
//! ancestor lacking lists first) and never for a dying cgroup.
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
use crate::sync::{Arc, Ordering, lock};

use super::list::{ListLruMemcg, ListView};
use super::{DEAD, Inner, ListGuard, Locate};

impl Inner {
    pub(super) fn with_list_split<R>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        let mut at = cg;
        loop {
            if !self.memcg_aware || at.is_root() {
                let view = self.root_view(nid);
                let guard = ListGuard {
                    _lock: lock(&view.list.lock),
                    view,
                };
                return Some((f.take().expect("called once"))(guard, at));
            }
            let done = self.memcg.with(at.id().into(), |mlru| {
                let list = &ListLruMemcg::of(mlru, at)?.lists[nid];
                let held = lock(&list.lock);
                // Relaxed: the list lock orders it against the reparent that
                // stores the dead mark under the same lock.
                if list.nr_items.load(Ordering::Relaxed) == DEAD {
                    return None;
                }
                let guard = ListGuard {
                    _lock: held,
                    view: ListView {
                        list,
                        links: &self.links,
                    },
                };
                Some((f.take().expect("called once"))(guard, at))
            });
            if done.is_some() || mode == Locate::SkipEmpty {
                return done;
            }
            if !at.is_dying() {
                // A live cgroup made before this list_lru: lists on first use.
                match mode {
                    Locate::Allocate => {
                        self.memcg_alloc(at);
                        continue;
                    }
                    _ => return None,
                }
            }
            at = at.parent().expect("only the root has no parent");
        }
    }

    pub(super) fn memcg_alloc_split(&self, cg: &MemCgroup) {
        loop {
            // The topmost ancestor (or cg itself) without lists.
            let mut pos = cg;
            while let Some(parent) = pos.parent() {
                if self.has_lists(parent) {
                    break;
                }
                pos = parent;
            }
            {
                let _xa_lock = lock(&self.alloc_lock);
                debug_assert!(
                    self.memcg.with(pos.id().into(), |m| m
                        .is_none_or(|m| m.owner_serial == pos.serial())),
                    "{}'s slot holds a removed cgroup's lists",
                    pos.path()
                );
                if !self.memcg.contains(pos.id().into()) && !pos.is_dying() {
                    self.memcg.store(
                        pos.id().into(),
                        Some(Arc::new(ListLruMemcg::new(pos, self))),
                    );
                }
            }
            if std::ptr::eq(pos, cg) || pos.is_dying() {
                return;
            }
        }
    }

    pub(super) fn reparent_split(&self, cg: &MemCgroup, parent: &MemCgroup) {
        // The allocation lock is the barrier (the kernel's xa lock, "using
        // the XArray lock as barrier"): `cg` is dying already, so an
        // allocation that checked it under this lock before us has stored
        // its lists (and we see them here), and one after us sees it dying
        // and stores nothing. Reading the slot without the lock let a late
        // store leave a dying cgroup with lists nobody would reparent.
        let Some(mlru) = self.load_slot_locked(cg.id().into()) else {
            return;
        };
        debug_assert_eq!(
            mlru.owner_serial,
            cg.serial(),
            "an online cgroup's slot is its own"
        );
        for (nid, src_list) in mlru.lists.iter().enumerate() {
            let _src_lock = lock(&src_list.lock);
            let src = ListView {
                list: src_list,
                links: &self.links,
            };
            self.with_list(nid, parent, Locate::Allocate, |dst, owner| {
                debug_assert!(src.nr_items() >= 0, "reparenting a dead list");
                self.splice_into(nid, &src, &dst, owner);
            });
            // Relaxed: under the list lock, like every nr_items store.
            src_list.nr_items.store(DEAD, Ordering::Relaxed);
        }
        // Only now erase the slot (the 2026 order); readers still holding
        // the lists see them dead and move on to the parent.
        let _xa_lock = lock(&self.alloc_lock);
        self.memcg.store(cg.id().into(), None);
    }
}
