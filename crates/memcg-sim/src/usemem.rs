//! `usemem` in a memory cgroup: the vm-scalability shape the swap table
//! series measure swap throughput with. `tasks` tasks (one thread each)
//! each fault in `bytes_per_task` of anonymous memory inside one cgroup
//! whose `memory.max` is below their sum, then touch it all again and
//! exit, so reclaim swaps steadily in both directions. The figure is the
//! bytes touched per second of wall time.
//!
//! Replay: each task's work is fixed by the configuration (sequential
//! touches of seeded contents); only the interleaving of reclaim with the
//! faults varies between runs. At the end every byte has been verified
//! and nothing is left charged, swapped or stored.

use std::time::Instant;

use memcg::memcontrol::VmEvent;
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::Design;

use crate::kbuild::{KbuildError, SwapKind, thread_cpu_secs};
use crate::{Fill, SimConfig, SimError};

/// A usemem run's shape.
#[derive(Debug, Clone)]
pub struct UsememConfig {
    /// Tasks, each on its own thread.
    pub tasks: usize,
    /// Bytes each task touches (twice).
    pub bytes_per_task: u64,
    /// `memory.max` of the cgroup.
    pub memcg_max_bytes: u64,
    /// Pages per folio: 1 (4K) or 16 (64K).
    pub folio_pages: u32,
    /// Page contents.
    pub fill: Fill,
    /// The swap device.
    pub swap: SwapKind,
    /// The swap_cgroup design.
    pub swap_cgroup: Design,
    /// The kernel version's behaviour switches (`--kernel`; v6.14's by
    /// default).
    pub behaviour: memcg::profile::Behaviour,
    /// Seed of the page contents.
    pub seed: u64,
    /// The simulated machine's memory (`None`: what the run needs,
    /// [`UsememConfig::needed_machine_bytes`]).
    pub mem_bytes: Option<u64>,
}

impl UsememConfig {
    /// `tasks` tasks of 64 MiB in a cgroup holding half of their sum, 4K
    /// folios of random bytes, a RAM swap device.
    pub fn scaled(tasks: usize) -> Self {
        Self {
            tasks,
            bytes_per_task: 64 << 20,
            memcg_max_bytes: (32 << 20) * tasks.max(1) as u64,
            folio_pages: 1,
            fill: Fill::Random,
            swap: SwapKind::Ram,
            swap_cgroup: Design::Memcg,
            behaviour: memcg::profile::Behaviour::default(),
            seed: 0x5eed,
            mem_bytes: None,
        }
    }

    fn validate(&self) -> Result<(), KbuildError> {
        let folio_bytes = u64::from(self.folio_pages) * PAGE_SIZE;
        let checks = [
            (self.tasks == 0, "--tasks must be at least 1"),
            (
                self.folio_pages != 1 && self.folio_pages != 16,
                "--folio must be 4K or 64K",
            ),
            (
                self.bytes_per_task == 0 || !self.bytes_per_task.is_multiple_of(folio_bytes),
                "--size must be a positive multiple of the folio size",
            ),
            (
                self.memcg_max_bytes < 4 * folio_bytes,
                "--memcg-max must hold a few folios",
            ),
        ];
        match checks.iter().find(|(bad, _)| *bad) {
            Some((_, why)) => Err(KbuildError::BadShape(why)),
            None => Ok(()),
        }
    }

    /// The swap device: everything the tasks touch, and slack.
    fn swap_bytes(&self) -> u64 {
        (self.bytes_per_task * self.tasks as u64 + (16 << 20)).next_multiple_of(2 << 20)
    }

    /// The machine the run needs: the limit, the device (a RAM disk's
    /// pages are the machine's) and room.
    pub fn needed_machine_bytes(&self) -> u64 {
        self.memcg_max_bytes + self.swap_bytes() + (64 << 20)
    }

    /// The machine the run has: `mem_bytes`, or what it needs.
    pub fn machine_bytes(&self) -> u64 {
        self.mem_bytes
            .unwrap_or_else(|| self.needed_machine_bytes())
    }
}

/// What a usemem run measured.
#[derive(Debug, Clone, Default)]
pub struct UsememResult {
    /// Wall time of the touching (set-up excluded).
    pub wall_secs: f64,
    /// CPU time of the task threads, summed.
    pub cpu_secs: f64,
    /// Bytes touched (twice each task's size, over all tasks) per second.
    pub gib_per_s: f64,
    /// Pages written to and read from swap (device or zswap).
    pub pages_out: u64,
    /// Pages read back from swap.
    pub pages_in: u64,
    /// Time in reclaim and, within it, pageout, summed over threads.
    pub reclaim_secs: f64,
    /// Of `reclaim_secs`, in pageout.
    pub pageout_secs: f64,
}

/// Runs usemem; see the module docs.
pub fn run(config: &UsememConfig) -> Result<UsememResult, KbuildError> {
    config.validate()?;
    let sim = crate::kbuild::limited_machine(
        SimConfig {
            seed: config.seed,
            swap_cgroup: config.swap_cgroup,
            mem_bytes: config.machine_bytes(),
            behaviour: config.behaviour,
            ..SimConfig::default()
        },
        "/usemem",
        config.memcg_max_bytes,
    )?;
    crate::kbuild::swapon(&sim, &config.swap, config.swap_bytes())?;
    sim.machine().set_reclaim_timing(true);
    let start = Instant::now();
    let cpu: Vec<Result<f64, SimError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..config.tasks)
            .map(|t| {
                let sim = &sim;
                s.spawn(move || {
                    let cpu = thread_cpu_secs();
                    let name = format!("usemem-{t}");
                    sim.alloc(
                        "/usemem",
                        &name,
                        config.bytes_per_task,
                        config.folio_pages,
                        config.fill,
                    )?;
                    sim.touch(&name)?;
                    sim.verify(&name)?;
                    sim.free(&name)?;
                    Ok(thread_cpu_secs() - cpu)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(SimError::NoSuchMapping("a task panicked".into())))
            })
            .collect()
    });
    let wall_secs = start.elapsed().as_secs_f64();
    let cpu_secs = cpu.into_iter().sum::<Result<f64, _>>()?;
    let cg = sim.fs().memcg("/usemem").map_err(SimError::from)?;
    let times = sim.machine().reclaim_times();
    let touched = 2 * config.bytes_per_task * config.tasks as u64;
    let result = UsememResult {
        wall_secs,
        cpu_secs,
        gib_per_s: touched as f64 / wall_secs / f64::from(1u32 << 30),
        pages_out: cg.vm_event(VmEvent::Pswpout) + cg.vm_event(VmEvent::Zswpout),
        pages_in: cg.vm_event(VmEvent::Pswpin) + cg.vm_event(VmEvent::Zswpin),
        reclaim_secs: times.reclaim_secs,
        pageout_secs: times.pageout_secs,
    };
    crate::kbuild::check_released(&sim, "/usemem")?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usemem_swaps_both_ways_and_leaves_nothing() {
        let config = UsememConfig {
            bytes_per_task: 4 << 20,
            memcg_max_bytes: 4 << 20,
            ..UsememConfig::scaled(2)
        };
        let r = run(&config).unwrap();
        assert!(r.pages_out > 0 && r.pages_in > 0, "{r:?}");
        assert!(r.gib_per_s > 0.0);
        assert!(matches!(
            run(&UsememConfig {
                bytes_per_task: 4097,
                ..config
            }),
            Err(KbuildError::BadShape(_))
        ));
    }
}
