//! The process side of `memcg run`: a library preloaded (`LD_PRELOAD`)
//! into every dynamically linked program it runs, so that the program
//! sees what it would see on a kernel whose cgroup v2 and `--fs`
//! filesystems were the simulated machine's.
//!
//! It is built by `memcg-cli`'s build script (`rustc --crate-type cdylib
//! -C panic=abort`), not by cargo as a crate of the workspace, and carried
//! inside the `memcg` binary, which writes it out for each run. `no_std`:
//! it calls the C library only through the functions `sys` declares, its
//! own file access through `syscall(2)` (never through the functions it
//! replaces), and allocates from its own heap.
//!
//! - `files`: `open`, `openat`, `fopen`, `setmntent`, ... of the procfs
//!   files that show mounts and cgroups (rewritten by `rewrite`, chosen
//!   by `paths`), and `O_TMPFILE` on `--fs` (`tmpfile`);
//! - `statfs`: `statfs`/`fstatfs` report the filesystem a kernel would;
//! - `sysinfo`: the machine's memory, not the host's;
//! - `heap`: the program's `malloc` family, in place of the C library's,
//!   with every byte from `anon`;
//! - `anon`: the anonymous memory the heap maps (`map`, `unmap`,
//!   `remap`), registered with the process's `userfaultfd`;
//! - `uffd`: that `userfaultfd`, handed to the server, the agent thread
//!   that drops reclaimed pages, `fork`, `mmap`, `munmap`, `madvise` and
//!   the `wait` family (anonymous memory under the simulator).
//!
//! Every other call goes straight to the next definition
//! (`dlsym(RTLD_NEXT)`, looked up once per function); a call the shim
//! replaces but does not answer costs a look at the path's first bytes.
//!
//! What it cannot reach: statically linked programs and programs that
//! make system calls themselves (Go) see the host's mounts and cgroups;
//! relative paths into `/proc` (`openat(proc_fd, "self/mounts")`) are not
//! answered.

#![no_std]
#![allow(clippy::missing_safety_doc)]

extern crate alloc;

mod anon;
mod files;
mod heap;
mod paths;
mod rewrite;
mod statfs;
mod sys;
mod sysinfo;
mod tmpfile;
mod uffd;

/// The shim's constructor (`.init_array`): anonymous memory under the
/// simulator (`uffd`).
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = uffd::init;

/// The shim's own allocations: its heap (`heap`), called directly.
struct Heap;

// SAFETY: `heap` is thread-safe and returns memory aligned as asked;
// `free` and `realloc` take what it returned.
unsafe impl core::alloc::GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        heap::allocate_aligned(layout.align(), layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: core::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc`.
        unsafe { heap::free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: core::alloc::Layout, size: usize) -> *mut u8 {
        if layout.align() > 16 {
            // SAFETY: the default: allocate, copy, free.
            unsafe {
                let new = self.alloc(core::alloc::Layout::from_size_align_unchecked(
                    size,
                    layout.align(),
                ));
                if !new.is_null() {
                    core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(size));
                    self.dealloc(ptr, layout);
                }
                return new;
            }
        }
        // SAFETY: `ptr` came from the heap, 16-byte aligned, and `size`
        // is not 0 (`GlobalAlloc`'s contract), so it is not freed.
        unsafe { heap::realloc(ptr.cast(), size).cast() }
    }
}

#[global_allocator]
static HEAP: Heap = Heap;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { sys::abort() }
}

/// The unwinding personality `core` (built to unwind) refers to; never
/// called, as the shim aborts on panic.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}
