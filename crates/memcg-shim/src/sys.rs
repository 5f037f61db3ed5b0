//! The C library underneath: the functions the shim calls (declared here,
//! linked from libc), the next definition of each function it replaces
//! (`dlsym(RTLD_NEXT)`, looked up once), and small helpers over raw
//! descriptors.
//!
//! The shim's own file access goes through `syscall(2)` directly, never
//! through `open`, so it cannot re-enter itself.

use alloc::vec::Vec;
use core::ffi::{c_char, c_int, c_long, c_uint, c_void};

pub type Mode = c_uint;

/// An opaque `FILE`.
pub enum File {}

unsafe extern "C" {
    pub fn syscall(number: c_long, ...) -> c_long;
    pub fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize;
    pub fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    pub fn close(fd: c_int) -> c_int;
    pub fn dup2(old: c_int, new: c_int) -> c_int;
    pub fn lseek(fd: c_int, offset: i64, whence: c_int) -> i64;
    pub fn getpid() -> c_int;
    pub fn gettid() -> c_int;
    pub fn getenv(name: *const c_char) -> *const c_char;
    pub fn strlen(s: *const c_char) -> usize;
    pub fn abort() -> !;
    pub fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> c_int;
    pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    pub fn fdopen(fd: c_int, mode: *const c_char) -> *mut File;
    pub fn fileno(stream: *mut File) -> c_int;
    pub fn __fsetlocking(stream: *mut File, kind: c_int) -> c_int;
    pub fn __errno_location() -> *mut c_int;
    pub fn readlink(path: *const c_char, buf: *mut c_char, size: usize) -> isize;
    pub fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    pub fn statx(
        dirfd: c_int,
        path: *const c_char,
        flags: c_int,
        mask: c_uint,
        buf: *mut c_void,
    ) -> c_int;
    pub fn memfd_create(name: *const c_char, flags: c_uint) -> c_int;
    pub fn pthread_attr_init(attr: *mut c_void) -> c_int;
    pub fn pthread_attr_setstack(attr: *mut c_void, stack: *mut c_void, size: usize) -> c_int;
    pub fn pthread_create(
        thread: *mut u64,
        attr: *const c_void,
        start: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
    ) -> c_int;
}

/// `RTLD_NEXT`.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

pub const AT_FDCWD: c_int = -100;
pub const AT_EMPTY_PATH: c_int = 0x1000;
pub const O_ACCMODE: c_int = 0o3;
pub const O_CREAT: c_int = 0o100;
pub const O_EXCL: c_int = 0o200;
pub const O_CLOEXEC: c_int = 0o2_000_000;
pub const O_PATH: c_int = 0o10_000_000;
#[cfg(target_arch = "x86_64")]
pub const O_DIRECTORY: c_int = 0o200_000;
#[cfg(target_arch = "aarch64")]
pub const O_DIRECTORY: c_int = 0o40_000;
/// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`).
pub const O_TMPFILE: c_int = 0o20_000_000 | O_DIRECTORY;
pub const MFD_CLOEXEC: c_uint = 1;
pub const EEXIST: c_int = 17;
pub const EOPNOTSUPP: c_int = 95;
pub const EINTR: c_int = 4;
pub const ENOMEM: c_int = 12;
pub const EINVAL: c_int = 22;
/// `STATX_MNT_ID`.
pub const STATX_MNT_ID: c_uint = 0x1000;
#[cfg(target_arch = "x86_64")]
const SYS_OPENAT: c_long = 257;
#[cfg(target_arch = "aarch64")]
const SYS_OPENAT: c_long = 56;

/// The next definition of C function `$name` (a `&str` literal) as a
/// function pointer of type `$ty`, looked up on first use; `None` if
/// there is none.
macro_rules! next {
    ($name:expr, $ty:ty) => {{
        static SLOT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        let mut addr = SLOT.load(core::sync::atomic::Ordering::Relaxed);
        if addr == 0 {
            addr = $crate::sys::next_symbol(concat!($name, "\0"));
            SLOT.store(addr, core::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: `addr` is 0 or the address of the C function `$name`,
        // whose type `$ty` is; `Option<fn>` is a nullable pointer.
        unsafe { core::mem::transmute::<usize, Option<$ty>>(addr) }
    }};
}
pub(crate) use next;

/// The address of the next definition of `name` (NUL-terminated), or 0.
pub fn next_symbol(name: &str) -> usize {
    // SAFETY: `name` is NUL-terminated; dlsym only reads it.
    unsafe { dlsym(RTLD_NEXT, name.as_ptr().cast()) as usize }
}

/// `errno`.
pub fn errno() -> c_int {
    // SAFETY: the calling thread's errno, always valid.
    unsafe { *__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *__errno_location() = value }
}

/// A C string's bytes (without its NUL); empty for a null pointer.
///
/// # Safety
/// `s` is null or a valid NUL-terminated string that outlives the slice.
pub unsafe fn c_bytes<'a>(s: *const c_char) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    // SAFETY: by the caller's contract.
    unsafe { core::slice::from_raw_parts(s.cast(), strlen(s)) }
}

/// Opens `path` (NUL-terminated) relative to `dirfd` with the system
/// call itself: -1 and errno on failure.
pub fn open_raw(dirfd: c_int, path: &[u8], flags: c_int, mode: Mode) -> c_int {
    // SAFETY: `path` is NUL-terminated (the callers make it so); openat
    // takes its arguments by value.
    unsafe { syscall(SYS_OPENAT, dirfd, path.as_ptr(), flags, mode) as c_int }
}

/// Everything `fd` reads until its end; `None` on an error.
pub fn read_to_end(fd: c_int) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(out.capacity());
        }
        let spare = out.capacity() - out.len();
        // SAFETY: reads into the vector's spare capacity, then counts
        // what was written.
        let n = unsafe { read(fd, out.as_mut_ptr().add(out.len()).cast(), spare) };
        match n {
            0 => return Some(out),
            n if n > 0 => unsafe {
                // SAFETY: the kernel wrote `n` bytes past `len`.
                out.set_len(out.len() + n as usize);
            },
            _ if errno() == EINTR => {}
            _ => return None,
        }
    }
}

/// Reads file `path` (NUL-terminated) whole.
pub fn read_file(path: &[u8]) -> Option<Vec<u8>> {
    let fd = open_raw(AT_FDCWD, path, O_CLOEXEC, 0);
    if fd < 0 {
        return None;
    }
    let text = read_to_end(fd);
    // SAFETY: closing the descriptor opened above.
    unsafe { close(fd) };
    text
}

/// A memfd holding `bytes`, its offset at 0: the descriptor, or -1 with
/// errno.
pub fn memfd_with(name: &[u8], bytes: &[u8], cloexec: bool) -> c_int {
    let flags = if cloexec { MFD_CLOEXEC } else { 0 };
    // SAFETY: `name` is NUL-terminated (the callers' literals).
    let fd = unsafe { memfd_create(name.as_ptr().cast(), flags) };
    if fd < 0 {
        return -1;
    }
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: writes from within `bytes`.
        let n = unsafe { write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done) };
        if n < 0 && errno() == EINTR {
            continue;
        }
        if n <= 0 {
            let e = errno();
            // SAFETY: closing the descriptor made above.
            unsafe { close(fd) };
            set_errno(e);
            return -1;
        }
        done += n as usize;
    }
    // SAFETY: a plain seek on our own descriptor.
    unsafe { lseek(fd, 0, 0) };
    fd
}

/// The value of environment variable `name` (NUL-terminated), if set.
pub fn env(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; the value lives in the
    // environment (as long as no one changes that variable).
    let value = unsafe { getenv(name.as_ptr().cast()) };
    // SAFETY: a NUL-terminated string from getenv.
    (!value.is_null()).then(|| unsafe { c_bytes(value) })
}

/// The mount id of a file (`statx`'s `stx_mnt_id`): `path` (NUL-
/// terminated) or, empty, the descriptor `fd` itself.
pub fn mount_id(fd: c_int, path: &[u8]) -> Option<u64> {
    // `struct statx` is 256 bytes; stx_mask at 0, stx_mnt_id at 144.
    let mut buf = [0u64; 32];
    let (dirfd, path, flags) = if path.is_empty() {
        (fd, &b"\0"[..], AT_EMPTY_PATH)
    } else {
        (AT_FDCWD, path, 0)
    };
    // SAFETY: a NUL-terminated path and a buffer of `struct statx`'s size.
    let rc = unsafe {
        statx(
            dirfd,
            path.as_ptr().cast(),
            flags,
            STATX_MNT_ID,
            buf.as_mut_ptr().cast(),
        )
    };
    let mask = buf[0] as u32;
    (rc == 0 && mask & STATX_MNT_ID != 0).then_some(buf[18])
}
