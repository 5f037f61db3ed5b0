//! The `/proc` files `memcg sh` knows: `/proc/swaps`, `/proc/meminfo`,
//! `/proc/pressure/memory`, `/proc/sys/vm/swappiness` and
//! `/proc/PID/oom_score_adj`, and the write-only
//! `/proc/sys/vm/drop_caches` (1, 2 or 3), read as the
//! kernel prints them and written with its checks (a number in range, or
//! `EINVAL`).

use memcg::Errno;
use memcg_sim::Sim;

/// A writable `/proc` file, opened.
pub(super) enum ProcFile {
    /// `/proc/sys/vm/swappiness` (0..=200).
    Swappiness,
    /// `/proc/PID/oom_score_adj` (-1000..=1000).
    OomScoreAdj(u32),
    /// `/proc/sys/vm/drop_caches` (1..=3; mode 0200: reads get `EACCES`).
    DropCaches,
}

/// `/proc/PID/FILE` split into the pid and the file.
fn pid_file(path: &str) -> Option<(u32, &str)> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, file) = rest.split_once('/')?;
    Some((pid.parse().ok()?, file))
}

/// The contents of `path`, if it is a `/proc` file (`ENOENT` for one that
/// does not exist: an unknown pid or file).
pub(super) fn read(sim: &Sim, path: &str) -> Option<Result<String, Errno>> {
    if !path.starts_with("/proc/") {
        return None;
    }
    Some(match path {
        "/proc/swaps" => Ok(sim.proc_swaps()),
        "/proc/meminfo" => Ok(sim.proc_meminfo()),
        "/proc/sys/vm/swappiness" => Ok(format!("{}\n", sim.fs().tree().vm_swappiness())),
        "/proc/sys/vm/drop_caches" => Err(Errno::EACCES),
        "/proc/pressure/memory" => {
            let tree = sim.fs().tree();
            Ok(tree.memory_pressure(tree.root().cgroup()))
        }
        _ => match pid_file(path) {
            Some((pid, "oom_score_adj")) => sim
                .task(pid)
                .map(|t| format!("{}\n", t.oom_score_adj()))
                .ok_or(Errno::ENOENT),
            _ => Err(Errno::ENOENT),
        },
    })
}

/// Opens `path` under `/proc` for writing: `EACCES` for a read-only file,
/// `ENOENT` for one that does not exist.
pub(super) fn open_for_write(sim: &Sim, path: &str) -> Result<ProcFile, Errno> {
    if path == "/proc/sys/vm/swappiness" {
        return Ok(ProcFile::Swappiness);
    }
    if path == "/proc/sys/vm/drop_caches" {
        return Ok(ProcFile::DropCaches);
    }
    match pid_file(path) {
        Some((pid, "oom_score_adj")) if sim.task(pid).is_some() => Ok(ProcFile::OomScoreAdj(pid)),
        Some(_) => Err(Errno::ENOENT),
        None if read(sim, path).is_some_and(|r| r.is_ok()) => Err(Errno::EACCES),
        None => Err(Errno::ENOENT),
    }
}

/// Writes `text` to an opened `/proc` file.
pub(super) fn write(sim: &Sim, file: &ProcFile, text: &str) -> Result<(), Errno> {
    let value: i64 = text.trim().parse().map_err(|_| Errno::EINVAL)?;
    match file {
        ProcFile::Swappiness => {
            let v = u32::try_from(value).map_err(|_| Errno::EINVAL)?;
            sim.fs().tree().set_vm_swappiness(v)
        }
        ProcFile::DropCaches => {
            let mode = u32::try_from(value).map_err(|_| Errno::EINVAL)?;
            sim.drop_caches(mode).map(drop)
        }
        ProcFile::OomScoreAdj(pid) => {
            let task = sim.task(*pid).ok_or(Errno::ESRCH)?;
            let v = i32::try_from(value).map_err(|_| Errno::EINVAL)?;
            task.set_oom_score_adj(v)
        }
    }
}
