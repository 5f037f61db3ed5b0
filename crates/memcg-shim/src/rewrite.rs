//! The mount tables as a kernel would show them under `memcg run`: the
//! machine's FUSE mount, bound at its paths, becomes a `cgroup2` mount at
//! `/sys/fs/cgroup` and each `--fs` filesystem a mount of the type it
//! stands for, and the single files bound over `/proc` (`meminfo`,
//! `swaps`, `pressure/memory`, `sys/vm/*`) and `/sys` (zswap's
//! parameters, `class/bdi`) disappear. Pure: text in, text out, so the
//! test suite includes this file as it is.
//!
//! The machine's mounts are told by their device: that of the memcg FUSE
//! mount (`fuse.memcg`, source `memcg`) whose root is `/sys/fs/cgroup`. A
//! mount of that device is classified by its root (the path inside the
//! machine): `/sys/fs/cgroup` and below is the cgroup2 hierarchy, an
//! `--fs` directory (from [`FsTable`]) and below that filesystem, anything
//! else (a kernel file) hidden. The host's mounts that the machine's
//! cgroup mount covers (listed before it, at or below its mount point: a
//! host's cgroup v1 hierarchies, its own cgroup2) are hidden too, since
//! the machine has nothing else there. Every other line is copied byte for
//! byte.
//!
//! `/proc/cgroups` puts every controller on hierarchy 0, as a kernel with
//! no v1 hierarchy mounted does.
//!
//! `/proc/PID/mounts` has no device or root: its lines are paired with
//! `mountinfo`'s, which list the same mounts in the same order; a pairing
//! that fails (a mount came or went between the two reads) is `None`, and
//! the caller reads both again.

use alloc::vec::Vec;

/// `CGROUP2_SUPER_MAGIC`.
pub const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
/// `TMPFS_MAGIC` (`memcg run` writes it in `MEMCG_SHIM_FS`).
#[allow(dead_code)]
pub const TMPFS_MAGIC: u64 = 0x0102_1994;
/// `PROC_SUPER_MAGIC`.
pub const PROC_SUPER_MAGIC: u64 = 0x9fa0;
/// `SYSFS_MAGIC`.
pub const SYSFS_MAGIC: u64 = 0x6265_6572;
/// `FUSE_SUPER_MAGIC`: what the host kernel says of the machine's files.
pub const FUSE_SUPER_MAGIC: u64 = 0x6573_5546;

/// Where the cgroup hierarchy is, inside the machine and out.
const CGROUP_ROOT: &[u8] = b"/sys/fs/cgroup";

/// One `--fs` filesystem: what it shows itself as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsEntry {
    /// Its directory, in the machine and on the host (mangled as
    /// mountinfo writes paths: no spaces, tabs, newlines or backslashes
    /// appear raw).
    pub dir: Vec<u8>,
    pub source: Vec<u8>,
    pub fstype: Vec<u8>,
    pub magic: u64,
    /// Its superblock options (`rw,size=65536k`).
    pub options: Vec<u8>,
}

/// The `--fs` filesystems, from `MEMCG_SHIM_FS`: one per line, fields
/// separated by tabs: directory, source, type, magic (hex), options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsTable(pub Vec<FsEntry>);

impl FsTable {
    /// Parses `MEMCG_SHIM_FS`; malformed lines are left out.
    pub fn parse(text: &[u8]) -> Self {
        let entries = text
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                let mut f = line.split(|&b| b == b'\t');
                let dir = f.next()?.to_vec();
                let source = f.next()?.to_vec();
                let fstype = f.next()?.to_vec();
                let magic = parse_hex(f.next()?)?;
                let options = f.next()?.to_vec();
                (!dir.is_empty()).then_some(FsEntry {
                    dir,
                    source,
                    fstype,
                    magic,
                    options,
                })
            })
            .collect();
        Self(entries)
    }
}

fn parse_hex(text: &[u8]) -> Option<u64> {
    let text = text.strip_prefix(b"0x").unwrap_or(text);
    if text.is_empty() || text.len() > 16 {
        return None;
    }
    text.iter().try_fold(0u64, |n, &c| {
        let d = (c as char).to_digit(16)?;
        Some(n << 4 | u64::from(d))
    })
}

/// What a mount of the machine is shown as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Not the machine's: shown as it is.
    Foreign,
    /// The cgroup2 hierarchy.
    Cgroup,
    /// An `--fs` filesystem (index in the table).
    Fs(usize),
    /// A kernel file bound over the host's: not shown.
    Hidden,
}

/// A `mountinfo` line, split into its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountInfo<'a> {
    pub id: &'a [u8],
    pub parent: &'a [u8],
    pub dev: &'a [u8],
    pub root: &'a [u8],
    pub point: &'a [u8],
    pub mount_options: &'a [u8],
    /// The optional fields (`shared:5 master:2`), possibly empty.
    pub optional: &'a [u8],
    pub fstype: &'a [u8],
    pub source: &'a [u8],
    pub super_options: &'a [u8],
}

/// Splits off the field before the next space.
fn field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let text = *rest;
    let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
    *rest = text.get(end + 1..).unwrap_or_default();
    Some(&text[..end]).filter(|f| !f.is_empty())
}

/// Parses a `mountinfo` line (no newline).
pub fn parse_mountinfo(line: &[u8]) -> Option<MountInfo<'_>> {
    let sep = line.windows(3).position(|w| w == b" - ")?;
    let (head, tail) = (&line[..sep], &line[sep + 3..]);
    let mut rest = head;
    let id = field(&mut rest)?;
    let parent = field(&mut rest)?;
    let dev = field(&mut rest)?;
    let root = field(&mut rest)?;
    let point = field(&mut rest)?;
    let mount_options = field(&mut rest)?;
    let optional = rest;
    let mut rest = tail;
    let fstype = field(&mut rest)?;
    let source = field(&mut rest)?;
    Some(MountInfo {
        id,
        parent,
        dev,
        root,
        point,
        mount_options,
        optional,
        fstype,
        source,
        super_options: rest,
    })
}

impl MountInfo<'_> {
    /// Whether it is a memcg FUSE mount (of any server).
    fn is_memcg(&self) -> bool {
        (self.fstype == b"fuse.memcg" || self.fstype == b"fuse") && self.source == b"memcg"
    }
}

/// `path` below `dir` (`/` for `dir` itself), if it is `dir` or under it.
fn below<'a>(path: &'a [u8], dir: &[u8]) -> Option<&'a [u8]> {
    match path.strip_prefix(dir)? {
        b"" => Some(b"/"),
        rest if rest.starts_with(b"/") => Some(rest),
        _ => None,
    }
}

/// The machine's device (`MAJ:MIN`) in a mountinfo text: that of the
/// memcg mount whose root is the cgroup hierarchy.
pub fn machine_dev(mountinfo: &[u8]) -> Option<&[u8]> {
    mountinfo
        .split(|&b| b == b'\n')
        .filter_map(parse_mountinfo)
        .find(|m| m.is_memcg() && m.root == CGROUP_ROOT)
        .map(|m| m.dev)
}

/// What mount `m` is shown as, the machine being device `dev`.
pub fn kind(m: &MountInfo<'_>, dev: Option<&[u8]>, fs: &FsTable) -> Kind {
    if dev != Some(m.dev) || !m.is_memcg() {
        return Kind::Foreign;
    }
    if below(m.root, CGROUP_ROOT).is_some() {
        return Kind::Cgroup;
    }
    match fs.0.iter().position(|e| below(m.root, &e.dir).is_some()) {
        Some(i) => Kind::Fs(i),
        None => Kind::Hidden,
    }
}

/// What each mount of a mountinfo text (by line) is shown as: [`kind`],
/// and [`Kind::Hidden`] for a host mount the machine's cgroup mount
/// covers.
pub fn kinds(mountinfo: &[u8], fs: &FsTable) -> Vec<Kind> {
    let dev = machine_dev(mountinfo);
    let mounts: Vec<Option<MountInfo<'_>>> = lines(mountinfo).map(parse_mountinfo).collect();
    let mut kinds: Vec<Kind> = mounts
        .iter()
        .map(|m| m.as_ref().map_or(Kind::Foreign, |m| kind(m, dev, fs)))
        .collect();
    for (i, m) in mounts.iter().enumerate() {
        let Some(m) = m.as_ref().filter(|_| kinds[i] == Kind::Cgroup) else {
            continue;
        };
        for (j, earlier) in mounts[..i].iter().enumerate() {
            if kinds[j] == Kind::Foreign
                && earlier
                    .as_ref()
                    .is_some_and(|e| below(e.point, m.point).is_some())
            {
                kinds[j] = Kind::Hidden;
            }
        }
    }
    kinds
}

/// The root a kernel would show: the path inside the filesystem.
fn shown_root<'a>(m: &MountInfo<'a>, kind: Kind, fs: &FsTable) -> &'a [u8] {
    let dir = match kind {
        Kind::Cgroup => CGROUP_ROOT,
        Kind::Fs(i) => &fs.0[i].dir,
        Kind::Foreign | Kind::Hidden => return m.root,
    };
    below(m.root, dir).unwrap_or(b"/")
}

/// `rw` or `ro`: the first of a mount's options.
fn rw_or_ro(options: &[u8]) -> &[u8] {
    if options.starts_with(b"ro") && options.get(2).is_none_or(|&b| b == b',') {
        b"ro"
    } else {
        b"rw"
    }
}

/// The mount options shown: cgroup2's are `nosuid,nodev,noexec,relatime`
/// (systemd's); an `--fs` keeps its bind mount's.
fn shown_mount_options(m: &MountInfo<'_>, kind: Kind) -> Vec<u8> {
    match kind {
        Kind::Cgroup => {
            let mut o = rw_or_ro(m.mount_options).to_vec();
            o.extend_from_slice(b",nosuid,nodev,noexec,relatime");
            o
        }
        _ => m.mount_options.to_vec(),
    }
}

/// Type, source and superblock options shown.
fn shown_super(kind: Kind, fs: &FsTable) -> (&[u8], &[u8], &[u8]) {
    match kind {
        Kind::Fs(i) => {
            let e = &fs.0[i];
            (&e.fstype, &e.source, &e.options)
        }
        _ => (
            b"cgroup2",
            b"cgroup2",
            // No `nsdelegate`: cgroup namespaces are not simulated.
            b"rw,memory_recursiveprot",
        ),
    }
}

fn push_fields(out: &mut Vec<u8>, fields: &[&[u8]]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(f);
    }
}

/// A mountinfo line of the machine (`kind` Cgroup or Fs), as shown.
fn push_mountinfo(out: &mut Vec<u8>, m: &MountInfo<'_>, kind: Kind, fs: &FsTable) {
    let options = shown_mount_options(m, kind);
    let (fstype, source, super_options) = shown_super(kind, fs);
    let mut head: Vec<&[u8]> = Vec::with_capacity(7);
    head.extend([
        m.id,
        m.parent,
        m.dev,
        shown_root(m, kind, fs),
        m.point,
        &options,
    ]);
    if !m.optional.is_empty() {
        head.push(m.optional);
    }
    push_fields(out, &head);
    out.extend_from_slice(b" - ");
    push_fields(out, &[fstype, source, super_options]);
}

/// `mountinfo` as a kernel would show it; `fs` names the `--fs`
/// filesystems.
pub fn rewrite_mountinfo(text: &[u8], fs: &FsTable) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for (line, kind) in lines(text).zip(kinds(text, fs)) {
        match (kind, parse_mountinfo(line)) {
            (Kind::Hidden, _) => continue,
            (Kind::Cgroup | Kind::Fs(_), Some(m)) => push_mountinfo(&mut out, &m, kind, fs),
            _ => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    out
}

/// The lines of `text`, without their newlines (a last line without one
/// included).
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    text.split(|&b| b == b'\n')
        .filter(move |_| !text.is_empty())
}

/// A `mounts` line of the machine (`kind` Cgroup or Fs), as shown: its
/// options are the mount's followed by the superblock's own.
fn push_mounts(out: &mut Vec<u8>, m: &MountInfo<'_>, kind: Kind, fs: &FsTable) {
    let (fstype, source, super_options) = shown_super(kind, fs);
    let mut options = shown_mount_options(m, kind);
    let own = super_options
        .split(|&b| b == b',')
        .skip_while(|o| *o == b"rw" || *o == b"ro");
    for o in own {
        options.push(b',');
        options.extend_from_slice(o);
    }
    push_fields(out, &[source, m.point, fstype, &options, b"0", b"0"]);
}

/// `mounts` as a kernel would show it, given the same namespace's
/// `mountinfo`: `None` when the two do not list the same mounts.
pub fn rewrite_mounts(mounts: &[u8], mountinfo: &[u8], fs: &FsTable) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(mounts.len());
    let mut infos = lines(mountinfo).zip(kinds(mountinfo, fs));
    for line in lines(mounts) {
        let (info, kind) = infos.next()?;
        let m = parse_mountinfo(info)?;
        // The mount point is the second field of a `mounts` line.
        let point = line.split(|&b| b == b' ').nth(1)?;
        if point != m.point {
            return None;
        }
        match kind {
            Kind::Hidden => continue,
            Kind::Foreign => out.extend_from_slice(line),
            k => push_mounts(&mut out, &m, k, fs),
        }
        out.push(b'\n');
    }
    infos.next().is_none().then_some(out)
}

/// The filesystem magic a kernel would report for a file on mount `m`:
/// `None` to keep what the host said.
pub fn magic(m: &MountInfo<'_>, dev: Option<&[u8]>, fs: &FsTable) -> Option<u64> {
    match kind(m, dev, fs) {
        Kind::Foreign => None,
        Kind::Cgroup => Some(CGROUP2_SUPER_MAGIC),
        Kind::Fs(i) => Some(fs.0[i].magic),
        Kind::Hidden if m.root.starts_with(b"/proc/") => Some(PROC_SUPER_MAGIC),
        Kind::Hidden => Some(SYSFS_MAGIC),
    }
}

/// The mount with id `id` in a mountinfo text, and the machine's device.
pub fn find_mount(mountinfo: &[u8], id: u64) -> Option<(MountInfo<'_>, Option<&[u8]>)> {
    let mut digits = Vec::new();
    crate::paths::push_decimal(&mut digits, id);
    let m = lines(mountinfo)
        .filter_map(parse_mountinfo)
        .find(|m| m.id == digits.as_slice())?;
    Some((m, machine_dev(mountinfo)))
}

/// `/proc/cgroups` as a kernel with only cgroup v2 mounted shows it: every
/// controller on hierarchy 0 (none is bound to a v1 hierarchy: the
/// machine's `/sys/fs/cgroup` covers the host's).
pub fn rewrite_controllers(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for line in lines(text) {
        let mut fields = line.split(|&b| b == b'\t');
        match (fields.next(), fields.next()) {
            (Some(name), Some(_)) if !line.starts_with(b"#") => {
                out.extend_from_slice(name);
                out.extend_from_slice(b"\t0");
                for f in fields {
                    out.push(b'\t');
                    out.extend_from_slice(f);
                }
            }
            _ => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    out
}
