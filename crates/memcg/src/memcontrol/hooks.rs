//! The hooks through which the memory controller calls out to what lies
//! above it: reclaim (vmscan's job, installed by the machine) and the
//! OOM killer (`mem_cgroup_out_of_memory`); the tasks of a hierarchy
//! are the cgroup core's ([`TaskHooks`](crate::cgroup::TaskHooks)).
//!
//! A bare [`CgroupTree`] starts with null hooks: no reclaim
//! ([`NoReclaim`]: a charge over a limit finds nothing to free) and
//! nobody to kill ([`NoOomVictim`]). A
//! [`Machine`](crate::machine::Machine) installs the one reclaimer, `vmscan`
//! with its swap space. Installing a hook replaces it for every later
//! call; a call in progress finishes with the hook it started with.
//!
//! Locking: the hooks sit behind one mutex, held only to clone an `Arc`
//! out, so a hook runs with no memcontrol lock held and may call back into
//! the tree (reclaim uncharges, a kill frees pages).

use super::{Cgroup, CgroupTree, MemCgroup};
use crate::clock::{Clock, RealClock};
use crate::psi::{Memstall, PsiRunning, PsiTask};
use crate::sync::{Arc, lock};

/// How a reclaim may work (the `reclaim_options` and proactive
/// swappiness memcg reclaim is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReclaimOptions {
    /// May swap anonymous pages (`MEMCG_RECLAIM_MAY_SWAP`).
    pub may_swap: bool,
    /// Asked for by `memory.reclaim` (`MEMCG_RECLAIM_PROACTIVE`).
    pub proactive: bool,
    /// Overrides `vm.swappiness` for this reclaim (`memory.reclaim`'s
    /// `swappiness=`); the machine's reclaimer fills in its
    /// `vm.swappiness` when none is given.
    pub swappiness: Option<u32>,
    /// Run by kswapd (`current_is_kswapd()`): one `balance_pgdat` run
    /// over the machine (the target is the root, the page count the high
    /// watermark), counted as `pgscan_kswapd`/`pgsteal_kswapd`.
    pub kswapd: bool,
}

impl Default for ReclaimOptions {
    /// What a charge over a limit asks for: may swap, not proactive.
    fn default() -> Self {
        Self {
            may_swap: true,
            proactive: false,
            swappiness: None,
            kswapd: false,
        }
    }
}

/// Frees memory of a cgroup (vmscan's memcg reclaim). A tree
/// without one installed frees nothing; a
/// [`Machine`](crate::machine::Machine) installs `vmscan`'s.
pub trait MemcgReclaim: Send + Sync {
    /// Tries to free `nr_pages` charged to `cg`'s subtree; returns the
    /// pages freed. `nr_pages` may be below `SWAP_CLUSTER_MAX` (even 0 for
    /// the last batches of `memory.reclaim`): reclaim aims for at least
    /// that many, as the kernel's does.
    fn reclaim(&self, cg: &Arc<MemCgroup>, nr_pages: u64, opts: ReclaimOptions) -> u64;
}

/// What the OOM killer did (`out_of_memory`'s result and why).
#[derive(Debug)]
pub enum OomOutcome {
    /// Killed: the memory cgroup of every task killed, once per
    /// `__oom_kill_process` (each gets an `oom_kill` event; a victim whose
    /// group is killed too appears twice, as in the kernel).
    Killed(Vec<Arc<MemCgroup>>),
    /// An earlier victim in the subtree has not freed its memory yet
    /// (`oom_evaluate_task`'s abort on `tsk_is_oom_victim`): no kill, the
    /// charge retries.
    VictimExiting,
    /// Nobody to kill.
    NoVictim,
}

/// Picks and kills a task when a cgroup (or, at the root, the machine)
/// is out of memory (`mem_cgroup_out_of_memory`, `out_of_memory`).
pub trait OomHandler: Send + Sync {
    /// Kills a task in `cg`'s subtree, and with it its OOM group (see
    /// [`CgroupTree::oom_group`]).
    fn kill(&self, cg: &Arc<MemCgroup>) -> OomOutcome;

    /// Whether the task charging on this thread has been killed
    /// (`task_is_dying`): its charge then fails rather than retrying.
    fn current_is_dying(&self) -> bool {
        false
    }
}

/// No reclaim: nothing is ever freed (the default until a machine
/// installs its reclaimer).
pub(crate) struct NoReclaim;

impl MemcgReclaim for NoReclaim {
    fn reclaim(&self, _: &Arc<MemCgroup>, _: u64, _: ReclaimOptions) -> u64 {
        0
    }
}

/// No OOM victim: there is never a task to kill (the default).
pub(crate) struct NoOomVictim;

impl OomHandler for NoOomVictim {
    fn kill(&self, _: &Arc<MemCgroup>) -> OomOutcome {
        OomOutcome::NoVictim
    }
}

/// The tree's reclaim and OOM hooks, and its clock.
pub(crate) struct Hooks {
    reclaim: Arc<dyn MemcgReclaim>,
    oom: Arc<dyn OomHandler>,
    clock: Arc<dyn Clock>,
}

impl Default for Hooks {
    fn default() -> Self {
        Self {
            reclaim: Arc::new(NoReclaim),
            oom: Arc::new(NoOomVictim),
            clock: Arc::new(RealClock::default()),
        }
    }
}

/// kswapd at work: it runs, stalled on memory, in the root cgroup; see
/// [`CgroupTree::kswapd_stall`].
pub(super) struct KswapdStall {
    _stall: Option<Memstall>,
    _running: Option<PsiRunning>,
}

impl CgroupTree {
    /// Installs the reclaim hook charging calls when a limit is hit.
    pub(crate) fn set_reclaimer(&self, reclaim: Arc<dyn MemcgReclaim>) {
        lock(&self.shared.hooks).reclaim = reclaim;
    }

    /// Installs the OOM hook.
    pub fn set_oom_handler(&self, oom: Arc<dyn OomHandler>) {
        lock(&self.shared.hooks).oom = oom;
    }

    /// Installs the clock throttled tasks sleep on (a [`RealClock`] by
    /// default).
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        lock(&self.shared.hooks).clock = clock;
    }

    /// The tree's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&lock(&self.shared.hooks).clock)
    }

    /// Reclaims `nr_pages` from `cg`'s subtree through the installed
    /// reclaimer (none on a bare tree: see the module docs).
    pub(super) fn reclaim_memcg(
        &self,
        cg: &Arc<MemCgroup>,
        nr_pages: u64,
        opts: ReclaimOptions,
    ) -> u64 {
        let reclaimer = Arc::clone(&lock(&self.shared.hooks).reclaim);
        reclaimer.reclaim(cg, nr_pages, opts)
    }

    pub(super) fn oom_handler(&self) -> Arc<dyn OomHandler> {
        Arc::clone(&lock(&self.shared.hooks).oom)
    }

    /// `memory.pressure` of `cg` (of the whole machine for the root:
    /// `/proc/pressure/memory`).
    pub fn memory_pressure(&self, cg: &Cgroup) -> String {
        cg.psi().show(self.clock().now())
    }

    /// Marks the task running on this thread as stalled on memory until
    /// the guard drops (`psi_memstall_enter`/`_leave`); `running`: it keeps
    /// running meanwhile (reclaim), or sleeps (a throttle, a read). Nothing
    /// when no task runs here, or it is stalled already.
    pub(crate) fn memstall(&self, running: bool) -> Option<Memstall> {
        let task = self.task_hooks().current_task()?;
        self.memstall_of(&task, running)
    }

    /// kswapd wakes and balances (`balance_pgdat` in a memory stall): a
    /// task of the root cgroup, running and stalled until the guard
    /// drops. It runs on the CPU after the waker's (the scheduler puts a
    /// woken kthread on an idle CPU where there is one), or CPU 0.
    pub(super) fn kswapd_stall(&self) -> KswapdStall {
        let nr_cpus = self.nr_cpus() as usize;
        let cpu = self
            .task_hooks()
            .current_task()
            .map_or(0, |t| (t.cpu() + 1) % nr_cpus);
        let kswapd = PsiTask::new(Arc::clone(self.root().cgroup()), cpu);
        let running = self.psi_run(&kswapd);
        KswapdStall {
            _stall: self.memstall_of(&kswapd, true),
            _running: running,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cgroup::TaskHooks;
    use crate::clock::VirtualClock;
    use crate::errno::Errno;
    use crate::memcontrol::TreeConfig;

    /// One task, running on every thread.
    struct OneTask(Arc<PsiTask>);

    impl TaskHooks for OneTask {
        fn procs(&self, _: &Cgroup) -> Vec<u32> {
            Vec::new()
        }

        fn attach(&self, _: u32, _: &Arc<Cgroup>) -> Result<(), Errno> {
            Err(Errno::ESRCH)
        }

        fn current_task(&self) -> Option<Arc<PsiTask>> {
            Some(Arc::clone(&self.0))
        }
    }

    #[test]
    fn a_stall_counts_where_the_task_is_and_moves_with_it() {
        let tree = CgroupTree::new(TreeConfig::default());
        let clock = Arc::new(VirtualClock::default());
        tree.set_clock(clock.clone());
        let (a, b) = (tree.mkdir("/a").unwrap(), tree.mkdir("/b").unwrap());
        let task = PsiTask::new(Arc::clone(&a), 1);
        let running = tree.psi_run(&task).expect("not running yet");
        assert!(tree.psi_run(&task).is_none(), "running already");
        tree.set_task_hooks(Arc::new(OneTask(Arc::clone(&task))));
        let stall = tree.memstall(true).expect("a task runs here");
        assert!(tree.memstall(false).is_none(), "nested stalls count once");
        clock.advance(Duration::from_millis(100));
        tree.psi_move(&task, &b);
        assert!(Arc::ptr_eq(&task.cgroup(), &b));
        clock.advance(Duration::from_millis(100));
        drop(stall);
        clock.advance(Duration::from_millis(100));
        drop(running);
        let now = clock.now();
        assert_eq!(a.psi().total_us(now), (100_000, 100_000));
        assert_eq!(b.psi().total_us(now), (100_000, 100_000));
        assert_eq!(tree.root().cgroup().psi().total_us(now), (200_000, 200_000));
    }

    #[test]
    fn a_sleeping_stall_stops_the_task_running() {
        // One task sleeps in a stall on CPU 0 while another runs on CPU
        // 1: half the machine's potential is lost (some = full = 50 %).
        let tree = CgroupTree::new(TreeConfig::default());
        let clock = Arc::new(VirtualClock::default());
        tree.set_clock(clock.clone());
        let a = tree.mkdir("/a").unwrap();
        let sleeper = PsiTask::new(Arc::clone(&a), 0);
        let worker = PsiTask::new(Arc::clone(&a), 1);
        let _r1 = tree.psi_run(&sleeper);
        let _r2 = tree.psi_run(&worker);
        let stall = tree.memstall_of(&sleeper, false);
        clock.advance(Duration::from_secs(1));
        drop(stall);
        assert_eq!(a.psi().total_us(clock.now()), (500_000, 500_000));
    }
}
