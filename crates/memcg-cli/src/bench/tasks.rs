//! What the benches that run tasks on `memcg-sim` share (`swap`, `reclaim`,
//! `zswap`): sizing the simulated machine and checking the host holds it,
//! set-up on one thread per task, the hardware limits measured alongside on
//! the same bytes and threads, and the rates computed from the timings.
//!
//! Nothing here is timed on its own except [`measure_limit`]; no state is
//! shared between calls, so there is no locking beyond each limit thread's
//! own, uncontended buffers.

use std::sync::Mutex;

use anyhow::ensure;
use memcg::cgroupfs::memparse;
use memcg::mm_types::PAGE_SIZE;
use serde::Serialize;

use super::{CommonArgs, Sample, timed_threads};

/// Swap space beyond the data: the header page and partly used clusters
/// (2 MiB each) per thread.
pub(super) const DEVICE_SLACK_BYTES: u64 = 4 << 20;

/// Parses a `--size`-like flag the way the kernel parses sizes (`memparse`).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    memparse(text).map_err(|e| e.to_string())
}

/// A hardware bandwidth measured alongside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Limit {
    /// Write zeros over the buffer.
    Memset,
    /// Copy one buffer into another.
    Memcpy,
    /// OR every byte of the buffer together (no early exit).
    Read,
}

memcg::named_enum!(Limit {
    Memset => "memset",
    Memcpy => "memcpy",
    Read => "read",
});

/// The simulated machine a run needs: the mappings, a RAM device as large
/// (its pages are machine memory) and the device's tables, with room to
/// spare. Benchmarks size the machine to the experiment; the host must
/// hold it ([`check_host_fits`]).
pub(super) fn machine_bytes_for(size_bytes: u64, threads: usize) -> u64 {
    let device_bytes = size_bytes + DEVICE_SLACK_BYTES * (threads as u64 + 1);
    let tables = memcg::swap_state::swap_tables_pages(device_bytes / PAGE_SIZE) * PAGE_SIZE;
    size_bytes + device_bytes + tables + (64 << 20)
}

/// Checks the common flags and that `--size` splits over every thread
/// count into equal shares of whole `unit_bytes` folios, on a machine the
/// host can hold.
pub(super) fn check_size(
    common: &CommonArgs,
    size_bytes: u64,
    unit_bytes: u64,
) -> anyhow::Result<()> {
    common.validate(&[])?;
    for &t in &common.threads {
        ensure!(
            size_bytes > 0 && size_bytes.is_multiple_of(t as u64 * unit_bytes),
            "--size {size_bytes} does not split into {t} equal shares of whole {} KiB folios",
            unit_bytes / 1024
        );
    }
    check_host_fits(size_bytes, &common.threads)
}

/// Refuses, before any run, a size whose machine would not fit in half of
/// the host's available memory (the simulator's pages are real).
fn check_host_fits(size_bytes: u64, threads: &[usize]) -> anyhow::Result<()> {
    let needed = threads
        .iter()
        .map(|&t| machine_bytes_for(size_bytes, t))
        .max()
        .unwrap_or(0);
    let available = memcg_sim::default_mem_bytes();
    ensure!(
        needed <= available,
        "--size {size_bytes} needs a simulated machine of {needed} bytes, more than half of \
         this host's available memory ({available} bytes); use a smaller --size"
    );
    Ok(())
}

/// Runs `body` for each name on its own thread.
pub(super) fn in_parallel<F>(names: &[String], body: F) -> anyhow::Result<()>
where
    F: Fn(&str) -> anyhow::Result<()> + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = names.iter().map(|n| s.spawn(|| body(n))).collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("set-up thread panicked"))?
        })
    })
}

/// `threads` threads streaming `limit` over their share of `size_bytes`,
/// `rounds` times, on buffers already faulted in (the swap paths work on
/// pages that exist too: the RAM disk's, the folio's). The value is µs per
/// pass over `size_bytes`.
pub(super) fn measure_limit(
    limit: Limit,
    threads: usize,
    size_bytes: u64,
    rounds: u64,
) -> anyhow::Result<Sample> {
    let per_thread = usize::try_from(size_bytes / threads as u64)?;
    // Each thread locks only its own buffers: the locks are uncontended.
    let bufs: Vec<Mutex<LimitBuffers>> = (0..threads)
        .map(|t| Mutex::new(LimitBuffers::new(limit, t, per_thread)))
        .collect();
    let timed = timed_threads(threads, |t| {
        let mut bufs = bufs[t]
            .lock()
            .map_err(|_| anyhow::anyhow!("limit buffer poisoned"))?;
        (0..rounds).try_for_each(|_| bufs.pass(limit))
    })?;
    for (t, bufs) in bufs.into_iter().enumerate() {
        let bufs = bufs
            .into_inner()
            .map_err(|_| anyhow::anyhow!("limit buffer poisoned"))?;
        ensure!(
            bufs.dst
                .iter()
                .all(|&b| b == LimitBuffers::expected(limit, t)),
            "{} left the wrong bytes",
            limit.name()
        );
    }
    Ok(Sample::new(timed.secs / rounds as f64 * 1e6, &timed))
}

/// One limit thread's buffers.
struct LimitBuffers {
    /// What memcpy copies (empty for the other limits).
    src: Vec<u8>,
    /// What is written or read.
    dst: Vec<u8>,
}

impl LimitBuffers {
    /// Buffers of `bytes` for thread `t`, every page written once so that
    /// none is a shared zero page.
    fn new(limit: Limit, t: usize, bytes: usize) -> Self {
        let src = if limit == Limit::Memcpy {
            vec![t as u8 + 1; bytes]
        } else {
            Vec::new()
        };
        let mut dst = vec![1u8; bytes];
        if limit == Limit::Read {
            // What the read limit stands for is checking a zero folio.
            dst.fill(0);
        }
        Self { src, dst }
    }

    /// Every byte of `dst` after a pass of `limit` by thread `t`.
    fn expected(limit: Limit, t: usize) -> u8 {
        match limit {
            Limit::Memset | Limit::Read => 0,
            Limit::Memcpy => t as u8 + 1,
        }
    }

    /// One pass over the buffers. `black_box` keeps the compiler from
    /// merging or dropping passes: each really reads or writes every byte.
    fn pass(&mut self, limit: Limit) -> anyhow::Result<()> {
        let dst = std::hint::black_box(&mut self.dst[..]);
        match limit {
            Limit::Memset => dst.fill(0),
            Limit::Memcpy => dst.copy_from_slice(&self.src),
            Limit::Read => {
                let any = or_all(dst);
                ensure!(std::hint::black_box(any) == 0, "read found a set byte");
            }
        }
        Ok(())
    }
}

/// Every byte ORed together, eight at a time. No early exit, unlike a zero
/// check that stops at the first set byte, so the fold vectorises into a
/// streaming read: the bound on knowing a buffer is zero. (A byte-wise
/// fold vectorises worse here, and would set a bound the library's own
/// word-wise `is_zero` beats.)
fn or_all(bytes: &[u8]) -> u8 {
    let mut words = bytes.chunks_exact(8);
    let wide = words.by_ref().fold(0u64, |acc, w| {
        acc | u64::from_ne_bytes(w.try_into().expect("8 bytes"))
    });
    let tail = words.remainder().iter().fold(0u8, |acc, &b| acc | b);
    wide.to_ne_bytes().iter().fold(tail, |acc, &b| acc | b)
}

/// The standard deviation of a rate from that of the time it was computed
/// from (first order: the same relative spread).
pub(super) fn rate_stdev(rate: f64, time_us: f64, stdev_us: f64) -> f64 {
    if time_us > 0.0 {
        rate * stdev_us / time_us
    } else {
        0.0
    }
}

pub(super) fn gib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / f64::from(1u32 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_write_the_right_bytes() {
        for limit in Limit::ALL {
            let sample = measure_limit(limit, 2, 1 << 20, 3).unwrap();
            assert!(sample.value > 0.0 && sample.cpu_share > 0.0, "{sample:?}");
        }
    }
}
