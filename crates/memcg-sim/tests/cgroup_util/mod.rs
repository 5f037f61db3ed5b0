//! Ports of tools/testing/selftests/cgroup/cgroup_util.c (v6.14) and the
//! helpers the cgroup selftests share, over the simulator: each test
//! crate includes this module and uses a part of it, hence `dead_code`.
//!
//! Sizes: each port runs at a [`Scale`], the kernel's sizes divided by it
//! (1: the kernel's own). A test names its default (see the table in its
//! test file's module docs); `MEMCG_SELFTEST_SCALE=N` runs every port that
//! takes a scale at `N` instead (`MEMCG_SELFTEST_SCALE=1`: all at the
//! kernel's sizes).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use memcg::Errno;
use memcg::cgroupfs::{Access, OpenFile};
use memcg::fs::ReadCalls;
use memcg::meminfo;
use memcg::mm_types::PAGE_BYTES;
use memcg_sim::{Fill, Sim, SimConfig, SimError};

/// The environment variable that overrides every port's default scale.
pub const SCALE_VAR: &str = "MEMCG_SELFTEST_SCALE";

/// The divisor of a port's sizes (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale(i64);

impl Scale {
    /// The port's own default, or `MEMCG_SELFTEST_SCALE` when it is set
    /// (a positive integer; anything else is a mistake worth a panic).
    pub fn or_env(default: i64) -> Self {
        let divisor = match std::env::var(SCALE_VAR) {
            Ok(v) => v
                .parse()
                .ok()
                .filter(|&n: &i64| n > 0)
                .unwrap_or_else(|| panic!("{SCALE_VAR}={v:?}: not a positive integer")),
            Err(_) => default,
        };
        Self(divisor)
    }

    /// `MB(x)` of cgroup_util.h, divided by the scale.
    #[allow(non_snake_case)]
    pub fn MB(self, x: i64) -> i64 {
        (x << 20) / self.0
    }
}

/// `values_close` (tools/testing/selftests/cgroup/cgroup_util.h, v6.14):
/// whether `a` and `b` differ by at most `err`% of their sum, in C's
/// `long` integer arithmetic.
pub fn values_close(a: i64, b: i64, err: i64) -> bool {
    (a - b).abs() <= (a + b) / 100 * err
}

/// The simulated machine: 1 GiB of memory, a fixed seed, the memory
/// controller enabled below the root (what the selftest's `main` does) and
/// 512 MiB of RAM swap.
pub fn sim() -> Sim {
    let sim = Sim::new(SimConfig {
        seed: 0x5e1f_7e57,
        mem_bytes: 1 << 30,
        ..SimConfig::default()
    });
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.swapon_ram(512 << 20, None).unwrap();
    // Where `get_temp_fd` makes its files (the selftest's working
    // directory): a RAM disk; holes take no disk pages.
    sim.machine()
        .mount(
            "/tmp",
            memcg::fs::FsSource::Ram {
                size_bytes: 1 << 30,
            },
        )
        .unwrap();
    sim
}

/// `get_temp_fd`'s file (test_memcontrol.c: `open(".", O_TMPFILE |
/// O_RDWR | O_EXCL)`): an unnamed file on the RAM disk at `/tmp`, and the
/// open file's position, which every process given the descriptor shares.
/// Dropping it is the last `close(fd)`: the file goes, and its page cache
/// with it.
pub struct TempFd<'a> {
    sim: &'a Sim,
    path: String,
    pos: u64,
}

impl Drop for TempFd<'_> {
    fn drop(&mut self) {
        // An O_TMPFILE file has no name to outlive its last descriptor.
        self.sim.remove_file(&self.path).unwrap();
    }
}

/// `get_temp_fd` (test_memcontrol.c): a new, empty file.
pub fn get_temp_fd(sim: &Sim) -> TempFd<'_> {
    let path = proc_name("/tmp/memcg_test", "tmpfile").replace(':', "_");
    let path = format!(
        "/tmp/{}",
        path.trim_start_matches("/tmp/").replace('/', "_")
    );
    sim.write_file("/", &path, &[]).unwrap();
    TempFd { sim, path, pos: 0 }
}

/// `alloc_pagecache(fd, size)` (cgroup_util.c) run in `cgroup`: `fstat`,
/// `ftruncate` the file `size` bytes longer (a hole), then as many
/// `read(fd, buf, PAGE_SIZE)` calls from the descriptor's position as the
/// new size has pages, so every page not yet cached that they reach is
/// brought in and charged to `cgroup` (the reads past the end return 0).
pub fn alloc_pagecache(
    sim: &Sim,
    cgroup: &str,
    fd: &mut TempFd,
    size: i64,
) -> Result<(), SimError> {
    let (sb, name) = sim
        .machine()
        .resolve_file(&fd.path)
        .expect("a file under /tmp");
    let st_size = sb.size_of(&name).unwrap_or(0);
    let size = st_size + size as u64;
    sim.extend_file(cgroup, &fd.path, size)?;
    let calls = ReadCalls {
        offset: fd.pos,
        bs: PAGE_BYTES,
        count: Some(size.div_ceil(PAGE_BYTES as u64)),
    };
    fd.pos += sim.read_file_calls(cgroup, &fd.path, calls, |_| {})?;
    Ok(())
}

/// `has_localevents`: the `memory_localevents` mount option.
pub fn has_localevents(sim: &Sim) -> bool {
    sim.fs().tree().mount_options().memory_localevents
}

/// `has_recursiveprot`: the `memory_recursiveprot` mount option.
pub fn has_recursiveprot(sim: &Sim) -> bool {
    sim.fs().tree().mount_options().memory_recursiveprot
}

/// `cg_name(root, name)`, with the root at "".
pub fn cg_name(root: &str, name: &str) -> String {
    format!("{root}/{name}")
}

/// `cg_name_indexed(root, name, index)`.
pub fn cg_name_indexed(root: &str, name: &str, index: usize) -> String {
    format!("{root}/{name}{index}")
}

pub fn cg_create(sim: &Sim, cgroup: &str) {
    sim.fs().mkdir(cgroup).unwrap();
}

pub fn control(cgroup: &str, control: &str) -> String {
    format!("{cgroup}/{control}")
}

/// C's `atol`: leading whitespace, an optional sign, then digits; 0 when
/// there are none ("max").
pub fn atol(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, digits) = match s.as_bytes().first() {
        Some(b'-') => (-1, &s[1..]),
        Some(b'+') => (1, &s[1..]),
        _ => (1, s),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    sign * digits[..end].parse::<i64>().unwrap_or(0)
}

/// `cg_read_long`: the file's value as `atol` reads it, -1 if it cannot
/// be read.
pub fn cg_read_long(sim: &Sim, cgroup: &str, file: &str) -> i64 {
    sim.fs()
        .read(&control(cgroup, file))
        .map_or(-1, |text| atol(&text))
}

/// `cg_read_long_fd`: the value read through an open file.
pub fn cg_read_long_fd(fd: &OpenFile) -> i64 {
    fd.read().map_or(-1, |text| atol(&text))
}

/// `cg_read_key_long`: `atol` right after the first `key` in the file
/// (`strstr`), -1 if the key is not there.
pub fn cg_read_key_long(sim: &Sim, cgroup: &str, file: &str, key: &str) -> i64 {
    let Ok(text) = sim.fs().read(&control(cgroup, file)) else {
        return -1;
    };
    text.find(key)
        .map_or(-1, |at| atol(&text[at + key.len()..]))
}

/// `cg_read_strcmp(...) == 0`: the file reads exactly `expected`.
pub fn cg_read_strcmp(sim: &Sim, cgroup: &str, file: &str, expected: &str) -> bool {
    sim.fs()
        .read(&control(cgroup, file))
        .is_ok_and(|text| text == expected)
}

/// The pids `cgroup.procs` lists.
pub fn cg_read_pids(sim: &Sim, cgroup: &str) -> Vec<u32> {
    sim.fs()
        .read(&control(cgroup, "cgroup.procs"))
        .unwrap()
        .lines()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

/// `cg_write`: 0, or `-errno` of the failed write.
pub fn cg_write(sim: &Sim, cgroup: &str, file: &str, value: &str) -> i32 {
    match sim.fs().write(&control(cgroup, file), value) {
        Ok(()) => 0,
        Err(e) => -e.errno.code(),
    }
}

/// `cg_open(cgroup, file, O_RDWR | O_APPEND | O_CLOEXEC)`.
pub fn cg_open(sim: &Sim, cgroup: &str, file: &str) -> OpenFile {
    sim.fs()
        .open(&control(cgroup, file), Access::ReadWrite)
        .unwrap()
}

/// `write(fd, buf, len) == len` on an open file.
pub fn write_fd(fd: &mut OpenFile, value: &str) -> bool {
    fd.write(value).is_ok()
}

/// A fresh mapping name for every simulated process.
pub fn proc_name(cgroup: &str, what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{cgroup}:{what}:{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `cg_run_nowait(cgroup, alloc_anon_noexit, size)`: a process that
/// touches `size` bytes and stays alive; returns its pid and mapping.
pub fn cg_run_nowait_alloc_anon_noexit(
    sim: &Sim,
    cgroup: &str,
    size: i64,
) -> Result<(u32, String), SimError> {
    let name = proc_name(cgroup, "alloc_anon_noexit");
    let pid = sim.alloc(cgroup, &name, size as u64, 1, Fill::Pattern)?;
    Ok((pid, name))
}

/// `cg_run(cgroup, fn, size)` where `fn` allocates `size` bytes, runs
/// `check` while the memory is held, and exits: `Ok` for a zero exit
/// status, `Err` for a process that failed or was killed.
pub fn cg_run_alloc<T>(
    sim: &Sim,
    cgroup: &str,
    size: i64,
    check: impl FnOnce(&str) -> T,
) -> Result<T, SimError> {
    let name = proc_name(cgroup, "alloc_anon");
    sim.alloc(cgroup, &name, size as u64, 1, Fill::Pattern)?;
    let result = check(cgroup);
    sim.free(&name)?;
    Ok(result)
}

/// `cg_run(cgroup, alloc_anon, size)`.
pub fn cg_run_alloc_anon(sim: &Sim, cgroup: &str, size: i64) -> Result<(), SimError> {
    cg_run_alloc(sim, cgroup, size, |_| ())
}

/// `cg_test_proc_killed` (test_memcontrol.c): the cgroup has no process
/// left. Kills are synchronous here, so there is nothing to wait for.
pub fn cg_test_proc_killed(sim: &Sim, cgroup: &str) -> bool {
    cg_read_strcmp(sim, cgroup, "cgroup.procs", "")
}

/// `is_swap_enabled` (cgroup_util.c): `SwapTotal` in /proc/meminfo is
/// not zero.
pub fn is_swap_enabled(sim: &Sim) -> bool {
    meminfo::value_kb(&sim.proc_meminfo(), "SwapTotal").is_some_and(|kb| kb > 0)
}

/// `reclaim_until` (test_memcontrol.c): reclaims from `memcg` through
/// `memory.reclaim` until its usage reaches `goal`. False if the usage is
/// already below the goal, or if `memory.reclaim`'s results make no sense
/// (success without reaching the goal, an error other than `EAGAIN`).
pub fn reclaim_until(sim: &Sim, memcg: &str, goal: i64) -> bool {
    let mut reclaimed = false;
    for _retries in (1..=5).rev() {
        let current = cg_read_long(sim, memcg, "memory.current");
        if current < goal || values_close(current, goal, 3) {
            break;
        }
        // Did memory.reclaim return 0 incorrectly?
        else if reclaimed {
            return false;
        }
        let to_reclaim = current - goal;
        let err = cg_write(sim, memcg, "memory.reclaim", &to_reclaim.to_string());
        if err == 0 {
            reclaimed = true;
        } else if err != -Errno::EAGAIN.code() {
            return false;
        }
    }
    reclaimed
}
