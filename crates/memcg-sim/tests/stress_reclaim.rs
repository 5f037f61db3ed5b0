//! Multi-threaded, seeded stress of reclaim, the OOM killer and kills
//! against tasks that allocate, touch, swap out, verify and free their
//! mappings while a controller thread moves limits under them.
//!
//! Workers run in leaf cgroups under a limited parent (`/p`), a RAM swap
//! device larger than the working set behind them. A controller thread
//! changes the leaves' `memory.max` and `memory.high` (now and then so
//! low that the OOM killer must act), the parent's `memory.max`, writes
//! `memory.reclaim`, toggles `memory.oom.group`, creates and removes
//! cgroups (some with a short-lived task in them) and kills tasks.
//!
//! A worker's operation may fail only as a task under memory pressure can:
//! its task was killed (`Killed`, or its mapping gone: `NoSuchMapping`),
//! or a charge failed (`ENOMEM`). Any other error, a panic, corrupt bytes
//! or a hang (no progress of a thread for [`HANG_SECS`]) fails the test.
//! At the end every surviving mapping verifies, and once everything is
//! freed every counter, list, slot and pin is back where it started.
//!
//! It runs twice: with exact charges, and with the per-thread charge stock
//! on (whose stocked pages are drained before the final balance).
//!
//! The seed comes from `MEMCG_STRESS_SEED` (a fixed default otherwise) and
//! `MEMCG_STRESS_SCALE` multiplies the rounds (default 1: a few seconds).
//! The seed fixes each thread's choices, not how the threads interleave.

#[path = "../../memcg/tests/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memcg::Errno;
use memcg::lruvec::LruList;
use memcg::memcontrol::{MemCgroup, MemcgEvent, MemcgStat, VmEvent};
use memcg_sim::{Fill, Sim, SimConfig, SimError};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A thread that makes no progress for this long is hung.
const HANG_SECS: u64 = 20;

/// The seed when `MEMCG_STRESS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5eed_2ec1;

const LEAVES: [&str; 3] = ["/p/l0", "/p/l1", "/p/l2"];

/// Workers 0, 1 and 2 work (mostly) in a leaf each; worker 3 in all three.
const WORKERS: usize = 4;

/// Rounds per worker at scale 1.
const ROUNDS: u64 = 60;

/// Mappings a worker keeps alive at most.
const MAX_LIVE: usize = 3;

fn scale() -> u64 {
    std::env::var("MEMCG_STRESS_SCALE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// What each thread is doing and since when, for the watchdog.
struct Progress {
    start: Instant,
    /// Milliseconds since `start` at which the thread's current step began
    /// (0: idle).
    since_ms: Vec<AtomicU64>,
    what: Vec<Mutex<String>>,
}

impl Progress {
    fn new(threads: usize) -> Self {
        Self {
            start: Instant::now(),
            since_ms: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            what: (0..threads).map(|_| Mutex::new(String::new())).collect(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64 + 1
    }

    /// Thread `t` starts a step (a worker's round, a controller action).
    fn step(&self, t: usize, what: String) {
        *self.what[t].lock().unwrap() = what;
        self.since_ms[t].store(self.now_ms(), Ordering::Relaxed);
    }

    /// Thread `t` is done.
    fn idle(&self, t: usize) {
        self.since_ms[t].store(0, Ordering::Relaxed);
    }

    /// A thread stuck in one step for longer than [`HANG_SECS`], if any.
    fn stuck(&self) -> Option<(usize, u64, String)> {
        let now = self.now_ms();
        self.since_ms.iter().enumerate().find_map(|(t, since)| {
            let since = since.load(Ordering::Relaxed);
            (since != 0 && now - since > HANG_SECS * 1000).then(|| {
                let what = self.what[t].lock().map(|w| w.clone()).unwrap_or_default();
                (t, now - since, what)
            })
        })
    }
}

/// Whether `e` is a failure a task under memory pressure may see: killed,
/// its mapping gone with it, a charge refused (`ENOMEM`).
fn expected(e: &SimError) -> bool {
    match e {
        SimError::Killed { .. } | SimError::NoSuchMapping(_) => true,
        SimError::Corrupt { .. } | SimError::Pageout { .. } => false,
        SimError::Charge(_) | SimError::SwapIn(_) => e.errno() == Errno::ENOMEM,
        _ => false,
    }
}

/// Whether `e` means the mapping is gone (its task was killed).
fn gone(e: &SimError) -> bool {
    matches!(e, SimError::Killed { .. } | SimError::NoSuchMapping(_))
}

/// Counts of what happened, for the summary.
#[derive(Default)]
struct Tally {
    ops: AtomicU64,
    killed: AtomicU64,
    enomem: AtomicU64,
}

impl Tally {
    fn note(&self, e: &SimError) {
        if gone(e) {
            self.killed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.enomem.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn size_of(rng: &mut ChaCha8Rng) -> String {
    format!("{}K", 64 * rng.random_range(1..=48u64))
}

/// A worker: `rounds` rounds of allocating, touching, swapping out,
/// verifying and freeing its mappings.
fn worker(sim: &Sim, t: usize, rounds: u64, seed: u64, progress: &Progress, tally: &Tally) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9));
    let mut live: Vec<String> = Vec::new();
    let check = |what: &str, name: &str, e: SimError| -> SimError {
        assert!(
            expected(&e),
            "seed {seed}: worker {t}: {what} {name}: unexpected error: {e} ({e:?})"
        );
        tally.note(&e);
        e
    };
    for round in 0..rounds {
        progress.step(t, format!("worker {t} round {round} live {live:?}"));
        if live.len() < MAX_LIVE && (live.is_empty() || rng.random_bool(0.6)) {
            let cg = if t < LEAVES.len() && rng.random_bool(0.9) {
                LEAVES[t]
            } else {
                LEAVES[rng.random_range(0..LEAVES.len())]
            };
            let name = format!("w{t}-{round}");
            let size = (64 << 10) * rng.random_range(1..=8u64);
            let folio = [1, 16][rng.random_range(0..2)];
            let fill =
                [Fill::Pattern, Fill::Random, Fill::Pattern, Fill::Zero][rng.random_range(0..4)];
            tally.ops.fetch_add(1, Ordering::Relaxed);
            match sim.alloc(cg, &name, size, folio, fill) {
                Ok(_) => live.push(name),
                Err(e) => {
                    check("alloc", &name, e);
                }
            }
        }
        for _ in 0..rng.random_range(1..=5) {
            if live.is_empty() {
                break;
            }
            let i = rng.random_range(0..live.len());
            let name = live[i].clone();
            tally.ops.fetch_add(1, Ordering::Relaxed);
            let result = match rng.random_range(0..10) {
                0..=2 => sim
                    .touch(&name)
                    .map(drop)
                    .map_err(|e| check("touch", &name, e)),
                3..=5 => sim
                    .pageout(&name)
                    .map(drop)
                    .map_err(|e| check("pageout", &name, e)),
                _ => sim.verify(&name).map_err(|e| {
                    assert!(
                        matches!(e, SimError::NoSuchMapping(_)),
                        "seed {seed}: worker {t}: verify {name}: {e} ({e:?})"
                    );
                    tally.note(&e);
                    e
                }),
            };
            if let Err(e) = result
                && gone(&e)
            {
                live.swap_remove(i);
            }
        }
        if live.len() >= MAX_LIVE || (!live.is_empty() && rng.random_bool(0.3)) {
            let name = live.remove(0);
            tally.ops.fetch_add(2, Ordering::Relaxed);
            if let Err(e) = sim.verify(&name) {
                assert!(
                    matches!(e, SimError::NoSuchMapping(_)),
                    "seed {seed}: worker {t}: verify {name}: {e} ({e:?})"
                );
            }
            if let Err(e) = sim.free(&name) {
                assert!(
                    matches!(e, SimError::NoSuchMapping(_)),
                    "seed {seed}: worker {t}: free {name}: {e} ({e:?})"
                );
            }
        }
    }
    progress.idle(t);
}

/// The controller: limits, proactive reclaim, cgroups coming and going,
/// kills, until `stop`.
fn controller(sim: &Sim, t: usize, seed: u64, stop: &AtomicBool, progress: &Progress) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc0_47_20_11);
    let fs = sim.fs();
    let write = |path: &str, value: &str| {
        fs.write(path, value)
            .unwrap_or_else(|e| panic!("seed {seed}: controller: {path} <- {value}: {e}"));
    };
    let mut temp: Vec<String> = Vec::new();
    let mut next_temp = 0u64;
    let mut action = 0u64;
    while !stop.load(Ordering::Relaxed) {
        action += 1;
        let leaf = LEAVES[rng.random_range(0..LEAVES.len())];
        let pick = rng.random_range(0..100);
        progress.step(t, format!("controller action {action} ({pick}) on {leaf}"));
        match pick {
            // memory.max of a leaf: unlimited, a few hundred KiB to a few
            // MiB, or (rarely) so small that only the OOM killer helps.
            0..=24 => {
                let value = match rng.random_range(0..10) {
                    0..=1 => "max".to_owned(),
                    2 => ["0", "4K", "64K"][rng.random_range(0..3)].to_owned(),
                    _ => size_of(&mut rng),
                };
                write(&format!("{leaf}/memory.max"), &value);
                if value.len() <= 3 && value != "max" {
                    // Let the workers run into it, then lift it again.
                    std::thread::sleep(Duration::from_millis(rng.random_range(1..10)));
                    write(&format!("{leaf}/memory.max"), &size_of(&mut rng));
                }
            }
            25..=39 => {
                let value = if rng.random_bool(0.3) {
                    "max".to_owned()
                } else {
                    size_of(&mut rng)
                };
                write(&format!("{leaf}/memory.high"), &value);
            }
            40..=54 => {
                let target = if rng.random_bool(0.3) { "/p" } else { leaf };
                let amount = format!("{}K", 64 * rng.random_range(1..=16u64));
                if let Err(e) = fs.write(&format!("{target}/memory.reclaim"), &amount) {
                    assert_eq!(
                        e.errno,
                        Errno::EAGAIN,
                        "seed {seed}: controller: {target}/memory.reclaim <- {amount}: {e}"
                    );
                }
            }
            55..=62 => {
                let value = format!("{}K", 64 * rng.random_range(32..=128u64));
                write("/p/memory.max", &value);
            }
            // A cgroup comes or goes; some hold a task for a while.
            63..=77 => {
                if temp.len() < 3 && (temp.is_empty() || rng.random_bool(0.5)) {
                    let path = format!("/p/t{next_temp}");
                    next_temp += 1;
                    fs.mkdir(&path)
                        .unwrap_or_else(|e| panic!("seed {seed}: controller: mkdir {path}: {e}"));
                    if rng.random_bool(0.5) {
                        write(&format!("{path}/memory.max"), &size_of(&mut rng));
                    }
                    temp.push(path);
                } else {
                    let path = temp.swap_remove(rng.random_range(0..temp.len()));
                    let name = format!("c-{}", &path[3..]);
                    if rng.random_bool(0.6) {
                        let size = (64 << 10) * rng.random_range(1..=4u64);
                        let folio = [1, 16][rng.random_range(0..2)];
                        match sim.alloc(&path, &name, size, folio, Fill::Pattern) {
                            Ok(pid) => {
                                for step in 0..rng.random_range(0..3) {
                                    let r = if step % 2 == 0 {
                                        sim.pageout(&name).map(drop)
                                    } else {
                                        sim.touch(&name).map(drop)
                                    };
                                    if let Err(e) = r {
                                        assert!(
                                            expected(&e),
                                            "seed {seed}: controller: {name}: {e} ({e:?})"
                                        );
                                    }
                                }
                                if let Err(e) = sim.verify(&name) {
                                    assert!(
                                        matches!(e, SimError::NoSuchMapping(_)),
                                        "seed {seed}: controller: verify {name}: {e} ({e:?})"
                                    );
                                }
                                let r = if rng.random_bool(0.5) {
                                    sim.kill(pid).map_err(|e| {
                                        assert!(
                                            matches!(e, SimError::NoSuchTask(_)),
                                            "seed {seed}: controller: kill {pid}: {e}"
                                        );
                                    })
                                } else {
                                    sim.free(&name).map_err(|e| {
                                        assert!(
                                            matches!(e, SimError::NoSuchMapping(_)),
                                            "seed {seed}: controller: free {name}: {e}"
                                        );
                                    })
                                };
                                let _ = r;
                            }
                            Err(e) => assert!(
                                expected(&e),
                                "seed {seed}: controller: alloc {name}: {e} ({e:?})"
                            ),
                        }
                    }
                    // Its task is gone (freed, killed or never started):
                    // the cgroup is empty, whatever it still has charged.
                    fs.rmdir(&path)
                        .unwrap_or_else(|e| panic!("seed {seed}: controller: rmdir {path}: {e}"));
                }
            }
            78..=83 => {
                let names = sim.mappings();
                if !names.is_empty() {
                    let name = &names[rng.random_range(0..names.len())];
                    if let Ok(task) = sim.task_of(name) {
                        match sim.kill(task.pid()) {
                            Ok(()) | Err(SimError::NoSuchTask(_)) => {}
                            Err(e) => panic!("seed {seed}: controller: kill {name}: {e}"),
                        }
                    }
                }
            }
            84..=92 => {
                let on = u8::from(rng.random_bool(0.5));
                write(&format!("{leaf}/memory.oom.group"), &on.to_string());
            }
            _ => sim.swap().swapfiles().validate(),
        }
        progress.idle(t);
        std::thread::sleep(Duration::from_micros(rng.random_range(200..2000)));
    }
    for path in temp {
        fs.rmdir(&path)
            .unwrap_or_else(|e| panic!("seed {seed}: controller: rmdir {path}: {e}"));
    }
}

/// Every memory cgroup of the tree, dying ones included, parents first.
fn all_memcgs(sim: &Sim) -> Vec<Arc<MemCgroup>> {
    let mut out = Vec::new();
    let mut stack = vec![Arc::clone(sim.fs().tree().root())];
    while let Some(m) = stack.pop() {
        stack.extend(m.reclaim_children());
        out.push(m);
    }
    out
}

fn stat_line(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Everything freed: no charge, list entry, slot or extra pin anywhere.
/// Every difference is collected, then reported together.
fn assert_balanced(sim: &Sim, seed: u64, kernel_pages: u64) {
    let mut bad = Vec::new();
    let mut expect = |what: String, found: i64, want: i64| {
        if found != want {
            bad.push(format!("{what}: {found}, expected {want}"));
        }
    };
    let memcgs = all_memcgs(sim);
    let metadata = sim.fs().tree().memcg_metadata();
    for cg in &memcgs {
        let path = cg.path();
        let what = if cg.is_dying() { "dying" } else { "online" };
        // What stays charged is its descendants' own structures, charged
        // to their parents at their mkdir (kernel memory; statistics are
        // hierarchical).
        let descendants = memcgs
            .iter()
            .filter(|c| !Arc::ptr_eq(c, cg) && c.is_descendant_of(cg))
            .count() as i64;
        expect(
            format!("{path} ({what}) percpu"),
            cg.stat(MemcgStat::Percpu),
            descendants * metadata.percpu_bytes as i64,
        );
        if !cg.is_root() {
            expect(
                format!("{path} ({what}) memory"),
                cg.memory().usage() as i64,
                cg.stat(MemcgStat::Kernel),
            );
            expect(format!("{path} ({what}) swap"), cg.swap().usage() as i64, 0);
            expect(
                format!("{path} ({what}) id pins"),
                cg.id_pins() as i64,
                i64::from(!cg.is_dying()),
            );
        }
        for list in [LruList::InactiveAnon, LruList::ActiveAnon] {
            expect(
                format!("{path} ({what}) {list:?} list"),
                cg.lruvec().size(list) as i64,
                0,
            );
        }
        for stat in [
            MemcgStat::InactiveAnon,
            MemcgStat::ActiveAnon,
            MemcgStat::Anon,
        ] {
            expect(format!("{path} ({what}) {stat:?}"), cg.stat(stat), 0);
        }
        if !cg.is_dying() {
            let text = sim
                .fs()
                .read(&format!("{path}/memory.stat"))
                .unwrap_or_else(|e| panic!("seed {seed}: {path}/memory.stat: {e}"));
            for key in ["anon", "inactive_anon", "active_anon"] {
                let value = stat_line(&text, key).map_or(-1, |v| v as i64);
                expect(format!("{path} memory.stat {key}"), value, 0);
            }
        }
    }
    for device in sim.swap().swapfiles().iter() {
        expect(
            format!("{} slots in use", device.name()),
            device.inuse_pages() as i64,
            0,
        );
    }
    expect(
        "swap cache entries".to_owned(),
        sim.swap().cache_len() as i64,
        0,
    );
    let stat = sim.fs().read("/cgroup.stat").unwrap();
    expect(
        "nr_dying_subsys_memory".to_owned(),
        stat_line(&stat, "nr_dying_subsys_memory").map_or(-1, |v| v as i64),
        0,
    );
    // The machine holds the kernel's pages only: swap tables, and the RAM
    // disk's pages, which stay allocated once written (`brd` without
    // discard); swapoff gives both back.
    if sim.fs().tree().machine_used_pages() < kernel_pages {
        bad.push("machine pages below the swap tables'".to_owned());
    }
    assert!(
        bad.is_empty(),
        "seed {seed}: not balanced after freeing everything:\n  {}",
        bad.join("\n  ")
    );
    sim.swap().swapfiles().validate_idle();
}

#[test]
fn reclaim_oom_and_kills_under_churning_limits_lose_nothing() {
    run(false);
}

#[test]
fn the_same_with_the_charge_stock_on() {
    run(true);
}

/// One run, with every charge exact or through the per-thread charge
/// stock (whose pages are charged while stocked: they are drained before
/// the final balance).
fn run(stock: bool) {
    let seed = common::stress_seed_or("stress_reclaim", DEFAULT_SEED);
    let rounds = ROUNDS * scale();
    eprintln!("stress_reclaim: {rounds} rounds, charge stock {stock}");
    let sim = Sim::new(SimConfig {
        seed,
        mem_bytes: 256 << 20,
        ..SimConfig::default()
    });
    let fs = sim.fs();
    fs.tree().set_charge_stock(stock);
    fs.write("/cgroup.subtree_control", "+memory").unwrap();
    fs.mkdir("/p").unwrap();
    fs.write("/p/cgroup.subtree_control", "+memory").unwrap();
    fs.write("/p/memory.max", "4M").unwrap();
    for leaf in LEAVES {
        fs.mkdir(leaf).unwrap();
    }
    let ram = sim.swapon_ram(64 << 20, None).unwrap();
    let kernel_pages = fs.tree().machine_used_pages();

    let progress = Progress::new(WORKERS + 1);
    let tally = Tally::default();
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        // The watchdog: a hung thread never returns, so the scope would
        // never end; report and abort instead.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some((t, ms, what)) = progress.stuck() {
                    let _ = writeln!(
                        std::io::stderr(),
                        "seed {seed}: thread {t} made no progress for {ms} ms in: {what} \
                         (replay with MEMCG_STRESS_SEED={seed}); sim: {sim:?}"
                    );
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|t| {
                let (sim, progress, tally) = (&sim, &progress, &tally);
                s.spawn(move || worker(sim, t, rounds, seed, progress, tally))
            })
            .collect();
        let ctl = s.spawn(|| controller(&sim, WORKERS, seed, &stop, &progress));
        let mut panics = Vec::new();
        for w in workers {
            if let Err(p) = w.join() {
                panics.push(p);
            }
        }
        stop.store(true, Ordering::Relaxed);
        if let Err(p) = ctl.join() {
            panics.push(p);
        }
        done.store(true, Ordering::Relaxed);
        if let Some(p) = panics.into_iter().next() {
            std::panic::resume_unwind(p);
        }
    });
    let elapsed = started.elapsed();

    // Limits off: every surviving mapping comes back and holds its bytes.
    for leaf in LEAVES {
        fs.write(&format!("{leaf}/memory.max"), "max").unwrap();
        fs.write(&format!("{leaf}/memory.high"), "max").unwrap();
    }
    fs.write("/p/memory.max", "max").unwrap();
    let survivors = sim.mappings();
    for name in &survivors {
        sim.verify(name)
            .unwrap_or_else(|e| panic!("seed {seed}: final verify {name}: {e}"));
        sim.touch(name)
            .unwrap_or_else(|e| panic!("seed {seed}: final touch {name}: {e}"));
        sim.verify(name)
            .unwrap_or_else(|e| panic!("seed {seed}: final verify {name}: {e}"));
    }
    let p = fs.memcg("/p").unwrap();
    let oom_kills = p.event(MemcgEvent::OomKill);
    let (steal, swapins) = (
        p.vm_event(VmEvent::PgstealDirect),
        p.vm_event(VmEvent::Pswpin),
    );
    // The run did what it is for: reclaim, faults from swap, OOM kills.
    assert!(
        steal > 0 && swapins > 0 && oom_kills > 0,
        "seed {seed}: pgsteal {steal}, pswpin {swapins}, oom_kill {oom_kills}"
    );
    for name in &survivors {
        sim.free(name)
            .unwrap_or_else(|e| panic!("seed {seed}: final free {name}: {e}"));
    }
    assert!(sim.mappings().is_empty(), "seed {seed}");
    let stocked: u64 = all_memcgs(&sim)
        .iter()
        .map(|m| fs.tree().stocked_pages(m))
        .sum();
    assert!(
        stock || stocked == 0,
        "seed {seed}: {stocked} pages stocked"
    );
    fs.tree().drain_all_stock(fs.tree().root());
    assert_balanced(&sim, seed, kernel_pages);
    sim.swapoff(&ram)
        .unwrap_or_else(|e| panic!("seed {seed}: swapoff: {e}"));
    // Left: the memory cgroups' own structures, charged to their parents.
    assert_eq!(
        fs.tree().machine_used_pages(),
        fs.tree().root().stat(MemcgStat::Kernel) as u64,
        "seed {seed}: machine pages after swapoff"
    );
    eprintln!(
        "seed {seed}, charge stock {stock}: {} ops in {elapsed:?}: {} killed/gone, {} ENOMEM, {} OOM kills, \
         {steal} pages reclaimed and {swapins} swapped in under /p, {} survivors, \
         {stocked} pages stocked at the end",
        tally.ops.load(Ordering::Relaxed),
        tally.killed.load(Ordering::Relaxed),
        tally.enomem.load(Ordering::Relaxed),
        oom_kills,
        survivors.len()
    );
}
