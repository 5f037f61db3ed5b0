//! What a memory cgroup's own structures cost, charged to its parent
//! (`mem_cgroup_css_alloc` in mm/memcontrol.c, v6.14: `mem_cgroup_alloc`
//! runs under `set_active_memcg(parent)`, so its `__GFP_ACCOUNT`
//! allocations are charged to the parent's object cgroup).
//!
//! # The v6.14 allocations (x86-64, one NUMA node, a distribution config)
//!
//! The statistic arrays are sized by the kernel's tables: 32 node items
//! (`memcg_node_stat_items`, with swap, NUMA balancing and hugetlb), 7
//! memcg items (`memcg_stat_items`), so `MEMCG_VMSTAT_SIZE` 39, and 29
//! events (`memcg_vm_event_stat`, with `CONFIG_MEMCG_V1`, swap, zswap, THP
//! and NUMA balancing). Each counter is 8 bytes.
//!
//! | allocation | how | bytes |
//! |---|---|---|
//! | `memcg_vmstats_percpu` | per CPU | 3 words + 2 × (39 + 29) counters = 1112, cache-line aligned: **1152** |
//! | `lruvec_stats_percpu` | per CPU, per node | 2 × 32 counters: **512** |
//! | `memcg1_events_percpu` | per CPU | 1 + `MEM_CGROUP_NTARGETS` (2) words: **24** |
//! | `memcg_vmstats` | kmalloc | 3 × (39 + 29) counters + 8 = 1640: kmalloc-2k, **2048** |
//! | `lruvec_stats` | kmalloc, per node | 3 × 32 counters = 768: kmalloc-1k, **1024** |
//!
//! `struct mem_cgroup` itself and its `mem_cgroup_per_node` are allocated
//! without `__GFP_ACCOUNT`, and so are not charged.
//!
//! A per-CPU allocation of `size` bytes charges `pcpu_obj_full_size`: the
//! size on every possible CPU plus an object-cgroup pointer (8 bytes) per
//! 4 bytes, `size × (CPUs + 2)`; its bytes count in `percpu`. A kmalloc'd
//! object charges its slab size plus its object-cgroup pointer
//! (`obj_full_size`); its bytes count in `slab_unreclaimable`. Both go
//! through the parent's object cgroup, byte by byte (the kernel's
//! `obj_cgroup_charge`, [`super::kmem`]), so `kernel` shows the pages
//! behind them.
//!
//! Per memory cgroup that is 1688 bytes per CPU, charged × (CPUs + 2), and
//! 3088 bytes of slab: 9840 bytes on 2 CPUs.
//!
//! # Calibration
//!
//! Booted 6.12 and 7.3 kernels on 2 CPUs charge about 14K and 17K per
//! child memory cgroup to its parent (issue 21). The allocations above
//! account for 9840 bytes of the 6.12 figure; the other 4496 bytes (for
//! 14 KiB in all on 2 CPUs) are not traced to a v6.14 allocation. They are
//! charged as [`MemcgMetadata::other_bytes`], counted in `kernel` only, so
//! that the default matches the booted kernels; they do not scale with
//! the CPUs. [`CgroupTree::set_memcg_metadata`] replaces the whole model.

use super::{CgroupTree, ChargeError, MemCgroup, MemcgStat, ObjCgroup};
use crate::sync::Arc;

/// Bytes of `memcg_vmstats_percpu`, per CPU.
const VMSTATS_PERCPU: u64 = 1152;
/// Bytes of `lruvec_stats_percpu`, per CPU and node.
const LRUVEC_STATS_PERCPU: u64 = 512;
/// Bytes of `memcg1_events_percpu`, per CPU.
const EVENTS_PERCPU: u64 = 24;
/// Slab bytes of `memcg_vmstats` (kmalloc-2k).
const VMSTATS_SLAB: u64 = 2048;
/// Slab bytes of `lruvec_stats` (kmalloc-1k), per node.
const LRUVEC_STATS_SLAB: u64 = 1024;
/// An object cgroup pointer, charged with each accounted object.
const OBJCG_POINTER: u64 = 8;
/// `PCPU_MIN_ALLOC_SIZE`: per-CPU memory keeps an object cgroup pointer
/// per this many bytes.
const PCPU_MIN_ALLOC_SIZE: u64 = 4;
/// The part of the booted kernels' charge not traced to an allocation
/// (module docs, "Calibration").
const CALIBRATION_BYTES: u64 = 4496;

/// What each new memory cgroup charges to its parent for its own
/// structures, by where it shows in the parent's `memory.stat` (all of it
/// in `kernel`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemcgMetadata {
    /// Per-CPU statistics (`percpu`).
    pub percpu_bytes: u64,
    /// kmalloc'd statistics (`slab_unreclaimable`).
    pub slab_bytes: u64,
    /// The rest (`kernel` only).
    pub other_bytes: u64,
}

impl MemcgMetadata {
    /// Nothing charged.
    pub const NONE: Self = Self {
        percpu_bytes: 0,
        slab_bytes: 0,
        other_bytes: 0,
    };

    /// v6.14's charge on a machine of `nr_cpus` CPUs and `nr_nodes` nodes,
    /// calibrated to the booted kernels (module docs): 14336 bytes on 2
    /// CPUs and one node, 1688 more per CPU.
    pub fn v6_14(nr_cpus: u32, nr_nodes: usize) -> Self {
        let nodes = nr_nodes as u64;
        let percpu =
            |size: u64| size * u64::from(nr_cpus) + size / PCPU_MIN_ALLOC_SIZE * OBJCG_POINTER;
        let slab = |size: u64| size + OBJCG_POINTER;
        Self {
            percpu_bytes: percpu(VMSTATS_PERCPU)
                + nodes * percpu(LRUVEC_STATS_PERCPU)
                + percpu(EVENTS_PERCPU),
            slab_bytes: slab(VMSTATS_SLAB) + nodes * slab(LRUVEC_STATS_SLAB),
            other_bytes: CALIBRATION_BYTES,
        }
    }

    /// `bytes` in all, counted as per-CPU memory (an override of the
    /// model, as `--memcg-metadata` gives it).
    pub fn percpu(bytes: u64) -> Self {
        Self {
            percpu_bytes: bytes,
            ..Self::NONE
        }
    }

    /// Bytes in all.
    pub fn total_bytes(&self) -> u64 {
        self.percpu_bytes + self.slab_bytes + self.other_bytes
    }
}

/// A memory cgroup's metadata as charged: to the object cgroup that was
/// its parent's when it was made (which follows the parent's offline to
/// its nearest online ancestor), given back when it is released.
pub(super) struct MetadataCharge {
    objcg: Arc<ObjCgroup>,
    bytes: MemcgMetadata,
}

impl CgroupTree {
    /// Charges `metadata` to `parent`'s object cgroup, reclaiming (and
    /// OOM-killing) like any charge; nothing stays charged on failure.
    pub(super) fn charge_metadata(
        &self,
        parent: &MemCgroup,
        metadata: MemcgMetadata,
    ) -> Result<Option<MetadataCharge>, ChargeError> {
        if metadata.total_bytes() == 0 {
            return Ok(None);
        }
        let objcg = parent.obj_cgroup();
        let parts = [
            (metadata.percpu_bytes, Some(MemcgStat::Percpu)),
            (metadata.slab_bytes, Some(MemcgStat::SlabUnreclaimable)),
            (metadata.other_bytes, None),
        ];
        for (i, &(bytes, stat)) in parts.iter().enumerate() {
            if let Err(e) = self.charge_kernel_bytes(&objcg, bytes, stat) {
                for &(bytes, stat) in &parts[..i] {
                    objcg.uncharge_kernel_bytes(bytes, stat);
                }
                return Err(e);
            }
        }
        Ok(Some(MetadataCharge {
            objcg,
            bytes: metadata,
        }))
    }
}

impl Drop for MetadataCharge {
    fn drop(&mut self) {
        let m = self.bytes;
        self.objcg
            .uncharge_kernel_bytes(m.percpu_bytes, Some(MemcgStat::Percpu));
        self.objcg
            .uncharge_kernel_bytes(m.slab_bytes, Some(MemcgStat::SlabUnreclaimable));
        self.objcg.uncharge_kernel_bytes(m.other_bytes, None);
    }
}
