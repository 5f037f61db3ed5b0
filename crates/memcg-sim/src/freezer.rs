//! The task side of the cgroup freezer (kernel/cgroup/freezer.c's
//! `cgroup_freeze_task`, kernel/signal.c's `do_freezer_trap`): how a
//! simulated task stops when its cgroup freezes, and runs again when it
//! thaws.
//!
//! A task told to freeze (the kernel's `JOBCTL_TRAP_FREEZE`) stops at its
//! next freeze point: the start of an operation (`alloc`'s population,
//! `touch`, `pageout`, `free`) and, within one, between faults (each folio
//! `alloc` populates, each block `touch` walks). A task with no operation
//! in flight is idle, as a process asleep in user space is, and stops at
//! once: the kernel wakes such a task straight into the freezer trap. A
//! task counts as frozen (reported to the tree's freezer, which decides
//! `frozen` in `cgroup.events`) once every operation of it waits at a
//! freeze point, and counts as running again the moment it is thawed. A
//! waiting operation does not count as running in pressure accounting
//! (`psi`), as a task asleep in the freezer does not. A kill ends the wait:
//! the operation fails as killed (`cgroup.kill` of a frozen cgroup kills).
//!
//! An adopted host process ([`crate::Sim::adopt_task`]) has no operations
//! here: it counts as frozen as soon as it is told to freeze, and the
//! [`HostTasks`] hook stops it on the host (the FUSE server sends
//! `SIGSTOP`, and `SIGCONT` to thaw).
//!
//! With [`FrozenOps::Refuse`] (a single-threaded driver such as `memcg
//! sh`, where a waiting operation could never be thawed) an operation of a
//! frozen task fails at once with [`SimError::Frozen`] instead, and a
//! freeze requested in the middle of an operation takes effect when it
//! ends.
//!
//! Locking: a task's freezer state has its own mutex, taken before the
//! tree's freezer lock (reports go to the tree with it held, so that the
//! task's cgroup, which only a move under it changes, is the one reported)
//! and before the task's pressure state (a waiting operation stops running
//! with it held, so that it is seen frozen only once it is asleep), and
//! never while holding the simulator's task list.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use memcg::cgroup::Cgroup;

use crate::mm::Task;
use crate::{Inner, SimError, lock};

/// What an operation of a frozen task does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FrozenOps {
    /// Waits until the task is thawed or killed, as a frozen task in the
    /// kernel does.
    #[default]
    Wait,
    /// Fails at once with [`SimError::Frozen`].
    Refuse,
}

/// How the simulator reaches the host processes it adopted.
pub trait HostTasks: Send + Sync {
    /// Stops (`freeze`) or continues adopted process `pid`.
    fn freeze(&self, pid: u32, freeze: bool);
    /// The thread ids of adopted process `pid` (for `cgroup.threads`);
    /// empty if it is gone.
    fn threads(&self, pid: u32) -> Vec<u32>;
}

/// A task's freezer state and the condition its waiting operations
/// sleep on.
#[derive(Debug, Default)]
pub(crate) struct TaskFreezer {
    state: Mutex<State>,
    thawed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Told to freeze (`JOBCTL_TRAP_FREEZE`).
    trap: bool,
    /// Stopped and counted in its cgroup's frozen tasks (`task->frozen`).
    frozen: bool,
    /// Operations in flight (past their first freeze point).
    running: u32,
    /// Of those, waiting at a freeze point.
    parked: u32,
}

impl State {
    /// Whether the task is stopped: told to, and nothing of it runs.
    fn stopped(&self) -> bool {
        self.trap && self.running == self.parked
    }
}

/// An operation of a task in flight; see [`Inner::begin_op`].
pub(crate) struct Running<'a> {
    inner: &'a Inner,
    task: &'a Task,
}

impl Inner {
    /// Tells `task` to freeze or thaw (`cgroup_freeze_task`); a dying task
    /// is left alone, as the kernel leaves one whose signal handlers are
    /// gone.
    pub(crate) fn freeze_task(&self, task: &Task, freeze: bool) {
        if task.is_killed() {
            return;
        }
        let mut state = lock(&task.freezer.state);
        self.set_trap(task, &mut state, freeze);
        drop(state);
        self.tell_host(task, freeze);
    }

    /// Sets the task's trap and settles what follows, with its state
    /// locked: a stopped task reports frozen; a thawed one reports running
    /// and its waiting operations wake.
    fn set_trap(&self, task: &Task, state: &mut State, freeze: bool) {
        state.trap = freeze;
        if freeze {
            self.settle(task, state);
        } else {
            if state.frozen {
                state.frozen = false;
                self.machine.tree().task_thawed(&task.cgroup());
            }
            task.freezer.thawed.notify_all();
        }
    }

    /// Reports `task` frozen if it just stopped.
    fn settle(&self, task: &Task, state: &mut State) {
        if state.stopped() && !state.frozen && !task.is_killed() {
            state.frozen = true;
            self.machine.tree().task_frozen(&task.cgroup());
        }
    }

    /// An adopted host process follows its task's state on the host.
    fn tell_host(&self, task: &Task, freeze: bool) {
        if !task.adopted {
            return;
        }
        let host = lock(&self.host_tasks).clone();
        if let Some(host) = host {
            host.freeze(task.pid, freeze);
        }
    }

    /// A task forked into `cg` (under `cgroup_mutex`, after it joined the
    /// task list): in a freezing cgroup it is told to freeze at once
    /// (`cgroup_post_fork`).
    pub(crate) fn freeze_new_task(&self, task: &Task, cg: &Cgroup) {
        if cg.is_freezing() {
            self.freeze_task(task, true);
        }
    }

    /// Moves `task` to `dst` (a `cgroup.procs` write, under
    /// `cgroup_mutex`): its frozen count goes along, and it then freezes
    /// or thaws as `dst` is (`cgroup_freezer_migrate_task`).
    pub(crate) fn move_task(&self, task: &Task, dst: &Arc<Cgroup>) {
        let mut state = lock(&task.freezer.state);
        let src = task.cgroup();
        let tree = self.machine.tree();
        let ((), freezing) = tree.task_moves(&src, dst, state.frozen, || {
            task.move_to(tree, dst);
        });
        let changed = state.trap != freezing;
        self.set_trap(task, &mut state, freezing);
        drop(state);
        if changed {
            self.tell_host(task, freezing);
        }
    }

    /// Takes `task` off the task list for good (an exit or a kill): a
    /// frozen task runs again first (a kill wakes it), and its waiting
    /// operations wake. False if the list had no such task.
    pub(crate) fn remove_task(&self, task: &Arc<Task>) -> bool {
        let tree = self.machine.tree();
        let mut state = lock(&task.freezer.state);
        if state.frozen {
            state.frozen = false;
            tree.task_thawed(&task.cgroup());
        }
        state.trap = false;
        let removed = tree.task_exits(&task.cgroup(), || {
            let mut tasks = lock(&self.tasks);
            match tasks.get(&task.pid) {
                Some(t) if Arc::ptr_eq(t, task) => tasks.remove(&task.pid).is_some(),
                _ => false,
            }
        });
        task.freezer.thawed.notify_all();
        removed
    }

    /// Starts an operation of `task`: its first freeze point. A frozen
    /// task's operation waits here until it is thawed (or fails at once
    /// with [`FrozenOps::Refuse`]); a killed task's fails.
    pub(crate) fn begin_op<'a>(&'a self, task: &'a Task) -> Result<Running<'a>, SimError> {
        let mut state = lock(&task.freezer.state);
        while state.trap && !task.is_killed() {
            if self.frozen_ops() == FrozenOps::Refuse {
                return Err(SimError::Frozen {
                    pid: task.pid,
                    cgroup: task.cgroup().path(),
                });
            }
            self.settle(task, &mut state);
            state = wait(&task.freezer.thawed, state);
        }
        if task.is_killed() {
            return Err(SimError::Killed { pid: task.pid });
        }
        state.running += 1;
        Ok(Running { inner: self, task })
    }
}

impl Running<'_> {
    /// A freeze point within the operation: if the task was told to
    /// freeze, the operation waits here until it is thawed, not running
    /// meanwhile. True if it waited (the task may have moved meanwhile);
    /// fails if the task is killed.
    pub(crate) fn freeze_point(&self) -> Result<bool, SimError> {
        let (inner, task) = (self.inner, self.task);
        let mut state = lock(&task.freezer.state);
        let waits = state.trap && !task.is_killed() && inner.frozen_ops() == FrozenOps::Wait;
        if waits {
            // Asleep in the freezer: not running (pressure accounting),
            // before it can be seen frozen.
            let sleeping =
                crate::oom_kill::current_task().and_then(|t| inner.machine.tree().psi_sleep(&t));
            state.parked += 1;
            inner.settle(task, &mut state);
            while state.trap && !task.is_killed() {
                state = wait(&task.freezer.thawed, state);
            }
            state.parked -= 1;
            drop(sleeping);
        }
        if task.is_killed() {
            return Err(SimError::Killed { pid: task.pid });
        }
        Ok(waits)
    }
}

impl Drop for Running<'_> {
    /// The operation ends: a task told to freeze meanwhile stops now (it
    /// returns to user space with the trap pending).
    fn drop(&mut self) {
        let mut state = lock(&self.task.freezer.state);
        state.running -= 1;
        self.inner.settle(self.task, &mut state);
    }
}

fn wait<'a>(cv: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    cv.wait(guard).unwrap_or_else(|p| p.into_inner())
}
