//! The mounted tree: what each path of the mount is, what a directory
//! lists, and the inode numbers FUSE names nodes by.
//!
//! The tree is computed from the simulator on every lookup, not stored: a
//! cgroup made by a workload, a file written by `memcg sh`-style code or a
//! `--fs` mount appears as soon as it exists. Paths inside the mount are
//! the machine's own (`/sys/fs/cgroup/a/memory.max`, `/proc/meminfo`,
//! `/tmp/test-fs/1`): the cgroupfs path is the part after
//! `/sys/fs/cgroup`, the kernel files are those of the library's table
//! (`memcg::procfs`, as `memcg sh` serves them), and a `--fs` mount's
//! files are under its directory.
//!
//! Inode numbers are handed out per path on lookup and forgotten when the
//! kernel forgets the last lookup (FUSE's `forget`), so a long run with
//! 10000 short-lived cgroups does not grow the table without bound.
//! Locking: one mutex over the table, held for map operations only.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use memcg_sim::Sim;

/// Where the cgroup v2 hierarchy is.
pub(crate) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What a path of the mount is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A directory with no contents of its own (`/`, `/proc/sys`, the
    /// parents of a `--fs` mount point).
    Dir,
    /// A cgroup directory, by cgroupfs path (`/` is the root cgroup).
    Cgroup(String),
    /// An interface file, by cgroupfs path (`/a/memory.max`).
    CgroupFile(String),
    /// A kernel file of `memcg::procfs`, by its path.
    Kernel(String),
    /// A `--fs` mount point, by its path (the root directory of its
    /// filesystem, whose nodes `fsfiles.rs` serves by inode number).
    Mount(String),
    /// A hidden file for `memcg run`'s shim (`shim_files`).
    Shim(super::shim_files::ShimNode),
}

impl Node {
    /// Whether it lists as a directory.
    pub(crate) fn is_dir(&self) -> bool {
        matches!(self, Node::Dir | Node::Cgroup(_) | Node::Mount(_))
            || matches!(self, Node::Shim(s) if s.is_dir())
    }
}

/// `a/b` + `c` = `a/b/c` (`/` + `c` = `/c`).
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The cgroupfs path of `path`, if it is at or under the hierarchy.
fn cgroupfs_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(CGROUP_ROOT)?;
    match rest {
        "" => Some("/"),
        r if r.starts_with('/') => Some(r),
        _ => None,
    }
}

/// The fixed paths the tree is built around: the hierarchy, the kernel
/// files and the mount points.
fn anchors(sim: &Sim) -> Vec<String> {
    let mut paths = sim.procfs().files();
    paths.push(CGROUP_ROOT.to_owned());
    paths.extend(sim.machine().mounts().into_iter().map(|(dir, _)| dir));
    paths
}

/// What `path` is, if anything.
pub(crate) fn classify(sim: &Sim, path: &str) -> Option<Node> {
    if let Some(cg_path) = cgroupfs_path(path) {
        if let Some(node) = super::shim_files::classify(cg_path) {
            return Some(Node::Shim(node));
        }
        let fs = sim.fs();
        if fs.cgroup(cg_path).is_ok() {
            return Some(Node::Cgroup(cg_path.to_owned()));
        }
        return fs
            .file_mode(cg_path)
            .map(|_| Node::CgroupFile(cg_path.to_owned()));
    }
    if sim.procfs().serves(path) {
        return Some(Node::Kernel(path.to_owned()));
    }
    if let Some((_, name)) = sim.machine().resolve_file(path) {
        // Inside a mount, nodes go by inode number, not path.
        return name.is_empty().then(|| Node::Mount(path.to_owned()));
    }
    let prefix = if path == "/" {
        "/".to_owned()
    } else {
        format!("{path}/")
    };
    anchors(sim)
        .iter()
        .any(|a| a.starts_with(&prefix))
        .then_some(Node::Dir)
}

/// The entries of directory `path` (which is `node`): (name, is a
/// directory).
pub(crate) fn list(sim: &Sim, path: &str, node: &Node) -> Vec<(String, bool)> {
    match node {
        Node::Cgroup(cg) => sim
            .fs()
            .ls(cg)
            .map(|entries| entries.into_iter().map(|e| (e.name, e.is_dir)).collect())
            .unwrap_or_default(),
        Node::Dir => {
            let prefix = if path == "/" {
                "/".to_owned()
            } else {
                format!("{path}/")
            };
            let names: BTreeSet<(String, bool)> = anchors(sim)
                .iter()
                .filter_map(|a| a.strip_prefix(&prefix))
                .map(|rest| match rest.split_once('/') {
                    Some((first, _)) => (first.to_owned(), true),
                    None => {
                        let full = join(path, rest);
                        let is_dir = classify(sim, &full).is_some_and(|n| n.is_dir());
                        (rest.to_owned(), is_dir)
                    }
                })
                .collect();
            names.into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// FUSE's root inode.
pub(crate) const ROOT_INO: u64 = 1;

/// Inode numbers by path and back, with the kernel's lookup counts.
pub(crate) struct Inodes {
    table: Mutex<Table>,
}

struct Table {
    by_path: HashMap<String, (u64, u64)>,
    by_ino: HashMap<u64, String>,
    next: u64,
}

impl Inodes {
    pub(crate) fn new() -> Self {
        let mut table = Table {
            by_path: HashMap::new(),
            by_ino: HashMap::new(),
            next: ROOT_INO + 1,
        };
        table.by_path.insert("/".to_owned(), (ROOT_INO, 1));
        table.by_ino.insert(ROOT_INO, "/".to_owned());
        Self {
            table: Mutex::new(table),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The path of inode `ino`, if the kernel still knows it.
    pub(crate) fn path(&self, ino: u64) -> Option<String> {
        self.table().by_ino.get(&ino).cloned()
    }

    /// The inode of `path`, counting one lookup by the kernel.
    pub(crate) fn lookup(&self, path: &str) -> u64 {
        let mut table = self.table();
        if let Some((ino, count)) = table.by_path.get_mut(path) {
            *count += 1;
            return *ino;
        }
        let ino = table.next;
        table.next += 1;
        table.by_path.insert(path.to_owned(), (ino, 1));
        table.by_ino.insert(ino, path.to_owned());
        ino
    }

    /// The inode of `path` for a listing (no lookup counted): its number
    /// if it has one, else one made from the path (top bit set, where
    /// handed-out numbers never reach), so entries do not share one.
    pub(crate) fn peek(&self, path: &str) -> u64 {
        if let Some(&(ino, _)) = self.table().by_path.get(path) {
            return ino;
        }
        use std::hash::{Hash, Hasher};
        // DefaultHasher::new() has fixed keys: the same path, the same
        // number, in every run.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        path.hash(&mut h);
        (1 << 63) | h.finish()
    }

    /// The kernel dropped `nlookup` lookups of `ino`.
    pub(crate) fn forget(&self, ino: u64, nlookup: u64) {
        if ino == ROOT_INO {
            return;
        }
        let mut table = self.table();
        let Some(path) = table.by_ino.get(&ino).cloned() else {
            return;
        };
        let gone = match table.by_path.get_mut(&path) {
            Some((_, count)) => {
                *count = count.saturating_sub(nlookup);
                *count == 0
            }
            None => true,
        };
        if gone {
            table.by_path.remove(&path);
            table.by_ino.remove(&ino);
        }
    }

    /// Inodes the kernel holds (for tests and the benchmark).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table().by_ino.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcg_sim::SimConfig;

    fn sim() -> Sim {
        Sim::new(SimConfig {
            mem_bytes: 64 << 20,
            ..SimConfig::default()
        })
    }

    #[test]
    fn paths_classify_as_the_machine_has_them() {
        let sim = sim();
        sim.fs()
            .write("/cgroup.subtree_control", "+memory")
            .unwrap();
        sim.fs().mkdir("/a").unwrap();
        sim.machine()
            .mount(
                "/tmp/test-fs",
                memcg::fs::FsSource::Ram {
                    size_bytes: 1 << 20,
                },
            )
            .unwrap();
        sim.write_file("/", "/tmp/test-fs/1", b"x").unwrap();
        let c = |p: &str| classify(&sim, p);
        assert_eq!(c("/"), Some(Node::Dir));
        assert_eq!(c("/sys/fs"), Some(Node::Dir));
        assert_eq!(c("/sys/fs/cgroup"), Some(Node::Cgroup("/".into())));
        assert_eq!(c("/sys/fs/cgroup/a"), Some(Node::Cgroup("/a".into())));
        assert_eq!(
            c("/sys/fs/cgroup/a/memory.max"),
            Some(Node::CgroupFile("/a/memory.max".into()))
        );
        assert_eq!(c("/sys/fs/cgroup/a/nope"), None);
        assert_eq!(c("/sys/fs/cgroupx"), None);
        assert_eq!(
            c("/proc/meminfo"),
            Some(Node::Kernel("/proc/meminfo".into()))
        );
        assert_eq!(c("/proc/sys/vm"), Some(Node::Dir));
        assert_eq!(c("/tmp"), Some(Node::Dir));
        assert_eq!(c("/tmp/test-fs"), Some(Node::Mount("/tmp/test-fs".into())));
        assert_eq!(c("/tmp/test-fs/1"), None, "inside a mount: by inode");
        assert_eq!(c("/etc"), None);
        let root: Vec<String> = list(&sim, "/", &Node::Dir)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(root, ["proc", "sys", "tmp"]);
        let vm = list(&sim, "/proc/sys/vm", &Node::Dir);
        assert!(vm.contains(&("drop_caches".to_owned(), false)), "{vm:?}");
        let cg = list(&sim, "/sys/fs/cgroup", &Node::Cgroup("/".into()));
        assert!(cg.contains(&("a".to_owned(), true)));
        assert!(cg.contains(&("cgroup.procs".to_owned(), false)));
    }

    #[test]
    fn inodes_go_when_the_kernel_forgets_them() {
        let inodes = Inodes::new();
        let a = inodes.lookup("/a");
        assert_eq!(inodes.lookup("/a"), a);
        assert_eq!(inodes.path(a).as_deref(), Some("/a"));
        inodes.forget(a, 1);
        assert_eq!(inodes.path(a).as_deref(), Some("/a"));
        inodes.forget(a, 1);
        assert_eq!(inodes.path(a), None);
        assert_eq!(inodes.len(), 1);
        inodes.forget(ROOT_INO, 5);
        assert_eq!(inodes.path(ROOT_INO).as_deref(), Some("/"));
    }
}
