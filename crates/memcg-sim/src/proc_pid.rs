//! The process side of the kernel files (fs/proc/base.c): the simulator's
//! tasks serve `/proc/PID/oom_score_adj` (-1000..=1000) and the read-only
//! `/proc/PID/oom_score` through the library's [`PidFiles`] hook, and
//! [`Sim::procfs`] is the one table of kernel files (`memcg::procfs`) the
//! front ends read, over this machine and these tasks.
//!
//! Locking: none of its own; each call looks the task up once.

use memcg::Errno;
use memcg::procfs::{PidFiles, ProcFs};

use crate::Sim;

impl PidFiles for Sim {
    fn read(&self, pid: u32, name: &str) -> Result<String, Errno> {
        match name {
            "oom_score_adj" => self
                .task(pid)
                .map(|t| format!("{}\n", t.oom_score_adj()))
                .ok_or(Errno::ENOENT),
            "oom_score" => self
                .oom_score(pid)
                .map(|points| format!("{points}\n"))
                .ok_or(Errno::ENOENT),
            _ => Err(Errno::ENOENT),
        }
    }

    fn open_for_write(&self, pid: u32, name: &str) -> Result<(), Errno> {
        match name {
            "oom_score_adj" | "oom_score" if self.task(pid).is_some() => Ok(()),
            _ => Err(Errno::ENOENT),
        }
    }

    /// `oom_score_adj`: an int (`EINVAL`), the task (`ESRCH` once it is
    /// gone), in range (`EINVAL`). `oom_score` has no write method:
    /// `EINVAL`.
    fn write(&self, pid: u32, name: &str, text: &str) -> Result<(), Errno> {
        if name != "oom_score_adj" {
            return Err(Errno::EINVAL);
        }
        let value: i64 = text.trim().parse().map_err(|_| Errno::EINVAL)?;
        let task = self.task(pid).ok_or(Errno::ESRCH)?;
        let v = i32::try_from(value).map_err(|_| Errno::EINVAL)?;
        task.set_oom_score_adj(v)
    }
}

impl Sim {
    /// The kernel files outside the cgroup tree, over this machine and
    /// its tasks (`/proc/PID/*`).
    pub fn procfs(&self) -> ProcFs<'_> {
        ProcFs::new(self.machine(), self)
    }
}
