//! Units every mechanism shares (the kernel's `include/linux/mm_types.h`,
//! `asm/page.h` and `linux/swap.h` constants), kept below the mechanisms so
//! that none imports another only for a number.

/// Bytes per page (`PAGE_SIZE` on x86-64 and arm64 with 4K pages).
pub const PAGE_SIZE: u64 = 4096;

/// Bytes per page, as a `usize` (for buffers and slices).
pub const PAGE_BYTES: usize = PAGE_SIZE as usize;

/// Slots per swap cluster (`SWAPFILE_CLUSTER`, `HPAGE_PMD_NR` with THP):
/// the unit a swap device allocates in and the `cluster` swap_cgroup design
/// locks in. Loom models use 4 so that a model with a few clusters stays
/// small enough to explore exhaustively.
pub const SWAPFILE_CLUSTER: usize = if cfg!(loom) { 4 } else { 512 };

/// Pages per reclaim batch, and the least a reclaim aims for
/// (`SWAP_CLUSTER_MAX`, linux/swap.h).
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// `vm.swappiness` at boot (`vm_swappiness`'s initial value).
pub const DEFAULT_SWAPPINESS: u32 = 60;

/// The highest swappiness (`MAX_SWAPPINESS`, linux/swap.h).
pub(crate) const MAX_SWAPPINESS: u32 = 200;
