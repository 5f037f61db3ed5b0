//! Who owns each swap slot: tenants' threads swap folios out to their
//! slots of a swap device, recording the owner of every slot in the
//! device's swap_cgroup map (with the tenant's swap charge and an id pin,
//! as the kernel's swap-out does); any thread looks slots up; freeing the
//! slots clears them and uncharges whoever owned them, even a tenant
//! removed meanwhile.
//!
//! The map's contract (the kernel's): a slot is written by one owner at a
//! time (here each tenant's thread owns its part of the device, and the
//! slots pass to the freeing thread when it joins), lookups may come from
//! any thread at any time.
//!
//! `cargo run -p memcg --example swap_owners` runs it; `cargo test -p
//! memcg --example swap_owners` (and `cargo test --workspace`) runs it as
//! a test. Every claim it prints is asserted: a wrong result fails it.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use memcg::memcontrol::{CgroupTree, ChargeError, MemCgroup, MemcgEvent, MemcgStat};
use memcg::{SwapCgroup, SwapCgroupDesign, SwapEntry};

/// Slots on the swap device (type 0).
const SLOTS: u64 = 4096;
/// Tenants, one swapping thread each, each owning `SLOTS / TENANTS` slots.
const TENANTS: u64 = 4;
/// Folios each tenant swaps out: 1 to 4 pages each, 500 pages in all.
const FOLIOS: u64 = 200;

/// The runs of slots (first slot, pages) one tenant swapped out to.
type Runs = Vec<(SwapEntry, u32)>;

/// Swaps out `tenant`'s folios to the slots from `first`: charges its swap,
/// pins its id and records it for every slot of each folio.
fn swap_out(
    tree: &CgroupTree,
    owners: &SwapCgroup,
    tenant: &Arc<MemCgroup>,
    first: u64,
) -> Result<Runs, Box<dyn Error + Send + Sync>> {
    let mut runs = Vec::new();
    let mut offset = first;
    for folio in 0..FOLIOS {
        let nr = 1 + (folio % 4) as u32;
        let entry = SwapEntry::new(0, offset)?;
        let charged = tree.swapout_charge(tenant, owners, entry, nr)?;
        assert!(Arc::ptr_eq(&charged, tenant), "charged to its own cgroup");
        runs.push((entry, nr));
        offset += u64::from(nr);
    }
    Ok(runs)
}

fn main() -> Result<(), Box<dyn Error>> {
    let tree = CgroupTree::default();
    let owners = SwapCgroup::new(SwapCgroupDesign::default());
    owners.swapon(0, SLOTS)?;
    let tenants = (0..TENANTS)
        .map(|t| tree.mkdir_p(&format!("/tenants/{t}")))
        .collect::<Result<Vec<_>, _>>()?;
    let tenants: Vec<_> = tenants.iter().map(|t| t.memcg().unwrap()).collect();
    let ids: Vec<u16> = tenants.iter().map(|t| t.id()).collect();

    // Every tenant's thread swaps out into its own part of the device,
    // while another thread, owning nothing, looks slots up: each lookup
    // finds no owner or one of the tenants.
    let done = AtomicBool::new(false);
    let runs: Vec<Runs> = thread::scope(|s| {
        let reader = s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                for offset in 0..SLOTS {
                    let id = owners.lookup(SwapEntry::new(0, offset).unwrap()).unwrap();
                    assert!(id == 0 || ids.contains(&id), "slot {offset}: id {id}");
                }
            }
        });
        let writers: Vec<_> = tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| {
                let (tree, owners) = (&tree, &owners);
                s.spawn(move || swap_out(tree, owners, tenant, t as u64 * (SLOTS / TENANTS)))
            })
            .collect();
        let runs = writers
            .into_iter()
            .map(|w| w.join().expect("no panic").expect("swapped out"))
            .collect();
        done.store(true, Ordering::Relaxed);
        reader.join().expect("no panic");
        runs
    });

    // Every slot names its tenant, which `lookup` turns back into the
    // memory cgroup; every tenant is charged its pages of swap.
    for (tenant, runs) in tenants.iter().zip(&runs) {
        for &(entry, nr) in runs {
            for i in 0..u64::from(nr) {
                let id = owners.lookup(entry.add(i)?)?;
                assert_eq!(id, tenant.id());
                assert!(Arc::ptr_eq(&tree.lookup(id).expect("pinned"), tenant));
            }
        }
        assert_eq!(tenant.swap().usage(), 500); // pages
        assert_eq!(tenant.stat(MemcgStat::Swap), 500);
    }
    assert_eq!(tree.find("/tenants")?.swap().usage(), TENANTS * 500);
    println!("{TENANTS} tenants swapped out 500 pages each; every slot names its owner");

    // memory.swap.max (in pages): at its limit a tenant's swap-out is
    // refused, with `max` and `fail` in memory.swap.events.
    tenants[0].swap().set_max(500)?;
    let refused = tree.swapout_charge(&tenants[0], &owners, SwapEntry::new(0, 1000)?, 1);
    assert!(matches!(refused, Err(ChargeError::SwapLimit { .. })));
    assert_eq!(
        owners.lookup(SwapEntry::new(0, 1000)?)?,
        0,
        "nothing recorded"
    );
    assert_eq!(tenants[0].event(MemcgEvent::SwapMax), 1);
    assert_eq!(tenants[0].event(MemcgEvent::SwapFail), 1);
    println!("/tenants/0 at memory.swap.max: swap-out refused (swap max 1, fail 1)");

    // Tenant 3 is removed while its pages are on swap: its id stays pinned,
    // so its slots still resolve to it, dying, and its swap charge stays
    // until they are freed.
    tree.rmdir("/tenants/3")?;
    let (first, _) = runs[3][0];
    let owner = tree
        .lookup(owners.lookup(first)?)
        .expect("pinned by its slots");
    assert!(owner.is_dying() && owner.path() == "/tenants/3");
    assert_eq!(owner.swap().usage(), 500);

    // The slots are freed, on another thread than the one that recorded
    // them (the join passed them on): each clear returns the owner, whose
    // charge and pins go.
    thread::scope(|s| {
        s.spawn(|| {
            for (tenant, runs) in tenants.iter().zip(&runs) {
                for &(entry, nr) in runs {
                    let id = tree.swap_uncharge(&owners, entry, nr).unwrap();
                    assert_eq!(id, tenant.id());
                }
            }
        });
    });
    for tenant in &tenants {
        assert_eq!(
            (tenant.swap().usage(), tenant.stat(MemcgStat::Swap)),
            (0, 0)
        );
    }
    for offset in 0..SLOTS {
        assert_eq!(owners.lookup(SwapEntry::new(0, offset)?)?, 0);
    }
    assert!(tree.lookup(ids[3]).is_none(), "tenant 3's last pin went");
    println!("every slot freed: nothing charged, tenant 3's id released");
    owners.swapoff(0)?;
    Ok(())
}

#[test]
fn swap_owners() -> Result<(), Box<dyn Error>> {
    main()
}
