//! The one place the library takes its atomics and locks from.
//!
//! Under `--cfg loom` every type here is swapped for [loom]'s model-checked
//! equivalent, so the loom tests in `tests/loom_*.rs` explore every
//! interleaving of the real code rather than of a copy. Nothing else in the
//! crate may name `std::sync` or `core::sync::atomic` directly.
//!
//! [`ArcSlot`] is the read-mostly pointer cell used for tables that readers
//! consult on every operation (the per-type swap device table): with `std`
//! it is an [`arc_swap::ArcSwapOption`], whose loads touch no shared cache
//! line, and under loom a `RwLock<Option<Arc<T>>>`, which loom can model.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
    Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

// `Arc` is std's under loom too: loom's `Arc` cannot be a method receiver or
// coerce to `dyn Trait`, and reference counting is std's own, already
// verified protocol; loom still models every atomic and lock of ours.
pub(crate) use std::sync::Arc;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
    Ordering, fence,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

// Per-thread state (a task's `current` fields): loom's resets with each
// explored execution, std's lives with the thread.
#[cfg(loom)]
pub(crate) use loom::thread_local;
#[cfg(not(loom))]
pub(crate) use std::thread_local;

/// Orders a preceding `SeqCst` read-modify-write before a following
/// `SeqCst` load, for loom's sake. In the C++ model `SeqCst` accesses
/// already form one total order, so the store-load pattern needs nothing
/// more (on x86 the RMW is a locked instruction, a full barrier, and the
/// load a plain one). Loom models `SeqCst` accesses only as `AcqRel` but
/// does model `SeqCst` fences, so under loom this is one.
#[inline]
pub(crate) fn seqcst_store_load() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// Backs off inside a retry loop: a CPU hint normally, a yield to the
/// scheduler under loom (which otherwise explores the spin forever).
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// `T` alone on its own 64-byte cache line (x86's line size, the kernel's
/// `L1_CACHE_BYTES`), for the shards of a sharded counter. A local
/// wrapper rather than `crossbeam_utils::CachePadded`: memcg does not
/// depend on crossbeam-utils, and this is all of it we would use.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// Locks `mutex`, ignoring poisoning.
///
/// A panic while a lock is held only happens on a failed debug assertion
/// (a broken caller contract); the protected data is still structurally
/// valid, so later users may go on rather than cascade the panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cell holding an optional `Arc<T>` that many threads read and few write.
#[cfg(not(loom))]
pub(crate) struct ArcSlot<T>(arc_swap::ArcSwapOption<T>);

/// A loaded [`ArcSlot`] value (see [`ArcSlot::load`]).
#[cfg(not(loom))]
pub(crate) struct SlotGuard<T>(arc_swap::Guard<Option<Arc<T>>>);

#[cfg(not(loom))]
impl<T> SlotGuard<T> {
    /// The value, if the slot held one.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The value's `Arc`, if the slot held one.
    pub(crate) fn arc(&self) -> Option<&Arc<T>> {
        self.0.as_ref()
    }
}

/// A loaded [`ArcSlot`] value: under loom, a counted reference.
#[cfg(loom)]
pub(crate) struct SlotGuard<T>(Option<Arc<T>>);

#[cfg(loom)]
impl<T> SlotGuard<T> {
    /// The value, if the slot held one.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The value's `Arc`, if the slot held one.
    pub(crate) fn arc(&self) -> Option<&Arc<T>> {
        self.0.as_ref()
    }
}

#[cfg(not(loom))]
impl<T> ArcSlot<T> {
    /// An empty cell.
    pub(crate) fn empty() -> Self {
        Self(arc_swap::ArcSwapOption::empty())
    }

    /// A cell holding `value`.
    pub(crate) fn new(value: Arc<T>) -> Self {
        Self(arc_swap::ArcSwapOption::new(Some(value)))
    }

    /// Calls `f` with the current value without touching its reference count.
    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let guard = self.0.load();
        f(guard.as_deref())
    }

    /// A counted reference to the current value.
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        self.0.load_full()
    }

    /// The current value, held by a guard that keeps it alive without
    /// touching its reference count (arc-swap's debt list): for a value
    /// used across one operation, where a counted reference would make
    /// every thread write the same cache line.
    pub(crate) fn load(&self) -> SlotGuard<T> {
        SlotGuard(self.0.load())
    }

    /// Replaces the value, returning the previous one.
    pub(crate) fn swap(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        self.0.swap(value)
    }
}

#[cfg(not(loom))]
impl<T> Default for ArcSlot<T> {
    fn default() -> Self {
        Self::empty()
    }
}

/// A cell holding an optional `Arc<T>` that many threads read and few write.
#[cfg(loom)]
pub(crate) struct ArcSlot<T>(loom::sync::RwLock<Option<Arc<T>>>);

#[cfg(loom)]
impl<T> ArcSlot<T> {
    /// An empty cell.
    pub(crate) fn empty() -> Self {
        Self(loom::sync::RwLock::new(None))
    }

    /// A cell holding `value`.
    pub(crate) fn new(value: Arc<T>) -> Self {
        Self(loom::sync::RwLock::new(Some(value)))
    }

    /// Calls `f` with the current value.
    pub(crate) fn with<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let guard = self.0.read().unwrap_or_else(|p| p.into_inner());
        f(guard.as_deref())
    }

    /// A counted reference to the current value.
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A counted reference, standing in for std's guard.
    pub(crate) fn load(&self) -> SlotGuard<T> {
        SlotGuard(self.load_full())
    }

    /// Replaces the value, returning the previous one.
    pub(crate) fn swap(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        let mut guard = self.0.write().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *guard, value)
    }
}

#[cfg(loom)]
impl<T> Default for ArcSlot<T> {
    fn default() -> Self {
        Self::empty()
    }
}
