//! The index-linked lists a list_lru is made of (the kernel's `list_head`
//! and `list_lru_one`, over item ids instead of pointers).
//!
//! Every item and every list has a [`Link`] (previous, next, on a list?) in
//! one table indexed by id: item ids first, then one sentinel id per list
//! ([`Sentinels`]). A [`ListOne`] is a circular doubly linked list around its
//! sentinel, its item count and its lock; a [`ListLruMemcg`] is one
//! cgroup's set of lists, one per node. [`ListView`] is every operation on
//! a list whose lock the caller holds.
//!
//! # Invariants and locking
//!
//! - The links of an item on a list, and `nr_items` of a list, change only
//!   under the lock that covers that list: its own lock (split design) or
//!   its node's lock (legacy design). Links are atomics used `Relaxed`, the
//!   lock providing the ordering, so a caller that breaks the contract can
//!   corrupt lists logically, never memory.
//! - Unlinking an item touches only its neighbours, never the list, so an
//!   item can be taken off the list it is really on whichever list's lock
//!   covers it (the legacy design relies on that).
//! - A sentinel id is freed only when the last reader of its list is gone
//!   (`ListLruMemcg`'s `Drop`).

use crate::idr::{ChunkedTable, IdAllocator};
use crate::memcontrol::MemCgroup;
use crate::sync::{Arc, AtomicBool, AtomicI64, AtomicU32, Mutex, Ordering, lock};

use super::ItemId;

/// "No item": the end of a list.
pub(super) const NONE: u32 = u32::MAX;

/// One item's links.
pub(super) struct Link {
    prev: AtomicU32,
    next: AtomicU32,
    pub(super) on_list: AtomicBool,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            prev: AtomicU32::new(NONE),
            next: AtomicU32::new(NONE),
            on_list: AtomicBool::new(false),
        }
    }
}

/// Sentinel link ids, one per list, allocated after the item ids.
pub(super) struct Sentinels(Mutex<IdAllocator>);

impl Sentinels {
    /// Sentinel ids `first..=last`, all free.
    pub(super) fn new(first: u32, last: u32) -> Self {
        Self(Mutex::new(IdAllocator::new(first, last)))
    }

    pub(super) fn alloc(&self) -> u32 {
        lock(&self.0)
            .alloc()
            .expect("sentinels are sized for every list that can exist at once")
    }
}

/// One list (`list_lru_one`): a circular doubly linked list of item ids
/// threaded through the item links around the list's own sentinel link (as
/// the kernel's `list_head`), its count, and (split design) its lock.
/// Unlinking an item needs only its neighbours, never the list, which is
/// what lets a legacy `del` that raced an offline unlink the item from the
/// list it is really on, exactly as the kernel's `list_del_init` does.
pub(super) struct ListOne {
    pub(super) lock: Mutex<()>,
    sentinel: u32,
    pub(super) nr_items: AtomicI64,
}

impl ListOne {
    pub(super) fn new(sentinel: u32, links: &ChunkedTable<Link>) -> Self {
        let link = links
            .get_or_alloc(sentinel as usize)
            .expect("sentinel ids are inside the link table");
        // Relaxed: the list is published (table store or owner's creation)
        // after this, which orders these stores for every later user.
        link.prev.store(sentinel, Ordering::Relaxed);
        link.next.store(sentinel, Ordering::Relaxed);
        Self {
            lock: Mutex::new(()),
            sentinel,
            nr_items: AtomicI64::new(0),
        }
    }

    /// Items on the list, read without its lock (`count_one`): a dead list
    /// and transiently negative counts read as 0.
    pub(super) fn count(&self) -> usize {
        // Relaxed: a lockless snapshot, like READ_ONCE in the kernel.
        usize::try_from(self.nr_items.load(Ordering::Relaxed)).unwrap_or(0)
    }
}

/// A cgroup's lists, one per node (`list_lru_memcg`).
pub(super) struct ListLruMemcg {
    /// The owner's serial: ids are reused once released, serials never, so
    /// a dead cgroup whose id now names another cgroup cannot mistake that
    /// cgroup's lists for its own.
    pub(super) owner_serial: u64,
    pub(super) lists: Box<[ListOne]>,
    sentinels: Arc<Sentinels>,
}

impl ListLruMemcg {
    pub(super) fn new(
        owner: &MemCgroup,
        nr_nodes: usize,
        sentinels: &Arc<Sentinels>,
        links: &ChunkedTable<Link>,
    ) -> Self {
        Self {
            owner_serial: owner.serial(),
            lists: (0..nr_nodes)
                .map(|_| ListOne::new(sentinels.alloc(), links))
                .collect(),
            sentinels: Arc::clone(sentinels),
        }
    }

    /// These lists if they belong to `cg`.
    pub(super) fn of<'a>(this: Option<&'a Self>, cg: &MemCgroup) -> Option<&'a Self> {
        this.filter(|m| m.owner_serial == cg.serial())
    }
}

impl Drop for ListLruMemcg {
    fn drop(&mut self) {
        // The last reader is gone: nothing can reach these sentinels.
        let mut alloc = lock(&self.sentinels.0);
        for list in self.lists.iter() {
            alloc.free(list.sentinel);
        }
    }
}

/// The operations on a list whose lock (list or node) the holder has.
/// Every field access is `Relaxed`: the lock orders them.
#[derive(Clone, Copy)]
pub(super) struct ListView<'a> {
    pub(super) list: &'a ListOne,
    pub(super) links: &'a ChunkedTable<Link>,
}

impl<'a> ListView<'a> {
    pub(super) fn link(&self, id: u32) -> &'a Link {
        self.links
            .get(id as usize)
            .expect("a linked id has allocated links")
    }

    /// The sentinel: where iteration ends.
    pub(super) fn end(&self) -> u32 {
        self.list.sentinel
    }

    pub(super) fn next(&self, id: u32) -> u32 {
        self.link(id).next.load(Ordering::Relaxed)
    }

    pub(super) fn prev(&self, id: u32) -> u32 {
        self.link(id).prev.load(Ordering::Relaxed)
    }

    /// The oldest item (the sentinel when empty).
    pub(super) fn first(&self) -> u32 {
        self.next(self.end())
    }

    /// The newest item (the sentinel when empty).
    pub(super) fn last(&self) -> u32 {
        self.prev(self.end())
    }

    pub(super) fn nr_items(&self) -> i64 {
        self.list.nr_items.load(Ordering::Relaxed)
    }

    pub(super) fn add_nr(&self, delta: i64) {
        self.list
            .nr_items
            .store(self.nr_items() + delta, Ordering::Relaxed);
    }

    pub(super) fn push_tail(&self, item: ItemId) {
        let end = self.end();
        let last = self.last();
        let link = self.link(item);
        link.prev.store(last, Ordering::Relaxed);
        link.next.store(end, Ordering::Relaxed);
        self.link(last).next.store(item, Ordering::Relaxed);
        self.link(end).prev.store(item, Ordering::Relaxed);
    }

    /// Unlinks `item` from whatever list it is on (`list_del_init`): only
    /// its neighbours are touched.
    pub(super) fn unlink(&self, item: ItemId) {
        let link = self.link(item);
        let (prev, next) = (
            link.prev.load(Ordering::Relaxed),
            link.next.load(Ordering::Relaxed),
        );
        self.link(prev).next.store(next, Ordering::Relaxed);
        self.link(next).prev.store(prev, Ordering::Relaxed);
        link.prev.store(NONE, Ordering::Relaxed);
        link.next.store(NONE, Ordering::Relaxed);
    }

    /// Moves every item of `self` to the head of `dst` (`list_splice_init`).
    pub(super) fn splice_to_head(&self, dst: &ListView<'_>) {
        let (src_end, dst_end) = (self.end(), dst.end());
        let (first, last) = (self.first(), self.last());
        if first == src_end {
            return;
        }
        let dst_first = dst.first();
        self.link(dst_end).next.store(first, Ordering::Relaxed);
        self.link(first).prev.store(dst_end, Ordering::Relaxed);
        self.link(last).next.store(dst_first, Ordering::Relaxed);
        self.link(dst_first).prev.store(last, Ordering::Relaxed);
        self.link(src_end).next.store(src_end, Ordering::Relaxed);
        self.link(src_end).prev.store(src_end, Ordering::Relaxed);
    }

    /// Whether `item` is on this list (O(n); debug checks only).
    pub(super) fn contains(&self, item: ItemId) -> bool {
        let mut at = self.first();
        while at != self.end() {
            if at == item {
                return true;
            }
            at = self.next(at);
        }
        false
    }
}
