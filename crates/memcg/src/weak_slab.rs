//! A list of weak references whose entries leave in O(1) (the kernel's
//! intrusive `list_head` on a parent's list, here a slab of slots).
//!
//! A parent keeps weak references to objects that outlive their place in
//! the tree (a dying memory cgroup on its parent's list of dying children,
//! an object cgroup on its memory cgroup's `objcg_list`). Each object,
//! when it is freed, removes its own entry by the index [`WeakSlab::insert`]
//! gave it, so nothing of a freed object stays behind and removing one of
//! thousands costs the same as removing one of two.
//!
//! Invariants: a slot holds a `Weak` of at most one object; `free` lists
//! exactly the empty slots; `len` counts the full ones. An index is only a
//! hint: [`WeakSlab::remove`] frees a slot only if it still holds a
//! reference to the object named, so an index kept across a
//! [`WeakSlab::take`] (the entries moved elsewhere) removes nothing. When the
//! last entry goes the storage is given back, so a slab's memory is bounded
//! by the most entries it held at once since it was last empty.
//!
//! Locking: none of its own; its owner keeps it under a mutex.

use std::sync::Weak;

/// Weak references in reusable slots; see the module docs.
pub(crate) struct WeakSlab<T> {
    slots: Vec<Option<Weak<T>>>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Default for WeakSlab<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> std::fmt::Debug for WeakSlab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakSlab").field("len", &self.len).finish()
    }
}

impl<T> WeakSlab<T> {
    /// Adds `entry`; returns the index that removes it.
    pub(crate) fn insert(&mut self, entry: Weak<T>) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(entry);
                index
            }
            None => {
                self.slots.push(Some(entry));
                self.slots.len() - 1
            }
        }
    }

    /// Removes the entry at `index` if it refers to `object`; `false` if
    /// that slot holds something else (or nothing).
    pub(crate) fn remove(&mut self, index: usize, object: *const T) -> bool {
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if !slot
            .as_ref()
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), object))
        {
            return false;
        }
        *slot = None;
        self.len -= 1;
        if self.len == 0 {
            *self = Self::default();
        } else {
            self.free.push(index);
        }
        true
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every entry (objects being freed included: upgrade to use one).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Weak<T>> {
        self.slots.iter().flatten()
    }

    /// Empties the slab, returning its entries; indices handed out before
    /// name nothing afterwards.
    pub(crate) fn take(&mut self) -> Vec<Weak<T>> {
        std::mem::take(self).slots.into_iter().flatten().collect()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn entries_leave_by_index_and_storage_goes_with_the_last() {
        let objects: Vec<Arc<u32>> = (0..5).map(Arc::new).collect();
        let mut slab = WeakSlab::default();
        let index: Vec<usize> = objects
            .iter()
            .map(|o| slab.insert(Arc::downgrade(o)))
            .collect();
        assert_eq!(slab.len(), 5);
        assert!(slab.remove(index[1], Arc::as_ptr(&objects[1])));
        assert!(
            !slab.remove(index[1], Arc::as_ptr(&objects[1])),
            "already gone"
        );
        assert!(
            !slab.remove(index[2], Arc::as_ptr(&objects[3])),
            "another object's slot"
        );
        // The freed slot is reused.
        let again = Arc::new(9);
        assert_eq!(slab.insert(Arc::downgrade(&again)), index[1]);
        let seen: Vec<u32> = slab.iter().filter_map(Weak::upgrade).map(|o| *o).collect();
        assert_eq!(seen, [0, 9, 2, 3, 4]);
        for (i, o) in [0, 2, 3, 4].into_iter().map(|i| (index[i], &objects[i])) {
            assert!(slab.remove(i, Arc::as_ptr(o)));
        }
        assert!(slab.remove(index[1], Arc::as_ptr(&again)));
        assert_eq!(
            (slab.len(), slab.slots.capacity()),
            (0, 0),
            "storage given back"
        );
    }

    #[test]
    fn take_moves_every_entry_and_old_indices_name_nothing() {
        let a = Arc::new(1);
        let mut slab = WeakSlab::default();
        let i = slab.insert(Arc::downgrade(&a));
        let taken = slab.take();
        assert_eq!(taken.len(), 1);
        assert_eq!(slab.len(), 0);
        assert!(!slab.remove(i, Arc::as_ptr(&a)));
    }
}
