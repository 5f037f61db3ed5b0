//! Loom models of the swap cache: two faults on one swapped page, shared
//! by three mappings, racing the third mapping's `swap_free`; and two
//! faults whose shared read fails (every waiter gets the reader's EIO).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p memcg --release --test loom_swap_state`.
//!
//! Whichever fault comes first reads the page in and leaves it in the swap
//! cache for the other; whichever reference goes last frees the slot, which
//! uncharges the swap and unpins the owner's id. The model checks that in
//! every interleaving both faults see the same folio with the bytes that
//! were written, exactly one of them reads it in (a major fault), and at
//! the end nothing is left: no slot, no swap charge, no id pin, no cache
//! entry, no memory charge once the folio is dropped.
#![cfg(loom)]

mod common;

use std::collections::BTreeSet;

use common::explore;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use memcg::Errno;
use memcg::folio::Folio;
use memcg::memcontrol::{CgroupTree, Gfp, MemCgroup, MemcgStat, VmEvent};
use memcg::mm_types::{PAGE_SIZE, SWAPFILE_CLUSTER};
use memcg::swap_cgroup::Design;
use memcg::swap_state::{SwapInError, SwapSystem};
use memcg::swapfile::{Fault as FaultKind, FaultyBackend, RamBackend};
use std::sync::Arc;

/// A tree with an owner cgroup and two faulting ones, and a swap system
/// with one small RAM device.
fn setup() -> (CgroupTree, Arc<SwapSystem>, [Arc<MemCgroup>; 3]) {
    let tree = common::small_tree(1, 8);
    // Exact figures: the model counts the owner's pages.
    tree.set_charge_stock(false);
    let swap = Arc::new(SwapSystem::new(&tree, Design::Memcg));
    swap.swapon_ram("ram0", 2 * SWAPFILE_CLUSTER as u64 * PAGE_SIZE, None)
        .unwrap();
    let cgs = ["/owner", "/a", "/b"].map(|p| tree.mkdir(p).unwrap().memcg().unwrap());
    (tree, swap, cgs)
}

/// Two faults (one in `/a`, one in `/b`) and one free on the page
/// `/owner` swapped out with three references.
#[test]
fn two_faults_sharing_one_entry_race_the_last_swap_free() {
    let outcomes = explore(|| {
        let (_tree, swap, [owner, a, b]) = setup();
        let folio = Arc::new(Folio::new(swap.tree(), &owner, 1, Gfp::Kernel).unwrap());
        folio.bytes().fill(0x5a);
        let entry = swap.swap_out(&folio).unwrap();
        drop(folio);
        swap.swap_dup(entry, 1).unwrap();
        swap.swap_dup(entry, 1).unwrap();
        let pins_before = owner.id_pins();

        // The faults run on spawned threads and the free on the main one
        // (loom explores best with the writer on the main thread, see
        // `loom_swap_cgroup.rs`). `done` ranks the three as they finish:
        // the free's rank shows whether it went first, between or last.
        let done = Arc::new(AtomicUsize::new(0));
        let fault = |cg: &Arc<MemCgroup>| {
            let (swap, cg, done) = (Arc::clone(&swap), Arc::clone(cg), Arc::clone(&done));
            thread::spawn(move || {
                let folio = swap.do_swap_page(entry, 1, &cg, Gfp::Kernel).unwrap();
                done.fetch_add(1, Ordering::SeqCst);
                folio
            })
        };
        let (fault_a, fault_b) = (fault(&a), fault(&b));
        swap.swap_free(entry, 1).unwrap();
        let free_rank = done.fetch_add(1, Ordering::SeqCst);
        let (folio_a, folio_b) = (fault_a.join().unwrap(), fault_b.join().unwrap());

        assert!(
            Arc::ptr_eq(&folio_a, &folio_b),
            "both faults share the folio"
        );
        assert!(folio_a.bytes().iter().all(|&byte| byte == 0x5a));
        assert_eq!(swap.swapfiles().count(entry).unwrap(), 0, "slot freed");
        assert_eq!(swap.cache_len(), 0, "out of the swap cache");
        assert_eq!(owner.swap().usage(), 0, "swap uncharged");
        assert_eq!(owner.id_pins(), pins_before - 1, "the slot's pin dropped");
        assert_eq!(owner.memory().usage(), 1, "charged once, to the owner");
        drop((folio_a, folio_b));
        assert_eq!(owner.memory().usage(), 0);
        swap.swapfiles().validate_idle();
        // Who read the page in (a major fault on the faulting cgroup).
        let majors = (
            a.vm_event(VmEvent::Pgmajfault),
            b.vm_event(VmEvent::Pgmajfault),
        );
        assert_eq!(majors.0 + majors.1, 1, "exactly one fault reads");
        (majors, free_rank)
    });
    let readers: BTreeSet<_> = outcomes.iter().map(|&(majors, _)| majors).collect();
    let free_ranks: BTreeSet<_> = outcomes.iter().map(|&(_, rank)| rank).collect();
    assert_eq!(
        readers,
        BTreeSet::from([(0, 1), (1, 0)]),
        "either fault reads"
    );
    assert_eq!(
        free_ranks,
        BTreeSet::from([0, 1, 2]),
        "the free goes first, between, last"
    );
}

/// How a fault ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// It got the page.
    Mapped,
    /// Its own read failed (EIO).
    ReadFailed,
    /// It waited on the other fault's read, which failed: it gets the
    /// same errno (EIO), not a generic one.
    SharedFailure,
}

/// Two faults on one swapped page whose first read fails: the reader gets
/// EIO, and a fault that was waiting on that read gets EIO too; one that
/// comes after the failure reads again and succeeds. Slot, data and
/// charges stay for the retry.
#[test]
fn a_failed_read_gives_its_waiters_the_same_errno() {
    let outcomes = explore(|| {
        let tree = common::small_tree(1, 8);
        let swap = Arc::new(SwapSystem::new(&tree, Design::Memcg));
        let size_bytes = 2 * SWAPFILE_CLUSTER as u64 * PAGE_SIZE;
        let disk = Arc::new(FaultyBackend::new(RamBackend::new(size_bytes).unwrap()));
        swap.swapon("ram0", Box::new(Arc::clone(&disk)), None)
            .unwrap();
        let owner = tree.mkdir("/owner").unwrap().memcg().unwrap();
        let folio = Arc::new(Folio::new(&tree, &owner, 1, Gfp::Kernel).unwrap());
        folio.bytes().fill(0xa5);
        let entry = swap.swap_out(&folio).unwrap();
        drop(folio);
        swap.swap_dup(entry, 1).unwrap();
        disk.inject(FaultKind::Read, 1);

        let classify = |result: Result<Arc<Folio>, SwapInError>| match result {
            Ok(folio) => {
                assert!(folio.bytes().iter().all(|&byte| byte == 0xa5));
                Fault::Mapped
            }
            Err(e) => {
                assert_eq!(e.errno(), Errno::EIO, "{e}");
                match e {
                    SwapInError::Shared(_) => Fault::SharedFailure,
                    _ => Fault::ReadFailed,
                }
            }
        };
        let other = {
            let (swap, owner) = (Arc::clone(&swap), Arc::clone(&owner));
            thread::spawn(move || swap.do_swap_page(entry, 1, &owner, Gfp::Kernel))
        };
        let mut both = [
            classify(swap.do_swap_page(entry, 1, &owner, Gfp::Kernel)),
            classify(other.join().unwrap()),
        ];
        both.sort();
        // A failed read leaves nothing in the swap cache; a successful one
        // leaves its folio there while the failed fault's mapping still
        // references the slot, which stays charged.
        let mapped = both.contains(&Fault::Mapped);
        assert_eq!(swap.cache_len(), usize::from(mapped));
        assert_eq!(owner.swap().usage(), 1, "the slot is still charged");
        both
    });
    assert_eq!(
        outcomes,
        BTreeSet::from([
            [Fault::Mapped, Fault::ReadFailed],
            [Fault::ReadFailed, Fault::SharedFailure],
        ])
    );
}

/// A fault on a RAM-disk page with one reference reads it without the
/// swap cache (`do_swap_page`'s skip-swapcache path), its claim holding the
/// slot. A free of the same mapping racing it (a caller's bug: the mapping
/// is torn down while faulted) is refused once the fault has claimed the
/// slot, or goes first and the fault finds the slot gone; never does the
/// free take the slot from under a read in flight (which would let the
/// slot be reused and the fault's late release hit the new owner's
/// record). Either way slot, charge and pin are released exactly once.
#[test]
fn a_fault_skipping_the_cache_and_a_racing_free_release_the_slot_once() {
    let outcomes = explore(|| {
        let (_tree, swap, [owner, a, _]) = setup();
        let folio = Arc::new(Folio::new(swap.tree(), &owner, 1, Gfp::Kernel).unwrap());
        folio.bytes().fill(0x3c);
        let entry = swap.swap_out(&folio).unwrap();
        drop(folio);
        let pins_before = owner.id_pins();
        let free = {
            let swap = Arc::clone(&swap);
            thread::spawn(move || swap.swap_free(entry, 1).is_ok())
        };
        let faulted = swap.do_swap_page(entry, 1, &a, Gfp::Kernel).map(|folio| {
            assert!(folio.bytes().iter().all(|&byte| byte == 0x3c));
            assert_eq!(swap.cache_len(), 0, "never in the swap cache");
        });
        let freed = free.join().unwrap();
        let read = owner.vm_event(VmEvent::Pswpin) + a.vm_event(VmEvent::Pswpin);
        assert!(
            faulted.is_ok() != freed,
            "exactly one of them took the slot"
        );
        assert!(
            !(freed && read > 0),
            "the free took the slot from a read in flight"
        );
        assert_eq!(owner.swap().usage(), 0, "swap uncharged once");
        assert_eq!(owner.id_pins(), pins_before - 1, "unpinned once");
        assert_eq!(owner.stat(MemcgStat::Swapcached), 0);
        assert_eq!(swap.swapfiles().count(entry).unwrap(), 0, "slot freed");
        swap.swapfiles().validate_idle();
        faulted.is_ok()
    });
    assert_eq!(outcomes, BTreeSet::from([false, true]));
}

/// zswap's writeback racing a fault on the same slot: the fault gets the
/// page's bytes whether it comes before the writeback (from zswap) or
/// after (from the device); a writeback that finds the slot held by the
/// fault gives up (`Exists`) or finds the entry gone; the entry is freed
/// once and nothing is left.
#[test]
fn a_zswap_writeback_racing_a_fault_on_its_slot() {
    let outcomes = explore(|| {
        let (_tree, swap, [owner, _, _]) = setup();
        swap.zswap().set_enabled(true);
        let folio = Folio::new(swap.tree(), &owner, 1, Gfp::Kernel).unwrap();
        folio.bytes().fill(0x3c);
        let [piece] = swap
            .swap_out_or_split(Arc::new(folio), &owner)
            .try_into()
            .unwrap();
        let entry = piece.outcome.unwrap();
        assert_eq!(swap.zswap().debug_counts().stored_pages, 1);
        let fault = {
            let (swap, owner) = (Arc::clone(&swap), Arc::clone(&owner));
            thread::spawn(move || swap.do_swap_page(entry, 1, &owner, Gfp::Kernel).unwrap())
        };
        let written = swap.zswap_writeback(entry);
        let folio = fault.join().unwrap();
        assert!(folio.bytes().iter().all(|&b| b == 0x3c), "the page's bytes");
        let z = swap.zswap().debug_counts();
        assert_eq!((z.stored_pages, z.pool_total_size), (0, 0));
        assert_eq!(owner.stat(MemcgStat::ZswapBytes), 0);
        assert_eq!(owner.swap().usage(), 0, "the slot was freed");
        drop(folio);
        assert_eq!(owner.memory().usage(), 0);
        match written {
            Ok(()) => "written back, then read from the device",
            Err(memcg::zswap::WritebackError::Exists) => "the fault held the slot",
            Err(memcg::zswap::WritebackError::Gone) => "the fault took the page first",
            Err(e) => panic!("{e}"),
        }
    });
    assert!(
        outcomes.contains("written back, then read from the device"),
        "{outcomes:?}"
    );
    assert!(outcomes.len() >= 2, "{outcomes:?}");
}
