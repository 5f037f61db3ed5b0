//! `/proc/meminfo` of the simulated machine (fs/proc/meminfo.c).
//!
//! Every line as the kernel prints it: mostly `Key:` padded to 16 columns,
//! the value in KiB right-aligned in 8, then ` kB` (`show_val_kb`). The lines are the kernel's, in its
//! order, for an x86-64 build; the ones the simulator has a mechanism for
//! carry its numbers, the rest read 0 until that mechanism exists, so tools
//! that parse the file by key find every key they expect.
//!
//! - `MemTotal`: the machine's size (the tree's
//!   [`machine_pages`](CgroupTree::machine_pages), which `MachineConfig::mem_bytes` sets).
//! - `MemFree`: what is neither charged to a cgroup nor taken by the kernel
//!   itself (RAM disk pages, swap tables).
//! - `MemAvailable`: free plus page cache (there is no reclaim reserve).
//! - `Cached`, `AnonPages`, `SwapCached`, `Zswap`, `Zswapped`, `Dirty`,
//!   `Writeback`, `PageTables`, `Slab`, `SReclaimable` (and `KReclaimable`),
//!   `SUnreclaim`, `Percpu`: the root's hierarchical statistics (slab
//!   objects charged to cgroups, and the memory cgroups' own per-CPU and
//!   slab structures).
//! - `SwapTotal`, `SwapFree`: the swap devices' usable slots.
//!
//! It reads the hierarchy and the swap system only, so it sits below the
//! machine; [`crate::procfs`] serves it as `/proc/meminfo`. Locking: none
//! of its own; each number is read once, without a lock across them (the
//! text is a snapshot only as far as the kernel's is).

use std::fmt::Write as _;

use crate::memcontrol::{CgroupTree, MemcgStat};
use crate::mm_types::PAGE_SIZE;
use crate::swap_state::SwapSystem;

/// The keys of `/proc/meminfo` in the kernel's order, up to `Hugetlb`
/// (the `HugePages_*` counts and `Hugepagesize` come just before it, the
/// `DirectMap*` lines after).
const KB_KEYS: [&str; 46] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
    "Mlocked",
    "SwapTotal",
    "SwapFree",
    "Zswap",
    "Zswapped",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Mapped",
    "Shmem",
    "KReclaimable",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "SecPageTables",
    "NFS_Unstable",
    "Bounce",
    "WritebackTmp",
    "CommitLimit",
    "Committed_AS",
    "VmallocTotal",
    "VmallocUsed",
    "VmallocChunk",
    "Percpu",
    "HardwareCorrupted",
    "AnonHugePages",
    "ShmemHugePages",
    "ShmemPmdMapped",
    "FileHugePages",
    "FilePmdMapped",
    "Hugetlb",
];

/// The machine's numbers, in KiB.
struct Numbers {
    total: u64,
    free: u64,
    cached: u64,
    anon: u64,
    pagetables: u64,
    swapcached: u64,
    zswap_bytes: u64,
    zswapped: u64,
    swap_total: u64,
    swap_free: u64,
    /// Slab bytes: reclaimable, unreclaimable.
    slab_bytes: [u64; 2],
    /// Per-CPU bytes charged (memory cgroups' statistics).
    percpu_bytes: u64,
    dirty: u64,
    writeback: u64,
    /// `[inactive_anon, active_anon, inactive_file, active_file]`.
    lru: [u64; 4],
    /// `MemAvailable` (`si_mem_available`).
    available: u64,
}

impl Numbers {
    fn read(tree: &CgroupTree, swap: &SwapSystem) -> Self {
        let kb = |pages: u64| pages * PAGE_SIZE / 1024;
        let stat = |s: MemcgStat| u64::try_from(tree.root().stat(s)).unwrap_or(0);
        let total = tree.machine_pages();
        let (swap_total, swap_used) = swap.swapfiles().iter().fold((0, 0), |(t, u), d| {
            (t + d.nr_pages() - 1, u + d.inuse_pages())
        });
        let lru = [
            MemcgStat::InactiveAnon,
            MemcgStat::ActiveAnon,
            MemcgStat::InactiveFile,
            MemcgStat::ActiveFile,
        ]
        .map(|s| kb(stat(s)));
        // si_mem_available: free memory above the reserves (the high
        // watermark, as totalreserve_pages has no lowmem reserve here),
        // plus the page cache less what cannot go without thrashing.
        let marks = tree.watermarks();
        let free_pages = tree.machine_free_pages();
        let cache_pages = stat(MemcgStat::InactiveFile) + stat(MemcgStat::ActiveFile);
        let available = free_pages.saturating_sub(marks.high_pages) + cache_pages
            - (cache_pages / 2).min(marks.low_pages);
        Self {
            lru,
            available: kb(available),
            total: kb(total),
            free: kb(total.saturating_sub(tree.machine_used_pages())),
            cached: kb(stat(MemcgStat::File)),
            anon: kb(stat(MemcgStat::Anon)),
            pagetables: kb(stat(MemcgStat::Pagetables)),
            swapcached: kb(stat(MemcgStat::Swapcached)),
            zswap_bytes: stat(MemcgStat::ZswapBytes) / 1024,
            zswapped: kb(stat(MemcgStat::Zswapped)),
            swap_total: kb(swap_total),
            swap_free: kb(swap_total.saturating_sub(swap_used)),
            slab_bytes: [
                stat(MemcgStat::SlabReclaimable),
                stat(MemcgStat::SlabUnreclaimable),
            ],
            percpu_bytes: stat(MemcgStat::Percpu),
            dirty: kb(stat(MemcgStat::FileDirty)),
            writeback: kb(stat(MemcgStat::FileWriteback)),
        }
    }

    fn value(&self, key: &str) -> u64 {
        match key {
            "MemTotal" => self.total,
            "MemFree" => self.free,
            "MemAvailable" => self.available,
            "Active" => self.lru[1] + self.lru[3],
            "Inactive" => self.lru[0] + self.lru[2],
            "Active(anon)" => self.lru[1],
            "Inactive(anon)" => self.lru[0],
            "Active(file)" => self.lru[3],
            "Inactive(file)" => self.lru[2],
            "Cached" => self.cached,
            "SwapCached" => self.swapcached,
            "SwapTotal" => self.swap_total,
            "SwapFree" => self.swap_free,
            "Dirty" => self.dirty,
            "Writeback" => self.writeback,
            "Zswap" => self.zswap_bytes,
            "Zswapped" => self.zswapped,
            "AnonPages" => self.anon,
            "PageTables" => self.pagetables,
            "CommitLimit" => self.total / 2 + self.swap_total,
            "Slab" => (self.slab_bytes[0] + self.slab_bytes[1]) / 1024,
            "SReclaimable" | "KReclaimable" => self.slab_bytes[0] / 1024,
            "SUnreclaim" => self.slab_bytes[1] / 1024,
            "Percpu" => self.percpu_bytes / 1024,
            _ => 0,
        }
    }
}

/// `/proc/meminfo` for `tree`'s machine and `swap`'s devices.
pub fn render(tree: &CgroupTree, swap: &SwapSystem) -> String {
    let numbers = Numbers::read(tree, swap);
    let mut out = String::new();
    let kb_line = |out: &mut String, key: &str, value: u64| {
        // show_val_kb: the key padded to 16, the value to 8.
        let _ = writeln!(out, "{:<16}{value:>8} kB", format!("{key}:"));
    };
    for key in KB_KEYS {
        match key {
            // The few lines printed with their own seq_printf formats.
            "HardwareCorrupted" => {
                let _ = writeln!(out, "HardwareCorrupted: {:>5} kB", 0);
            }
            "Hugetlb" => {
                for count in [
                    "HugePages_Total",
                    "HugePages_Free",
                    "HugePages_Rsvd",
                    "HugePages_Surp",
                ] {
                    let _ = writeln!(out, "{:<19}{:>5}", format!("{count}:"), 0);
                }
                kb_line(&mut out, "Hugepagesize", 2048);
                kb_line(&mut out, key, 0);
            }
            _ => kb_line(&mut out, key, numbers.value(key)),
        }
    }
    // x86's direct map: every page mapped with 4 KiB entries.
    kb_line(&mut out, "DirectMap4k", numbers.total);
    kb_line(&mut out, "DirectMap2M", 0);
    out
}

/// One value of `/proc/meminfo` text, in kB (for tests and tools).
pub fn value_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}
