//! `statfs` and `fstatfs` (and their 64-bit names): a file of the
//! machine's FUSE mount reports the filesystem a kernel would have there:
//! `CGROUP2_SUPER_MAGIC` under `/sys/fs/cgroup`, each `--fs` its own
//! (`TMPFS_MAGIC` for `ram:`), procfs's and sysfs's for the kernel files
//! bound over theirs. Only `f_type` changes; a call whose answer is not
//! FUSE's costs nothing more.
//!
//! Which mount a file is on comes from `statx` (`STATX_MNT_ID`, Linux 5.8
//! on), looked up in `/proc/self/mountinfo`. `statvfs` has no type field:
//! it is left alone (its flags are the bind mount's).

use core::ffi::{c_char, c_int, c_long, c_void};

use crate::rewrite::{self, FUSE_SUPER_MAGIC};
use crate::sys::{self, next};

/// Sets `f_type` (the first field of `struct statfs` and `statfs64`) of
/// `buf`, which the C library filled for `path` (NUL-terminated) or, when
/// `path` is empty, descriptor `fd`.
///
/// # Safety
/// `buf` points to a filled `struct statfs` (or `statfs64`).
unsafe fn fix_type(buf: *mut c_void, fd: c_int, path: &[u8]) {
    let f_type = buf.cast::<c_long>();
    // SAFETY: by the caller's contract.
    if unsafe { *f_type } as u64 != FUSE_SUPER_MAGIC {
        return;
    }
    let Some(id) = sys::mount_id(fd, path) else {
        return;
    };
    let Some(info) = sys::read_file(b"/proc/self/mountinfo\0") else {
        return;
    };
    let fs = rewrite::FsTable::parse(sys::env(b"MEMCG_SHIM_FS\0").unwrap_or_default());
    let Some((mount, dev)) = rewrite::find_mount(&info, id) else {
        return;
    };
    if let Some(magic) = rewrite::magic(&mount, dev, &fs) {
        // SAFETY: by the caller's contract.
        unsafe { *f_type = magic as c_long };
    }
}

type StatfsFn = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;
type FstatfsFn = unsafe extern "C" fn(c_int, *mut c_void) -> c_int;

macro_rules! statfs_fns {
    ($($name:ident),*) => {$(
        /// `statfs(2)`, as a kernel would answer it (see the module docs).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, buf: *mut c_void) -> c_int {
            let Some(real) = next!(stringify!($name), StatfsFn) else {
                sys::set_errno(38);
                return -1;
            };
            // SAFETY: the caller's arguments, passed on as given.
            let rc = unsafe { real(path, buf) };
            if rc == 0 {
                // SAFETY: `path` is a valid C string (the call succeeded)
                // and `buf` was filled.
                unsafe {
                    let bytes = sys::c_bytes(path);
                    let with_nul = core::slice::from_raw_parts(path.cast(), bytes.len() + 1);
                    fix_type(buf, -1, with_nul);
                }
            }
            rc
        }
    )*};
}
statfs_fns!(statfs, statfs64);

macro_rules! fstatfs_fns {
    ($($name:ident),*) => {$(
        /// `fstatfs(2)`, as a kernel would answer it (see the module docs).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, buf: *mut c_void) -> c_int {
            let Some(real) = next!(stringify!($name), FstatfsFn) else {
                sys::set_errno(38);
                return -1;
            };
            // SAFETY: the caller's arguments, passed on as given.
            let rc = unsafe { real(fd, buf) };
            if rc == 0 {
                // SAFETY: `buf` was filled.
                unsafe { fix_type(buf, fd, b"") };
            }
            rc
        }
    )*};
}
fstatfs_fns!(fstatfs, fstatfs64);
