//! Memory cgroups: the tree, ids, lifecycle and references
//! (mm/memcontrol.c, with the parts of kernel/cgroup/cgroup.c they rely on).
//!
//! # Lifecycle
//!
//! A cgroup is created under a parent by [`CgroupTree::mkdir`], which
//! allocates its id, lets every registered memcg-aware list_lru allocate
//! lists for it (top-down) and then brings it *online*: the id is published
//! in the id table and the cgroup joins its parent's children. `rmdir`
//! ([`CgroupTree::rmdir`]) *offlines* it: it becomes *dying*
//! ([`MemCgroup::is_dying`]), every list_lru reparents its lists to the
//! parent, it leaves the parent's children and drops the id pin it held
//! since online. The cgroup's memory is *freed* when the last `Arc` to it
//! goes; its id is released when the last [`IdPin`] goes (later, swapped-out
//! pages each hold one), so a dying cgroup stays resolvable by id while
//! anything still records it.
//!
//! # Invariants
//!
//! - Ids are `1..=max_ids` (65535 by default, `MEM_CGROUP_ID_MAX`); the root
//!   has id 1 and is never offlined. An id resolves ([`CgroupTree::lookup`])
//!   exactly while its pin count is non-zero.
//! - A dying cgroup has no children and never gains any.
//! - `kmemcg_id` (the index the pre-series list_lru design uses) is the
//!   cgroup's own id while online; at offline it is redirected to the
//!   parent's, for the cgroup and its descendants, as the legacy kernel did.
//!   The root's is -1 (the root lists).
//!
//! # Locking
//!
//! `cgroup_mutex` serialises mkdir and rmdir (tree shape, ids, offline
//! work). Each cgroup's children map has its own mutex so readers (path
//! lookup, iteration) never wait for offline work. The id table is read
//! lock-free. The registry of memcg-aware list_lrus has its own mutex
//! (`list_lrus_mutex`), always taken inside `cgroup_mutex` when both are.

use std::collections::BTreeMap;
use std::fmt;

mod charge;

use charge::{Accounting, Hooks};
pub use charge::{
    ChargeError, ChargeKind, MemcgEvent, MemcgReclaim, MemcgStat, OomHandler, TaskHooks, VmEvent,
};

use crate::errno::Errno;
use crate::idr::{IdAllocator, IdTable};
use crate::sync::{Arc, AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Mutex, Ordering, lock};

/// The largest memory cgroup id (`MEM_CGROUP_ID_MAX`).
pub const MEM_CGROUP_ID_MAX: u32 = 65535;

/// Shrinker ids a tree can hand out (the kernel grows its bitmaps; a fixed
/// bound keeps the per-cgroup bitmaps flat).
pub const MAX_SHRINKERS: usize = 256;

/// Longest cgroup name (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Why a cgroup operation was refused. Nothing changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupError {
    /// The path names no cgroup (or its parent is being removed).
    #[error("{path}: no such cgroup")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// A cgroup of that name already exists there.
    #[error("{path}: cgroup exists")]
    Exists {
        /// The path asked for.
        path: String,
    },
    /// rmdir of a cgroup that still has children (or of the root).
    #[error("{path}: {reason}")]
    Busy {
        /// The path asked for.
        path: String,
        /// Why it cannot go.
        reason: &'static str,
    },
    /// Every cgroup id is in use.
    #[error("no free memory cgroup id (all {max} in use)")]
    NoIds {
        /// The number of ids the tree has.
        max: u32,
    },
    /// Every shrinker id is in use.
    #[error("no free shrinker id (all {MAX_SHRINKERS} in use)")]
    NoShrinkerIds,
    /// A name that cannot be a directory name.
    #[error("{name:?} is not a valid cgroup name")]
    InvalidName {
        /// The name asked for.
        name: String,
    },
    /// A name longer than [`NAME_MAX`].
    #[error("cgroup name is {len} bytes long, more than {NAME_MAX}")]
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
}

impl CgroupError {
    /// The errno the kernel returns for the same request.
    pub fn errno(&self) -> Errno {
        match self {
            CgroupError::NotFound { .. } => Errno::ENOENT,
            CgroupError::Exists { .. } => Errno::EEXIST,
            CgroupError::Busy { .. } => Errno::EBUSY,
            CgroupError::NoIds { .. } | CgroupError::NoShrinkerIds => Errno::ENOSPC,
            CgroupError::InvalidName { .. } => Errno::EINVAL,
            CgroupError::NameTooLong { .. } => Errno::ENAMETOOLONG,
        }
    }
}

/// How to build a [`CgroupTree`].
#[derive(Debug, Clone, Copy)]
pub struct TreeConfig {
    /// NUMA nodes (list_lru keeps one list per node per cgroup).
    pub nr_nodes: usize,
    /// The largest id (`MEM_CGROUP_ID_MAX` by default; tests use fewer).
    pub max_ids: u32,
}

impl Default for TreeConfig {
    fn default() -> Self {
        Self {
            nr_nodes: 1,
            max_ids: MEM_CGROUP_ID_MAX,
        }
    }
}

/// What a memcg-aware list_lru does when cgroups come and go.
pub(crate) trait MemcgLruHooks: Send + Sync {
    /// Allocate lists for `cg` (and ancestors lacking them), top-down.
    fn memcg_alloc(&self, cg: &MemCgroup);
    /// `cg` is going offline: move its lists' items to `parent`.
    fn reparent(&self, cg: &MemCgroup, parent: &MemCgroup);
}

/// The id table and allocator; cgroups hold it so that the last id pin can
/// release the id without reaching the tree.
struct IdSpace {
    table: IdTable<MemCgroup>,
    alloc: Mutex<IdAllocator>,
    max: u32,
}

/// Per-node shrinker bitmap of one cgroup.
struct ShrinkerBits(Box<[AtomicU64]>);

impl ShrinkerBits {
    fn new() -> Self {
        Self((0..MAX_SHRINKERS / 64).map(|_| AtomicU64::new(0)).collect())
    }
}

/// One memory cgroup. Shared as `Arc<MemCgroup>`; see the module docs for
/// its lifecycle.
pub struct MemCgroup {
    id: u16,
    serial: u64,
    name: String,
    level: u32,
    parent: Option<Arc<MemCgroup>>,
    children: Mutex<BTreeMap<String, Arc<MemCgroup>>>,
    dying: AtomicBool,
    /// Id pins; the id resolves while this is non-zero.
    id_refs: AtomicUsize,
    kmemcg_id: AtomicI32,
    shrinker_bits: Box<[ShrinkerBits]>,
    ids: Arc<IdSpace>,
    /// Counters, events and statistics (`charge.rs`).
    acct: Accounting,
    /// `+memory` in this cgroup's `cgroup.subtree_control`.
    subtree_memory: AtomicBool,
    /// Removed descendants whose ids are still pinned (`cgroup.stat`).
    nr_dying_descendants: AtomicUsize,
}

impl MemCgroup {
    fn new(
        id: u32,
        serial: u64,
        name: &str,
        parent: Option<&Arc<MemCgroup>>,
        nr_nodes: usize,
        ids: &Arc<IdSpace>,
    ) -> Self {
        Self {
            id: id as u16,
            serial,
            name: name.to_owned(),
            level: parent.map_or(0, |p| p.level + 1),
            parent: parent.cloned(),
            children: Mutex::new(BTreeMap::new()),
            dying: AtomicBool::new(false),
            id_refs: AtomicUsize::new(1),
            kmemcg_id: AtomicI32::new(if parent.is_some() { id as i32 } else { -1 }),
            shrinker_bits: (0..nr_nodes).map(|_| ShrinkerBits::new()).collect(),
            ids: Arc::clone(ids),
            acct: Accounting::new(parent.map(|p| &p.acct)),
            subtree_memory: AtomicBool::new(false),
            nr_dying_descendants: AtomicUsize::new(0),
        }
    }

    /// The cgroup's id (`mem_cgroup_id`), stable for its whole life.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// A number unique to this cgroup for the tree's life (ids are reused,
    /// serials never).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The directory name ("" for the root).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Depth below the root (the root is 0).
    pub fn level(&self) -> u32 {
        self.level
    }

    /// The parent (`None` for the root).
    pub fn parent(&self) -> Option<&Arc<MemCgroup>> {
        self.parent.as_ref()
    }

    /// Whether this is the root cgroup.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether the cgroup was removed (offline; its memory may live on).
    pub fn is_dying(&self) -> bool {
        // Acquire: pairs with the Release store in `offline`, so whoever sees
        // the cgroup dying also sees the state offline set up before.
        self.dying.load(Ordering::Acquire)
    }

    /// The path from the root ("/" for the root, else "/a/b").
    pub fn path(&self) -> String {
        let mut names = Vec::new();
        let mut at = Some(self);
        while let Some(cg) = at {
            if !cg.is_root() {
                names.push(cg.name.as_str());
            }
            at = cg.parent.as_deref();
        }
        names.reverse();
        format!("/{}", names.join("/"))
    }

    /// The child called `name`, if any.
    pub fn child(&self, name: &str) -> Option<Arc<MemCgroup>> {
        lock(&self.children).get(name).cloned()
    }

    /// The children, in creation order (a snapshot).
    pub fn children(&self) -> Vec<Arc<MemCgroup>> {
        let mut kids: Vec<_> = lock(&self.children).values().cloned().collect();
        kids.sort_by_key(|c| c.serial);
        kids
    }

    /// The parent, grandparent, ... up to the root.
    pub fn ancestors(&self) -> impl Iterator<Item = &Arc<MemCgroup>> {
        std::iter::successors(self.parent.as_ref(), |p| p.parent.as_ref())
    }

    /// Live descendants (`nr_descendants` of `cgroup.stat`).
    pub fn nr_descendants(self: &Arc<Self>) -> usize {
        self.descendants_pre().count() - 1
    }

    /// Removed descendants whose ids are still pinned
    /// (`nr_dying_descendants` of `cgroup.stat`).
    pub fn nr_dying_descendants(&self) -> usize {
        self.nr_dying_descendants.load(Ordering::Relaxed)
    }

    /// Whether this cgroup's `cgroup.subtree_control` has `memory`.
    pub fn subtree_memory(&self) -> bool {
        self.subtree_memory.load(Ordering::Acquire)
    }

    /// Whether the memory controller is on for this cgroup: the root, or a
    /// child of a cgroup with `+memory` in its subtree control.
    pub fn memory_enabled(&self) -> bool {
        self.parent.as_ref().is_none_or(|p| p.subtree_memory())
    }

    /// The cgroup that accounts this one's memory: itself if the controller
    /// is on here, else the nearest ancestor where it is.
    pub fn effective_memcg(self: &Arc<Self>) -> Arc<MemCgroup> {
        let mut at = Arc::clone(self);
        while !at.memory_enabled() {
            at = Arc::clone(at.parent.as_ref().expect("the root always has memory"));
        }
        at
    }

    /// Whether `self` is `ancestor` or lies below it.
    pub fn is_descendant_of(&self, ancestor: &MemCgroup) -> bool {
        let mut at = Some(self);
        while let Some(cg) = at {
            if std::ptr::eq(cg, ancestor) {
                return true;
            }
            at = cg.parent.as_deref();
        }
        false
    }

    /// This cgroup and every descendant, parents before children
    /// (`css_for_each_descendant_pre`). Each step snapshots one children
    /// list, so concurrent mkdir/rmdir never break the walk: cgroups created
    /// meanwhile may or may not be visited, removed ones may still be.
    pub fn descendants_pre(self: &Arc<Self>) -> DescendantsPre {
        DescendantsPre {
            stack: vec![Arc::clone(self)],
        }
    }

    /// Pins the id so that it keeps resolving (`mem_cgroup_id_get`). Fails
    /// once the id has been released.
    pub fn pin_id(self: &Arc<Self>) -> Option<IdPin> {
        self.try_id_get().then(|| IdPin {
            cg: Arc::clone(self),
        })
    }

    /// Takes one id pin unless the id was released
    /// (`refcount_inc_not_zero`); the caller owns the pin as a count.
    pub(crate) fn try_id_get(&self) -> bool {
        let mut refs = self.id_refs.load(Ordering::Relaxed);
        loop {
            if refs == 0 {
                return false;
            }
            // Relaxed: taking a pin needs no ordering, only atomicity (like
            // refcount_inc_not_zero); releasing is what orders.
            match self.id_refs.compare_exchange_weak(
                refs,
                refs + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => refs = actual,
            }
        }
    }

    /// Current id pins (the online cgroup holds one itself).
    pub fn id_pins(&self) -> usize {
        self.id_refs.load(Ordering::Relaxed)
    }

    fn id_put(&self) {
        // AcqRel: the Release half orders this holder's use of the id before
        // the release below; the Acquire half (on the last put) orders the
        // release after every other holder's use.
        if self.id_refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ids.table.store(self.id.into(), None);
            lock(&self.ids.alloc).free(self.id.into());
            if self.is_dying() {
                for a in self.ancestors() {
                    a.nr_dying_descendants.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Whether this cgroup is one of `tree`'s.
    pub(crate) fn belongs_to(&self, tree: &CgroupTree) -> bool {
        Arc::ptr_eq(&self.ids, &tree.shared.ids)
    }

    /// The pre-series list_lru index (see the module docs).
    pub(crate) fn kmemcg_id(&self) -> i32 {
        // Relaxed: read under the legacy node lock, which orders it against
        // the redirect (stored before the reparent takes that lock).
        self.kmemcg_id.load(Ordering::Relaxed)
    }

    /// Marks that `shrinker` may find objects of this cgroup on node `nid`
    /// (`set_shrinker_bit`); a no-op for the root, as in the kernel.
    pub(crate) fn set_shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) {
        if self.is_root() {
            return;
        }
        let word = &self.shrinker_bits[nid].0[shrinker.0 / 64];
        // Relaxed: a hint for reclaim, which rescans the lists themselves.
        word.fetch_or(1 << (shrinker.0 % 64), Ordering::Relaxed);
    }

    /// Whether `shrinker`'s bit is set for node `nid`.
    pub fn shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) -> bool {
        let word = &self.shrinker_bits[nid].0[shrinker.0 / 64];
        word.load(Ordering::Relaxed) & (1 << (shrinker.0 % 64)) != 0
    }

    /// Clears `shrinker`'s bit for node `nid` (reclaim found it empty).
    pub fn clear_shrinker_bit(&self, nid: usize, shrinker: ShrinkerId) {
        let word = &self.shrinker_bits[nid].0[shrinker.0 / 64];
        word.fetch_and(!(1 << (shrinker.0 % 64)), Ordering::Relaxed);
    }
}

impl fmt::Debug for MemCgroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemCgroup")
            .field("id", &self.id)
            .field("path", &self.path())
            .field("dying", &self.is_dying())
            .finish_non_exhaustive()
    }
}

/// Pre-order walk over a subtree; see [`MemCgroup::descendants_pre`].
pub struct DescendantsPre {
    stack: Vec<Arc<MemCgroup>>,
}

impl Iterator for DescendantsPre {
    type Item = Arc<MemCgroup>;

    fn next(&mut self) -> Option<Arc<MemCgroup>> {
        let cg = self.stack.pop()?;
        self.stack.extend(cg.children().into_iter().rev());
        Some(cg)
    }
}

/// A pin on a cgroup's id (`mem_cgroup_id_get`/`put`): while it lives the
/// id resolves to the cgroup, even after rmdir. Dropping it unpins; the last
/// unpin releases the id for reuse.
pub struct IdPin {
    cg: Arc<MemCgroup>,
}

impl IdPin {
    /// The pinned cgroup.
    pub fn memcg(&self) -> &Arc<MemCgroup> {
        &self.cg
    }
}

impl Drop for IdPin {
    fn drop(&mut self) {
        self.cg.id_put();
    }
}

impl fmt::Debug for IdPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdPin({})", self.cg.id)
    }
}

/// A shrinker's id, for the per-cgroup "has objects" bitmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShrinkerId(usize);

impl ShrinkerId {
    /// The numeric id.
    pub fn get(self) -> usize {
        self.0
    }
}

struct TreeShared {
    ids: Arc<IdSpace>,
    root: Arc<MemCgroup>,
    nr_nodes: usize,
    cgroup_mutex: Mutex<()>,
    list_lrus: Mutex<Vec<Arc<dyn MemcgLruHooks>>>,
    shrinker_ids: Mutex<IdAllocator>,
    next_serial: AtomicU64,
    hooks: Mutex<Hooks>,
}

impl Drop for TreeShared {
    fn drop(&mut self) {
        // Break the cycles that live cgroups form (parent <-> children map,
        // id table <-> cgroup) so that everything is freed with the tree.
        for cg in self.root.descendants_pre().collect::<Vec<_>>() {
            lock(&cg.children).clear();
        }
        for (id, _) in self.ids.table.entries().collect::<Vec<_>>() {
            self.ids.table.store(id, None);
        }
    }
}

/// A hierarchy of memory cgroups (one cgroup v2 mount's memory controller
/// view). Cheap to clone: clones share the tree.
#[derive(Clone)]
pub struct CgroupTree {
    shared: Arc<TreeShared>,
}

impl Default for CgroupTree {
    fn default() -> Self {
        Self::new(TreeConfig::default())
    }
}

impl CgroupTree {
    /// A tree holding only the root cgroup (id 1).
    pub fn new(config: TreeConfig) -> Self {
        assert!(config.nr_nodes >= 1, "a machine has at least one node");
        assert!(
            (2..=MEM_CGROUP_ID_MAX).contains(&config.max_ids),
            "max_ids must be 2..={MEM_CGROUP_ID_MAX}"
        );
        let mut alloc = IdAllocator::new(1, config.max_ids);
        let root_id = alloc.alloc().expect("fresh allocator");
        let ids = Arc::new(IdSpace {
            table: IdTable::new(config.max_ids as usize + 1),
            alloc: Mutex::new(alloc),
            max: config.max_ids,
        });
        let root = Arc::new(MemCgroup::new(root_id, 0, "", None, config.nr_nodes, &ids));
        ids.table.store(root_id as usize, Some(Arc::clone(&root)));
        Self {
            shared: Arc::new(TreeShared {
                ids,
                root,
                nr_nodes: config.nr_nodes,
                cgroup_mutex: Mutex::new(()),
                list_lrus: Mutex::new(Vec::new()),
                shrinker_ids: Mutex::new(IdAllocator::new(0, MAX_SHRINKERS as u32 - 1)),
                next_serial: AtomicU64::new(1),
                hooks: Mutex::new(Hooks::default()),
            }),
        }
    }

    /// The root cgroup.
    pub fn root(&self) -> &Arc<MemCgroup> {
        &self.shared.root
    }

    /// NUMA nodes of this tree.
    pub fn nr_nodes(&self) -> usize {
        self.shared.nr_nodes
    }

    /// The largest id.
    pub fn max_ids(&self) -> u32 {
        self.shared.ids.max
    }

    /// Ids in use (online cgroups plus dying ones still pinned).
    pub fn ids_in_use(&self) -> usize {
        lock(&self.shared.ids.alloc).in_use()
    }

    /// The cgroup whose id is `id` while the id is pinned
    /// (`mem_cgroup_from_id`); lock-free.
    pub fn lookup(&self, id: u16) -> Option<Arc<MemCgroup>> {
        self.shared.ids.table.get(id.into())
    }

    /// The cgroup at `path` ("/", "/a/b"; a leading `/sys/fs/cgroup` is
    /// accepted).
    pub fn find(&self, path: &str) -> Result<Arc<MemCgroup>, CgroupError> {
        let mut at = Arc::clone(&self.shared.root);
        for name in components(path) {
            at = at.child(name).ok_or_else(|| CgroupError::NotFound {
                path: path.to_owned(),
            })?;
        }
        Ok(at)
    }

    /// Creates the cgroup at `path`; its parent must exist.
    pub fn mkdir(&self, path: &str) -> Result<Arc<MemCgroup>, CgroupError> {
        let (parent_path, name) = split_last(path).ok_or_else(|| CgroupError::Exists {
            path: path.to_owned(),
        })?;
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let parent = self.find(parent_path).map_err(|_| CgroupError::NotFound {
            path: path.to_owned(),
        })?;
        self.create_locked(&parent, name, path)
    }

    /// Creates `path` and any missing ancestors (`mkdir -p`); returns the
    /// cgroup at `path`, which may already have existed.
    pub fn mkdir_p(&self, path: &str) -> Result<Arc<MemCgroup>, CgroupError> {
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let mut at = Arc::clone(&self.shared.root);
        for name in components(path) {
            at = match at.child(name) {
                Some(child) => child,
                None => self.create_locked(&at, name, path)?,
            };
        }
        Ok(at)
    }

    /// Creates a child of `parent` called `name`.
    pub fn mkdir_in(
        &self,
        parent: &Arc<MemCgroup>,
        name: &str,
    ) -> Result<Arc<MemCgroup>, CgroupError> {
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let path = format!("{}/{name}", parent.path().trim_end_matches('/'));
        self.create_locked(parent, name, &path)
    }

    fn create_locked(
        &self,
        parent: &Arc<MemCgroup>,
        name: &str,
        path: &str,
    ) -> Result<Arc<MemCgroup>, CgroupError> {
        validate_name(name)?;
        if parent.is_dying() {
            return Err(CgroupError::NotFound {
                path: path.to_owned(),
            });
        }
        if parent.child(name).is_some() {
            return Err(CgroupError::Exists {
                path: path.to_owned(),
            });
        }
        let id = lock(&self.shared.ids.alloc)
            .alloc()
            .ok_or(CgroupError::NoIds {
                max: self.shared.ids.max,
            })?;
        let serial = self.shared.next_serial.fetch_add(1, Ordering::Relaxed);
        let cg = Arc::new(MemCgroup::new(
            id,
            serial,
            name,
            Some(parent),
            self.shared.nr_nodes,
            &self.shared.ids,
        ));
        for lru in lock(&self.shared.list_lrus).iter() {
            lru.memcg_alloc(&cg);
        }
        // Online: publish the id, then join the parent.
        self.shared
            .ids
            .table
            .store(id as usize, Some(Arc::clone(&cg)));
        lock(&parent.children).insert(name.to_owned(), Arc::clone(&cg));
        Ok(cg)
    }

    /// Removes the cgroup at `path` (offline: reparent, unpin the id).
    pub fn rmdir(&self, path: &str) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let cg = self.find(path)?;
        self.offline_locked(&cg, path)
    }

    /// Removes `cg` (see [`CgroupTree::rmdir`]).
    pub fn rmdir_cgroup(&self, cg: &Arc<MemCgroup>) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let path = cg.path();
        if cg.is_dying() {
            return Err(CgroupError::NotFound { path });
        }
        self.offline_locked(cg, &path)
    }

    fn offline_locked(&self, cg: &Arc<MemCgroup>, path: &str) -> Result<(), CgroupError> {
        let Some(parent) = cg.parent() else {
            return Err(CgroupError::Busy {
                path: path.to_owned(),
                reason: "the root cgroup cannot be removed",
            });
        };
        if !lock(&cg.children).is_empty() {
            return Err(CgroupError::Busy {
                path: path.to_owned(),
                reason: "cgroup has children",
            });
        }
        if !self.procs(cg).is_empty() {
            return Err(CgroupError::Busy {
                path: path.to_owned(),
                reason: "cgroup has tasks",
            });
        }
        // Release: pairs with the Acquire in `is_dying`.
        cg.dying.store(true, Ordering::Release);
        // Legacy list_lru index redirect, for the cgroup and descendants.
        let parent_kmemcg_id = parent.kmemcg_id();
        for d in cg.descendants_pre() {
            // Relaxed: list_lru reads it under the node lock that the
            // reparent below takes after this store.
            d.kmemcg_id.store(parent_kmemcg_id, Ordering::Relaxed);
        }
        for lru in lock(&self.shared.list_lrus).iter() {
            lru.reparent(cg, parent);
        }
        for a in cg.ancestors() {
            a.nr_dying_descendants.fetch_add(1, Ordering::Relaxed);
        }
        lock(&parent.children).remove(&cg.name);
        cg.id_put();
        Ok(())
    }

    /// Writes `+memory` (`true`) or `-memory` to `cg`'s
    /// `cgroup.subtree_control`. Enabling needs the controller on `cg`
    /// itself; disabling is refused while `cg` has children (a
    /// simplification: the kernel would tear down their memory state).
    pub fn set_subtree_memory(&self, cg: &Arc<MemCgroup>, enable: bool) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.shared.cgroup_mutex);
        let path = cg.path();
        if enable && !cg.memory_enabled() {
            return Err(CgroupError::NotFound { path });
        }
        if !enable && cg.subtree_memory() && !lock(&cg.children).is_empty() {
            return Err(CgroupError::Busy {
                path,
                reason: "children use the memory controller",
            });
        }
        // Release: pairs with the Acquire in `subtree_memory`.
        cg.subtree_memory.store(enable, Ordering::Release);
        Ok(())
    }

    /// Registers a memcg-aware list_lru: it gets lists for every cgroup
    /// created from now on and is reparented at every offline.
    pub(crate) fn register_list_lru(&self, lru: Arc<dyn MemcgLruHooks>) {
        lock(&self.shared.list_lrus).push(lru);
    }

    /// Undoes [`CgroupTree::register_list_lru`].
    pub(crate) fn unregister_list_lru(&self, lru: &Arc<dyn MemcgLruHooks>) {
        lock(&self.shared.list_lrus).retain(|l| !Arc::ptr_eq(l, lru));
    }

    /// Allocates a shrinker id.
    pub(crate) fn alloc_shrinker_id(&self) -> Result<ShrinkerId, CgroupError> {
        lock(&self.shared.shrinker_ids)
            .alloc()
            .map(|id| ShrinkerId(id as usize))
            .ok_or(CgroupError::NoShrinkerIds)
    }

    /// Frees a shrinker id, clearing its bit in every cgroup.
    pub(crate) fn free_shrinker_id(&self, id: ShrinkerId) {
        for cg in self.root().descendants_pre() {
            for nid in 0..self.nr_nodes() {
                cg.clear_shrinker_bit(nid, id);
            }
        }
        lock(&self.shared.shrinker_ids).free(id.0 as u32);
    }
}

impl fmt::Debug for CgroupTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CgroupTree")
            .field("nr_nodes", &self.shared.nr_nodes)
            .field("ids_in_use", &self.ids_in_use())
            .finish_non_exhaustive()
    }
}

/// The names along `path`, ignoring empty components and a leading
/// `/sys/fs/cgroup`.
fn components(path: &str) -> impl Iterator<Item = &str> {
    let path = path.strip_prefix("/sys/fs/cgroup").unwrap_or(path);
    path.split('/').filter(|c| !c.is_empty())
}

/// `(parent path, last name)` of `path`; `None` for the root.
fn split_last(path: &str) -> Option<(&str, &str)> {
    let trimmed = path.trim_end_matches('/');
    let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
    (!name.is_empty() && trimmed != "/sys/fs/cgroup").then_some((dir, name))
}

fn validate_name(name: &str) -> Result<(), CgroupError> {
    if name.len() > NAME_MAX {
        return Err(CgroupError::NameTooLong { len: name.len() });
    }
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0', '\n']) {
        return Err(CgroupError::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn small_tree() -> CgroupTree {
        CgroupTree::new(TreeConfig {
            nr_nodes: 2,
            max_ids: 8,
        })
    }

    #[test]
    fn mkdir_find_rmdir_and_states() {
        let t = CgroupTree::default();
        assert_eq!(t.root().id(), 1);
        assert_eq!(t.root().path(), "/");
        let a = t.mkdir("/a").unwrap();
        let b = t.mkdir("/sys/fs/cgroup/a/b").unwrap();
        assert_eq!((a.id(), b.id()), (2, 3));
        assert_eq!(b.path(), "/a/b");
        assert_eq!(b.level(), 2);
        assert!(Arc::ptr_eq(&t.find("/a/b/").unwrap(), &b));
        assert!(Arc::ptr_eq(&t.lookup(3).unwrap(), &b));
        assert!(b.is_descendant_of(&a) && !a.is_descendant_of(&b));

        assert_eq!(t.rmdir("/a").unwrap_err().errno(), Errno::EBUSY);
        assert_eq!(t.rmdir("/nope").unwrap_err().errno(), Errno::ENOENT);
        assert_eq!(t.rmdir("/").unwrap_err().errno(), Errno::EBUSY);
        assert_eq!(t.mkdir("/a").unwrap_err().errno(), Errno::EEXIST);
        assert_eq!(t.mkdir("/x/y").unwrap_err().errno(), Errno::ENOENT);

        let weak = std::sync::Arc::downgrade(&b);
        let pin = b.pin_id().unwrap();
        t.rmdir("/a/b").unwrap();
        assert!(b.is_dying());
        assert!(t.find("/a/b").is_err());
        // Pinned: the id still resolves to the dying cgroup.
        assert!(Arc::ptr_eq(&t.lookup(3).unwrap(), &b));
        assert_eq!(t.rmdir_cgroup(&b).unwrap_err().errno(), Errno::ENOENT);
        drop(pin);
        assert!(t.lookup(3).is_none(), "last pin released the id");
        assert!(b.pin_id().is_none());
        drop(b);
        assert!(
            weak.upgrade().is_none(),
            "freed once the last reference went"
        );
        // The id is reused.
        assert_eq!(t.mkdir("/a/c").unwrap().id(), 3);
    }

    #[test]
    fn ids_exhaust_with_enospc_and_come_back() {
        let t = small_tree();
        let made: Vec<_> = (0..7)
            .map(|i| t.mkdir(&format!("/c{i}")).unwrap())
            .collect();
        assert_eq!(t.ids_in_use(), 8);
        let err = t.mkdir("/full").unwrap_err();
        assert_eq!(err.errno(), Errno::ENOSPC);
        t.rmdir("/c3").unwrap();
        assert_eq!(t.mkdir("/again").unwrap().id(), made[3].id());
    }

    #[test]
    fn names_are_validated() {
        let t = small_tree();
        assert_eq!(t.mkdir("/..").unwrap_err().errno(), Errno::EINVAL);
        assert_eq!(
            t.mkdir(&format!("/{}", "x".repeat(256)))
                .unwrap_err()
                .errno(),
            Errno::ENAMETOOLONG
        );
        assert_eq!(t.mkdir("/").unwrap_err().errno(), Errno::EEXIST);
        assert_eq!(
            t.mkdir_in(t.root(), "a/b").unwrap_err().errno(),
            Errno::EINVAL
        );
    }

    #[test]
    fn mkdir_p_and_pre_order() {
        let t = CgroupTree::default();
        t.mkdir_p("/a/b/c").unwrap();
        t.mkdir_p("/a/d").unwrap();
        t.mkdir_p("/e").unwrap();
        let order: Vec<String> = t.root().descendants_pre().map(|c| c.path()).collect();
        assert_eq!(order, ["/", "/a", "/a/b", "/a/b/c", "/a/d", "/e"]);
    }

    #[test]
    fn kmemcg_id_redirects_to_the_parent_at_offline() {
        let t = CgroupTree::default();
        let a = t.mkdir("/a").unwrap();
        let b = t.mkdir("/a/b").unwrap();
        assert_eq!(t.root().kmemcg_id(), -1);
        assert_eq!(b.kmemcg_id(), i32::from(b.id()));
        t.rmdir("/a/b").unwrap();
        assert_eq!(b.kmemcg_id(), i32::from(a.id()));
        t.rmdir("/a").unwrap();
        assert_eq!(a.kmemcg_id(), -1);
    }

    #[test]
    fn concurrent_mkdir_rmdir_and_iteration() {
        let t = CgroupTree::default();
        std::thread::scope(|s| {
            for w in 0..2 {
                let t = t.clone();
                s.spawn(move || {
                    for i in 0..300 {
                        let p = format!("/w{w}/c{i}");
                        t.mkdir_p(&p).unwrap();
                        if i % 2 == 0 {
                            t.rmdir(&p).unwrap();
                        }
                    }
                });
            }
            let t = t.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    let n = t.root().descendants_pre().count();
                    assert!(n >= 1);
                }
            });
        });
        assert_eq!(t.root().descendants_pre().count(), 1 + 2 + 300);
        assert_eq!(t.ids_in_use(), 1 + 2 + 300);
    }

    #[test]
    fn shrinker_bits_per_node_never_on_root() {
        let t = small_tree();
        let a = t.mkdir("/a").unwrap();
        let s = t.alloc_shrinker_id().unwrap();
        a.set_shrinker_bit(1, s);
        t.root().set_shrinker_bit(0, s);
        assert!(a.shrinker_bit(1, s) && !a.shrinker_bit(0, s));
        assert!(!t.root().shrinker_bit(0, s));
        t.free_shrinker_id(s);
        assert!(!a.shrinker_bit(1, s));
    }
}
