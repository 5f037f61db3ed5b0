//! Swap entries: the `(type, offset)` pair that names one swap slot
//! (include/linux/swapops.h).
//!
//! Layout, as the kernel's `swp_entry_t` on 64-bit: the value is an xarray
//! value entry, so only 63 bits are usable; the top [`MAX_SWAPFILES_SHIFT`]
//! of those hold the type and the rest the page offset:
//!
//! ```text
//!   bit 63 | 62 ........ 58 | 57 ...................... 0
//!   unused |  type (5 bits) |  offset (58 bits)
//! ```
//!
//! Five type bits give 32 types, but the kernel reserves the top ones for
//! non-swap entries (device-private, device-exclusive, migration, hwpoison,
//! pte markers). On a fully configured v6.14 that leaves
//! `32 - 4 - 3 - 1 - 1 = 23` real swap devices: [`MAX_SWAPFILES`]. We keep
//! the same number so tooling that assumes "at most 23 swapfiles" agrees.

use std::fmt;

/// Bits of a swap entry that hold the type.
pub const MAX_SWAPFILES_SHIFT: u32 = 5;

/// Types `0..MAX_SWAPFILES` are real swap devices (v6.14, every option on).
pub const MAX_SWAPFILES: u32 = (1 << MAX_SWAPFILES_SHIFT)
    - SWP_DEVICE_NUM
    - SWP_MIGRATION_NUM
    - SWP_HWPOISON_NUM
    - SWP_PTE_MARKER_NUM;

const SWP_DEVICE_NUM: u32 = 4;
const SWP_MIGRATION_NUM: u32 = 3;
const SWP_HWPOISON_NUM: u32 = 1;
const SWP_PTE_MARKER_NUM: u32 = 1;

/// Bits usable in an xarray value entry on 64-bit (`BITS_PER_XA_VALUE`).
const BITS_PER_XA_VALUE: u32 = 63;

/// Where the type starts (`SWP_TYPE_SHIFT`).
pub(crate) const SWP_TYPE_SHIFT: u32 = BITS_PER_XA_VALUE - MAX_SWAPFILES_SHIFT;

/// The largest offset plus one bit pattern (`SWP_OFFSET_MASK`).
pub(crate) const SWP_OFFSET_MASK: u64 = (1 << SWP_TYPE_SHIFT) - 1;

/// Why a `(type, offset)` pair is not a swap entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SwapEntryError {
    /// The type does not fit the entry's type bits.
    #[error("swap type {0} does not fit in {MAX_SWAPFILES_SHIFT} bits")]
    TypeTooLarge(u32),
    /// The offset does not fit the entry's offset bits.
    #[error("swap offset {0:#x} exceeds SWP_OFFSET_MASK ({SWP_OFFSET_MASK:#x})")]
    OffsetTooLarge(u64),
}

/// One swap slot: device type and page offset, packed as the kernel packs it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwapEntry(u64);

impl SwapEntry {
    /// Packs `(ty, offset)`; fails if either field does not fit.
    ///
    /// Types `MAX_SWAPFILES..32` are representable (they are the kernel's
    /// special entries) but no swap device accepts them.
    pub const fn new(ty: u32, offset: u64) -> Result<Self, SwapEntryError> {
        if ty >= 1 << MAX_SWAPFILES_SHIFT {
            return Err(SwapEntryError::TypeTooLarge(ty));
        }
        if offset > SWP_OFFSET_MASK {
            return Err(SwapEntryError::OffsetTooLarge(offset));
        }
        Ok(Self(((ty as u64) << SWP_TYPE_SHIFT) | offset))
    }

    /// The device type (`swp_type`).
    pub const fn swp_type(self) -> u32 {
        (self.0 >> SWP_TYPE_SHIFT) as u32
    }

    /// The page offset within the device (`swp_offset`).
    pub const fn swp_offset(self) -> u64 {
        self.0 & SWP_OFFSET_MASK
    }

    /// The raw packed value (`entry.val`).
    pub const fn val(self) -> u64 {
        self.0
    }

    /// The entry `nr` slots further on the same device.
    pub const fn add(self, nr: u64) -> Result<Self, SwapEntryError> {
        match self.swp_offset().checked_add(nr) {
            Some(offset) => Self::new(self.swp_type(), offset),
            None => Err(SwapEntryError::OffsetTooLarge(u64::MAX)),
        }
    }
}

impl fmt::Debug for SwapEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SwapEntry({}:{:#x})", self.swp_type(), self.swp_offset())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_swapfiles_matches_v6_14() {
        assert_eq!(MAX_SWAPFILES, 23);
        assert_eq!(SWP_TYPE_SHIFT, 58);
    }

    #[test]
    fn round_trips_type_and_offset() {
        let e = SwapEntry::new(22, SWP_OFFSET_MASK).unwrap();
        assert_eq!(e.swp_type(), 22);
        assert_eq!(e.swp_offset(), SWP_OFFSET_MASK);
        assert_eq!(e.val() >> 63, 0, "bit 63 stays clear for the xarray tag");
        let e = SwapEntry::new(3, 0x1234).unwrap();
        assert_eq!(e.val(), (3 << 58) | 0x1234);
        assert_eq!(e.add(2).unwrap().swp_offset(), 0x1236);
    }

    #[test]
    fn rejects_fields_that_do_not_fit() {
        assert_eq!(SwapEntry::new(32, 0), Err(SwapEntryError::TypeTooLarge(32)));
        assert_eq!(
            SwapEntry::new(0, SWP_OFFSET_MASK + 1),
            Err(SwapEntryError::OffsetTooLarge(SWP_OFFSET_MASK + 1))
        );
        let last = SwapEntry::new(1, SWP_OFFSET_MASK).unwrap();
        assert!(last.add(1).is_err());
    }
}
