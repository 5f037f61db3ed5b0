//! What the server serves for `memcg run`'s shim (`crates/memcg-shim`):
//! each task's `/proc/PID/cgroup`, which only the server knows.
//!
//! The files are hidden under the cgroup root: `/sys/fs/cgroup/.memcg/
//! ID/cgroup` is found by lookup (and `mkdir .memcg` is `EEXIST`), but no
//! directory lists `.memcg` or anything in it, so programs walking the
//! hierarchy never see them. `ID` is a pid (or thread id) as the reader's
//! pid namespace numbers it, as `/proc/ID` does; the file reads `0::PATH`
//! (the cgroup v2 line of `/proc/PID/cgroup`) for the task of that host
//! process, made a task where fork put it if the simulator had not seen
//! it ([`HostProcs::task`]). A process the reader cannot see, or that is
//! gone, opens as `ENOENT`, as `/proc/ID` would. The text is rendered at
//! open.
//!
//! Nothing is kept: the nodes are parsed from their paths.

use fuser::FileType;
use memcg::Errno;

use super::host::HostProcs;
use super::pidns::PidNs;

/// The hidden directory's name under the cgroup root.
const HIDDEN: &str = ".memcg";

/// A node of the hidden tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShimNode {
    /// `.memcg`.
    Root,
    /// `.memcg/ID`.
    Task(u32),
    /// `.memcg/ID/cgroup`.
    Cgroup(u32),
}

impl ShimNode {
    pub(crate) fn is_dir(&self) -> bool {
        !matches!(self, ShimNode::Cgroup(_))
    }

    /// Type, mode and size, for the node's attributes.
    pub(crate) fn attr(&self) -> (FileType, u16, u64) {
        match self {
            ShimNode::Cgroup(_) => (FileType::RegularFile, 0o444, 0),
            _ => (FileType::Directory, 0o555, 0),
        }
    }
}

/// The hidden node at cgroupfs path `cg_path` (`/.memcg/ID/cgroup`), if
/// it is one.
pub(crate) fn classify(cg_path: &str) -> Option<ShimNode> {
    let rest = cg_path.strip_prefix('/')?.strip_prefix(HIDDEN)?;
    if rest.is_empty() {
        return Some(ShimNode::Root);
    }
    let mut parts = rest.strip_prefix('/')?.split('/');
    let id = parts.next()?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || id.starts_with('0') {
        return None;
    }
    let id: u32 = id.parse().ok()?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(ShimNode::Task(id)),
        (Some("cgroup"), None) => Some(ShimNode::Cgroup(id)),
        _ => None,
    }
}

/// The text of `node` for the reader `tid` (a host thread id), rendered
/// at open.
pub(crate) fn open(host: &HostProcs, tid: u32, node: &ShimNode) -> Result<Vec<u8>, Errno> {
    let ShimNode::Cgroup(id) = node else {
        return Err(Errno::EISDIR);
    };
    let host_pid = match PidNs::of(tid) {
        Some(ns) => ns.host_pid(*id).map_err(|_| Errno::ENOENT)?,
        None => *id,
    };
    let path = match host.task(host_pid) {
        Ok(task) => task.cgroup().path(),
        // The server's own process: in no cgroup of the machine, as the
        // kernel's threads are in the root.
        Err(Errno::EINVAL) => "/".to_owned(),
        Err(_) => return Err(Errno::ENOENT),
    };
    Ok(format!("0::{path}\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_parse() {
        assert_eq!(classify("/.memcg"), Some(ShimNode::Root));
        assert_eq!(classify("/.memcg/12"), Some(ShimNode::Task(12)));
        assert_eq!(classify("/.memcg/12/cgroup"), Some(ShimNode::Cgroup(12)));
        for not in [
            "/",
            "/a",
            "/.memcgx",
            "/.memcg/",
            "/.memcg/012",
            "/.memcg/x",
            "/.memcg/12/mounts",
            "/.memcg/12/cgroup/x",
            "/.memcg/99999999999",
        ] {
            assert_eq!(classify(not), None, "{not}");
        }
    }
}
