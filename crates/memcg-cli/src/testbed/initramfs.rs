//! The guest's initramfs: a `newc` cpio archive the kernel unpacks into its
//! root tmpfs.
//!
//! It holds our `/init` ([`INIT_SCRIPT`], `init.sh` beside this file),
//! busybox with a link per applet, the host's bash, mkfs.xfs and mke2fs
//! with the shared libraries `ldd` names (and `libgcc_s.so.1`, which glibc
//! `dlopen`s for `pthread_cancel`), the kernel's cgroup selftests in
//! `/selftests`, and the modules a scenario may need, decompressed, with
//! `/lib/modules/load-order` listing them dependencies first (busybox's
//! `insmod` reads neither `.ko.xz` nor `modules.dep`, so the host resolves
//! the order from each module's `depends=` field). `zram` and `brd` are
//! left out of the order: `/init` loads them with the sizes a boot asks.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::{Kernel, TestbedError, run_command};

/// The guest's `/init`.
pub(super) const INIT_SCRIPT: &str = include_str!("init.sh");

/// Modules every boot may need; `/init` loads the first group at start.
const BOOT_MODULES: [&str; 5] = ["virtio_blk", "9pnet_virtio", "9p", "xfs", "ext4"];
/// Modules `/init` loads itself, with parameters.
const ON_DEMAND_MODULES: [&str; 2] = ["zram", "brd"];
/// Checksum providers xfs and ext4 look up by name (no `depends=` names
/// them); whichever of these the kernel ships as a module is loaded.
const OPTIONAL_MODULES: [&str; 3] = ["crc32c_generic", "crc32c_cryptoapi", "crc32c_intel"];

/// Host programs the guest runs, at these guest paths.
const HOST_PROGRAMS: [(&str, &str); 3] = [
    ("bash", "/bin/bash"),
    ("mkfs.xfs", "/sbin/mkfs.xfs"),
    ("mke2fs", "/sbin/mke2fs"),
];

/// Libraries glibc loads at run time, put beside `libc.so.6`.
const DLOPENED: [&str; 1] = ["libgcc_s.so.1"];

/// One file of the archive.
enum Entry {
    Dir,
    File { data: Vec<u8>, mode: u32 },
    Symlink(String),
}

/// Builds `out` for `kernel` from its extracted `modules` tree
/// (`.../lib/modules/RELEASE`) and built `selftests`.
pub(super) fn build(
    kernel: Kernel,
    modules: &Path,
    selftests: &Path,
    out: &Path,
) -> anyhow::Result<()> {
    let mut tree: BTreeMap<String, Entry> = BTreeMap::new();
    for dir in [
        "bin",
        "sbin",
        "usr",
        "usr/bin",
        "usr/sbin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "mnt",
        "share",
        "root",
        "etc",
        "lib",
        "lib/modules",
        "selftests",
    ] {
        tree.insert(dir.to_string(), Entry::Dir);
    }
    tree.insert("init".into(), file(INIT_SCRIPT.as_bytes().to_vec(), 0o755));
    // test_memcg_sock resolves "localhost" through glibc's files.
    let hosts = b"127.0.0.1 localhost\n::1 localhost ip6-localhost\n";
    tree.insert("etc/hosts".into(), file(hosts.to_vec(), 0o644));
    tree.insert(
        "etc/nsswitch.conf".into(),
        file(b"hosts: files\n".to_vec(), 0o644),
    );
    add_busybox(&mut tree)?;
    for (program, guest_path) in HOST_PROGRAMS {
        let host = which(program)?;
        add_with_libraries(&mut tree, &host, guest_path)?;
    }
    for entry in std::fs::read_dir(selftests)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        add_with_libraries(&mut tree, &path, &format!("/selftests/{name}"))?;
    }
    add_dlopened(&mut tree)?;
    add_modules(&mut tree, kernel, modules)?;
    write_cpio(&tree, out)
}

fn file(data: Vec<u8>, mode: u32) -> Entry {
    Entry::File { data, mode }
}

fn which(program: &str) -> anyhow::Result<PathBuf> {
    let out = run_command(
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {program}")),
    )?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// busybox at /bin/busybox and a symlink per applet it lists.
fn add_busybox(tree: &mut BTreeMap<String, Entry>) -> anyhow::Result<()> {
    let busybox = which("busybox")?;
    add_with_libraries(tree, &busybox, "/bin/busybox")?;
    let list = run_command(Command::new(&busybox).arg("--list"))?;
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let path = format!("bin/{applet}");
        tree.entry(path)
            .or_insert_with(|| Entry::Symlink("busybox".into()));
    }
    Ok(())
}

/// `host` at `guest_path`, and every shared library `ldd` lists for it at
/// its own path.
fn add_with_libraries(
    tree: &mut BTreeMap<String, Entry>,
    host: &Path,
    guest_path: &str,
) -> anyhow::Result<()> {
    tree.insert(
        guest_path.trim_start_matches('/').to_string(),
        file(std::fs::read(host)?, 0o755),
    );
    // ldd of a static binary fails ("not a dynamic executable"): no libraries.
    let Ok(out) = Command::new("ldd").arg(host).output() else {
        return Ok(());
    };
    for word in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if !word.starts_with('/') {
            continue;
        }
        let guest = word.trim_start_matches('/').to_string();
        if tree.contains_key(&guest) {
            continue;
        }
        add_parents(tree, &guest);
        tree.insert(guest, file(std::fs::read(word)?, 0o755));
    }
    Ok(())
}

/// The libraries glibc `dlopen`s, which `ldd` cannot name, beside the
/// libc the programs link: `libgcc_s.so.1`, the unwinder
/// `pthread_cancel` and `pthread_exit` load (test_core's thread tests
/// cancel their threads; without it glibc aborts the whole program).
fn add_dlopened(tree: &mut BTreeMap<String, Entry>) -> anyhow::Result<()> {
    let libc = tree
        .keys()
        .find(|path| path.ends_with("/libc.so.6"))
        .context("no libc.so.6 among the guest programs' libraries")?;
    let dir = Path::new(libc).parent().unwrap_or(Path::new("")).to_owned();
    for library in DLOPENED {
        let guest = dir.join(library).to_string_lossy().into_owned();
        let host = Path::new("/").join(&guest);
        let data = std::fs::read(&host)
            .with_context(|| format!("{} (Debian's libgcc-s1 package)", host.display()))?;
        tree.insert(guest, file(data, 0o755));
    }
    Ok(())
}

fn add_parents(tree: &mut BTreeMap<String, Entry>, path: &str) {
    let mut parent = Path::new(path).parent();
    while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
        tree.entry(dir.to_string_lossy().into_owned())
            .or_insert(Entry::Dir);
        parent = dir.parent();
    }
}

/// The modules a boot may load, decompressed, and their load order.
fn add_modules(
    tree: &mut BTreeMap<String, Entry>,
    kernel: Kernel,
    modules: &Path,
) -> anyhow::Result<()> {
    let index = module_index(&modules.join("kernel"))?;
    let builtin = std::fs::read_to_string(modules.join("modules.builtin")).ok();
    let mut loaded: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    // The checksum providers first: libcrc32c looks one up when it loads.
    let wanted = OPTIONAL_MODULES.iter().map(|m| (*m, false)).chain(
        BOOT_MODULES
            .iter()
            .chain(&ON_DEMAND_MODULES)
            .map(|m| (*m, true)),
    );
    for (module, required) in wanted {
        if !index.contains_key(module) {
            let is_builtin = builtin
                .as_deref()
                .is_none_or(|b| b.lines().any(|l| module_name(l).as_deref() == Some(module)));
            if required && !is_builtin {
                return Err(TestbedError::NoModule {
                    kernel,
                    module: module.to_string(),
                }
                .into());
            }
            continue;
        }
        load_with_dependencies(kernel, module, &index, &mut loaded, &mut order)?;
    }
    let mut load_order = String::new();
    for name in &order {
        if !ON_DEMAND_MODULES.contains(&name.as_str()) {
            load_order.push_str(name);
            load_order.push('\n');
        }
    }
    for (name, data) in loaded {
        tree.insert(format!("lib/modules/{name}.ko"), file(data, 0o644));
    }
    tree.insert(
        "lib/modules/load-order".into(),
        file(load_order.into_bytes(), 0o644),
    );
    Ok(())
}

/// A module file's name as the kernel spells modules (`-` is `_`).
fn module_name(path: &str) -> Option<String> {
    let file = Path::new(path).file_name()?.to_string_lossy().into_owned();
    let stem = file.split(".ko").next()?;
    Some(stem.replace('-', "_"))
}

/// Every module file under `dir`, by module name.
fn module_index(dir: &Path) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut index = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Some(name) = module_name(&path.to_string_lossy()) {
                index.insert(name, path);
            }
        }
    }
    Ok(index)
}

/// Decompresses `module` and, first, what its `depends=` names.
fn load_with_dependencies(
    kernel: Kernel,
    module: &str,
    index: &BTreeMap<String, PathBuf>,
    loaded: &mut BTreeMap<String, Vec<u8>>,
    order: &mut Vec<String>,
) -> anyhow::Result<()> {
    if loaded.contains_key(module) {
        return Ok(());
    }
    let path = index.get(module).ok_or_else(|| TestbedError::NoModule {
        kernel,
        module: module.to_string(),
    })?;
    let data = decompress_module(path)?;
    loaded.insert(module.to_string(), Vec::new());
    for dependency in depends(&data) {
        load_with_dependencies(kernel, &dependency, index, loaded, order)?;
    }
    loaded.insert(module.to_string(), data);
    order.push(module.to_string());
    Ok(())
}

fn decompress_module(path: &Path) -> anyhow::Result<Vec<u8>> {
    let name = path.to_string_lossy();
    if name.ends_with(".xz") {
        Ok(run_command(Command::new("xz").arg("-dc").arg(path))?.stdout)
    } else if name.ends_with(".zst") {
        Ok(zstd::decode_all(std::fs::File::open(path)?)?)
    } else {
        Ok(std::fs::read(path)?)
    }
}

/// The names in a module's `.modinfo` `depends=` string.
fn depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let value = &module[at + KEY.len()..];
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end])
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace('-', "_"))
        .collect()
}

/// Writes `tree` as a `newc` cpio archive (the format the kernel unpacks).
fn write_cpio(tree: &BTreeMap<String, Entry>, out: &Path) -> anyhow::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(out)?);
    for (ino, (name, entry)) in (1u32..).zip(tree) {
        let (mode, data): (u32, &[u8]) = match entry {
            Entry::Dir => (0o040_755, &[]),
            Entry::File { data, mode } => (0o100_000 | mode, data),
            Entry::Symlink(target) => (0o120_777, target.as_bytes()),
        };
        write_cpio_entry(&mut w, ino, mode, name, data)?;
    }
    write_cpio_entry(&mut w, 0, 0, "TRAILER!!!", &[])?;
    w.flush()?;
    Ok(())
}

fn write_cpio_entry(
    w: &mut impl Write,
    ino: u32,
    mode: u32,
    name: &str,
    data: &[u8],
) -> std::io::Result<()> {
    let name_len = name.len() + 1;
    let nlink = if mode & 0o040_000 != 0 { 2 } else { 1 };
    write!(
        w,
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{name_len:08x}{:08x}",
        0,
        0,
        0,
        data.len(),
        0,
        0,
        0,
        0,
        0
    )?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    pad4(w, 110 + name_len)?;
    w.write_all(data)?;
    pad4(w, data.len())
}

fn pad4(w: &mut impl Write, len: usize) -> std::io::Result<()> {
    w.write_all(&[0u8; 3][..(4 - len % 4) % 4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_reads_the_modinfo_field() {
        let module = b"\x7fELF...\0license=GPL\0depends=9pnet,netfs\0intree=Y\0";
        assert_eq!(depends(module), ["9pnet", "netfs"]);
        assert!(depends(b"\0depends=\0").is_empty());
    }

    #[test]
    fn module_names_use_underscores() {
        let name = module_name("kernel/crypto/crc32c-cryptoapi.ko.xz");
        assert_eq!(name.as_deref(), Some("crc32c_cryptoapi"));
        assert_eq!(module_name("kernel/fs/9p/9p.ko").as_deref(), Some("9p"));
    }

    #[test]
    fn cpio_entries_are_aligned() {
        let mut out = Vec::new();
        write_cpio_entry(&mut out, 1, 0o100_644, "init", b"abc").unwrap();
        assert_eq!(&out[..6], b"070701");
        assert_eq!(out.len() % 4, 0);
    }
}
