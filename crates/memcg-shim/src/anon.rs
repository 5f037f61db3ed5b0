//! Where the shim's heap gets its memory: every byte `heap` hands out
//! comes from these three functions, so that the anonymous memory of a
//! process under `memcg run` can be placed where the simulator sees it
//! (`userfaultfd`-registered ranges, issue 25).
//!
//! It maps private anonymous memory with the system calls themselves
//! (never through `mmap`, which the shim replaces) and registers each
//! mapping with the process's `userfaultfd` (`uffd`); one mapped before
//! the shim's constructor gave the process one is registered then. Lengths are multiples of the page size (4096); the memory
//! is zero until first written, and `heap` relies on that.
//!
//! `map` may be called with the heap's lock held (a new chunk), `unmap`
//! and `remap` are not: none of them may allocate from the heap (the
//! shim's `alloc` types included), nor may whatever serves their faults
//! from inside the process.

use core::ffi::c_long;

use crate::sys;

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const MMAP: core::ffi::c_long = 9;
    pub const MUNMAP: core::ffi::c_long = 11;
    pub const MREMAP: core::ffi::c_long = 25;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const MMAP: core::ffi::c_long = 222;
    pub const MUNMAP: core::ffi::c_long = 215;
    pub const MREMAP: core::ffi::c_long = 216;
}

const PROT_READ_WRITE: c_long = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS: c_long = 0x02 | 0x20;
const MREMAP_MAYMOVE: c_long = 1;

/// The result of a system call returning an address: null on failure
/// (`-4095..=-1`; errno is set by `syscall`).
fn address(rc: c_long) -> *mut u8 {
    if (-4095..0).contains(&rc) {
        core::ptr::null_mut()
    } else {
        rc as usize as *mut u8
    }
}

/// `len` (a multiple of 4096) bytes of fresh zeroed private anonymous
/// memory, readable and writable; null on failure.
pub(crate) fn map(len: usize) -> *mut u8 {
    // SAFETY: a new anonymous mapping at an address the kernel picks
    // touches no existing memory.
    let rc = unsafe {
        sys::syscall(
            nr::MMAP,
            0usize,
            len,
            PROT_READ_WRITE,
            MAP_PRIVATE_ANONYMOUS,
            -1 as c_long,
            0usize,
        )
    };
    let p = address(rc);
    if !p.is_null() {
        crate::uffd::register(p as usize, len);
    }
    p
}

/// Gives back `len` bytes at `ptr`, a mapping (or its tail) from `map`
/// or `remap`.
///
/// # Safety
/// Nothing uses the memory afterwards.
pub(crate) unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: by the caller's contract the range is ours and unused.
    unsafe { sys::syscall(nr::MUNMAP, ptr, len) };
    crate::uffd::forget(ptr as usize, len);
}

/// Resizes the mapping of `old_len` bytes at `ptr` (from `map` or
/// `remap`) to `new_len` (multiples of 4096), moving it if need be: its
/// new address (its bytes kept, any new ones zero), or null on failure
/// (the old mapping then unchanged).
///
/// # Safety
/// `ptr` and `old_len` describe a whole mapping from this module; on
/// success nothing uses the old address afterwards.
pub(crate) unsafe fn remap(ptr: *mut u8, old_len: usize, new_len: usize) -> *mut u8 {
    // SAFETY: by the caller's contract the mapping is ours.
    let rc = unsafe { sys::syscall(nr::MREMAP, ptr, old_len, new_len, MREMAP_MAYMOVE) };
    let p = address(rc);
    if !p.is_null() {
        // The registration moves (or grows) with the mapping.
        crate::uffd::forget(ptr as usize, old_len);
        crate::uffd::remember(p as usize, new_len);
    }
    p
}
