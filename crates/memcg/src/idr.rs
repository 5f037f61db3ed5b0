//! Sparse id-indexed tables and id allocation (lib/idr.c, the xarray uses
//! in mm/memcontrol.c and mm/list_lru.c).
//!
//! [`IdTable`] maps a small integer id to an `Arc<T>`. Readers are lock-free
//! and touch no shared cache line (`ArcSlot` loads); writers are expected to
//! be serialised by their caller (the kernel's xarray lock), though the table
//! itself tolerates concurrent writers of *different* ids. It is two-level:
//! a fixed array of lazily allocated chunks of [`CHUNK_ENTRIES`] slots, so a
//! table sized for 65536 ids costs ~4 KiB until ids are used, then 2 KiB per
//! 256 ids touched.
//!
//! [`ChunkedTable`] is the same lazy two-level layout for any `Default`
//! entry, with a chunk size of the user's choice (the list_lru item links,
//! a swap device's clusters and its RAM disk pages use it).
//!
//! [`IdAllocator`] hands out the lowest free id in a range, like
//! `xa_alloc(..., XA_LIMIT(min, max))`.
//!
//! Under loom the tables are flat (no chunking): loom models use tiny id
//! spaces, and the chunk publication is `std::sync::OnceLock`, which needs
//! no model.

use std::collections::BTreeSet;

#[cfg(not(loom))]
use crate::sync::OnceLock;
use crate::sync::{Arc, ArcSlot};

/// Entries per lazily allocated chunk.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const CHUNK_ENTRIES: usize = 256;

/// `len` default entries, allocated `CHUNK` at a time on first use.
pub(crate) struct ChunkedTable<T, const CHUNK: usize = CHUNK_ENTRIES> {
    #[cfg(not(loom))]
    chunks: Box<[OnceLock<Box<[T]>>]>,
    #[cfg(loom)]
    flat: Box<[T]>,
    len: usize,
}

impl<T: Default, const CHUNK: usize> ChunkedTable<T, CHUNK> {
    /// A table of `len` entries, none allocated.
    ///
    /// # Panics
    /// If the chunk array cannot be allocated (use
    /// [`ChunkedTable::try_new`] where `len` comes from user input).
    pub(crate) fn new(len: usize) -> Self {
        Self::try_new(len).expect("chunk array of a small table")
    }

    /// A table of `len` entries, none allocated; fails instead of aborting
    /// when even the array of chunk pointers does not fit in memory.
    pub(crate) fn try_new(len: usize) -> Result<Self, std::collections::TryReserveError> {
        Ok(Self {
            #[cfg(not(loom))]
            chunks: try_boxed_slice(len.div_ceil(CHUNK), OnceLock::new)?,
            #[cfg(loom)]
            flat: try_boxed_slice(len, T::default)?,
            len,
        })
    }

    /// Entries the table can hold.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The entry at `index` if its chunk exists (`None` also when out of
    /// range).
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        #[cfg(not(loom))]
        {
            self.chunks[index / CHUNK].get().map(|c| &c[index % CHUNK])
        }
        #[cfg(loom)]
        {
            Some(&self.flat[index])
        }
    }

    /// The entry at `index`, allocating its chunk if needed; `None` only
    /// when out of range.
    #[inline]
    pub(crate) fn get_or_alloc(&self, index: usize) -> Option<&T> {
        if index >= self.len {
            return None;
        }
        #[cfg(not(loom))]
        {
            let chunk = self.chunks[index / CHUNK]
                .get_or_init(|| (0..CHUNK).map(|_| T::default()).collect());
            Some(&chunk[index % CHUNK])
        }
        #[cfg(loom)]
        {
            Some(&self.flat[index])
        }
    }

    /// Every allocated entry with its index, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        #[cfg(not(loom))]
        {
            self.chunks.iter().enumerate().flat_map(|(ci, chunk)| {
                chunk
                    .get()
                    .into_iter()
                    .flat_map(move |c| c.iter().enumerate().map(move |(i, e)| (ci * CHUNK + i, e)))
            })
        }
        #[cfg(loom)]
        {
            self.flat.iter().enumerate()
        }
    }

    /// Bytes used: the chunk array plus every allocated chunk.
    pub(crate) fn memory_bytes(&self) -> usize {
        #[cfg(not(loom))]
        {
            let allocated = self.chunks.iter().filter(|c| c.get().is_some()).count();
            self.chunks.len() * size_of::<OnceLock<Box<[T]>>>() + allocated * CHUNK * size_of::<T>()
        }
        #[cfg(loom)]
        {
            self.flat.len() * size_of::<T>()
        }
    }
}

/// A boxed slice of `len` values made by `make`, or an error (not an abort)
/// when it does not fit in memory.
pub(crate) fn try_boxed_slice<T>(
    len: usize,
    make: impl FnMut() -> T,
) -> Result<Box<[T]>, std::collections::TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)?;
    v.extend(std::iter::repeat_with(make).take(len));
    Ok(v.into_boxed_slice())
}

/// A sparse map from id to `Arc<T>` with lock-free readers.
pub(crate) struct IdTable<T> {
    slots: ChunkedTable<ArcSlot<T>>,
}

impl<T> IdTable<T> {
    /// A table for ids `0..len`.
    pub(crate) fn new(len: usize) -> Self {
        Self {
            slots: ChunkedTable::new(len),
        }
    }

    /// Calls `f` with the value stored at `id` (or `None`), without touching
    /// its reference count; the value stays alive for the call (the guard
    /// plays the part of `rcu_read_lock`).
    #[inline]
    pub(crate) fn with<R>(&self, id: usize, f: impl FnOnce(Option<&T>) -> R) -> R {
        match self.slots.get(id) {
            Some(slot) => slot.with(f),
            None => f(None),
        }
    }

    /// A counted reference to the value at `id`.
    pub(crate) fn get(&self, id: usize) -> Option<Arc<T>> {
        self.slots.get(id).and_then(|slot| slot.load_full())
    }

    /// Whether `id` holds a value.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn contains(&self, id: usize) -> bool {
        self.with(id, |v| v.is_some())
    }

    /// Stores `value` at `id`, returning what was there.
    ///
    /// # Panics
    /// If `id` is outside the table (callers allocate ids in range).
    pub(crate) fn store(&self, id: usize, value: Option<Arc<T>>) -> Option<Arc<T>> {
        match self.slots.get_or_alloc(id) {
            Some(slot) => slot.swap(value),
            None => panic!("id {id} outside a table of {}", self.slots.len()),
        }
    }

    /// Every id that holds a value, in increasing order, with the value.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, Arc<T>)> + '_ {
        self.slots
            .iter()
            .filter_map(|(id, slot)| slot.load_full().map(|v| (id, v)))
    }

    /// Bytes of the table itself (not the values).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots.memory_bytes()
    }
}

/// Hands out the lowest free id in `min..=max`.
#[derive(Debug)]
pub(crate) struct IdAllocator {
    min: u32,
    max: u32,
    /// Ids below `next` that were freed.
    free: BTreeSet<u32>,
    /// The lowest id never handed out.
    next: u32,
}

impl IdAllocator {
    /// An allocator for `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> Self {
        assert!(min <= max);
        Self {
            min,
            max,
            free: BTreeSet::new(),
            next: min,
        }
    }

    /// The lowest free id, or `None` when every id is in use.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        if let Some(id) = self.free.pop_first() {
            return Some(id);
        }
        if self.next > self.max {
            return None;
        }
        self.next += 1;
        Some(self.next - 1)
    }

    /// Returns `id` to the pool.
    pub(crate) fn free(&mut self, id: u32) {
        debug_assert!(
            (self.min..self.next).contains(&id),
            "freeing id {id} never allocated"
        );
        debug_assert!(!self.free.contains(&id), "double free of id {id}");
        if id + 1 == self.next {
            self.next = id;
            while self.next > self.min && self.free.remove(&(self.next - 1)) {
                self.next -= 1;
            }
        } else {
            self.free.insert(id);
        }
    }

    /// Ids handed out and not freed.
    pub(crate) fn in_use(&self) -> usize {
        (self.next - self.min) as usize - self.free.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn allocator_hands_out_the_lowest_free_id() {
        let mut a = IdAllocator::new(1, 4);
        assert_eq!(
            (a.alloc(), a.alloc(), a.alloc()),
            (Some(1), Some(2), Some(3))
        );
        a.free(2);
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc(), Some(4));
        assert_eq!(a.alloc(), None, "exhausted");
        a.free(4);
        a.free(3);
        assert_eq!(a.in_use(), 2);
        assert_eq!(a.alloc(), Some(3));
    }

    #[test]
    fn id_table_is_sparse_and_ordered() {
        let t: IdTable<u32> = IdTable::new(65536);
        let empty = t.memory_bytes();
        assert!(empty < 8192, "{empty}");
        assert!(t.get(700).is_none());
        t.store(700, Some(Arc::new(7)));
        t.store(5, Some(Arc::new(5)));
        assert_eq!(
            t.memory_bytes(),
            empty + 2 * CHUNK_ENTRIES * size_of::<ArcSlot<u32>>()
        );
        assert_eq!(t.with(700, |v| v.copied()), Some(7));
        let ids: Vec<usize> = t.entries().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![5, 700]);
        assert_eq!(t.store(700, None).as_deref(), Some(&7));
        assert!(!t.contains(700));
    }
}
