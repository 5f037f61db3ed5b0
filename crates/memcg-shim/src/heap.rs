//! The heap of every program under `memcg run`: the shim's own `malloc`,
//! `free`, `calloc`, `realloc`, `reallocarray`, `memalign`,
//! `posix_memalign`, `aligned_alloc`, `valloc`, `pvalloc` and
//! `malloc_usable_size` (glibc's "replacing malloc" set), which take the
//! place of the C library's, whose memory comes from mappings the shim
//! cannot see. Every byte they hand out comes from `anon`, so its
//! anonymous memory is where the simulator can charge it.
//!
//! Layout:
//! - small sizes (up to [`SMALL_MAX`]) fall in size classes (`classes`)
//!   wasting under 16 bytes or at most 25%: 16-byte steps up to 64
//!   bytes, then four classes per power of two. Blocks are carved by a
//!   bump pointer from chunks of [`CHUNK`] bytes (`anon::map`); each is
//!   a 16-byte [`Header`] (magic, class) then the payload, 16-byte
//!   aligned. A freed block goes on its class's free list, linked
//!   through its first payload word; chunks are never given back.
//! - large sizes have a mapping each, a header (magic, mapping length) at
//!   its start; `free` unmaps it, `realloc` remaps it (`anon::remap`).
//! - alignments above 16 are over-allocated; the pointer returned has a
//!   header of its own just before it (magic, offset back to the block).
//!
//! Invariants: memory is written only once it is handed out (a header is
//! written when its block is), so the pages of a fresh chunk stay
//! untouched, and zero, until a block in them is used: `calloc` clears
//! only reused blocks (`userfaultfd` charges a page on first touch). A
//! pointer whose header does not carry the magic (never ours, or freed
//! twice) aborts the program, as glibc's "free(): invalid pointer" does.
//!
//! Locking: one global futex lock guards the free lists and the bump
//! pointer; it is held only to pop or push a block or to move the bump
//! pointer (with the `anon::map` of a new chunk), never while calling
//! back into anything that allocates. `fork` takes it (handlers
//! registered with `pthread_atfork` on the first allocation), so a child
//! of a multithreaded program finds it free. Everything is static and
//! const-initialised: it works before the shim's constructor runs (ld.so
//! allocates early) and allocates nothing for itself. Whatever serves
//! page faults on this memory must not allocate from it.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::{anon, sys};
use classes::{CLASSES, SMALL_MAX, class_of, class_size};

mod classes;

/// The alignment of every block, and the size of a header.
const HEADER: usize = 16;
const PAGE: usize = 4096;
/// The size of the mappings small blocks are carved from.
const CHUNK: usize = 4 << 20;

/// A block in use ("mcgh").
const MAGIC: u32 = 0x6d63_6768;
/// A small block on a free list ("mcgf").
const FREED: u32 = 0x6d63_6766;
/// `Header::kind` of a large block (else the class of a small one).
const LARGE: u32 = u32::MAX;
/// `Header::kind` of the header before an over-aligned pointer.
const ALIGNED: u32 = u32::MAX - 1;

/// The 16 bytes before every pointer the heap returns.
#[repr(C)]
struct Header {
    magic: u32,
    /// A class, [`LARGE`] or [`ALIGNED`].
    kind: u32,
    /// A large block's mapping length; an aligned pointer's offset from
    /// its block; 0 for a small block.
    word: usize,
}

/// What the lock guards.
struct State {
    /// Each class's first free block (payload address), linked through
    /// their first word.
    free: [*mut u8; CLASSES],
    /// The unused rest of the current chunk: `bump..end`.
    bump: *mut u8,
    end: *mut u8,
}

struct Heap {
    /// 0 free, 1 held, 2 held with waiters.
    lock: AtomicU32,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is only reached through `locked`, under `lock`.
unsafe impl Sync for Heap {}

static HEAP: Heap = Heap {
    lock: AtomicU32::new(0),
    state: UnsafeCell::new(State {
        free: [null_mut(); CLASSES],
        bump: null_mut(),
        end: null_mut(),
    }),
};

/// Whether the fork handlers are registered (or being registered).
static FORK_HANDLERS: AtomicU32 = AtomicU32::new(0);

#[cfg(target_arch = "x86_64")]
const SYS_FUTEX: core::ffi::c_long = 202;
#[cfg(target_arch = "aarch64")]
const SYS_FUTEX: core::ffi::c_long = 98;
const FUTEX_WAIT_PRIVATE: c_int = 128;
const FUTEX_WAKE_PRIVATE: c_int = 128 | 1;

// ---- the lock ----

/// Takes the lock: one compare-and-swap when it is free.
fn lock() {
    if HEAP
        .lock
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        lock_contended();
    }
}

/// Takes a held lock: spins a little, then sleeps on the futex (marking
/// the lock contended, 2), keeping errno as it was.
#[cold]
fn lock_contended() {
    for _ in 0..100 {
        core::hint::spin_loop();
        if HEAP.lock.load(Ordering::Relaxed) == 0
            && HEAP
                .lock
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
    }
    let saved = sys::errno();
    while HEAP.lock.swap(2, Ordering::Acquire) != 0 {
        // SAFETY: waits while the lock word is 2; the word is static.
        unsafe {
            sys::syscall(
                SYS_FUTEX,
                HEAP.lock.as_ptr(),
                FUTEX_WAIT_PRIVATE,
                2 as c_int,
                null_mut::<c_void>(),
            )
        };
    }
    sys::set_errno(saved);
}

/// Releases the lock, waking a sleeper if it was contended.
fn unlock() {
    if HEAP.lock.swap(0, Ordering::Release) == 2 {
        // SAFETY: wakes one waiter on the static lock word.
        unsafe {
            sys::syscall(
                SYS_FUTEX,
                HEAP.lock.as_ptr(),
                FUTEX_WAKE_PRIVATE,
                1 as c_int,
            )
        };
    }
}

/// `f` on the state, under the lock.
fn locked<R>(f: impl FnOnce(&mut State) -> R) -> R {
    lock();
    // SAFETY: the lock is held, so this is the only reference.
    let r = f(unsafe { &mut *HEAP.state.get() });
    unlock();
    r
}

/// `fork`'s prepare handler: no other thread is inside the heap when the
/// process is copied.
extern "C" fn before_fork() {
    lock();
}

extern "C" fn after_fork_in_parent() {
    unlock();
}

extern "C" fn after_fork_in_child() {
    // The child's only thread is the one that took the lock.
    HEAP.lock.store(0, Ordering::Release);
}

/// Registers the fork handlers, once; a call made from inside
/// `pthread_atfork` (should it allocate) goes on without.
fn register_fork_handlers() {
    if FORK_HANDLERS.load(Ordering::Acquire) != 0 {
        return;
    }
    if FORK_HANDLERS
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: the handlers are plain functions of this library.
        unsafe {
            sys::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            )
        };
    }
}

// ---- blocks ----

/// The header before `p`.
fn header(p: *mut u8) -> *mut Header {
    p.wrapping_sub(HEADER).cast()
}

/// Writes the header before `p`.
///
/// # Safety
/// The 16 bytes before `p` are ours to write.
unsafe fn set_header(p: *mut u8, magic: u32, kind: u32, word: usize) {
    // SAFETY: by the caller's contract.
    unsafe { header(p).write(Header { magic, kind, word }) }
}

/// A block of `class`: its payload and whether it is fresh (never
/// written, so zero); null if no memory.
fn small_alloc(class: usize) -> (*mut u8, bool) {
    let stride = class_size(class) + HEADER;
    let (p, fresh) = locked(|s| {
        let head = s.free[class];
        if !head.is_null() {
            // SAFETY: a block on a free list holds the next one's address.
            s.free[class] = unsafe { head.cast::<*mut u8>().read() };
            return (head, false);
        }
        if (s.end as usize - s.bump as usize) < stride {
            let chunk = anon::map(CHUNK);
            if chunk.is_null() {
                return (null_mut(), false);
            }
            s.bump = chunk;
            s.end = chunk.wrapping_add(CHUNK);
        }
        let block = s.bump;
        s.bump = block.wrapping_add(stride);
        (block.wrapping_add(HEADER), true)
    });
    if !p.is_null() {
        // SAFETY: the block is now this caller's, header included.
        unsafe { set_header(p, MAGIC, class as u32, 0) };
    }
    (p, fresh)
}

/// Puts the small block `p` of `class` on its free list.
///
/// # Safety
/// `p` is a block of `class` in use, and no one uses it afterwards.
unsafe fn small_free(p: *mut u8, class: usize) {
    // SAFETY: the block and its header are the caller's to give up.
    unsafe { (*header(p)).magic = FREED };
    locked(|s| {
        // SAFETY: the payload (at least 16 bytes) is the heap's again.
        unsafe { p.cast::<*mut u8>().write(s.free[class]) };
        s.free[class] = p;
    });
}

/// The mapping length holding `size` bytes and a header, if it fits.
fn large_len(size: usize) -> Option<usize> {
    size.checked_add(HEADER + PAGE - 1).map(|n| n & !(PAGE - 1))
}

/// A large block of `size` bytes (fresh, so zero); null if no memory.
fn large_alloc(size: usize) -> *mut u8 {
    let Some(len) = large_len(size) else {
        return null_mut();
    };
    let base = anon::map(len);
    if base.is_null() {
        return null_mut();
    }
    let p = base.wrapping_add(HEADER);
    // SAFETY: the mapping is new and ours.
    unsafe { set_header(p, MAGIC, LARGE, len) };
    p
}

/// `size` bytes, 16-byte aligned, and whether they are fresh (zero);
/// null with errno ENOMEM if there is no memory.
fn allocate(size: usize) -> (*mut u8, bool) {
    register_fork_handlers();
    let (p, fresh) = if size > isize::MAX as usize {
        (null_mut(), false)
    } else if size <= SMALL_MAX {
        small_alloc(class_of(size))
    } else {
        (large_alloc(size), true)
    };
    if p.is_null() {
        sys::set_errno(sys::ENOMEM);
    }
    (p, fresh)
}

/// What a pointer from the heap is.
#[derive(Clone, Copy)]
enum Block {
    /// A small block of this class.
    Small(usize),
    /// A large block with a mapping of this length.
    Large(usize),
}

/// A pointer from the heap, resolved: its block (`base`, where the
/// block's payload starts) and its offset into it (0 unless aligned).
struct Found {
    base: *mut u8,
    offset: usize,
    block: Block,
}

/// Prints "`what`: invalid pointer" and aborts.
#[cold]
fn invalid(what: &[u8]) -> ! {
    let mut line = [0u8; 64];
    let parts: [&[u8]; 3] = [b"memcg shim: ", what, b": invalid pointer\n"];
    let mut n = 0;
    for part in parts {
        let take = part.len().min(line.len() - n);
        line[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    // SAFETY: writes from the buffer above; abort has no preconditions.
    unsafe {
        sys::write(2, line.as_ptr().cast(), n);
        sys::abort()
    }
}

/// Whether a large block at `base` with a mapping of `len` bytes is
/// plausible: the mapping starts a page, and is whole pages.
fn large_at(base: *mut u8, len: usize) -> bool {
    (base as usize).wrapping_sub(HEADER).is_multiple_of(PAGE)
        && len >= PAGE
        && len.is_multiple_of(PAGE)
}

/// The block of the header before `base`, if it is one.
///
/// # Safety
/// The 16 bytes before `base` are readable.
unsafe fn block_at(base: *mut u8) -> Option<Block> {
    // SAFETY: by the caller's contract.
    let h = unsafe { header(base).read() };
    match h.kind {
        _ if h.magic != MAGIC => None,
        LARGE if large_at(base, h.word) => Some(Block::Large(h.word)),
        kind if (kind as usize) < CLASSES => Some(Block::Small(kind as usize)),
        _ => None,
    }
}

/// Resolves `p` (non-null), aborting, as `what`, if it is not a pointer
/// the heap handed out and still in use.
///
/// # Safety
/// `p` came from the heap (anything else may abort or crash).
unsafe fn find(p: *mut u8, what: &[u8]) -> Found {
    if !(p as usize).is_multiple_of(HEADER) {
        invalid(what);
    }
    // SAFETY: a pointer from the heap has its header before it.
    let h = unsafe { header(p).read() };
    let offset = if h.magic == MAGIC && h.kind == ALIGNED {
        h.word
    } else {
        0
    };
    if !offset.is_multiple_of(HEADER) || offset > p as usize {
        invalid(what);
    }
    let base = p.wrapping_sub(offset);
    // SAFETY: `base` is `p` or, aligned, the block it lies in.
    match unsafe { block_at(base) } {
        Some(block) => Found {
            base,
            offset,
            block,
        },
        None => invalid(what),
    }
}

/// The bytes usable at a found pointer.
fn usable(found: &Found) -> usize {
    let whole = match found.block {
        Block::Small(class) => class_size(class),
        Block::Large(len) => len - HEADER,
    };
    whole - found.offset
}

/// Frees the block of a found pointer.
///
/// # Safety
/// No one uses the block afterwards.
unsafe fn release(found: Found) {
    match found.block {
        // SAFETY: by the caller's contract.
        Block::Small(class) => unsafe { small_free(found.base, class) },
        // SAFETY: the whole mapping is the block's.
        Block::Large(len) => unsafe { anon::unmap(found.base.wrapping_sub(HEADER), len) },
    }
}

/// `size` bytes aligned to `align` (a power of two); null with errno
/// ENOMEM if there is no memory.
pub(crate) fn allocate_aligned(align: usize, size: usize) -> *mut u8 {
    if align <= HEADER {
        return allocate(size).0;
    }
    let Some(total) = size.checked_add(align) else {
        sys::set_errno(sys::ENOMEM);
        return null_mut();
    };
    let (p, _) = allocate(total);
    if p.is_null() || (p as usize).is_multiple_of(align) {
        return p;
    }
    let q = p.wrapping_add(align - p as usize % align);
    // SAFETY: `q - 16 >= p`: the header lies in the block, as do `size`
    // bytes from `q` (`q + size <= p + total`).
    unsafe { set_header(q, MAGIC, ALIGNED, q as usize - p as usize) };
    q
}

/// `realloc` of a found, non-null pointer to `size` bytes (non-zero).
///
/// # Safety
/// `p` is in use, found as `found`.
unsafe fn resize(p: *mut u8, found: Found, size: usize) -> *mut u8 {
    let old = usable(&found);
    if found.offset == 0 {
        match found.block {
            Block::Small(class) if size <= old && class_of(size) + 4 >= class => return p,
            Block::Large(len) if size > SMALL_MAX && size <= isize::MAX as usize => {
                // SAFETY: the block is a whole mapping of `len` bytes.
                return unsafe { resize_large(p, len, size) };
            }
            _ => {}
        }
    }
    let (new, _) = allocate(size);
    if !new.is_null() {
        // SAFETY: both blocks hold the bytes copied; the old one is freed
        // (the caller's `p` is given up with it).
        unsafe {
            core::ptr::copy_nonoverlapping(p, new, old.min(size));
            release(found);
        }
    }
    new
}

/// Remaps the large block at `p` (a mapping of `len` bytes) to hold
/// `size` bytes; null with errno ENOMEM (`p` untouched) on failure.
///
/// # Safety
/// `p` is a large block in use, with a mapping of `len` bytes.
unsafe fn resize_large(p: *mut u8, len: usize, size: usize) -> *mut u8 {
    let Some(new_len) = large_len(size) else {
        sys::set_errno(sys::ENOMEM);
        return null_mut();
    };
    if new_len == len {
        return p;
    }
    // SAFETY: the mapping is the block's, and the block the caller's.
    let base = unsafe { anon::remap(p.wrapping_sub(HEADER), len, new_len) };
    if base.is_null() {
        sys::set_errno(sys::ENOMEM);
        return null_mut();
    }
    let p = base.wrapping_add(HEADER);
    // SAFETY: the header is at the start of the (moved) mapping.
    unsafe { set_header(p, MAGIC, LARGE, new_len) };
    p
}

// ---- the C functions ----

/// `malloc(3)`: `malloc(0)` is a unique pointer of its own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    allocate(size).0.cast()
}

/// `free(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller passes a pointer from the heap, and gives it up.
    unsafe { release(find(p.cast(), b"free()")) }
}

/// `calloc(3)`: clears only blocks that are not fresh.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        sys::set_errno(sys::ENOMEM);
        return null_mut();
    };
    let (p, fresh) = allocate(total);
    if !p.is_null() && !fresh {
        // SAFETY: the block holds `total` bytes.
        unsafe { core::ptr::write_bytes(p, 0, total) };
    }
    p.cast()
}

/// `realloc(3)`: `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)`
/// frees `p` and returns null, as glibc's does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let p: *mut u8 = p.cast();
    if p.is_null() {
        return allocate(size).0.cast();
    }
    // SAFETY: the caller passes a pointer from the heap.
    let found = unsafe { find(p, b"realloc()") };
    if size == 0 {
        // SAFETY: glibc's realloc(p, 0) frees p.
        unsafe { release(found) };
        return null_mut();
    }
    // SAFETY: `p` is in use and found.
    unsafe { resize(p, found, size).cast() }
}

/// `reallocarray(3)`: `realloc` of `count * size` bytes, ENOMEM if that
/// overflows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: as `realloc`.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            sys::set_errno(sys::ENOMEM);
            null_mut()
        }
    }
}

/// `memalign(3)`, as glibc's: an alignment that is not a power of two is
/// rounded up to one; one above half the address space is EINVAL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    match align.checked_next_power_of_two() {
        Some(align) => allocate_aligned(align, size).cast(),
        None => {
            sys::set_errno(sys::EINVAL);
            null_mut()
        }
    }
}

/// `posix_memalign(3)`: EINVAL unless `align` is a power of two and a
/// multiple of `sizeof(void *)`, ENOMEM without memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(size_of::<*mut c_void>()) {
        return sys::EINVAL;
    }
    let p = allocate_aligned(align, size);
    if p.is_null() {
        return sys::ENOMEM;
    }
    // SAFETY: the caller passes where to store the pointer.
    unsafe { out.write(p.cast()) };
    0
}

/// `aligned_alloc(3)`: EINVAL unless `align` is a power of two (as
/// glibc 2.38 and later).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        sys::set_errno(sys::EINVAL);
        return null_mut();
    }
    allocate_aligned(align, size).cast()
}

/// `valloc(3)`: page-aligned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    allocate_aligned(PAGE, size).cast()
}

/// `pvalloc(3)`: page-aligned, the size rounded up to whole pages (one
/// page for 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    match size.max(1).checked_next_multiple_of(PAGE) {
        Some(size) => allocate_aligned(PAGE, size).cast(),
        None => {
            sys::set_errno(sys::ENOMEM);
            null_mut()
        }
    }
}

/// `malloc_usable_size(3)`: 0 for null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    // SAFETY: the caller passes a pointer from the heap.
    usable(&unsafe { find(p.cast(), b"malloc_usable_size()") })
}
