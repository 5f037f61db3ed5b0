//! The filesystem verbs of `memcg sh`: `mount`, `umount`, `write`, `read`,
//! `rm`, `sync`, and listing a mount with `ls`. Paths under a mount are
//! files; every other path stays a cgroup path. The mount table (`mount`
//! alone) names each mount's backing device, whose readahead is
//! `/sys/class/bdi/DEVICE/read_ahead_kb`.

use std::collections::HashMap;
use std::path::PathBuf;

use memcg::cgroupfs::memparse;
use memcg::fs::{FsSource, ReadCalls};
use memcg_sim::fill::{FileBytes, FileFill, stream};

use super::{Failure, Shell};

/// What `write` put in each file (its fill and size), by path: the bytes
/// are regenerated from them to verify a file.
#[derive(Default)]
pub(super) struct Written(HashMap<String, (FileFill, u64)>);

fn failed(verb: &str, path: &str, e: &memcg_sim::SimError) -> Failure {
    use memcg::fs::FsError;
    use memcg_sim::{MountError, SimError};
    let message = match e {
        // What coreutils would print, unless only our words say why.
        SimError::Mount(MountError::Vfs { source, .. })
            if !matches!(
                **source,
                FsError::InvalidName { .. } | FsError::TooLarge { .. }
            ) =>
        {
            format!("{verb}: {path}: {}", e.errno().message())
        }
        // Mount errors name their path already.
        SimError::Mount(_) => format!("{verb}: {e}"),
        _ => format!("{verb}: {path}: {e}"),
    };
    Failure { message, status: 1 }
}

/// `mount ram SIZE DIR` | `mount dir HOSTDIR DIR`; no arguments: the table.
pub(super) fn cmd_mount(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let (source, dir) = match args {
        [] => {
            let bdis = sh.sim.machine().bdi_names();
            let text: String = sh
                .sim
                .machine()
                .mounts()
                .iter()
                .zip(&bdis)
                .map(|((dir, sb), (_, bdi))| {
                    format!("{dir} list_lru={} bdi={bdi}\n", sb.lru_design())
                })
                .collect();
            return sh.print(&text);
        }
        [kind, size, dir] if kind == "ram" => {
            let Ok(size_bytes) = memparse(size) else {
                return Err(sh.usage("mount"));
            };
            (FsSource::Ram { size_bytes }, dir)
        }
        [kind, host, dir] if kind == "dir" => (FsSource::Dir(PathBuf::from(host)), dir),
        _ => return Err(sh.usage("mount")),
    };
    sh.sim
        .machine()
        .mount(dir, source)
        .map_err(|e| failed("mount", dir, &e.into()))
}

/// `umount DIR`.
pub(super) fn cmd_umount(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let [dir] = args else {
        return Err(sh.usage("umount"));
    };
    sh.sim
        .machine()
        .umount(dir)
        .map_err(|e| failed("umount", dir, &e.into()))?;
    let prefix = format!("{}/", file_key(dir));
    sh.files.0.retain(|path, _| !path.starts_with(&prefix));
    Ok(())
}

/// `write CGROUP PATH SIZE [--fill zero|random|pattern|seq]`.
pub(super) fn cmd_write(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let (fill, rest) = match args {
        [a, b, c, flag, fill] if flag == "--fill" => match fill.parse::<FileFill>() {
            Ok(fill) => (fill, [a, b, c]),
            Err(_) => return Err(sh.usage("write")),
        },
        [a, b, c] => (FileFill::Page(memcg_sim::Fill::Pattern), [a, b, c]),
        _ => return Err(sh.usage("write")),
    };
    let [cgroup, path, size] = rest;
    let Ok(size_bytes) = memparse(size) else {
        return Err(sh.usage("write"));
    };
    let cgroup = sh.resolve(cgroup);
    // Streamed: the file is never held whole outside the page cache.
    let mut bytes = FileBytes::new(fill, stream(sh.sim.seed(), path));
    let written = sh
        .sim
        .write_file_with(&cgroup, path, size_bytes, |chunk| bytes.next_into(chunk));
    match written {
        Ok(()) => {
            sh.files.0.insert(file_key(path), (fill, size_bytes));
            Ok(())
        }
        Err(e) => {
            // What it holds now is not known: nothing to verify against.
            sh.files.0.remove(&file_key(path));
            Err(failed("write", path, &e))
        }
    }
}

/// A path as `Written` keys it.
fn file_key(path: &str) -> String {
    path.trim_end_matches('/').to_owned()
}

/// `verify PATH`: reads the file (as the root cgroup) and checks every
/// byte against what `write` put there.
pub(super) fn verify_file(sh: &mut Shell<'_>, path: &str) -> Result<(), Failure> {
    let Some(&(fill, size)) = sh.files.0.get(&file_key(path)) else {
        return Err(Failure {
            message: format!("verify: {path}: not written by this shell: nothing to compare with"),
            status: 1,
        });
    };
    // Streamed, chunk against regenerated chunk.
    let mut want = FileBytes::new(fill, stream(sh.sim.seed(), path));
    let mut expected = Vec::new();
    let mut offset = 0u64;
    let mut first_difference = None;
    let got_size = sh
        .sim
        .read_file_with("/", path, |chunk| {
            expected.resize(chunk.len(), 0);
            want.next_into(&mut expected);
            if first_difference.is_none()
                && let Some(i) = chunk.iter().zip(&expected).position(|(a, b)| a != b)
            {
                first_difference = Some((offset + i as u64, expected[i], chunk[i]));
            }
            offset += chunk.len() as u64;
        })
        .map_err(|e| failed("verify", path, &e))?;
    if got_size != size {
        return Err(Failure {
            message: format!("verify: {path}: {got_size} bytes, {size} written"),
            status: 1,
        });
    }
    match first_difference {
        Some((at, want, found)) => Err(Failure {
            message: format!(
                "verify: {path}: byte {at} differs: expected {want:#04x}, found {found:#04x}"
            ),
            status: 1,
        }),
        None => Ok(()),
    }
}

/// `read CGROUP PATH [--bs SIZE] [--count N] [--offset SIZE]`: reads the
/// file on one open file descriptor, `N` `read(2)` calls of `SIZE` bytes
/// from byte `--offset` on (default: the whole file in 64K calls, as
/// `cat`); prints the bytes read.
pub(super) fn cmd_read(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let (cgroup, path, calls) = match args {
        [cgroup, path, options @ ..] => match read_calls(options) {
            Some(calls) => (cgroup, path, calls),
            None => return Err(sh.usage("read")),
        },
        _ => return Err(sh.usage("read")),
    };
    let cgroup = sh.resolve(cgroup);
    let read = sh
        .sim
        .read_file_calls(&cgroup, path, calls, |_| {})
        .map_err(|e| failed("read", path, &e))?;
    sh.print(&format!("{path}: {read} bytes\n"))
}

/// The `read(2)` calls `--bs SIZE`, `--count N` and `--offset SIZE` ask
/// for; `None` for anything else (or a zero `--bs`).
fn read_calls(options: &[String]) -> Option<ReadCalls> {
    let mut calls = ReadCalls::default();
    for pair in options.chunks(2) {
        let [flag, value] = pair else {
            return None;
        };
        match flag.as_str() {
            "--bs" => calls.bs = usize::try_from(memparse(value).ok()?).ok()?,
            "--count" => calls.count = Some(value.parse().ok()?),
            "--offset" => calls.offset = memparse(value).ok()?,
            _ => return None,
        }
    }
    (calls.bs > 0).then_some(calls)
}

/// `rm PATH...`.
pub(super) fn cmd_rm(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    if args.is_empty() {
        return Err(sh.usage("rm"));
    }
    let mut status = 0;
    for path in args {
        sh.files.0.remove(&file_key(path));
        if let Err(e) = sh.sim.remove_file(path) {
            sh.report(&format!(
                "rm: cannot remove '{path}': {}",
                e.errno().message()
            ));
            status = 1;
        }
    }
    super::verbs::quiet_status(status)
}

/// `sync`.
pub(super) fn cmd_sync(sh: &mut Shell<'_>, _args: &[String]) -> Result<(), Failure> {
    sh.sim
        .machine()
        .sync()
        .map(drop)
        .map_err(|e| failed("sync", "", &e.into()))
}

/// `ls` of a mount or a file under one; `None` if `path` is not there.
pub(super) fn ls_mount(sh: &mut Shell<'_>, path: &str) -> Option<Result<(), Failure>> {
    let (sb, name) = sh.sim.machine().resolve_file(path)?;
    let text = if name.is_empty() {
        sb.list()
            .into_iter()
            .map(|(name, size)| format!("{name}\t{size}\n"))
            .collect()
    } else {
        match sb.size_of(&name) {
            Ok(size) => format!("{name}\t{size}\n"),
            Err(e) => {
                return Some(Err(Failure {
                    message: format!("ls: cannot access '{path}': {}", e.errno().message()),
                    status: 2,
                }));
            }
        }
    };
    Some(sh.print(&text))
}
