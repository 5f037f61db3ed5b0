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
