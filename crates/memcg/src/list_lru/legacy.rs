//! The legacy design (the kernel before "split the list_lru lock to
//! per-cgroup scope"), kept as the baseline the split design is measured
//! against.
//!
//! One lock per node covers every cgroup's list on that node and the root
//! list; a cgroup's lists live in the shared table at its `kmemcg_id`,
//! which offline redirects to the parent's; allocation collects the
//! ancestors lacking lists into an intermediate table, then stores them
//! topmost first.
//!
//! # Locking
//!
//! - Every list operation holds the node lock for its whole duration,
//!   including the walk up a chain of redirected indexes, and drops it only
//!   to allocate lists.
//! - Stores to the table happen under the allocation lock; the reparent
//!   reads the dying cgroup's slot under it after the redirect is in place,
//!   so an allocation either stored its lists before (and the reparent
//!   moves them) or reads the parent's index.

use crate::memcontrol::MemCgroup;
use crate::sync::{Arc, Ordering, lock};

use super::list::{ListLruMemcg, ListView};
use super::{DEAD, Inner, ListGuard, Locate};

impl Inner {
    pub(super) fn with_list_legacy<R>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R> {
        let mut held = Some(lock(&self.nodes[nid].legacy_lock));
        let mut f = Some(f);
        let mut at = cg;
        loop {
            let idx = at.kmemcg_id();
            // Follow the (possibly redirected) index to its owner in this
            // cgroup's own ancestry, and use the lists there only if they are
            // that owner's (an ancestor that died after this cgroup did may
            // have had its id reused by an unrelated cgroup). A dying owner's
            // lists are still used until reparenting erases them, as the
            // legacy kernel does.
            let owner = if self.memcg_aware && idx >= 0 {
                Some(owner_with_id(at, idx))
            } else {
                None
            };
            let Some(owner) = owner else {
                let guard = ListGuard {
                    _lock: held.take().expect("node lock held"),
                    view: self.root_view(nid),
                };
                return Some((f.take().expect("called once"))(guard, self.tree.root()));
            };
            if i32::from(owner.id()) == idx {
                let done = self.memcg.with(idx as usize, |mlru| {
                    let list = &ListLruMemcg::of(mlru, owner)?.lists[nid];
                    // Relaxed: under the node lock, like the store of DEAD.
                    if list.nr_items.load(Ordering::Relaxed) == DEAD {
                        return None;
                    }
                    let guard = ListGuard {
                        _lock: held.take().expect("node lock held"),
                        view: ListView {
                            list,
                            links: &self.links,
                        },
                    };
                    Some((f.take().expect("called once"))(guard, owner))
                });
                if done.is_some() {
                    return done;
                }
            }
            if mode == Locate::SkipEmpty {
                return None;
            }
            if !owner.is_dying() && i32::from(owner.id()) == idx {
                // A live cgroup made before this list_lru: lists on first use.
                match mode {
                    Locate::Allocate => {
                        drop(held.take());
                        self.memcg_alloc(owner);
                        held = Some(lock(&self.nodes[nid].legacy_lock));
                        continue;
                    }
                    _ => return None,
                }
            }
            // The owner's lists are gone: its items were moved up.
            at = match owner.parent() {
                Some(parent) => parent,
                None => self.tree.root(),
            };
        }
    }

    /// The pre-series allocation: collect the ancestors lacking lists into
    /// an intermediate table, allocate, then store them topmost first.
    pub(super) fn memcg_alloc_legacy(&self, cg: &MemCgroup) {
        let mut table = Vec::with_capacity(cg.level() as usize);
        let mut at = Some(cg);
        while let Some(c) = at {
            if self.has_lists(c) {
                break;
            }
            table.push((c, Arc::new(ListLruMemcg::new(c, self))));
            at = c.parent().map(|p| &**p);
        }
        let _xa_lock = lock(&self.alloc_lock);
        for (c, lists) in table.into_iter().rev() {
            let idx = c.kmemcg_id();
            if idx >= 0 && !self.memcg.contains(idx as usize) {
                self.memcg.store(idx as usize, Some(lists));
            }
        }
    }

    pub(super) fn reparent_legacy(&self, cg: &MemCgroup, parent: &MemCgroup) {
        // The kmemcg_id redirect already happened (memcontrol's offline);
        // the cgroup's own lists are still at its id.
        let src_idx = usize::from(cg.id());
        // Under the allocation lock, as in `reparent_split`: the redirect is
        // stored, so an allocation that read the old index under the lock
        // has stored its lists (seen here) and a later one finds the
        // parent's index.
        let Some(mlru) = self.load_slot_locked(src_idx) else {
            return;
        };
        for (nid, src_list) in mlru.lists.iter().enumerate() {
            let src = ListView {
                list: src_list,
                links: &self.links,
            };
            self.with_list_legacy(nid, parent, Locate::Allocate, |dst, owner| {
                self.splice_into(nid, &src, &dst, owner);
                // Dead, not just empty: a removed descendant whose
                // kmemcg_id still names this cgroup (our tree unlinks dead
                // children, so the redirect cannot reach them, unlike the
                // kernel's) must not add to a list about to be erased.
                src_list.nr_items.store(DEAD, Ordering::Relaxed);
            });
        }
        let _xa_lock = lock(&self.alloc_lock);
        self.memcg.store(src_idx, None);
    }
}

/// The ancestor-or-self of `cg` whose id is `idx` (the owner of a legacy
/// list reached through a redirected `kmemcg_id`).
fn owner_with_id(cg: &MemCgroup, idx: i32) -> &MemCgroup {
    let mut at = cg;
    while i32::from(at.id()) != idx {
        match at.parent() {
            Some(parent) => at = parent,
            None => break,
        }
    }
    at
}
