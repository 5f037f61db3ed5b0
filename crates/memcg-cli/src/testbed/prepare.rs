//! `memcg testbed prepare`: Debian's kernel packages into bootable files.
//!
//! Per kernel, in `CACHE/kernels/LABEL/`: `vmlinux` (the uncompressed
//! ELF image, booted through its PVH entry), `initrd.cpio` (see
//! [`super::initramfs`]), `selftests/` (the kernel's own cgroup selftests,
//! built from its `linux-source` package with the host's gcc) and `stamp`
//! (the release and the build recipe's version: a kernel whose stamp
//! matches is not rebuilt). Packages come through a private apt
//! configuration under `CACHE/apt` naming Debian's `trixie` and
//! `trixie-backports` suites; the host's apt state is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::{Kernel, TestbedError, initramfs, require_tool, run_command};

/// Bumped when what prepare builds changes, so old caches rebuild.
const RECIPE_VERSION: u32 = 4;

/// The selftests built from each kernel's source.
pub(super) const SELFTESTS: [&str; 3] = ["test_memcontrol", "test_zswap", "test_core"];

/// The Debian suites the kernels come from.
const SOURCES_LIST: &str = "\
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
";

/// What prepare writes into the stamp: recipe version and init script.
fn stamp_text(release: &str) -> String {
    let recipe = format!("{RECIPE_VERSION}\n{}", initramfs::INIT_SCRIPT);
    // FNV-1a: a fingerprint of the recipe, not a security boundary.
    let hash = recipe.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("release={release}\nrecipe={hash:016x}\n")
}

/// Whether `dir` holds a kernel prepared by this recipe.
pub(super) fn is_current(dir: &Path) -> bool {
    let Ok(stamp) = std::fs::read_to_string(dir.join("stamp")) else {
        return false;
    };
    let release = stamp
        .lines()
        .find_map(|l| l.strip_prefix("release="))
        .unwrap_or_default();
    stamp == stamp_text(release) && dir.join("vmlinux").exists()
}

/// Prepares `kernels` in `cache`.
pub(super) fn prepare(cache: &Path, kernels: &[Kernel]) -> anyhow::Result<()> {
    check_tools()?;
    let todo: Vec<Kernel> = kernels
        .iter()
        .copied()
        .filter(|&k| !is_current(&cache.join("kernels").join(k.label())))
        .collect();
    for kernel in kernels.iter().filter(|k| !todo.contains(k)) {
        eprintln!("memcg testbed: kernel {kernel} is prepared");
    }
    if todo.is_empty() {
        return Ok(());
    }
    let apt = Apt::new(cache)?;
    apt.update()?;
    for kernel in todo {
        prepare_kernel(cache, &apt, kernel)
            .with_context(|| format!("preparing kernel {kernel}"))?;
    }
    Ok(())
}

fn check_tools() -> Result<(), TestbedError> {
    for (tool, package) in [
        ("apt-get", "apt"),
        ("dpkg-deb", "dpkg"),
        ("xz", "xz-utils"),
        ("tar", "tar"),
        ("gcc", "gcc"),
        ("ldd", "libc-bin"),
        ("busybox", "busybox-static"),
        ("bash", "bash"),
        ("mkfs.xfs", "xfsprogs"),
        ("mke2fs", "e2fsprogs"),
    ] {
        require_tool(tool, package)?;
    }
    Ok(())
}

/// The packages one kernel needs, as resolved from the archive today.
struct Packages {
    /// e.g. `6.12.117+deb13-amd64`.
    release: String,
    /// The image (and for 7.3 the modules) packages.
    binaries: Vec<String>,
    source: String,
}

fn prepare_kernel(cache: &Path, apt: &Apt, kernel: Kernel) -> anyhow::Result<()> {
    let packages = resolve(apt, kernel)?;
    eprintln!(
        "memcg testbed: kernel {kernel}: {} from {}",
        packages.release,
        packages.binaries.join(", ")
    );
    let dir = cache.join("kernels").join(kernel.label());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let scratch = tempfile::Builder::new()
        .prefix("prepare-")
        .tempdir_in(cache)?;
    let root = scratch.path().join("pkg");
    for name in &packages.binaries {
        let deb = apt.download(name)?;
        run_command(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    }
    extract_vmlinux(&root, &packages.release, &dir.join("vmlinux"))?;
    let sources = extract_selftest_sources(apt, &packages.source, scratch.path())?;
    let selftests = dir.join("selftests");
    build_selftests(&sources, &selftests)?;
    let modules = root.join("usr/lib/modules").join(&packages.release);
    initramfs::build(kernel, &modules, &selftests, &dir.join("initrd.cpio"))?;
    std::fs::write(dir.join("stamp"), stamp_text(&packages.release))?;
    eprintln!(
        "memcg testbed: kernel {kernel} is prepared in {}",
        dir.display()
    );
    Ok(())
}

/// The newest packages of `kernel` in the archive.
fn resolve(apt: &Apt, kernel: Kernel) -> anyhow::Result<Packages> {
    let (pattern, source) = match kernel {
        Kernel::V6_12 => (
            r"^linux-image-6\.12\.[0-9]+\+deb13-amd64-unsigned$",
            "linux-source-6.12",
        ),
        Kernel::V7_3 => (
            r"^linux-binary-unsigned-7\.3\.[0-9]+\+deb13-amd64$",
            "linux-source-7.3",
        ),
    };
    let image = apt.newest(pattern)?;
    let release = image
        .trim_start_matches("linux-image-")
        .trim_start_matches("linux-binary-unsigned-")
        .trim_end_matches("-unsigned")
        .to_string();
    let mut binaries = vec![image];
    if kernel == Kernel::V7_3 {
        binaries.push(format!("linux-modules-{release}"));
    }
    Ok(Packages {
        release,
        binaries,
        source: source.to_string(),
    })
}

/// The bzImage inside the extracted packages, decompressed to `out`.
fn extract_vmlinux(root: &Path, release: &str, out: &Path) -> anyhow::Result<()> {
    let candidates = [
        root.join("boot").join(format!("vmlinuz-{release}")),
        root.join("usr/lib/modules")
            .join(release)
            .join("vmlinuz.unsigned"),
        root.join("usr/lib/modules").join(release).join("vmlinuz"),
    ];
    let bzimage = candidates
        .iter()
        .find(|p| p.exists())
        .ok_or_else(|| TestbedError::NoKernelImage(root.to_path_buf()))?;
    let data = std::fs::read(bzimage)?;
    // The payload is one zstd frame (Debian's CONFIG_KERNEL_ZSTD); the
    // bytes after it (the decompressor's trailer) are not ours to read.
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    let start = data
        .windows(4)
        .position(|w| w == ZSTD_MAGIC)
        .ok_or_else(|| TestbedError::NoKernelImage(bzimage.clone()))?;
    let mut decoder = zstd::stream::read::Decoder::new(&data[start..])?.single_frame();
    let mut file = std::fs::File::create(out)?;
    std::io::copy(&mut decoder, &mut file)
        .with_context(|| format!("decompressing {}", bzimage.display()))?;
    let mut head = [0u8; 4];
    use std::io::Read;
    std::fs::File::open(out)?.read_exact(&mut head)?;
    anyhow::ensure!(
        &head == b"\x7fELF",
        "{} held no ELF kernel",
        bzimage.display()
    );
    Ok(())
}

/// The selftest sources of a `linux-source-*` package, under `scratch`;
/// returns `tools/testing/selftests`.
fn extract_selftest_sources(apt: &Apt, package: &str, scratch: &Path) -> anyhow::Result<PathBuf> {
    let deb = apt.download(package)?;
    let pkg = scratch.join("source-pkg");
    run_command(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&pkg))?;
    let tarball = std::fs::read_dir(pkg.join("usr/src"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.xz"))
        .ok_or_else(|| TestbedError::NoPackage(format!("{package}'s tarball")))?;
    let src = scratch.join("src");
    std::fs::create_dir_all(&src)?;
    eprintln!("memcg testbed: extracting the cgroup selftests from {package}");
    run_command(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("--wildcards")
            .args([
                "*/tools/testing/selftests/cgroup/*",
                "*/tools/testing/selftests/clone3/*",
                "*/tools/testing/selftests/pidfd/*",
                "*/tools/testing/selftests/kselftest*",
            ]),
    )?;
    let top = std::fs::read_dir(&src)?
        .filter_map(Result::ok)
        .next()
        .context("the source tarball was empty")?;
    Ok(top.path().join("tools/testing/selftests"))
}

/// Builds [`SELFTESTS`] from `selftests` (dynamically linked, unmodified).
fn build_selftests(selftests: &Path, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let cgroup = selftests.join("cgroup");
    // cgroup_util.c moved into lib/ after 6.12.
    let util = [
        cgroup.join("lib/cgroup_util.c"),
        cgroup.join("cgroup_util.c"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .context("no cgroup_util.c in the selftests")?;
    for test in SELFTESTS {
        // No -O: as the selftests' own Makefile. At -O2 gcc drops
        // alloc_anon's malloc, touch and free as dead code, and the tests
        // that expect an OOM kill see none.
        run_command(
            Command::new("gcc")
                .args(["-pthread", "-w", "-o"])
                .arg(out.join(test))
                .arg("-I")
                .arg(selftests)
                .arg("-I")
                .arg(&cgroup)
                .arg("-I")
                .arg(cgroup.join("lib/include"))
                .arg(cgroup.join(format!("{test}.c")))
                .arg(&util),
        )
        .with_context(|| format!("building selftest {test}"))?;
    }
    Ok(())
}

/// apt-get and apt-cache with their own sources, lists and caches.
struct Apt {
    dir: PathBuf,
    debs: PathBuf,
}

impl Apt {
    fn new(cache: &Path) -> anyhow::Result<Apt> {
        let dir = cache.join("apt");
        for sub in ["lists/partial", "cache/archives/partial", "etc"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        std::fs::write(dir.join("etc/sources.list"), SOURCES_LIST)?;
        let debs = cache.join("debs");
        std::fs::create_dir_all(&debs)?;
        Ok(Apt { dir, debs })
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        let d = self.dir.display();
        for option in [
            format!("Dir::Etc::SourceList={d}/etc/sources.list"),
            "Dir::Etc::SourceParts=/dev/null".to_string(),
            format!("Dir::State::Lists={d}/lists"),
            format!("Dir::Cache={d}/cache"),
            "Dir::State::Status=/dev/null".to_string(),
            "Debug::NoLocking=1".to_string(),
            "APT::Architecture=amd64".to_string(),
            "APT::Sandbox::User=root".to_string(),
        ] {
            command.arg("-o").arg(option);
        }
        command
    }

    fn update(&self) -> anyhow::Result<()> {
        eprintln!("memcg testbed: apt-get update (trixie, trixie-backports; private lists)");
        run_command(self.command("apt-get").args(["-q", "update"]))?;
        Ok(())
    }

    /// The package matching `pattern` with the highest version.
    fn newest(&self, pattern: &str) -> anyhow::Result<String> {
        let out = run_command(
            self.command("apt-cache")
                .args(["search", "--names-only"])
                .arg(pattern),
        )?;
        let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(' ').next().map(str::to_string))
            .collect();
        names
            .into_iter()
            .max_by_key(|name| version_key(name))
            .ok_or_else(|| TestbedError::NoPackage(pattern.to_string()).into())
    }

    /// `name`'s .deb, downloaded unless the cache holds it.
    fn download(&self, name: &str) -> anyhow::Result<PathBuf> {
        let cached = |debs: &Path| -> Option<PathBuf> {
            std::fs::read_dir(debs)
                .ok()?
                .filter_map(Result::ok)
                .find_map(|e| {
                    let file = e.file_name().to_string_lossy().into_owned();
                    (file.starts_with(&format!("{name}_")) && file.ends_with(".deb"))
                        .then(|| e.path())
                })
        };
        if let Some(path) = cached(&self.debs) {
            return Ok(path);
        }
        eprintln!("memcg testbed: downloading {name}");
        run_command(
            self.command("apt-get")
                .args(["-q", "download", name])
                .current_dir(&self.debs),
        )?;
        cached(&self.debs).ok_or_else(|| TestbedError::NoPackage(name.to_string()).into())
    }
}

/// The numbers in a package name, for ordering `6.12.9` before `6.12.117`.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        let a = "linux-image-6.12.9+deb13-amd64-unsigned";
        let b = "linux-image-6.12.117+deb13-amd64-unsigned";
        assert!(version_key(a) < version_key(b));
    }

    #[test]
    fn a_stamp_matches_only_its_own_recipe() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_current(dir.path()));
        std::fs::write(dir.path().join("vmlinux"), b"").unwrap();
        std::fs::write(dir.path().join("stamp"), stamp_text("6.12.1")).unwrap();
        assert!(is_current(dir.path()));
        std::fs::write(dir.path().join("stamp"), "release=6.12.1\nrecipe=0\n").unwrap();
        assert!(!is_current(dir.path()));
    }
}
