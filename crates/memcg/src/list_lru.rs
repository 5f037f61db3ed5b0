//! Per-cgroup, per-node LRU lists that survive cgroup deletion
//! (mm/list_lru.c, Linux v6.14 plus the 2026 reparenting-order fix).
//!
//! A [`ListLru`] keeps, per NUMA node, a root list and, when memcg-aware,
//! one list per cgroup per node, so a shrinker can reclaim one cgroup's
//! objects (dentries, inodes, zswap entries) without touching anybody
//! else's. Items are the user's objects, named by an [`ItemId`] (an index
//! into the user's own table); the list_lru keeps their links.
//!
//! # Designs
//!
//! [`LruDesign::Split`] (default) is the kernel since the series "split the
//! list_lru lock to per-cgroup scope" and seed 002: every list has its own
//! lock, lists live in a sparse table indexed by the cgroup's stable id, and
//! a cgroup's lists are allocated top-down (the topmost ancestor lacking
//! lists first). [`LruDesign::Legacy`] is the design before it: one lock per
//! node covers every cgroup's list on that node, lists are indexed by
//! `kmemcg_id`, which offline redirects to the parent's, and allocation goes
//! through an intermediate table of the ancestors lacking lists.
//!
//! # Locating a list (split)
//!
//! Load the cgroup's slot (lock-free; the loaded value stays alive while the
//! guard is held, as under `rcu_read_lock`), lock its list, and use it unless
//! the slot was empty or the list is marked dead (`nr_items == i64::MIN`); in
//! that case unlock and retry with the parent, which is only legal for a
//! dying cgroup. Adds to a live cgroup without lists allocate them first.
//!
//! # Reparenting (offline of a cgroup)
//!
//! For every registered list_lru and node: lock the child's list, lock the
//! parent's list (located the same way), splice the child's items to the
//! head of the parent's (they are the oldest now, as `list_splice_init`
//! does), add the count, set the parent's shrinker bit, mark the child's
//! list dead; then erase the child's slot, and free it once no reader holds
//! it. Draining and marking dead *before* erasing is the 2026 fix: a `del`
//! that races the offline either finds the child's live list with the item
//! still on it, or the dead mark and then the parent, where the item now is.
//! (Erasing first, as v6.14 did, let such a `del` find no list, fall back to
//! the parent before the splice, and miss the item.)
//!
//! The reparent reads the child's slot under the allocation lock (the
//! kernel's xa lock, which seed 002 uses "as barrier"): the cgroup is
//! already dying, so an allocation that saw it alive under that lock has
//! stored its lists before the reparent looks, and any later one sees it
//! dying and stores nothing. Without the barrier a lazy first-use
//! allocation could store lists after the reparent looked, and the dying
//! cgroup kept lists whose items nobody would move (the legacy design
//! relies on the same lock with its `kmemcg_id` redirect in place of the
//! dying check).
//!
//! # Invariants and locking
//!
//! - An item is on at most one list; `on_list` says whether it is, and only
//!   a successful compare-and-swap of it may put an item on a list.
//! - Link fields of an item on a list are changed only under that list's
//!   lock (split) or its node's lock (legacy). They are atomics used with
//!   `Relaxed` ordering, the lock providing the ordering: a caller that
//!   breaks the contract below can corrupt lists logically, never memory.
//! - `nr_items` of a list changes only under its lock and is read without
//!   it (`count_one` clamps the dead mark to 0); the per-node total is an
//!   atomic updated after each change.
//! - Lock order: a child's list before its parent's (reparent); nothing
//!   takes two lists of unrelated cgroups.
//!
//! Caller contract (the kernel's): `del` names the cgroup the item was added
//! to, or an ancestor its lists were reparented to.
//!
//! # Cost
//!
//! `add`/`del` are O(1), reparenting is O(1) per list (one splice), counting
//! is lock-free. Memory per cgroup per list_lru: one `Arc` of one
//! [`ListOne`] per node (32 bytes each) plus the slot; item links cost 12
//! bytes per item id, allocated 256 ids at a time.

use std::fmt;

use crate::errno::Errno;
use crate::idr::{ChunkedTable, IdAllocator, IdTable};
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgLruHooks, ShrinkerId};
use crate::sync::{Arc, AtomicBool, AtomicI64, AtomicU32, Mutex, MutexGuard, Ordering, lock};

/// The user's name for an object on a list_lru: an index below
/// [`ListLruConfig::max_items`].
pub type ItemId = u32;

/// "No item": the end of a list.
const NONE: u32 = u32::MAX;

/// `nr_items` of a list whose cgroup was reparented (`LONG_MIN`).
const DEAD: i64 = i64::MIN;

/// Which list_lru implementation to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum LruDesign {
    /// Per-list locks, stable per-cgroup slots, dead-marking reparent
    /// (v6.14 + the 2026 fix).
    #[default]
    Split,
    /// One lock per node, `kmemcg_id` redirect, intermediate allocation table
    /// (before the series).
    Legacy,
}

// The baseline first: reports and charts list the designs in this order.
crate::named_enum!(LruDesign {
    Legacy => "legacy",
    Split => "split",
}, unknown: ListLruError = ListLruError::UnknownDesign);

/// Why a list_lru call was refused. Nothing changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListLruError {
    /// The node is not one of the tree's.
    #[error("node {nid} does not exist ({nr_nodes} nodes)")]
    NoSuchNode {
        /// The node asked for.
        nid: usize,
        /// Nodes there are.
        nr_nodes: usize,
    },
    /// The item id is beyond the list_lru's capacity.
    #[error("item {item} is beyond this list_lru's {max_items} items")]
    ItemOutOfRange {
        /// The item asked for.
        item: ItemId,
        /// Capacity.
        max_items: u32,
    },
    /// The cgroup belongs to another tree.
    #[error("cgroup {path} belongs to another cgroup tree")]
    ForeignCgroup {
        /// Its path.
        path: String,
    },
    /// No shrinker id was free.
    #[error("no free shrinker id")]
    NoShrinkerId,
    /// Item ids and list sentinels do not fit in 32 bits together.
    #[error("max_items {max_items} leaves no room for the list sentinels")]
    TooManyItems {
        /// The capacity asked for.
        max_items: u32,
    },
    /// A design name that is not `split` or `legacy`.
    #[error("unknown list_lru design {0:?} (expected split or legacy)")]
    UnknownDesign(String),
}

impl ListLruError {
    /// The matching errno.
    pub fn errno(&self) -> Errno {
        match self {
            ListLruError::NoShrinkerId => Errno::ENOSPC,
            _ => Errno::EINVAL,
        }
    }
}

/// How to build a [`ListLru`].
#[derive(Debug, Clone, Copy)]
pub struct ListLruConfig {
    /// Keep one list per cgroup (else everything is on the root lists).
    pub memcg_aware: bool,
    /// Item ids are `0..max_items`.
    pub max_items: u32,
    /// Which implementation.
    pub design: LruDesign,
}

impl Default for ListLruConfig {
    fn default() -> Self {
        Self {
            memcg_aware: true,
            max_items: 1 << 20,
            design: LruDesign::Split,
        }
    }
}

/// One item's links.
struct Link {
    prev: AtomicU32,
    next: AtomicU32,
    on_list: AtomicBool,
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
struct Sentinels(Mutex<IdAllocator>);

impl Sentinels {
    fn alloc(&self) -> u32 {
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
pub(crate) struct ListOne {
    lock: Mutex<()>,
    sentinel: u32,
    nr_items: AtomicI64,
}

impl ListOne {
    fn new(sentinel: u32, links: &ChunkedTable<Link>) -> Self {
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
    fn count(&self) -> usize {
        // Relaxed: a lockless snapshot, like READ_ONCE in the kernel.
        usize::try_from(self.nr_items.load(Ordering::Relaxed)).unwrap_or(0)
    }
}

/// A cgroup's lists, one per node (`list_lru_memcg`).
struct ListLruMemcg {
    /// The owner's serial: ids are reused once released, serials never, so
    /// a dead cgroup whose id now names another cgroup cannot mistake that
    /// cgroup's lists for its own.
    owner_serial: u64,
    lists: Box<[ListOne]>,
    sentinels: Arc<Sentinels>,
}

impl ListLruMemcg {
    fn new(owner: &MemCgroup, inner: &Inner) -> Self {
        Self {
            owner_serial: owner.serial(),
            lists: (0..inner.nodes.len())
                .map(|_| ListOne::new(inner.sentinels.alloc(), &inner.links))
                .collect(),
            sentinels: Arc::clone(&inner.sentinels),
        }
    }

    /// These lists if they belong to `cg`.
    fn of<'a>(this: Option<&'a Self>, cg: &MemCgroup) -> Option<&'a Self> {
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

/// Per node: the root list, the item total, and (legacy) the node lock.
struct LruNode {
    root: ListOne,
    nr_items: AtomicI64,
    legacy_lock: Mutex<()>,
}

/// The operations on a list whose lock (list or node) the holder has.
/// Every field access is `Relaxed`: the lock orders them.
#[derive(Clone, Copy)]
struct ListView<'a> {
    list: &'a ListOne,
    links: &'a ChunkedTable<Link>,
}

impl<'a> ListView<'a> {
    fn link(&self, id: u32) -> &'a Link {
        self.links
            .get(id as usize)
            .expect("a linked id has allocated links")
    }

    /// The sentinel: where iteration ends.
    fn end(&self) -> u32 {
        self.list.sentinel
    }

    fn next(&self, id: u32) -> u32 {
        self.link(id).next.load(Ordering::Relaxed)
    }

    fn prev(&self, id: u32) -> u32 {
        self.link(id).prev.load(Ordering::Relaxed)
    }

    /// The oldest item (the sentinel when empty).
    fn first(&self) -> u32 {
        self.next(self.end())
    }

    /// The newest item (the sentinel when empty).
    fn last(&self) -> u32 {
        self.prev(self.end())
    }

    fn nr_items(&self) -> i64 {
        self.list.nr_items.load(Ordering::Relaxed)
    }

    fn add_nr(&self, delta: i64) {
        self.list
            .nr_items
            .store(self.nr_items() + delta, Ordering::Relaxed);
    }

    fn push_tail(&self, item: ItemId) {
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
    fn unlink(&self, item: ItemId) {
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
    fn splice_to_head(&self, dst: &ListView<'_>) {
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
    fn contains(&self, item: ItemId) -> bool {
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

/// A locked list handed to a walk callback, with no current item (after the
/// callback isolated it). Dropping it unlocks the list.
pub struct ListGuard<'a> {
    _lock: MutexGuard<'a, ()>,
    view: ListView<'a>,
}

impl ListGuard<'_> {
    /// Items on this list now.
    pub fn nr_items(&self) -> usize {
        usize::try_from(self.view.nr_items()).unwrap_or(0)
    }
}

/// A locked list positioned on the item a walk callback was given. The
/// callback either hands it back ([`Walked::Rotate`], [`Walked::Skip`]),
/// isolates the item ([`ItemGuard::isolate`]), or drops it — unlocking the
/// list — and returns one of the variants that say so.
pub struct ItemGuard<'a> {
    list: ListGuard<'a>,
    item: ItemId,
}

impl<'a> ItemGuard<'a> {
    /// The current item.
    pub fn item(&self) -> ItemId {
        self.item
    }

    /// Items on this list now.
    pub fn nr_items(&self) -> usize {
        self.list.nr_items()
    }

    /// Takes the current item off the list (`list_lru_isolate`).
    pub fn isolate(self) -> (ListGuard<'a>, Isolated) {
        let view = self.list.view;
        view.unlink(self.item);
        view.add_nr(-1);
        // Release: pairs with the Acquire of the compare-and-swap in `add`,
        // so a later owner of the item sees it fully off this list.
        view.link(self.item).on_list.store(false, Ordering::Release);
        (self.list, Isolated { item: self.item })
    }

    /// Takes the current item off the list and pushes it on `dispose`
    /// (`list_lru_isolate_move`).
    pub fn isolate_move(self, dispose: &mut Vec<ItemId>) -> (ListGuard<'a>, Isolated) {
        dispose.push(self.item);
        self.isolate()
    }
}

/// Proof that a walk callback isolated its current item; only
/// [`ItemGuard::isolate`] makes one.
#[derive(Debug)]
pub struct Isolated {
    item: ItemId,
}

impl Isolated {
    /// The isolated item.
    pub fn item(&self) -> ItemId {
        self.item
    }
}

/// What a walk callback did (`enum lru_status`). The variants that keep the
/// list locked carry its guard; the others cannot, so the lock is provably
/// released when they are returned.
pub enum Walked<'a> {
    /// The item was isolated; the list is still locked (`LRU_REMOVED`).
    Removed(ListGuard<'a>, Isolated),
    /// The item was isolated and the lock dropped: restart the walk
    /// (`LRU_REMOVED_RETRY`).
    RemovedRetry(Isolated),
    /// The item was referenced: move it to the tail (`LRU_ROTATE`).
    Rotate(ItemGuard<'a>),
    /// Leave the item where it is (`LRU_SKIP`).
    Skip(ItemGuard<'a>),
    /// The lock was dropped without isolating: restart (`LRU_RETRY`).
    Retry,
    /// The lock was dropped: stop walking (`LRU_STOP`).
    Stop,
}

/// What to do when a cgroup has no usable list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Locate {
    /// `add`: give a live cgroup without lists its lists, then use them.
    Allocate,
    /// `del`: a live cgroup without lists cannot hold the item (`None`).
    Existing,
    /// walks: no fallback to the parent (`skip_empty`), `None`.
    SkipEmpty,
}

/// How one pass over a list ended.
enum WalkEnd {
    Done,
    Restart,
}

/// Per-cgroup, per-node LRU lists; see the module docs.
pub struct ListLru {
    inner: Arc<Inner>,
}

struct Inner {
    design: LruDesign,
    memcg_aware: bool,
    max_items: u32,
    tree: CgroupTree,
    nodes: Box<[LruNode]>,
    links: ChunkedTable<Link>,
    /// Split: by cgroup id. Legacy: by kmemcg_id.
    memcg: IdTable<ListLruMemcg>,
    /// Serialises stores to `memcg` (the xarray lock).
    alloc_lock: Mutex<()>,
    sentinels: Arc<Sentinels>,
    shrinker: Option<ShrinkerId>,
}

impl ListLru {
    /// A list_lru over `tree`'s cgroups and nodes. A memcg-aware one gets a
    /// shrinker id and is registered, so cgroups created from now on get
    /// lists at mkdir; cgroups that already exist get them on first use.
    pub fn new(tree: &CgroupTree, config: ListLruConfig) -> Result<Self, ListLruError> {
        let shrinker = if config.memcg_aware {
            Some(
                tree.alloc_shrinker_id()
                    .map_err(|_| ListLruError::NoShrinkerId)?,
            )
        } else {
            None
        };
        let nr_nodes = tree.nr_nodes();
        // One sentinel per list: the root lists, plus every cgroup's lists,
        // with room for lists of removed cgroups that in-flight readers
        // still hold.
        let max_lists = nr_nodes * (1 + 4 * (tree.max_ids() as usize + 1));
        let max_items = config.max_items as usize;
        let sentinel_base = u32::try_from(max_items).expect("max_items is a u32");
        let sentinel_last = u32::try_from(max_items + max_lists - 1)
            .ok()
            .filter(|&last| last < NONE)
            .ok_or(ListLruError::TooManyItems {
                max_items: config.max_items,
            })?;
        let links = ChunkedTable::new(max_items + max_lists);
        let sentinels = Arc::new(Sentinels(Mutex::new(IdAllocator::new(
            sentinel_base,
            sentinel_last,
        ))));
        let nodes = (0..nr_nodes)
            .map(|_| LruNode {
                root: ListOne::new(sentinels.alloc(), &links),
                nr_items: AtomicI64::new(0),
                legacy_lock: Mutex::new(()),
            })
            .collect();
        let inner = Arc::new(Inner {
            design: config.design,
            memcg_aware: config.memcg_aware,
            max_items: config.max_items,
            tree: tree.clone(),
            nodes,
            links,
            memcg: IdTable::new(tree.max_ids() as usize + 1),
            alloc_lock: Mutex::new(()),
            sentinels,
            shrinker,
        });
        if config.memcg_aware {
            tree.register_list_lru(Arc::clone(&inner) as Arc<dyn MemcgLruHooks>);
        }
        Ok(Self { inner })
    }

    /// The design in use.
    pub fn design(&self) -> LruDesign {
        self.inner.design
    }

    /// The shrinker id whose per-cgroup bits this list_lru sets.
    pub fn shrinker_id(&self) -> Option<ShrinkerId> {
        self.inner.shrinker
    }

    /// Adds `item` to the tail of `cg`'s list on node `nid`
    /// (`list_lru_add`); `false` if it already was on a list.
    pub fn add(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> Result<bool, ListLruError> {
        self.inner.check(item, nid, cg)?;
        Ok(self.inner.add(item, nid, cg))
    }

    /// Takes `item` off `cg`'s list on node `nid` (`list_lru_del`); `false`
    /// if it was on no list. `cg` is the cgroup the item was added to, or an
    /// ancestor it was reparented to.
    pub fn del(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> Result<bool, ListLruError> {
        self.inner.check(item, nid, cg)?;
        Ok(self.inner.del(item, nid, cg))
    }

    /// Items on `cg`'s list on node `nid`, without locking
    /// (`list_lru_count_one`); 0 for a cgroup without (live) lists.
    pub fn count_one(&self, nid: usize, cg: &MemCgroup) -> Result<usize, ListLruError> {
        self.inner.check(0, nid, cg)?;
        Ok(self.inner.count_one(nid, cg))
    }

    /// Items on node `nid` in every list (`list_lru_count_node`).
    pub fn count_node(&self, nid: usize) -> Result<usize, ListLruError> {
        self.inner.check_nid(nid)?;
        Ok(usize::try_from(self.inner.nodes[nid].nr_items.load(Ordering::Relaxed)).unwrap_or(0))
    }

    /// Walks `cg`'s list on node `nid` from the oldest item
    /// (`list_lru_walk_one`), calling `isolate` on each while `nr_to_walk`
    /// (decremented before each call) lasts. Returns the items isolated.
    pub fn walk_one<F>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        nr_to_walk: &mut usize,
        mut isolate: F,
    ) -> Result<usize, ListLruError>
    where
        F: for<'g> FnMut(ItemId, ItemGuard<'g>) -> Walked<'g>,
    {
        self.inner.check(0, nid, cg)?;
        Ok(self.inner.walk_one(nid, cg, nr_to_walk, &mut isolate))
    }

    /// Walks the root list of node `nid`, then every cgroup's list in id
    /// order, skipping cgroups whose id no longer resolves
    /// (`list_lru_walk_node`).
    pub fn walk_node<F>(
        &self,
        nid: usize,
        nr_to_walk: &mut usize,
        mut isolate: F,
    ) -> Result<usize, ListLruError>
    where
        F: for<'g> FnMut(ItemId, ItemGuard<'g>) -> Walked<'g>,
    {
        self.inner.check_nid(nid)?;
        let inner = &self.inner;
        let mut isolated = inner.walk_one(nid, inner.tree.root(), nr_to_walk, &mut isolate);
        if !inner.memcg_aware {
            return Ok(isolated);
        }
        let ids: Vec<usize> = inner.memcg.entries().map(|(id, _)| id).collect();
        for id in ids {
            if *nr_to_walk == 0 {
                break;
            }
            let Some(cg) = u16::try_from(id).ok().and_then(|id| inner.tree.lookup(id)) else {
                continue;
            };
            isolated += inner.walk_one(nid, &cg, nr_to_walk, &mut isolate);
        }
        Ok(isolated)
    }

    /// The items on `cg`'s own list on node `nid`, oldest first (O(n), for
    /// tests and tools); empty for a cgroup without live lists.
    pub fn items(&self, nid: usize, cg: &MemCgroup) -> Result<Vec<ItemId>, ListLruError> {
        self.inner.check(0, nid, cg)?;
        let mut out = Vec::new();
        let mut nr = usize::MAX;
        self.inner.walk_one(nid, cg, &mut nr, &mut |item, guard| {
            out.push(item);
            Walked::Skip(guard)
        });
        Ok(out)
    }

    /// Whether `cg` currently has lists in this list_lru.
    pub fn has_lists(&self, cg: &MemCgroup) -> bool {
        self.inner.has_lists(cg)
    }

    /// How many cgroups hold lists in this list_lru (every cgroup that had
    /// lists and was removed has given them up).
    pub fn nr_memcg_lists(&self) -> usize {
        self.inner.memcg.entries().count()
    }

    /// Bytes of the per-cgroup lists and their table (not item links).
    pub fn memcg_memory_bytes(&self) -> usize {
        let per_cgroup = size_of::<ListLruMemcg>()
            + 2 * size_of::<usize>()
            + self.inner.nodes.len() * size_of::<ListOne>();
        self.inner.memcg.entries().count() * per_cgroup + self.inner.memcg.memory_bytes()
    }

    /// Bytes one cgroup's lists cost in this list_lru (the `Arc`ed
    /// `list_lru_memcg` with one list per node, plus its table slot).
    pub fn bytes_per_cgroup(&self) -> usize {
        size_of::<ListLruMemcg>()
            + 2 * size_of::<usize>()
            + self.inner.nodes.len() * size_of::<ListOne>()
            + size_of::<crate::sync::ArcSlot<ListLruMemcg>>()
    }
}

impl Drop for ListLru {
    fn drop(&mut self) {
        if self.inner.memcg_aware {
            let hooks = Arc::clone(&self.inner) as Arc<dyn MemcgLruHooks>;
            self.inner.tree.unregister_list_lru(&hooks);
        }
        if let Some(id) = self.inner.shrinker {
            self.inner.tree.free_shrinker_id(id);
        }
    }
}

impl fmt::Debug for ListLru {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListLru")
            .field("design", &self.inner.design)
            .field("memcg_aware", &self.inner.memcg_aware)
            .field("nr_nodes", &self.inner.nodes.len())
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn check_nid(&self, nid: usize) -> Result<(), ListLruError> {
        if nid >= self.nodes.len() {
            return Err(ListLruError::NoSuchNode {
                nid,
                nr_nodes: self.nodes.len(),
            });
        }
        Ok(())
    }

    fn check(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> Result<(), ListLruError> {
        self.check_nid(nid)?;
        if item >= self.max_items {
            return Err(ListLruError::ItemOutOfRange {
                item,
                max_items: self.max_items,
            });
        }
        if !cg.belongs_to(&self.tree) {
            return Err(ListLruError::ForeignCgroup { path: cg.path() });
        }
        Ok(())
    }

    /// The root list view of node `nid`.
    fn root_view(&self, nid: usize) -> ListView<'_> {
        ListView {
            list: &self.nodes[nid].root,
            links: &self.links,
        }
    }

    /// Whether `cg` has lists (the root always does).
    fn has_lists(&self, cg: &MemCgroup) -> bool {
        if !self.memcg_aware || cg.is_root() {
            return true;
        }
        match self.design {
            LruDesign::Split => self
                .memcg
                .with(cg.id().into(), |m| ListLruMemcg::of(m, cg).is_some()),
            LruDesign::Legacy => {
                let idx = cg.kmemcg_id();
                idx < 0 || self.memcg.contains(idx as usize)
            }
        }
    }

    /// Calls `f` with `cg`'s list on `nid` locked and the cgroup that owns
    /// the list (`lock_list_lru_of_memcg`). A dying cgroup whose slot is
    /// empty or dead falls back to its parent; `mode` says what happens
    /// instead for walks (`skip_empty`) and for live cgroups without lists.
    fn with_list<R>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R> {
        match self.design {
            LruDesign::Split => self.with_list_split(nid, cg, mode, f),
            LruDesign::Legacy => self.with_list_legacy(nid, cg, mode, f),
        }
    }

    fn with_list_split<R>(
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

    fn with_list_legacy<R>(
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

    fn add(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> bool {
        let link = self
            .links
            .get_or_alloc(item as usize)
            .expect("checked against max_items");
        let added = self
            .with_list(nid, cg, Locate::Allocate, |guard, owner| {
                // AcqRel: claims the item (only one adder can win); Acquire
                // pairs with the Release in `del`/`isolate` of its last owner.
                if link
                    .on_list
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    return false;
                }
                guard.view.push_tail(item);
                let was = guard.view.nr_items();
                guard.view.add_nr(1);
                if was == 0
                    && let Some(shrinker) = self.shrinker
                {
                    owner.set_shrinker_bit(nid, shrinker);
                }
                true
            })
            .expect("falls back to the root, never empty");
        if added {
            // Relaxed: a statistic, read without ordering (count_node).
            self.nodes[nid].nr_items.fetch_add(1, Ordering::Relaxed);
        }
        added
    }

    fn del(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> bool {
        let Some(link) = self.links.get(item as usize) else {
            return false;
        };
        let removed = self
            .with_list(nid, cg, Locate::Existing, |guard, _| {
                // Acquire: pairs with the claim in `add`, so the links the
                // adder wrote are visible (the list lock orders them too).
                if !link.on_list.load(Ordering::Acquire) {
                    return false;
                }
                // Split: the located list is the item's (the fixed reparent
                // order guarantees it). Legacy: a del racing an offline may
                // locate the parent's list before the splice; the unlink
                // still takes the item off its real list, as in the kernel.
                debug_assert!(
                    self.design == LruDesign::Legacy
                        || guard.view.nr_items() > 4096
                        || guard.view.contains(item),
                    "list_lru_del: item {item} is not on {}'s list (caller contract)",
                    cg.path()
                );
                guard.view.unlink(item);
                guard.view.add_nr(-1);
                // Release: pairs with the Acquire of the claim in `add`.
                link.on_list.store(false, Ordering::Release);
                true
            })
            // None: a live cgroup that never had lists cannot hold the item.
            .unwrap_or(false);
        if removed {
            self.nodes[nid].nr_items.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    fn count_one(&self, nid: usize, cg: &MemCgroup) -> usize {
        if !self.memcg_aware || cg.is_root() {
            return self.nodes[nid].root.count();
        }
        let idx = match self.design {
            LruDesign::Split => usize::from(cg.id()),
            LruDesign::Legacy => match cg.kmemcg_id() {
                idx if idx < 0 => return self.nodes[nid].root.count(),
                idx => idx as usize,
            },
        };
        self.memcg
            .with(idx, |mlru| mlru.map_or(0, |m| m.lists[nid].count()))
    }

    fn walk_one<F>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        nr_to_walk: &mut usize,
        isolate: &mut F,
    ) -> usize
    where
        F: for<'g> FnMut(ItemId, ItemGuard<'g>) -> Walked<'g>,
    {
        let node_total = &self.nodes[nid].nr_items;
        let mut isolated = 0;
        loop {
            let end = self.with_list(nid, cg, Locate::SkipEmpty, |guard, _| {
                walk_list(guard, nr_to_walk, isolate, &mut isolated, node_total)
            });
            match end {
                None | Some(WalkEnd::Done) => return isolated,
                Some(WalkEnd::Restart) => continue,
            }
        }
    }

    /// Allocates lists for `cg` and every ancestor lacking them, topmost
    /// first; never for a dying cgroup (`memcg_list_lru_alloc`).
    fn memcg_alloc(&self, cg: &MemCgroup) {
        if !self.memcg_aware || self.has_lists(cg) {
            return;
        }
        match self.design {
            LruDesign::Split => self.memcg_alloc_split(cg),
            LruDesign::Legacy => self.memcg_alloc_legacy(cg),
        }
    }

    fn memcg_alloc_split(&self, cg: &MemCgroup) {
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

    /// The pre-series allocation: collect the ancestors lacking lists into
    /// an intermediate table, allocate, then store them topmost first.
    fn memcg_alloc_legacy(&self, cg: &MemCgroup) {
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

    fn reparent_split(&self, cg: &MemCgroup, parent: &MemCgroup) {
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

    /// The lists at `idx`, read under the allocation lock (see
    /// `reparent_split`).
    fn load_slot_locked(&self, idx: usize) -> Option<Arc<ListLruMemcg>> {
        let _xa_lock = lock(&self.alloc_lock);
        self.memcg.get(idx)
    }

    /// Moves every item of `src` (locked by the caller) to the head of
    /// `dst`, owned by `owner`, with the count and the shrinker bit.
    fn splice_into(&self, nid: usize, src: &ListView<'_>, dst: &ListGuard<'_>, owner: &MemCgroup) {
        let moved = src.nr_items();
        src.splice_to_head(&dst.view);
        if moved > 0 {
            dst.view.add_nr(moved);
            if let Some(shrinker) = self.shrinker {
                owner.set_shrinker_bit(nid, shrinker);
            }
        }
    }

    fn reparent_legacy(&self, cg: &MemCgroup, parent: &MemCgroup) {
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

impl MemcgLruHooks for Inner {
    fn memcg_alloc(&self, cg: &MemCgroup) {
        Inner::memcg_alloc(self, cg);
    }

    fn reparent(&self, cg: &MemCgroup, parent: &MemCgroup) {
        match self.design {
            LruDesign::Split => self.reparent_split(cg, parent),
            LruDesign::Legacy => self.reparent_legacy(cg, parent),
        }
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

/// One pass over a locked list (`__list_lru_walk_one`'s loop).
fn walk_list<'g, F>(
    mut guard: ListGuard<'g>,
    nr_to_walk: &mut usize,
    isolate: &mut F,
    isolated: &mut usize,
    node_total: &AtomicI64,
) -> WalkEnd
where
    F: for<'h> FnMut(ItemId, ItemGuard<'h>) -> Walked<'h>,
{
    let end = guard.view.end();
    let mut item = guard.view.first();
    while item != end {
        // Budget first, so a list of RETRY items cannot livelock us.
        if *nr_to_walk == 0 {
            return WalkEnd::Done;
        }
        *nr_to_walk -= 1;
        let next = guard.view.next(item);
        match isolate(item, ItemGuard { list: guard, item }) {
            Walked::Removed(list, token) => {
                assert_eq!(
                    token.item, item,
                    "Walked::Removed with another item's token"
                );
                *isolated += 1;
                node_total.fetch_sub(1, Ordering::Relaxed);
                guard = list;
            }
            Walked::RemovedRetry(token) => {
                assert_eq!(
                    token.item, item,
                    "Walked::RemovedRetry with another item's token"
                );
                *isolated += 1;
                node_total.fetch_sub(1, Ordering::Relaxed);
                return WalkEnd::Restart;
            }
            Walked::Rotate(current) => {
                assert_eq!(
                    current.item, item,
                    "Walked::Rotate with another item's guard"
                );
                let view = current.list.view;
                if view.last() != item {
                    view.unlink(item);
                    view.push_tail(item);
                }
                guard = current.list;
            }
            Walked::Skip(current) => {
                assert_eq!(current.item, item, "Walked::Skip with another item's guard");
                guard = current.list;
            }
            Walked::Retry => return WalkEnd::Restart,
            Walked::Stop => return WalkEnd::Done,
        }
        item = next;
    }
    WalkEnd::Done
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memcontrol::TreeConfig;

    fn setup(design: LruDesign, nr_nodes: usize) -> (CgroupTree, ListLru) {
        let tree = CgroupTree::new(TreeConfig {
            nr_nodes,
            max_ids: 64,
            ..TreeConfig::default()
        });
        let lru = ListLru::new(
            &tree,
            ListLruConfig {
                memcg_aware: true,
                max_items: 1024,
                design,
            },
        )
        .unwrap();
        (tree, lru)
    }

    fn skip_all(lru: &ListLru, nid: usize, cg: &MemCgroup) -> Vec<ItemId> {
        lru.items(nid, cg).unwrap()
    }

    #[test]
    fn add_del_count_every_design() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 2);
            let a = tree.mkdir("/a").unwrap();
            assert!(lru.has_lists(&a), "{design}: allocated at mkdir");
            assert!(lru.add(1, 0, &a).unwrap());
            assert!(!lru.add(1, 0, &a).unwrap(), "{design}: already on a list");
            assert!(
                !lru.add(1, 1, tree.root()).unwrap(),
                "{design}: on a list anywhere"
            );
            assert!(lru.add(2, 0, &a).unwrap());
            assert!(lru.add(3, 1, &a).unwrap());
            assert!(lru.add(4, 0, tree.root()).unwrap());
            assert_eq!(skip_all(&lru, 0, &a), [1, 2]);
            assert_eq!(lru.count_one(0, &a).unwrap(), 2);
            assert_eq!(lru.count_one(1, &a).unwrap(), 1);
            assert_eq!(lru.count_node(0).unwrap(), 3);
            assert!(a.shrinker_bit(0, lru.shrinker_id().unwrap()));
            assert!(lru.del(1, 0, &a).unwrap());
            assert!(!lru.del(1, 0, &a).unwrap());
            assert_eq!(lru.count_node(0).unwrap(), 2);
            assert_eq!(skip_all(&lru, 0, tree.root()), [4]);
        }
    }

    #[test]
    fn reparent_splices_to_the_parents_head_and_del_still_finds_items() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 1);
            let a = tree.mkdir("/a").unwrap();
            let b = tree.mkdir("/a/b").unwrap();
            lru.add(10, 0, &a).unwrap();
            lru.add(20, 0, &b).unwrap();
            lru.add(21, 0, &b).unwrap();
            let s = lru.shrinker_id().unwrap();
            a.clear_shrinker_bit(0, s);
            tree.rmdir("/a/b").unwrap();
            assert!(
                !lru.has_lists(&b) || design == LruDesign::Legacy,
                "{design}"
            );
            assert_eq!(
                skip_all(&lru, 0, &a),
                [20, 21, 10],
                "{design}: child's items first"
            );
            assert_eq!(lru.count_one(0, &a).unwrap(), 3);
            assert!(a.shrinker_bit(0, s), "{design}: bit moves with the items");
            // Add and del with the dead child go to the parent.
            assert!(lru.del(20, 0, &b).unwrap(), "{design}");
            assert!(lru.add(22, 0, &b).unwrap());
            assert_eq!(skip_all(&lru, 0, &a), [21, 10, 22]);
            tree.rmdir("/a").unwrap();
            assert_eq!(skip_all(&lru, 0, tree.root()), [21, 10, 22]);
            assert!(lru.del(21, 0, &b).unwrap(), "{design}: two levels up");
            assert_eq!(lru.count_node(0).unwrap(), 2);
        }
    }

    #[test]
    fn lists_are_allocated_top_down_on_first_use() {
        for design in LruDesign::ALL {
            let tree = CgroupTree::new(TreeConfig {
                nr_nodes: 1,
                max_ids: 64,
                ..TreeConfig::default()
            });
            let c = tree.mkdir_p("/a/b/c").unwrap();
            let lru = ListLru::new(
                &tree,
                ListLruConfig {
                    max_items: 64,
                    design,
                    ..Default::default()
                },
            )
            .unwrap();
            let b = tree.find("/a/b").unwrap();
            let a = tree.find("/a").unwrap();
            assert!(!lru.has_lists(&c) && !lru.has_lists(&a));
            lru.add(1, 0, &c).unwrap();
            assert!(
                lru.has_lists(&a) && lru.has_lists(&b) && lru.has_lists(&c),
                "{design}"
            );
            // A cgroup made after the list_lru gets lists at mkdir.
            let d = tree.mkdir("/a/d").unwrap();
            assert!(lru.has_lists(&d));
        }
    }

    #[test]
    fn walk_statuses() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 1);
            let a = tree.mkdir("/a").unwrap();
            for i in 0..6 {
                lru.add(i, 0, &a).unwrap();
            }
            // Isolate evens, rotate 1, skip 3, stop at 5 (lock dropped).
            let mut dispose = Vec::new();
            let mut budget = 100;
            let isolated = lru
                .walk_one(0, &a, &mut budget, |item, guard| match item {
                    5 => Walked::Stop,
                    1 => Walked::Rotate(guard),
                    3 => Walked::Skip(guard),
                    _ => {
                        let (list, token) = guard.isolate_move(&mut dispose);
                        Walked::Removed(list, token)
                    }
                })
                .unwrap();
            assert_eq!(isolated, 3, "{design}");
            assert_eq!(dispose, [0, 2, 4]);
            assert_eq!(budget, 100 - 6);
            assert_eq!(
                skip_all(&lru, 0, &a),
                [3, 5, 1],
                "{design}: 1 rotated to the tail"
            );
            assert_eq!(lru.count_one(0, &a).unwrap(), 3);
            assert_eq!(lru.count_node(0).unwrap(), 3);

            // RemovedRetry and Retry restart from the head; the budget bounds it.
            let mut budget = 2;
            let mut seen = Vec::new();
            lru.walk_one(0, &a, &mut budget, |item, guard| {
                seen.push(item);
                drop(guard);
                Walked::Retry
            })
            .unwrap();
            assert_eq!(seen, [3, 3]);
            let mut budget = 10;
            let isolated = lru
                .walk_one(0, &a, &mut budget, |_, guard| {
                    let (list, token) = guard.isolate();
                    drop(list);
                    Walked::RemovedRetry(token)
                })
                .unwrap();
            assert_eq!(isolated, 3);
            assert_eq!(lru.count_node(0).unwrap(), 0);
            assert!(
                lru.add(3, 0, &a).unwrap(),
                "isolated items can be added again"
            );
        }
    }

    #[test]
    fn walk_node_visits_root_then_cgroups_in_id_order() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 1);
            let a = tree.mkdir("/a").unwrap();
            let b = tree.mkdir("/b").unwrap();
            lru.add(7, 0, &b).unwrap();
            lru.add(5, 0, &a).unwrap();
            lru.add(9, 0, tree.root()).unwrap();
            let mut order = Vec::new();
            let mut budget = usize::MAX;
            lru.walk_node(0, &mut budget, |item, guard| {
                order.push(item);
                Walked::Skip(guard)
            })
            .unwrap();
            assert_eq!(order, [9, 5, 7], "{design}");
            let mut budget = 2;
            lru.walk_node(0, &mut budget, |_, guard| Walked::Skip(guard))
                .unwrap();
            assert_eq!(budget, 0);
        }
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let (tree, lru) = setup(LruDesign::Split, 2);
        let other = CgroupTree::default();
        assert_eq!(
            lru.add(1, 2, tree.root()),
            Err(ListLruError::NoSuchNode {
                nid: 2,
                nr_nodes: 2
            })
        );
        assert!(matches!(
            lru.add(5000, 0, tree.root()),
            Err(ListLruError::ItemOutOfRange { .. })
        ));
        assert!(matches!(
            lru.del(1, 0, other.root()),
            Err(ListLruError::ForeignCgroup { .. })
        ));
        assert!(lru.count_node(9).is_err());
        assert!("lockless".parse::<LruDesign>().is_err());
        assert_eq!(lru.del(3, 0, tree.root()), Ok(false), "never added");
    }

    #[test]
    fn not_memcg_aware_uses_root_lists_only() {
        let tree = CgroupTree::default();
        let a = tree.mkdir("/a").unwrap();
        let lru = ListLru::new(
            &tree,
            ListLruConfig {
                memcg_aware: false,
                max_items: 16,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(lru.shrinker_id().is_none());
        lru.add(1, 0, &a).unwrap();
        assert_eq!(lru.count_one(0, tree.root()).unwrap(), 1);
        assert_eq!(lru.count_one(0, &a).unwrap(), 1);
        tree.rmdir("/a").unwrap();
        assert!(lru.del(1, 0, &a).unwrap());
    }

    #[test]
    fn dropping_a_list_lru_unregisters_and_frees_its_shrinker() {
        let tree = CgroupTree::default();
        let first = ListLru::new(&tree, ListLruConfig::default()).unwrap();
        let id = first.shrinker_id();
        drop(first);
        let again = ListLru::new(&tree, ListLruConfig::default()).unwrap();
        assert_eq!(again.shrinker_id(), id, "id reused");
        tree.mkdir("/x").unwrap();
        tree.rmdir("/x").unwrap();
    }
}
