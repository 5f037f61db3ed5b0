//! The cgroup core (kernel/cgroup/cgroup.c): the hierarchy of cgroups,
//! their names and paths, mkdir and rmdir, `cgroup.subtree_control`,
//! `cgroup.max.descendants`/`cgroup.max.depth`, and the tasks in each
//! cgroup (`cgroup.procs`, `cgroup.threads`, populated).
//!
//! # Cgroups and their controllers
//!
//! A [`Cgroup`] is a directory of the hierarchy: a name, children, tasks,
//! `cgroup.subtree_control`. A controller keeps its own state for a cgroup
//! (the kernel's css, `cgroup_subsys_state`) while it is on there; the one
//! controller modelled is memory, whose state is memcontrol's `MemCgroup`.
//! It is on for a cgroup as the hierarchy's [`MemoryController`] mode
//! says: in every cgroup (`Everywhere`, the library default, for
//! hierarchies of tenants), or, as on a cgroup v2 mount, in the children of
//! cgroups with `memory` in their `cgroup.subtree_control`
//! (`SubtreeControl`).
//!
//! The core calls the controller only through `CgroupSubsys` (the
//! kernel's `cgroup_subsys` ops): to bring its state online for a cgroup
//! (at mkdir, or `+memory` in the parent's subtree control) and to take it
//! offline (at rmdir, or `-memory`). The core holds that state
//! type-erased, as the kernel holds a `cgroup_subsys_state` pointer; the
//! controller recovers its own type (`Cgroup::css`). The tasks belong to
//! whoever installs [`TaskHooks`] (the simulator).
//!
//! A [`CgroupRoot`] is one hierarchy (`struct cgroup_root`); memcontrol's
//! `CgroupTree` holds one and hands out its operations.
//!
//! # Invariants
//!
//! - A removed cgroup has no live children and never gains any.
//! - A controller is enabled top-down: its state for a cgroup exists only
//!   where it exists for the parent.
//! - `nr_descendants` counts live descendants, `nr_dying_descendants`
//!   removed ones not yet released; a removed cgroup is released with its
//!   last reference (its controllers' dying states hold one each).
//!
//! # Locking
//!
//! `cgroup_mutex` serialises mkdir, rmdir, `cgroup.subtree_control`
//! writes and task moves into a cgroup (tree shape; the controller's online
//! and offline run under it). Each cgroup's children map and css slot have
//! their own mutexes so that readers (path lookup, iteration, charging)
//! never wait for offline work. The freezer's counts (and `nr_descendants`,
//! which it compares with them) change under the freezer lock
//! (`freezer.rs`), taken inside `cgroup_mutex`.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Weak;

mod freezer;

use freezer::FreezerState;

use crate::errno::Errno;
use crate::psi::{PsiGroup, PsiTask};
use crate::sync::{Arc, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, lock};

/// Longest cgroup name (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// `cgroup.max.descendants` and `cgroup.max.depth` when unlimited
/// (`INT_MAX`, shown as `max`).
pub(crate) const CGROUP_LIMIT_MAX: u32 = i32::MAX as u32;

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
    /// The request conflicts with the cgroup's state.
    #[error("{path}: {reason}")]
    Busy {
        /// The path asked for.
        path: String,
        /// Why it cannot be done.
        reason: &'static str,
    },
    /// Every memory cgroup id is in use (`xa_alloc`: EBUSY).
    #[error("no free memory cgroup id (all {max} in use)")]
    NoIds {
        /// The number of ids the tree has.
        max: u32,
    },
    /// Every shrinker id is in use.
    #[error("no free shrinker id (all {max} in use)")]
    NoShrinkerIds {
        /// The number of shrinker ids the tree has.
        max: usize,
    },
    /// A name that cannot be a directory name.
    #[error("{name:?} is not a valid cgroup name")]
    InvalidName {
        /// The name asked for.
        name: String,
    },
    /// A path that does not start at the root (`/`): the hierarchy has no
    /// working directory to resolve it against.
    #[error("{path:?}: not an absolute path")]
    RelativePath {
        /// The path given.
        path: String,
    },
    /// A name longer than [`NAME_MAX`].
    #[error("cgroup name is {len} bytes long, more than {NAME_MAX}")]
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The memory controller is not on for that cgroup (it has no memory
    /// cgroup; enable it in the parent's `cgroup.subtree_control`).
    #[error("{path}: the memory controller is not enabled there")]
    NoMemoryController {
        /// The cgroup's path.
        path: String,
    },
    /// `cgroup.max.descendants` or `cgroup.max.depth` of an ancestor does
    /// not allow another cgroup there.
    #[error("{path}: {ancestor}'s cgroup.max.{limit} allows no more cgroups there")]
    HierarchyLimit {
        /// The path asked for.
        path: String,
        /// The ancestor whose limit refused.
        ancestor: String,
        /// `descendants` or `depth`.
        limit: &'static str,
    },
    /// The tree's [`MemoryController`] mode does not allow the change.
    #[error("the memory controller is on in every cgroup of this tree")]
    FixedController,
    /// The parent could not take the new memory cgroup's own metadata
    /// (see memcontrol's `CgroupTree::set_memcg_metadata`).
    #[error("{path}: no memory for the memory cgroup's metadata")]
    NoMemory {
        /// The path asked for.
        path: String,
    },
    /// The root cgroup has no such file (`CFTYPE_NOT_ON_ROOT`).
    #[error("the root cgroup has no {file}")]
    NotOnRoot {
        /// The interface file.
        file: &'static str,
    },
}

impl CgroupError {
    /// The errno the kernel returns for the same request.
    pub fn errno(&self) -> Errno {
        match self {
            CgroupError::NotFound { .. }
            | CgroupError::NoMemoryController { .. }
            | CgroupError::NotOnRoot { .. } => Errno::ENOENT,
            CgroupError::Exists { .. } => Errno::EEXIST,
            CgroupError::Busy { .. } | CgroupError::NoIds { .. } => Errno::EBUSY,
            CgroupError::NoShrinkerIds { .. } => Errno::ENOSPC,
            CgroupError::InvalidName { .. }
            | CgroupError::RelativePath { .. }
            | CgroupError::FixedController => Errno::EINVAL,
            CgroupError::NameTooLong { .. } => Errno::ENAMETOOLONG,
            CgroupError::HierarchyLimit { .. } => Errno::EAGAIN,
            CgroupError::NoMemory { .. } => Errno::ENOMEM,
        }
    }
}

/// Which cgroups have a memory cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MemoryController {
    /// Every cgroup: a hierarchy used as a library (tenants, pools), where
    /// `cgroup.subtree_control` plays no part.
    #[default]
    Everywhere,
    /// The children of cgroups with `memory` in `cgroup.subtree_control`,
    /// as on a cgroup v2 mount (which starts with it nowhere).
    SubtreeControl,
}

/// A controller's state for one cgroup (`struct cgroup_subsys_state`),
/// type-erased: the controller that attached it recovers its type
/// ([`Cgroup::css`]).
pub(crate) type Css = Arc<dyn Any + Send + Sync>;

/// What the cgroup core asks of a controller (the kernel's `cgroup_subsys`
/// ops), called under `cgroup_mutex`. The memory controller implements it.
pub(crate) trait CgroupSubsys: Send + Sync {
    /// Gives `cg` the controller's state and brings it online
    /// (`css_create`: `css_alloc` + `css_online`), attaching it with
    /// [`Cgroup::set_css`]. `path` names `cg` in errors. On an error
    /// nothing of it is left.
    fn css_online(self: Arc<Self>, cg: &Arc<Cgroup>, path: &str) -> Result<(), CgroupError>;

    /// Takes `cg`'s state offline and detaches it (`css_offline`,
    /// `kill_css`); nothing when `cg` has none.
    fn css_offline(self: Arc<Self>, cg: &Cgroup);
}

/// The tasks of a hierarchy, for `cgroup.procs`, `cgroup.threads`,
/// `cgroup.events`, the freezer and the rules that depend on tasks (the
/// cgroup core's css_set links; implemented by the simulator).
pub trait TaskHooks: Send + Sync {
    /// The pids of the tasks in exactly `cg`, ascending.
    fn procs(&self, cg: &Cgroup) -> Vec<u32>;
    /// Moves task `pid` to `cg` (writing `cgroup.procs`); its charges stay
    /// where they are, as in cgroup v2. `ESRCH` if there is no such task.
    fn attach(&self, pid: u32, cg: &Arc<Cgroup>) -> Result<(), Errno>;
    /// Kills every task in `cg`'s subtree (`cgroup.kill`).
    fn kill(&self, cg: &Arc<Cgroup>) {
        let _ = cg;
    }
    /// The task running on this thread (`current`), if a task runs here:
    /// where its memory stalls count, on its CPU.
    fn current_task(&self) -> Option<Arc<PsiTask>> {
        None
    }
    /// The cgroup of the task running on this thread, if a task runs here.
    fn current_cgroup(&self) -> Option<Arc<Cgroup>> {
        self.current_task().map(|t| t.cgroup())
    }
    /// The thread ids of the tasks in exactly `cg` (`cgroup.threads`):
    /// by default one thread per task, its pid.
    fn threads(&self, cg: &Cgroup) -> Vec<u32> {
        self.procs(cg)
    }
    /// The cgroup of task (or thread) `pid`, if there is one.
    fn cgroup_of(&self, pid: u32) -> Option<Arc<Cgroup>> {
        let _ = pid;
        None
    }
    /// Tells every task in exactly `cg` to freeze (`true`) or thaw
    /// (`cgroup_freeze_task` over `cg`'s tasks). Each task reports
    /// stopping and running again through [`CgroupRoot::task_frozen`] and
    /// [`CgroupRoot::task_thawed`]; see the freezer's module docs.
    fn freeze(&self, cg: &Cgroup, freeze: bool) {
        let _ = (cg, freeze);
    }
}

/// No tasks: every cgroup is empty and no pid exists (the default until
/// a simulator installs its own).
pub(crate) struct NoTasks;

impl TaskHooks for NoTasks {
    fn procs(&self, _: &Cgroup) -> Vec<u32> {
        Vec::new()
    }

    fn attach(&self, _: u32, _: &Arc<Cgroup>) -> Result<(), Errno> {
        Err(Errno::ESRCH)
    }
}

/// One directory of the hierarchy. Shared as `Arc<Cgroup>`; see the module
/// docs.
pub struct Cgroup {
    serial: u64,
    name: String,
    level: u32,
    parent: Option<Arc<Cgroup>>,
    children: Mutex<BTreeMap<String, Arc<Cgroup>>>,
    /// Removed by rmdir (a dying cgroup until released).
    removed: AtomicBool,
    /// `memory` in `cgroup.subtree_control`.
    subtree_memory: AtomicBool,
    /// The memory controller's state (the memory cgroup), while it is on
    /// here (`subsys[memory_cgrp_id]`).
    css: Mutex<Option<Css>>,
    mode: MemoryController,
    /// Live descendants (`nr_descendants`).
    nr_descendants: AtomicUsize,
    /// Removed descendants not yet released (`nr_dying_descendants`).
    nr_dying_descendants: AtomicUsize,
    /// Offline memory cgroups not yet released, here and below
    /// (`nr_dying_subsys_memory`).
    nr_dying_css: AtomicUsize,
    /// `cgroup.max.descendants`.
    max_descendants: AtomicU32,
    /// `cgroup.max.depth`.
    max_depth: AtomicU32,
    /// Memory pressure of its tasks and its descendants' (`psi.rs`).
    psi: PsiGroup,
    /// `cgroup.freeze` and the frozen state (`freezer.rs`).
    freezer: Mutex<FreezerState>,
}

impl Cgroup {
    fn new(serial: u64, name: &str, parent: Option<&Arc<Cgroup>>, mode: MemoryController) -> Self {
        Self {
            serial,
            name: name.to_owned(),
            level: parent.map_or(0, |p| p.level + 1),
            parent: parent.cloned(),
            children: Mutex::new(BTreeMap::new()),
            removed: AtomicBool::new(false),
            subtree_memory: AtomicBool::new(false),
            css: Mutex::new(None),
            mode,
            nr_descendants: AtomicUsize::new(0),
            nr_dying_descendants: AtomicUsize::new(0),
            nr_dying_css: AtomicUsize::new(0),
            max_descendants: AtomicU32::new(CGROUP_LIMIT_MAX),
            max_depth: AtomicU32::new(CGROUP_LIMIT_MAX),
            psi: PsiGroup::default(),
            freezer: Mutex::new(FreezerState::default()),
        }
    }

    /// Its memory pressure state (its tasks' and its descendants').
    pub fn psi(&self) -> &PsiGroup {
        &self.psi
    }

    /// A number unique to this cgroup for the tree's life.
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
    pub fn parent(&self) -> Option<&Arc<Cgroup>> {
        self.parent.as_ref()
    }

    /// Whether this is the root cgroup.
    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether rmdir removed it (it may live on as a dying cgroup).
    pub(crate) fn is_removed(&self) -> bool {
        // Acquire: pairs with the Release store in `remove_locked`.
        self.removed.load(Ordering::Acquire)
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

    /// The live child called `name`, if any.
    pub fn child(&self, name: &str) -> Option<Arc<Cgroup>> {
        lock(&self.children).get(name).cloned()
    }

    /// The live children, in creation order (a snapshot).
    pub fn children(&self) -> Vec<Arc<Cgroup>> {
        let mut kids: Vec<_> = lock(&self.children).values().cloned().collect();
        kids.sort_by_key(|c| c.serial);
        kids
    }

    /// The parent, grandparent, ... up to the root.
    pub fn ancestors(&self) -> impl Iterator<Item = &Arc<Cgroup>> {
        std::iter::successors(self.parent.as_ref(), |p| p.parent.as_ref())
    }

    /// This cgroup, then its parent, up to the root.
    pub(crate) fn self_and_ancestors(&self) -> impl Iterator<Item = &Cgroup> {
        std::iter::once(self).chain(self.ancestors().map(|a| &**a))
    }

    /// This cgroup and every live descendant, parents before children
    /// (`css_for_each_descendant_pre`). Each step snapshots one children
    /// list, so concurrent mkdir/rmdir never break the walk: cgroups created
    /// meanwhile may or may not be visited, removed ones may still be.
    pub fn descendants_pre(self: &Arc<Self>) -> DescendantsPre {
        DescendantsPre {
            stack: vec![Arc::clone(self)],
        }
    }

    /// Live descendants (`nr_descendants` of `cgroup.stat`).
    pub fn nr_descendants(&self) -> usize {
        self.nr_descendants.load(Ordering::Relaxed)
    }

    /// Counts a new live descendant (`cgroup_create`).
    fn add_descendant(&self) {
        self.nr_descendants.fetch_add(1, Ordering::Relaxed);
    }

    /// A live descendant was removed: it is dying until released
    /// (`cgroup_destroy_locked`).
    fn remove_descendant(&self) {
        self.nr_descendants.fetch_sub(1, Ordering::Relaxed);
        self.nr_dying_descendants.fetch_add(1, Ordering::Relaxed);
    }

    /// Removed descendants not yet released (`nr_dying_descendants`).
    pub fn nr_dying_descendants(&self) -> usize {
        self.nr_dying_descendants.load(Ordering::Relaxed)
    }

    /// Online memory cgroups here and below (`nr_subsys_memory`): 0 when
    /// this cgroup has none.
    pub fn nr_subsys_memory(self: &Arc<Self>) -> usize {
        if !self.has_css() {
            return 0;
        }
        self.descendants_pre().filter(|c| c.has_css()).count()
    }

    /// Whether the memory controller's state is attached here.
    fn has_css(&self) -> bool {
        lock(&self.css).is_some()
    }

    /// Offline memory cgroups not yet released, of this cgroup and below
    /// (`nr_dying_subsys_memory`).
    pub fn nr_dying_subsys_memory(&self) -> usize {
        self.nr_dying_css.load(Ordering::Relaxed)
    }

    /// Whether this cgroup's `cgroup.subtree_control` has `memory`.
    pub(crate) fn subtree_memory(&self) -> bool {
        // Acquire: pairs with the Release in `set_subtree_memory`.
        self.subtree_memory.load(Ordering::Acquire)
    }

    /// Whether the memory controller is on for this cgroup (it is listed in
    /// `cgroup.controllers`): always for the root and in an `Everywhere`
    /// tree, else when the parent has `+memory` in its subtree control.
    pub(crate) fn memory_enabled(&self) -> bool {
        self.mode == MemoryController::Everywhere
            || self.parent.as_ref().is_none_or(|p| p.subtree_memory())
    }

    /// The memory controller's state here, while it is on here
    /// (`cgroup_css`), as the type the controller gave it; `None` for
    /// another type.
    pub(crate) fn css<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let css = lock(&self.css).clone()?;
        css.downcast::<T>().ok()
    }

    /// Attaches (`Some`) or detaches (`None`) the memory controller's
    /// state; returns what was attached before.
    pub(crate) fn set_css(&self, css: Option<Css>) -> Option<Css> {
        std::mem::replace(&mut *lock(&self.css), css)
    }

    /// A controller state of this cgroup went offline: it counts as dying
    /// here and in every ancestor until released.
    pub(crate) fn count_dying_css(&self) {
        for c in self.self_and_ancestors() {
            c.nr_dying_css.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An offline controller state of this cgroup was released.
    pub(crate) fn uncount_dying_css(&self) {
        for c in self.self_and_ancestors() {
            c.nr_dying_css.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// `cgroup.max.descendants` (`CGROUP_LIMIT_MAX`: no limit).
    pub(crate) fn max_descendants(&self) -> u32 {
        self.max_descendants.load(Ordering::Relaxed)
    }

    /// Sets `cgroup.max.descendants`.
    pub(crate) fn set_max_descendants(&self, max: u32) {
        self.max_descendants
            .store(max.min(CGROUP_LIMIT_MAX), Ordering::Relaxed);
    }

    /// `cgroup.max.depth` (`CGROUP_LIMIT_MAX`: no limit).
    pub(crate) fn max_depth(&self) -> u32 {
        self.max_depth.load(Ordering::Relaxed)
    }

    /// Sets `cgroup.max.depth`.
    pub(crate) fn set_max_depth(&self, max: u32) {
        self.max_depth
            .store(max.min(CGROUP_LIMIT_MAX), Ordering::Relaxed);
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Released: a removed cgroup stops counting as dying. Relaxed: the
        // last `Arc` going orders everything before it.
        if self.removed.load(Ordering::Relaxed) {
            for a in self.ancestors() {
                a.nr_dying_descendants.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl fmt::Debug for Cgroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cgroup")
            .field("path", &self.path())
            .field("removed", &self.is_removed())
            .finish_non_exhaustive()
    }
}

/// Pre-order walk over a subtree; see [`Cgroup::descendants_pre`].
pub struct DescendantsPre {
    stack: Vec<Arc<Cgroup>>,
}

impl Iterator for DescendantsPre {
    type Item = Arc<Cgroup>;

    fn next(&mut self) -> Option<Arc<Cgroup>> {
        let cg = self.stack.pop()?;
        self.stack.extend(cg.children().into_iter().rev());
        Some(cg)
    }
}

/// One hierarchy of cgroups (`struct cgroup_root`) and the cgroup core's
/// operations on it. memcontrol's `CgroupTree` holds one, with the memory
/// controller as its `CgroupSubsys`, and derefs to it: these are the
/// tree's cgroup operations.
pub struct CgroupRoot {
    root: Arc<Cgroup>,
    mode: MemoryController,
    /// The controller (memcontrol's tree, which holds this root).
    subsys: Weak<dyn CgroupSubsys>,
    cgroup_mutex: Mutex<()>,
    /// The freezer's counts and flags change under it (the kernel's
    /// `css_set_lock`; `freezer.rs`).
    freezer_lock: Mutex<()>,
    /// Serials of cgroups and of their controllers' states, one sequence.
    next_serial: AtomicU64,
    /// Behind a mutex held only to clone the `Arc` out, so the hooks run
    /// with no lock of the core held.
    tasks: Mutex<Arc<dyn TaskHooks>>,
}

impl CgroupRoot {
    /// A hierarchy holding only its root cgroup (serial 0), whose
    /// controller `subsys` is called for every cgroup it is on in.
    pub(crate) fn new(mode: MemoryController, subsys: Weak<dyn CgroupSubsys>) -> Self {
        Self {
            root: Arc::new(Cgroup::new(0, "", None, mode)),
            mode,
            subsys,
            cgroup_mutex: Mutex::new(()),
            freezer_lock: Mutex::new(()),
            next_serial: AtomicU64::new(1),
            tasks: Mutex::new(Arc::new(NoTasks)),
        }
    }

    /// The root cgroup.
    pub fn root_cgroup(&self) -> &Arc<Cgroup> {
        &self.root
    }

    /// A serial never handed out before in this hierarchy (cgroups and
    /// controller states draw from one sequence).
    pub(crate) fn next_serial(&self) -> u64 {
        self.next_serial.fetch_add(1, Ordering::Relaxed)
    }

    /// The controller. Reached only through the tree that holds this root,
    /// so it is alive.
    fn subsys(&self) -> Arc<dyn CgroupSubsys> {
        self.subsys
            .upgrade()
            .expect("the controller holds its hierarchy")
    }

    /// Installs the task hooks (`cgroup.procs`, populated-cgroup checks).
    pub fn set_task_hooks(&self, tasks: Arc<dyn TaskHooks>) {
        *lock(&self.tasks) = tasks;
    }

    /// The installed task hooks.
    pub(crate) fn task_hooks(&self) -> Arc<dyn TaskHooks> {
        Arc::clone(&lock(&self.tasks))
    }

    /// Kills every task in `cg`'s subtree (`cgroup.kill`).
    pub(crate) fn kill_tasks(&self, cg: &Arc<Cgroup>) {
        self.task_hooks().kill(cg);
    }

    /// The cgroup at `path` ("/", "/a/b"; a leading `/sys/fs/cgroup` is
    /// accepted; `""` is the root too). Paths are absolute
    /// ([`CgroupError::RelativePath`], `EINVAL`, otherwise); repeated and
    /// trailing slashes are ignored, as the VFS ignores them, here and in
    /// every call that takes a path.
    pub(crate) fn find_cgroup(&self, path: &str) -> Result<Arc<Cgroup>, CgroupError> {
        let mut at = Arc::clone(&self.root);
        for name in components(path)? {
            at = at.child(name).ok_or_else(|| CgroupError::NotFound {
                path: path.to_owned(),
            })?;
        }
        Ok(at)
    }

    /// Creates the cgroup at `path` (its parent must exist; `cgroup_mkdir`),
    /// with a memory cgroup if the controller is on there: always in a
    /// tree in [`MemoryController::Everywhere`] mode, where its
    /// [`memcg`](Cgroup::memcg) is what charges, limits and events are on.
    /// Refused, with nothing created, if it exists ([`CgroupError::Exists`])
    /// or its parent does not ([`CgroupError::NotFound`]).
    pub fn mkdir(&self, path: &str) -> Result<Arc<Cgroup>, CgroupError> {
        let (parent_path, name) = split_last(path)?.ok_or_else(|| CgroupError::Exists {
            path: path.to_owned(),
        })?;
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let parent = self
            .find_cgroup(parent_path)
            .map_err(|_| CgroupError::NotFound {
                path: path.to_owned(),
            })?;
        self.create_locked(&parent, name, path)
    }

    /// Creates `path` and any missing ancestors (`mkdir -p`); returns the
    /// [`Cgroup`] at `path`, which may already have existed (see
    /// [`CgroupRoot::mkdir`]).
    pub fn mkdir_p(&self, path: &str) -> Result<Arc<Cgroup>, CgroupError> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let mut at = Arc::clone(&self.root);
        for name in components(path)? {
            at = match at.child(name) {
                Some(child) => child,
                None => self.create_locked(&at, name, path)?,
            };
        }
        Ok(at)
    }

    /// Creates a child called `name` (a name, not a path) of `parent`:
    /// [`CgroupRoot::mkdir`] for a caller that holds the parent rather
    /// than its path.
    pub fn mkdir_in(&self, parent: &Arc<Cgroup>, name: &str) -> Result<Arc<Cgroup>, CgroupError> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let path = format!("{}/{name}", parent.path().trim_end_matches('/'));
        self.create_locked(parent, name, &path)
    }

    fn create_locked(
        &self,
        parent: &Arc<Cgroup>,
        name: &str,
        path: &str,
    ) -> Result<Arc<Cgroup>, CgroupError> {
        validate_name(name)?;
        if parent.is_removed() {
            return Err(CgroupError::NotFound {
                path: path.to_owned(),
            });
        }
        if parent.child(name).is_some() {
            return Err(CgroupError::Exists {
                path: path.to_owned(),
            });
        }
        self.check_hierarchy_limits(parent, path)?;
        let serial = self.next_serial();
        let cg = Arc::new(Cgroup::new(serial, name, Some(parent), self.mode));
        if cg.memory_enabled() {
            self.subsys().css_online(&cg, path)?;
        }
        self.count_new_cgroup(&cg);
        lock(&parent.children).insert(name.to_owned(), Arc::clone(&cg));
        Ok(cg)
    }

    /// `cgroup_check_hierarchy_limits`: no ancestor-or-self of the new
    /// cgroup's parent may be at its `max.descendants`, or as deep below it
    /// as its `max.depth`.
    fn check_hierarchy_limits(&self, parent: &Arc<Cgroup>, path: &str) -> Result<(), CgroupError> {
        for (depth, at) in parent.self_and_ancestors().enumerate() {
            let limit = if at.nr_descendants() >= at.max_descendants() as usize {
                "descendants"
            } else if depth as u64 >= u64::from(at.max_depth()) {
                "depth"
            } else {
                continue;
            };
            return Err(CgroupError::HierarchyLimit {
                path: path.to_owned(),
                ancestor: at.path(),
                limit,
            });
        }
        Ok(())
    }

    /// Removes the cgroup at `path` (rmdir): it must have no live children
    /// and no tasks.
    pub fn rmdir(&self, path: &str) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let cg = self.find_cgroup(path)?;
        self.remove_locked(&cg, path)
    }

    /// Removes `cg` (see [`CgroupRoot::rmdir`]).
    pub fn remove(&self, cg: &Arc<Cgroup>) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let path = cg.path();
        if cg.is_removed() {
            return Err(CgroupError::NotFound { path });
        }
        self.remove_locked(cg, &path)
    }

    fn remove_locked(&self, cg: &Arc<Cgroup>, path: &str) -> Result<(), CgroupError> {
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
        // Release: pairs with the Acquire in `is_removed`.
        cg.removed.store(true, Ordering::Release);
        self.count_removed_cgroup(cg);
        self.subsys().css_offline(cg);
        lock(&parent.children).remove(&cg.name);
        Ok(())
    }

    /// Writes `+memory` (`true`) or `-memory` to `cg`'s
    /// `cgroup.subtree_control`. Enabling needs the controller on `cg`
    /// itself (`ENOENT`), no task directly in a non-root `cg` (the
    /// no-internal-process rule, `EBUSY`) and a free id for every child;
    /// it gives every child a memory cgroup. Disabling is refused while a
    /// child has `memory` in its own subtree control (`EBUSY`); it takes
    /// the children's memory cgroups offline, and their tasks charge `cg`'s.
    pub(crate) fn set_subtree_memory(
        &self,
        cg: &Arc<Cgroup>,
        enable: bool,
    ) -> Result<(), CgroupError> {
        if self.mode == MemoryController::Everywhere {
            return Err(CgroupError::FixedController);
        }
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        let path = cg.path();
        if cg.is_removed() {
            return Err(CgroupError::NotFound { path });
        }
        if enable == cg.subtree_memory() {
            return Ok(());
        }
        if enable {
            if !cg.memory_enabled() {
                return Err(CgroupError::NoMemoryController { path });
            }
            if !cg.is_root() && !self.procs(cg).is_empty() {
                return Err(CgroupError::Busy {
                    path,
                    reason: "a non-root cgroup with tasks cannot enable controllers for children",
                });
            }
            // Release: pairs with the Acquire in `subtree_memory`.
            cg.subtree_memory.store(true, Ordering::Release);
            let children = cg.children();
            for (i, child) in children.iter().enumerate() {
                if let Err(e) = self.subsys().css_online(child, &child.path()) {
                    // Undo: the new memory cgroups hold nothing yet.
                    for made in &children[..i] {
                        self.subsys().css_offline(made);
                    }
                    cg.subtree_memory.store(false, Ordering::Release);
                    return Err(e);
                }
            }
        } else {
            if cg.children().iter().any(|c| c.subtree_memory()) {
                return Err(CgroupError::Busy {
                    path,
                    reason: "a child has the memory controller in its cgroup.subtree_control",
                });
            }
            cg.subtree_memory.store(false, Ordering::Release);
            for child in cg.children() {
                self.subsys().css_offline(&child);
            }
        }
        Ok(())
    }

    /// The pids of the tasks in `cg`.
    pub fn procs(&self, cg: &Cgroup) -> Vec<u32> {
        let tasks = self.task_hooks();
        tasks.procs(cg)
    }

    /// Whether `cg` or any descendant has a task (`populated` of
    /// `cgroup.events`).
    pub fn populated(&self, cg: &Arc<Cgroup>) -> bool {
        let tasks = self.task_hooks();
        cg.descendants_pre().any(|c| !tasks.procs(&c).is_empty())
    }

    /// The thread ids of the tasks in `cg` (`cgroup.threads`).
    pub fn threads(&self, cg: &Cgroup) -> Vec<u32> {
        self.task_hooks().threads(cg)
    }

    /// Moves thread `tid` alone to `cg` (writing `cgroup.threads`:
    /// `__cgroup_procs_write` with `threadgroup` false). Every cgroup here
    /// is a domain (threaded cgroups are not modelled), so a thread may
    /// only "move" to the cgroup it is in, which changes nothing; in
    /// v6.14's order: `ENODEV` for a removed `cg`, `ESRCH` for no such
    /// thread, `EBUSY` into a non-root cgroup with controllers in its
    /// subtree control (`cgroup_migrate_vet_dst`), `EOPNOTSUPP` for any
    /// other cgroup (`cgroup_attach_permissions`: another domain).
    pub(crate) fn attach_thread(&self, tid: u32, cg: &Arc<Cgroup>) -> Result<(), Errno> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        if cg.is_removed() {
            return Err(Errno::ENODEV);
        }
        let src = self.task_hooks().cgroup_of(tid).ok_or(Errno::ESRCH)?;
        if !cg.is_root() && cg.subtree_memory() {
            return Err(Errno::EBUSY);
        }
        if !Arc::ptr_eq(&src, cg) {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(())
    }

    /// Moves task `pid` to `cg` (writing `cgroup.procs`): refused with
    /// `EBUSY` into a non-root cgroup with controllers in its subtree
    /// control (`cgroup_migrate_vet_dst`).
    pub fn attach(&self, pid: u32, cg: &Arc<Cgroup>) -> Result<(), Errno> {
        let tasks = self.task_hooks();
        self.enter(cg, || tasks.attach(pid, cg))?
    }

    /// Runs `add_task`, which puts a task in `cg` (a fork into it, or a
    /// move), under `cgroup_mutex` once `cg` may take one: it exists
    /// (`ENOENT`) and, unless it is the root, has no controllers in its
    /// subtree control (`EBUSY`, the no-internal-process rule). Holding the
    /// mutex keeps a concurrent rmdir or `+memory` from slipping between
    /// the check and the task.
    pub fn enter<R>(&self, cg: &Arc<Cgroup>, add_task: impl FnOnce() -> R) -> Result<R, Errno> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        if cg.is_removed() {
            return Err(Errno::ENOENT);
        }
        if !cg.is_root() && cg.subtree_memory() {
            return Err(Errno::EBUSY);
        }
        Ok(add_task())
    }
}

impl Drop for CgroupRoot {
    fn drop(&mut self) {
        // Break the cycles that live cgroups form (parent <-> children map,
        // cgroup <-> its controllers' states) so that everything is freed
        // with the hierarchy.
        for cg in self.root.descendants_pre().collect::<Vec<_>>() {
            lock(&cg.children).clear();
            cg.set_css(None);
        }
    }
}

impl fmt::Debug for CgroupRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CgroupRoot")
            .field("mode", &self.mode)
            .field("nr_descendants", &self.root.nr_descendants())
            .finish_non_exhaustive()
    }
}

/// `path` from the hierarchy's root: an absolute path, less a leading
/// `/sys/fs/cgroup` (the mount point); a relative one is refused. The
/// empty path names the root too (as `""` joined with a name is absolute).
fn below_root(path: &str) -> Result<&str, CgroupError> {
    if !path.is_empty() && !path.starts_with('/') {
        return Err(CgroupError::RelativePath {
            path: path.to_owned(),
        });
    }
    Ok(match path.strip_prefix("/sys/fs/cgroup") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    })
}

/// The names along `path`, ignoring empty components (repeated and
/// trailing slashes, as the VFS does).
fn components(path: &str) -> Result<impl Iterator<Item = &str>, CgroupError> {
    Ok(below_root(path)?.split('/').filter(|c| !c.is_empty()))
}

/// `(parent path, last name)` of `path`, trailing slashes ignored; `None`
/// for the root.
fn split_last(path: &str) -> Result<Option<(&str, &str)>, CgroupError> {
    let trimmed = below_root(path)?.trim_end_matches('/');
    Ok(trimmed.rsplit_once('/').and_then(|(dir, name)| {
        let dir = if dir.is_empty() { "/" } else { dir };
        (!name.is_empty()).then_some((dir, name))
    }))
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
