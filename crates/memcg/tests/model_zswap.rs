//! Model-based test of zswap's store, load and invalidate against a
//! reference (a map of slot → page bytes): random compressible,
//! incompressible and sparse pages stored at random slots by two cgroups,
//! loaded back (exclusively), invalidated, with `memory.zswap.max` and the
//! pool limit changing underneath. After every step each stored page
//! decompresses to exactly what was stored, `stored_pages` and the cgroups'
//! `zswapped` pages match the model, and at the end nothing is charged and
//! the pool holds no page.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::Arc;

use memcg::folio::Folio;
use memcg::memcontrol::Gfp;
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use memcg::mm_types::PAGE_BYTES;
use memcg::page_counter::PAGE_COUNTER_MAX;
use memcg::swapops::SwapEntry;
use memcg::zswap::{StoreReject, Zswap};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Store {
        cg: usize,
        slot: u64,
        kind: u8,
        seed: u8,
    },
    Load {
        slot: u64,
    },
    Invalidate {
        slot: u64,
    },
    ZswapMax {
        cg: usize,
        pages: Option<u64>,
    },
    PoolPercent(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..2usize, 0..16u64, 0..3u8, any::<u8>())
            .prop_map(|(cg, slot, kind, seed)| Op::Store { cg, slot, kind, seed }),
        3 => (0..16u64).prop_map(|slot| Op::Load { slot }),
        2 => (0..16u64).prop_map(|slot| Op::Invalidate { slot }),
        1 => (0..2usize, prop::option::of(0..4u64)).prop_map(|(cg, pages)| Op::ZswapMax { cg, pages }),
        1 => prop_oneof![Just(0u32), Just(20)].prop_map(Op::PoolPercent),
    ]
}

/// A page of one of three kinds: text-like, incompressible, sparse.
fn page(kind: u8, seed: u8) -> Vec<u8> {
    let mut x = u32::from(seed) | 1;
    (0..PAGE_BYTES)
        .map(|i| match kind {
            0 => b"let x = page + 1;\n"[i % 18].wrapping_add(seed % 2),
            1 => {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            }
            _ => u8::from(i == usize::from(seed) * 16) * 7,
        })
        .collect()
}

fn run(ops: &[Op]) {
    let tree = CgroupTree::default();
    tree.set_charge_stock(false);
    tree.set_machine_pages(1 << 14);
    let cgs: Vec<Arc<MemCgroup>> = ["/a", "/b"]
        .iter()
        .map(|p| tree.mkdir(p).unwrap().memcg().unwrap())
        .collect();
    // The two cgroups' own metadata, charged to the root.
    let metadata_pages = tree.machine_used_pages();
    let z = Zswap::new(&tree, memcg::list_lru::LruDesign::Split);
    z.set_enabled(true);
    let mut model: HashMap<u64, (usize, Vec<u8>)> = HashMap::new();
    for op in ops {
        match *op {
            Op::Store {
                cg,
                slot,
                kind,
                seed,
            } => {
                let bytes = page(kind, seed);
                let folio = Folio::new(&tree, &cgs[cg], 1, Gfp::Kernel).unwrap();
                folio.bytes().copy_from_slice(&bytes);
                let entry = SwapEntry::new(0, slot).unwrap();
                match z.store(&folio, entry) {
                    Ok(()) => {
                        model.insert(slot, (cg, bytes));
                    }
                    // A refused store drops what the slot held.
                    Err(reject) => {
                        if reject == StoreReject::CompressPoor {
                            assert_eq!(kind, 1);
                        }
                        model.remove(&slot);
                    }
                }
            }
            Op::Load { slot } => {
                let entry = SwapEntry::new(0, slot).unwrap();
                let mut buf = vec![0; PAGE_BYTES];
                let loaded = z.load_page(entry, &mut buf);
                match model.remove(&slot) {
                    Some((_, want)) => {
                        assert!(loaded);
                        assert!(buf == want, "slot {slot} differs");
                    }
                    None => assert!(!loaded),
                }
            }
            Op::Invalidate { slot } => {
                z.invalidate(SwapEntry::new(0, slot).unwrap(), 1);
                model.remove(&slot);
            }
            Op::ZswapMax { cg, pages } => cgs[cg].set_zswap_max(pages.unwrap_or(PAGE_COUNTER_MAX)),
            Op::PoolPercent(p) => z.set_max_pool_percent(p),
        }
        assert_eq!(z.debug_counts().stored_pages, model.len() as u64);
        for (i, cg) in cgs.iter().enumerate() {
            let pages = model.values().filter(|(c, _)| *c == i).count() as i64;
            assert_eq!(cg.stat(MemcgStat::Zswapped), pages, "cgroup {i}");
        }
        for (slot, (_, want)) in &model {
            let mut buf = vec![0; PAGE_BYTES];
            assert!(z.peek_page(SwapEntry::new(0, *slot).unwrap(), &mut buf));
            assert!(&buf == want, "slot {slot} differs");
        }
    }
    for slot in 0..16 {
        z.invalidate(SwapEntry::new(0, slot).unwrap(), 1);
    }
    assert_eq!(
        z.debug_counts().pool_total_size,
        0,
        "the pool gave its pages back"
    );
    for cg in &cgs {
        assert_eq!(cg.stat(MemcgStat::ZswapBytes), 0);
        assert_eq!(cg.memory().usage(), 0, "nothing left charged");
    }
    drop(z);
    assert_eq!(tree.machine_used_pages(), metadata_pages);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn zswap_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
        run(&ops);
    }
}
