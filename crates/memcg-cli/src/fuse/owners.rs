//! Owners and modes of the cgroup hierarchy's nodes, and the migration
//! permission check that uses them.
//!
//! kernfs keeps what `chown` and `chmod` set on a cgroup directory or
//! interface file (systemd delegates a cgroup by handing its directory
//! and `cgroup.procs` to a user), so they are kept here, by cgroupfs
//! path, until the cgroup is removed through the mount. Moving a process
//! by writing `cgroup.procs` (or a thread by `cgroup.threads`) then needs,
//! with the credentials of whoever *opened* the file (the kernel's
//! `cgroup_procs_write_permission` under the opener's `f_cred`), write
//! permission on `cgroup.procs` of the nearest common ancestor of the
//! source and destination cgroups: `EACCES` otherwise. Root passes.
//!
//! Locking: one mutex over the table, held for map operations only.

use std::collections::HashMap;
use std::sync::Mutex;

use memcg::Errno;

/// Who opened a file (the request's credentials at `open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cred {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// A node's owner and, if `chmod` changed it, its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Owned {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) perm: Option<u16>,
}

/// Owners and modes set on cgroupfs nodes, by cgroupfs path.
#[derive(Default)]
pub(super) struct Owners(Mutex<HashMap<String, Owned>>);

impl Owners {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What was set on `path`, if anything.
    pub(super) fn get(&self, path: &str) -> Option<Owned> {
        self.table().get(path).copied()
    }

    /// `chown`/`chmod` of `path` (unset parts kept).
    pub(super) fn set(&self, path: &str, uid: Option<u32>, gid: Option<u32>, perm: Option<u16>) {
        let mut table = self.table();
        let owned = table.entry(path.to_owned()).or_insert(Owned {
            uid: 0,
            gid: 0,
            perm: None,
        });
        owned.uid = uid.unwrap_or(owned.uid);
        owned.gid = gid.unwrap_or(owned.gid);
        owned.perm = perm.or(owned.perm);
    }

    /// Cgroup `cg` was removed: its nodes, and its descendants', go.
    pub(super) fn forget_under(&self, cg: &str) {
        let prefix = format!("{}/", cg.trim_end_matches('/'));
        self.table()
            .retain(|path, _| path != cg && !path.starts_with(&prefix));
    }

    /// Whether `cred` may write `path`, whose mode is `perm` unless
    /// `chmod` changed it (the owner's, group's or others' write bit).
    fn may_write(&self, path: &str, perm: u16, cred: Cred) -> bool {
        if cred.uid == 0 {
            return true;
        }
        let owned = self.get(path).unwrap_or(Owned {
            uid: 0,
            gid: 0,
            perm: None,
        });
        let perm = owned.perm.unwrap_or(perm);
        if cred.uid == owned.uid {
            perm & 0o200 != 0
        } else if cred.gid == owned.gid {
            perm & 0o020 != 0
        } else {
            perm & 0o002 != 0
        }
    }

    /// `cgroup_procs_write_permission`: `opener` moving a task from
    /// cgroup `src` to cgroup `dst` needs to be able to write the common
    /// ancestor's `cgroup.procs` (of mode `procs_perm` unless changed).
    pub(super) fn check_migration(
        &self,
        opener: Cred,
        src: &str,
        dst: &str,
        procs_perm: u16,
    ) -> Result<(), Errno> {
        let com = common_ancestor(src, dst);
        let procs = if com == "/" {
            "/cgroup.procs".to_owned()
        } else {
            format!("{com}/cgroup.procs")
        };
        if self.may_write(&procs, procs_perm, opener) {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }
}

/// The nearest common ancestor of two cgroupfs paths (`/a/b`, `/a/c`:
/// `/a`).
pub(super) fn common_ancestor(a: &str, b: &str) -> String {
    let parts = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (parts(a), parts(b));
    let common: Vec<String> = a
        .iter()
        .zip(&b)
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.clone())
        .collect();
    format!("/{}", common.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_ancestors_procs_decides() {
        assert_eq!(common_ancestor("/a/b", "/a/c"), "/a");
        assert_eq!(common_ancestor("/a", "/b"), "/");
        assert_eq!(common_ancestor("/", "/a"), "/");
        let owners = Owners::default();
        let user = Cred {
            uid: 65534,
            gid: 65534,
        };
        // test_core's lesser_euid_open: both leaves' cgroup.procs are the
        // user's, the root's is not.
        owners.set("/a/cgroup.procs", Some(65534), None, None);
        owners.set("/b/cgroup.procs", Some(65534), None, None);
        assert_eq!(
            owners.check_migration(user, "/a", "/b", 0o644),
            Err(Errno::EACCES)
        );
        assert_eq!(
            owners.check_migration(Cred { uid: 0, gid: 0 }, "/a", "/b", 0o644),
            Ok(())
        );
        // A delegated subtree: the user owns /d's cgroup.procs.
        owners.set("/d/cgroup.procs", Some(65534), None, None);
        assert_eq!(owners.check_migration(user, "/d/x", "/d/y", 0o644), Ok(()));
        owners.forget_under("/d");
        assert_eq!(owners.get("/d/cgroup.procs"), None);
        assert!(owners.get("/a/cgroup.procs").is_some());
    }
}
