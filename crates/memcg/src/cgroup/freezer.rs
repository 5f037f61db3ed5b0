//! The cgroup v2 freezer (kernel/cgroup/freezer.c, v6.14): `cgroup.freeze`
//! and the `frozen` field of `cgroup.events`.
//!
//! Writing 1 to a cgroup's `cgroup.freeze` asks for it to be frozen; the
//! request holds for the whole subtree, so a cgroup is *freezing*
//! (`CGRP_FREEZE`) while it or any ancestor asks (`e_freeze` counts them),
//! and new children of a freezing cgroup start freezing (and frozen, being
//! empty). A freezing cgroup's tasks are told to stop
//! ([`TaskHooks::freeze`]); each one that does reports it
//! ([`CgroupRoot::task_frozen`]), and one thawed reports that
//! ([`CgroupRoot::task_thawed`]). The tasks belong to whoever installed the
//! task hooks (the simulator): how a task stops, and when it counts as
//! frozen, is theirs to say, as `do_freezer_trap` is the task's own doing
//! in the kernel.
//!
//! A cgroup is *frozen* (`CGRP_FROZEN`, `frozen 1` in `cgroup.events`)
//! when it is freezing and all its own tasks are frozen, evaluated as
//! v6.14's `cgroup_update_frozen` does: when a task freezes, thaws, moves
//! or exits, and when `cgroup.freeze` is written to a cgroup none of whose
//! descendants is still unfrozen. Ancestors follow (`cgroup_propagate_frozen`):
//! a freezing ancestor becomes frozen once every descendant is, and any
//! cgroup thawing thaws its ancestors. These are the kernel's rules with
//! its quirks: an ancestor's own tasks are not rechecked when its last
//! descendant freezes, and a cgroup's own tasks freezing do not wait for
//! its descendants.
//!
//! # Invariants
//!
//! - `e_freeze` is the number of cgroups among this one and its ancestors
//!   whose `cgroup.freeze` is 1; `freezing` is `e_freeze > 0`.
//! - `nr_frozen_descendants` counts the live descendants that are frozen;
//!   `nr_frozen_tasks` counts the tasks in exactly this cgroup that
//!   reported freezing and have not reported thawing (a frozen task that
//!   moves takes its count along).
//!
//! # Locking
//!
//! `cgroup.freeze` writes, and the task moves and forks that read
//! `freezing`, run under `cgroup_mutex`. Every change of a count or flag
//! runs under the tree's freezer lock (the kernel's `css_set_lock`), which
//! a caller may also have run its own change under (a task leaving its
//! cgroup's list: see [`CgroupRoot::task_exits`]), so that the task count
//! read through [`TaskHooks::procs`] agrees with `nr_frozen_tasks`. Each
//! cgroup's state has its own mutex, a leaf taken for single reads and
//! writes. Lock order: `cgroup_mutex`, the caller's task locks, the freezer
//! lock, the task hooks' own locks.

use super::{Cgroup, CgroupError, CgroupRoot, TaskHooks};
use crate::sync::{Arc, lock};

/// One cgroup's freezer state (`struct cgroup_freezer_state` and the
/// `CGRP_FREEZE`/`CGRP_FROZEN` flags).
#[derive(Debug, Default)]
pub(crate) struct FreezerState {
    /// `cgroup.freeze` as written (`freezer.freeze`).
    freeze: bool,
    /// This cgroup and ancestors asking (`e_freeze`).
    e_freeze: u32,
    /// Its tasks must freeze (`CGRP_FREEZE`).
    freezing: bool,
    /// Frozen (`CGRP_FROZEN`).
    frozen: bool,
    /// Its own tasks that are frozen (`nr_frozen_tasks`).
    nr_frozen_tasks: usize,
    /// Its live descendants that are frozen (`nr_frozen_descendants`).
    nr_frozen_descendants: usize,
}

impl Cgroup {
    /// What `cgroup.freeze` reads: whether 1 was written here.
    pub(crate) fn freeze_requested(&self) -> bool {
        lock(&self.freezer).freeze
    }

    /// Whether its tasks must freeze (`CGRP_FREEZE`): it or an ancestor
    /// asked.
    pub fn is_freezing(&self) -> bool {
        lock(&self.freezer).freezing
    }

    /// Whether it is frozen (`frozen` of `cgroup.events`, `CGRP_FROZEN`).
    pub(crate) fn is_frozen(&self) -> bool {
        lock(&self.freezer).frozen
    }
}

impl CgroupRoot {
    /// Writes `cgroup.freeze` of `cg` (`cgroup_freeze_write`,
    /// `cgroup_freeze`): the subtree's effective state changes where no
    /// ancestor holds it, and every cgroup whose state changes has its
    /// tasks frozen or thawed. `ENOENT` for a removed cgroup or the root,
    /// which has no `cgroup.freeze`.
    pub(crate) fn set_freeze(&self, cg: &Arc<Cgroup>, freeze: bool) -> Result<(), CgroupError> {
        let _cgroup_mutex = lock(&self.cgroup_mutex);
        if cg.is_removed() {
            return Err(CgroupError::NotFound { path: cg.path() });
        }
        if cg.is_root() {
            return Err(CgroupError::NotOnRoot {
                file: "cgroup.freeze",
            });
        }
        {
            let mut state = lock(&cg.freezer);
            if state.freeze == freeze {
                return Ok(());
            }
            state.freeze = freeze;
        }
        let tasks = self.task_hooks();
        for dsct in cg.descendants_pre() {
            let changed = {
                let mut state = lock(&dsct.freezer);
                if freeze {
                    state.e_freeze += 1;
                    state.e_freeze == 1
                } else {
                    state.e_freeze -= 1;
                    state.e_freeze == 0
                }
            };
            // Otherwise an ancestor keeps it frozen, or it already was.
            if changed {
                self.do_freeze(&dsct, freeze, &*tasks);
            }
        }
        Ok(())
    }

    /// `cgroup_do_freeze`: sets or clears `freezing`, tells the tasks, and
    /// revisits the state of a cgroup none of whose descendants is still
    /// unfrozen (an empty leaf, or one whose subtree already is).
    fn do_freeze(&self, cg: &Cgroup, freeze: bool, tasks: &dyn TaskHooks) {
        {
            let _css_set = lock(&self.freezer_lock);
            lock(&cg.freezer).freezing = freeze;
        }
        tasks.freeze(cg, freeze);
        let _css_set = lock(&self.freezer_lock);
        if lock(&cg.freezer).nr_frozen_descendants == cg.nr_descendants() {
            self.update_frozen(cg, tasks);
        }
    }

    /// `cgroup_update_frozen`, under the freezer lock: frozen when freezing
    /// with every own task frozen; a change goes up to the ancestors.
    fn update_frozen(&self, cg: &Cgroup, tasks: &dyn TaskHooks) {
        let nr_tasks = tasks.procs(cg).len();
        let frozen = {
            let mut state = lock(&cg.freezer);
            let frozen = state.freezing && state.nr_frozen_tasks == nr_tasks;
            if frozen == state.frozen {
                return;
            }
            state.frozen = frozen;
            frozen
        };
        propagate_frozen(cg, frozen);
    }

    /// A task of `cg` stopped at the freezer (`cgroup_enter_frozen`). The
    /// caller keeps the task in `cg` meanwhile and reports each stop once.
    pub fn task_frozen(&self, cg: &Cgroup) {
        let tasks = self.task_hooks();
        let _css_set = lock(&self.freezer_lock);
        lock(&cg.freezer).nr_frozen_tasks += 1;
        self.update_frozen(cg, &*tasks);
    }

    /// A frozen task of `cg` runs again (`cgroup_leave_frozen`): thawed,
    /// or killed (a frozen task dies, and must report this first).
    pub fn task_thawed(&self, cg: &Cgroup) {
        let tasks = self.task_hooks();
        let _css_set = lock(&self.freezer_lock);
        {
            let mut state = lock(&cg.freezer);
            debug_assert!(state.nr_frozen_tasks > 0, "{}: no frozen task", cg.path());
            state.nr_frozen_tasks = state.nr_frozen_tasks.saturating_sub(1);
        }
        self.update_frozen(cg, &*tasks);
    }

    /// A task moves from `src` to `dst` (`cgroup_freezer_migrate_task`):
    /// `apply` moves it in the caller's task list, under the freezer lock;
    /// a frozen task (`frozen`) takes its count along, and both cgroups'
    /// states are revisited. Returns whether `dst` is freezing: the task
    /// must then freeze, else thaw (`cgroup_freeze_task`).
    pub fn task_moves<R>(
        &self,
        src: &Cgroup,
        dst: &Cgroup,
        frozen: bool,
        apply: impl FnOnce() -> R,
    ) -> (R, bool) {
        let tasks = self.task_hooks();
        let _css_set = lock(&self.freezer_lock);
        let moved = apply();
        if frozen {
            lock(&dst.freezer).nr_frozen_tasks += 1;
            let mut state = lock(&src.freezer);
            state.nr_frozen_tasks = state.nr_frozen_tasks.saturating_sub(1);
        }
        self.update_frozen(dst, &*tasks);
        self.update_frozen(src, &*tasks);
        let freezing = lock(&dst.freezer).freezing;
        (moved, freezing)
    }

    /// A task of `cg`, not frozen, leaves for good (`cgroup_exit`):
    /// `remove` takes it off the caller's task list under the freezer lock,
    /// and a freezing `cg` may now be frozen (its last running task gone).
    pub fn task_exits<R>(&self, cg: &Cgroup, remove: impl FnOnce() -> R) -> R {
        let tasks = self.task_hooks();
        let _css_set = lock(&self.freezer_lock);
        let removed = remove();
        if lock(&cg.freezer).freezing {
            self.update_frozen(cg, &*tasks);
        }
        removed
    }

    /// A new cgroup `cg` counts as a descendant of its ancestors, and
    /// inherits its parent's effective freezer state (`cgroup_create`):
    /// under a freezing parent it is freezing, and frozen at once (it is
    /// empty), which its ancestors count too. Under the freezer lock, so
    /// that no freezing ancestor sees the one count without the other.
    pub(super) fn count_new_cgroup(&self, cg: &Cgroup) {
        let _css_set = lock(&self.freezer_lock);
        let e_freeze = cg.parent().map_or(0, |p| lock(&p.freezer).e_freeze);
        if e_freeze > 0 {
            let mut state = lock(&cg.freezer);
            state.e_freeze = e_freeze;
            state.freezing = true;
            state.frozen = true;
        }
        for a in cg.ancestors() {
            a.add_descendant();
            if e_freeze > 0 {
                lock(&a.freezer).nr_frozen_descendants += 1;
            }
        }
    }

    /// `cg` is removed (`cgroup_destroy_locked`): its ancestors lose a
    /// live descendant (it is dying until released), and a frozen one if
    /// it was frozen.
    pub(super) fn count_removed_cgroup(&self, cg: &Cgroup) {
        let _css_set = lock(&self.freezer_lock);
        let frozen = lock(&cg.freezer).frozen;
        for a in cg.ancestors() {
            a.remove_descendant();
            if frozen {
                let mut state = lock(&a.freezer);
                state.nr_frozen_descendants = state.nr_frozen_descendants.saturating_sub(1);
            }
        }
    }
}

/// `cgroup_propagate_frozen`: a frozen `cg` may complete a freezing
/// ancestor (every descendant frozen), which may complete the next; a
/// thawed one thaws every frozen ancestor. `desc` is how many cgroups of
/// the path just changed, which each ancestor above counts.
fn propagate_frozen(cg: &Cgroup, frozen: bool) {
    let mut desc = 1;
    for a in cg.ancestors() {
        let mut state = lock(&a.freezer);
        if frozen {
            state.nr_frozen_descendants += desc;
            if !state.frozen && state.freezing && state.nr_frozen_descendants == a.nr_descendants()
            {
                state.frozen = true;
                desc += 1;
            }
        } else {
            state.nr_frozen_descendants = state.nr_frozen_descendants.saturating_sub(desc);
            if state.frozen {
                state.frozen = false;
                desc += 1;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::cgroup::MemoryController;
    use crate::errno::Errno;
    use crate::memcontrol::{CgroupTree, TreeConfig};
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// A task of [`Tasks`]: where it is, whether an operation of it is in
    /// flight (it stops only at its next freeze point), told to freeze,
    /// stopped.
    pub(super) struct Task {
        pub(super) cg: Arc<Cgroup>,
        pub(super) busy: bool,
        pub(super) trap: bool,
        pub(super) frozen: bool,
    }

    /// Tasks as a simulator keeps them, reporting to the tree as the
    /// freezer's module docs ask: an idle task stops at once, a busy one
    /// when the test says it reached a freeze point.
    #[derive(Default)]
    pub(super) struct Tasks {
        pub(super) tasks: Mutex<BTreeMap<u32, Task>>,
        /// Cleared at the end of a test (the tree holds these hooks).
        pub(super) tree: Mutex<Option<CgroupTree>>,
    }

    enum Report {
        Frozen(Arc<Cgroup>),
        Thawed(Arc<Cgroup>),
    }

    impl Tasks {
        fn tree(&self) -> CgroupTree {
            lock(&self.tree).clone().expect("set")
        }

        fn report(&self, reports: Vec<Report>) {
            let tree = self.tree();
            for r in reports {
                match r {
                    Report::Frozen(cg) => tree.task_frozen(&cg),
                    Report::Thawed(cg) => tree.task_thawed(&cg),
                }
            }
        }

        pub(super) fn spawn(&self, pid: u32, cg: &Arc<Cgroup>, busy: bool) {
            let freezing = cg.is_freezing();
            lock(&self.tasks).insert(
                pid,
                Task {
                    cg: Arc::clone(cg),
                    busy,
                    trap: freezing,
                    frozen: false,
                },
            );
            if freezing && !busy {
                lock(&self.tasks).get_mut(&pid).unwrap().frozen = true;
                self.report(vec![Report::Frozen(Arc::clone(cg))]);
            }
        }

        /// The busy task `pid` reaches a freeze point (or ends its
        /// operation).
        pub(super) fn freeze_point(&self, pid: u32) {
            let report = {
                let mut tasks = lock(&self.tasks);
                let t = tasks.get_mut(&pid).unwrap();
                t.busy = false;
                (t.trap && !t.frozen).then(|| {
                    t.frozen = true;
                    Report::Frozen(Arc::clone(&t.cg))
                })
            };
            self.report(report.into_iter().collect());
        }

        pub(super) fn exit(&self, pid: u32) {
            let tree = self.tree();
            let (cg, frozen) = {
                let tasks = lock(&self.tasks);
                let t = &tasks[&pid];
                (Arc::clone(&t.cg), t.frozen)
            };
            if frozen {
                tree.task_thawed(&cg);
            }
            tree.task_exits(&cg, || lock(&self.tasks).remove(&pid));
        }

        pub(super) fn move_to(&self, pid: u32, dst: &Arc<Cgroup>) {
            let tree = self.tree();
            let (src, frozen, busy) = {
                let tasks = lock(&self.tasks);
                let t = &tasks[&pid];
                (Arc::clone(&t.cg), t.frozen, t.busy)
            };
            let ((), freezing) = tree.task_moves(&src, dst, frozen, || {
                lock(&self.tasks).get_mut(&pid).unwrap().cg = Arc::clone(dst);
            });
            let report = {
                let mut tasks = lock(&self.tasks);
                let t = tasks.get_mut(&pid).unwrap();
                t.trap = freezing;
                if freezing && !busy && !t.frozen {
                    t.frozen = true;
                    Some(Report::Frozen(Arc::clone(dst)))
                } else if !freezing && t.frozen {
                    t.frozen = false;
                    Some(Report::Thawed(Arc::clone(dst)))
                } else {
                    None
                }
            };
            self.report(report.into_iter().collect());
        }
    }

    impl TaskHooks for Tasks {
        fn procs(&self, cg: &Cgroup) -> Vec<u32> {
            lock(&self.tasks)
                .iter()
                .filter(|(_, t)| std::ptr::eq(&*t.cg, cg))
                .map(|(&pid, _)| pid)
                .collect()
        }

        fn attach(&self, _: u32, _: &Arc<Cgroup>) -> Result<(), Errno> {
            Err(Errno::ESRCH)
        }

        fn freeze(&self, cg: &Cgroup, freeze: bool) {
            let reports: Vec<Report> = lock(&self.tasks)
                .values_mut()
                .filter(|t| std::ptr::eq(&*t.cg, cg))
                .filter_map(|t| {
                    t.trap = freeze;
                    if freeze && !t.busy && !t.frozen {
                        t.frozen = true;
                        Some(Report::Frozen(Arc::clone(&t.cg)))
                    } else if !freeze && t.frozen {
                        t.frozen = false;
                        Some(Report::Thawed(Arc::clone(&t.cg)))
                    } else {
                        None
                    }
                })
                .collect();
            self.report(reports);
        }
    }

    pub(super) fn setup() -> (CgroupTree, Arc<Tasks>) {
        let tree = CgroupTree::new(TreeConfig {
            memory: MemoryController::SubtreeControl,
            ..TreeConfig::default()
        });
        let tasks = Arc::new(Tasks::default());
        *lock(&tasks.tree) = Some(tree.clone());
        tree.set_task_hooks(Arc::clone(&tasks) as Arc<dyn TaskHooks>);
        (tree, tasks)
    }

    fn frozen(cgs: &[&Arc<Cgroup>]) -> Vec<bool> {
        cgs.iter().map(|c| c.is_frozen()).collect()
    }

    #[test]
    fn an_empty_cgroup_freezes_at_once_and_its_children_inherit() {
        let (t, tasks) = setup();
        let a = t.mkdir("/a").unwrap();
        t.set_freeze(&a, true).unwrap();
        assert!(a.freeze_requested() && a.is_freezing() && a.is_frozen());
        // A child of a freezing cgroup is born freezing and frozen, and its
        // parent stays frozen.
        let b = t.mkdir("/a/b").unwrap();
        assert!(!b.freeze_requested() && b.is_freezing());
        assert_eq!(frozen(&[&a, &b]), [true, true]);
        // A task forked into the frozen child stops at once (idle).
        tasks.spawn(7, &b, false);
        assert_eq!(frozen(&[&a, &b]), [true, true]);
        t.set_freeze(&a, false).unwrap();
        assert_eq!(frozen(&[&a, &b]), [false, false]);
        assert!(!b.is_freezing());
        assert!(!lock(&tasks.tasks)[&7].frozen, "thawed");
        tasks.exit(7);
        assert_eq!(
            t.set_freeze(t.root_cgroup(), true).unwrap_err().errno(),
            Errno::ENOENT,
            "the root has no cgroup.freeze"
        );
        *lock(&tasks.tree) = None;
    }

    #[test]
    fn frozen_waits_for_a_busy_task_to_reach_its_freeze_point() {
        let (t, tasks) = setup();
        let a = t.mkdir("/a").unwrap();
        tasks.spawn(1, &a, false);
        tasks.spawn(2, &a, true);
        t.set_freeze(&a, true).unwrap();
        assert!(lock(&tasks.tasks)[&1].frozen, "an idle task stops at once");
        assert!(!a.is_frozen(), "task 2 is still running");
        tasks.freeze_point(2);
        assert!(a.is_frozen());
        // Writing the same value again changes nothing.
        t.set_freeze(&a, true).unwrap();
        assert!(a.is_frozen());
        t.set_freeze(&a, false).unwrap();
        assert!(!a.is_frozen());
        assert!(lock(&tasks.tasks).values().all(|t| !t.frozen && !t.trap));
        // A busy task's exit completes a freeze.
        lock(&tasks.tasks).get_mut(&2).unwrap().busy = true;
        t.set_freeze(&a, true).unwrap();
        assert!(!a.is_frozen());
        tasks.exit(2);
        assert!(a.is_frozen(), "the only running task is gone");
        // A frozen task killed: it leaves the frozen state, then exits.
        tasks.exit(1);
        assert!(a.is_frozen(), "empty and freezing");
        *lock(&tasks.tasks) = BTreeMap::new();
        *lock(&tasks.tree) = None;
    }

    #[test]
    fn freezing_is_hierarchical_and_ancestors_follow() {
        let (t, tasks) = setup();
        let p = t.mkdir("/p").unwrap();
        let c = t.mkdir("/p/c").unwrap();
        let d = t.mkdir("/p/c/d").unwrap();
        let other = t.mkdir("/other").unwrap();
        tasks.spawn(1, &c, false);
        tasks.spawn(2, &d, true);
        t.set_freeze(&p, true).unwrap();
        assert!(c.is_freezing() && d.is_freezing() && !other.is_freezing());
        assert_eq!(frozen(&[&p, &c, &d]), [false, true, false]);
        tasks.freeze_point(2);
        assert_eq!(frozen(&[&p, &c, &d]), [true, true, true]);
        // Its own request keeps `c` frozen when `p` thaws.
        t.set_freeze(&c, true).unwrap();
        t.set_freeze(&p, false).unwrap();
        assert_eq!(frozen(&[&p, &c, &d]), [false, true, true]);
        assert!(c.is_freezing() && !c.parent().unwrap().is_freezing());
        // A descendant thawing thaws its frozen ancestors.
        t.set_freeze(&p, true).unwrap();
        assert!(p.is_frozen());
        t.set_freeze(&c, false).unwrap();
        assert_eq!(frozen(&[&p, &c, &d]), [true, true, true], "p still holds");
        t.set_freeze(&p, false).unwrap();
        assert_eq!(frozen(&[&p, &c, &d]), [false, false, false]);
        tasks.exit(1);
        tasks.exit(2);
        *lock(&tasks.tree) = None;
    }

    /// v6.14 decides a cgroup's own `frozen` from its own tasks alone
    /// (`cgroup_update_frozen`), and on a thaw revisits a cgroup only if
    /// every descendant is frozen (`cgroup_do_freeze`). So a cgroup with
    /// both tasks and children (allowed with no controller in its
    /// `subtree_control`) reads frozen while a child is still running, and
    /// can keep reading frozen after its thaw. Replicated as the kernel
    /// has it.
    #[test]
    fn a_cgroup_with_tasks_and_children_has_the_kernels_quirks() {
        let (t, tasks) = setup();
        let p = t.mkdir("/p").unwrap();
        let c = t.mkdir("/p/c").unwrap();
        tasks.spawn(1, &p, false);
        tasks.spawn(2, &c, true);
        t.set_freeze(&p, true).unwrap();
        assert_eq!(frozen(&[&p, &c]), [true, false], "c's task still runs");
        tasks.exit(1);
        assert_eq!(frozen(&[&p, &c]), [true, false]);
        t.set_freeze(&p, false).unwrap();
        assert!(!p.is_freezing());
        assert_eq!(frozen(&[&p, &c]), [true, false], "a stale frozen 1");
        tasks.exit(2);
        *lock(&tasks.tree) = None;
    }

    #[test]
    fn moves_freeze_and_thaw_and_removed_children_uncount() {
        let (t, tasks) = setup();
        let a = t.mkdir("/a").unwrap();
        let b = t.mkdir("/b").unwrap();
        tasks.spawn(1, &a, false);
        tasks.spawn(2, &a, false);
        t.set_freeze(&b, true).unwrap();
        assert!(b.is_frozen());
        // Moved into a frozen cgroup, a task freezes.
        tasks.move_to(1, &b);
        assert!(lock(&tasks.tasks)[&1].frozen);
        assert!(b.is_frozen());
        // Moved out, it thaws (its count goes along and back).
        tasks.move_to(1, &a);
        assert!(!lock(&tasks.tasks)[&1].frozen);
        assert!(b.is_frozen(), "empty again");
        // A frozen child leaving takes its count from the parent.
        let p = t.mkdir("/p").unwrap();
        let c1 = t.mkdir("/p/c1").unwrap();
        let c2 = t.mkdir("/p/c2").unwrap();
        tasks.spawn(3, &c2, true);
        t.set_freeze(&p, true).unwrap();
        assert_eq!(frozen(&[&p, &c1, &c2]), [false, true, false]);
        t.rmdir("/p/c1").unwrap();
        assert_eq!(lock(&p.freezer).nr_frozen_descendants, 0);
        tasks.freeze_point(3);
        assert!(p.is_frozen());
        tasks.exit(1);
        tasks.exit(2);
        tasks.exit(3);
        *lock(&tasks.tree) = None;
    }
}

#[cfg(all(test, not(loom)))]
mod model {
    //! Random sequences of everything that changes the freezer's state,
    //! with tasks that stop at once when idle and at a freeze point when
    //! busy; after every step the counts agree with what they count, and
    //! once no task is busy every cgroup is frozen exactly when freezing.
    //! Tasks live in leaves (and the root, which never freezes), the shape
    //! the no-internal-process rule gives: a cgroup with tasks and
    //! children has the kernel's quirks (see
    //! `a_cgroup_with_tasks_and_children_has_the_kernels_quirks`).
    use super::tests::{Tasks, setup};
    use super::*;
    use crate::memcontrol::CgroupTree;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Mkdir(usize),
        Rmdir(usize),
        Spawn(usize, bool),
        /// A busy task reaches a freeze point, or an idle one not told to
        /// freeze starts an operation.
        Step(usize),
        Exit(usize),
        Move(usize, usize),
        Freeze(usize, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..8usize).prop_map(Op::Mkdir),
            (0..8usize).prop_map(Op::Rmdir),
            (0..8usize, any::<bool>()).prop_map(|(c, b)| Op::Spawn(c, b)),
            (0..16usize).prop_map(Op::Step),
            (0..16usize).prop_map(Op::Exit),
            (0..16usize, 0..8usize).prop_map(|(t, c)| Op::Move(t, c)),
            (0..8usize, any::<bool>()).prop_map(|(c, f)| Op::Freeze(c, f)),
            (0..8usize, any::<bool>()).prop_map(|(c, f)| Op::Freeze(c, f)),
        ]
    }

    fn check(t: &CgroupTree, tasks: &Tasks) {
        let all: Vec<Arc<Cgroup>> = t.root_cgroup().descendants_pre().collect();
        let model = lock(&tasks.tasks);
        let mut quiet = true;
        for cg in &all {
            let requested = cg.self_and_ancestors().any(Cgroup::freeze_requested);
            let state = lock(&cg.freezer);
            assert_eq!(state.freezing, requested, "{}", cg.path());
            let frozen_descendants = cg
                .descendants_pre()
                .skip(1)
                .filter(|d| d.is_frozen())
                .count();
            assert_eq!(
                state.nr_frozen_descendants,
                frozen_descendants,
                "{}",
                cg.path()
            );
            let own: Vec<_> = model
                .values()
                .filter(|task| std::ptr::eq(&*task.cg, &**cg))
                .collect();
            assert_eq!(
                state.nr_frozen_tasks,
                own.iter().filter(|task| task.frozen).count(),
                "{}",
                cg.path()
            );
            for task in own {
                assert_eq!(task.trap, state.freezing, "{}", cg.path());
                quiet &= !task.busy;
            }
        }
        if quiet {
            for cg in &all {
                assert_eq!(cg.is_frozen(), cg.is_freezing(), "quiet: {}", cg.path());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn counts_stay_true_and_quiet_cgroups_are_frozen_iff_freezing(
            ops in prop::collection::vec(op(), 1..60)
        ) {
            let (t, tasks) = setup();
            let mut next = 0u32;
            let pick = |i: usize| {
                let all: Vec<Arc<Cgroup>> = t.root_cgroup().descendants_pre().collect();
                Arc::clone(&all[i % all.len()])
            };
            let task_at = |i: usize| {
                let pids: Vec<u32> = lock(&tasks.tasks).keys().copied().collect();
                (!pids.is_empty()).then(|| pids[i % pids.len()])
            };
            for op in ops {
                match op {
                    Op::Mkdir(c) => {
                        next += 1;
                        let parent = pick(c);
                        if parent.is_root() || t.procs(&parent).is_empty() {
                            t.mkdir(&format!("{}/c{next}", parent.path().trim_end_matches('/')))
                                .unwrap();
                        }
                    }
                    Op::Rmdir(c) => {
                        let cg = pick(c);
                        if !cg.is_root() && cg.children().is_empty() && t.procs(&cg).is_empty() {
                            t.rmdir(&cg.path()).unwrap();
                        }
                    }
                    Op::Spawn(c, busy) => {
                        next += 1;
                        let cg = pick(c);
                        if cg.is_root() || cg.children().is_empty() {
                            tasks.spawn(next, &cg, busy);
                        }
                    }
                    Op::Step(i) => {
                        if let Some(pid) = task_at(i) {
                            let (busy, trap) = {
                                let model = lock(&tasks.tasks);
                                (model[&pid].busy, model[&pid].trap)
                            };
                            if busy {
                                tasks.freeze_point(pid);
                            } else if !trap {
                                lock(&tasks.tasks).get_mut(&pid).unwrap().busy = true;
                            }
                        }
                    }
                    Op::Exit(i) => {
                        if let Some(pid) = task_at(i) {
                            tasks.exit(pid);
                        }
                    }
                    Op::Move(i, c) => {
                        let cg = pick(c);
                        if let Some(pid) = task_at(i)
                            && (cg.is_root() || cg.children().is_empty())
                        {
                            tasks.move_to(pid, &cg);
                        }
                    }
                    Op::Freeze(c, freeze) => {
                        let cg = pick(c);
                        if !cg.is_root() {
                            t.set_freeze(&cg, freeze).unwrap();
                        }
                    }
                }
                check(&t, &tasks);
            }
            *lock(&tasks.tasks) = Default::default();
            *lock(&tasks.tree) = None;
        }
    }
}
