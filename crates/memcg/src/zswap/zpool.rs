//! The compressed-object pool (mm/zsmalloc.c, reduced): objects packed by
//! size class into "zspages" of one to four pages.
//!
//! A size class holds objects of up to its size, classes 16 bytes apart
//! from 32 bytes to a page (`ZS_MIN_ALLOC_SIZE`, `ZS_SIZE_CLASS_DELTA`).
//! Each class chooses how many pages a zspage spans (1 to
//! `ZS_MAX_PAGES_PER_ZSPAGE` = 4) to waste the least, as zsmalloc's
//! `get_pages_per_zspage` does. A zspage is allocated when its class has
//! no free slot and freed when its last object goes, so the pool's pages
//! (`pool_total_size`) show the real fragmentation: a 33-byte object
//! takes a 48-byte slot, and a half-empty zspage keeps all its pages.
//!
//! Pool pages are the kernel's: taken from the machine, from the reclaim
//! reserve if need be (`charge_kernel_reclaim`: a store runs in reclaim),
//! charged to no cgroup; the objects' bytes are charged to their cgroups by
//! zswap itself.
//!
//! Locking: one mutex per class, held to allocate, free, read or write an
//! object of that class.

use crate::memcontrol::CgroupTree;
use crate::mm_types::PAGE_BYTES;
use crate::page_alloc::PageBuf;
use crate::sync::{AtomicU64, Mutex, Ordering, lock};

/// The smallest slot (`ZS_MIN_ALLOC_SIZE`).
const MIN_ALLOC_BYTES: usize = 32;
/// The step between classes (`ZS_SIZE_CLASS_DELTA`: `PAGE_SIZE >> 8`).
const CLASS_DELTA_BYTES: usize = PAGE_BYTES >> 8;
/// The most pages one zspage spans (`ZS_MAX_PAGES_PER_ZSPAGE`).
const MAX_PAGES_PER_ZSPAGE: usize = 4;
/// Classes: 32, 48, ..., 4096 bytes.
const NR_CLASSES: usize = (PAGE_BYTES - MIN_ALLOC_BYTES) / CLASS_DELTA_BYTES + 1;

/// Where an object lives (`zs_malloc`'s handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    class: u16,
    zspage: u32,
    slot: u16,
}

/// Why the pool refused an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Bigger than a page (`-ENOSPC`: counted as a poor compression).
    #[error("an object of {0} bytes is bigger than a page")]
    TooBig(usize),
    /// No page for a new zspage (`-ENOMEM`: an allocation failure).
    #[error("no memory for a new zspage")]
    NoMemory,
}

/// One zspage: `pages` pages cut into equal slots.
struct ZsPage {
    /// The machine's frames (given back with `free_pages`).
    bytes: PageBuf,
    /// Free slot numbers.
    free: Vec<u16>,
    in_use: u16,
}

/// One size class.
struct SizeClass {
    slot_bytes: usize,
    pages_per_zspage: usize,
    slots_per_zspage: usize,
    /// Zspages by number (`None`: freed, the number reusable).
    zspages: Vec<Option<ZsPage>>,
    /// Zspages with a free slot.
    partial: Vec<u32>,
}

impl SizeClass {
    fn new(slot_bytes: usize) -> Self {
        let pages_per_zspage = pages_per_zspage(slot_bytes);
        Self {
            slot_bytes,
            pages_per_zspage,
            slots_per_zspage: pages_per_zspage * PAGE_BYTES / slot_bytes,
            zspages: Vec::new(),
            partial: Vec::new(),
        }
    }
}

/// The zspage size wasting the least for `slot_bytes`
/// (`get_pages_per_zspage`: the best used share of 1..=4 pages).
fn pages_per_zspage(slot_bytes: usize) -> usize {
    (1..=MAX_PAGES_PER_ZSPAGE)
        .max_by_key(|&pages| {
            let zspage = pages * PAGE_BYTES;
            let used = (zspage / slot_bytes) * slot_bytes;
            // Best used share; ties go to fewer pages.
            (used * 100 / zspage, std::cmp::Reverse(pages))
        })
        .unwrap_or(1)
}

/// The size-class pool.
pub(super) struct Pool {
    tree: CgroupTree,
    classes: Box<[Mutex<SizeClass>]>,
    /// Pages of every zspage (`zs_get_total_pages`).
    nr_pages: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("nr_pages", &self.nr_pages())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// An empty pool whose pages come from `tree`'s machine.
    pub(super) fn new(tree: &CgroupTree) -> Self {
        Self {
            tree: tree.clone(),
            classes: (0..NR_CLASSES)
                .map(|i| Mutex::new(SizeClass::new(MIN_ALLOC_BYTES + i * CLASS_DELTA_BYTES)))
                .collect(),
            nr_pages: AtomicU64::new(0),
        }
    }

    /// Pages the pool holds (`pool_total_size` / `PAGE_SIZE`).
    pub(super) fn nr_pages(&self) -> u64 {
        // Relaxed: a statistic.
        self.nr_pages.load(Ordering::Relaxed)
    }

    /// Stores `data` (`zs_malloc` + copy), returning its handle.
    pub(super) fn alloc(&self, data: &[u8]) -> Result<Handle, PoolError> {
        if data.len() > PAGE_BYTES {
            return Err(PoolError::TooBig(data.len()));
        }
        let class_index = data
            .len()
            .saturating_sub(MIN_ALLOC_BYTES)
            .div_ceil(CLASS_DELTA_BYTES);
        let mut class = lock(&self.classes[class_index]);
        let zspage = match class.partial.last() {
            Some(&z) => z,
            None => self.new_zspage(&mut class)?,
        };
        let (slot_bytes, slots) = (class.slot_bytes, class.slots_per_zspage);
        let page = class.zspages[zspage as usize]
            .as_mut()
            .expect("a partial zspage exists");
        let slot = page.free.pop().expect("a partial zspage has a free slot");
        page.in_use += 1;
        let at = usize::from(slot) * slot_bytes;
        page.bytes[at..at + data.len()].copy_from_slice(data);
        if usize::from(page.in_use) == slots {
            class.partial.pop();
        }
        Ok(Handle {
            class: class_index as u16,
            zspage,
            slot,
        })
    }

    fn new_zspage(&self, class: &mut SizeClass) -> Result<u32, PoolError> {
        let pages = class.pages_per_zspage as u64;
        self.tree
            .charge_kernel_reclaim(pages)
            .map_err(|_| PoolError::NoMemory)?;
        // Relaxed: a statistic.
        self.nr_pages.fetch_add(pages, Ordering::Relaxed);
        let page = ZsPage {
            // Not zeroed: a slot is read only after an object was written.
            bytes: self.tree.alloc_pages(class.pages_per_zspage as u32, false),
            free: (0..class.slots_per_zspage as u16).rev().collect(),
            in_use: 0,
        };
        let number = match class.zspages.iter().position(Option::is_none) {
            Some(n) => {
                class.zspages[n] = Some(page);
                n
            }
            None => {
                class.zspages.push(Some(page));
                class.zspages.len() - 1
            }
        } as u32;
        class.partial.push(number);
        Ok(number)
    }

    /// Calls `f` with the object's bytes (`zs_map_object`), `len` of them.
    pub(super) fn read<R>(&self, handle: Handle, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let class = lock(&self.classes[usize::from(handle.class)]);
        let page = class.zspages[handle.zspage as usize]
            .as_ref()
            .expect("a live handle's zspage");
        let at = usize::from(handle.slot) * class.slot_bytes;
        f(&page.bytes[at..at + len])
    }

    /// Frees an object (`zs_free`); a zspage left empty goes back.
    pub(super) fn free(&self, handle: Handle) {
        let mut class = lock(&self.classes[usize::from(handle.class)]);
        let slots = class.slots_per_zspage;
        let page = class.zspages[handle.zspage as usize]
            .as_mut()
            .expect("a live handle's zspage");
        let was_full = usize::from(page.in_use) == slots;
        page.free.push(handle.slot);
        page.in_use -= 1;
        let empty = page.in_use == 0;
        if was_full {
            class.partial.push(handle.zspage);
        }
        if empty {
            class.partial.retain(|&z| z != handle.zspage);
            let page = class.zspages[handle.zspage as usize]
                .take()
                .expect("a live handle's zspage");
            let pages = class.pages_per_zspage as u64;
            drop(class);
            self.tree.free_pages(page.bytes);
            // Relaxed: a statistic.
            self.nr_pages.fetch_sub(pages, Ordering::Relaxed);
            self.tree.uncharge_kernel(pages);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // `get_mut`, not `lock`: no one else can hold a class now (and a
        // loom model would count 255 lock acquisitions as branches).
        let tree = &self.tree;
        for class in self.classes.iter_mut() {
            let class = class.get_mut().unwrap_or_else(|e| e.into_inner());
            for page in class.zspages.drain(..).flatten() {
                tree.free_pages(page.bytes);
            }
        }
        let pages = self.nr_pages();
        if pages > 0 {
            self.tree.uncharge_kernel(pages);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_and_zspage_sizes_follow_zsmalloc() {
        assert_eq!(NR_CLASSES, 255);
        // A 2064-byte slot fills half a page; four pages hold 7 of them
        // (88% used): zsmalloc picks the best share.
        assert_eq!(pages_per_zspage(4096), 1);
        assert_eq!(pages_per_zspage(2064), 4);
        assert_eq!(pages_per_zspage(1360), 1, "3 slots use 99% of a page");
        assert_eq!(pages_per_zspage(32), 1);
    }

    #[test]
    fn objects_round_trip_and_empty_zspages_go_back() {
        let t = crate::memcontrol::test_tree(1, 8);
        let pool = Pool::new(&t);
        let data: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8; 33 + i % 7]).collect();
        let handles: Vec<Handle> = data.iter().map(|d| pool.alloc(d).unwrap()).collect();
        // 33..39 bytes all land in the 48-byte class: 85 per page.
        assert_eq!(pool.nr_pages(), 3);
        assert_eq!(t.machine_used_pages(), 3);
        for (h, d) in handles.iter().zip(&data) {
            pool.read(*h, d.len(), |b| assert_eq!(b, &d[..]));
        }
        for h in handles {
            pool.free(h);
        }
        assert_eq!(pool.nr_pages(), 0);
        assert_eq!(t.machine_used_pages(), 0);
        assert_eq!(pool.alloc(&[0; 4097]), Err(PoolError::TooBig(4097)));
    }
}
