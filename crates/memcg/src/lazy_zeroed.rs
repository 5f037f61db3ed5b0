//! Zero-filled `AtomicU16` arrays whose memory is committed page by page, on
//! first write.
//!
//! The array is an anonymous private mapping: address space is reserved for
//! every element up front, pages never written read as zero (the OS maps
//! its shared zero page) and cost no memory, and the first write to a page
//! makes the OS allocate a zeroed page. The result is a flat array, so a
//! read is one load with no indirection, whose memory grows with the pages
//! actually written. Transparent huge pages are turned off for the mapping
//! so that the commit granularity stays one base page.
//!
//! Which pages were written is tracked here, one flag per page set on the
//! first write with a plain load and store (idempotent, so racing writers
//! need no read-modify-write), so [`LazyZeroedU16::committed_bytes`] is
//! portable and deterministic. A Linux test checks it against the kernel's
//! own count (`Rss` of the mapping in `/proc/self/smaps`).
//!
//! Under loom the storage is an ordinary heap array of loom atomics: loom
//! cannot model OS memory, and the page-commit step has no user-visible
//! protocol to check (to the memory model, untouched memory is just zero).

use std::ops::Range;

use crate::sync::{AtomicBool, AtomicU16, Ordering};

/// A zero-filled `[AtomicU16]` committed on first write, page by page.
pub(crate) struct LazyZeroedU16 {
    #[cfg(not(loom))]
    map: memmap2::MmapRaw,
    #[cfg(loom)]
    heap: Box<[AtomicU16]>,
    len: usize,
    /// log2 of the elements per OS page.
    page_shift: u32,
    /// One flag per page: has it ever been written?
    written: Box<[AtomicBool]>,
}

/// The OS page size in bytes.
fn page_size() -> usize {
    #[cfg(all(unix, not(loom)))]
    {
        // SAFETY: sysconf has no preconditions; it only reads a constant.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(size) = usize::try_from(size)
            && size.is_power_of_two()
            && size >= 2
        {
            return size;
        }
    }
    4096
}

impl LazyZeroedU16 {
    /// Reserves `len` zeroed elements (`len >= 1`); nothing is committed yet.
    pub(crate) fn new(len: usize) -> std::io::Result<Self> {
        assert!(len > 0, "empty lazily committed array");
        let bytes = len
            .checked_mul(size_of::<AtomicU16>())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        let page_bytes = page_size();
        let pages = bytes.div_ceil(page_bytes);
        let mut written = Vec::new();
        written
            .try_reserve_exact(pages)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        written.extend((0..pages).map(|_| AtomicBool::new(false)));
        Ok(Self {
            #[cfg(not(loom))]
            map: Self::map(bytes)?,
            #[cfg(loom)]
            heap: (0..len).map(|_| AtomicU16::new(0)).collect(),
            len,
            page_shift: (page_bytes / size_of::<AtomicU16>()).trailing_zeros(),
            written: written.into_boxed_slice(),
        })
    }

    #[cfg(not(loom))]
    fn map(bytes: usize) -> std::io::Result<memmap2::MmapRaw> {
        let map = memmap2::MmapRaw::from(memmap2::MmapOptions::new().len(bytes).map_anon()?);
        #[cfg(target_os = "linux")]
        {
            // Best effort: if the kernel has no THP support the advice fails
            // and there is nothing to turn off.
            let _ = map.advise(memmap2::Advice::NoHugePage);
        }
        Ok(map)
    }

    /// The elements.
    #[inline]
    pub(crate) fn slots(&self) -> &[AtomicU16] {
        #[cfg(not(loom))]
        {
            // SAFETY: the mapping is page-aligned (so aligned for u16), at
            // least `len * 2` bytes long, zero-filled by the OS (all-zero
            // bytes are a valid AtomicU16), unmapped only when `self.map` is
            // dropped (which the `&self` borrow prevents), and only ever
            // accessed through these atomics: `MmapRaw` hands out no
            // references of its own.
            unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU16>(), self.len) }
        }
        #[cfg(loom)]
        {
            &self.heap
        }
    }

    /// Notes that elements `range` are about to be written, for
    /// [`committed_bytes`](Self::committed_bytes).
    #[inline]
    pub(crate) fn note_write(&self, range: Range<usize>) {
        debug_assert!(!range.is_empty() && range.end <= self.len);
        let first = range.start >> self.page_shift;
        let last = (range.end - 1) >> self.page_shift;
        for flag in &self.written[first..=last] {
            // Relaxed: accounting only; the flag orders nothing. A plain
            // store is enough because every writer stores the same `true`.
            if !flag.load(Ordering::Relaxed) {
                flag.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Bytes of pages written so far (what the OS has committed), plus the
    /// flags themselves.
    pub(crate) fn committed_bytes(&self) -> usize {
        let pages = self
            .written
            .iter()
            .filter(|f| f.load(Ordering::Relaxed))
            .count();
        let page_bytes = size_of::<AtomicU16>() << self.page_shift;
        pages * page_bytes + self.written.len() * size_of::<AtomicBool>()
    }

    /// The first byte of the array, for tests that ask the OS about it.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn base_address(&self) -> usize {
        self.map.as_ptr() as usize
    }
}

#[cfg(all(test, not(loom), target_os = "linux"))]
mod tests {
    use super::*;

    /// Resident bytes of the mapping starting at `base`, as the kernel
    /// counts them (the zero page is not counted).
    fn smaps_rss_bytes(base: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let range = line.split_whitespace().next().unwrap_or("");
            let Some((start, _)) = range.split_once('-') else {
                continue;
            };
            if usize::from_str_radix(start, 16) != Ok(base) {
                continue;
            }
            for field in lines.by_ref() {
                if let Some(kb) = field.strip_prefix("Rss:") {
                    return kb
                        .trim()
                        .trim_end_matches(" kB")
                        .trim()
                        .parse::<usize>()
                        .unwrap()
                        * 1024;
                }
            }
        }
        panic!("mapping at {base:#x} not found in /proc/self/smaps");
    }

    #[test]
    fn accounting_matches_the_kernels_resident_count() {
        let page_elems = page_size() / 2;
        let arr = LazyZeroedU16::new(400 * page_elems).unwrap();
        let base = arr.base_address();
        let flags_bytes = 400;
        assert_eq!(smaps_rss_bytes(base), 0, "nothing committed at creation");
        assert_eq!(arr.committed_bytes(), flags_bytes);
        // Reads commit nothing.
        let sum: u64 = arr
            .slots()
            .iter()
            .step_by(page_elems)
            .map(|s| u64::from(s.load(Ordering::Relaxed)))
            .sum();
        assert_eq!(sum, 0);
        assert_eq!(smaps_rss_bytes(base), 0, "reads map the zero page only");
        // Write one element in every 10th page, and a range spanning two.
        for page in (0..400).step_by(10) {
            let at = page * page_elems + 5;
            arr.note_write(at..at + 1);
            arr.slots()[at].store(7, Ordering::Relaxed);
        }
        let edge = 3 * page_elems - 1;
        arr.note_write(edge..edge + 2);
        arr.slots()[edge].store(1, Ordering::Relaxed);
        arr.slots()[edge + 1].store(1, Ordering::Relaxed);
        let expected_pages = 40 + 2;
        assert_eq!(smaps_rss_bytes(base), expected_pages * page_size());
        assert_eq!(
            arr.committed_bytes(),
            expected_pages * page_size() + flags_bytes
        );
    }

    #[test]
    fn huge_sizes_fail_cleanly() {
        assert!(LazyZeroedU16::new(usize::MAX / 2).is_err());
        assert!(LazyZeroedU16::new(1 << 58).is_err());
    }
}
