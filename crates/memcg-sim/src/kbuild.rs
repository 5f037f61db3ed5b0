//! A kernel build in a memory cgroup: the workload of seeds 000/003
//! (`make -j96` in a 1.5G memcg with 4K folios, or 2G with 64K folios),
//! scaled to this machine.
//!
//! `jobs` worker threads each run a stream of short-lived compile tasks in
//! `/build`. A task:
//!
//! 1. forks into `/build` and faults in an anonymous heap whose size is
//!    drawn log-uniformly from `heap_min..heap_max` (source-like text, so
//!    zswap has something to compress);
//! 2. reads its source file and `headers_per_task` headers through the
//!    page cache (`/src` on a RAM disk; headers are drawn with a skew, so
//!    the popular ones are read by most tasks and stay hot);
//! 3. touches its heap again (the compiler's working set: whatever reclaim
//!    pushed out meanwhile swaps back in);
//! 4. writes an object file of a sixteenth of its heap to `/obj`;
//! 5. checks every byte of its heap and exits.
//!
//! The default limit is 16 MiB of `memory.max` per job, the shape recent
//! patch series use (`../shared/reference/kernel-notes-reclaim-zswap-psi.md`
//! §5), with a RAM swap device (optionally behind zswap) or a swap file.
//!
//! **Replay.** Every job draws its tasks from its own seeded stream, so a
//! seed fixes what each job does. With `lockstep` the jobs also take turns
//! one task step at a time in job order (still on their own threads), so
//! the interleaving, and with it every event count, replays exactly; without
//! it the jobs run freely in parallel (the contention the seeds measured)
//! and counts vary with the scheduler.
//!
//! At the end every mapping has been verified and freed, the files removed
//! and the caches dropped: `/build` is charged nothing, no swap slot is in
//! use and zswap holds nothing, or the run fails.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use memcg::fs::FsSource;
use memcg::memcontrol::{MemcgEvent, VmEvent};
use memcg::mm_types::PAGE_SIZE;
use memcg::swap_cgroup::Design;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::fill::{FileFill, file_contents};
use crate::{Fill, Sim, SimConfig, SimError};

/// Where swapped pages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapKind {
    /// A RAM disk (`brd`, the seeds' device).
    Ram,
    /// zswap in front of a RAM disk.
    Zswap,
    /// A preallocated file at this path, made for the run and unlinked as
    /// soon as it is on (the device keeps it open), so that no exit, not
    /// even a SIGKILL, leaves it behind; a file left there before (by a
    /// run killed between the two) is replaced.
    File(PathBuf),
}

/// A kernel build's shape.
#[derive(Debug, Clone)]
pub struct KbuildConfig {
    /// Worker threads (`make -jN`).
    pub jobs: usize,
    /// Compile tasks each job runs.
    pub tasks_per_job: usize,
    /// `memory.max` of `/build`.
    pub memcg_max_bytes: u64,
    /// Pages per anonymous folio: 1 (4K) or 16 (64K mTHP).
    pub folio_pages: u32,
    /// The swap device.
    pub swap: SwapKind,
    /// The swap_cgroup design recording slot owners.
    pub swap_cgroup: Design,
    /// The kernel version's behaviour switches (`--kernel`; v6.14's by
    /// default): zswap's incompressible pages among them.
    pub behaviour: memcg::profile::Behaviour,
    /// Seed of every job's choices.
    pub seed: u64,
    /// Take turns one task step at a time (exact replay; see module docs).
    pub lockstep: bool,
    /// Source files (one per task at most; tasks share them round-robin).
    pub sources: usize,
    /// Header files.
    pub headers: usize,
    /// Headers each task reads.
    pub headers_per_task: usize,
    /// Smallest heap of a task.
    pub heap_min_bytes: u64,
    /// Largest heap of a task.
    pub heap_max_bytes: u64,
    /// The cgroup the tasks run in.
    pub cgroup: String,
    /// Where the source and object filesystems are mounted:
    /// `{files_dir}/src` and `{files_dir}/obj` (`""`: `/src` and `/obj`).
    pub files_dir: String,
    /// The simulated machine's memory (`None`: what the build needs,
    /// [`KbuildConfig::needed_machine_bytes`]).
    pub mem_bytes: Option<u64>,
}

/// Bytes of a source file and of a header.
const SOURCE_BYTES: usize = 24 << 10;
const HEADER_BYTES: usize = 16 << 10;

impl KbuildConfig {
    /// The seeds' shape scaled to `jobs`: 16 MiB of limit per job, heaps
    /// of 2–48 MiB (14 MiB on average), 24 tasks per job, a RAM swap device.
    pub fn scaled(jobs: usize) -> Self {
        Self {
            jobs,
            tasks_per_job: 24,
            memcg_max_bytes: (16 << 20) * jobs as u64,
            folio_pages: 1,
            swap: SwapKind::Ram,
            swap_cgroup: Design::Memcg,
            behaviour: memcg::profile::Behaviour::default(),
            seed: 0x5eed,
            lockstep: false,
            sources: 256,
            headers: 64,
            headers_per_task: 8,
            heap_min_bytes: 2 << 20,
            heap_max_bytes: 48 << 20,
            cgroup: "/build".to_owned(),
            files_dir: String::new(),
            mem_bytes: None,
        }
    }

    fn source_path(&self, i: usize) -> String {
        format!("{}/src/f{i}.c", self.files_dir)
    }

    fn header_path(&self, i: usize) -> String {
        format!("{}/src/h{i}.h", self.files_dir)
    }

    fn object_path(&self, job: usize, i: usize) -> String {
        format!("{}/obj/{job}-{i}.o", self.files_dir)
    }

    /// Refuses shapes that cannot run, before anything is built.
    pub fn validate(&self) -> Result<(), KbuildError> {
        let folio_bytes = u64::from(self.folio_pages) * PAGE_SIZE;
        let checks = [
            (self.jobs == 0, "--jobs must be at least 1"),
            (self.tasks_per_job == 0, "--tasks must be at least 1"),
            (
                self.folio_pages != 1 && self.folio_pages != 16,
                "--folio must be 4K or 64K",
            ),
            (
                self.memcg_max_bytes < 4 * folio_bytes,
                "--memcg-max must hold a few folios",
            ),
            (
                self.heap_min_bytes < folio_bytes || self.heap_min_bytes > self.heap_max_bytes,
                "the heap range must be at least a folio, smallest first",
            ),
            (
                self.sources == 0 || self.headers == 0,
                "--sources and --headers must be at least 1",
            ),
            (
                self.headers_per_task > self.headers,
                "a task cannot read more headers than exist",
            ),
            (
                !self.cgroup.starts_with('/') || self.cgroup == "/",
                "--cgroup must be a cgroup below the root (/build)",
            ),
        ];
        match checks.iter().find(|(bad, _)| *bad) {
            Some((_, why)) => Err(KbuildError::BadShape(why)),
            None => Ok(()),
        }
    }

    /// The simulated machine this build needs: the limit, the swap device
    /// (whose pages are the machine's for a RAM disk), the files and room.
    pub fn needed_machine_bytes(&self) -> u64 {
        self.memcg_max_bytes + self.swap_bytes() + self.files_bytes() * 2 + (64 << 20)
    }

    /// The simulated machine the build runs on: `mem_bytes`, or what it
    /// needs.
    pub fn machine_bytes(&self) -> u64 {
        self.mem_bytes
            .unwrap_or_else(|| self.needed_machine_bytes())
    }

    /// The swap device: every job's largest heap, twice, and slack.
    pub fn swap_bytes(&self) -> u64 {
        (self.heap_max_bytes * 2 * self.jobs as u64 + (16 << 20)).next_multiple_of(2 << 20)
    }

    fn files_bytes(&self) -> u64 {
        let objects = self.jobs as u64 * self.tasks_per_job as u64 * self.heap_max_bytes / 16;
        (self.sources * SOURCE_BYTES + self.headers * HEADER_BYTES) as u64 + objects
    }
}

/// Why a build could not run.
#[derive(Debug, thiserror::Error)]
pub enum KbuildError {
    /// The shape is refused before anything runs.
    #[error("{0}")]
    BadShape(&'static str),
    /// The simulator failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// `drop_caches` refused.
    #[error("drop_caches: {}", .0.message())]
    DropCaches(memcg::Errno),
    /// Something was left behind at the end.
    #[error("left behind after the build: {0}")]
    Leak(String),
}

/// What one build measured.
#[derive(Debug, Clone, Default)]
pub struct KbuildResult {
    /// Wall time of the whole build.
    pub wall_secs: f64,
    /// CPU time of every job thread, summed (the "sys + user" analogue:
    /// all of it is simulated kernel work or the task's own touching).
    pub cpu_secs: f64,
    /// CPU time per job.
    pub job_cpu_secs: Vec<f64>,
    /// Time in reclaim, summed over jobs.
    pub reclaim_secs: f64,
    /// Of that, in pageout (swap device, swap cache, accounting,
    /// `swap_cgroup`).
    pub pageout_secs: f64,
    /// Tasks that ran to the end.
    pub tasks: u64,
    /// Tasks the OOM killer took.
    pub oom_kills: u64,
    /// `max` events of `/build`.
    pub max_events: u64,
    /// Pages read from the swap device.
    pub pswpin: u64,
    /// Pages written to the swap device.
    pub pswpout: u64,
    /// Pages loaded from zswap.
    pub zswpin: u64,
    /// Pages stored in zswap.
    pub zswpout: u64,
    /// Faults.
    pub pgfault: u64,
    /// Faults that read a page (from swap).
    pub pgmajfault: u64,
    /// `swap_cgroup` operations (a record per folio swapped out, a clear
    /// per swapped folio freed, a lookup per folio swapped in), estimated
    /// from the event counts.
    pub swap_cgroup_ops: u64,
    /// Time in `swap_cgroup` calls, measured on one call in
    /// [`memcg::swap_cgroup::SAMPLE_EVERY`] per thread (clock overhead
    /// subtracted): every call, lookups elsewhere included.
    pub swap_cgroup: memcg::swap_cgroup::SwapCgroupTimes,
}

impl KbuildResult {
    /// Estimated seconds spent in `swap_cgroup` calls: the sampled time
    /// scaled by the sampling rate.
    pub fn swap_cgroup_secs(&self) -> f64 {
        self.swap_cgroup.in_map_ns as f64 * memcg::swap_cgroup::SAMPLE_EVERY as f64 * 1e-9
    }

    /// Estimated seconds spent holding a `swap_cgroup` lock.
    pub fn swap_cgroup_lock_held_secs(&self) -> f64 {
        self.swap_cgroup.lock_held_ns as f64 * memcg::swap_cgroup::SAMPLE_EVERY as f64 * 1e-9
    }
}

/// The turnstile of lockstep mode: whose turn it is.
struct Turns {
    next: Mutex<usize>,
    changed: Condvar,
    jobs: usize,
}

impl Turns {
    /// Runs `step` on job `job`'s turn and passes the turn on (to the next
    /// job still running). Without lockstep it just runs `step`.
    fn take<T>(&self, lockstep: bool, job: usize, step: impl FnOnce() -> T) -> T {
        if !lockstep {
            return step();
        }
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        while *next != job {
            next = self.changed.wait(next).unwrap_or_else(|e| e.into_inner());
        }
        let out = step();
        *next = (job + 1) % self.jobs;
        self.changed.notify_all();
        out
    }
}

/// Runs the build; see the module docs.
pub fn run(config: &KbuildConfig) -> Result<KbuildResult, KbuildError> {
    config.validate()?;
    let sim = machine(config)?;
    sim.machine().set_reclaim_timing(true);
    sim.swap().swap_cgroup().set_timing(true);
    let result = build(&sim, config)?;
    clean_up(&sim, config)?;
    sim.machine()
        .drop_caches(3)
        .map_err(KbuildError::DropCaches)?;
    check_released(&sim, &config.cgroup)?;
    Ok(result)
}

/// Runs one build in a machine that is already running (under `memcg
/// mount`, with other work and an outside controller): makes `cgroup`
/// (enabling the memory controller above it) if missing, without setting
/// any limit; mounts and fills the source and object filesystems; builds;
/// then removes the objects and unmounts both. Its figures count what the
/// cgroup saw while it ran, other tasks there included.
pub fn run_in(sim: &Sim, config: &KbuildConfig) -> Result<KbuildResult, KbuildError> {
    config.validate()?;
    make_cgroup(sim, &config.cgroup)?;
    write_files(sim, config)?;
    let result = build(sim, config);
    let cleaned = clean_up(sim, config);
    let unmounted = ["src", "obj"]
        .iter()
        .try_for_each(|d| sim.machine().umount(&format!("{}/{d}", config.files_dir)));
    let result = result?;
    cleaned?;
    unmounted.map_err(SimError::from)?;
    Ok(result)
}

/// Makes `cgroup` and its parents, the memory controller enabled in
/// every parent (where the no-internal-process rule allows it).
fn make_cgroup(sim: &Sim, cgroup: &str) -> Result<(), SimError> {
    let mut parent = String::new();
    for part in cgroup.trim_matches('/').split('/') {
        let _ = sim.fs().write(
            &format!(
                "{}/cgroup.subtree_control",
                if parent.is_empty() { "" } else { &parent }
            ),
            "+memory",
        );
        parent = format!("{parent}/{part}");
        if sim.fs().cgroup(&parent).is_err() {
            sim.fs().mkdir(&parent)?;
        }
    }
    Ok(())
}

/// The jobs' threads, from start to the last task's exit.
fn build(sim: &Sim, config: &KbuildConfig) -> Result<KbuildResult, KbuildError> {
    let turns = Turns {
        next: Mutex::new(0),
        changed: Condvar::new(),
        jobs: config.jobs,
    };
    let start = Instant::now();
    let jobs: Vec<Result<JobResult, KbuildError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..config.jobs)
            .map(|job| {
                let turns = &turns;
                s.spawn(move || run_job(sim, config, turns, job))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(KbuildError::Leak("a job panicked".into())))
            })
            .collect()
    });
    let wall_secs = start.elapsed().as_secs_f64();
    let jobs = jobs.into_iter().collect::<Result<Vec<_>, _>>()?;
    summarise(sim, config, wall_secs, &jobs)
}

/// The machine, `/build` with its limit, the swap device and the files.
fn machine(config: &KbuildConfig) -> Result<Sim, KbuildError> {
    let sim = limited_machine(
        SimConfig {
            seed: config.seed,
            swap_cgroup: config.swap_cgroup,
            mem_bytes: config.machine_bytes(),
            behaviour: config.behaviour,
            ..SimConfig::default()
        },
        &config.cgroup,
        config.memcg_max_bytes,
    )?;
    swapon(&sim, &config.swap, config.swap_bytes())?;
    write_files(&sim, config)?;
    // The files were written by the root: start the build with none cached.
    sim.machine()
        .drop_caches(3)
        .map_err(KbuildError::DropCaches)?;
    Ok(sim)
}

/// Mounts the source and object filesystems and writes the sources and
/// headers (as the root).
fn write_files(sim: &Sim, config: &KbuildConfig) -> Result<(), SimError> {
    let disk = FsSource::Ram {
        size_bytes: config.files_bytes().next_multiple_of(PAGE_SIZE) + (16 << 20),
    };
    sim.machine()
        .mount(&format!("{}/src", config.files_dir), disk.clone())?;
    sim.machine()
        .mount(&format!("{}/obj", config.files_dir), disk)?;
    for i in 0..config.sources {
        let text = file_contents(
            FileFill::Page(Fill::Text),
            config.seed ^ i as u64,
            SOURCE_BYTES,
        );
        sim.write_file("/", &config.source_path(i), &text)?;
    }
    for i in 0..config.headers {
        let text = file_contents(
            FileFill::Page(Fill::Text),
            !config.seed ^ i as u64,
            HEADER_BYTES,
        );
        sim.write_file("/", &config.header_path(i), &text)?;
    }
    Ok(())
}

/// A machine of `config` with its memory faulted in (no host page faults
/// in a timed run; the kernel's pages need none either) and `cgroup`
/// made with `memory.max` at `max_bytes`.
pub(crate) fn limited_machine(
    config: SimConfig,
    cgroup: &str,
    max_bytes: u64,
) -> Result<Sim, SimError> {
    let mem_bytes = config.mem_bytes;
    let sim = Sim::new(config);
    sim.prefault(mem_bytes);
    sim.fs().write("/cgroup.subtree_control", "+memory")?;
    sim.fs().mkdir(cgroup)?;
    sim.fs()
        .write(&format!("{cgroup}/memory.max"), &max_bytes.to_string())?;
    Ok(sim)
}

/// Turns on the swap device of `kind`, `bytes` large.
pub(crate) fn swapon(sim: &Sim, kind: &SwapKind, bytes: u64) -> Result<(), SimError> {
    match kind {
        SwapKind::Ram => drop(sim.swapon_ram(bytes, None)?),
        SwapKind::Zswap => {
            sim.swapon_ram(bytes, None)?;
            sim.swap().zswap().set_enabled(true);
        }
        SwapKind::File(path) => {
            // A leftover of an earlier run, perhaps too small: not reused.
            let _ = std::fs::remove_file(path);
            let device = sim.machine().swapon_file(path, bytes, None);
            // Open (or refused); either way the name goes now.
            let _ = std::fs::remove_file(path);
            drop(device?);
        }
    }
    Ok(())
}

/// What one job did.
struct JobResult {
    cpu_secs: f64,
    tasks: u64,
    oom_kills: u64,
}

fn run_job(
    sim: &Sim,
    config: &KbuildConfig,
    turns: &Turns,
    job: usize,
) -> Result<JobResult, KbuildError> {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ (job as u64).wrapping_mul(0x9e37_79b9));
    let cpu_start = thread_cpu_secs();
    let mut result = JobResult {
        cpu_secs: 0.0,
        tasks: 0,
        oom_kills: 0,
    };
    for i in 0..config.tasks_per_job {
        let task = Task::draw(config, &mut rng, job, i);
        match task.run(sim, config, turns) {
            Ok(()) => result.tasks += 1,
            // The OOM killer chose this task: it is gone, the build goes on
            // (make would report the failed job).
            Err(SimError::Killed { .. }) => {
                result.oom_kills += 1;
                let _ = sim.free(&task.name);
            }
            // Killed between two of its steps: the kill took its mapping,
            // so the next step finds none.
            Err(SimError::NoSuchMapping(name)) if name == task.name => result.oom_kills += 1,
            Err(e) => return Err(e.into()),
        }
    }
    result.cpu_secs = thread_cpu_secs() - cpu_start;
    Ok(result)
}

/// One compile task's draw.
struct Task {
    job: usize,
    name: String,
    heap_bytes: u64,
    source: usize,
    headers: Vec<usize>,
    object: String,
}

impl Task {
    fn draw(config: &KbuildConfig, rng: &mut ChaCha8Rng, job: usize, i: usize) -> Self {
        let folio_bytes = u64::from(config.folio_pages) * PAGE_SIZE;
        let (lo, hi) = (config.heap_min_bytes as f64, config.heap_max_bytes as f64);
        let heap = (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp() as u64;
        // Skewed: header h is read with weight 1 / (h + 1).
        let headers = (0..config.headers_per_task)
            .map(|_| {
                let u: f64 = rng.random();
                ((config.headers as f64 + 1.0).powf(u) - 1.0) as usize % config.headers
            })
            .collect();
        Self {
            job,
            // Unique in the machine: other builds may run beside this one.
            name: format!("cc-{job}-{i}@{}", config.cgroup),
            heap_bytes: heap.next_multiple_of(folio_bytes).max(folio_bytes),
            source: (job * config.tasks_per_job + i) % config.sources,
            headers,
            object: config.object_path(job, i),
        }
    }

    /// Runs the task's steps, each on the job's turn in lockstep mode.
    fn run(&self, sim: &Sim, config: &KbuildConfig, turns: &Turns) -> Result<(), SimError> {
        let step = |f: &dyn Fn() -> Result<(), SimError>| turns.take(config.lockstep, self.job, f);
        step(&|| {
            sim.alloc(
                &config.cgroup,
                &self.name,
                self.heap_bytes,
                config.folio_pages,
                Fill::Text,
            )
            .map(drop)
        })?;
        // The file steps run as the task the first step made (its
        // reads and writes stall, if they reclaim, on its CPU).
        let as_task = || sim.task_of(&self.name).ok().map(|t| sim.run_as(&t));
        step(&|| {
            let _current = as_task();
            sim.read_file(&config.cgroup, &config.source_path(self.source))?;
            for &h in &self.headers {
                sim.read_file(&config.cgroup, &config.header_path(h))?;
            }
            Ok(())
        })?;
        step(&|| sim.touch(&self.name).map(drop))?;
        step(&|| {
            let _current = as_task();
            let object = file_contents(
                FileFill::Page(Fill::Text),
                self.heap_bytes,
                (self.heap_bytes / 16) as usize,
            );
            sim.write_file(&config.cgroup, &self.object, &object)
        })?;
        step(&|| {
            sim.verify(&self.name)?;
            sim.free(&self.name)
        })
    }
}

/// The build's figures from the jobs and `/build`'s counters.
fn summarise(
    sim: &Sim,
    config: &KbuildConfig,
    wall_secs: f64,
    jobs: &[JobResult],
) -> Result<KbuildResult, KbuildError> {
    let build = sim.fs().memcg(&config.cgroup).map_err(SimError::from)?;
    let event = |e: VmEvent| build.vm_event(e);
    let times = sim.machine().reclaim_times();
    let folio = u64::from(config.folio_pages);
    let (pswpin, pswpout) = (event(VmEvent::Pswpin), event(VmEvent::Pswpout));
    let (zswpin, zswpout) = (event(VmEvent::Zswpin), event(VmEvent::Zswpout));
    let swapped_out_folios = (pswpout + zswpout).div_ceil(folio);
    let swapped_in_folios = (pswpin + zswpin).div_ceil(folio);
    Ok(KbuildResult {
        wall_secs,
        cpu_secs: jobs.iter().map(|j| j.cpu_secs).sum(),
        job_cpu_secs: jobs.iter().map(|j| j.cpu_secs).collect(),
        reclaim_secs: times.reclaim_secs,
        pageout_secs: times.pageout_secs,
        tasks: jobs.iter().map(|j| j.tasks).sum(),
        oom_kills: jobs.iter().map(|j| j.oom_kills).sum(),
        max_events: build.event(MemcgEvent::Max),
        pswpin,
        pswpout,
        zswpin,
        zswpout,
        pgfault: event(VmEvent::Pgfault),
        pgmajfault: event(VmEvent::Pgmajfault),
        // A record per folio out; a clear per folio freed from swap (each
        // swapped-out folio's slots are freed once: at swap-in or exit);
        // a lookup per folio swapped in.
        swap_cgroup_ops: 2 * swapped_out_folios + swapped_in_folios,
        swap_cgroup: sim.swap().swap_cgroup().times(),
    })
}

/// Removes the object files.
fn clean_up(sim: &Sim, config: &KbuildConfig) -> Result<(), KbuildError> {
    for job in 0..config.jobs {
        for i in 0..config.tasks_per_job {
            // A task the OOM killer took wrote no object.
            match sim.remove_file(&config.object_path(job, i)) {
                Err(e) if e.errno() != memcg::Errno::ENOENT => return Err(e.into()),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Checks that `cgroup` is charged nothing and no swap slot, zswap page
/// or mapping is left.
pub(crate) fn check_released(sim: &Sim, cgroup: &str) -> Result<(), KbuildError> {
    let cg = sim.fs().memcg(cgroup).map_err(SimError::from)?;
    sim.fs().tree().drain_all_stock(&cg);
    let slots: u64 = sim.swap().swapfiles().iter().map(|d| d.inuse_pages()).sum();
    let stored = sim.swap().zswap().debug_counts().stored_pages;
    let leaks = [
        ("bytes of memory charged", cg.memory().usage() * PAGE_SIZE),
        ("pages of swap charged", cg.swap().usage()),
        ("swap slots in use", slots),
        ("zswap pages", stored),
        ("mappings", sim.mappings().len() as u64),
    ];
    match leaks.iter().find(|(_, n)| *n != 0) {
        Some((what, n)) => {
            // Say where it sits: every non-zero memory.stat line.
            let stat = sim
                .fs()
                .read(&format!("{cgroup}/memory.stat"))
                .unwrap_or_default();
            let held: Vec<&str> = stat.lines().filter(|l| !l.ends_with(" 0")).collect();
            Err(KbuildError::Leak(format!(
                "{n} {what} ({cgroup}; memory.stat: {})",
                held.join(", ")
            )))
        }
        None => Ok(()),
    }
}

/// CPU time of the calling thread.
pub(crate) fn thread_cpu_secs() -> f64 {
    // SAFETY: `clock_gettime` writes a `timespec` we own; the clock id is
    // valid on Linux.
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: see above.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(jobs: usize) -> KbuildConfig {
        KbuildConfig {
            tasks_per_job: 3,
            memcg_max_bytes: 2 << 20,
            sources: 8,
            headers: 8,
            headers_per_task: 3,
            heap_min_bytes: 1 << 20,
            heap_max_bytes: 4 << 20,
            ..KbuildConfig::scaled(jobs)
        }
    }

    #[test]
    fn a_small_build_swaps_and_leaves_nothing_behind() {
        let r = run(&tiny(2)).unwrap();
        assert_eq!(r.tasks + r.oom_kills, 6);
        assert!(r.pswpout > 0, "{r:?}");
        assert!(r.cpu_secs > 0.0 && r.wall_secs > 0.0);
    }

    #[test]
    fn a_swap_file_is_gone_from_its_directory_once_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memcg-kbuild.swap");
        // A leftover too small to reuse is replaced.
        std::fs::write(&path, b"old").unwrap();
        let sim = Sim::new(SimConfig {
            mem_bytes: 64 << 20,
            ..SimConfig::default()
        });
        swapon(&sim, &SwapKind::File(path.clone()), 4 << 20).unwrap();
        assert!(!path.exists(), "unlinked while on");
        let swap_kb = memcg::meminfo::value_kb(&sim.proc_meminfo(), "SwapTotal");
        assert!(swap_kb.is_some_and(|kb| kb > 0), "the device is on");
        let config = KbuildConfig {
            swap: SwapKind::File(path.clone()),
            ..tiny(1)
        };
        let r = run(&config).unwrap();
        assert!(r.pswpout > 0, "{r:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn lockstep_builds_replay_their_counts_exactly() {
        let config = KbuildConfig {
            lockstep: true,
            ..tiny(2)
        };
        let (a, b) = (run(&config).unwrap(), run(&config).unwrap());
        let counts = |r: &KbuildResult| {
            (
                r.tasks,
                r.oom_kills,
                r.pswpin,
                r.pswpout,
                r.pgfault,
                r.pgmajfault,
                r.max_events,
            )
        };
        assert_eq!(counts(&a), counts(&b));
    }

    #[test]
    fn zswap_and_64k_folios_work_too() {
        let config = KbuildConfig {
            swap: SwapKind::Zswap,
            folio_pages: 16,
            ..tiny(1)
        };
        let r = run(&config).unwrap();
        assert!(r.zswpout > 0, "{r:?}");
    }

    #[test]
    fn bad_shapes_are_refused_before_anything_runs() {
        for bad in [
            KbuildConfig { jobs: 0, ..tiny(1) },
            KbuildConfig {
                folio_pages: 8,
                ..tiny(1)
            },
            KbuildConfig {
                heap_min_bytes: 1 << 30,
                ..tiny(1)
            },
            KbuildConfig {
                headers_per_task: 99,
                ..tiny(1)
            },
        ] {
            assert!(matches!(run(&bad), Err(KbuildError::BadShape(_))));
        }
    }
}
