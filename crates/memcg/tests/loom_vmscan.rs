//! Loom model of the LRU's one lock-free step: a folio's list state is
//! taken off by whoever gets it first, a reclaimer isolating the folio
//! (under the lru lock, holding a strong reference) or the folio's own drop
//! when its mapping frees it (no lock). Exactly one of them adjusts the
//! list's counts, so they end at zero in every interleaving, and the folio
//! is either reclaimed or freed, never both, never lost.
#![cfg(loom)]

mod common;

use std::sync::{Arc, Mutex, Weak};

use common::{explore, small_tree};
use loom::thread;
use memcg::folio::Folio;
use memcg::memcontrol::{MemcgStat, ReclaimOptions};
use memcg::vmscan::{self, LruList, Rmap, RmapOutcome, SwapSpace};

/// A mapping of one folio; reclaiming it "swaps it out" by dropping it.
struct Mapping(Mutex<Option<Arc<Folio>>>);

impl Rmap for Mapping {
    fn reclaim(&self, folio: Arc<Folio>) -> RmapOutcome {
        let mut mapped = self.0.lock().unwrap();
        match mapped.as_ref() {
            Some(f) if Arc::ptr_eq(f, &folio) => {
                drop(folio);
                mapped.take();
                RmapOutcome::Reclaimed { nr_pages: 1 }
            }
            _ => RmapOutcome::Gone,
        }
    }
}

#[test]
fn reclaim_racing_the_free_of_a_folio_counts_it_once() {
    let outcomes = explore(|| {
        let t = small_tree(1, 4);
        let a = t.mkdir("/a").unwrap();
        let folio = Arc::new(Folio::new(&t, &a, 1).unwrap());
        let mapping = Arc::new(Mapping(Mutex::new(Some(Arc::clone(&folio)))));
        let rmap: Weak<dyn Rmap> = Arc::downgrade(&(Arc::clone(&mapping) as Arc<dyn Rmap>));
        // Accessed by its fault: the first look keeps it, the next (a
        // lower priority of the same reclaim) takes it.
        vmscan::folio_add_lru(&folio, rmap);
        drop(folio);
        let freer = {
            let mapping = Arc::clone(&mapping);
            thread::spawn(move || drop(mapping.0.lock().unwrap().take()))
        };
        let space = SwapSpace {
            free_pages: 1,
            total_pages: 1,
        };
        let reclaimed =
            vmscan::try_to_free_mem_cgroup_pages(&t, &a, 1, space, ReclaimOptions::default());
        freer.join().unwrap();
        let lruvec = a.lruvec();
        assert_eq!(lruvec.size(LruList::InactiveAnon), 0);
        assert_eq!(lruvec.size(LruList::ActiveAnon), 0);
        assert_eq!(a.stat(MemcgStat::InactiveAnon), 0);
        assert_eq!(a.stat(MemcgStat::ActiveAnon), 0);
        assert_eq!(a.memory().usage(), 0, "uncharged exactly once");
        reclaimed
    });
    assert!(outcomes.contains(&0), "freed first: {outcomes:?}");
    assert!(outcomes.contains(&1), "reclaimed first: {outcomes:?}");
}
