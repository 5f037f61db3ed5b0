//! `host_mm` against a reference model: a fake process (its pages, their
//! write protection, its agent's drops) driven by seeded random reads,
//! writes (each changing part of its page), unmaps and agent runs (some
//! before a write-protect fault reaches the handler), under a `memory.max` that forces reclaim
//! to swap. Every read must see the last write (or zeros after an unmap);
//! at the end, with the process released, every charge and slot is back.

#[path = "../../memcg/tests/common/mod.rs"]
mod common;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};

use memcg_sim::host_mm::{FaultIo, FaultKind, FaultOutcome, HostPages};
use memcg_sim::{Sim, SimConfig};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PAGE: u64 = 4096;
const BASE: u64 = 0x7f00_0000_0000;

/// The fake process: present pages (bytes, write-protected?) and the
/// drops its agent was asked for.
#[derive(Default)]
struct Process {
    pages: HashMap<u64, (Vec<u8>, bool)>,
    drops: VecDeque<u64>,
    /// Pages mapped by folio fills.
    filled: u64,
    /// Reads of more than one page (reclaim copying a run out at once).
    run_reads: u64,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<Process>>);

impl Fake {
    fn lock(&self) -> std::sync::MutexGuard<'_, Process> {
        self.0.lock().unwrap()
    }
}

impl HostPages for Fake {
    fn write_protect(&self, start: u64, len: u64, on: bool) -> io::Result<()> {
        let mut p = self.lock();
        for addr in (start..start + len).step_by(PAGE as usize) {
            if let Some(page) = p.pages.get_mut(&addr) {
                page.1 = on;
            }
        }
        Ok(())
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut p = self.lock();
        p.run_reads += u64::from(buf.len() > PAGE as usize);
        for (i, out) in buf.chunks_exact_mut(PAGE as usize).enumerate() {
            match p.pages.get(&(addr + i as u64 * PAGE)) {
                Some((bytes, _)) => out.copy_from_slice(bytes),
                None => return Err(io::Error::from_raw_os_error(libc_efault())),
            }
        }
        Ok(())
    }

    fn drop_pages(&self, addrs: &[u64]) {
        self.lock().drops.extend(addrs);
    }

    fn mapped(&self, addr: u64) -> bool {
        self.lock().pages.contains_key(&addr)
    }
}

fn libc_efault() -> i32 {
    14
}

impl FaultIo for Fake {
    fn zero(&mut self, addr: u64, _write: bool) -> io::Result<()> {
        let mut p = self.lock();
        if p.pages.contains_key(&addr) {
            return Err(io::Error::from_raw_os_error(17));
        }
        p.pages.insert(addr, (vec![0; PAGE as usize], false));
        Ok(())
    }

    fn copy(&mut self, addr: u64, bytes: &[u8]) -> io::Result<()> {
        let mut p = self.lock();
        if p.pages.contains_key(&addr) {
            return Err(io::Error::from_raw_os_error(17));
        }
        p.pages.insert(addr, (bytes.to_vec(), false));
        Ok(())
    }

    fn fill_zero(&mut self, start: u64, nr: u64) -> io::Result<u64> {
        let mut p = self.lock();
        let mut mapped = 0;
        while mapped < nr && !p.pages.contains_key(&(start + mapped * PAGE)) {
            p.pages
                .insert(start + mapped * PAGE, (vec![0; PAGE as usize], false));
            mapped += 1;
        }
        p.filled += mapped;
        match mapped {
            0 => Err(io::Error::from_raw_os_error(17)),
            n => Ok(n),
        }
    }

    fn unprotect(&mut self, addr: u64) -> io::Result<()> {
        self.write_protect(addr, PAGE, false)
    }

    fn wake(&mut self, _addr: u64) {}
}

struct World {
    sim: Sim,
    fake: Fake,
    mm: Arc<memcg_sim::host_mm::HostMm>,
    /// What the program last wrote to each page and the write before
    /// (absent: zeros).
    model: HashMap<u64, [u8; 2]>,
}

impl World {
    /// The agent drops what it was asked to, if still protected, and
    /// says so.
    fn run_agent(&mut self) {
        loop {
            let next = {
                let mut p = self.fake.lock();
                let Some(addr) = p.drops.pop_front() else {
                    break;
                };
                let protected = p.pages.get(&addr).is_some_and(|pg| pg.1);
                if protected {
                    p.pages.remove(&addr);
                }
                (addr, protected)
            };
            let mut io = self.fake.clone();
            match next {
                (addr, true) => self.mm.dropped(addr, &mut io),
                (addr, false) => self.mm.not_dropped(addr),
            }
        }
    }

    /// An access by the program: faults until the page is there (and
    /// writable for a write), the way the kernel retries. With `late`, a
    /// write-protect fault reaches the handler only after the agent ran
    /// (the server reads the agent's word before the fault's message):
    /// the page it was about may be gone by then.
    fn access(&mut self, addr: u64, write: Option<u8>, late: bool) -> [u8; 2] {
        for _ in 0..1000 {
            let state = self.fake.lock().pages.get(&addr).map(|p| p.1);
            let kind = match (state, write) {
                (Some(false), _) | (Some(true), None) => {
                    let mut p = self.fake.lock();
                    let page = p.pages.get_mut(&addr).unwrap();
                    // A write changes part of the page: the byte before
                    // moves on, the rest of the page stays.
                    if let Some(b) = write {
                        page.0[1] = page.0[0];
                        page.0[0] = b;
                    }
                    return [page.0[0], page.0[1]];
                }
                (Some(true), Some(_)) => FaultKind::WriteProtect,
                (None, w) => FaultKind::Missing { write: w.is_some() },
            };
            if late && kind == FaultKind::WriteProtect {
                self.run_agent();
            }
            let mut io = self.fake.clone();
            match self.mm.fault(addr, kind, &mut io).unwrap() {
                FaultOutcome::Parked | FaultOutcome::Again => self.run_agent(),
                FaultOutcome::Done => {}
                FaultOutcome::Killed => panic!("killed"),
            }
        }
        panic!("a fault at {addr:#x} never settled");
    }
}

/// A world whose anonymous faults take `mthp_kb` folios when they can
/// (`hugepages-<mthp_kb>kB/enabled` = always; 4: single pages only).
fn world(mthp_kb: u32) -> World {
    let sim = Sim::new(SimConfig::default());
    if mthp_kb > 4 {
        let order = (mthp_kb / 4).trailing_zeros();
        sim.machine().thp().write_order(order, "always").unwrap();
    }
    sim.fs().tree().set_charge_stock(false);
    sim.swapon_ram(64 << 20, None).unwrap();
    sim.fs()
        .write("/cgroup.subtree_control", "+memory")
        .unwrap();
    sim.fs().mkdir("/t").unwrap();
    sim.fs().write("/t/memory.max", "1M").unwrap();
    let task = sim.adopt_task(77, "/t").unwrap();
    let fake = Fake::default();
    let mm = sim.attach_host_mm(&task, Box::new(fake.clone()));
    World {
        sim,
        fake,
        mm,
        model: HashMap::new(),
    }
}

#[test]
fn every_read_sees_the_last_write_through_reclaim_swap_and_unmaps() {
    model_run(4);
}

#[test]
fn every_read_sees_the_last_write_with_16k_folio_fills() {
    model_run(16);
}

/// Seeded runs of the model (module docs) with `mthp_kb` folio fills.
fn model_run(mthp_kb: u32) {
    let first = common::stress_seed_or("host_mm_model", 1);
    for seed in first..first + 8 {
        let mut w = world(mthp_kb);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..3000 {
            let addr = BASE + rng.random_range(0..1024u64) * PAGE;
            match rng.random_range(0..10) {
                0..=3 => {
                    let b = rng.random_range(1..=255u8);
                    let late = rng.random_bool(0.5);
                    w.access(addr, Some(b), late);
                    let before = w.model.get(&addr).map_or(0, |m| m[0]);
                    w.model.insert(addr, [b, before]);
                }
                4..=7 => {
                    let want = w.model.get(&addr).copied().unwrap_or([0, 0]);
                    assert_eq!(
                        w.access(addr, None, false),
                        want,
                        "seed {seed}: page {addr:#x}"
                    );
                }
                8 => {
                    // munmap or MADV_DONTNEED of a few pages: the kernel
                    // zaps, then the server is told.
                    let unmap = rng.random_bool(0.5);
                    let len = rng.random_range(1..8u64) * PAGE;
                    w.fake
                        .lock()
                        .pages
                        .retain(|&a, _| a < addr || a >= addr + len);
                    if unmap {
                        w.mm.unmap(addr, addr + len);
                    } else {
                        w.mm.remove(addr, addr + len);
                    }
                    w.model.retain(|&a, _| a < addr || a >= addr + len);
                }
                _ => w.run_agent(),
            }
        }
        let t = w.sim.fs().cgroup("/t").unwrap().memcg().unwrap();
        assert!(t.memory().usage() <= 256, "seed {seed}: within memory.max");
        assert!(t.swap().usage() > 0, "seed {seed}: something was swapped");
        let (filled, run_reads) = {
            let p = w.fake.lock();
            (p.filled, p.run_reads)
        };
        assert!(
            run_reads > 0,
            "seed {seed}: adjacent pages copied out together"
        );
        assert_eq!(
            filled > 0,
            mthp_kb > 4,
            "seed {seed}: {filled} pages filled as folios"
        );
        w.sim.detach_host_mm(&w.mm);
        assert_eq!(t.memory().usage(), 0, "seed {seed}: every charge released");
        assert_eq!(t.swap().usage(), 0, "seed {seed}: every slot released");
    }
}
