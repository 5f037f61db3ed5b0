//! The index-linked lists a list_lru is made of (the kernel's `list_head`
//! and `list_lru_one`, over item ids instead of pointers), and the table of
//! every cgroup's lists (`list_lru_memcg` in the kernel's `lru->xa`).
//!
//! Every item and every list has a [`Link`] (previous, next, on a list?) in
//! one table indexed by id: item ids first, then one sentinel id per list
//! (the root lists', then each cgroup id's, node by node). A [`ListOne`] is
//! a circular doubly linked list around its sentinel, its item count, the
//! serial of the cgroup it belongs to and its lock; a cgroup's set of lists,
//! one per node, is one boxed slice in [`MemcgLists`]. [`ListView`] is every
//! operation on a list whose lock the caller holds.
//!
//! # Type-stable list sets
//!
//! The kernel frees a `list_lru_memcg` after an RCU grace period; readers
//! find it under `rcu_read_lock()`. Here a set, once allocated for an id,
//! stays at that id until the list_lru is dropped (the kernel's
//! `SLAB_TYPESAFE_BY_RCU` idea): reparenting marks its lists dead, and the
//! next cgroup given the id claims the same set. A reader loads the set
//! (one `Acquire` load, inside `OnceLock::get`, that pairs with the
//! `Release` that published the set's first allocation), so no guard or
//! reference count is taken and nothing is ever freed under it; what it
//! loaded may have changed owner since, so it locks the list and only then
//! checks that the list is still the cgroup's and not dead
//! ([`ListOne::is_live_for`]).
//!
//! # Invariants and locking
//!
//! - The links of an item on a list, `nr_items` of a list and its `owner`
//!   change only under the lock that covers that list: its own lock (split
//!   design) or its node's lock (legacy design). Links are atomics used
//!   `Relaxed`, the lock providing the ordering, so a caller that breaks the
//!   contract can corrupt lists logically, never memory.
//! - A list is live (`nr_items >= 0`, items may be added) only while its
//!   owner is the cgroup that claimed it; reparenting empties it and marks
//!   it dead (`nr_items == DEAD`) before its id can be reused, and a claim
//!   sets the new owner and revives the empty list in one critical section.
//!   So a reader that holds the covering lock and sees its own cgroup's
//!   serial and no dead mark holds that cgroup's live list, whatever
//!   happened between its lookup and its lock.
//! - Unlinking an item touches only its neighbours, never the list, so an
//!   item can be taken off the list it is really on whichever list's lock
//!   covers it (the legacy design relies on that).
//! - Sets and their sentinel ids are never freed while the list_lru lives;
//!   they are dropped with its table, when the list_lru is.

use crate::idr::ChunkedTable;
use crate::memcontrol::MemCgroup;
#[cfg(not(loom))]
use crate::sync::OnceLock;
use crate::sync::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Mutex, Ordering};

use super::{DEAD, ItemId};

/// "No item": the end of a list.
pub(super) const NONE: u32 = u32::MAX;

/// The owner of a list no cgroup has claimed (serials count up from 0).
const NO_OWNER: u64 = u64::MAX;

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

/// One list (`list_lru_one`): a circular doubly linked list of item ids
/// threaded through the item links around the list's own sentinel link (as
/// the kernel's `list_head`), its count, its owner, and (split design) its
/// lock. Unlinking an item needs only its neighbours, never the list, which
/// is what lets a legacy `del` that raced an offline unlink the item from
/// the list it is really on, exactly as the kernel's `list_del_init` does.
pub(super) struct ListOne {
    pub(super) lock: Mutex<()>,
    /// The serial of the cgroup this list belongs to (ids are reused,
    /// serials never), or `NO_OWNER`; changes only with `nr_items`, under
    /// the covering lock (module docs).
    owner: AtomicU64,
    sentinel: u32,
    pub(super) nr_items: AtomicI64,
}

impl ListOne {
    /// An empty list around `sentinel`, owned by `owner` with `nr_items`.
    fn with_state(sentinel: u32, links: &ChunkedTable<Link>, owner: u64, nr_items: i64) -> Self {
        let link = links
            .get_or_alloc(sentinel as usize)
            .expect("sentinel ids are inside the link table");
        // Relaxed: the list is published (the set's `OnceLock`, or the
        // list_lru's creation for a root list) after this, which orders
        // these stores for every later user.
        link.prev.store(sentinel, Ordering::Relaxed);
        link.next.store(sentinel, Ordering::Relaxed);
        Self {
            lock: Mutex::new(()),
            owner: AtomicU64::new(owner),
            sentinel,
            nr_items: AtomicI64::new(nr_items),
        }
    }

    /// A root list: live, owned by no cgroup (nothing checks a root list's
    /// owner).
    pub(super) fn new_root(sentinel: u32, links: &ChunkedTable<Link>) -> Self {
        Self::with_state(sentinel, links, NO_OWNER, 0)
    }

    /// Items on the list, read without its lock (`count_one`): a dead list
    /// and transiently negative counts read as 0.
    pub(super) fn count(&self) -> usize {
        // Relaxed: a lockless snapshot, like READ_ONCE in the kernel.
        usize::try_from(self.nr_items.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Whether the list is marked dead (reparented, not claimed since).
    /// Exact under the covering lock, a snapshot without it.
    pub(super) fn is_dead(&self) -> bool {
        // Relaxed: the covering lock orders it against the stores in
        // `mark_dead`/`claim` (module docs); a lockless caller wants a
        // snapshot.
        self.nr_items.load(Ordering::Relaxed) == DEAD
    }

    /// Whether this is `cg`'s live list: the re-check a reader makes after
    /// taking the covering lock (module docs). Without the lock, a
    /// snapshot.
    #[inline]
    pub(super) fn is_live_for(&self, cg: &MemCgroup) -> bool {
        // Relaxed: under the covering lock, which orders it against the
        // owner store in `claim` (same critical section as the revive).
        self.owner.load(Ordering::Relaxed) == cg.serial() && !self.is_dead()
    }

    /// Gives this dead (or never claimed), empty list to `owner` and makes
    /// it live: owner and count change in one critical section of the
    /// covering lock, which the caller holds.
    pub(super) fn claim(&self, owner: &MemCgroup) {
        debug_assert!(self.is_dead(), "claiming a live list");
        // Relaxed: under the covering lock; a reader that takes it after
        // this sees both stores, one that took it before saw the dead mark.
        self.owner.store(owner.serial(), Ordering::Relaxed);
        self.nr_items.store(0, Ordering::Relaxed);
    }

    /// Marks this emptied list dead (reparenting); the caller holds the
    /// covering lock.
    pub(super) fn mark_dead(&self) {
        // Relaxed: under the covering lock, like every nr_items store.
        self.nr_items.store(DEAD, Ordering::Relaxed);
    }
}

/// Every cgroup's lists, one set (a boxed slice of one [`ListOne`] per
/// node) per id, type-stable while the list_lru lives (module docs).
///
/// A set is allocated when its id first gets lists and is never freed or
/// replaced before the table is dropped. Under loom every set exists from
/// the start (dead, unowned): models use a handful of ids, and the one-time
/// publication is `std::sync::OnceLock`'s, which needs no model (as for
/// [`ChunkedTable`]'s chunks); what the models check is the claim, the dead
/// mark and the re-check under the lock.
pub(super) struct MemcgLists {
    #[cfg(not(loom))]
    sets: ChunkedTable<OnceLock<Box<[ListOne]>>>,
    #[cfg(loom)]
    sets: Box<[Box<[ListOne]>]>,
    nr_nodes: usize,
    /// The sentinel id of node 0's list of id 0 (for sets made on first
    /// claim; under loom they are all made up front).
    #[cfg(not(loom))]
    first_sentinel: u32,
}

impl MemcgLists {
    /// Bytes one id's slot in the table costs.
    #[cfg(not(loom))]
    pub(super) const SLOT_BYTES: usize = size_of::<OnceLock<Box<[ListOne]>>>();
    /// Bytes one id's slot in the table costs.
    #[cfg(loom)]
    pub(super) const SLOT_BYTES: usize = size_of::<Box<[ListOne]>>();

    /// A table for ids `0..nr_ids` whose lists use the sentinel ids
    /// `first_sentinel..first_sentinel + nr_ids * nr_nodes`.
    #[cfg_attr(not(loom), allow(unused_variables))]
    pub(super) fn new(
        nr_ids: usize,
        nr_nodes: usize,
        first_sentinel: u32,
        links: &ChunkedTable<Link>,
    ) -> Self {
        Self {
            #[cfg(not(loom))]
            sets: ChunkedTable::new(nr_ids),
            #[cfg(loom)]
            sets: (0..nr_ids)
                .map(|id| new_set(id, nr_nodes, first_sentinel, links))
                .collect(),
            nr_nodes,
            #[cfg(not(loom))]
            first_sentinel,
        }
    }

    /// The set at `id`, if one was ever allocated: whoever owns it now, and
    /// live or dead (a reader checks under the lock, module docs).
    #[inline]
    pub(super) fn get(&self, id: usize) -> Option<&[ListOne]> {
        #[cfg(not(loom))]
        {
            // Acquire (inside `OnceLock::get`): pairs with the Release that
            // published the set in `get_or_alloc`, so its lists, locks and
            // sentinel links are initialised for us.
            self.sets.get(id)?.get().map(|set| &**set)
        }
        #[cfg(loom)]
        {
            self.sets.get(id).map(|set| &**set)
        }
    }

    /// The set at `id`, allocating it (dead, unowned) if there is none.
    /// Safe without the allocation lock (the `OnceLock` initialises a slot
    /// once); only claims need that lock.
    ///
    /// # Panics
    /// If `id` is outside the table (ids are checked against the tree's).
    pub(super) fn get_or_alloc(&self, id: usize, links: &ChunkedTable<Link>) -> &[ListOne] {
        #[cfg(not(loom))]
        {
            let slot = self.sets.get_or_alloc(id).expect("ids fit the table");
            // Release (inside `OnceLock`): pairs with the Acquire in `get`.
            slot.get_or_init(|| new_set(id, self.nr_nodes, self.first_sentinel, links))
        }
        #[cfg(loom)]
        {
            let _ = links;
            &self.sets[id]
        }
    }

    /// Whether the set at `id` is live (claimed and not reparented since),
    /// whoever owns it; lockless. A claim revives the last node's list
    /// last and a reparent marks it dead last, so a set counts as live
    /// from the end of its claim to the end of its reparent.
    pub(super) fn is_live(&self, id: usize) -> bool {
        self.get(id)
            .is_some_and(|set| !set[self.nr_nodes - 1].is_dead())
    }

    /// Whether the set at `id` is `cg`'s and live; lockless (see
    /// [`MemcgLists::is_live`]).
    pub(super) fn is_live_for(&self, id: usize, cg: &MemCgroup) -> bool {
        self.get(id)
            .is_some_and(|set| set[self.nr_nodes - 1].is_live_for(cg))
    }

    /// Every id whose set is live, in increasing order.
    pub(super) fn live_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.allocated()
            .filter_map(|(id, set)| (!set[self.nr_nodes - 1].is_dead()).then_some(id))
    }

    /// Every allocated set with its id, in id order.
    fn allocated(&self) -> impl Iterator<Item = (usize, &[ListOne])> {
        #[cfg(not(loom))]
        {
            self.sets
                .iter()
                .filter_map(|(id, slot)| slot.get().map(|set| (id, &**set)))
        }
        #[cfg(loom)]
        {
            self.sets.iter().enumerate().map(|(id, set)| (id, &**set))
        }
    }

    /// Bytes of the table and every set allocated (live or kept for reuse).
    #[cfg(test)]
    pub(super) fn memory_bytes(&self) -> usize {
        #[cfg(not(loom))]
        let table = self.sets.memory_bytes();
        #[cfg(loom)]
        let table = self.sets.len() * Self::SLOT_BYTES;
        table + self.allocated().count() * self.nr_nodes * size_of::<ListOne>()
    }
}

/// A dead, unowned set of `nr_nodes` lists for `id`.
fn new_set(
    id: usize,
    nr_nodes: usize,
    first_sentinel: u32,
    links: &ChunkedTable<Link>,
) -> Box<[ListOne]> {
    (0..nr_nodes)
        .map(|nid| {
            let sentinel = (id * nr_nodes + nid)
                .try_into()
                .ok()
                .and_then(|offset: u32| first_sentinel.checked_add(offset))
                .expect("sentinel ids fit (checked when the list_lru was made)");
            ListOne::with_state(sentinel, links, NO_OWNER, DEAD)
        })
        .collect()
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
