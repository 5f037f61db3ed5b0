//! The OOM killer (mm/oom_kill.c, v6.14): when a memory cgroup (or the
//! machine) is out of memory and reclaim cannot help, pick the task whose
//! death frees the most (`oom_badness`) and kill it, with its
//! `memory.oom.group` if one is set.
//!
//! - Candidates: every live task charging into the OOMing subtree (for
//!   the machine: every task), memory cgroups in pre-order and pids
//!   ascending in each (`mem_cgroup_scan_tasks`; ties go to the later).
//! - `oom_badness`: resident pages + swap entries + page-table pages,
//!   plus `oom_score_adj * totalpages / 1000`; `oom_score_adj` -1000
//!   exempts a task. `totalpages` is `memory.max` plus the swap it may use
//!   (`mem_cgroup_get_max`), or the machine plus its swap.
//! - A kill takes the task out of its cgroup at once and reaps its memory
//!   (the oom_reaper's job) wherever no operation holds it; an operation
//!   in flight on a killed task reaps the rest when it ends. The task
//!   whose own charge chose itself sees its charge fail
//!   ([`OomKiller::current_is_dying`]).
//! - `oom_kill` events: one per `__oom_kill_process`, so a victim whose
//!   `memory.oom.group` is killed too counts twice (the group walk meets
//!   it again), as in the kernel.
//!
//! The task charging on a thread is the one an operation announced with
//! [`CurrentTask`] (the kernel's `current`); it also counts as running in
//! its cgroup's pressure meanwhile.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use memcg::cgroup::Cgroup;
use memcg::memcontrol::{CgroupTree, MemCgroup, OomHandler, OomOutcome};
use memcg::psi::{PsiRunning, PsiTask};

use crate::mm::{OOM_SCORE_ADJ_MIN, Task};
use crate::{Inner, lock};

/// What runs on this thread (`current`): a task (or, for an operation
/// made "as a task of a cgroup" with no task behind it, none), and its
/// pressure state.
struct Current {
    task: Option<Arc<Task>>,
    psi: Arc<PsiTask>,
}

thread_local! {
    /// The operation running on this thread, innermost last.
    static CURRENT: RefCell<Vec<Current>> = const { RefCell::new(Vec::new()) };
}

/// Announces the task an operation runs as, for as long as it lives: the
/// task is `current` (the OOM killer's "is the charging task dying?",
/// where its memory stalls count) and runs in its cgroup's pressure, on
/// its CPU, meanwhile. An operation nested in one of the same task on the
/// same thread is the same thread of it: it changes nothing.
pub struct CurrentTask {
    _running: Option<PsiRunning>,
    pushed: bool,
}

impl CurrentTask {
    /// `task` runs on this thread.
    pub(crate) fn enter(tree: &CgroupTree, task: &Arc<Task>) -> Self {
        let nested = CURRENT.with(|c| {
            c.borrow()
                .last()
                .and_then(|cur| cur.task.as_ref())
                .is_some_and(|t| Arc::ptr_eq(t, task))
        });
        if nested {
            return Self {
                _running: None,
                pushed: false,
            };
        }
        // The cgroup stays put while the thread joins the task's threads,
        // so a move either sees it or was made before it read the cgroup.
        let cgroup = lock(&task.cgroup);
        let psi = PsiTask::new(Arc::clone(&cgroup), task.cpu());
        let running = tree.psi_run(&psi);
        {
            let mut threads = lock(&task.threads);
            threads.retain(|t| t.strong_count() > 0);
            threads.push(Arc::downgrade(&psi));
        }
        drop(cgroup);
        Self::push(
            Current {
                task: Some(Arc::clone(task)),
                psi,
            },
            running,
        )
    }

    /// An operation runs on this thread as a short-lived task of `cgroup`
    /// on `cpu` that is nobody the simulator lists (a shell command such
    /// as `memcg sh`'s `read`, the way a `cat` would run). Within an
    /// operation of a task, the operation is that task's: nothing changes.
    pub(crate) fn enter_cgroup(tree: &CgroupTree, cgroup: &Arc<Cgroup>, cpu: usize) -> Self {
        if CURRENT.with(|c| !c.borrow().is_empty()) {
            return Self {
                _running: None,
                pushed: false,
            };
        }
        let psi = PsiTask::new(Arc::clone(cgroup), cpu);
        let running = tree.psi_run(&psi);
        Self::push(Current { task: None, psi }, running)
    }

    fn push(current: Current, running: Option<PsiRunning>) -> Self {
        CURRENT.with(|c| c.borrow_mut().push(current));
        Self {
            _running: running,
            pushed: true,
        }
    }
}

impl Drop for CurrentTask {
    fn drop(&mut self) {
        if self.pushed {
            CURRENT.with(|c| c.borrow_mut().pop());
        }
        // `_running` drops after: the task stops running.
    }
}

/// The pressure state of what runs on this thread, if anything.
pub(crate) fn current_task() -> Option<Arc<PsiTask>> {
    CURRENT.with(|c| c.borrow().last().map(|cur| Arc::clone(&cur.psi)))
}

/// The OOM hook a simulator installs on its tree.
pub(crate) struct OomKiller(pub(crate) Weak<Inner>);

impl OomHandler for OomKiller {
    fn kill(&self, cg: &Arc<MemCgroup>) -> OomOutcome {
        let Some(sim) = self.0.upgrade() else {
            return OomOutcome::NoVictim;
        };
        // A victim of an earlier kill whose memory an operation still
        // holds: wait for it (`oom_evaluate_task` aborts on an OOM victim
        // whose mm is not reaped yet).
        sim.reap_killed();
        if victim_exiting(&sim, cg) {
            return OomOutcome::VictimExiting;
        }
        let Some(victim) = select_victim(&sim, cg) else {
            return OomOutcome::NoVictim;
        };
        let victim_memcg = victim.memcg();
        let group = sim.machine.tree().oom_group(&victim_memcg, cg);
        let mut killed = Vec::new();
        if sim.kill_task(&victim) {
            killed.push(Arc::clone(&victim_memcg));
        }
        if let Some(group) = group {
            // `mem_cgroup_scan_tasks(oom_group, oom_kill_memcg_member)`
            // meets the victim again: in the kernel it is still in its
            // cgroup with its mm (it dies asynchronously), and
            // `oom_kill_memcg_member` does not skip it, so
            // `__oom_kill_process` counts a second `oom_kill` for it.
            // Here it left at once, so that second count is made here.
            if !killed.is_empty() {
                killed.push(victim_memcg);
            }
            for task in tasks_in(&sim, &group) {
                if task.oom_score_adj() != OOM_SCORE_ADJ_MIN && sim.kill_task(&task) {
                    killed.push(task.memcg());
                }
            }
        }
        OomOutcome::Killed(killed)
    }

    fn current_is_dying(&self) -> bool {
        CURRENT.with(|c| {
            c.borrow()
                .last()
                .and_then(|cur| cur.task.as_ref())
                .is_some_and(|t| t.is_killed())
        })
    }
}

/// Whether a killed task of `cg`'s subtree still has memory an operation
/// holds (a mapping waiting to be reaped).
fn victim_exiting(sim: &Inner, cg: &Arc<MemCgroup>) -> bool {
    lock(&sim.killed_mappings)
        .iter()
        .any(|m| cg.is_root() || m.task.memcg().is_descendant_of(cg))
}

/// The live tasks charging into `cg`'s subtree, memory cgroups in
/// pre-order, pids ascending in each.
fn tasks_in(sim: &Inner, cg: &Arc<MemCgroup>) -> Vec<Arc<Task>> {
    let tasks: Vec<Arc<Task>> = lock(&sim.tasks).values().cloned().collect();
    if cg.is_root() {
        return tasks;
    }
    let mut out = Vec::new();
    for m in std::iter::once(Arc::clone(cg)).chain(cg.descendants_pre().skip(1)) {
        out.extend(
            tasks
                .iter()
                .filter(|t| Arc::ptr_eq(&t.memcg(), &m))
                .cloned(),
        );
    }
    out
}

/// `select_bad_process` over `cg`'s subtree.
fn select_victim(sim: &Inner, cg: &Arc<MemCgroup>) -> Option<Arc<Task>> {
    let totalpages = oom_totalpages(sim, cg);
    let mut chosen: Option<(i64, Arc<Task>)> = None;
    for task in tasks_in(sim, cg) {
        let Some(points) = oom_badness(&task, totalpages) else {
            continue;
        };
        if chosen.as_ref().is_none_or(|(best, _)| points >= *best) {
            chosen = Some((points, task));
        }
    }
    chosen.map(|(_, t)| t)
}

impl crate::Sim {
    /// `/proc/PID/oom_score` (`proc_oom_score`): the task's `oom_badness`
    /// against all of the machine's memory and swap, scaled to 0..=2000
    /// (1000 plus its badness in thousandths of that, times 2/3); 0 for a
    /// task the OOM killer never picks. `None` if there is no such task.
    pub fn oom_score(&self, pid: u32) -> Option<u64> {
        let task = self.task(pid)?;
        let totalpages =
            self.inner.machine.tree().machine_pages() + self.inner.machine.swap_space().total_pages;
        let total = i64::try_from(totalpages.max(1)).unwrap_or(i64::MAX);
        let points = oom_badness(&task, totalpages)
            .map_or(0, |badness| (1000 + badness * 1000 / total) * 2 / 3);
        Some(u64::try_from(points).unwrap_or(0))
    }
}

/// `oom_badness`: `None` for a task never to be killed (also an
/// unkillable one: `oom_evaluate_task` skips `oom_unkillable_task`).
pub fn oom_badness(task: &Task, totalpages: u64) -> Option<i64> {
    let adj = task.oom_score_adj();
    if adj == OOM_SCORE_ADJ_MIN || task.is_killed() || task.is_unkillable() {
        return None;
    }
    let mm = &task.mm;
    let points = (mm.resident_pages() + mm.swap_pages() + mm.pgtable_pages()) as i64;
    Some(points + i64::from(adj) * (totalpages / 1000) as i64)
}

/// `oc->totalpages`: for a memory cgroup `mem_cgroup_get_max` (its
/// `memory.max` plus the swap it may use, when swappiness allows swap);
/// for the machine its pages plus every swap slot.
fn oom_totalpages(sim: &Inner, cg: &MemCgroup) -> u64 {
    let tree = sim.machine.tree();
    let swap_total = sim.machine.swap_space().total_pages;
    if cg.is_root() {
        return tree.machine_pages() + swap_total;
    }
    let mut max = cg.memory().max();
    if sim.machine.vm_swappiness() > 0 {
        max = max.saturating_add(cg.swap().max().min(swap_total));
    }
    max.max(1)
}
