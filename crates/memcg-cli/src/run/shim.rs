//! The shim `memcg run` preloads into CMD (`crates/memcg-shim`): written
//! out for the run into a directory of its own on the host, named in
//! `LD_PRELOAD` (after any preload CMD already had), with the `--fs`
//! filesystems described in `MEMCG_SHIM_FS` for it.
//!
//! The directory (`memcg-run-shim.XXXXXX`, mode 0755, so that CMD's
//! processes of any user can map the library) is made in the first of
//! `$TMPDIR`, `/tmp`, `/var/tmp`, `/run` that no `--fs` covers and that
//! allows mapping code (not `noexec`). The server removes it when it
//! exits; the init removes it if the server dies first.
//!
//! What each `--fs` shows itself as: a `ram:` filesystem is `tmpfs`
//! (`TMPFS_MAGIC`, `size=` its size); a host directory is the host
//! filesystem that holds it (its type, source, options and magic, as a
//! bind mount of it would show).
//!
//! A statically linked CMD (an ELF executable with no `PT_INTERP`) cannot
//! take the shim: `memcg run` says so once and runs it anyway.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use memcg::fs::FsSource;

use crate::fuse::MachineSpec;

/// The shim, as built by the build script.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmemcg_shim.so"));

/// The shim's file name.
const FILE_NAME: &str = "libmemcg-shim.so";

/// The shim written out for a run; removed on drop.
pub(super) struct ShimFile {
    dir: PathBuf,
}

/// Whether `path` is `dir` or below it.
fn is_under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// Whether the filesystem at `dir` lets files be mapped executable.
fn allows_exec(dir: &Path) -> bool {
    let Ok(c_dir) = super::c_path(dir) else {
        return false;
    };
    // SAFETY: all-zero is a valid `statvfs` to fill.
    let mut buf: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a buffer for the call.
    let rc = unsafe { libc::statvfs(c_dir.as_ptr(), &mut buf) };
    rc == 0 && buf.f_flag & libc::ST_NOEXEC == 0
}

impl ShimFile {
    /// Writes the shim out where CMD will see it (see the module docs).
    pub(super) fn write(spec: &MachineSpec) -> anyhow::Result<Self> {
        let covered: Vec<PathBuf> = spec.fs.iter().map(|fs| PathBuf::from(&fs.dir)).collect();
        let parent = [
            std::env::temp_dir(),
            "/tmp".into(),
            "/var/tmp".into(),
            "/run".into(),
        ]
        .into_iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .find(|d| d.is_dir() && !covered.iter().any(|c| is_under(d, c)) && allows_exec(d))
        .context("no directory to write memcg run's shim to (all noexec or under --fs)")?;
        let dir = tempfile::Builder::new()
            .prefix("memcg-run-shim.")
            .tempdir_in(&parent)
            .with_context(|| format!("{}: cannot write memcg run's shim", parent.display()))?
            .keep();
        let shim = Self { dir };
        std::fs::set_permissions(&shim.dir, std::fs::Permissions::from_mode(0o755))?;
        let path = shim.path();
        std::fs::write(&path, SHIM).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(shim)
    }

    /// The library's path.
    pub(super) fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Its directory (for the init to remove, should the server die).
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The environment CMD gets: `LD_PRELOAD` (the shim first, then what
    /// this process had) and `MEMCG_SHIM_FS`.
    pub(super) fn env(&self, spec: &MachineSpec) -> Vec<(OsString, OsString)> {
        let mut preload = self.path().into_os_string();
        if let Some(before) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
            preload.push(":");
            preload.push(before);
        }
        vec![
            ("LD_PRELOAD".into(), preload),
            ("MEMCG_SHIM_FS".into(), fs_table(spec).into()),
        ]
    }
}

impl Drop for ShimFile {
    fn drop(&mut self) {
        remove(&self.dir);
    }
}

/// Removes the shim's directory `dir`, the library and the anonymous-memory
/// socket in it.
pub(super) fn remove(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(FILE_NAME));
    let _ = std::fs::remove_file(super::anon::AnonServer::socket_path(dir));
    let _ = std::fs::remove_dir(dir);
}

/// `MEMCG_SHIM_FS`: a line per `--fs`: directory, source, type, magic
/// (hex), options, tab-separated.
fn fs_table(spec: &MachineSpec) -> String {
    spec.fs
        .iter()
        .map(|fs| {
            let (source, fstype, magic, options) = match &fs.source {
                FsSource::Ram { size_bytes } => (
                    "tmpfs".to_owned(),
                    "tmpfs".to_owned(),
                    TMPFS_MAGIC,
                    format!("rw,size={}k", size_bytes / 1024),
                ),
                FsSource::Dir(dir) => host_fs(dir),
            };
            format!(
                "{}\t{source}\t{fstype}\t{magic:x}\t{options}\n",
                mangle(&fs.dir)
            )
        })
        .collect()
}

/// `TMPFS_MAGIC`.
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// A path as `/proc/self/mountinfo` writes it (space, tab, newline and
/// backslash as octal escapes).
fn mangle(path: &str) -> String {
    path.replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

/// The host filesystem holding a host directory `--fs`: source, type,
/// magic and options, as `/proc/self/mountinfo` and `statfs` give them
/// (a `tmpfs` where they cannot be read).
fn host_fs(dir: &Path) -> (String, String, u64, String) {
    let fallback = || ("tmpfs".into(), "tmpfs".into(), TMPFS_MAGIC, "rw".into());
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return fallback();
    };
    let Ok(c_dir) = super::c_path(&dir) else {
        return fallback();
    };
    // SAFETY: all-zero is a valid `statfs` to fill.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a buffer for the call.
    if unsafe { libc::statfs(c_dir.as_ptr(), &mut buf) } != 0 {
        return fallback();
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir_text = mangle(&dir.to_string_lossy());
    // The last (topmost) of the longest mount points holding it.
    let best = info
        .lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let point = head.split(' ').nth(4)?;
            let held =
                point == "/" || dir_text == point || dir_text.starts_with(&format!("{point}/"));
            let mut tail = tail.split(' ');
            let (fstype, source, options) = (tail.next()?, tail.next()?, tail.next()?);
            held.then_some((point.len(), (source, fstype, options)))
        })
        .max_by_key(|(len, _)| *len);
    match best {
        Some((_, (source, fstype, options))) => (
            source.to_owned(),
            fstype.to_owned(),
            buf.f_type as u64,
            options.to_owned(),
        ),
        None => fallback(),
    }
}

/// Where `program` is, as `execvp` finds it (`PATH` for a bare name).
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Whether `bytes` (the start of a file) are a 64-bit little-endian ELF
/// executable with no program interpreter (`PT_INTERP`): statically
/// linked. `None` when it is no ELF file this can read.
pub(super) fn is_static_elf(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    const ET_DYN: u16 = 3;
    const ET_EXEC: u16 = 2;
    if bytes.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
    let kind = u16_at(16)?;
    if kind != ET_EXEC && kind != ET_DYN {
        return None;
    }
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let (phentsize, phnum) = (usize::from(u16_at(54)?), usize::from(u16_at(56)?));
    let mut has_interp = false;
    for i in 0..phnum {
        has_interp |= u32_at(phoff + i * phentsize)? == PT_INTERP;
    }
    Some(!has_interp)
}

/// Says on stderr, once, that a statically linked CMD cannot take the
/// shim.
pub(super) fn warn_if_static(program: &OsStr) {
    let Some(path) = resolve(program) else {
        return;
    };
    let mut head = vec![0u8; 64 << 10];
    let Ok(n) = std::fs::File::open(&path).and_then(|mut f| {
        use std::io::Read;
        f.read(&mut head)
    }) else {
        return;
    };
    head.truncate(n);
    if is_static_elf(&head) == Some(true) {
        eprintln!(
            "memcg run: {} is statically linked: it sees the host's /proc/self/cgroup and \
             mounts; file I/O still works",
            program.to_string_lossy()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_dynamic_executables_are_told_apart() {
        let cat = std::fs::read("/bin/cat").unwrap();
        assert_eq!(is_static_elf(&cat), Some(false));
        assert_eq!(is_static_elf(b"#!/bin/sh\n"), None);
        if let Some(busybox) = ["/bin/busybox", "/usr/bin/busybox"]
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .filter(|b| is_static_elf(b) == Some(true))
        {
            assert_eq!(is_static_elf(&busybox), Some(true));
        }
    }

    #[test]
    fn fs_table_describes_each_fs() {
        let spec = MachineSpec {
            config: memcg_sim::SimConfig::default(),
            fs: vec!["/tmp/a b=ram:1M".parse().unwrap()],
            swap_bytes: None,
            workloads: Vec::new(),
        };
        assert_eq!(
            fs_table(&spec),
            "/tmp/a\\040b\ttmpfs\ttmpfs\t1021994\trw,size=1024k\n"
        );
    }
}
