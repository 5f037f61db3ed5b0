//! Which paths the shim answers for: the procfs files that show mounts
//! and cgroups (`/proc/self/mounts`, `/proc/PID/mountinfo`,
//! `/proc/thread-self/cgroup`, ...). Pure: no system calls, so the test
//! suite includes this file as it is.
//!
//! The check is on the path text only (as the caller wrote it); the
//! callers first compare the path's first six bytes with `/proc/` and
//! `/etc/m`, so that any other path is passed on untouched.

/// What a procfs file shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shows {
    /// `mounts`: the `fstab`-like table.
    Mounts,
    /// `mountinfo`.
    MountInfo,
    /// `cgroup`: the task's cgroup of each hierarchy.
    Cgroup,
    /// `/proc/cgroups`: the controllers and their v1 hierarchies.
    Controllers,
}

/// Whose file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// `self` (and `/proc/mounts`).
    OwnProcess,
    /// `thread-self`.
    OwnThread,
    /// A pid (or, under `PID/task/`, a thread id) as the caller's pid
    /// namespace numbers it.
    Id(u32),
}

/// A path the shim answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub shows: Shows,
    pub whose: Whose,
}

/// A decimal pid (no sign, no leading `+`, at least one digit).
fn pid(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 10 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in text {
        n = n * 10 + u64::from(d - b'0');
    }
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// The file name's meaning.
fn shows(name: &[u8]) -> Option<Shows> {
    match name {
        b"mounts" => Some(Shows::Mounts),
        b"mountinfo" => Some(Shows::MountInfo),
        b"cgroup" => Some(Shows::Cgroup),
        _ => None,
    }
}

/// The file `path` names, if the shim answers for it. `/etc/mtab` is
/// `/proc/self/mounts` here; the caller checks it is the usual symlink.
pub fn classify(path: &[u8]) -> Option<Target> {
    if path == b"/proc/cgroups" {
        return Some(Target {
            shows: Shows::Controllers,
            whose: Whose::OwnProcess,
        });
    }
    if path == b"/etc/mtab" || path == b"/proc/mounts" {
        return Some(Target {
            shows: Shows::Mounts,
            whose: Whose::OwnProcess,
        });
    }
    let rest = path.strip_prefix(b"/proc/")?;
    let mut parts: [&[u8]; 4] = [b""; 4];
    let mut count = 0;
    for part in rest.split(|&b| b == b'/') {
        *parts.get_mut(count)? = part;
        count += 1;
    }
    let (whose, name) = match (count, parts) {
        (2, [b"self", name, ..]) => (Whose::OwnProcess, name),
        (2, [b"thread-self", name, ..]) => (Whose::OwnThread, name),
        (2, [id, name, ..]) => (Whose::Id(pid(id)?), name),
        (4, [owner, b"task", tid, name]) if owner == b"self" || pid(owner).is_some() => {
            (Whose::Id(pid(tid)?), name)
        }
        _ => return None,
    };
    Some(Target {
        shows: shows(name)?,
        whose,
    })
}

/// The procfs file `name` of `whose` (`/proc/self/NAME`,
/// `/proc/thread-self/NAME`, `/proc/PID/NAME`), NUL-terminated: where the
/// real `mounts` and `mountinfo` of that task's mount namespace are read.
pub fn proc_file(whose: Whose, name: &str) -> alloc::vec::Vec<u8> {
    use alloc::vec::Vec;
    let mut path: Vec<u8> = Vec::with_capacity(40);
    path.extend_from_slice(b"/proc/");
    match whose {
        Whose::OwnProcess => path.extend_from_slice(b"self"),
        Whose::OwnThread => path.extend_from_slice(b"thread-self"),
        Whose::Id(id) => push_decimal(&mut path, u64::from(id)),
    }
    path.push(b'/');
    path.extend_from_slice(name.as_bytes());
    path.push(0);
    path
}

/// The hidden file of the machine's cgroup mount that holds task `id`'s
/// `/proc/ID/cgroup` (as the reader's pid namespace numbers it),
/// NUL-terminated.
pub fn cgroup_file(id: u32) -> alloc::vec::Vec<u8> {
    let mut path = alloc::vec::Vec::with_capacity(48);
    path.extend_from_slice(b"/sys/fs/cgroup/.memcg/");
    push_decimal(&mut path, u64::from(id));
    path.extend_from_slice(b"/cgroup\0");
    path
}

/// Appends `n` in decimal.
pub fn push_decimal(out: &mut alloc::vec::Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}
