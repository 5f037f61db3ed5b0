//! End-to-end swap tests: bytes, counters, ids and slots stay exact under
//! churn, cgroup removal, swapoff under load, injected faults and bad input.

#[path = "../../memcg/tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memcg::Errno;
use memcg::memcontrol::{MemCgroup, MemcgEvent, VmEvent};
use memcg::swapfile::{Fault, FaultyBackend, RamBackend};
use memcg_sim::{Fill, Sim, SimConfig, SimError};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn sim_with(cgroups: &[&str]) -> Sim {
    let sim = Sim::new(SimConfig::default());
    // Exact figures: these tests count pages; the charge stock would add
    // up to a batch per thread to memory.current.
    sim.fs().tree().set_charge_stock(false);
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    for cg in cgroups {
        sim.fs().mkdir(cg).unwrap();
    }
    sim
}

/// Every cgroup back to zero, every slot free, only the online pins held.
fn assert_balanced(sim: &Sim, cgroups: &[Arc<MemCgroup>], seed: u64) {
    for cg in cgroups {
        assert_eq!(cg.memory().usage(), 0, "seed {seed}: {} memory", cg.path());
        assert_eq!(cg.swap().usage(), 0, "seed {seed}: {} swap", cg.path());
        assert_eq!(
            cg.id_pins(),
            usize::from(!cg.is_dying()),
            "seed {seed}: {} pins",
            cg.path()
        );
    }
    for device in sim.swap().swapfiles().iter() {
        assert_eq!(
            device.inuse_pages(),
            0,
            "seed {seed}: {} slots",
            device.name()
        );
    }
    assert_eq!(sim.swap().cache_len(), 0, "seed {seed}: swap cache");
}

#[test]
fn churn_across_cgroups_and_two_devices_keeps_every_byte() {
    let seed = common::stress_seed("swap churn");
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_with(&["/a", "/b", "/c"]);
    sim.swapon_ram(16 << 20, None).unwrap();
    sim.machine()
        .swapon_file(&dir.path().join("swapfile"), 16 << 20, None)
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let sim = &sim;
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed + t);
                for round in 0..12 {
                    let name = format!("t{t}r{round}");
                    let cg = ["/a", "/b", "/c"][rng.random_range(0..3)];
                    let folio = [1, 16][rng.random_range(0..2)];
                    let fill = [Fill::Zero, Fill::Random, Fill::Pattern][rng.random_range(0..3)];
                    sim.alloc(cg, &name, 256 << 10, folio, fill)
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    for _ in 0..rng.random_range(1..3) {
                        sim.pageout(&name)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        sim.verify(&name)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        sim.touch(&name)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        sim.verify(&name)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    }
                    if rng.random_bool(0.5) {
                        sim.pageout(&name)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    }
                    sim.free(&name)
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    // While the other threads run: slot counts, cluster
                    // lists and cache bits agree.
                    sim.swap().swapfiles().validate();
                }
            });
        }
    });
    let cgs: Vec<_> = ["/a", "/b", "/c"]
        .iter()
        .map(|p| sim.fs().memcg(p).unwrap())
        .collect();
    assert_balanced(&sim, &cgs, seed);
    sim.swap().swapfiles().validate_idle();
    let a = &cgs[0];
    assert!(a.vm_event(VmEvent::Pswpout) > 0 && a.vm_event(VmEvent::Pswpin) > 0);
}

#[test]
fn removed_owner_keeps_its_id_until_its_last_slot_is_freed() {
    let sim = sim_with(&["/owner", "/other"]);
    sim.swapon_ram(8 << 20, None).unwrap();
    let pid = sim
        .alloc("/owner", "m", 64 << 10, 1, Fill::Pattern)
        .unwrap();
    sim.pageout("m").unwrap();
    let owner = sim.fs().memcg("/owner").unwrap();
    let other = sim.fs().memcg("/other").unwrap();
    sim.fs()
        .write("/other/cgroup.procs", &pid.to_string())
        .unwrap();
    sim.fs().rmdir("/owner").unwrap();
    assert_eq!(
        sim.fs().read("/cgroup.stat").unwrap(),
        "nr_descendants 1\nnr_subsys_memory 2\nnr_dying_descendants 1\nnr_dying_subsys_memory 1\n"
    );
    assert_eq!(owner.id_pins(), 16, "one pin per page on swap");
    assert!(sim.fs().tree().lookup(owner.id()).is_some());
    // The owner is gone: the fault charges the faulting task's cgroup.
    sim.touch("m").unwrap();
    sim.verify("m").unwrap();
    assert_eq!((other.memory().usage(), owner.memory().usage()), (16, 0));
    assert_eq!(
        owner.swap().usage(),
        0,
        "the dead owner's swap was uncharged"
    );
    assert!(
        sim.fs().tree().lookup(owner.id()).is_none(),
        "id released with the last slot"
    );
    let id = owner.id();
    drop(owner);
    assert!(sim.fs().tree().lookup(id).is_none());
    assert_eq!(
        sim.fs().read("/cgroup.stat").unwrap(),
        "nr_descendants 1\nnr_subsys_memory 2\nnr_dying_descendants 0\nnr_dying_subsys_memory 0\n",
        "released: no page, slot or reference left"
    );
    sim.free("m").unwrap();
    assert_balanced(&sim, &[other], 0);
}

#[test]
fn swapoff_under_load_moves_every_page_back() {
    let seed = common::stress_seed("swapoff under load");
    let sim = sim_with(&["/a"]);
    let ram0 = sim.swapon_ram(16 << 20, None).unwrap();
    for t in 0..3 {
        sim.alloc("/a", &format!("m{t}"), 512 << 10, 16, Fill::Random)
            .unwrap();
        sim.pageout(&format!("m{t}")).unwrap();
    }
    let ram1 = sim.swapon_ram(16 << 20, None).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (sim, stop) = (&sim, &stop);
            s.spawn(move || {
                let name = format!("m{t}");
                while !stop.load(Ordering::Relaxed) {
                    sim.touch(&name).unwrap();
                    sim.verify(&name)
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    sim.pageout(&name).unwrap();
                }
            });
        }
        sim.swapoff(&ram0).unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    assert!(sim.swap().swapfiles().by_name(&ram0).is_none());
    for t in 0..3 {
        sim.verify(&format!("m{t}")).unwrap();
    }
    // m2 was only on ram0: swapoff brought it back into memory.
    assert_eq!(sim.residency("m2").unwrap().swapped, 0);
    sim.swapoff(&ram1).unwrap();
    for t in 0..3 {
        sim.verify(&format!("m{t}")).unwrap();
        sim.free(&format!("m{t}")).unwrap();
    }
    assert_balanced(&sim, &[sim.fs().memcg("/a").unwrap()], seed);
}

#[test]
fn swapoff_that_memory_cannot_take_back_fails_cleanly_or_oom_kills() {
    // An unkillable task (oom_score_adj -1000): the OOM killer finds no
    // victim, the fault fails and swapoff with it; the device stays on.
    let sim = sim_with(&["/a"]);
    let ram = sim.swapon_ram(8 << 20, None).unwrap();
    let pid = sim.alloc("/a", "m", 256 << 10, 1, Fill::Pattern).unwrap();
    sim.task(pid).unwrap().set_oom_score_adj(-1000).unwrap();
    sim.pageout("m").unwrap();
    sim.fs().write("/a/memory.max", "64K").unwrap();
    let err = sim.swapoff(&ram).unwrap_err();
    assert_eq!(err.errno(), Errno::ENOMEM);
    assert!(
        sim.swap().swapfiles().by_name(&ram).is_some(),
        "the device stays on"
    );
    sim.verify("m").unwrap();
    sim.fs().write("/a/memory.max", "max").unwrap();
    sim.swapoff(&ram).unwrap();
    sim.verify("m").unwrap();
    sim.free("m").unwrap();

    // A killable one: as in the kernel, the OOM killer takes it and the
    // swapoff completes, its slots freed with it.
    let ram = sim.swapon_ram(8 << 20, None).unwrap();
    sim.alloc("/a", "n", 256 << 10, 1, Fill::Pattern).unwrap();
    sim.pageout("n").unwrap();
    sim.fs().write("/a/memory.max", "64K").unwrap();
    sim.swapoff(&ram).unwrap();
    assert!(sim.mappings().is_empty(), "n was killed");
    let a = sim.fs().memcg("/a").unwrap();
    assert_eq!(a.event(MemcgEvent::OomKill), 1);
    assert_eq!((a.memory().usage(), a.swap().usage()), (0, 0));
}

#[test]
fn injected_faults_lose_nothing() {
    let sim = sim_with(&["/a"]);
    let faulty = Arc::new(FaultyBackend::new(RamBackend::new(8 << 20).unwrap()));
    sim.machine()
        .swapon_backend("faulty", Box::new(Arc::clone(&faulty)))
        .unwrap();
    let a = sim.fs().memcg("/a").unwrap();
    sim.alloc("/a", "m", 64 << 10, 1, Fill::Random).unwrap();

    // Write error: the page stays resident (dirty), nothing charged to swap.
    // (The mapping's 3 page tables stay charged throughout.)
    faulty.inject(Fault::Write, 1);
    let err = sim.pageout("m").unwrap_err();
    assert!(matches!(err, SimError::Pageout { pages: 1, .. }), "{err}");
    assert_eq!(sim.residency("m").unwrap().resident, 1);
    assert_eq!((a.memory().usage(), a.swap().usage()), (1 + 3, 15));
    sim.verify("m").unwrap();

    // Read error: the fault fails, slot and data stay for a retry.
    sim.pageout("m").unwrap();
    faulty.inject(Fault::Read, 1);
    assert_eq!(sim.touch("m").unwrap_err().errno(), Errno::EIO);
    sim.verify("m").unwrap();
    sim.touch("m").unwrap();
    sim.verify("m").unwrap();
    assert_eq!((a.memory().usage(), a.swap().usage()), (16 + 3, 0));

    // Device full: swap-out fails cleanly and counts a swap fail event.
    sim.alloc("/a", "big", 8 << 20, 1, Fill::Pattern).unwrap();
    let err = sim.pageout("big").unwrap_err();
    assert!(matches!(err, SimError::Pageout { .. }), "{err}");
    assert!(a.event(MemcgEvent::SwapFail) > 0);
    sim.verify("big").unwrap();
    sim.free("big").unwrap();
    sim.free("m").unwrap();
    assert_balanced(&sim, &[a], 0);
}

#[test]
fn bad_swapon_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_with(&[]);
    let err = sim
        .machine()
        .swapon_file(&dir.path().join("no/such/dir/file"), 1 << 20, None)
        .unwrap_err();
    assert_eq!(err.errno(), Errno::ENOENT);
    let err = sim
        .machine()
        .swapon_file(dir.path(), 1 << 20, None)
        .unwrap_err();
    assert_eq!(
        err.errno(),
        Errno::EINVAL,
        "a directory is not a swap file: {err}"
    );
    let small = dir.path().join("small");
    std::fs::write(&small, [0u8; 8192]).unwrap();
    assert_eq!(
        sim.machine()
            .swapon_file(&small, 1 << 20, None)
            .unwrap_err()
            .errno(),
        Errno::EINVAL
    );
    assert_eq!(
        sim.swapon_ram(1000, None).unwrap_err().errno(),
        Errno::EINVAL
    );
    let path = dir.path().join("swap");
    sim.machine().swapon_file(&path, 1 << 20, None).unwrap();
    assert_eq!(
        sim.machine()
            .swapon_file(&path, 1 << 20, None)
            .unwrap_err()
            .errno(),
        Errno::EBUSY
    );
    for _ in 1..memcg::MAX_SWAPFILES {
        sim.swapon_ram(1 << 20, None).unwrap();
    }
    assert_eq!(
        sim.swapon_ram(1 << 20, None).unwrap_err().errno(),
        Errno::EPERM,
        "too many devices"
    );
    assert_eq!(
        sim.swap().swapfiles().iter().count(),
        memcg::MAX_SWAPFILES as usize
    );
    assert_eq!(
        sim.swapoff("/dev/nothing").unwrap_err().errno(),
        Errno::EINVAL
    );
}

/// The machine's size is the root's limit, with the same reclaim path: a
/// task faulting in more than the machine holds, with a file swap device
/// (a RAM disk's pages would come out of the machine too), pushes its own
/// older pages out (kswapd and direct reclaim) and succeeds, with no
/// memory cgroup event; without
/// swap the global OOM killer takes the largest task.
#[test]
fn a_full_machine_reclaims_globally_then_oom_kills() {
    let sim = Sim::new(SimConfig {
        mem_bytes: 16 << 20,
        charge_stock: false,
        ..SimConfig::default()
    });
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.fs().mkdir("/a").unwrap();
    let a = sim.fs().memcg("/a").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = sim
        .machine()
        .swapon_file(&dir.path().join("swap"), 32 << 20, None)
        .unwrap();
    // Swappiness 0 keeps a memory cgroup's reclaim off anon, not the
    // machine's: with no file pages to take, global reclaim swaps anyway
    // (`file_is_tiny`).
    sim.machine().set_vm_swappiness(0).unwrap();
    sim.alloc("/a", "big", 24 << 20, 1, Fill::Random).unwrap();
    sim.verify("big").unwrap();
    let r = sim.residency("big").unwrap();
    assert_eq!(r.resident + r.swapped, 6144);
    assert!(r.swapped >= 2048, "{r:?}");
    assert!(sim.fs().tree().machine_used_pages() <= 4096);
    assert_eq!(a.event(MemcgEvent::Max), 0, "not a memory cgroup event");
    // kswapd (woken below the low watermark) and direct reclaim (below
    // the min watermark) share the work.
    let kswapd = a.vm_event(VmEvent::PgstealKswapd);
    assert!(kswapd > 0, "kswapd ran");
    assert!(kswapd + a.vm_event(VmEvent::PgstealDirect) >= 2048);
    sim.free("big").unwrap();
    // The same at a memory cgroup's limit is an OOM kill.
    sim.fs().write("/a/memory.max", "4M").unwrap();
    let err = sim
        .alloc("/a", "capped", 8 << 20, 1, Fill::Pattern)
        .unwrap_err();
    assert!(matches!(err, SimError::Killed { .. }), "{err}");
    assert_eq!(a.event(MemcgEvent::Oom), 1);
    sim.fs().write("/a/memory.max", "max").unwrap();
    sim.machine().set_vm_swappiness(60).unwrap();

    sim.swapoff(&file).unwrap();
    sim.alloc("/a", "small", 4 << 20, 1, Fill::Pattern).unwrap();
    let err = sim
        .alloc("/a", "huge", 32 << 20, 1, Fill::Pattern)
        .unwrap_err();
    assert!(matches!(err, SimError::Killed { .. }), "{err}");
    assert_eq!(sim.mappings(), vec!["small".to_owned()]);
    assert_eq!(a.event(MemcgEvent::OomKill), 2, "capped, then huge");
    assert_eq!(
        a.event(MemcgEvent::Oom),
        1,
        "the capped one only: the global OOM is not a memcg's"
    );
    sim.verify("small").unwrap();
    sim.free("small").unwrap();
    // Left: /a's own structures, 14 KiB charged to the root.
    assert_eq!(sim.fs().tree().machine_used_pages(), 4);
}
