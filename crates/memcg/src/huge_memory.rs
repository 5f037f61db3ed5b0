//! Transparent huge page settings for anonymous memory (mm/huge_memory.c's
//! sysfs knobs): the machine-wide `/sys/kernel/mm/transparent_hugepage/enabled`
//! and, per folio size of anonymous memory (mTHP, orders 2 to 9 on 4K pages:
//! 16K to 2M), `hugepages-<size>kB/enabled`. They say which folio sizes an
//! anonymous page fault may allocate: an order set to `always` (or to
//! `inherit` while the machine-wide setting is `always`) is tried on every
//! fault, largest first, if its naturally aligned range is wholly unmapped;
//! a charge that would need reclaim fails the order (the fault's gfp has no
//! direct reclaim unless `defrag` says so, and `defrag` is left at its
//! default here), and the fault falls back to the next order, then to a
//! single page.
//!
//! `madvise` orders would need `MADV_HUGEPAGE` regions, which the simulator
//! does not track: they are never used. Defaults are the kernel's (its
//! Kconfig default `TRANSPARENT_HUGEPAGE_ALWAYS`, which Debian's kernels
//! keep): machine-wide `always`; the PMD size (2M) `inherit`, every other
//! size `never`.
//!
//! Locking: each setting is one atomic byte, read once per fault (Relaxed:
//! a setting, no data hangs off it).

use std::sync::atomic::{AtomicU8, Ordering};

use crate::errno::Errno;

/// The smallest anonymous mTHP order (`THP_ORDERS_ALL_ANON` has no order 1).
pub const MIN_ANON_ORDER: u32 = 2;
/// The largest: a PMD of 4K pages (2M).
pub const MAX_ANON_ORDER: u32 = 9;
const ORDERS: usize = (MAX_ANON_ORDER - MIN_ANON_ORDER + 1) as usize;

/// `transparent_hugepage/enabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpEnabled {
    /// Every anonymous fault may take a huge page.
    Always,
    /// Only in `MADV_HUGEPAGE` regions.
    Madvise,
    /// Never.
    Never,
}

/// `hugepages-<size>kB/enabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MthpEnabled {
    /// Every anonymous fault may take a folio of this size.
    Always,
    /// As `transparent_hugepage/enabled` says.
    Inherit,
    /// Only in `MADV_HUGEPAGE` regions.
    Madvise,
    /// Never.
    Never,
}

const THP_WORDS: [&str; 3] = ["always", "madvise", "never"];
const MTHP_WORDS: [&str; 4] = ["always", "inherit", "madvise", "never"];

/// The settings (module docs).
#[derive(Debug)]
pub struct ThpSettings {
    enabled: AtomicU8,
    /// Per order, from [`MIN_ANON_ORDER`].
    orders: [AtomicU8; ORDERS],
}

impl Default for ThpSettings {
    fn default() -> Self {
        let orders = std::array::from_fn(|i| {
            let order = MIN_ANON_ORDER + i as u32;
            let setting = if order == MAX_ANON_ORDER {
                MthpEnabled::Inherit
            } else {
                MthpEnabled::Never
            };
            AtomicU8::new(setting as u8)
        });
        Self {
            enabled: AtomicU8::new(ThpEnabled::Always as u8),
            orders,
        }
    }
}

/// The kernel's rendering of a choice: every word, the chosen one in
/// brackets (`always [madvise] never`).
fn render(words: &[&str], chosen: usize) -> String {
    let shown: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(i, w)| match i == chosen {
            true => format!("[{w}]"),
            false => (*w).to_owned(),
        })
        .collect();
    format!("{}\n", shown.join(" "))
}

/// A write of one of `words` (`sysfs_streq`: one trailing newline
/// allowed); anything else is `EINVAL`.
fn parse(words: &[&str], text: &str) -> Result<u8, Errno> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let index = words.iter().position(|w| *w == text).ok_or(Errno::EINVAL)?;
    Ok(index as u8)
}

fn index(order: u32) -> Result<usize, Errno> {
    match order {
        MIN_ANON_ORDER..=MAX_ANON_ORDER => Ok((order - MIN_ANON_ORDER) as usize),
        _ => Err(Errno::ENOENT),
    }
}

impl ThpSettings {
    /// `transparent_hugepage/enabled` as read.
    pub fn read_enabled(&self) -> String {
        // Relaxed: module docs.
        render(
            &THP_WORDS,
            usize::from(self.enabled.load(Ordering::Relaxed)),
        )
    }

    /// A write to `transparent_hugepage/enabled`.
    pub fn write_enabled(&self, text: &str) -> Result<(), Errno> {
        let v = parse(&THP_WORDS, text)?;
        self.enabled.store(v, Ordering::Relaxed);
        Ok(())
    }

    /// `hugepages-<size>kB/enabled` of `order` as read.
    pub fn read_order(&self, order: u32) -> Result<String, Errno> {
        let v = self.orders[index(order)?].load(Ordering::Relaxed);
        Ok(render(&MTHP_WORDS, usize::from(v)))
    }

    /// A write to `hugepages-<size>kB/enabled` of `order`.
    pub fn write_order(&self, order: u32, text: &str) -> Result<(), Errno> {
        let slot = &self.orders[index(order)?];
        slot.store(parse(&MTHP_WORDS, text)?, Ordering::Relaxed);
        Ok(())
    }

    /// Sets `order` (tests and `memcg run`'s defaults).
    pub fn set_order(&self, order: u32, setting: MthpEnabled) -> Result<(), Errno> {
        self.orders[index(order)?].store(setting as u8, Ordering::Relaxed);
        Ok(())
    }

    /// The orders an anonymous fault outside `MADV_HUGEPAGE` regions may
    /// allocate, largest first (`thp_vma_allowable_orders` for such a
    /// region); empty when only single pages are.
    pub fn anon_fault_orders(&self) -> Vec<u32> {
        let always = self.enabled.load(Ordering::Relaxed) == ThpEnabled::Always as u8;
        (MIN_ANON_ORDER..=MAX_ANON_ORDER)
            .rev()
            .filter(|&order| {
                let v = self.orders[(order - MIN_ANON_ORDER) as usize].load(Ordering::Relaxed);
                v == MthpEnabled::Always as u8 || (v == MthpEnabled::Inherit as u8 && always)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_read_as_the_kernel_prints_them() {
        let s = ThpSettings::default();
        assert_eq!(s.read_enabled(), "[always] madvise never\n");
        assert_eq!(s.read_order(4).unwrap(), "always inherit madvise [never]\n");
        assert_eq!(s.read_order(9).unwrap(), "always [inherit] madvise never\n");
        assert_eq!(s.anon_fault_orders(), vec![9]);
    }

    #[test]
    fn always_and_inherit_select_orders_largest_first() {
        let s = ThpSettings::default();
        s.write_enabled("madvise").unwrap();
        assert!(s.anon_fault_orders().is_empty());
        s.write_order(4, "always\n").unwrap();
        s.write_order(2, "always").unwrap();
        assert_eq!(s.anon_fault_orders(), vec![4, 2]);
        s.write_enabled("always").unwrap();
        assert_eq!(s.anon_fault_orders(), vec![9, 4, 2]);
        s.write_order(3, "madvise").unwrap();
        assert_eq!(s.anon_fault_orders(), vec![9, 4, 2]);
    }

    #[test]
    fn bad_writes_are_einval_and_change_nothing() {
        let s = ThpSettings::default();
        assert_eq!(s.write_order(4, "sometimes"), Err(Errno::EINVAL));
        assert_eq!(s.write_order(4, "always\n\n"), Err(Errno::EINVAL));
        assert_eq!(s.write_enabled("inherit"), Err(Errno::EINVAL));
        assert_eq!(s.read_order(4).unwrap(), "always inherit madvise [never]\n");
        assert_eq!(s.read_order(1), Err(Errno::ENOENT));
    }
}
