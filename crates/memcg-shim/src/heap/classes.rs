//! The heap's size classes: 16-byte steps up to 64 bytes, then four
//! classes per power of two up to [`SMALL_MAX`], so a block wastes less
//! than 16 bytes or at most a quarter of its size (pure: `memcg-cli`'s
//! `tests/shim.rs` checks every size).

/// The largest size served from chunks.
pub(crate) const SMALL_MAX: usize = 128 << 10;
/// Size classes: 4 of 16-byte steps, then 4 per power of two from 2^6
/// to 2^17.
pub(crate) const CLASSES: usize = 4 + 4 * 11;

/// The class of `size` (0..=SMALL_MAX; 0 as 1).
pub(crate) fn class_of(size: usize) -> usize {
    if size <= 64 {
        return size.max(1).div_ceil(16) - 1;
    }
    let power = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
    let step = 1 << (power - 2);
    let sub = (size - (1 << power)).div_ceil(step);
    4 + (power - 6) * 4 + sub - 1
}

/// The payload size of `class`.
pub(crate) fn class_size(class: usize) -> usize {
    if class < 4 {
        return (class + 1) * 16;
    }
    let power = 6 + (class - 4) / 4;
    (1 << power) + ((class - 4) % 4 + 1) * (1 << (power - 2))
}
