//! The cgroup freezer with simulated tasks (`cgroup.freeze`, `frozen` in
//! `cgroup.events`, v6.14 kernel/cgroup/freezer.c): tasks stop at their
//! next freeze point, `frozen` waits for every one of them, moves freeze
//! and thaw, a frozen cgroup can still be killed, and a frozen task
//! neither runs nor stalls in pressure accounting. Also `cgroup.threads`.

#[path = "../../memcg/tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use memcg::Errno;
use memcg::clock::{ReclaimCost, VirtualClock};
use memcg::fs::FsSource;
use memcg::memcontrol::VmEvent;
use memcg_sim::{Fill, FrozenOps, Sim, SimConfig, SimError};

fn sim(cgroups: &[&str]) -> Arc<Sim> {
    let sim = Arc::new(Sim::new(SimConfig {
        mem_bytes: 256 << 20,
        charge_stock: false,
        ..SimConfig::default()
    }));
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    for cg in cgroups {
        sim.fs().mkdir(cg).unwrap();
    }
    sim
}

fn events(sim: &Sim, cg: &str) -> String {
    sim.fs().read(&format!("{cg}/cgroup.events")).unwrap()
}

/// Waits until `cg`'s `frozen` reads `frozen`: a condition another thread
/// brings about, with a generous bound so that a bug fails instead of
/// hanging.
fn wait_frozen(sim: &Sim, cg: &str, frozen: bool) {
    let want = format!("frozen {}\n", u8::from(frozen));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !events(sim, cg).ends_with(&want) {
        assert!(Instant::now() < deadline, "{cg} never read {want:?}");
        std::thread::yield_now();
    }
}

/// Freezes `cgroup` the first time the machine reclaims (its reclaim
/// probe, before the reclaim runs as always): a freeze that lands in the
/// middle of the operation whose charge reclaims.
fn freeze_on_first_reclaim(sim: &Arc<Sim>, cgroup: &'static str) {
    let weak: Weak<Sim> = Arc::downgrade(sim);
    let fired = AtomicBool::new(false);
    sim.machine().set_reclaim_probe(Arc::new(move |_| {
        let Some(sim) = weak.upgrade() else {
            return;
        };
        // Relaxed: only this flag is decided by it.
        if !fired.swap(true, Ordering::Relaxed) {
            sim.fs()
                .write(&format!("{cgroup}/cgroup.freeze"), "1")
                .unwrap();
        }
    }));
}

/// A task whose cgroup freezes in the middle of its allocation stops at
/// its next fault, `frozen` reads 1 only then, and thawing lets it finish.
#[test]
fn a_task_freezes_at_its_next_fault_and_frozen_waits_for_it() {
    let sim = sim(&["/a"]);
    sim.swapon_ram(64 << 20, None).unwrap();
    sim.fs().write("/a/memory.max", "4M").unwrap();
    freeze_on_first_reclaim(&sim, "/a");
    let worker = {
        let sim = Arc::clone(&sim);
        std::thread::spawn(move || sim.alloc("/a", "m", 8 << 20, 1, Fill::Random))
    };
    wait_frozen(&sim, "/a", true);
    assert_eq!(sim.fs().read("/a/cgroup.freeze").unwrap(), "1\n");
    assert!(
        !worker.is_finished(),
        "frozen in the middle of its allocation"
    );
    let m = sim.fs().memcg("/a").unwrap();
    let resident = sim.residency("m").unwrap();
    assert!(
        resident.resident + resident.swapped < 2048,
        "stopped before the end: {resident:?}"
    );
    assert!(m.memory().usage() <= 1024);
    sim.fs().write("/a/cgroup.freeze", "0").unwrap();
    assert_eq!(events(&sim, "/a"), "populated 1\nfrozen 0\n");
    worker.join().unwrap().unwrap();
    sim.verify("m").unwrap();
    let resident = sim.residency("m").unwrap();
    assert_eq!(resident.resident + resident.swapped, 2048);
    sim.free("m").unwrap();
}

/// `cgroup.kill` of a frozen cgroup kills its tasks, the one stopped in
/// the middle of an operation included, and everything is uncharged.
#[test]
fn a_frozen_cgroup_can_be_killed() {
    let sim = sim(&["/a"]);
    sim.swapon_ram(64 << 20, None).unwrap();
    sim.fs().write("/a/memory.max", "4M").unwrap();
    freeze_on_first_reclaim(&sim, "/a");
    sim.alloc("/a", "idle", 1 << 20, 1, Fill::Zero).unwrap();
    let worker = {
        let sim = Arc::clone(&sim);
        std::thread::spawn(move || sim.alloc("/a", "busy", 8 << 20, 1, Fill::Random))
    };
    wait_frozen(&sim, "/a", true);
    sim.fs().write("/a/cgroup.kill", "1").unwrap();
    assert!(matches!(
        worker.join().unwrap(),
        Err(SimError::Killed { .. })
    ));
    assert_eq!(sim.fs().read("/a/cgroup.procs").unwrap(), "");
    assert_eq!(
        events(&sim, "/a"),
        "populated 0\nfrozen 1\n",
        "empty and still freezing"
    );
    let m = sim.fs().memcg("/a").unwrap();
    assert_eq!((m.memory().usage(), m.swap().usage()), (0, 0));
    assert!(sim.mappings().is_empty());
    sim.fs().write("/a/cgroup.freeze", "0").unwrap();
    sim.fs().rmdir("/a").unwrap();
}

/// An operation of a frozen task waits until the task is thawed (the
/// default), or fails at once with `FrozenOps::Refuse`.
#[test]
fn operations_of_a_frozen_task_wait_or_are_refused() {
    let sim = sim(&["/a"]);
    sim.alloc("/a", "m", 1 << 20, 1, Fill::Pattern).unwrap();
    sim.fs().write("/a/cgroup.freeze", "1").unwrap();
    assert_eq!(
        events(&sim, "/a"),
        "populated 1\nfrozen 1\n",
        "idle: at once"
    );
    sim.set_frozen_ops(FrozenOps::Refuse);
    let pid = sim.task_of("m").unwrap().pid();
    for result in [
        sim.touch("m").map(drop),
        sim.pageout("m").map(drop),
        sim.free("m"),
    ] {
        match result {
            Err(e @ SimError::Frozen { .. }) => {
                assert_eq!(e.errno(), Errno::EAGAIN);
                assert!(e.to_string().contains(&format!("task {pid} is frozen")));
            }
            other => panic!("{other:?}"),
        }
    }
    // A new task in a frozen cgroup is frozen from its first fault.
    assert!(matches!(
        sim.alloc("/a", "new", 1 << 20, 1, Fill::Zero),
        Err(SimError::Frozen { .. })
    ));
    assert_eq!(
        sim.fs().read("/a/cgroup.procs").unwrap(),
        format!("{pid}\n")
    );
    assert_eq!(events(&sim, "/a"), "populated 1\nfrozen 1\n");
    // Waiting: the operation finishes once thawed.
    sim.set_frozen_ops(FrozenOps::Wait);
    let toucher = {
        let sim = Arc::clone(&sim);
        std::thread::spawn(move || sim.touch("m"))
    };
    sim.fs().write("/a/cgroup.freeze", "0").unwrap();
    toucher.join().unwrap().unwrap();
    sim.verify("m").unwrap();
    sim.free("m").unwrap();
}

/// A task moved into a frozen cgroup freezes, and moved out it thaws;
/// both cgroups' `frozen` follow. Freezing is hierarchical.
#[test]
fn moves_freeze_and_thaw_and_freezing_is_hierarchical() {
    let sim = sim(&["/a", "/p", "/p/c"]);
    sim.set_frozen_ops(FrozenOps::Refuse);
    sim.fs().write("/p/cgroup.freeze", "1").unwrap();
    assert_eq!(sim.fs().read("/p/c/cgroup.freeze").unwrap(), "0\n");
    assert_eq!(events(&sim, "/p/c"), "populated 0\nfrozen 1\n");
    let pid = sim.alloc("/a", "m", 1 << 20, 1, Fill::Zero).unwrap();
    sim.fs()
        .write("/p/c/cgroup.procs", &pid.to_string())
        .unwrap();
    assert_eq!(events(&sim, "/p/c"), "populated 1\nfrozen 1\n");
    assert_eq!(events(&sim, "/p"), "populated 1\nfrozen 1\n");
    assert!(matches!(sim.touch("m"), Err(SimError::Frozen { .. })));
    sim.fs().write("/a/cgroup.procs", &pid.to_string()).unwrap();
    sim.touch("m").unwrap();
    assert_eq!(events(&sim, "/p"), "populated 0\nfrozen 1\n");
    // Its own request keeps a child frozen when the parent thaws.
    sim.fs().write("/p/c/cgroup.freeze", "1").unwrap();
    sim.fs().write("/p/cgroup.freeze", "0").unwrap();
    assert_eq!(events(&sim, "/p"), "populated 0\nfrozen 0\n");
    assert_eq!(events(&sim, "/p/c"), "populated 0\nfrozen 1\n");
    // A child made under a frozen cgroup is frozen.
    sim.fs().mkdir("/p/c/d").unwrap();
    assert_eq!(events(&sim, "/p/c/d"), "populated 0\nfrozen 1\n");
    assert_eq!(sim.fs().read("/p/c/d/cgroup.freeze").unwrap(), "0\n");
    sim.fs().rmdir("/p/c/d").unwrap();
    sim.fs().write("/p/c/cgroup.freeze", "0").unwrap();
    assert_eq!(events(&sim, "/p/c"), "populated 0\nfrozen 0\n");
    sim.free("m").unwrap();
}

/// `cgroup.freeze` as v6.14 parses it, and where it exists.
#[test]
fn cgroup_freeze_parses_like_the_kernel() {
    let sim = sim(&["/a"]);
    let fs = sim.fs();
    assert_eq!(fs.read("/cgroup.freeze").unwrap_err().errno, Errno::ENOENT);
    assert_eq!(fs.read("/a/cgroup.freeze").unwrap(), "0\n");
    assert_eq!(fs.file_mode("/a/cgroup.freeze"), Some(0o644));
    for range in ["2", "-1", "99999999999999999999999"] {
        assert_eq!(
            fs.write("/a/cgroup.freeze", range).unwrap_err().errno,
            Errno::ERANGE,
            "{range:?}"
        );
    }
    for invalid in ["", "x", "1 0", "yes"] {
        assert_eq!(
            fs.write("/a/cgroup.freeze", invalid).unwrap_err().errno,
            Errno::EINVAL,
            "{invalid:?}"
        );
    }
    fs.write("/a/cgroup.freeze", " 0x1\n").unwrap();
    assert_eq!(fs.read("/a/cgroup.freeze").unwrap(), "1\n");
    fs.write("/a/cgroup.freeze", "0\0junk").unwrap();
    assert_eq!(fs.read("/a/cgroup.freeze").unwrap(), "0\n");
    let mut open = fs
        .open("/a/cgroup.freeze", memcg::cgroupfs::Access::ReadWrite)
        .unwrap();
    fs.rmdir("/a").unwrap();
    assert_eq!(open.write("1").unwrap_err().errno, Errno::ENODEV);
    assert_eq!(open.read().unwrap_err().errno, Errno::ENODEV);
}

/// `cgroup.threads`: a simulated task is one thread, its pid; a thread
/// "moves" only to its own cgroup (every cgroup is a domain), as v6.14's
/// `cgroup_attach_permissions` has it.
#[test]
fn cgroup_threads_lists_and_keeps_threads_in_their_domain() {
    let sim = sim(&["/a", "/b", "/p"]);
    let fs = sim.fs();
    let one = sim.alloc("/a", "one", 1 << 20, 1, Fill::Zero).unwrap();
    let two = sim.alloc("/a", "two", 1 << 20, 1, Fill::Zero).unwrap();
    assert_eq!(
        fs.read("/a/cgroup.threads").unwrap(),
        format!("{one}\n{two}\n")
    );
    assert_eq!(fs.read("/b/cgroup.threads").unwrap(), "");
    assert_eq!(fs.read("/cgroup.threads").unwrap(), "");
    fs.write("/a/cgroup.threads", &one.to_string()).unwrap();
    assert_eq!(
        fs.write("/b/cgroup.threads", &one.to_string())
            .unwrap_err()
            .errno,
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        fs.write("/cgroup.threads", &one.to_string())
            .unwrap_err()
            .errno,
        Errno::EOPNOTSUPP
    );
    fs.write("/p/cgroup.subtree_control", "+memory").unwrap();
    assert_eq!(
        fs.write("/p/cgroup.threads", &one.to_string())
            .unwrap_err()
            .errno,
        Errno::EBUSY,
        "the no-internal-process rule comes first"
    );
    assert_eq!(
        fs.write("/p/cgroup.threads", "4000000").unwrap_err().errno,
        Errno::ESRCH,
        "no such thread comes before it"
    );
    for invalid in ["x", "-1", "", "99999999999999999999999"] {
        assert_eq!(
            fs.write("/a/cgroup.threads", invalid).unwrap_err().errno,
            Errno::EINVAL,
            "{invalid:?}"
        );
    }
    assert_eq!(fs.read("/a/cgroup.type").unwrap(), "domain\n");
    sim.free("one").unwrap();
    sim.free("two").unwrap();
}

/// Tasks allocating, touching, swapping out and freeing in three cgroups
/// while another thread freezes and thaws them and their parent, moves
/// tasks between them and kills one: no operation is lost or hangs, every
/// page and slot comes back, and once everything is idle each cgroup is
/// frozen exactly when it is freezing.
#[test]
fn freezes_moves_and_kills_under_load_lose_nothing() {
    let seed = common::stress_seed("freezer stress");
    let sim = sim(&["/w"]);
    sim.fs()
        .write("/w/cgroup.subtree_control", "+memory")
        .unwrap();
    let leaves = ["/w/0", "/w/1", "/x"];
    for cg in &leaves[..2] {
        sim.fs().mkdir(cg).unwrap();
    }
    sim.fs().mkdir("/x").unwrap();
    sim.swapon_ram(32 << 20, None).unwrap();
    sim.fs().write("/w/0/memory.max", "1M").unwrap();
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let sim = Arc::clone(&sim);
            std::thread::spawn(move || {
                for i in 0..40 {
                    let name = format!("w{w}-{i}");
                    match sim.alloc(leaves[w], &name, 512 << 10, 1, Fill::Pattern) {
                        Ok(_) => {}
                        Err(SimError::Killed { .. }) => continue,
                        Err(e) => panic!("{name}: {e}"),
                    }
                    for step in 0..3 {
                        let result = match step {
                            0 => sim.touch(&name).map(drop),
                            1 => sim.pageout(&name).map(drop),
                            _ => sim.verify(&name),
                        };
                        match result {
                            Ok(()) | Err(SimError::Killed { .. } | SimError::NoSuchMapping(_)) => {}
                            // Swap may be full for a moment.
                            Err(SimError::Pageout { .. }) => {}
                            Err(e) => panic!("{name}: {e}"),
                        }
                    }
                    match sim.free(&name) {
                        Ok(()) | Err(SimError::Killed { .. } | SimError::NoSuchMapping(_)) => {}
                        Err(e) => panic!("{name}: {e}"),
                    }
                }
            })
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let freezable = ["/w", "/w/0", "/w/1", "/x"];
    let mut steps = 0;
    while !workers.iter().all(|w| w.is_finished()) || steps < 200 {
        steps += 1;
        let fs = sim.fs();
        match rng.random_range(0..10) {
            0..5 => {
                let cg = freezable[rng.random_range(0..freezable.len())];
                let value = if rng.random_bool(0.5) { "1" } else { "0" };
                fs.write(&format!("{cg}/cgroup.freeze"), value).unwrap();
            }
            5..9 => {
                let from = leaves[rng.random_range(0..3)];
                let to = leaves[rng.random_range(0..3)];
                let procs = fs.read(&format!("{from}/cgroup.procs")).unwrap();
                if let Some(pid) = procs.lines().next() {
                    match fs.write(&format!("{to}/cgroup.procs"), pid) {
                        Ok(()) => {}
                        Err(e) if e.errno == Errno::ESRCH => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            _ => fs.write("/x/cgroup.kill", "1").unwrap(),
        }
        // Every so often everything thaws, so the workers get on.
        if steps % 16 == 0 {
            for cg in freezable {
                fs.write(&format!("{cg}/cgroup.freeze"), "0").unwrap();
            }
            std::thread::yield_now();
        }
        assert!(steps < 1_000_000, "seed {seed}: the workers never finished");
    }
    for cg in freezable {
        sim.fs().write(&format!("{cg}/cgroup.freeze"), "0").unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert!(sim.mappings().is_empty(), "seed {seed}");
    for cg in ["/", "/w", "/w/0", "/w/1", "/x"] {
        assert_eq!(sim.fs().read(&format!("{cg}/cgroup.procs")).unwrap(), "");
    }
    for cg in ["/w/0", "/w/1", "/x"] {
        let m = sim.fs().memcg(cg).unwrap();
        assert_eq!(
            (m.memory().usage(), m.swap().usage()),
            (0, 0),
            "seed {seed}: {cg}"
        );
    }
    for device in sim.swap().swapfiles().iter() {
        assert_eq!(device.inuse_pages(), 0, "seed {seed}: {}", device.name());
    }
    sim.fs().write("/w/cgroup.freeze", "1").unwrap();
    for (cg, frozen) in [("/w", 1), ("/w/0", 1), ("/w/1", 1), ("/x", 0)] {
        assert_eq!(
            events(&sim, cg),
            format!("populated 0\nfrozen {frozen}\n"),
            "seed {seed}: {cg}"
        );
    }
    sim.fs().write("/w/cgroup.freeze", "0").unwrap();
    assert_eq!(events(&sim, "/w/0"), "populated 0\nfrozen 0\n");
}

/// `total=` of both lines of a pressure file, µs.
fn pressure_totals(sim: &Sim, cg: &str) -> (u64, u64) {
    let text = sim.fs().read(&format!("{cg}/memory.pressure")).unwrap();
    let total = |line: &str| -> u64 {
        line.rsplit("total=")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let mut lines = text.lines();
    (total(lines.next().unwrap()), total(lines.next().unwrap()))
}

/// A task stopped in the freezer in the middle of an operation neither
/// runs nor stalls in pressure accounting: while it waits, a write that
/// reclaims in another cgroup stalls the whole machine for exactly what
/// its reclaim costs, as if the frozen task were not there (counted as
/// running, it would halve that stall, or hide `full` on a shared CPU).
#[test]
fn a_task_asleep_in_the_freezer_neither_runs_nor_stalls() {
    let sim = sim(&["/a", "/f"]);
    let clock = Arc::new(VirtualClock::with_reclaim_cost(ReclaimCost::MEASURED));
    sim.fs().tree().set_clock(clock);
    let dir = tempfile::tempdir().unwrap();
    sim.machine()
        .mount("/mnt", FsSource::Dir(dir.path().to_path_buf()))
        .unwrap();
    sim.swapon_ram(64 << 20, None).unwrap();
    sim.fs().write("/f/memory.max", "4M").unwrap();
    freeze_on_first_reclaim(&sim, "/f");
    let worker = {
        let sim = Arc::clone(&sim);
        std::thread::spawn(move || sim.alloc("/f", "m", 8 << 20, 1, Fill::Random))
    };
    wait_frozen(&sim, "/f", true);
    assert!(
        !worker.is_finished(),
        "frozen in the middle of its allocation"
    );
    let frozen_stall = pressure_totals(&sim, "/f");
    let before = pressure_totals(&sim, "");

    sim.fs().write("/a/memory.max", "1M").unwrap();
    sim.write_file_with("/a", "/mnt/file", 8 << 20, |b| b.fill(7))
        .unwrap();
    let scanned = sim
        .fs()
        .memcg("/a")
        .unwrap()
        .vm_event(VmEvent::PgscanDirect);
    assert!(scanned > 1500, "{scanned} pages scanned");
    let stall = scanned * 1500 / 1000;
    assert_eq!(pressure_totals(&sim, "/a"), (stall, stall));
    let after = pressure_totals(&sim, "");
    assert_eq!((after.0 - before.0, after.1 - before.1), (stall, stall));
    assert_eq!(
        pressure_totals(&sim, "/f"),
        frozen_stall,
        "not stalled while frozen"
    );

    sim.fs().write("/f/cgroup.freeze", "0").unwrap();
    worker.join().unwrap().unwrap();
    sim.free("m").unwrap();
    sim.remove_file("/mnt/file").unwrap();
}
