//! The names of what a memory cgroup counts: memory events
//! (`memory.events`), page states and vm events (`memory.stat`), in the
//! kernel's order (mm/memcontrol.c `memory_stats[]`, `memcg_vm_event_stat[]`,
//! v6.14 on an x86-64 distribution config: swap, zswap, THP and NUMA
//! balancing on, hugetlb accounting off).
//!
//! Every key the kernel prints has a variant, so `memory.stat` shows all of
//! them; those whose mechanism the project does not have yet stay 0.

use crate::mm_types::PAGE_SIZE;

/// Memory events (`enum memcg_memory_event`), in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemcgEvent {
    /// Reclaimed below `memory.low` protection.
    Low,
    /// Usage went over `memory.high`.
    High,
    /// A charge hit `memory.max`.
    Max,
    /// The OOM path was entered.
    Oom,
    /// A task was OOM-killed.
    OomKill,
    /// A cgroup was OOM-killed as a group.
    OomGroupKill,
    /// Swap usage went over `memory.swap.high`.
    SwapHigh,
    /// A swap charge hit `memory.swap.max`.
    SwapMax,
    /// A swap-out failed (no slot or over `memory.swap.max`).
    SwapFail,
}

impl MemcgEvent {
    /// Every event, `memory.events` ones then `memory.swap.events` ones.
    pub const ALL: [MemcgEvent; 9] = [
        MemcgEvent::Low,
        MemcgEvent::High,
        MemcgEvent::Max,
        MemcgEvent::Oom,
        MemcgEvent::OomKill,
        MemcgEvent::OomGroupKill,
        MemcgEvent::SwapHigh,
        MemcgEvent::SwapMax,
        MemcgEvent::SwapFail,
    ];

    /// The key in its events file.
    pub const fn name(self) -> &'static str {
        match self {
            MemcgEvent::Low => "low",
            MemcgEvent::High | MemcgEvent::SwapHigh => "high",
            MemcgEvent::Max | MemcgEvent::SwapMax => "max",
            MemcgEvent::Oom => "oom",
            MemcgEvent::OomKill => "oom_kill",
            MemcgEvent::OomGroupKill => "oom_group_kill",
            MemcgEvent::SwapFail => "fail",
        }
    }

    /// Whether it belongs in `memory.swap.events`.
    pub const fn is_swap(self) -> bool {
        matches!(
            self,
            MemcgEvent::SwapHigh | MemcgEvent::SwapMax | MemcgEvent::SwapFail
        )
    }

    /// Its index in [`MemcgEvent::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

/// How a state's stored value turns into what `memory.stat` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatUnit {
    /// Pages, printed as bytes.
    Pages,
    /// Bytes.
    Bytes,
    /// A count, printed as is.
    Count,
}

impl StatUnit {
    /// The factor from the stored value to the printed one.
    pub const fn bytes(self) -> u64 {
        match self {
            StatUnit::Pages => PAGE_SIZE,
            StatUnit::Bytes | StatUnit::Count => 1,
        }
    }
}

macro_rules! memcg_stats {
    ($($(#[$doc:meta])* $variant:ident = $key:literal, $unit:ident;)*) => {
        /// Page states kept per memory cgroup (`memory_stats[]`), in
        /// `memory.stat` order, then [`MemcgStat::Swap`], which v2 does not
        /// print (`memory.swap.current` is its interface).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum MemcgStat {
            $($(#[$doc])* $variant,)*
            /// Pages on swap (`MEMCG_SWAP`).
            Swap,
        }

        impl MemcgStat {
            /// Every state, in order.
            pub const ALL: &'static [MemcgStat] = &[$(MemcgStat::$variant,)* MemcgStat::Swap];

            /// The `memory.stat` key, or `None` for states v2 does not print.
            pub const fn key(self) -> Option<&'static str> {
                match self {
                    $(MemcgStat::$variant => Some($key),)*
                    MemcgStat::Swap => None,
                }
            }

            /// How the stored value prints.
            pub const fn unit(self) -> StatUnit {
                match self {
                    $(MemcgStat::$variant => StatUnit::$unit,)*
                    MemcgStat::Swap => StatUnit::Pages,
                }
            }
        }
    };
}

memcg_stats! {
    /// Anonymous memory.
    Anon = "anon", Pages;
    /// Page cache.
    File = "file", Pages;
    /// Kernel memory of every kind.
    Kernel = "kernel", Pages;
    /// Kernel stacks.
    KernelStack = "kernel_stack", Pages;
    /// Page tables.
    Pagetables = "pagetables", Pages;
    /// Secondary (KVM, IOMMU) page tables.
    SecPagetables = "sec_pagetables", Pages;
    /// Per-cpu allocations.
    Percpu = "percpu", Bytes;
    /// Network buffers.
    Sock = "sock", Pages;
    /// vmalloc memory.
    Vmalloc = "vmalloc", Pages;
    /// Shared memory and tmpfs.
    Shmem = "shmem", Pages;
    /// Compressed bytes in zswap.
    ZswapBytes = "zswap", Bytes;
    /// Pages stored in zswap.
    Zswapped = "zswapped", Pages;
    /// Page cache mapped into page tables.
    FileMapped = "file_mapped", Pages;
    /// Dirty page cache.
    FileDirty = "file_dirty", Pages;
    /// Page cache under writeback.
    FileWriteback = "file_writeback", Pages;
    /// Pages in the swap cache.
    Swapcached = "swapcached", Pages;
    /// Anonymous transparent huge pages.
    AnonThp = "anon_thp", Pages;
    /// File transparent huge pages.
    FileThp = "file_thp", Pages;
    /// Shmem transparent huge pages.
    ShmemThp = "shmem_thp", Pages;
    /// Inactive anonymous LRU.
    InactiveAnon = "inactive_anon", Pages;
    /// Active anonymous LRU.
    ActiveAnon = "active_anon", Pages;
    /// Inactive file LRU.
    InactiveFile = "inactive_file", Pages;
    /// Active file LRU.
    ActiveFile = "active_file", Pages;
    /// Unevictable LRU.
    Unevictable = "unevictable", Pages;
    /// Reclaimable slab.
    SlabReclaimable = "slab_reclaimable", Bytes;
    /// Unreclaimable slab.
    SlabUnreclaimable = "slab_unreclaimable", Bytes;
    /// Refaults of anonymous pages.
    WorkingsetRefaultAnon = "workingset_refault_anon", Count;
    /// Refaults of file pages.
    WorkingsetRefaultFile = "workingset_refault_file", Count;
    /// Refaulted anonymous pages activated at once.
    WorkingsetActivateAnon = "workingset_activate_anon", Count;
    /// Refaulted file pages activated at once.
    WorkingsetActivateFile = "workingset_activate_file", Count;
    /// Refaulted anonymous pages that were part of the workingset.
    WorkingsetRestoreAnon = "workingset_restore_anon", Count;
    /// Refaulted file pages that were part of the workingset.
    WorkingsetRestoreFile = "workingset_restore_file", Count;
    /// Shadow nodes reclaimed.
    WorkingsetNodereclaim = "workingset_nodereclaim", Count;
    /// Pages demoted by kswapd.
    PgdemoteKswapd = "pgdemote_kswapd", Count;
    /// Pages demoted by direct reclaim.
    PgdemoteDirect = "pgdemote_direct", Count;
    /// Pages demoted by khugepaged.
    PgdemoteKhugepaged = "pgdemote_khugepaged", Count;
    /// Pages promoted by NUMA balancing.
    PgpromoteSuccess = "pgpromote_success", Count;
}

impl MemcgStat {
    /// Its index in [`MemcgStat::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

macro_rules! vm_events {
    ($($(#[$doc:meta])* $variant:ident = $key:literal;)*) => {
        /// Event counts kept per memory cgroup (`memcg_vm_event_stat[]`),
        /// in `memory.stat` order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum VmEvent {
            $($(#[$doc])* $variant,)*
        }

        impl VmEvent {
            /// Every event, in order.
            pub const ALL: &'static [VmEvent] = &[$(VmEvent::$variant,)*];

            /// The `memory.stat` key.
            pub const fn key(self) -> &'static str {
                match self {
                    $(VmEvent::$variant => $key,)*
                }
            }
        }
    };
}

vm_events! {
    /// Pages read from swap.
    Pswpin = "pswpin";
    /// Pages written to swap.
    Pswpout = "pswpout";
    /// Pages scanned by kswapd.
    PgscanKswapd = "pgscan_kswapd";
    /// Pages scanned by direct (and memory cgroup) reclaim.
    PgscanDirect = "pgscan_direct";
    /// Pages scanned by khugepaged.
    PgscanKhugepaged = "pgscan_khugepaged";
    /// Pages reclaimed by kswapd.
    PgstealKswapd = "pgsteal_kswapd";
    /// Pages reclaimed by direct (and memory cgroup) reclaim.
    PgstealDirect = "pgsteal_direct";
    /// Pages reclaimed by khugepaged.
    PgstealKhugepaged = "pgsteal_khugepaged";
    /// Page faults.
    Pgfault = "pgfault";
    /// Major (I/O) page faults.
    Pgmajfault = "pgmajfault";
    /// Pages scanned on the active lists.
    Pgrefill = "pgrefill";
    /// Pages moved to an active list.
    Pgactivate = "pgactivate";
    /// Pages moved to an inactive list.
    Pgdeactivate = "pgdeactivate";
    /// Pages marked lazily freeable (`MADV_FREE`).
    Pglazyfree = "pglazyfree";
    /// Lazily freeable pages reclaimed.
    Pglazyfreed = "pglazyfreed";
    /// Zero-filled pages "read" from swap (only their zero bit; v6.12+).
    SwpinZero = "swpin_zero";
    /// Zero-filled pages swapped out without being written (v6.12+).
    SwpoutZero = "swpout_zero";
    /// Pages read back from zswap.
    Zswpin = "zswpin";
    /// Pages stored in zswap.
    Zswpout = "zswpout";
    /// Pages written back from zswap to swap.
    Zswpwb = "zswpwb";
    /// Transparent huge pages allocated at fault.
    ThpFaultAlloc = "thp_fault_alloc";
    /// Transparent huge pages collapsed by khugepaged.
    ThpCollapseAlloc = "thp_collapse_alloc";
    /// Transparent huge pages swapped out whole.
    ThpSwpout = "thp_swpout";
    /// Transparent huge pages split before swap-out.
    ThpSwpoutFallback = "thp_swpout_fallback";
    /// Pages migrated by NUMA balancing.
    NumaPagesMigrated = "numa_pages_migrated";
    /// PTEs updated by NUMA balancing.
    NumaPteUpdates = "numa_pte_updates";
    /// NUMA hinting faults.
    NumaHintFaults = "numa_hint_faults";
}

impl VmEvent {
    /// Its index in [`VmEvent::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_the_lists() {
        for (i, s) in MemcgStat::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
        for (i, e) in VmEvent::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
        for (i, e) in MemcgEvent::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
        assert_eq!(MemcgStat::ALL.len(), 38);
        assert_eq!(VmEvent::ALL.len(), 27);
    }
}
