//! Host processes as simulated tasks.
//!
//! A process that writes its pid to a mounted `cgroup.procs`, or makes a
//! request of the mount, becomes a task of the simulator with its own pid
//! (the simulator numbers its own tasks from `PID_MAX_LIMIT` up, where no
//! host pid reaches). A process the simulator has not seen is put where
//! fork would have put it: in the cgroup of its nearest ancestor that the
//! simulator knows (the parent chain from `/proc/PID/stat`), else the root.
//!
//! A host pid may be reused after its process exits, so each known
//! process is remembered with its start time (`/proc/PID/stat` field 22);
//! a pid whose start time changed is a new process. [`HostProcs::prune`]
//! drops the tasks of processes that exited, kills (SIGKILL) the
//! processes whose tasks the simulator killed (`cgroup.kill`, the OOM
//! killer), as the kernel would have, and adopts every living descendant
//! of a known process (a scan of `/proc`), so that `cgroup.procs` lists a
//! `sleep` that never touched the mount, as the kernel would. FUSE gives a
//! request's thread id; it is mapped to its process (`Tgid` in
//! `/proc/TID/status`).
//!
//! Locking: one mutex over the known processes, never held while calling
//! into the simulator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memcg::Errno;
use memcg::memcontrol::MemCgroup;
use memcg_sim::{Sim, Task};

/// Ancestors followed before giving up (a chain longer than this is
/// broken or racing; the root cgroup is used).
const MAX_ANCESTORS: usize = 128;

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    start_ticks: u64,
}

/// Reads `/proc/PID/stat`; `None` once the process is gone.
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/PID/stat` line: the command sits in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last
/// `)`: state is field 3, ppid field 4, starttime field 22.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        ppid: fields.get(1)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The process (thread group) of thread `tid`.
fn tgid_of(tid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The host processes the simulator knows; see the module docs.
pub(crate) struct HostProcs {
    sim: Arc<Sim>,
    /// Known pids and their start times.
    known: Mutex<HashMap<u32, u64>>,
    /// Threads seen that are not their process's main thread: tid → tgid
    /// (forgotten at every prune, since tids are reused too).
    threads: Mutex<HashMap<u32, u32>>,
}

impl HostProcs {
    pub(crate) fn new(sim: Arc<Sim>) -> Self {
        Self {
            sim,
            known: Mutex::new(HashMap::new()),
            threads: Mutex::new(HashMap::new()),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u64>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The memory cgroup a request of thread `tid` is charged to: its
    /// process's task's, or the root's for the kernel's own requests (pid
    /// 0) and processes that vanished meanwhile.
    pub(crate) fn memcg_of_request(&self, tid: u32) -> Arc<MemCgroup> {
        self.task_of_thread(tid)
            .map(|t| t.memcg())
            .unwrap_or_else(|| self.root_memcg())
    }

    fn root_memcg(&self) -> Arc<MemCgroup> {
        self.sim
            .fs()
            .memcg("/")
            .expect("the root cgroup has memory")
    }

    /// The task of the process thread `tid` belongs to, made if new.
    ///
    /// Fast path, taken by every request after a process's first: the
    /// thread is a known process's main thread (or a thread seen before),
    /// and the process still lives as far as the last [`HostProcs::prune`]
    /// (at most [`super::PRUNE_EVERY`] ago) knows, so no `/proc` file is
    /// read. A pid reused within that window would be mistaken for its
    /// predecessor; prune then corrects it.
    pub(crate) fn task_of_thread(&self, tid: u32) -> Option<Arc<Task>> {
        if tid == 0 {
            return None;
        }
        let tgid = self.threads().get(&tid).copied().unwrap_or(tid);
        if self.known().contains_key(&tgid)
            && let Some(task) = self.sim.task(tgid)
        {
            return Some(task);
        }
        let tgid = tgid_of(tid)?;
        if tgid != tid {
            self.threads().insert(tid, tgid);
        }
        self.task(tgid).ok()
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The task of host process `pid`, made if new (`ESRCH` if there is no
    /// such process).
    pub(crate) fn task(&self, pid: u32) -> Result<Arc<Task>, Errno> {
        let now = stat(pid).ok_or(Errno::ESRCH)?;
        let remembered = self.known().get(&pid).copied();
        match (remembered, self.sim.task(pid)) {
            (Some(start), Some(task)) if start == now.start_ticks => return Ok(task),
            (Some(_), Some(_)) => {
                // The pid was reused: the old process is gone.
                self.sim.release_task(pid);
            }
            _ => {}
        }
        let cgroup = self.inherited_cgroup(now.ppid);
        let task = self
            .sim
            .adopt_task(pid, &cgroup)
            .or_else(|_| self.sim.adopt_task(pid, "/"))
            .map_err(|e| e.errno())?;
        self.known().insert(pid, now.start_ticks);
        Ok(task)
    }

    /// The cgroup fork would have put a child of `ppid` in: that of the
    /// nearest known, living ancestor, else the root.
    fn inherited_cgroup(&self, mut ppid: u32) -> String {
        for _ in 0..MAX_ANCESTORS {
            if ppid <= 1 {
                break;
            }
            let Some(now) = stat(ppid) else { break };
            let start = self.known().get(&ppid).copied();
            if start == Some(now.start_ticks)
                && let Some(task) = self.sim.task(ppid)
            {
                return task.cgroup().path();
            }
            ppid = now.ppid;
        }
        "/".to_owned()
    }

    /// Drops the tasks of processes that exited, kills the processes whose
    /// tasks the simulator killed, and adopts the descendants of known
    /// processes; see the module docs.
    pub(crate) fn prune(&self) {
        self.threads().clear();
        self.drop_exited();
        self.adopt_descendants();
    }

    /// Adopts every process on the host with a known ancestor, into that
    /// ancestor's cgroup (where fork put it).
    fn adopt_descendants(&self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        let stats: HashMap<u32, Stat> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, stat(pid)?)))
            .collect();
        let known = self.known().clone();
        let is_known = |pid: u32| {
            stats
                .get(&pid)
                .is_some_and(|s| known.get(&pid) == Some(&s.start_ticks))
        };
        for &pid in stats.keys() {
            if is_known(pid) {
                continue;
            }
            let mut ancestor = stats[&pid].ppid;
            for _ in 0..MAX_ANCESTORS {
                if ancestor <= 1 || is_known(ancestor) {
                    break;
                }
                ancestor = stats.get(&ancestor).map_or(0, |s| s.ppid);
            }
            if ancestor > 1 && is_known(ancestor) {
                // `task` walks the same chain and finds the same ancestor.
                let _ = self.task(pid);
            }
        }
    }

    fn drop_exited(&self) {
        let known: Vec<(u32, u64)> = self.known().iter().map(|(&p, &s)| (p, s)).collect();
        for (pid, start) in known {
            let alive = stat(pid).is_some_and(|s| s.start_ticks == start);
            let task = self.sim.task(pid);
            if alive && task.as_ref().is_some_and(|t| !t.is_killed()) {
                continue;
            }
            if alive {
                // The simulator killed it: so does the host.
                // SAFETY: `kill` has no memory-safety preconditions; the
                // pid's start time was checked just above, so it names the
                // process the task stood for.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
            self.sim.release_task(pid);
            self.known().remove(&pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcg_sim::SimConfig;

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        let line = "1234 (a (b) c) S 77 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                    98765 1000 100 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                ppid: 77,
                start_ticks: 98765
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn children_inherit_their_parents_cgroup_and_leave_when_they_exit() {
        let sim = Arc::new(Sim::new(SimConfig {
            mem_bytes: 64 << 20,
            first_pid: memcg_sim::PID_MAX_LIMIT,
            ..SimConfig::default()
        }));
        sim.fs().mkdir("/a").unwrap();
        let host = HostProcs::new(Arc::clone(&sim));
        let me = std::process::id();
        host.task(me).unwrap();
        sim.fs().write("/a/cgroup.procs", &me.to_string()).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let task = host.task(child.id()).unwrap();
        assert_eq!(task.cgroup().path(), "/a");
        assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap().lines().count(), 2);
        child.kill().unwrap();
        child.wait().unwrap();
        host.prune();
        assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap(), format!("{me}\n"));
        assert_eq!(host.task(u32::MAX).unwrap_err(), Errno::ESRCH);
        // Out again, so the cgroup can go.
        sim.fs().write("/cgroup.procs", &me.to_string()).unwrap();
        sim.fs().rmdir("/a").unwrap();
    }
}
