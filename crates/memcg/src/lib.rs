//! # memcg
//!
//! The Linux kernel's memory-cgroup machinery as concurrent Rust building
//! blocks, one module per kernel mechanism, named after its kernel file.
//! Semantics follow Linux v6.14 (plus later fixes where they fix real bugs);
//! each module's docs say which kernel behaviour it mirrors, its invariants
//! and its locking rules.
//!
//! # A first program
//!
//! Tenants under a parent, a limit, charges, a charge refused with the
//! events it raises, and a tenant removed while it still holds memory:
//!
//! ```
//! use memcg::Errno;
//! use memcg::memcontrol::{CgroupTree, ChargeKind, Gfp, MemcgEvent, TreeConfig};
//!
//! // The default configuration gives every cgroup a memory cgroup.
//! let tree = CgroupTree::new(TreeConfig::default());
//! // Exact figures for the assertions below: no per-thread charge stock
//! // (on by default, as in the kernel) and no metadata charged to the
//! // parent for each new memory cgroup (also on by default).
//! tree.set_charge_stock(false);
//! tree.set_memcg_metadata_bytes(0);
//!
//! let tenants = tree.mkdir("/tenants")?.memcg().unwrap();
//! let a = tree.mkdir("/tenants/a")?.memcg().unwrap();
//! let b = tree.mkdir_in(tenants.cgroup(), "b")?.memcg().unwrap();
//! assert!(tree.set_memory_max(&a, 256)); // memory.max, in pages
//!
//! tree.try_charge(&a, 200, ChargeKind::Anon, Gfp::Kernel)?; // pages, not bytes
//! tree.try_charge(&b, 50, ChargeKind::File, Gfp::Kernel)?;
//! assert_eq!(tenants.memory().usage(), 250); // counted at every level
//!
//! // Over a's limit with nothing to reclaim: ENOMEM, `max` events on a,
//! // and nothing of the refused charge stays.
//! let err = tree.try_charge(&a, 100, ChargeKind::Anon, Gfp::Kernel).unwrap_err();
//! assert_eq!(err.errno(), Errno::ENOMEM);
//! assert!(a.event(MemcgEvent::Max) > 0);
//! assert_eq!(a.memory().usage(), 200);
//!
//! // rmdir with pages still charged: `a` is dying, kept while anything
//! // (its pages, this `Arc`) references it, released after.
//! tree.rmdir("/tenants/a")?;
//! assert!(a.is_dying());
//! assert_eq!(tenants.cgroup().nr_dying_descendants(), 1);
//! tree.uncharge(&a, 200, ChargeKind::Anon);
//! drop(a);
//! assert_eq!(tenants.cgroup().nr_dying_descendants(), 0);
//!
//! tree.uncharge(&b, 50, ChargeKind::File);
//! assert_eq!(tree.root().memory().usage(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! More in each module's docs ([`memcontrol`], [`list_lru`],
//! [`page_counter`], [`swap_cgroup`], [`zswap`]) and in the crate's
//! `examples/`: `tenant_cache` (per-tenant accounting, a per-tenant
//! list_lru that survives tenant deletion, and a shrinker reclaim calls
//! under memory pressure) and `swap_owners` (who owns each swap slot,
//! across threads). Run one with `cargo run -p memcg --example
//! tenant_cache`; `cargo test` runs them all.
//!
//! # What to know before using it
//!
//! - **Creating cgroups.** [`CgroupTree::mkdir`](cgroup::CgroupRoot::mkdir)
//!   (`/a/b`, the parent must exist), [`mkdir_p`](cgroup::CgroupRoot::mkdir_p)
//!   (creates missing ancestors) and [`mkdir_in`](cgroup::CgroupRoot::mkdir_in)
//!   (a child of a cgroup you hold, by name) return the new
//!   [`Cgroup`](cgroup::Cgroup) (the directory, as the kernel's
//!   `cgroup_mkdir` makes); its [`memcg()`](cgroup::Cgroup::memcg) is the
//!   [`MemCgroup`](memcontrol::MemCgroup), which is what you charge. In a
//!   tree built with
//!   [`MemoryController::SubtreeControl`](cgroup::MemoryController::SubtreeControl)
//!   (as on a cgroup v2 mount) a cgroup has one only where its parent has
//!   `+memory` in `cgroup.subtree_control`. Paths are absolute.
//! - **Every cgroup has a memory cgroup** with
//!   [`TreeConfig::default()`](memcontrol::TreeConfig) (`MemoryController::Everywhere`).
//! - **Charges, limits and counters are in pages** (4 KiB,
//!   [`mm_types::PAGE_SIZE`]): `try_charge`, `uncharge`, `memory.max`
//!   and every [`PageCounter`](page_counter::PageCounter) figure.
//!   `memory.stat` values are in their own unit:
//!   [`MemcgStat::unit`](memcontrol::MemcgStat::unit) says which (pages
//!   for most, bytes for `percpu`, `zswap` and the `slab_*` keys, plain
//!   counts for `workingset_*`); [`MemCgroup::stat`](memcontrol::MemCgroup::stat)
//!   returns the stored value, [`StatUnit::bytes`](memcontrol::StatUnit::bytes)
//!   the factor to bytes. Events are counts.
//! - **A charge says how hard it may try**, with the kernel's gfp flags
//!   ([`Gfp`](memcontrol::Gfp)): `Gfp::Kernel` for an ordinary charge
//!   (reclaim, retries, and the OOM killer for small ones); `NoRetry`,
//!   `NoReclaim` and `MemAlloc` as their kernel namesakes.
//! - **The charge stock is on by default**, as the kernel's per-CPU stock:
//!   a charge takes [`MEMCG_CHARGE_BATCH`](memcontrol::MEMCG_CHARGE_BATCH)
//!   (64) pages from the counters and keeps what it did not use for the
//!   next charge of the same memory cgroup on that thread, so `usage()`
//!   reads up to 64 pages more than is in use per thread that charged.
//!   [`CgroupTree::set_charge_stock(false)`](memcontrol::CgroupTree::set_charge_stock)
//!   makes every figure exact.
//! - **A new memory cgroup charges its own metadata to its parent** by
//!   default, as the kernel's `mem_cgroup_css_alloc` does (about 14 KiB
//!   on 2 CPUs, shown in the parent's `percpu` and `kernel`);
//!   [`CgroupTree::set_memcg_metadata_bytes(0)`](memcontrol::CgroupTree::set_memcg_metadata_bytes)
//!   turns that off.
//! - **A list_lru item is your own index**: an
//!   [`ItemId`](list_lru::ItemId) names an entry of your table, below
//!   [`ListLruConfig::max_items`](list_lru::ListLruConfig::max_items)
//!   (2^20 by default); the list_lru keeps only the links.
//! - **Errors are typed** and each maps to the kernel's errno
//!   (`errno()`): [`CgroupError`](cgroup::CgroupError),
//!   [`ChargeError`](memcontrol::ChargeError),
//!   [`ListLruError`](list_lru::ListLruError), [`SwapCgroupError`].
//! - The tree, its cgroups, list_lrus, swap_cgroup maps and zswap are
//!   `Send + Sync`, made to be shared between threads; a
//!   [`CgroupTree`](memcontrol::CgroupTree) is a cheap handle (clone it).
//!
//! # Modules
//!
//! Layered bottom-up, in floors: vocabulary first, then the primitives,
//! the counters, the memory controller and its LRU lists, the mechanisms
//! around them, reclaim, the caches, and the interface files. **A module
//! names only modules on lower floors** (`crate::x`, in `use` lines or
//! inline; test code aside), never one on its own floor. The one
//! exception is the type knot on floor 5: `memcontrol`, `folio` and
//! `lruvec` name each other (a folio holds its memory cgroup, whose
//! lruvec lists folios: the kernel's `mm_types.h`/`memcontrol.h`/`mmzone.h`
//! knot). `tests/layering.rs` reads this table and checks every path, so
//! a new module is one row here.
//!
//! Not yet true: `cgroup` names `psi` (a cgroup's `PsiGroup`, while psi
//! names cgroups and the tree), and `memcontrol` names `psi` (the task
//! hooks' `PsiTask` and `Memstall`). The test lists these edges,
//! fails on any other, and fails when one of them is gone, so the list
//! only shrinks.
//!
//! | floor | module           | kernel file                            | what it does                                   |
//! |-------|------------------|----------------------------------------|------------------------------------------------|
//! | 0     | [`errno`]        | include/uapi/asm-generic/errno-base.h  | errno values every typed error maps onto       |
//! | 0     | [`mm_types`]     | include/linux/mm_types.h, asm/page.h, linux/swap.h | `PAGE_SIZE`, `SWAPFILE_CLUSTER`, `SWAP_CLUSTER_MAX`, swappiness bounds |
//! | 0     | [`swapops`]      | include/linux/swapops.h                | swap entries: `(type, offset)` packing         |
//! | 0     | `sync`           | (none)                                 | the std ↔ loom shim every atomic and lock uses |
//! | 0     | `named`          | (none)                                 | [`named_enum!`]: an enum's names, parsed and printed |
//! | 0     | `weak_slab`      | (an intrusive `list_head`)             | weak references that leave their list in O(1)  |
//! | 1     | [`profile`]      | Makefile (VERSION, PATCHLEVEL)         | kernel versions and the behaviour switches each sets |
//! | 1     | [`clock`]        | include/linux/jiffies.h, kernel/time   | jiffies, a real and a virtual clock to sleep on |
//! | 1     | `percpu`         | include/linux/percpu*.h                | per-thread slots and split counters            |
//! | 1     | `idr`            | lib/idr.c                              | lazy two-level id tables, lowest-free ids      |
//! | 1     | `lazy_zeroed`    | (vmalloc'd zeroed arrays)              | flat zeroed arrays committed page by page      |
//! | 1     | [`writeback`]    | include/linux/writeback.h              | the `vm.dirty_*` settings and the flusher registry the tree holds |
//! | 1     | [`huge_memory`]  | mm/huge_memory.c (its sysfs knobs)     | transparent huge page settings: the folio sizes an anonymous fault may take |
//! | 2     | [`page_alloc`]   | mm/page_alloc.c                        | the machine's page frames: buddy lists, per-thread caches |
//! | 2     | [`page_counter`] | mm/page_counter.c (+ the old res_counter) | hierarchical counters, limits, protection   |
//! | 2     | [`swap_cgroup`]  | mm/swap_cgroup.c                       | swap slot → owning cgroup id (five designs)    |
//! | 3     | [`swapfile`]     | mm/swapfile.c, drivers/block/brd.c     | swap devices, clusters, slot counts, backends  |
//! | 4     | [`cgroup`]       | kernel/cgroup/cgroup.c, kernel/cgroup/freezer.c | the cgroup hierarchy: mkdir/rmdir, subtree_control, limits, tasks, freezer |
//! | 5     | [`memcontrol`]   | mm/memcontrol.c                        | memory cgroups, charges, swap accounting, events, hooks |
//! | 5     | [`folio`]        | include/linux/mm_types.h (`struct folio`) | pages of real bytes that carry their charge |
//! | 5     | [`lruvec`]       | include/linux/mmzone.h, mm_inline.h, mm/swap.c | per-memcg LRU lists: add, isolate, putback, activate, reparent |
//! | 6     | [`list_lru`]     | mm/list_lru.c                          | per-cgroup per-node LRUs (split, legacy)       |
//! | 6     | [`psi`]          | kernel/sched/psi.c                     | memory pressure stall information              |
//! | 6     | [`shrinker`]     | mm/shrinker.c                          | shrinkers: caches that give objects back       |
//! | 6     | [`page_writeback`] | mm/page-writeback.c                  | `vm.dirty_*`, dirty limits of the global and memcg domains, writer throttling |
//! | 6     | [`readahead`]    | mm/readahead.c                         | on-demand readahead: per-open-file windows     |
//! | 7     | `xarray`         | lib/xarray.c                           | a page cache's radix-tree nodes and their charges |
//! | 7     | [`workingset`]   | mm/workingset.c                        | shadow entries, refault distances              |
//! | 7     | [`vmscan`]       | mm/vmscan.c                            | memory cgroup and machine reclaim: the scan policy, kswapd, drop_slab |
//! | 8     | [`zswap`]        | mm/zswap.c, mm/zsmalloc.c              | compressed cache before the swap devices       |
//! | 9     | [`swap_state`]   | mm/swap_state.c, mm/page_io.c, mm/vmscan.c (split on swap-out) | swap cache, swap-out/in |
//! | 9     | [`filemap`]      | mm/filemap.c, mm/truncate.c, fs/fs-writeback.c, mm/backing-dev.c | the page cache of a file, shadows, dirty accounting, the flushers |
//! | 10    | [`fs`]           | fs/dcache.c, fs/inode.c, fs/super.c, fs/drop_caches.c, drivers/block/brd.c | a filesystem: dentry/inode caches on list_lru, its shrinker, drop_caches |
//! | 11    | [`cgroupfs`]     | mm/memcontrol.c, kernel/cgroup/cgroup.c (cftypes) | the cgroup v2 interface files |
//! | 11    | [`meminfo`]      | fs/proc/meminfo.c                      | `/proc/meminfo` of a hierarchy and its swap system |
//! | 12    | [`machine`]      | include/linux/mmzone.h (`pglist_data`), mm/swapfile.c (`swap_info[]`), fs/namespace.c, the vm sysctls | the machine: tree, swap, mounts, the one memcg reclaimer |
//! | 13    | [`procfs`]       | fs/proc, kernel/sysctl.c, mm's sysctl tables, module params, debugfs | the kernel files outside the cgroup tree: one table over a machine |
//!
//! Every atomic and lock comes from one shim (`sync`), which `--cfg loom`
//! swaps for loom's model-checked types; the loom models live in
//! `tests/loom_*.rs`.

#![warn(unreachable_pub)]

pub mod cgroup;
pub mod cgroupfs;
pub mod clock;
pub mod errno;
pub mod filemap;
pub mod folio;
pub mod fs;
pub mod huge_memory;
pub(crate) mod idr;
pub(crate) mod lazy_zeroed;
pub mod list_lru;
pub mod lruvec;
// Threads and host I/O, not modelled: no loom build.
#[cfg(not(loom))]
pub mod machine;
pub mod memcontrol;
pub mod meminfo;
pub mod mm_types;
pub(crate) mod named;
pub mod page_alloc;
pub mod page_counter;
pub mod page_writeback;
pub(crate) mod percpu;
// Reads a `Machine`: no loom build either.
#[cfg(not(loom))]
pub mod procfs;
pub mod profile;
pub mod psi;
pub mod readahead;
pub mod shrinker;
pub mod swap_cgroup;
pub mod swap_state;
pub mod swapfile;
pub mod swapops;
pub(crate) mod sync;
pub mod vmscan;
pub(crate) mod weak_slab;
pub mod workingset;
pub mod writeback;
pub(crate) mod xarray;
pub mod zswap;

pub use errno::Errno;
pub use swap_cgroup::{Design as SwapCgroupDesign, SwapCgroup, SwapCgroupError, SwapCgroupMap};
pub use swapops::{MAX_SWAPFILES, SwapEntry};
