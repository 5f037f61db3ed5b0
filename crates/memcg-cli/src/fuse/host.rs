//! Host processes as simulated tasks.
//!
//! A process that writes its pid to a mounted `cgroup.procs`, or makes a
//! request of the mount, becomes a task of the simulator with its own pid
//! (the simulator numbers its own tasks from `PID_MAX_LIMIT` up, where no
//! host pid reaches). A process the simulator has not seen is put where
//! fork put it: in the cgroup of its nearest ancestor that the simulator
//! knows (the parent chain from `/proc/PID/stat`), else the root. Before a
//! process moves, its unseen descendants are placed that way (so a child
//! forked before the move stays behind, as on a kernel), and
//! [`HostProcs::prune`] places every living descendant of a known process,
//! so `cgroup.procs` lists a `sleep` that never touched the mount.
//!
//! A host pid may be reused after its process exits, so each known
//! process is remembered with its start time (`/proc/PID/stat` field 22):
//! a pid whose start time changed is a new process. The check happens when
//! a process first appears and at every prune (every 0.5 s); in between, a
//! request from a known pid is trusted without reading `/proc` (the fast
//! path of [`HostProcs::task_of_thread`]). FUSE gives a request's thread
//! id; it is mapped to its process (`Tgid` in `/proc/TID/status`), and so
//! is a thread id written to `cgroup.procs` (the kernel moves the whole
//! thread group).
//!
//! When a cgroup freezes (`cgroup.freeze`), its host processes are
//! stopped with `SIGSTOP` and continued with `SIGCONT` when it thaws (or
//! when the server goes): the nearest a process outside the kernel gets
//! to the freezer. They count as frozen as soon as the signal is sent (not
//! once each reaches the stop), and unlike the kernel's freezer the stop
//! is visible to their parent (`waitpid` with `WUNTRACED`) and undone by
//! anyone's `SIGCONT`. `cgroup.threads` lists each process's threads
//! (`/proc/PID/task`).
//!
//! When the simulator kills a task (`cgroup.kill`, the OOM killer) that
//! stands for a host process, the process is killed on the host at once
//! (SIGKILL through a pidfd taken after its start time was checked, so a
//! reused pid is never hit) and remembered as killed, so a request it
//! makes before it dies cannot bring it back. The server's own process is
//! never a task (as a kernel thread cannot be moved: `EINVAL`).
//!
//! Locking: `adopting` serialises every decision to add or drop a task
//! and is held while calling into the simulator; `known` is a leaf lock,
//! never held while calling into the simulator, so the kill and freeze
//! hooks (called by the simulator) may take it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use memcg::Errno;
use memcg::memcontrol::MemCgroup;
use memcg_sim::{HostTasks, Sim, Task};

/// Descendants of one process adopted before it moves, at most (a bound
/// against a fork storm racing the walk).
const MAX_DESCENDANTS: usize = 1 << 16;

/// Ancestors followed before giving up (a chain longer than this is
/// broken or racing; the root cgroup is used).
const MAX_ANCESTORS: usize = 128;

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    /// `task_struct::flags` (`PF_*`).
    flags: u32,
    start_ticks: u64,
}

/// `PF_KTHREAD`: a kernel thread.
const PF_KTHREAD: u32 = 0x0020_0000;

/// `PF_NO_SETAFFINITY`: a kernel thread bound to its CPUs (a kworker,
/// ksoftirqd): it may not leave the root cgroup.
const PF_NO_SETAFFINITY: u32 = 0x0400_0000;

impl Stat {
    /// Whether `cgroup_procs_write_start` refuses to move it (`EINVAL`):
    /// a kernel thread with `PF_NO_SETAFFINITY`, or kthreadd (the kernel
    /// thread with no parent), whose `no_cgroup_migration` stays set.
    fn pinned_to_root(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0 || (self.flags & PF_KTHREAD != 0 && self.ppid == 0)
    }
}

/// Reads `/proc/PID/stat`; `None` once the process is gone.
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/PID/stat` line: the command sits in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last
/// `)`: state is field 3, ppid field 4, flags field 9, starttime field 22.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        ppid: fields.get(1)?.parse().ok()?,
        flags: fields.get(6)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The process (thread group) of thread `tid`.
pub(crate) fn tgid_of(tid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The children of process `pid` (of every thread of it:
/// `/proc/PID/task/TID/children`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    threads
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// SIGKILLs process `pid` if it is still the one that started at
/// `start_ticks` (see [`signal_process`]).
fn kill_process(pid: u32, start_ticks: u64) {
    signal_process(pid, start_ticks, libc::SIGKILL);
}

/// Sends `signal` to process `pid` if it is still the one that started at
/// `start_ticks`: the pidfd pins the process, so the check and the signal
/// name the same one.
fn signal_process(pid: u32, start_ticks: u64, signal: libc::c_int) {
    // SAFETY: `pidfd_open` takes a pid and flags and returns a new fd or
    // -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    let Ok(fd) = libc::c_int::try_from(fd) else {
        return;
    };
    if fd < 0 {
        return;
    }
    if stat(pid).is_some_and(|s| s.start_ticks == start_ticks) {
        // SAFETY: `fd` is the pidfd just opened; a null info pointer is
        // allowed (the kernel fills in a default).
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
    // SAFETY: closing the fd opened above, once.
    unsafe {
        libc::close(fd);
    }
}

/// What is known of host processes; see the module docs.
#[derive(Default)]
struct Known {
    /// Tasks' processes and their start times.
    starts: HashMap<u32, u64>,
    /// Processes the simulator killed, until they are gone.
    killed: HashMap<u32, u64>,
    /// Threads seen that are not their process's main thread: tid → tgid
    /// (forgotten at every prune, since tids are reused too).
    threads: HashMap<u32, u32>,
    /// Processes stopped because their cgroup froze, with their start
    /// times: continued when it thaws, or when the server goes.
    stopped: HashMap<u32, u64>,
}

/// The thread ids of process `pid` (`/proc/PID/task`), ascending; empty
/// once it is gone.
/// The name of the shim's agent thread (`memcg run`'s anonymous memory),
/// which the kernel would not have: left out of `cgroup.threads`.
const AGENT_COMM: &str = "memcg-agent";

fn threads_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .map_or(true, |comm| comm.trim_end() != AGENT_COMM)
        })
        .collect();
    tids.sort_unstable();
    tids
}

/// What the simulator asks of the host processes it adopted: reached
/// weakly, as the simulator outlives no mount.
struct HostHooks(Weak<HostProcs>);

impl HostTasks for HostHooks {
    fn freeze(&self, pid: u32, freeze: bool) {
        if let Some(host) = self.0.upgrade() {
            host.freeze(pid, freeze);
        }
    }

    fn threads(&self, pid: u32) -> Vec<u32> {
        threads_of(pid)
    }
}

/// The host processes the simulator knows; see the module docs.
pub(crate) struct HostProcs {
    sim: Arc<Sim>,
    me: u32,
    adopting: Mutex<()>,
    known: Mutex<Known>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostProcs {
    /// Tracks host processes for `sim`, and installs the hook that kills
    /// a host process when the simulator kills its task.
    pub(crate) fn new(sim: Arc<Sim>) -> Arc<Self> {
        let host = Arc::new(Self {
            sim: Arc::clone(&sim),
            me: std::process::id(),
            adopting: Mutex::new(()),
            known: Mutex::new(Known::default()),
        });
        let weak: Weak<HostProcs> = Arc::downgrade(&host);
        sim.set_kill_hook(Arc::new(move |pid| {
            if let Some(host) = weak.upgrade() {
                host.killed_by_simulator(pid);
            }
        }));
        sim.set_host_tasks(Arc::new(HostHooks(Arc::downgrade(&host))));
        host
    }

    /// The simulator froze (or thawed) task `pid`: if it stands for a host
    /// process, that process is stopped with `SIGSTOP` (continued with
    /// `SIGCONT`), the kernel freezer's nearest equivalent from user
    /// space.
    fn freeze(&self, pid: u32, freeze: bool) {
        let mut known = lock(&self.known);
        let Some(&start) = known.starts.get(&pid) else {
            return;
        };
        if freeze {
            signal_process(pid, start, libc::SIGSTOP);
            known.stopped.insert(pid, start);
        } else if known.stopped.remove(&pid).is_some() {
            signal_process(pid, start, libc::SIGCONT);
        }
    }

    /// The simulator killed task `pid`: if it stands for a host process,
    /// that process dies too.
    fn killed_by_simulator(&self, pid: u32) {
        let mut known = lock(&self.known);
        if let Some(start) = known.starts.remove(&pid) {
            kill_process(pid, start);
            known.killed.insert(pid, start);
            // SIGKILL ends a stopped process too.
            known.stopped.remove(&pid);
        }
    }

    /// The memory cgroup a request of thread `tid` is charged to: its
    /// process's task's, or the root's for the kernel's own requests (pid
    /// 0), the server itself and processes that vanished meanwhile.
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

    /// The task of the process thread `tid` belongs to, made if new (fast
    /// path: see the module docs).
    pub(crate) fn task_of_thread(&self, tid: u32) -> Option<Arc<Task>> {
        if tid == 0 {
            return None;
        }
        let tgid = {
            let known = lock(&self.known);
            let tgid = known.threads.get(&tid).copied().unwrap_or(tid);
            if tgid == self.me {
                // The server's own threads (a benchmark in process).
                return None;
            }
            known.starts.contains_key(&tgid).then_some(tgid)
        };
        if let Some(task) = tgid.and_then(|t| self.sim.task(t)) {
            return Some(task);
        }
        let tgid = tgid_of(tid)?;
        if tgid != tid {
            lock(&self.known).threads.insert(tid, tgid);
        }
        if tgid == self.me {
            return None;
        }
        self.task(tgid).ok()
    }

    /// The task of host process (or thread) `pid` that a `cgroup.procs`
    /// write moves: as [`HostProcs::task`], and `EINVAL` for a kernel
    /// thread that may not leave the root (`cgroup_procs_write_start`).
    pub(crate) fn task_to_move(&self, pid: u32) -> Result<Arc<Task>, Errno> {
        let tgid = tgid_of(pid).ok_or(Errno::ESRCH)?;
        if stat(tgid).ok_or(Errno::ESRCH)?.pinned_to_root() {
            return Err(Errno::EINVAL);
        }
        self.task(tgid)
    }

    /// The task of host process (or thread) `pid`, made if new: `ESRCH` if
    /// there is no such process or the simulator killed it, `EINVAL` for
    /// the server's own process. The host's init and kernel threads are
    /// made unkillable, as the kernel's OOM killer passes them over and
    /// neither `cgroup.kill` nor a SIGKILL reaches them.
    pub(crate) fn task(&self, pid: u32) -> Result<Arc<Task>, Errno> {
        let pid = tgid_of(pid).ok_or(Errno::ESRCH)?;
        if pid == self.me {
            return Err(Errno::EINVAL);
        }
        let _adopting = lock(&self.adopting);
        let now = stat(pid).ok_or(Errno::ESRCH)?;
        let remembered = {
            let known = lock(&self.known);
            if known.killed.get(&pid) == Some(&now.start_ticks) {
                return Err(Errno::ESRCH);
            }
            known.starts.get(&pid).copied()
        };
        match remembered {
            Some(start) if start == now.start_ticks => {
                if let Some(task) = self.sim.task(pid) {
                    return Ok(task);
                }
            }
            Some(_) => {
                // The pid was reused: the old process is gone.
                self.sim.release_task(pid);
                lock(&self.known).starts.remove(&pid);
            }
            None => {}
        }
        let cgroup = self.inherited_cgroup(now.ppid);
        let task = self
            .sim
            .adopt_task(pid, &cgroup)
            .or_else(|_| self.sim.adopt_task(pid, "/"))
            .map_err(|e| e.errno())?;
        if pid == 1 || now.flags & PF_KTHREAD != 0 {
            task.set_unkillable();
        }
        lock(&self.known).starts.insert(pid, now.start_ticks);
        // Adopted into a freezing cgroup, it counts as frozen already; the
        // simulator's stop came before it was known here.
        if task.cgroup().is_freezing() {
            self.freeze(pid, true);
        }
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
            let start = lock(&self.known).starts.get(&ppid).copied();
            if start == Some(now.start_ticks)
                && let Some(task) = self.sim.task(ppid)
            {
                return task.cgroup().path();
            }
            ppid = now.ppid;
        }
        "/".to_owned()
    }

    /// Drops the tasks of processes that exited and adopts the
    /// descendants of known processes; see the module docs.
    pub(crate) fn prune(&self) {
        lock(&self.known).threads.clear();
        self.drop_exited();
        self.adopt_descendants();
    }

    /// Adopts the living descendants of host process `pid` that are not
    /// known yet, each into its nearest known ancestor's cgroup (where fork
    /// put it): done before `pid` moves, so they stay behind. Walks the
    /// children lists from `pid` down, not all of `/proc`, so a move costs
    /// what its own subtree holds.
    pub(crate) fn adopt_descendants_of(&self, pid: u32) {
        let mut todo = children(pid);
        let mut seen = 0usize;
        while let Some(child) = todo.pop() {
            seen += 1;
            if child == self.me || seen > MAX_DESCENDANTS {
                continue;
            }
            let _ = self.task(child);
            todo.extend(children(child));
        }
    }

    /// Adopts every process on the host with a known ancestor, into that
    /// ancestor's cgroup (where fork put it).
    pub(crate) fn adopt_descendants(&self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        let stats: HashMap<u32, Stat> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != self.me)
            .filter_map(|pid| Some((pid, stat(pid)?)))
            .collect();
        let starts = lock(&self.known).starts.clone();
        let is_known = |pid: u32| {
            stats
                .get(&pid)
                .is_some_and(|s| starts.get(&pid) == Some(&s.start_ticks))
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

    /// Process `pid` was reaped by its parent (a shimmed `wait` said so):
    /// its task leaves its cgroup now, not at the next prune, as a kernel's
    /// exit has by the time the parent's wait returns.
    pub(crate) fn reaped(&self, pid: u32) {
        let _adopting = lock(&self.adopting);
        let Some(start) = lock(&self.known).starts.get(&pid).copied() else {
            return;
        };
        if stat(pid).is_some_and(|s| s.start_ticks == start) {
            return;
        }
        let mut known = lock(&self.known);
        known.starts.remove(&pid);
        known.stopped.remove(&pid);
        drop(known);
        self.sim.release_task(pid);
    }

    /// Drops the tasks of processes that exited (or whose pid a new
    /// process took), and forgets killed processes once they are gone.
    fn drop_exited(&self) {
        let starts: Vec<(u32, u64)> = lock(&self.known)
            .starts
            .iter()
            .map(|(&p, &s)| (p, s))
            .collect();
        for (pid, start) in starts {
            let _adopting = lock(&self.adopting);
            if stat(pid).is_some_and(|s| s.start_ticks == start) {
                continue;
            }
            let mut known = lock(&self.known);
            if known.starts.get(&pid) == Some(&start) {
                known.starts.remove(&pid);
                known.stopped.remove(&pid);
                drop(known);
                self.sim.release_task(pid);
            }
        }
        lock(&self.known)
            .killed
            .retain(|&pid, &mut start| stat(pid).is_some_and(|s| s.start_ticks == start));
    }
}

impl Drop for HostProcs {
    /// The server goes: a process it stopped for a frozen cgroup runs on
    /// (the cgroup goes with the server).
    fn drop(&mut self) {
        let known = lock(&self.known);
        for (&pid, &start) in &known.stopped {
            signal_process(pid, start, libc::SIGCONT);
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
                flags: 4194560,
                start_ticks: 98765
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    fn sim() -> Arc<Sim> {
        Arc::new(Sim::new(SimConfig {
            mem_bytes: 64 << 20,
            first_pid: memcg_sim::PID_MAX_LIMIT,
            ..SimConfig::default()
        }))
    }

    #[test]
    fn children_inherit_their_parents_cgroup_and_leave_when_they_exit() {
        let sim = sim();
        sim.fs().mkdir("/a").unwrap();
        let host = HostProcs::new(Arc::clone(&sim));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        host.task(pid).unwrap();
        sim.fs().write("/a/cgroup.procs", &pid.to_string()).unwrap();
        let mut grandchild = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // Not a descendant of `pid`: the root.
        assert_eq!(host.task(grandchild.id()).unwrap().cgroup().path(), "/");
        grandchild.kill().unwrap();
        grandchild.wait().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        host.prune();
        assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap(), "");
        sim.fs().rmdir("/a").unwrap();
        assert_eq!(host.task(u32::MAX).unwrap_err(), Errno::ESRCH);
    }

    #[test]
    fn the_server_itself_is_never_a_task() {
        let sim = sim();
        let host = HostProcs::new(Arc::clone(&sim));
        assert_eq!(host.task(std::process::id()).unwrap_err(), Errno::EINVAL);
        host.adopt_descendants();
        assert!(sim.task(std::process::id()).is_none());
    }

    /// The state letter of process `pid` (`/proc/PID/stat` field 3).
    fn state(pid: u32) -> Option<char> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        text[text.rfind(')')? + 1..].trim_start().chars().next()
    }

    fn wait_state(pid: u32, stopped: bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while (state(pid) == Some('T')) != stopped {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid}: {:?}",
                state(pid)
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A freezing cgroup's processes are stopped, those adopted into it
    /// later too (a child forked before the freeze and first seen after),
    /// and a thaw continues them all.
    #[test]
    fn processes_of_a_frozen_cgroup_are_stopped_and_continued() {
        use std::io::BufRead;
        let sim = sim();
        sim.fs().mkdir("/f").unwrap();
        let host = HostProcs::new(Arc::clone(&sim));
        let mut parent = std::process::Command::new("bash")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(parent.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let child: u32 = line.trim().parse().unwrap();
        host.task(parent.id()).unwrap();
        sim.fs()
            .write("/f/cgroup.procs", &parent.id().to_string())
            .unwrap();
        sim.fs().write("/f/cgroup.freeze", "1").unwrap();
        wait_state(parent.id(), true);
        assert_eq!(host.task(child).unwrap().cgroup().path(), "/f");
        wait_state(child, true);
        assert_eq!(
            sim.fs().read("/f/cgroup.events").unwrap(),
            "populated 1\nfrozen 1\n"
        );
        sim.fs().write("/f/cgroup.freeze", "0").unwrap();
        wait_state(parent.id(), false);
        wait_state(child, false);
        // SAFETY: `kill` takes a pid and a signal; no memory is passed.
        unsafe {
            libc::kill(child as libc::pid_t, libc::SIGKILL);
        }
        parent.kill().unwrap();
        parent.wait().unwrap();
    }

    /// A kernel thread of this host pinned to its CPUs (a kworker), if
    /// this host's `/proc` shows one.
    fn pinned_kthread() -> Option<u32> {
        std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| stat(pid).is_some_and(|s| s.flags & PF_NO_SETAFFINITY != 0))
    }

    #[test]
    fn a_kernel_thread_pinned_to_its_cpus_cannot_move_and_init_cannot_be_killed() {
        let sim = sim();
        let host = HostProcs::new(Arc::clone(&sim));
        match pinned_kthread() {
            Some(kworker) => {
                assert_eq!(host.task_to_move(kworker).unwrap_err(), Errno::EINVAL);
                assert!(sim.task(kworker).is_none());
            }
            None => eprintln!("no PF_NO_SETAFFINITY kernel thread in this /proc"),
        }
        // kthreadd: no parent, `no_cgroup_migration` for good.
        if stat(2).is_some_and(|s| s.flags & PF_KTHREAD != 0) {
            assert_eq!(host.task_to_move(2).unwrap_err(), Errno::EINVAL);
        }
        // The host's init moves (the kernel allows it) and no kill of the
        // simulator reaches it.
        sim.fs().mkdir("/init").unwrap();
        let init = host.task_to_move(1).unwrap();
        assert!(init.is_unkillable());
        sim.fs().write("/init/cgroup.procs", "1").unwrap();
        sim.fs().write("/init/cgroup.kill", "1").unwrap();
        assert_eq!(sim.fs().read("/init/cgroup.procs").unwrap(), "1\n");
        sim.fs().write("/cgroup.procs", "1").unwrap();
        sim.fs().rmdir("/init").unwrap();
    }

    #[test]
    fn a_process_the_simulator_kills_dies_and_cannot_come_back() {
        let sim = sim();
        sim.fs().mkdir("/k").unwrap();
        let host = HostProcs::new(Arc::clone(&sim));
        let mut victim = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = victim.id();
        host.task(pid).unwrap();
        sim.fs().write("/k/cgroup.procs", &pid.to_string()).unwrap();
        sim.fs().write("/k/cgroup.kill", "1").unwrap();
        let status = victim.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(sim.task(pid).is_none());
        sim.fs().rmdir("/k").unwrap();
    }
}
