//! Swap slot → owning cgroup id (mm/swap_cgroup.c).
//!
//! Every swap slot remembers the 16-bit id of the memory cgroup that swapped
//! it out, so that the slot's swap charge can be returned to that cgroup when
//! the slot is freed and so that swap-in can charge the right cgroup. Id 0
//! means "no cgroup".
//!
//! # Operations (kernel semantics, v6.14 plus the seed patch)
//!
//! - [`SwapCgroup::swapon`] allocates the map of one device, all ids 0;
//!   [`SwapCgroup::swapoff`] detaches it.
//! - [`SwapCgroupMap::record`] sets the `nr` slots of one folio to `id` and
//!   returns the previous id. All `nr` previous ids must be equal (the seed's
//!   `VM_BUG_ON`, a `debug_assert!` here).
//! - [`SwapCgroupMap::clear`] sets the range to 0 and returns the id it held.
//!   Leading zeros are tolerated; after the first non-zero id every slot must
//!   hold that same id (the later kernel's rule for partially recorded
//!   folios).
//! - [`SwapCgroupMap::lookup`] returns one slot's id.
//!
//! Ids are memory cgroup ids ([`MemCgroup::id`](crate::memcontrol::MemCgroup::id));
//! [`CgroupTree::lookup`](crate::memcontrol::CgroupTree::lookup) turns one
//! back into its memory cgroup while the id is pinned. The tree's swap
//! accounting ([`CgroupTree::swapout_charge`](crate::memcontrol::CgroupTree::swapout_charge),
//! [`CgroupTree::swap_uncharge`](crate::memcontrol::CgroupTree::swap_uncharge))
//! records, charges and pins in one call, as the kernel does; the map can
//! also be used on its own:
//!
//! ```
//! use memcg::memcontrol::CgroupTree;
//! use memcg::{SwapCgroup, SwapCgroupDesign, SwapEntry};
//!
//! let tree = CgroupTree::default();
//! let a = tree.mkdir("/a")?.memcg().unwrap();
//!
//! let owners = SwapCgroup::new(SwapCgroupDesign::default());
//! owners.swapon(0, 1024)?; // swap type 0: slots 0..1024, all id 0
//!
//! // A 4-page folio of a swapped out to slots 8..12.
//! let entry = SwapEntry::new(0, 8)?;
//! assert_eq!(owners.record(entry, a.id(), 4)?, 0); // returns the old id
//! let id = owners.lookup(SwapEntry::new(0, 10)?)?;
//! assert_eq!(tree.lookup(id).map(|m| m.path()), Some("/a".to_owned()));
//!
//! // The slots are freed: clear returns the owner, whom to uncharge.
//! assert_eq!(owners.clear(entry, 4)?, a.id());
//! assert_eq!(owners.lookup(SwapEntry::new(0, 10)?)?, 0);
//! assert!(owners.lookup(SwapEntry::new(0, 1024)?).is_err()); // past the device
//! owners.swapoff(0)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concurrency contract
//!
//! A folio's slot range is touched only by the folio's owner: under the
//! folio lock, or when nothing else can reach the entries (slot allocation
//! and final free). Ownership passes between threads through that external
//! synchronisation, so consecutive writers of one slot are ordered by
//! happens-before. What is *not* ordered: two neighbouring folios owned by
//! different threads, whose slots share a machine word (and a cache line),
//! and lookups from threads that own nothing. No design may let a write to
//! one slot clobber a neighbour; a lookup returns some id the slot held.
//! The batch as a whole is not atomic: a concurrent lookup may see part of a
//! folio recorded.
//!
//! # Designs
//!
//! All five live behind [`SwapCgroupMap`] and are picked by [`Design`]:
//!
//! | design       | origin                          | storage / slot | record of `nr` slots             |
//! |--------------|---------------------------------|----------------|----------------------------------|
//! | `locked`     | before the seed                 | 2 B            | lock + `nr` plain stores + unlock |
//! | `packed`     | the seed (v6.14)                | 2 B            | `nr` CAS loops on shared u32s    |
//! | `atomic-u16` | the seed's reviewers            | 2 B            | `nr` native 2-byte exchanges     |
//! | `cluster`    | swap table phase IV (2026)      | 2 B used clusters, ~0 unused | cluster lock + `nr` stores + unlock |
//! | `memcg`      | ours (default)                  | 2 B written pages, ~0 unused | `nr` plain stores, no RMW at all |
//!
//! # Why `memcg` needs no read-modify-write
//!
//! The seed emulates a 2-byte exchange with a 4-byte CAS so that a write to
//! one half of a word cannot clobber the other half. Its reviewers asked for
//! a native 2-byte exchange instead. Neither is needed:
//!
//! 1. *Neighbours.* Each slot is its own `AtomicU16`. A 2-byte store writes
//!    exactly those two bytes on every architecture Rust supports, so a
//!    neighbour's slot cannot be clobbered; there is no word to merge into.
//! 2. *The old value.* Only the owner writes a slot, and the previous owner's
//!    last write happens-before the current owner's access (the contract
//!    above). By coherence a plain `Relaxed` load therefore returns exactly
//!    the value the exchange would have returned. An exchange is only needed
//!    when two writers race on one slot, which the contract rules out. And
//!    with no exchange, release builds read only the old ids they return
//!    (the first slot for record, up to the first non-zero one for clear);
//!    debug builds read them all to check the contract.
//! 3. *Publication.* Lookups on other threads must see a recorded id only
//!    together with what the recorder did before (e.g. pinning the id so
//!    that it still resolves). One `Release` fence before the stores and an
//!    `Acquire` load in `lookup` give exactly that, at the cost of one
//!    barrier per call instead of one per slot (free on x86, one `dmb` on
//!    Arm instead of `nr`).
//!
//! So record and clear are loads and stores only: zero atomic RMWs per folio
//! against `nr` CAS loops for `packed` and `nr` exchanges for `atomic-u16`.
//!
//! # Why `memcg` is flat, and how it stays small
//!
//! Per-cluster arrays reached through a pointer table (the `cluster` design,
//! and our first prototype) cost a dependent load on every lookup; on random
//! lookups that measured about 40% slower than a flat array, at 1M and at
//! 16M slots alike. So `memcg` keeps one flat `AtomicU16` per slot, but in a
//! mapping the OS commits page by page on first write (the crate-private
//! `lazy_zeroed` module): address space for the whole device is reserved at
//! swapon, pages never
//! written read as zero and cost nothing, and a written page costs one OS
//! page (4 KiB: 2048 slots, four clusters). The OS's page fault is the lazy
//! allocation, so there is no user-space allocation race to get wrong. Dense
//! devices cost 2 B/slot plus one flag byte per page; a device with 1% of its
//! clusters in use, scattered, costs at most one page per used cluster
//! (0.08 B/slot). Pages stay committed until the map is dropped (swapoff of
//! the last user), like the kernel's map.
//!
//! # Devices and swapoff
//!
//! [`SwapCgroup`] is the per-type table (`swap_cgroup_ctrl[]`). It holds each
//! device's map in an `Arc`; [`SwapCgroup::device`] hands out a counted
//! reference, which is what hot paths keep (as `swap_info_struct` keeps its
//! map pointer), and the entry-based calls resolve the type with a load that
//! touches no shared cache line. `swapoff` detaches the map from the table;
//! callers still holding a reference keep a valid (detached) map, so swapoff
//! of a device in use is never undefined behaviour, and swapoff of one type
//! never disturbs users of another.

mod timing;

use std::fmt;

use timing::{NoProbe, Probe, Timing};
pub use timing::{SAMPLE_EVERY, SwapCgroupTimes};

use crate::errno::Errno;
use crate::lazy_zeroed::LazyZeroedU16;
use crate::mm_types::SWAPFILE_CLUSTER;
use crate::swapops::{MAX_SWAPFILES, SWP_OFFSET_MASK, SwapEntry};
use crate::sync::Arc;
use crate::sync::{ArcSlot, AtomicU16, AtomicU32, Mutex, Ordering, fence, lock};

/// Which implementation of the map to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Design {
    /// Before the seed: plain `u16` per slot, one lock per device.
    Locked,
    /// The seed: two ids per `AtomicU32`, a CAS loop per slot.
    Packed,
    /// The reviewers' alternative: one `AtomicU16` per slot, native exchange.
    AtomicU16,
    /// Swap table phase IV: per-cluster `u16` arrays under a cluster lock,
    /// allocated on first use and freed when the cluster's last id clears.
    Cluster,
    /// Ours, the default: a flat `AtomicU16` map committed page by page on
    /// first write, loads and stores only (see the module docs).
    #[default]
    Memcg,
}

// Baselines first: reports and charts list the designs in this order.
crate::named_enum!(Design {
    Locked => "locked",
    Packed => "packed",
    AtomicU16 => "atomic-u16",
    Cluster => "cluster",
    Memcg => "memcg",
}, unknown: UnknownDesign = UnknownDesign);

/// A design name that is not one of [`Design::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown swap_cgroup design {0:?} (expected locked, packed, atomic-u16, cluster or memcg)")]
pub struct UnknownDesign(pub String);

/// Why a swap_cgroup operation was refused. Nothing is changed when one is
/// returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwapCgroupError {
    /// The type is not a swap device type.
    #[error("swap type {ty} is not a swap device (MAX_SWAPFILES is {MAX_SWAPFILES})")]
    InvalidType {
        /// The type asked for.
        ty: u32,
    },
    /// `swapon` of a type that already has a map.
    #[error("swap type {ty} is already on")]
    AlreadyOn {
        /// The type asked for.
        ty: u32,
    },
    /// The type has no map: never switched on, or switched off.
    #[error("swap type {ty} is off")]
    DeviceOff {
        /// The type asked for.
        ty: u32,
    },
    /// The slot range does not lie inside the device.
    #[error("slots {offset}..{offset}+{nr} are outside the device's {max_pages} slots")]
    OutOfRange {
        /// First slot of the range.
        offset: u64,
        /// Number of slots in the range.
        nr: u32,
        /// Slots on the device.
        max_pages: u64,
    },
    /// A range of zero slots.
    #[error("a folio covers at least one swap slot (nr is 0)")]
    EmptyRange,
    /// A device size of zero, or larger than a swap entry can address.
    #[error("a swap device has 1..={} slots, not {max_pages}", SWP_OFFSET_MASK + 1)]
    InvalidSize {
        /// The size asked for.
        max_pages: u64,
    },
    /// The map could not be allocated.
    #[error("cannot allocate {bytes} bytes for the swap cgroup map")]
    NoMemory {
        /// Bytes asked for.
        bytes: u128,
    },
    /// Memory cgroups are disabled, so no device has a map to hand out.
    #[error("memory cgroups are disabled: swap devices have no cgroup map")]
    Disabled,
}

impl SwapCgroupError {
    /// The errno the kernel would return for the same request.
    pub fn errno(&self) -> Errno {
        match self {
            SwapCgroupError::AlreadyOn { .. } => Errno::EBUSY,
            SwapCgroupError::NoMemory { .. } => Errno::ENOMEM,
            SwapCgroupError::InvalidType { .. }
            | SwapCgroupError::DeviceOff { .. }
            | SwapCgroupError::OutOfRange { .. }
            | SwapCgroupError::EmptyRange
            | SwapCgroupError::InvalidSize { .. }
            | SwapCgroupError::Disabled => Errno::EINVAL,
        }
    }
}

/// The operations every design implements, on already-checked ranges.
///
/// Ranges are `offset..offset + nr` with `nr >= 1` and inside the map;
/// [`SwapCgroupMap`] checks that before calling in. Indexing stays
/// bounds-checked, so a violated precondition panics rather than corrupts.
///
/// Designs with locks take and release them through the [`Probe`], which
/// times them when the call is sampled (see [`timing`]).
trait IdMap {
    fn record(&self, offset: usize, id: u16, nr: usize, probe: &mut impl Probe) -> u16;
    fn clear(&self, offset: usize, nr: usize, probe: &mut impl Probe) -> u16;
    fn lookup(&self, offset: usize, probe: &mut impl Probe) -> u16;
    fn memory_bytes(&self) -> usize;
}

/// Folds the old ids of a range into the one id the operation returns,
/// checking the caller contract in debug builds.
trait OldIds {
    /// Whether the next old id must be read at all: always in debug builds
    /// (to check it), else only until the returned id is known.
    fn wants(&self) -> bool;
    /// Takes the next slot's old id.
    fn observe(&mut self, old: u16);
}

/// Folds the old ids of a `record` range: returns the first, and in debug
/// builds asserts that the rest equal it (the seed's `VM_BUG_ON`).
#[derive(Default)]
struct RecordedId(Option<u16>);

impl RecordedId {
    fn id(self) -> u16 {
        self.0.unwrap_or(0)
    }
}

impl OldIds for RecordedId {
    #[inline]
    fn wants(&self) -> bool {
        cfg!(debug_assertions) || self.0.is_none()
    }

    #[inline]
    fn observe(&mut self, old: u16) {
        let first = *self.0.get_or_insert(old);
        debug_assert_eq!(
            old, first,
            "swap_cgroup_record: folio's slots belong to different cgroups"
        );
    }
}

/// Folds the old ids of a `clear` range: leading zeros are tolerated, then
/// every slot must hold the first non-zero id, which is returned.
#[derive(Default)]
struct ClearedId(u16);

impl OldIds for ClearedId {
    #[inline]
    fn wants(&self) -> bool {
        cfg!(debug_assertions) || self.0 == 0
    }

    #[inline]
    fn observe(&mut self, old: u16) {
        if self.0 == 0 {
            self.0 = old;
        } else {
            debug_assert_eq!(
                old, self.0,
                "swap_cgroup_clear: folio's slots belong to different cgroups"
            );
        }
    }
}

/// Splits `offset..offset + nr` at cluster boundaries, calling
/// `f(cluster index, first slot in cluster, slot count)` for each piece.
#[inline]
fn for_each_cluster_piece(offset: usize, nr: usize, mut f: impl FnMut(usize, usize, usize)) {
    let end = offset + nr;
    let mut at = offset;
    while at < end {
        let slot = at % SWAPFILE_CLUSTER;
        let len = (SWAPFILE_CLUSTER - slot).min(end - at);
        f(at / SWAPFILE_CLUSTER, slot, len);
        at += len;
    }
}

/// Allocates a boxed slice of `len` elements, reporting failure instead of
/// aborting (a huge device size is bad input, not a reason to die).
fn try_alloc_slice<T>(
    len: usize,
    mut init: impl FnMut() -> T,
) -> Result<Box<[T]>, SwapCgroupError> {
    crate::idr::try_boxed_slice(len, &mut init).map_err(|_| SwapCgroupError::NoMemory {
        bytes: len as u128 * size_of::<T>() as u128,
    })
}

// ---------------------------------------------------------------------------
// locked: before the seed.

/// One `u16` per slot behind one lock per device.
struct LockedMap {
    ids: Mutex<Box<[u16]>>,
}

impl LockedMap {
    fn new(max_pages: usize) -> Result<Self, SwapCgroupError> {
        Ok(Self {
            ids: Mutex::new(try_alloc_slice(max_pages, || 0u16)?),
        })
    }
}

impl IdMap for LockedMap {
    #[inline]
    fn record(&self, offset: usize, id: u16, nr: usize, probe: &mut impl Probe) -> u16 {
        let mut ids = probe.lock(&self.ids);
        let mut old = RecordedId::default();
        for slot in &mut ids[offset..offset + nr] {
            old.observe(*slot);
            *slot = id;
        }
        probe.unlock(ids);
        old.id()
    }

    #[inline]
    fn clear(&self, offset: usize, nr: usize, probe: &mut impl Probe) -> u16 {
        let mut ids = probe.lock(&self.ids);
        let mut old = ClearedId::default();
        for slot in &mut ids[offset..offset + nr] {
            old.observe(*slot);
            *slot = 0;
        }
        probe.unlock(ids);
        old.0
    }

    #[inline]
    fn lookup(&self, offset: usize, probe: &mut impl Probe) -> u16 {
        let ids = probe.lock(&self.ids);
        let id = ids[offset];
        probe.unlock(ids);
        id
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + lock(&self.ids).len() * size_of::<u16>()
    }
}

// ---------------------------------------------------------------------------
// packed: the seed.

/// Ids per packed word (`ID_PER_SC`).
const IDS_PER_WORD: usize = 2;

/// Two ids per `AtomicU32`; slot `off` is in word `off / 2` at bit
/// `(off % 2) * 16`.
struct PackedMap {
    words: Box<[AtomicU32]>,
}

impl PackedMap {
    fn new(max_pages: usize) -> Result<Self, SwapCgroupError> {
        Ok(Self {
            words: try_alloc_slice(max_pages.div_ceil(IDS_PER_WORD), || AtomicU32::new(0))?,
        })
    }

    fn word_and_shift(&self, offset: usize) -> (&AtomicU32, u32) {
        (
            &self.words[offset / IDS_PER_WORD],
            (offset % IDS_PER_WORD) as u32 * 16,
        )
    }

    /// A 2-byte exchange emulated with a 4-byte CAS loop, as the seed does.
    fn xchg(&self, offset: usize, new_id: u16) -> u16 {
        let (word, shift) = self.word_and_shift(offset);
        // Relaxed: only a starting guess for the CAS, which re-validates it.
        let mut current = word.load(Ordering::Relaxed);
        loop {
            let old_id = (current >> shift) as u16;
            let next = (current & !(0xffff << shift)) | (u32::from(new_id) << shift);
            // AcqRel on success: the Release half pairs with the Acquire load
            // in `lookup` (publication); the Acquire half orders this owner
            // after whatever the neighbour published in the same word.
            match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return old_id,
                Err(actual) => current = actual,
            }
        }
    }
}

impl IdMap for PackedMap {
    #[inline]
    fn record(&self, offset: usize, id: u16, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = RecordedId::default();
        for slot in offset..offset + nr {
            old.observe(self.xchg(slot, id));
        }
        old.id()
    }

    #[inline]
    fn clear(&self, offset: usize, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = ClearedId::default();
        for slot in offset..offset + nr {
            old.observe(self.xchg(slot, 0));
        }
        old.0
    }

    #[inline]
    fn lookup(&self, offset: usize, _: &mut impl Probe) -> u16 {
        let (word, shift) = self.word_and_shift(offset);
        // Acquire: pairs with the successful CAS (AcqRel) in `xchg`.
        (word.load(Ordering::Acquire) >> shift) as u16
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.words.len() * size_of::<AtomicU32>()
    }
}

// ---------------------------------------------------------------------------
// atomic-u16: the reviewers' alternative.

/// One `AtomicU16` per slot, written with a native 2-byte exchange.
struct AtomicU16Map {
    ids: Box<[AtomicU16]>,
}

impl AtomicU16Map {
    fn new(max_pages: usize) -> Result<Self, SwapCgroupError> {
        Ok(Self {
            ids: try_alloc_slice(max_pages, || AtomicU16::new(0))?,
        })
    }
}

impl IdMap for AtomicU16Map {
    #[inline]
    fn record(&self, offset: usize, id: u16, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = RecordedId::default();
        for slot in &self.ids[offset..offset + nr] {
            // AcqRel: Release pairs with the Acquire load in `lookup`.
            old.observe(slot.swap(id, Ordering::AcqRel));
        }
        old.id()
    }

    #[inline]
    fn clear(&self, offset: usize, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = ClearedId::default();
        for slot in &self.ids[offset..offset + nr] {
            // AcqRel: Release pairs with the Acquire load in `lookup`.
            old.observe(slot.swap(0, Ordering::AcqRel));
        }
        old.0
    }

    #[inline]
    fn lookup(&self, offset: usize, _: &mut impl Probe) -> u16 {
        // Acquire: pairs with the exchange in `record`/`clear`.
        self.ids[offset].load(Ordering::Acquire)
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.ids.len() * size_of::<AtomicU16>()
    }
}

// ---------------------------------------------------------------------------
// cluster: swap table phase IV (2026).

/// One cluster's ids and how many of them are non-zero.
#[derive(Default)]
struct ClusterTable {
    ids: Option<Box<[u16; SWAPFILE_CLUSTER]>>,
    nr_set: usize,
}

impl ClusterTable {
    /// Writes `id` to `slots`, returning each old id to `observe`, and frees
    /// the array when the cluster's last id is cleared.
    fn write(&mut self, slots: std::ops::Range<usize>, id: u16, mut observe: impl FnMut(u16)) {
        if self.ids.is_none() {
            if id == 0 {
                slots.for_each(|_| observe(0));
                return;
            }
            self.ids = Some(Box::new([0; SWAPFILE_CLUSTER]));
        }
        let ids = self.ids.as_mut().expect("allocated above");
        for slot in &mut ids[slots] {
            let old = *slot;
            observe(old);
            match (old != 0, id != 0) {
                (false, true) => self.nr_set += 1,
                (true, false) => self.nr_set -= 1,
                _ => {}
            }
            *slot = id;
        }
        if self.nr_set == 0 {
            self.ids = None;
        }
    }
}

/// Per-cluster `u16` arrays, each behind its cluster's lock, allocated on
/// first use and freed when empty.
struct ClusterMap {
    clusters: Box<[Mutex<ClusterTable>]>,
}

impl ClusterMap {
    fn new(max_pages: usize) -> Result<Self, SwapCgroupError> {
        let nr_clusters = max_pages.div_ceil(SWAPFILE_CLUSTER);
        Ok(Self {
            clusters: try_alloc_slice(nr_clusters, || Mutex::new(ClusterTable::default()))?,
        })
    }
}

impl IdMap for ClusterMap {
    #[inline]
    fn record(&self, offset: usize, id: u16, nr: usize, probe: &mut impl Probe) -> u16 {
        let mut old = RecordedId::default();
        for_each_cluster_piece(offset, nr, |ci, slot, len| {
            let mut table = probe.lock(&self.clusters[ci]);
            table.write(slot..slot + len, id, |o| old.observe(o));
            probe.unlock(table);
        });
        old.id()
    }

    #[inline]
    fn clear(&self, offset: usize, nr: usize, probe: &mut impl Probe) -> u16 {
        let mut old = ClearedId::default();
        for_each_cluster_piece(offset, nr, |ci, slot, len| {
            let mut table = probe.lock(&self.clusters[ci]);
            table.write(slot..slot + len, 0, |o| old.observe(o));
            probe.unlock(table);
        });
        old.0
    }

    #[inline]
    fn lookup(&self, offset: usize, probe: &mut impl Probe) -> u16 {
        let table = probe.lock(&self.clusters[offset / SWAPFILE_CLUSTER]);
        let id = table
            .ids
            .as_ref()
            .map_or(0, |ids| ids[offset % SWAPFILE_CLUSTER]);
        probe.unlock(table);
        id
    }

    fn memory_bytes(&self) -> usize {
        let used = self
            .clusters
            .iter()
            .filter(|c| lock(c).ids.is_some())
            .count();
        size_of::<Self>()
            + self.clusters.len() * size_of::<Mutex<ClusterTable>>()
            + used * size_of::<[u16; SWAPFILE_CLUSTER]>()
    }
}

// ---------------------------------------------------------------------------
// memcg: ours.

/// One `AtomicU16` per slot in a flat array committed page by page on first
/// write; record and clear use loads and stores only (see the module docs).
struct MemcgMap {
    ids: LazyZeroedU16,
}

impl MemcgMap {
    fn new(max_pages: usize) -> Result<Self, SwapCgroupError> {
        let ids = LazyZeroedU16::new(max_pages).map_err(|_| SwapCgroupError::NoMemory {
            bytes: max_pages as u128 * 2,
        })?;
        Ok(Self { ids })
    }

    /// Writes `new_id` to `offset..offset + nr`, folding old ids into `old`.
    #[inline]
    fn store_range(&self, offset: usize, nr: usize, new_id: u16, old: &mut impl OldIds) {
        let range = offset..offset + nr;
        self.ids.note_write(range.clone());
        // Release: pairs with the Acquire load in `lookup`; a lookup that
        // reads one of the ids stored below also sees everything this thread
        // did before (pinning the id it records).
        fence(Ordering::Release);
        for slot in &self.ids.slots()[range] {
            // Relaxed: only the owner writes this slot, and the previous
            // owner's write happens-before this access (module docs), so the
            // load returns the current value; the store needs no ordering
            // beyond the fence above. With no exchange, old ids need not be
            // read at all once the returned one is known (release builds).
            if old.wants() {
                old.observe(slot.load(Ordering::Relaxed));
            }
            slot.store(new_id, Ordering::Relaxed);
        }
    }
}

impl IdMap for MemcgMap {
    #[inline]
    fn record(&self, offset: usize, id: u16, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = RecordedId::default();
        self.store_range(offset, nr, id, &mut old);
        old.id()
    }

    #[inline]
    fn clear(&self, offset: usize, nr: usize, _: &mut impl Probe) -> u16 {
        let mut old = ClearedId::default();
        self.store_range(offset, nr, 0, &mut old);
        old.0
    }

    #[inline]
    fn lookup(&self, offset: usize, _: &mut impl Probe) -> u16 {
        // Acquire: pairs with the Release fence in `store_range`.
        self.ids.slots()[offset].load(Ordering::Acquire)
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.ids.committed_bytes()
    }
}

// ---------------------------------------------------------------------------
// The public map.

enum Repr {
    Locked(LockedMap),
    Packed(PackedMap),
    AtomicU16(AtomicU16Map),
    Cluster(ClusterMap),
    Memcg(MemcgMap),
}

/// Static dispatch to the design: one predictable branch, and each arm can
/// be inlined, unlike a `dyn` call.
macro_rules! dispatch {
    ($repr:expr, $map:ident => $body:expr) => {
        match $repr {
            Repr::Locked($map) => $body,
            Repr::Packed($map) => $body,
            Repr::AtomicU16($map) => $body,
            Repr::Cluster($map) => $body,
            Repr::Memcg($map) => $body,
        }
    };
}

/// The slot → cgroup id map of one swap device, in one of the [`Design`]s.
///
/// Follows the concurrency contract in the module docs: a slot range is
/// written by one owner at a time; neighbouring ranges and lookups may run
/// concurrently from any thread. All methods take `&self`.
pub struct SwapCgroupMap {
    max_pages: u64,
    design: Design,
    repr: Repr,
    /// The owning table's timing, for maps a [`SwapCgroup`] made.
    timing: Option<std::sync::Arc<Timing>>,
}

impl SwapCgroupMap {
    /// A map of `max_pages` slots, every id 0.
    pub fn new(design: Design, max_pages: u64) -> Result<Self, SwapCgroupError> {
        if max_pages == 0 || max_pages > SWP_OFFSET_MASK + 1 {
            return Err(SwapCgroupError::InvalidSize { max_pages });
        }
        let len = usize::try_from(max_pages).map_err(|_| SwapCgroupError::NoMemory {
            bytes: u128::from(max_pages) * 2,
        })?;
        let repr = match design {
            Design::Locked => Repr::Locked(LockedMap::new(len)?),
            Design::Packed => Repr::Packed(PackedMap::new(len)?),
            Design::AtomicU16 => Repr::AtomicU16(AtomicU16Map::new(len)?),
            Design::Cluster => Repr::Cluster(ClusterMap::new(len)?),
            Design::Memcg => Repr::Memcg(MemcgMap::new(len)?),
        };
        Ok(Self {
            max_pages,
            design,
            repr,
            timing: None,
        })
    }

    /// Slots on the device.
    pub fn max_pages(&self) -> u64 {
        self.max_pages
    }

    /// The design this map uses.
    pub fn design(&self) -> Design {
        self.design
    }

    /// Sets slots `offset..offset + nr` (one folio) to `id`; returns the id
    /// they held. Debug builds assert that all `nr` old ids were equal.
    #[inline]
    pub fn record(&self, offset: u64, id: u16, nr: u32) -> Result<u16, SwapCgroupError> {
        let offset = self.check_range(offset, nr)?;
        let nr = nr as usize;
        Ok(match self.sampled() {
            Some(timing) => {
                timing.time(|p| dispatch!(&self.repr, m => m.record(offset, id, nr, p)))
            }
            None => dispatch!(&self.repr, m => m.record(offset, id, nr, &mut NoProbe)),
        })
    }

    /// Sets slots `offset..offset + nr` to 0; returns the id they held.
    /// Leading zeros are tolerated; debug builds assert that every slot from
    /// the first non-zero one on held that same id.
    #[inline]
    pub fn clear(&self, offset: u64, nr: u32) -> Result<u16, SwapCgroupError> {
        let offset = self.check_range(offset, nr)?;
        let nr = nr as usize;
        Ok(match self.sampled() {
            Some(timing) => timing.time(|p| dispatch!(&self.repr, m => m.clear(offset, nr, p))),
            None => dispatch!(&self.repr, m => m.clear(offset, nr, &mut NoProbe)),
        })
    }

    /// The id recorded for slot `offset` (0: none).
    #[inline]
    pub fn lookup(&self, offset: u64) -> Result<u16, SwapCgroupError> {
        let offset = self.check_range(offset, 1)?;
        Ok(match self.sampled() {
            Some(timing) => timing.time(|p| dispatch!(&self.repr, m => m.lookup(offset, p))),
            None => dispatch!(&self.repr, m => m.lookup(offset, &mut NoProbe)),
        })
    }

    /// The timing to add this call to, if it is one to time.
    #[inline]
    fn sampled(&self) -> Option<&Timing> {
        self.timing.as_deref().filter(|t| t.sample_now())
    }

    /// Bytes this map occupies now, tables and lazily allocated parts
    /// included.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>() - size_of::<Repr>() + dispatch!(&self.repr, m => m.memory_bytes())
    }

    #[inline]
    fn check_range(&self, offset: u64, nr: u32) -> Result<usize, SwapCgroupError> {
        if nr == 0 {
            return Err(SwapCgroupError::EmptyRange);
        }
        match offset.checked_add(u64::from(nr)) {
            // `max_pages` fits in usize (checked in `new`), so does `offset`.
            Some(end) if end <= self.max_pages => Ok(offset as usize),
            _ => Err(SwapCgroupError::OutOfRange {
                offset,
                nr,
                max_pages: self.max_pages,
            }),
        }
    }
}

impl fmt::Debug for SwapCgroupMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapCgroupMap")
            .field("design", &self.design)
            .field("max_pages", &self.max_pages)
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// The per-type table.

/// The swap cgroup maps of every swap type (`swap_cgroup_ctrl[]`).
///
/// `swapon`/`swapoff` are serialised by one mutex (`swap_cgroup_mutex`);
/// every other call is lock-free with respect to the table and follows the
/// design's own rules for the map.
pub struct SwapCgroup {
    design: Design,
    enabled: bool,
    devices: [ArcSlot<SwapCgroupMap>; MAX_SWAPFILES as usize],
    swapon_mutex: Mutex<()>,
    timing: std::sync::Arc<Timing>,
}

impl SwapCgroup {
    /// A table whose devices will use `design`.
    pub fn new(design: Design) -> Self {
        Self::with_mode(design, true)
    }

    /// The table when memory cgroups are disabled (`cgroup_disable=memory`):
    /// `swapon` allocates nothing, lookups return 0, records are ignored.
    #[cfg(test)]
    pub(crate) fn disabled() -> Self {
        Self::with_mode(Design::default(), false)
    }

    fn with_mode(design: Design, enabled: bool) -> Self {
        Self {
            design,
            enabled,
            devices: std::array::from_fn(|_| ArcSlot::empty()),
            swapon_mutex: Mutex::new(()),
            timing: std::sync::Arc::new(Timing::new()),
        }
    }

    /// Clears the timing sums and starts (or stops) timing one call in
    /// [`SAMPLE_EVERY`] per thread on every device, present and future;
    /// see [`SwapCgroup::times`].
    pub fn set_timing(&self, on: bool) {
        self.timing.set(on);
    }

    /// What the sampled calls measured since [`SwapCgroup::set_timing`].
    pub fn times(&self) -> SwapCgroupTimes {
        self.timing.snapshot()
    }

    /// The design new devices get.
    pub fn design(&self) -> Design {
        self.design
    }

    /// Whether memory cgroups are enabled.
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Allocates the map for swap type `ty` with `max_pages` slots, all 0.
    pub fn swapon(&self, ty: u32, max_pages: u64) -> Result<(), SwapCgroupError> {
        let slot = self.slot(ty)?;
        if !self.enabled {
            return Ok(());
        }
        let _serialise = lock(&self.swapon_mutex);
        if slot.with(|map| map.is_some()) {
            return Err(SwapCgroupError::AlreadyOn { ty });
        }
        let mut map = SwapCgroupMap::new(self.design, max_pages)?;
        map.timing = Some(self.timing.clone());
        slot.swap(Some(Arc::new(map)));
        Ok(())
    }

    /// Detaches the map of swap type `ty`. Holders of a [`SwapCgroup::device`]
    /// reference keep a valid map; it is freed when the last one goes.
    pub fn swapoff(&self, ty: u32) -> Result<(), SwapCgroupError> {
        let slot = self.slot(ty)?;
        if !self.enabled {
            return Ok(());
        }
        let _serialise = lock(&self.swapon_mutex);
        match slot.swap(None) {
            Some(_) => Ok(()),
            None => Err(SwapCgroupError::DeviceOff { ty }),
        }
    }

    /// A counted reference to the map of type `ty`, for callers that make
    /// many calls on one device (the swap device keeps one).
    pub fn device(&self, ty: u32) -> Result<Arc<SwapCgroupMap>, SwapCgroupError> {
        let slot = self.slot(ty)?;
        if !self.enabled {
            return Err(SwapCgroupError::Disabled);
        }
        slot.load_full().ok_or(SwapCgroupError::DeviceOff { ty })
    }

    /// `swap_cgroup_record`: see [`SwapCgroupMap::record`].
    pub fn record(&self, entry: SwapEntry, id: u16, nr: u32) -> Result<u16, SwapCgroupError> {
        self.with_map(entry, |map| map.record(entry.swp_offset(), id, nr))
    }

    /// `swap_cgroup_clear`: see [`SwapCgroupMap::clear`].
    pub fn clear(&self, entry: SwapEntry, nr: u32) -> Result<u16, SwapCgroupError> {
        self.with_map(entry, |map| map.clear(entry.swp_offset(), nr))
    }

    /// `lookup_swap_cgroup_id`: see [`SwapCgroupMap::lookup`]; 0 when memory
    /// cgroups are disabled.
    pub fn lookup(&self, entry: SwapEntry) -> Result<u16, SwapCgroupError> {
        self.with_map(entry, |map| map.lookup(entry.swp_offset()))
    }

    fn with_map(
        &self,
        entry: SwapEntry,
        f: impl FnOnce(&SwapCgroupMap) -> Result<u16, SwapCgroupError>,
    ) -> Result<u16, SwapCgroupError> {
        let ty = entry.swp_type();
        let slot = self.slot(ty)?;
        if !self.enabled {
            return Ok(0);
        }
        slot.with(|map| f(map.ok_or(SwapCgroupError::DeviceOff { ty })?))
    }

    fn slot(&self, ty: u32) -> Result<&ArcSlot<SwapCgroupMap>, SwapCgroupError> {
        self.devices
            .get(ty as usize)
            .ok_or(SwapCgroupError::InvalidType { ty })
    }
}

impl fmt::Debug for SwapCgroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<u32> = (0..MAX_SWAPFILES)
            .filter(|&ty| self.devices[ty as usize].with(|m| m.is_some()))
            .collect();
        f.debug_struct("SwapCgroup")
            .field("design", &self.design)
            .field("enabled", &self.enabled)
            .field("devices_on", &on)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn entry(ty: u32, offset: u64) -> SwapEntry {
        SwapEntry::new(ty, offset).unwrap()
    }

    #[test]
    fn design_names_round_trip() {
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>().unwrap(), d);
        }
        assert!("spinlock".parse::<Design>().is_err());
        assert_eq!(Design::default(), Design::Memcg);
    }

    #[test]
    fn record_lookup_clear_every_design() {
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 4 * SWAPFILE_CLUSTER as u64 + 3).unwrap();
            assert_eq!(map.lookup(7).unwrap(), 0, "{design}: zero-filled");
            assert_eq!(map.record(16, 5, 16).unwrap(), 0, "{design}");
            assert_eq!(map.record(32, 6, 1).unwrap(), 0, "{design}");
            for off in 16..32 {
                assert_eq!(map.lookup(off).unwrap(), 5, "{design}: slot {off}");
            }
            assert_eq!(map.lookup(15).unwrap(), 0, "{design}");
            assert_eq!(map.lookup(32).unwrap(), 6, "{design}");
            // Re-recording returns the old id (the seed's exchange semantics).
            assert_eq!(map.record(16, 9, 16).unwrap(), 5, "{design}");
            assert_eq!(map.clear(16, 16).unwrap(), 9, "{design}");
            assert_eq!(map.clear(32, 1).unwrap(), 6, "{design}");
            assert_eq!(map.lookup(16).unwrap(), 0, "{design}");
            // The last, partial cluster is usable to its last slot.
            let last = map.max_pages() - 1;
            assert_eq!(map.record(last, 3, 1).unwrap(), 0, "{design}");
            assert_eq!(map.lookup(last).unwrap(), 3, "{design}");
        }
    }

    #[test]
    fn ranges_across_cluster_boundaries() {
        let c = SWAPFILE_CLUSTER as u64;
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 3 * c).unwrap();
            assert_eq!(map.record(c - 2, 4, 4).unwrap(), 0, "{design}");
            for off in c - 2..c + 2 {
                assert_eq!(map.lookup(off).unwrap(), 4, "{design}: slot {off}");
            }
            assert_eq!(map.lookup(c - 3).unwrap(), 0);
            assert_eq!(map.lookup(c + 2).unwrap(), 0);
            assert_eq!(map.clear(c - 2, 4).unwrap(), 4, "{design}");
        }
    }

    #[test]
    fn clear_tolerates_leading_zeros() {
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 64).unwrap();
            map.record(10, 8, 6).unwrap();
            assert_eq!(map.clear(8, 8).unwrap(), 8, "{design}");
            assert_eq!(map.clear(0, 4).unwrap(), 0, "{design}: never recorded");
            for off in 0..64 {
                assert_eq!(map.lookup(off).unwrap(), 0);
            }
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    fn record_over_mixed_ids_is_a_bug() {
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 64).unwrap();
            map.record(0, 1, 1).unwrap();
            map.record(1, 2, 1).unwrap();
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| map.record(0, 3, 2)));
            assert!(result.is_err(), "{design}: VM_BUG_ON must fire");
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    fn clear_with_zero_after_an_id_is_a_bug() {
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 64).unwrap();
            map.record(0, 1, 1).unwrap();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| map.clear(0, 2)));
            assert!(result.is_err(), "{design}: trailing zero must be caught");
        }
    }

    #[test]
    fn bad_ranges_are_typed_errors() {
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, 100).unwrap();
            assert_eq!(map.record(0, 1, 0), Err(SwapCgroupError::EmptyRange));
            assert_eq!(map.clear(0, 0), Err(SwapCgroupError::EmptyRange));
            let oor = SwapCgroupError::OutOfRange {
                offset: 99,
                nr: 2,
                max_pages: 100,
            };
            assert_eq!(map.record(99, 1, 2), Err(oor.clone()));
            assert_eq!(map.clear(99, 2), Err(oor));
            assert!(matches!(
                map.lookup(100),
                Err(SwapCgroupError::OutOfRange { .. })
            ));
            assert!(matches!(
                map.record(u64::MAX, 1, 1),
                Err(SwapCgroupError::OutOfRange { .. })
            ));
            // Nothing changed.
            assert_eq!(map.lookup(99).unwrap(), 0);
        }
    }

    #[test]
    fn bad_sizes_are_typed_errors() {
        for design in Design::ALL {
            assert_eq!(
                SwapCgroupMap::new(design, 0).unwrap_err(),
                SwapCgroupError::InvalidSize { max_pages: 0 }
            );
            let too_big = SWP_OFFSET_MASK + 2;
            assert_eq!(
                SwapCgroupMap::new(design, too_big).unwrap_err().errno(),
                Errno::EINVAL
            );
            // Addressable, but no machine has the memory: ENOMEM, not abort.
            let err = SwapCgroupMap::new(design, SWP_OFFSET_MASK + 1).unwrap_err();
            assert_eq!(err.errno(), Errno::ENOMEM, "{design}: {err}");
        }
    }

    #[test]
    fn sampled_timing_sees_locks_only_where_designs_take_them() {
        for design in Design::ALL {
            let sc = SwapCgroup::new(design);
            sc.swapon(0, 4096).unwrap();
            // Timing off: nothing is sampled.
            sc.record(entry(0, 0), 1, 1).unwrap();
            sc.clear(entry(0, 0), 1).unwrap();
            assert_eq!(sc.times().sampled_calls, 0);
            // On, from a fresh thread (its own call count): exactly one
            // call in SAMPLE_EVERY is timed, the results are unchanged.
            sc.set_timing(true);
            let calls = 10 * SAMPLE_EVERY;
            std::thread::scope(|s| {
                s.spawn(|| {
                    for i in 0..calls / 2 {
                        let e = entry(0, 4 * i);
                        assert_eq!(sc.record(e, 7, 4).unwrap(), 0);
                        assert_eq!(sc.clear(e, 4).unwrap(), 7);
                    }
                });
            });
            let times = sc.times();
            assert_eq!(times.sampled_calls, calls / SAMPLE_EVERY, "{design}");
            assert!(times.in_map_ns >= times.lock_wait_ns + times.lock_held_ns);
            let locks = matches!(design, Design::Locked | Design::Cluster);
            assert_eq!(times.lock_held_ns == 0, !locks || times.in_map_ns == 0);
            if !locks {
                assert_eq!(times.lock_wait_ns, 0, "{design}");
            }
            // Off again: the sums are cleared and stay so.
            sc.set_timing(false);
            for i in 0..2 * SAMPLE_EVERY {
                sc.lookup(entry(0, i)).unwrap();
            }
            assert_eq!(
                sc.times(),
                SwapCgroupTimes {
                    clock_overhead_ns: times.clock_overhead_ns,
                    ..SwapCgroupTimes::default()
                }
            );
        }
    }

    #[test]
    fn table_error_paths() {
        let sc = SwapCgroup::new(Design::Memcg);
        let e = entry(2, 5);
        assert_eq!(sc.lookup(e), Err(SwapCgroupError::DeviceOff { ty: 2 }));
        assert_eq!(
            sc.record(e, 1, 1),
            Err(SwapCgroupError::DeviceOff { ty: 2 })
        );
        assert_eq!(sc.swapoff(2), Err(SwapCgroupError::DeviceOff { ty: 2 }));
        sc.swapon(2, 10).unwrap();
        assert_eq!(sc.swapon(2, 10), Err(SwapCgroupError::AlreadyOn { ty: 2 }));
        assert_eq!(sc.swapon(2, 10).unwrap_err().errno(), Errno::EBUSY);
        assert_eq!(
            sc.swapon(MAX_SWAPFILES, 10),
            Err(SwapCgroupError::InvalidType { ty: MAX_SWAPFILES })
        );
        let special = entry(MAX_SWAPFILES + 1, 0);
        assert_eq!(
            sc.lookup(special),
            Err(SwapCgroupError::InvalidType {
                ty: MAX_SWAPFILES + 1
            })
        );
        assert!(matches!(
            sc.lookup(entry(2, 10)),
            Err(SwapCgroupError::OutOfRange { .. })
        ));
        assert_eq!(sc.record(e, 7, 1).unwrap(), 0);
        assert_eq!(sc.lookup(e).unwrap(), 7);
        assert_eq!(sc.clear(e, 1).unwrap(), 7);
        sc.swapoff(2).unwrap();
        assert_eq!(sc.lookup(e), Err(SwapCgroupError::DeviceOff { ty: 2 }));
        // The type can be switched on again, zero-filled.
        sc.swapon(2, 20).unwrap();
        assert_eq!(sc.lookup(entry(2, 15)).unwrap(), 0);
    }

    #[test]
    fn swapoff_of_a_device_in_use_keeps_holders_valid() {
        for design in Design::ALL {
            let sc = SwapCgroup::new(design);
            sc.swapon(0, 64).unwrap();
            sc.swapon(1, 64).unwrap();
            let held = sc.device(0).unwrap();
            held.record(3, 9, 1).unwrap();
            sc.swapoff(0).unwrap();
            // The holder's map is detached but valid.
            assert_eq!(held.lookup(3).unwrap(), 9);
            assert_eq!(held.clear(3, 1).unwrap(), 9);
            // Other devices are untouched.
            assert_eq!(sc.record(entry(1, 3), 4, 1).unwrap(), 0);
            assert_eq!(sc.lookup(entry(1, 3)).unwrap(), 4);
            assert_eq!(
                sc.device(0).unwrap_err(),
                SwapCgroupError::DeviceOff { ty: 0 }
            );
        }
    }

    #[test]
    fn disabled_mode_records_nothing() {
        let sc = SwapCgroup::disabled();
        assert!(!sc.is_enabled());
        sc.swapon(0, 1 << 20).unwrap();
        sc.swapon(0, 1 << 20).unwrap();
        assert_eq!(sc.record(entry(0, 1), 5, 1).unwrap(), 0);
        assert_eq!(sc.lookup(entry(0, 1)).unwrap(), 0);
        assert_eq!(sc.clear(entry(0, 1), 1).unwrap(), 0);
        assert_eq!(sc.device(0).unwrap_err(), SwapCgroupError::Disabled);
        sc.swapoff(0).unwrap();
        assert_eq!(
            sc.swapon(MAX_SWAPFILES, 1),
            Err(SwapCgroupError::InvalidType { ty: MAX_SWAPFILES })
        );
        assert!(format!("{sc:?}").contains("enabled: false"));
    }

    #[test]
    fn lazy_designs_allocate_only_what_is_used() {
        let clusters = 100u64;
        let pages = clusters * SWAPFILE_CLUSTER as u64;
        let packed = SwapCgroupMap::new(Design::Packed, pages)
            .unwrap()
            .memory_bytes();
        for design in [Design::Cluster, Design::Memcg] {
            let map = SwapCgroupMap::new(design, pages).unwrap();
            let empty = map.memory_bytes();
            assert!(
                empty * 20 < packed,
                "{design}: {empty} B empty vs packed {packed} B"
            );
            // Lookups allocate nothing.
            assert_eq!(map.lookup(pages - 1).unwrap(), 0);
            assert_eq!(map.memory_bytes(), empty, "{design}");
            map.record(5, 1, 1).unwrap();
            let one = map.memory_bytes() - empty;
            assert!(
                one > 0 && one <= 4096 * 4,
                "{design}: one slot costs {one} B"
            );
            map.record(6, 1, 1).unwrap();
            assert_eq!(
                map.memory_bytes() - empty,
                one,
                "{design}: same cluster, no more memory"
            );
        }
        // `cluster` frees an emptied cluster; `memcg` keeps it until drop.
        let cluster = SwapCgroupMap::new(Design::Cluster, pages).unwrap();
        let empty = cluster.memory_bytes();
        cluster.record(5, 1, 1).unwrap();
        cluster.clear(5, 1).unwrap();
        assert_eq!(cluster.memory_bytes(), empty);
    }

    #[test]
    fn dense_memory_close_to_two_bytes_per_slot() {
        let pages = 64 * SWAPFILE_CLUSTER as u64;
        for design in Design::ALL {
            let map = SwapCgroupMap::new(design, pages).unwrap();
            for off in (0..pages).step_by(SWAPFILE_CLUSTER) {
                map.record(off, 1, 1).unwrap();
            }
            let per_slot = map.memory_bytes() as f64 / pages as f64;
            assert!(
                (2.0..2.05).contains(&per_slot),
                "{design}: {per_slot} B/slot"
            );
        }
    }
}
