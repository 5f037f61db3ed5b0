//! Loom models of the page cache's one protocol that is not a plain
//! critical section: reclaim evicting a folio that a reader or writer has
//! just looked up. A lookup takes a reference under the mapping lock and
//! copies outside it; eviction, under the mapping lock, takes the folio
//! only if the mapping's reference and the reclaimer's are the only ones
//! (`folio_ref_freeze`), and only if it is clean (a dirty one goes back to
//! reclaim for the flusher). So a write is never made into a folio that has
//! already left the cache (and lost), a read always gets the file's bytes,
//! and the charges equal the cached pages in every interleaving.
#![cfg(loom)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use loom::sync::Mutex;
use loom::thread;

use common::{explore, small_tree};
use memcg::filemap::{AddressSpace, Backing, BackingError};
use memcg::lruvec::{self, LruList, RmapOutcome};
use memcg::memcontrol::{CgroupTree, MemCgroup, MemcgStat};
use memcg::mm_types::PAGE_BYTES;
use memcg::readahead::FileRaState;
use memcg::vmscan::{self, SwapSpace};

/// A file's bytes kept in memory, page by page.
struct MemBacking(Mutex<HashMap<u64, Vec<u8>>>);

impl Backing for MemBacking {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        match self.0.lock().unwrap().get(&index) {
            Some(page) => buf.copy_from_slice(page),
            None => buf.fill(0),
        }
        Ok(())
    }

    fn write_page(&self, index: u64, buf: &[u8]) -> Result<(), BackingError> {
        self.0.lock().unwrap().insert(index, buf.to_vec());
        Ok(())
    }

    fn truncate(&self, size_bytes: u64) -> Result<(), BackingError> {
        let first_gone = size_bytes.div_ceil(PAGE_BYTES as u64);
        self.0
            .lock()
            .unwrap()
            .retain(|&index, _| index < first_gone);
        Ok(())
    }
}

/// A tree, a memory cgroup, and a one-page file of `old` bytes whose page
/// is cached (clean, on the inactive file list).
fn cached_file(old: u8) -> (CgroupTree, Arc<MemCgroup>, Arc<AddressSpace>) {
    let t = small_tree(1, 4);
    t.set_charge_stock(false);
    let a = t.mkdir("/a").unwrap().memcg().unwrap();
    let backing = MemBacking(Mutex::new(HashMap::from([(0, vec![old; PAGE_BYTES])])));
    let mapping = AddressSpace::new(&t, Arc::new(backing), Arc::new(SwapSpace::default));
    read_page(&mapping, &a);
    (t, a, mapping)
}

/// Reads the file's one page through a fresh open file (a one-page file
/// reads no page beyond it ahead).
fn read_page(mapping: &AddressSpace, a: &Arc<MemCgroup>) -> Vec<u8> {
    let mut buf = vec![0; PAGE_BYTES];
    let mut ra = FileRaState::new(32);
    let read = mapping.read(a, &mut ra, 0, &mut buf, PAGE_BYTES as u64);
    assert_eq!(read.unwrap(), PAGE_BYTES);
    buf
}

/// Reclaim's pass over the inactive file list: 1 if it evicted the page.
fn reclaim_one(a: &MemCgroup) -> u64 {
    let (isolated, _) = lruvec::isolate_lru_folios(a, LruList::InactiveFile, 32);
    let mut evicted = 0;
    for (folio, rmap) in isolated {
        let Some(owner) = rmap.upgrade() else {
            continue;
        };
        match owner.reclaim(folio, a, &mut vmscan::folio_check_references) {
            RmapOutcome::Reclaimed { nr_pages } => evicted += nr_pages,
            // Kept: back on the list, as shrink_inactive_list does.
            RmapOutcome::Busy(f)
            | RmapOutcome::Referenced(f, _)
            | RmapOutcome::NoSwap(f)
            | RmapOutcome::Dirty(f)
            | RmapOutcome::Writeback(f) => lruvec::folio_putback_lru(&f, rmap, false),
            RmapOutcome::Gone => {}
        }
    }
    evicted
}

/// The charges and lists agree with what the mapping holds.
fn check_balance(a: &MemCgroup, mapping: &AddressSpace) {
    let cached = mapping.nr_folios();
    assert_eq!(
        a.memory().usage(),
        cached,
        "one page charged per cached folio"
    );
    assert_eq!(a.stat(MemcgStat::File) as u64, cached);
    let listed = a.lruvec().size(LruList::InactiveFile) + a.lruvec().size(LruList::ActiveFile);
    assert_eq!(listed, cached, "every cached folio is listed once");
}

#[test]
fn a_write_racing_eviction_is_never_lost() {
    let outcomes = explore(|| {
        let (_t, a, mapping) = cached_file(1);
        let writer = {
            let (a, mapping) = (Arc::clone(&a), Arc::clone(&mapping));
            thread::spawn(move || mapping.write(&a, 0, &vec![2; PAGE_BYTES]).unwrap())
        };
        let evicted = reclaim_one(&a);
        writer.join().unwrap();
        check_balance(&a, &mapping);
        let buf = read_page(&mapping, &a);
        assert!(
            buf.iter().all(|&b| b == 2),
            "the write survived the eviction"
        );
        mapping.truncate();
        assert_eq!(a.memory().usage(), 0);
        evicted
    });
    assert!(
        outcomes.contains(&0),
        "kept (in use, or marked): {outcomes:?}"
    );
    assert!(outcomes.contains(&1), "evicted first: {outcomes:?}");
}

#[test]
fn a_read_racing_eviction_gets_the_bytes_and_charges_balance() {
    let outcomes = explore(|| {
        let (_t, a, mapping) = cached_file(7);
        let reader = {
            let (a, mapping) = (Arc::clone(&a), Arc::clone(&mapping));
            thread::spawn(move || {
                let buf = read_page(&mapping, &a);
                assert!(buf.iter().all(|&b| b == 7));
            })
        };
        let evicted = reclaim_one(&a);
        reader.join().unwrap();
        check_balance(&a, &mapping);
        let refaults = a.stat(MemcgStat::WorkingsetRefaultFile);
        mapping.truncate();
        assert_eq!(a.memory().usage(), 0);
        (evicted, refaults)
    });
    assert!(
        outcomes.contains(&(1, 1)),
        "evicted, then refaulted: {outcomes:?}"
    );
    assert!(outcomes.iter().any(|&(e, _)| e == 0), "kept: {outcomes:?}");
}
