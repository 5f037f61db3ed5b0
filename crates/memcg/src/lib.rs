//! # memcg
//!
//! The Linux kernel's memory-cgroup machinery as concurrent Rust building
//! blocks, one module per kernel mechanism, named after its kernel file.
//! Semantics follow Linux v6.14 (plus later fixes where they fix real bugs);
//! each module's docs say which kernel behaviour it mirrors, its invariants
//! and its locking rules.
//!
//! | module          | kernel file                 | what it does                              |
//! |-----------------|-----------------------------|-------------------------------------------|
//! | [`swapops`]     | include/linux/swapops.h     | swap entries: `(type, offset)` packing     |
//! | [`swap_cgroup`] | mm/swap_cgroup.c            | swap slot → owning cgroup id              |
//! | [`errno`]       | include/uapi/asm-generic/errno-base.h | errno values errors map onto   |
//! | `named`         | (none)                      | [`named_enum!`]: an enum's names, parsed and printed |
//!
//! Every atomic and lock comes from one shim (`sync`), which `--cfg loom`
//! swaps for loom's model-checked types; the loom models live in
//! `tests/loom_*.rs`.

pub mod cgroupfs;
pub mod errno;
pub mod folio;
pub(crate) mod idr;
pub(crate) mod lazy_zeroed;
pub mod list_lru;
pub mod memcontrol;
pub mod mm_types;
pub(crate) mod named;
pub mod page_counter;
pub mod swap_cgroup;
pub mod swap_state;
pub mod swapfile;
pub mod swapops;
pub(crate) mod sync;

pub use errno::Errno;
pub use swap_cgroup::{Design as SwapCgroupDesign, SwapCgroup, SwapCgroupError, SwapCgroupMap};
pub use swapops::{MAX_SWAPFILES, SwapEntry};
