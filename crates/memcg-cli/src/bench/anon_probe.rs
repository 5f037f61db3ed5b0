//! The process side of `memcg bench anon` (`memcg bench anon-probe`, a
//! hidden subcommand): touches fresh anonymous pages natively, through a
//! userfaultfd handler thread of its own, or under `memcg run` (where the
//! shim registers its `mmap`s), and prints nanoseconds per page, one
//! number per line.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use super::anon::{ProbeArgs, ProbeMode};

const PAGE: usize = 4096;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;

/// Runs the probe.
pub fn run(args: &ProbeArgs) -> anyhow::Result<()> {
    ensure!(args.pages > 0, "no pages");
    let numbers = match args.mode {
        ProbeMode::Touch => vec![touch(args.pages)?],
        ProbeMode::Uffd => vec![uffd_touch(args.pages)?],
        ProbeMode::Swap => swap_round(args.pages)?,
        ProbeMode::Aging => vec![aging()?],
    };
    let mut out = std::io::stdout().lock();
    for n in numbers {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

/// A fresh private anonymous mapping of `pages`, THP off.
fn map(pages: usize) -> anyhow::Result<*mut u8> {
    // SAFETY: a new mapping at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        bail!("mmap: {}", std::io::Error::last_os_error());
    }
    // SAFETY: advice on the mapping just made.
    unsafe { libc::madvise(p, pages * PAGE, libc::MADV_NOHUGEPAGE) };
    Ok(p.cast())
}

/// Writes one word to each page (its first touch); ns per page.
fn touch_each(p: *mut u8, pages: usize) -> f64 {
    let start = Instant::now();
    for i in 0..pages {
        // SAFETY: page `i` of a mapping of `pages` pages.
        unsafe { p.add(i * PAGE).cast::<u64>().write_volatile(i as u64 + 1) };
    }
    start.elapsed().as_nanos() as f64 / pages as f64
}

fn touch(pages: usize) -> anyhow::Result<f64> {
    Ok(touch_each(map(pages)?, pages))
}

/// First touch with faults served by a handler thread of this process
/// copying a zero page in (`UFFDIO_COPY`).
fn uffd_touch(pages: usize) -> anyhow::Result<f64> {
    let p = map(pages)?;
    // SAFETY: makes a descriptor (O_CLOEXEC).
    let uffd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as i32;
    ensure!(
        uffd >= 0,
        "userfaultfd: {}",
        std::io::Error::last_os_error()
    );
    let mut api = [0xAAu64, 0, 0];
    let mut reg = [p as u64, (pages * PAGE) as u64, 1, 0];
    // SAFETY: the structs these ioctls read and write.
    let ok = unsafe {
        libc::ioctl(uffd, UFFDIO_API, api.as_mut_ptr()) == 0
            && libc::ioctl(uffd, UFFDIO_REGISTER, reg.as_mut_ptr()) == 0
    };
    ensure!(ok, "registering: {}", std::io::Error::last_os_error());
    std::thread::spawn(move || serve_zero_pages(uffd));
    Ok(touch_each(p, pages))
}

fn serve_zero_pages(uffd: i32) {
    let zero = vec![0u8; PAGE];
    let mut msg = [0u8; 32];
    loop {
        // SAFETY: reads one `struct uffd_msg` (blocking descriptor).
        let n = unsafe { libc::read(uffd, msg.as_mut_ptr().cast(), 32) };
        if n != 32 {
            return;
        }
        let addr =
            u64::from_ne_bytes(msg[16..24].try_into().expect("8 bytes")) & !(PAGE as u64 - 1);
        let mut copy = [addr, zero.as_ptr() as u64, PAGE as u64, 0, 0];
        // SAFETY: `struct uffdio_copy`; the source is our zero page.
        unsafe { libc::ioctl(uffd, UFFDIO_COPY, copy.as_mut_ptr()) };
    }
}

const CG: &str = "/sys/fs/cgroup/bench-anon";

fn stat(key: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(format!("{CG}/memory.stat"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .with_context(|| format!("no {key} in memory.stat"))
}

/// Moves this process into the bench cgroup (made if need be).
fn enter_cgroup() -> anyhow::Result<()> {
    let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
    let _ = std::fs::create_dir(CG);
    std::fs::write(format!("{CG}/cgroup.procs"), std::process::id().to_string())
        .context("entering the bench cgroup (is this under memcg run?)")
}

/// Reads each page's first word (as `touch_each` wrote it): how many are
/// wrong.
fn wrong_pages(p: *const u8, pages: usize) -> usize {
    (0..pages)
        // SAFETY: page `i` of a mapping of `pages` pages.
        .filter(|&i| unsafe { p.add(i * PAGE).cast::<u64>().read_volatile() } != i as u64 + 1)
        .count()
}

/// Under `memcg run`, [`super::anon::Aging`]: the hot set written, then
/// each cold MiB written once and the hot set read back (checked); the
/// cgroup's major faults meanwhile (the hot set's refaults).
fn aging() -> anyhow::Result<f64> {
    use super::anon::Aging;
    enter_cgroup()?;
    std::fs::write(
        format!("{CG}/memory.max"),
        (Aging::MAX_MIB << 20).to_string(),
    )?;
    let hot_pages = Aging::HOT_MIB << 8;
    let hot = map(hot_pages)?;
    touch_each(hot, hot_pages);
    let before = stat("pgmajfault")?;
    let mut wrong = 0;
    for _ in 0..Aging::COLD_MIB {
        touch_each(map(256)?, 256);
        wrong += wrong_pages(hot, hot_pages);
    }
    ensure!(wrong == 0, "{wrong} hot pages read back wrong");
    Ok((stat("pgmajfault")? - before) as f64)
}

/// Under `memcg run`: first touch of a pattern in each page, then
/// `memory.reclaim` of them all (swap-out), then a read of each (swap-in),
/// every page checked: ns per page of each.
fn swap_round(pages: usize) -> anyhow::Result<Vec<f64>> {
    enter_cgroup()?;
    let p = map(pages)?;
    let first = touch_each(p, pages);
    let out_before = stat("pswpout")?;
    let start = Instant::now();
    // Reclaim may stop short of the whole amount (EAGAIN): what went
    // counts.
    let _ = std::fs::write(format!("{CG}/memory.reclaim"), (pages * PAGE).to_string());
    let out_pages = stat("pswpout")? - out_before;
    let out_ns = start.elapsed().as_nanos() as f64 / out_pages.max(1) as f64;
    let in_before = stat("pswpin")?;
    let start = Instant::now();
    let wrong = wrong_pages(p, pages);
    let elapsed = start.elapsed().as_nanos() as f64;
    let in_pages = stat("pswpin")? - in_before;
    ensure!(wrong == 0, "{wrong} pages read back wrong");
    ensure!(out_pages > 0, "nothing was swapped out");
    Ok(vec![first, out_ns, elapsed / in_pages.max(1) as f64])
}
