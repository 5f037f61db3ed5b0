//! Multi-threaded stress test: threads own disjoint folios laid out so that
//! neighbouring folios (sharing a packed word, and always a cache line)
//! belong to different threads. Each thread records, re-records, clears and
//! checks its own folios while looking up everybody else's, checking that
//! no slot ever shows an id its owner did not write; at the end every slot
//! is checked against what its owner says it holds.
#![cfg(not(loom))]

mod common;

use std::ops::Range;

use memcg::mm_types::SWAPFILE_CLUSTER;
use memcg::swap_cgroup::{Design, SwapCgroupMap};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

const THREADS: usize = 4;
const ITERATIONS: usize = 20_000;

/// Ids encode their owner in the top 4 bits, so a lookup can tell whose
/// write it sees.
fn id_for(thread: usize, generation: u16) -> u16 {
    ((thread as u16 + 1) << 12) | (generation & 0x0fff).max(1)
}

fn owner_of(id: u16) -> Option<usize> {
    (id != 0).then(|| usize::from(id >> 12) - 1)
}

/// Cuts the device into naturally aligned folios of 1..=16 slots and deals
/// them out round-robin, so neighbours have different owners.
fn layout(max_pages: u64, rng: &mut ChaCha8Rng) -> Vec<(Range<u64>, usize)> {
    let mut folios = Vec::new();
    let mut at = 0;
    while at < max_pages {
        let mut size = [1u64, 1, 2, 4, 16][rng.random_range(0..5)];
        while at % size != 0 || at + size > max_pages {
            size /= 2;
        }
        folios.push((at..at + size, folios.len() % THREADS));
        at += size;
    }
    folios
}

fn stress(design: Design, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let max_pages = 4 * SWAPFILE_CLUSTER as u64 + 37;
    let map = SwapCgroupMap::new(design, max_pages).unwrap();
    let folios = layout(max_pages, &mut rng);
    let owner_of_slot: Vec<usize> = folios
        .iter()
        .flat_map(|(r, t)| r.clone().map(move |_| *t))
        .collect();

    let finals: Vec<Vec<(Range<u64>, u16)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|me| {
                let (map, folios, owner_of_slot) = (&map, &folios, &owner_of_slot);
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9));
                s.spawn(move || {
                    let mut mine: Vec<(Range<u64>, u16)> = folios
                        .iter()
                        .filter(|(_, t)| *t == me)
                        .map(|(r, _)| (r.clone(), 0))
                        .collect();
                    for generation in 1..=ITERATIONS as u16 {
                        let pick = rng.random_range(0..mine.len());
                        let (range, held) = &mut mine[pick];
                        let nr = (range.end - range.start) as u32;
                        if *held != 0 && rng.random_bool(0.5) {
                            let cleared = map.clear(range.start, nr).unwrap();
                            assert_eq!(cleared, *held, "{design} seed {seed}: clear of {range:?}");
                            *held = 0;
                        } else {
                            let id = id_for(me, generation);
                            let old = map.record(range.start, id, nr).unwrap();
                            assert_eq!(old, *held, "{design} seed {seed}: record of {range:?}");
                            *held = id;
                        }
                        for offset in range.clone() {
                            assert_eq!(map.lookup(offset).unwrap(), *held, "{design} seed {seed}: own slot {offset}");
                        }
                        // Look at a random slot of anybody's: it must hold 0 or
                        // an id written by that slot's owner.
                        let offset = rng.random_range(0..max_pages);
                        let seen = map.lookup(offset).unwrap();
                        if let Some(writer) = owner_of(seen) {
                            assert_eq!(writer, owner_of_slot[offset as usize],
                                "{design} seed {seed}: slot {offset} holds {seen:#x}, written by a non-owner");
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    for (range, held) in finals.into_iter().flatten() {
        for offset in range {
            assert_eq!(
                map.lookup(offset).unwrap(),
                held,
                "{design} seed {seed}: final slot {offset}"
            );
        }
    }
    // Clearing everything leaves every slot 0.
    for (range, _) in &folios {
        map.clear(range.start, (range.end - range.start) as u32)
            .unwrap();
    }
    for offset in 0..max_pages {
        assert_eq!(
            map.lookup(offset).unwrap(),
            0,
            "{design} seed {seed}: slot {offset} after clear"
        );
    }
}

#[test]
fn neighbouring_folios_never_clobber_each_other() {
    let seed = common::stress_seed("swap_cgroup stress");
    for design in Design::ALL {
        stress(design, seed);
    }
}
