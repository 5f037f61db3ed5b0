//! Per-cgroup, per-node LRU lists that survive cgroup deletion
//! (mm/list_lru.c, Linux v6.14 plus the 2026 reparenting-order fix).
//!
//! A [`ListLru`] keeps, per NUMA node, a root list and, when memcg-aware,
//! one list per cgroup per node, so a shrinker can reclaim one cgroup's
//! objects (dentries, inodes, zswap entries) without touching anybody
//! else's. Items are the user's objects, named by an [`ItemId`] (an index
//! into the user's own table); the list_lru keeps their links.
//!
//! # Using it
//!
//! An [`ItemId`] is your index: keep your objects in your own table and
//! name them by their position in it, below
//! [`ListLruConfig::max_items`] (2^20 by default; links for ids are
//! allocated as ids are first used). Each item is on at most one list at
//! a time. Lists are per node (`nid`, below the tree's
//! [`nr_nodes`](CgroupTree::nr_nodes)) and, in a memcg-aware list_lru
//! (the default), per memory cgroup; removing a cgroup moves its items to
//! its parent's list. A cache frees objects by walking a cgroup's list
//! from the oldest item, typically from a [`Shrinker`](crate::shrinker::Shrinker)
//! registered with [`register_shrinker`](crate::shrinker::register_shrinker)
//! under [`ListLru::shrinker_id`], so that reclaim asks it for the memory
//! cgroups that have items (see `examples/tenant_cache.rs`).
//!
//! ```
//! use memcg::list_lru::{ListLru, ListLruConfig, Walked};
//! use memcg::memcontrol::CgroupTree;
//!
//! let tree = CgroupTree::default();
//! let tenants = tree.mkdir("/tenants")?.memcg().unwrap();
//! let a = tree.mkdir("/tenants/a")?.memcg().unwrap();
//! let b = tree.mkdir("/tenants/b")?.memcg().unwrap();
//!
//! // The objects: item `i` is `names[i]`.
//! let names = ["a0", "a1", "a2", "b0"];
//! let config = ListLruConfig { max_items: names.len() as u32, ..ListLruConfig::default() };
//! let lru = ListLru::new(&tree, config)?;
//! for item in 0..3 {
//!     assert!(lru.add(item, 0, &a)?); // node 0, a's list, at the tail
//! }
//! assert!(lru.add(3, 0, &b)?);
//! assert!(!lru.add(3, 0, &a)?, "already on a list");
//! assert!(lru.add(4, 0, &a).is_err(), "beyond max_items");
//! assert_eq!((lru.count_one(0, &a)?, lru.count_node(0)?), (3, 4));
//!
//! // Removing tenant a moves its items to the parent's list.
//! tree.rmdir("/tenants/a")?;
//! assert_eq!(lru.count_one(0, &tenants)?, 3);
//! assert_eq!(lru.count_one(0, &a)?, 0);
//! // `del` names the cgroup the item was added to (dying or not) or the
//! // ancestor it moved to.
//! assert!(lru.del(1, 0, &a)?);
//!
//! // A walk from the oldest item: isolate what to free, rotate the rest.
//! let mut dispose = Vec::new();
//! let mut nr_to_walk = 16;
//! let isolated = lru.walk_one(0, &tenants, &mut nr_to_walk, |item, guard| {
//!     if names[item as usize] == "a2" {
//!         return Walked::Rotate(guard); // still in use: to the tail
//!     }
//!     let (list, isolated) = guard.isolate_move(&mut dispose);
//!     Walked::Removed(list, isolated)
//! })?;
//! assert_eq!((isolated, dispose), (1, vec![0])); // "a0" to free
//! assert_eq!(lru.items(0, &tenants)?, vec![2]);
//! assert_eq!(lru.items(0, &b)?, vec![3]); // b's list untouched
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
//! One file per part: this one is the public surface and what both designs
//! share (adding, deleting, counting, walking); `list.rs` the index-linked
//! lists; `split.rs` and `legacy.rs` one design each (locating a cgroup's
//! list, allocating lists, reparenting), both implementing the private
//! `Design` trait. [`ListLru::new`] picks the design once (`Locator`), and
//! every operation dispatches to it once, through the one `match` in
//! `dispatch!`.
//!
//! # Locating a list (split)
//!
//! Load the set of lists at the cgroup's id (one `Acquire` load, no guard
//! and no reference count: sets are type-stable, never freed or moved
//! while the list_lru lives, the kernel's `SLAB_TYPESAFE_BY_RCU` idea),
//! lock the node's list in it, and only then check that the list still
//! belongs to the cgroup (its owner serial) and is not marked dead
//! (`nr_items == i64::MIN`). Between the load and the lock the cgroup may
//! have been reparented and its id, with the set, given to a new cgroup;
//! the check under the lock is what tells. If there was no set, or the
//! list is dead or another cgroup's, unlock and retry with the parent,
//! which is only legal for a dying cgroup. Adds to a live cgroup without
//! lists allocate them first.
//!
//! # Reparenting (offline of a cgroup)
//!
//! For every registered list_lru and node: lock the child's list, lock the
//! parent's list (located the same way), splice the child's items to the
//! head of the parent's (they are the oldest now, as `list_splice_init`
//! does), add the count, set the parent's shrinker bit, and mark the
//! child's list dead before unlocking it. The dead set stays at the id
//! until the id's next cgroup claims it (owner and revival in one critical
//! section of each list's lock). Draining and marking dead *before* the
//! lists can be found empty is the 2026 fix: a `del` that races the offline
//! either finds the child's live list with the item still on it, or the
//! dead mark (or, after the id's reuse, another owner) and then the
//! parent, where the item now is. (Erasing first, as v6.14 did, let such a
//! `del` find no list, fall back to the parent before the splice, and miss
//! the item.)
//!
//! The reparent reads the child's set under the allocation lock (the
//! kernel's xa lock, which seed 002 uses "as barrier"): the cgroup is
//! already dying, so an allocation that saw it alive under that lock has
//! claimed its lists before the reparent looks, and any later one sees it
//! dying and claims nothing. Without the barrier a lazy first-use
//! allocation could claim lists after the reparent looked, and the dying
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
//! - `nr_items` and the owner serial of a list change only under that same
//!   lock, and a list is used only after both were checked under it (live,
//!   and the locating cgroup's); `nr_items` is read without it too
//!   (`count_one` clamps the dead mark to 0).
//! - A list set, once allocated for an id, is only ever that id's: claimed
//!   by each cgroup that gets the id, marked dead at its offline, freed
//!   with the list_lru.
//! - The per-node total is a few cache-padded shards, each thread adding
//!   to its own after each change and `count_node` summing them.
//! - Lock order: a child's list before its parent's (reparent); nothing
//!   takes two lists of unrelated cgroups. A claim takes the lists of a
//!   dead set (split) or the node locks (legacy) under the allocation lock;
//!   a split reparent may take the allocation lock while it holds the
//!   child's live list (to give the parent lists), which no claim takes:
//!   only dead sets are claimed.
//!
//! Caller contract (the kernel's): `del` names the cgroup the item was added
//! to, or an ancestor its lists were reparented to.
//!
//! # Cost
//!
//! `add`/`del` are O(1), reparenting is O(1) per list (one splice), counting
//! is lock-free. Memory per cgroup id ever used, per list_lru: one set of
//! one `ListOne` per node (32 bytes each) in one allocation, plus the
//! table slot; item links cost 12 bytes per item id, allocated 256 ids at a
//! time.

use std::fmt;

mod legacy;
mod list;
mod split;

use crate::errno::Errno;
use crate::idr::ChunkedTable;
use crate::memcontrol::{CgroupTree, MemCgroup, MemcgLruHooks, ShrinkerId};
use crate::percpu::this_cpu;
use crate::sync::{Arc, AtomicI64, CachePadded, Mutex, MutexGuard, Ordering, lock};

use legacy::LegacyState;
use list::{Link, ListOne, ListView, MemcgLists, NONE};
use split::SplitState;

/// The user's name for an object on a list_lru: an index into the user's
/// own table of objects, below [`ListLruConfig::max_items`] (module docs).
pub type ItemId = u32;

/// `nr_items` of a list whose cgroup was reparented (`LONG_MIN`).
const DEAD: i64 = i64::MIN;

/// The longest list on which `del` checks, in debug builds, that the list
/// it located holds the item: the check walks the list (O(n)), which on
/// longer lists would make deleting every item quadratic.
const DEL_CHECK_MAX_ITEMS: i64 = 4096;

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
    /// Item ids are `0..max_items` (default 2^20): the size of the
    /// user's table the ids index.
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

/// Per node: the root list and the item total of every list on the node.
struct LruNode {
    root: ListOne,
    nr_items: NodeTotal,
}

/// Shards of a node's item total (`nlru->nr_items`, one atomic in the
/// kernel): each add or delete changes the shard of its thread
/// ([`this_cpu`]), so threads adding to different cgroups do not
/// write one shared line; [`NodeTotal::sum`] adds them up. A shard may go
/// negative (an item added by one thread and deleted by another); the sum
/// is exact whenever no update is in flight.
struct NodeTotal {
    shards: [CachePadded<AtomicI64>; NODE_TOTAL_SHARDS],
}

/// Shards per node total: enough for the threads of a small machine to
/// rarely share one; each costs a cache line per node per list_lru.
const NODE_TOTAL_SHARDS: usize = 8;

impl NodeTotal {
    fn new() -> Self {
        Self {
            shards: std::array::from_fn(|_| CachePadded(AtomicI64::new(0))),
        }
    }

    /// Adds `delta` to the calling thread's shard.
    #[inline]
    fn add(&self, delta: i64) {
        let shard = &self.shards[this_cpu() % NODE_TOTAL_SHARDS];
        // Relaxed: a statistic, read without ordering (`sum`).
        shard.fetch_add(delta, Ordering::Relaxed);
    }

    /// The total (`list_lru_count_node`), clamped at 0 as the kernel's
    /// lockless counts are.
    fn sum(&self) -> usize {
        // Relaxed: a statistic; each shard's value is a snapshot, as the
        // single atomic's was.
        let total: i64 = self.shards.iter().map(|s| s.load(Ordering::Relaxed)).sum();
        usize::try_from(total).unwrap_or(0)
    }
}

/// A locked list handed to a walk callback, with no current item (after the
/// callback isolated it). Dropping it unlocks the list.
pub struct ListGuard<'a> {
    _lock: MutexGuard<'a, ()>,
    view: ListView<'a>,
}

impl ListGuard<'_> {}

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

/// What a design provides, one file each (`split.rs`, `legacy.rs`): how a
/// cgroup's list is found and locked, how lists are allocated, how they are
/// reparented. Every method gets the parts both designs share.
trait Design {
    /// Which design this is.
    fn design(&self) -> LruDesign;

    /// Whether `cg`, not the root, has lists in a memcg-aware list_lru.
    fn has_memcg_lists(&self, shared: &Shared, cg: &MemCgroup) -> bool;

    /// [`Design::has_memcg_lists`], its last check made under the lock
    /// that covers `cg`'s last list (what [`ListLru::has_lists`] reports).
    fn has_memcg_lists_locked(&self, shared: &Shared, cg: &MemCgroup) -> bool;

    /// Items on the list `cg`, not the root, uses on node `nid` of a
    /// memcg-aware list_lru, read without locking.
    fn count_memcg(&self, shared: &Shared, nid: usize, cg: &MemCgroup) -> usize;

    /// Calls `f` with `cg`'s list on `nid` locked and the cgroup that owns
    /// the list (`lock_list_lru_of_memcg`). A dying cgroup whose lists are
    /// gone or dead falls back to its parent; `mode` says what happens
    /// instead for walks (`skip_empty`) and for live cgroups without lists.
    fn with_list<R>(
        &self,
        shared: &Shared,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R>;

    /// Allocates lists for `cg`, which lacks them, and for every ancestor
    /// lacking them, topmost first.
    fn alloc_lists(&self, shared: &Shared, cg: &MemCgroup);

    /// `cg` is going offline: moves its items to `parent`'s lists and drops
    /// its own.
    fn reparent(&self, shared: &Shared, cg: &MemCgroup, parent: &MemCgroup);

    /// Whether `cg` has lists (the root always does).
    fn has_lists(&self, shared: &Shared, cg: &MemCgroup) -> bool {
        !shared.memcg_aware || cg.is_root() || self.has_memcg_lists(shared, cg)
    }

    /// Items on the list `cg` uses on node `nid`, read without locking.
    fn count_one(&self, shared: &Shared, nid: usize, cg: &MemCgroup) -> usize {
        if !shared.memcg_aware || cg.is_root() {
            return shared.nodes[nid].root.count();
        }
        self.count_memcg(shared, nid, cg)
    }

    /// Gives `cg` lists if it lacks them (`memcg_list_lru_alloc`).
    fn memcg_alloc(&self, shared: &Shared, cg: &MemCgroup) {
        if !self.has_lists(shared, cg) {
            self.alloc_lists(shared, cg);
        }
    }
}

/// The design a list_lru uses, with that design's own state; built once in
/// [`ListLru::new`].
enum Locator {
    Split(SplitState),
    Legacy(LegacyState),
}

impl Locator {
    fn new(design: LruDesign, nr_nodes: usize, max_ids: usize) -> Self {
        match design {
            LruDesign::Split => Locator::Split(SplitState),
            LruDesign::Legacy => Locator::Legacy(LegacyState::new(nr_nodes, max_ids)),
        }
    }
}

/// Runs `$body` with `$design` bound to the [`Locator`]'s design: the one
/// place a design is chosen. A `match` rather than `dyn Design`, because
/// `with_list` is generic and each arm can then be inlined (as
/// swap_cgroup's `dispatch!`).
macro_rules! dispatch {
    ($locator:expr, $design:ident => $body:expr) => {
        match $locator {
            Locator::Split($design) => $body,
            Locator::Legacy($design) => $body,
        }
    };
}

/// Per-cgroup, per-node LRU lists; see the module docs.
pub struct ListLru {
    inner: Arc<Inner>,
}

/// A list_lru as the cgroup tree holds it (registered for allocation and
/// reparenting): the shared parts and the design.
struct Inner {
    shared: Shared,
    locator: Locator,
}

/// What both designs share: the root lists, the item links, the table of
/// per-cgroup lists and the lock its stores take.
struct Shared {
    memcg_aware: bool,
    max_items: u32,
    tree: CgroupTree,
    nodes: Box<[LruNode]>,
    links: ChunkedTable<Link>,
    /// Split: by cgroup id. Legacy: by the cgroup's list index.
    memcg: MemcgLists,
    /// Serialises claims of `memcg`'s sets (the xarray lock).
    alloc_lock: Mutex<()>,
    /// The tree's id space, as a tag: what `check` compares a cgroup's with.
    id_space: usize,
    shrinker: Option<ShrinkerId>,
    /// Whether the shrinker id is this list_lru's to free (not one shared
    /// with another list_lru, [`ListLru::sharing_shrinker`]).
    owns_shrinker: bool,
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
        Self::with_shrinker(tree, config, shrinker, true)
    }

    /// A memcg-aware list_lru whose cgroups' shrinker bits are those of
    /// `other`'s id (`list_lru_init_memcg` with a superblock's one
    /// shrinker for its dentry and inode lists): one shrinker serves both.
    /// `other` must outlive it.
    pub fn sharing_shrinker(
        tree: &CgroupTree,
        config: ListLruConfig,
        other: &ListLru,
    ) -> Result<Self, ListLruError> {
        let shrinker = other.shrinker_id().ok_or(ListLruError::NoShrinkerId)?;
        let config = ListLruConfig {
            memcg_aware: true,
            ..config
        };
        Self::with_shrinker(tree, config, Some(shrinker), false)
    }

    fn with_shrinker(
        tree: &CgroupTree,
        config: ListLruConfig,
        shrinker: Option<ShrinkerId>,
        owns_shrinker: bool,
    ) -> Result<Self, ListLruError> {
        let shared = Shared::new(tree, &config, shrinker, owns_shrinker).inspect_err(|_| {
            // Refused: the id goes back, as the kernel's
            // `list_lru_init_memcg` unwinds `register_shrinker`.
            if let Some(id) = shrinker.filter(|_| owns_shrinker) {
                tree.free_shrinker_id(id);
            }
        })?;
        let locator = Locator::new(config.design, tree.nr_nodes(), tree.max_ids() as usize);
        let inner = Arc::new(Inner { shared, locator });
        if config.memcg_aware {
            tree.register_list_lru(Arc::clone(&inner) as Arc<dyn MemcgLruHooks>);
        }
        Ok(Self { inner })
    }

    /// The design in use.
    pub fn design(&self) -> LruDesign {
        self.inner.design()
    }

    /// The shrinker id whose per-cgroup bits this list_lru sets.
    pub fn shrinker_id(&self) -> Option<ShrinkerId> {
        self.inner.shared.shrinker
    }

    /// Adds `item` to the tail of `cg`'s list on node `nid`
    /// (`list_lru_add`); `false` if it already was on a list.
    pub fn add(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> Result<bool, ListLruError> {
        self.inner.shared.check(item, nid, cg)?;
        Ok(self.inner.add(item, nid, cg))
    }

    /// Takes `item` off `cg`'s list on node `nid` (`list_lru_del`); `false`
    /// if it was on no list. `cg` is the cgroup the item was added to, or an
    /// ancestor it was reparented to.
    pub fn del(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> Result<bool, ListLruError> {
        self.inner.shared.check(item, nid, cg)?;
        Ok(self.inner.del(item, nid, cg))
    }

    /// Items on `cg`'s list on node `nid`, without locking
    /// (`list_lru_count_one`); 0 for a cgroup without (live) lists.
    pub fn count_one(&self, nid: usize, cg: &MemCgroup) -> Result<usize, ListLruError> {
        self.inner.shared.check(0, nid, cg)?;
        Ok(self.inner.count_one(nid, cg))
    }

    /// Items on node `nid` in every list (`list_lru_count_node`).
    pub fn count_node(&self, nid: usize) -> Result<usize, ListLruError> {
        let shared = &self.inner.shared;
        shared.check_nid(nid)?;
        Ok(shared.nodes[nid].nr_items.sum())
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
        self.inner.shared.check(0, nid, cg)?;
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
        let (inner, shared) = (&self.inner, &self.inner.shared);
        shared.check_nid(nid)?;
        let mut isolated = inner.walk_one(nid, shared.tree.root(), nr_to_walk, &mut isolate);
        if !shared.memcg_aware {
            return Ok(isolated);
        }
        let ids: Vec<usize> = shared.memcg.live_ids().collect();
        for id in ids {
            if *nr_to_walk == 0 {
                break;
            }
            let Some(cg) = u16::try_from(id).ok().and_then(|id| shared.tree.lookup(id)) else {
                continue;
            };
            isolated += inner.walk_one(nid, &cg, nr_to_walk, &mut isolate);
        }
        Ok(isolated)
    }

    /// The items on `cg`'s own list on node `nid`, oldest first (O(n), for
    /// tests and tools); empty for a cgroup without live lists.
    pub fn items(&self, nid: usize, cg: &MemCgroup) -> Result<Vec<ItemId>, ListLruError> {
        self.inner.shared.check(0, nid, cg)?;
        let mut out = Vec::new();
        let mut nr = usize::MAX;
        self.inner.walk_one(nid, cg, &mut nr, &mut |item, guard| {
            out.push(item);
            Walked::Skip(guard)
        });
        Ok(out)
    }

    /// Whether `cg` currently has lists in this list_lru (legacy: whether
    /// its list index, redirected or not, names live lists). The last check
    /// is made under the lock that covers the lists (the cgroup's last
    /// list, or the last node's lock), as the list operations make theirs,
    /// so it must not be called from a walk callback.
    pub fn has_lists(&self, cg: &MemCgroup) -> bool {
        let shared = &self.inner.shared;
        !shared.memcg_aware
            || cg.is_root()
            || dispatch!(&self.inner.locator, d => d.has_memcg_lists_locked(shared, cg))
    }

    /// How many cgroups hold lists in this list_lru (every cgroup that had
    /// lists and was removed has given them up).
    pub fn nr_memcg_lists(&self) -> usize {
        self.inner.shared.memcg.live_ids().count()
    }

    /// Bytes of the per-cgroup lists and their table (not item links),
    /// counting the sets kept for reuse by a removed cgroup's id.
    #[cfg(test)]
    pub(crate) fn memcg_memory_bytes(&self) -> usize {
        self.inner.shared.memcg.memory_bytes()
    }

    /// Bytes one cgroup's lists cost in this list_lru (its set: one list
    /// per node in one allocation, plus its table slot).
    pub fn bytes_per_cgroup(&self) -> usize {
        self.inner.shared.nodes.len() * size_of::<ListOne>() + MemcgLists::SLOT_BYTES
    }
}

impl Drop for ListLru {
    fn drop(&mut self) {
        let shared = &self.inner.shared;
        if shared.memcg_aware {
            let hooks = Arc::clone(&self.inner) as Arc<dyn MemcgLruHooks>;
            shared.tree.unregister_list_lru(&hooks);
        }
        if let Some(id) = shared.shrinker.filter(|_| shared.owns_shrinker) {
            shared.tree.free_shrinker_id(id);
        }
    }
}

impl fmt::Debug for ListLru {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListLru")
            .field("design", &self.design())
            .field("memcg_aware", &self.inner.shared.memcg_aware)
            .field("nr_nodes", &self.inner.shared.nodes.len())
            .finish_non_exhaustive()
    }
}

/// The operations that depend on the design: each dispatches once.
impl Inner {
    fn design(&self) -> LruDesign {
        dispatch!(&self.locator, d => d.design())
    }

    fn count_one(&self, nid: usize, cg: &MemCgroup) -> usize {
        let shared = &self.shared;
        dispatch!(&self.locator, d => d.count_one(shared, nid, cg))
    }

    /// The design's [`Design::with_list`].
    fn with_list<R>(
        &self,
        nid: usize,
        cg: &MemCgroup,
        mode: Locate,
        f: impl FnOnce(ListGuard<'_>, &MemCgroup) -> R,
    ) -> Option<R> {
        let shared = &self.shared;
        dispatch!(&self.locator, d => d.with_list(shared, nid, cg, mode, f))
    }
}

/// The operations both designs share, on the list [`Inner::with_list`]
/// locates.
impl Inner {
    fn add(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> bool {
        let shared = &self.shared;
        let link = shared
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
                    && let Some(shrinker) = shared.shrinker
                {
                    owner.set_shrinker_bit(nid, shrinker);
                }
                true
            })
            .expect("falls back to the root, never empty");
        if added {
            shared.nodes[nid].nr_items.add(1);
        }
        added
    }

    fn del(&self, item: ItemId, nid: usize, cg: &MemCgroup) -> bool {
        let shared = &self.shared;
        let Some(link) = shared.links.get(item as usize) else {
            return false;
        };
        // Split: the located list is the item's (the fixed reparent order
        // guarantees it). Legacy: a del racing an offline may locate the
        // parent's list before the splice; the unlink still takes the item
        // off its real list, as in the kernel.
        let check_list = cfg!(debug_assertions) && self.design() == LruDesign::Split;
        let removed = self
            .with_list(nid, cg, Locate::Existing, |guard, _| {
                // Acquire: pairs with the claim in `add`, so the links the
                // adder wrote are visible (the list lock orders them too).
                if !link.on_list.load(Ordering::Acquire) {
                    return false;
                }
                debug_assert!(
                    !check_list
                        || guard.view.nr_items() > DEL_CHECK_MAX_ITEMS
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
            shared.nodes[nid].nr_items.add(-1);
        }
        removed
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
        let node_total = &self.shared.nodes[nid].nr_items;
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
}

impl MemcgLruHooks for Inner {
    fn memcg_alloc(&self, cg: &MemCgroup) {
        let shared = &self.shared;
        dispatch!(&self.locator, d => d.memcg_alloc(shared, cg));
    }

    fn reparent(&self, cg: &MemCgroup, parent: &MemCgroup) {
        let shared = &self.shared;
        dispatch!(&self.locator, d => d.reparent(shared, cg, parent));
    }
}

impl Shared {
    fn new(
        tree: &CgroupTree,
        config: &ListLruConfig,
        shrinker: Option<ShrinkerId>,
        owns_shrinker: bool,
    ) -> Result<Self, ListLruError> {
        let nr_nodes = tree.nr_nodes();
        // One sentinel per list, after the item ids: the root lists, then
        // node by node the lists of every cgroup id (sets are kept for
        // their id, never more than one per id).
        let nr_ids = tree.max_ids() as usize + 1;
        let max_lists = nr_nodes * (1 + nr_ids);
        let max_items = config.max_items as usize;
        let first_sentinel = u32::try_from(max_items).expect("max_items is a u32");
        u32::try_from(max_items + max_lists - 1)
            .ok()
            .filter(|&last| last < NONE)
            .ok_or(ListLruError::TooManyItems {
                max_items: config.max_items,
            })?;
        let links = ChunkedTable::new(max_items + max_lists);
        let nodes = (0..nr_nodes)
            .map(|nid| LruNode {
                root: ListOne::new_root(first_sentinel + nid as u32, &links),
                nr_items: NodeTotal::new(),
            })
            .collect();
        let memcg = MemcgLists::new(nr_ids, nr_nodes, first_sentinel + nr_nodes as u32, &links);
        Ok(Self {
            memcg_aware: config.memcg_aware,
            max_items: config.max_items,
            tree: tree.clone(),
            nodes,
            links,
            memcg,
            alloc_lock: Mutex::new(()),
            id_space: tree.id_space_tag(),
            shrinker,
            owns_shrinker,
        })
    }

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
        // The tag, not `belongs_to`: no walk from the tree to its id space
        // on every call (this list_lru holds the tree, so the tag cannot be
        // another tree's).
        if cg.id_space_tag() != self.id_space {
            return Err(ListLruError::ForeignCgroup { path: cg.path() });
        }
        Ok(())
    }

    /// The operations on `list`, whose lock the caller holds or takes.
    fn view<'a>(&'a self, list: &'a ListOne) -> ListView<'a> {
        ListView {
            list,
            links: &self.links,
        }
    }

    /// The root list of node `nid`.
    fn root_view(&self, nid: usize) -> ListView<'_> {
        self.view(&self.nodes[nid].root)
    }

    /// The set at `idx` if it is live, read under the allocation lock:
    /// the barrier between a reparent and a racing lazy allocation (see
    /// the module docs).
    fn live_set_locked(&self, idx: usize) -> Option<&[ListOne]> {
        let _xa_lock = lock(&self.alloc_lock);
        self.memcg.get(idx).filter(|_| self.memcg.is_live(idx))
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
}

/// One pass over a locked list (`__list_lru_walk_one`'s loop).
fn walk_list<'g, F>(
    mut guard: ListGuard<'g>,
    nr_to_walk: &mut usize,
    isolate: &mut F,
    isolated: &mut usize,
    node_total: &NodeTotal,
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
                node_total.add(-1);
                guard = list;
            }
            Walked::RemovedRetry(token) => {
                assert_eq!(
                    token.item, item,
                    "Walked::RemovedRetry with another item's token"
                );
                *isolated += 1;
                node_total.add(-1);
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

    #[test]
    fn a_refused_list_lru_gives_its_shrinker_id_back() {
        let (tree, lru) = setup(LruDesign::Split, 1);
        let taken = lru.shrinker_id().unwrap();
        let too_big = ListLruConfig {
            memcg_aware: true,
            max_items: u32::MAX,
            design: LruDesign::Split,
        };
        for _ in 0..3 {
            assert!(matches!(
                ListLru::new(&tree, too_big),
                Err(ListLruError::TooManyItems { .. })
            ));
        }
        let next = ListLru::new(
            &tree,
            ListLruConfig {
                max_items: 16,
                ..too_big
            },
        )
        .unwrap();
        assert_eq!(
            next.shrinker_id().unwrap().get(),
            taken.get() + 1,
            "the refused ones took no id"
        );
    }

    fn skip_all(lru: &ListLru, nid: usize, cg: &MemCgroup) -> Vec<ItemId> {
        lru.items(nid, cg).unwrap()
    }

    #[test]
    fn add_del_count_every_design() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 2);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
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
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
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
            let c = tree.mkdir_p("/a/b/c").unwrap().memcg().unwrap();
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
            let d = tree.mkdir("/a/d").unwrap().memcg().unwrap();
            assert!(lru.has_lists(&d));
        }
    }

    #[test]
    fn a_reused_id_gets_the_same_set_and_nothing_of_its_last_owner() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 2);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/a/b").unwrap().memcg().unwrap();
            lru.add(1, 1, &b).unwrap();
            let bytes = lru.memcg_memory_bytes();
            tree.rmdir("/a/b").unwrap();
            assert_eq!(lru.nr_memcg_lists(), 1, "{design}: /a's only");
            let c = tree.mkdir("/a/c").unwrap().memcg().unwrap();
            assert_eq!(c.id(), b.id(), "lowest free id reused");
            assert!(lru.has_lists(&c), "{design}");
            assert_eq!(lru.nr_memcg_lists(), 2, "{design}");
            assert_eq!(
                lru.memcg_memory_bytes(),
                bytes,
                "{design}: b's set was recycled, not a new one allocated"
            );
            assert_eq!(lru.count_one(1, &c).unwrap(), 0, "{design}");
            assert!(skip_all(&lru, 1, &c).is_empty(), "{design}");
            assert_eq!(skip_all(&lru, 1, &a), [1], "{design}");
            // b (dying, its id now c's) still reaches its items through a.
            assert!(lru.del(1, 1, &b).unwrap(), "{design}");
            assert!(lru.add(2, 1, &c).unwrap());
            assert_eq!(skip_all(&lru, 1, &c), [2], "{design}");
            assert_eq!(lru.count_node(1).unwrap(), 1);
        }
    }

    #[test]
    fn node_total_sums_every_threads_shard() {
        let (tree, lru) = setup(LruDesign::Split, 1);
        let cgs: Vec<_> = (0..4)
            .map(|i| tree.mkdir(&format!("/c{i}")).unwrap().memcg().unwrap())
            .collect();
        std::thread::scope(|s| {
            for (t, cg) in cgs.iter().enumerate() {
                let lru = &lru;
                s.spawn(move || {
                    for k in 0..50 {
                        assert!(lru.add(t as u32 * 100 + k, 0, cg).unwrap());
                    }
                });
            }
        });
        assert_eq!(lru.count_node(0).unwrap(), 200);
        // Deleted by other threads than the adders: shards go negative, the
        // sum stays exact.
        std::thread::scope(|s| {
            for (t, cg) in cgs.iter().enumerate() {
                let lru = &lru;
                s.spawn(move || {
                    for k in 0..30 {
                        assert!(lru.del(t as u32 * 100 + k, 0, cg).unwrap());
                    }
                });
            }
        });
        assert_eq!(lru.count_node(0).unwrap(), 80);
    }

    #[test]
    fn walk_statuses() {
        for design in LruDesign::ALL {
            let (tree, lru) = setup(design, 1);
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
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
            let a = tree.mkdir("/a").unwrap().memcg().unwrap();
            let b = tree.mkdir("/b").unwrap().memcg().unwrap();
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
        let a = tree.mkdir("/a").unwrap().memcg().unwrap();
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
        tree.mkdir("/x").unwrap().memcg().unwrap();
        tree.rmdir("/x").unwrap();
    }
}
