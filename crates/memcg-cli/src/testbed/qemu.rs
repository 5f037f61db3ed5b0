//! `memcg testbed run`: one boot of one kernel under qemu, one script.
//!
//! A fresh host directory is shared with the guest over 9p (`/share`): the
//! script (as `in/script`), its arguments (`in/args`, one per line) and
//! its files go in; its stdout, stderr, status, `/init`'s log and the
//! kernel log come back in `out/`. The machine options travel on the
//! kernel command line as `memcg.NAME=VALUE` words that the guest's
//! `/init` reads. KVM is used where the host has real VMX/SVM; elsewhere
//! (this project's machines: PVM, whose KVM cannot run stock kernels) it
//! is qemu's multi-threaded TCG.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{GuestSpec, GuestSwap, TestbedError, require_tool};

/// What the script left behind.
#[derive(Debug, Clone)]
pub(crate) struct GuestOutput {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    /// The script's exit status.
    pub(crate) status: i32,
}

/// Boots the kernel in `dir` as `spec` says and runs the script.
pub(super) fn run(
    dir: &Path,
    spec: &GuestSpec,
    script: &Path,
    files: &[PathBuf],
    args: &[String],
) -> anyhow::Result<GuestOutput> {
    require_tool("qemu-system-x86_64", "qemu-system-x86")?;
    let work = tempfile::Builder::new()
        .prefix("memcg-testbed-")
        .tempdir()?;
    let share = work.path().join("share");
    stage(&share, script, files, args)?;
    let mut command = qemu_command(dir, spec, work.path(), &share)?;
    boot(&mut command, spec, work.path())?;
    collect(&share.join("out"), spec, work.path())
}

/// The share's `in/` directory.
fn stage(share: &Path, script: &Path, files: &[PathBuf], args: &[String]) -> anyhow::Result<()> {
    let input = share.join("in");
    std::fs::create_dir_all(&input)?;
    std::fs::create_dir_all(share.join("out"))?;
    std::fs::copy(script, input.join("script"))
        .with_context(|| format!("reading the script {}", script.display()))?;
    for file in files {
        let name = file
            .file_name()
            .with_context(|| format!("{} names no file", file.display()))?;
        std::fs::copy(file, input.join(name))
            .with_context(|| format!("reading {}", file.display()))?;
    }
    let mut arg_lines = String::new();
    for arg in args {
        anyhow::ensure!(!arg.contains('\n'), "a script argument holds a newline");
        arg_lines.push_str(arg);
        arg_lines.push('\n');
    }
    std::fs::write(input.join("args"), arg_lines)?;
    Ok(())
}

/// The kernel command line's words for `spec`.
fn command_line(spec: &GuestSpec) -> String {
    let mut line = String::from("console=ttyS0 quiet panic=-1 memcg.fs=");
    line.push_str(match spec.fs {
        super::GuestFs::Xfs => "xfs",
        super::GuestFs::Ext4 => "ext4",
    });
    match spec.swap {
        Some(GuestSwap::Zram(bytes)) => line.push_str(&format!(" memcg.swap=zram:{bytes}")),
        Some(GuestSwap::Disk(_)) => line.push_str(" memcg.swap=disk"),
        None => {}
    }
    if spec.zswap {
        line.push_str(" memcg.zswap=on");
    }
    if spec.mglru {
        line.push_str(" memcg.mglru=on");
    }
    if let Some(bytes) = spec.brd_bytes {
        line.push_str(&format!(" memcg.brd={}", bytes.div_ceil(1024)));
    }
    line
}

/// Whether this host's KVM can run a stock kernel (real VMX or SVM).
fn kvm_usable() -> bool {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Path::new("/dev/kvm").exists()
        && flags
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
}

fn qemu_command(
    dir: &Path,
    spec: &GuestSpec,
    work: &Path,
    share: &Path,
) -> anyhow::Result<Command> {
    let mut command = Command::new("qemu-system-x86_64");
    if kvm_usable() {
        command.args(["-accel", "kvm", "-cpu", "host"]);
    } else {
        command.args(["-accel", "tcg,thread=multi", "-cpu", "max"]);
    }
    command
        .arg("-m")
        .arg(format!("{}M", spec.mem_bytes.div_ceil(1 << 20)))
        .arg("-smp")
        .arg(spec.cpus.to_string())
        .args(["-display", "none", "-no-reboot", "-nodefaults"])
        .arg("-serial")
        .arg(format!("file:{}", work.join("console.log").display()))
        .arg("-kernel")
        .arg(dir.join("vmlinux"))
        .arg("-initrd")
        .arg(dir.join("initrd.cpio"))
        .arg("-append")
        .arg(command_line(spec))
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=share,security_model=none,id=share",
            share.display()
        ));
    if let Some(GuestSwap::Disk(bytes)) = spec.swap {
        let image = work.join("swap.img");
        std::fs::File::create(&image)?.set_len(bytes)?;
        command.arg("-drive").arg(format!(
            "file={},if=virtio,format=raw,cache=unsafe",
            image.display()
        ));
    }
    Ok(command)
}

/// Runs qemu to its end or `spec.timeout`.
fn boot(command: &mut Command, spec: &GuestSpec, work: &Path) -> anyhow::Result<()> {
    let log = std::fs::File::create(work.join("qemu.log"))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting qemu-system-x86_64")?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            let log = std::fs::read_to_string(work.join("qemu.log")).unwrap_or_default();
            anyhow::bail!("qemu-system-x86_64 failed ({status}): {}", log.trim());
        }
        if start.elapsed() > spec.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TestbedError::Timeout {
                kernel: spec.kernel,
                timeout_s: spec.timeout.as_secs(),
                console: console_tail(work),
            }
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn console_tail(work: &Path) -> String {
    let console = std::fs::read_to_string(work.join("console.log")).unwrap_or_default();
    let init = std::fs::read_to_string(work.join("share/out/init.log")).unwrap_or_default();
    let lines: Vec<&str> = console.lines().chain(init.lines()).collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn collect(out: &Path, spec: &GuestSpec, work: &Path) -> anyhow::Result<GuestOutput> {
    let Ok(status) = std::fs::read_to_string(out.join("status")) else {
        return Err(TestbedError::NoResult {
            kernel: spec.kernel,
            console: console_tail(work),
        }
        .into());
    };
    Ok(GuestOutput {
        stdout: std::fs::read(out.join("stdout")).unwrap_or_default(),
        stderr: std::fs::read(out.join("stderr")).unwrap_or_default(),
        status: status.trim().parse().unwrap_or(-1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_carries_the_machine() {
        let spec = GuestSpec {
            swap: Some(GuestSwap::Zram(1 << 30)),
            zswap: true,
            brd_bytes: Some(768 << 20),
            ..GuestSpec::default()
        };
        let line = command_line(&spec);
        assert!(line.contains("memcg.swap=zram:1073741824"), "{line}");
        assert!(line.contains("memcg.zswap=on"), "{line}");
        assert!(line.contains("memcg.brd=786432"), "{line}");
        assert!(!line.contains("mglru"), "{line}");
    }
}
