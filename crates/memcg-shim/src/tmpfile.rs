//! `O_TMPFILE` on the `--fs` filesystems, which FUSE cannot serve here
//! (the server's FUSE library has no `FUSE_TMPFILE`): where the kernel
//! refuses it (`EOPNOTSUPP`) in a directory of the machine's FUSE mount,
//! a uniquely named file is made there with `O_EXCL`, unlinked at once,
//! and its descriptor returned: an unnamed file, as `O_TMPFILE` makes.
//!
//! The limit: it can never be given a name again (`linkat` through
//! `/proc/self/fd/N` or `AT_EMPTY_PATH` fails with `ENOENT`), where a real
//! `O_TMPFILE` without `O_EXCL` may be linked in.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::paths::push_decimal;
use crate::rewrite::FUSE_SUPER_MAGIC;
use crate::sys::{self, Mode};

#[cfg(target_arch = "x86_64")]
const SYS_FSTATFS: core::ffi::c_long = 138;
#[cfg(target_arch = "aarch64")]
const SYS_FSTATFS: core::ffi::c_long = 44;

/// Names made so far by this process (with its pid, unique).
static MADE: AtomicU32 = AtomicU32::new(0);

/// Whether directory `fd` is on a FUSE filesystem.
fn on_fuse(fd: c_int) -> bool {
    // `struct statfs`: f_type first; 120 bytes on 64-bit targets.
    let mut buf = [0i64; 15];
    // SAFETY: an open descriptor and a buffer of `struct statfs`'s size.
    let rc = unsafe { sys::syscall(SYS_FSTATFS, fd, buf.as_mut_ptr()) };
    rc == 0 && buf[0] as u64 == FUSE_SUPER_MAGIC
}

/// Makes and unlinks a file in directory `dir` (`path` relative to
/// `dirfd`) for an `O_TMPFILE` open with `flags` and `mode`: its
/// descriptor, or `None` (errno set) where it is no FUSE directory or
/// none could be made.
pub fn emulate(dirfd: c_int, path: &[u8], flags: c_int, mode: Mode) -> Option<c_int> {
    let mut dir_path = alloc::vec::Vec::with_capacity(path.len() + 1);
    dir_path.extend_from_slice(path);
    dir_path.push(0);
    let dir = sys::open_raw(
        dirfd,
        &dir_path,
        sys::O_PATH | sys::O_DIRECTORY | sys::O_CLOEXEC,
        0,
    );
    if dir < 0 {
        return None;
    }
    let fd = if on_fuse(dir) {
        make_unnamed(dir, flags, mode)
    } else {
        None
    };
    // SAFETY: closing the directory opened above.
    unsafe { sys::close(dir) };
    fd
}

/// A file made in `dir` and unlinked, with a fresh name each try.
fn make_unnamed(dir: c_int, flags: c_int, mode: Mode) -> Option<c_int> {
    let flags = (flags & !sys::O_TMPFILE) | sys::O_CREAT | sys::O_EXCL;
    for _ in 0..64 {
        let mut name = alloc::vec::Vec::with_capacity(48);
        name.extend_from_slice(b".memcg-tmpfile-");
        // SAFETY: getpid cannot fail.
        push_decimal(&mut name, unsafe { sys::getpid() } as u64);
        name.push(b'-');
        push_decimal(&mut name, u64::from(MADE.fetch_add(1, Ordering::Relaxed)));
        name.push(0);
        let fd = sys::open_raw(dir, &name, flags, mode);
        if fd >= 0 {
            // SAFETY: a NUL-terminated name in our open directory.
            unsafe { sys::unlinkat(dir, name.as_ptr().cast(), 0) };
            return Some(fd);
        }
        if sys::errno() != sys::EEXIST {
            return None;
        }
    }
    None
}
