//! # memcg
//!
//! The Linux kernel's memory-cgroup machinery as concurrent Rust building
//! blocks, one module per kernel mechanism, named after its kernel file.
//! Semantics follow Linux v6.14 (plus later fixes where they fix real bugs);
//! each module's docs say which kernel behaviour it mirrors, its invariants
//! and its locking rules.
//!
//! Layered bottom-up: vocabulary first, then the mechanisms, then the
//! interface files. A module imports only modules above it in this table.
//!
//! | module           | kernel file                            | what it does                                   |
//! |------------------|----------------------------------------|------------------------------------------------|
//! | [`errno`]        | include/uapi/asm-generic/errno-base.h  | errno values every typed error maps onto       |
//! | [`mm_types`]     | include/linux/mm_types.h, asm/page.h   | `PAGE_SIZE`, `PAGE_BYTES`, `SWAPFILE_CLUSTER`  |
//! | [`swapops`]      | include/linux/swapops.h                | swap entries: `(type, offset)` packing         |
//! | `sync`           | (none)                                 | the std ↔ loom shim every atomic and lock uses |
//! | `percpu`         | include/linux/percpu*.h                | per-thread slots and split counters            |
//! | `named`          | (none)                                 | [`named_enum!`]: an enum's names, parsed and printed |
//! | [`clock`]        | include/linux/jiffies.h, kernel/time   | jiffies, a real and a virtual clock to sleep on |
//! | `idr`            | lib/idr.c                              | lazy two-level id tables, lowest-free ids      |
//! | `weak_slab`      | (an intrusive `list_head`)             | weak references that leave their list in O(1)  |
//! | [`page_alloc`]   | mm/page_alloc.c                        | the machine's page frames: buddy lists, per-thread caches |
//! | `lazy_zeroed`    | (vmalloc'd zeroed arrays)              | flat zeroed arrays committed page by page      |
//! | [`page_counter`] | mm/page_counter.c (+ the old res_counter) | hierarchical counters, limits, protection   |
//! | [`swap_cgroup`]  | mm/swap_cgroup.c                       | swap slot → owning cgroup id (five designs)    |
//! | [`swapfile`]     | mm/swapfile.c, drivers/block/brd.c     | swap devices, clusters, slot counts, backends  |
//! | [`memcontrol`]   | mm/memcontrol.c, kernel/cgroup/cgroup.c | cgroups, memory cgroups, charges, swap accounting, events, hooks |
//! | [`folio`]        | include/linux/mm_types.h (`struct folio`) | pages of real bytes that carry their charge |
//! | [`list_lru`]     | mm/list_lru.c                          | per-cgroup per-node LRUs (split, legacy)       |
//! | [`psi`]          | kernel/sched/psi.c                     | memory pressure stall information              |
//! | [`shrinker`]     | mm/shrinker.c, mm/vmscan.c (shrink_slab) | shrinkers: caches that give objects back     |
//! | [`vmscan`]       | mm/vmscan.c                            | per-memcg LRU lists, memory cgroup reclaim     |
//! | [`workingset`]   | mm/workingset.c                        | shadow entries, refault distances              |
//! | [`zswap`]        | mm/zswap.c, mm/zsmalloc.c              | compressed cache before the swap devices       |
//! | [`swap_state`]   | mm/swap_state.c, mm/page_io.c, mm/vmscan.c (split on swap-out) | swap cache, swap-out/in |
//! | [`filemap`]      | mm/filemap.c, mm/truncate.c            | the page cache of a file, shadows, writeback   |
//! | [`fs`]           | fs/dcache.c, fs/inode.c, fs/super.c, fs/drop_caches.c, drivers/block/brd.c | a filesystem: dentry/inode caches on list_lru, its shrinker, drop_caches |
//! | [`cgroupfs`]     | mm/memcontrol.c, kernel/cgroup/cgroup.c (cftypes) | the cgroup v2 interface files |
//!
//! Every atomic and lock comes from one shim (`sync`), which `--cfg loom`
//! swaps for loom's model-checked types; the loom models live in
//! `tests/loom_*.rs`.

pub mod cgroupfs;
pub mod clock;
pub mod errno;
pub mod filemap;
pub mod folio;
pub mod fs;
pub(crate) mod idr;
pub(crate) mod lazy_zeroed;
pub mod list_lru;
pub mod memcontrol;
pub mod mm_types;
pub(crate) mod named;
pub mod page_alloc;
pub mod page_counter;
pub(crate) mod percpu;
pub mod psi;
pub mod shrinker;
pub mod swap_cgroup;
pub mod swap_state;
pub mod swapfile;
pub mod swapops;
pub(crate) mod sync;
pub mod vmscan;
pub(crate) mod weak_slab;
pub mod workingset;
pub mod zswap;

pub use errno::Errno;
pub use swap_cgroup::{Design as SwapCgroupDesign, SwapCgroup, SwapCgroupError, SwapCgroupMap};
pub use swapops::{MAX_SWAPFILES, SwapEntry};
