//! The names of what a memory cgroup counts: memory events
//! (`memory.events`), page states and vm events (`memory.stat`), in the
//! kernel's order (mm/memcontrol.c `memory_stats[]`, `memcg_vm_event_stat[]`,
//! v6.14 on an x86-64 distribution config: swap, zswap, THP and NUMA
//! balancing on, hugetlb accounting off).
//!
//! Every key the kernel prints has a variant, so `memory.stat` shows all of
//! them; those whose mechanism the project does not have yet stay 0.
//!
//! # Units
//!
//! Each statistic is kept in its own unit, which [`MemcgStat::unit`] gives
//! and each variant's docs state:
//!
//! - pages ([`StatUnit::Pages`]) for the page states: `anon`, `file`,
//!   `kernel`, `shmem`, `zswapped`, `file_dirty`, the LRU lists, ... —
//!   `memory.stat` prints them in bytes (× [`PAGE_SIZE`]);
//! - bytes ([`StatUnit::Bytes`]) for `percpu`, `zswap` (compressed bytes),
//!   `slab_reclaimable` and `slab_unreclaimable`;
//! - counts ([`StatUnit::Count`]) for `workingset_*`, `pgdemote_*` and
//!   `pgpromote_success`.
//!
//! [`MemCgroup::stat`] returns the stored value; multiply by
//! [`StatUnit::bytes`] for bytes, as `memory.stat` does. The vm events
//! ([`VmEvent`]: `pgscan_*`, `pswpin`, `zswpout`, ...) count pages or
//! events, as each one's docs say, and the memory events ([`MemcgEvent`],
//! `memory.events`) count occurrences.
//!
//! The counts themselves ([`Counts`]) are relaxed atomics per memory
//! cgroup: events count locally and hierarchically on the cgroup and its
//! ancestors below the root, statistics and vm events hierarchically at
//! every level (v2's `memory.stat`), so a removed cgroup's pages still
//! show in its parent. Statistics and vm events, counted on every page,
//! are split per thread slot and summed when read (the kernel's per-CPU
//! `memcg_vmstats_percpu`, without its deferred flush: every level is
//! counted at once). A reader may see one level, or one slot, updated
//! before another; nothing is published through them.

use super::MemCgroup;
use crate::mm_types::PAGE_SIZE;
use crate::percpu::PerCpuArray;
use crate::sync::{AtomicU64, Ordering};

/// A memory cgroup's event and statistic counts, indexed by the enums'
/// `index()`.
pub(crate) struct Counts {
    events: [AtomicU64; MemcgEvent::ALL.len()],
    events_local: [AtomicU64; MemcgEvent::ALL.len()],
    /// Hierarchical: includes every descendant, dead or alive. Split per
    /// thread: a page's charge, swap-out and fault each count several,
    /// at every level, and threads in one cgroup would otherwise bounce
    /// these lines on every page (the kernel keeps them per CPU too).
    /// Signed values in two's complement.
    stats: PerCpuArray,
    vm_events: PerCpuArray,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            events_local: std::array::from_fn(|_| AtomicU64::new(0)),
            stats: PerCpuArray::new(MemcgStat::ALL.len()),
            vm_events: PerCpuArray::new(VmEvent::ALL.len()),
        }
    }
}

impl MemCgroup {
    /// A hierarchical event count (`memory.events`, `memory.swap.events`).
    pub fn event(&self, event: MemcgEvent) -> u64 {
        self.acct.counts.events[event.index()].load(Ordering::Relaxed)
    }

    /// A local event count (`memory.events.local`).
    pub(crate) fn event_local(&self, event: MemcgEvent) -> u64 {
        self.acct.counts.events_local[event.index()].load(Ordering::Relaxed)
    }

    /// A hierarchical statistic (this cgroup and its descendants, live or
    /// not) in its own unit, [`MemcgStat::unit`]: pages for most, bytes for
    /// `percpu`, `zswap` and `slab_*`, a count for `workingset_*` (module
    /// docs).
    pub fn stat(&self, stat: MemcgStat) -> i64 {
        self.acct.counts.stats.sum(stat.index()) as i64
    }

    /// A hierarchical event count of `memory.stat` (of pages or of
    /// events, as [`VmEvent`]'s variants say).
    pub fn vm_event(&self, event: VmEvent) -> u64 {
        self.acct.counts.vm_events.sum(event.index())
    }

    /// Raises `event` (`memcg_memory_event`): locally here, and
    /// hierarchically here and on every ancestor below the root (only here
    /// with the `memory_localevents` mount option).
    pub(crate) fn memory_event(&self, event: MemcgEvent) {
        let i = event.index();
        // Relaxed: statistics.
        self.acct.counts.events_local[i].fetch_add(1, Ordering::Relaxed);
        let local_only = self.options.localevents.load(Ordering::Relaxed);
        for c in self.self_and_ancestors() {
            if c.is_root() {
                break;
            }
            c.acct.counts.events[i].fetch_add(1, Ordering::Relaxed);
            if local_only {
                break;
            }
        }
    }

    /// Adds `delta` to a statistic here and in every ancestor
    /// (`mod_memcg_state`, hierarchical).
    pub fn mod_stat(&self, stat: MemcgStat, delta: i64) {
        let i = stat.index();
        for c in self.self_and_ancestors() {
            c.acct.counts.stats.add(i, delta as u64);
        }
    }

    /// Counts `n` events here and in every ancestor (`count_memcg_events`).
    pub fn count_vm_event(&self, event: VmEvent, n: u64) {
        let i = event.index();
        for c in self.self_and_ancestors() {
            c.acct.counts.vm_events.add(i, n);
        }
    }
}

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
    /// A socket's memory charge was throttled (7.3's `sock_throttled`,
    /// printed only under its profile; never raised: no sockets here).
    SockThrottled,
    /// Swap usage went over `memory.swap.high`.
    SwapHigh,
    /// A swap charge hit `memory.swap.max`.
    SwapMax,
    /// A swap-out failed (no slot or over `memory.swap.max`).
    SwapFail,
}

impl MemcgEvent {
    /// Every event, `memory.events` ones then `memory.swap.events` ones.
    pub const ALL: [MemcgEvent; 10] = [
        MemcgEvent::Low,
        MemcgEvent::High,
        MemcgEvent::Max,
        MemcgEvent::Oom,
        MemcgEvent::OomKill,
        MemcgEvent::OomGroupKill,
        MemcgEvent::SockThrottled,
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
            MemcgEvent::SockThrottled => "sock_throttled",
            MemcgEvent::SwapFail => "fail",
        }
    }

    /// Whether it belongs in `memory.swap.events`.
    pub(crate) const fn is_swap(self) -> bool {
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

/// The unit a statistic is kept in, and so how its stored value turns into
/// what `memory.stat` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatUnit {
    /// Pages (of [`PAGE_SIZE`] bytes), printed as bytes.
    Pages,
    /// Bytes, printed as is.
    Bytes,
    /// A count (of refaults, demotions, ...), printed as is.
    Count,
}

impl StatUnit {
    /// The factor from the stored value to the printed one: bytes per
    /// unit ([`PAGE_SIZE`] for pages, 1 otherwise).
    pub const fn bytes(self) -> u64 {
        match self {
            StatUnit::Pages => PAGE_SIZE,
            StatUnit::Bytes | StatUnit::Count => 1,
        }
    }
}

/// The sentence each [`MemcgStat`] variant's docs end with: its key and
/// its unit.
macro_rules! stat_doc {
    (Pages, $key:literal) => {
        concat!(
            "`memory.stat` key `",
            $key,
            "`; kept in pages, printed in bytes."
        )
    };
    (Bytes, $key:literal) => {
        concat!("`memory.stat` key `", $key, "`; in bytes.")
    };
    (Count, $key:literal) => {
        concat!("`memory.stat` key `", $key, "`; a count.")
    };
}

macro_rules! memcg_stats {
    ($($(#[$doc:meta])* $variant:ident = $key:literal, $unit:ident;)*) => {
        /// Page states kept per memory cgroup (`memory_stats[]`), in
        /// `memory.stat` order, then [`MemcgStat::Swap`], which v2 does not
        /// print (`memory.swap.current` is its interface). Each is kept in
        /// its own unit ([`MemcgStat::unit`]; module docs): pages for most,
        /// bytes for some, counts for others.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum MemcgStat {
            $($(#[$doc])* #[doc = ""] #[doc = stat_doc!($unit, $key)] $variant,)*
            /// Pages on swap (`MEMCG_SWAP`); not in `memory.stat`.
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

            /// The unit the value is kept in (what [`MemCgroup::stat`]
            /// returns), and so how it prints.
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
    /// Pages stored in zswap as they are, not compressed (7.3; printed
    /// only under its profile: [`crate::profile::StatLayout::V7_3`]).
    ZswapIncomp = "zswap_incomp", Pages;
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
    /// Pages demoted by proactive reclaim (7.3; printed only under its
    /// profile).
    PgdemoteProactive = "pgdemote_proactive", Count;
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
    /// Pages scanned by proactive reclaim (`memory.reclaim`; 7.3, which
    /// prints it among the page states; before, such scans count as
    /// direct).
    PgscanProactive = "pgscan_proactive";
    /// Pages reclaimed by proactive reclaim (7.3, as `PgscanProactive`).
    PgstealProactive = "pgsteal_proactive";
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
        assert_eq!(MemcgStat::ALL.len(), 40);
        assert_eq!(VmEvent::ALL.len(), 29);
    }
}
