//! `open` and `fopen` and their variants: the procfs files that show
//! mounts and cgroups are answered as a kernel would under `memcg run`,
//! and `O_TMPFILE` works on the `--fs` filesystems; every other call goes
//! straight to the C library after a check of the path's first bytes.
//!
//! - `mounts` and `mountinfo` (`/proc/self`, `/proc/PID`,
//!   `/proc/thread-self`, `/proc/mounts`, `/etc/mtab` where it is the
//!   usual symlink to them): the real file is read and rewritten
//!   ([`crate::rewrite`]); the caller gets a memfd holding the result, a
//!   real descriptor (read, seek, mmap, fstat and close work), whose
//!   contents are those of the moment of the open (procfs renders at each
//!   read from the start) and which `poll(2)` does not wake on mount
//!   changes.
//! - `/proc/cgroups`: every controller on hierarchy 0 (no v1 hierarchy),
//!   by memfd likewise.
//! - `cgroup` (`/proc/self`, `/proc/PID`, `/proc/thread-self`,
//!   `/proc/PID/task/TID`): the descriptor of the machine's hidden file
//!   `/sys/fs/cgroup/.memcg/ID/cgroup`, which the server renders for the
//!   task with that id in the reader's pid namespace.
//!
//! Only opens for reading are answered (`O_RDONLY` without `O_CREAT`,
//! `O_PATH` or `O_DIRECTORY`), with an absolute path; where the shim
//! cannot answer (no machine mounted, a file it cannot read), the call
//! goes on to the C library as if the shim were not there.

use core::ffi::{c_char, c_int};

use crate::paths::{self, Shows, Whose};
use crate::rewrite::{self, FsTable};
use crate::sys::{self, File, Mode, next};

/// Whether the NUL-terminated `path` starts as one of ours does: reads at
/// most six bytes.
///
/// # Safety
/// `path` is null or a valid NUL-terminated string.
#[inline]
unsafe fn may_be_ours(path: *const c_char) -> bool {
    if path.is_null() {
        return false;
    }
    let mut head = [0u8; 6];
    for (i, byte) in head.iter_mut().enumerate() {
        // SAFETY: stops at the NUL, so never reads past the string.
        let b = unsafe { *path.add(i) } as u8;
        if b == 0 {
            return false;
        }
        *byte = b;
    }
    &head == b"/proc/" || &head == b"/etc/m"
}

/// The `--fs` filesystems `memcg run` described.
fn fs_table() -> FsTable {
    FsTable::parse(sys::env(b"MEMCG_SHIM_FS\0").unwrap_or_default())
}

/// Whether `/etc/mtab` is the usual symlink into `/proc`.
fn mtab_is_procs() -> bool {
    let mut buf = [0u8; 64];
    // SAFETY: a NUL-terminated path and a buffer of its length.
    let n = unsafe { sys::readlink(c"/etc/mtab".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    n > 0 && buf[..n as usize].ends_with(b"/mounts")
}

/// The rewritten mounts file of `whose`: `None` when there is nothing to
/// rewrite (no machine there) or it could not be read.
fn mounts_text(shows: Shows, whose: Whose) -> Option<alloc::vec::Vec<u8>> {
    let fs = fs_table();
    let info_path = paths::proc_file(whose, "mountinfo");
    if shows == Shows::MountInfo {
        let info = sys::read_file(&info_path)?;
        rewrite::machine_dev(&info)?;
        return Some(rewrite::rewrite_mountinfo(&info, &fs));
    }
    let mounts_path = paths::proc_file(whose, "mounts");
    // A mount made or gone between the two reads spoils the pairing:
    // read both again.
    for _ in 0..8 {
        let mounts = sys::read_file(&mounts_path)?;
        let info = sys::read_file(&info_path)?;
        rewrite::machine_dev(&info)?;
        if let Some(text) = rewrite::rewrite_mounts(&mounts, &info, &fs) {
            return Some(text);
        }
    }
    None
}

/// The machine's descriptor for `/proc/ID/cgroup`: `None` if it has none
/// (no machine here).
fn cgroup_fd(whose: Whose, flags: c_int) -> Option<c_int> {
    let id = match whose {
        // SAFETY: getpid and gettid cannot fail.
        Whose::OwnProcess => (unsafe { sys::getpid() }) as u32,
        // SAFETY: as above.
        Whose::OwnThread => (unsafe { sys::gettid() }) as u32,
        Whose::Id(id) => id,
    };
    let fd = sys::open_raw(
        sys::AT_FDCWD,
        &paths::cgroup_file(id),
        flags & sys::O_CLOEXEC,
        0,
    );
    (fd >= 0).then_some(fd)
}

/// The shim's answer to an open of `path` with `flags`: a descriptor (or
/// -1 with errno), or `None` to let the C library open it.
///
/// # Safety
/// `path` is null or a valid NUL-terminated string.
pub unsafe fn answer(path: *const c_char, flags: c_int) -> Option<c_int> {
    // SAFETY: by the caller's contract.
    if !unsafe { may_be_ours(path) } {
        return None;
    }
    let refused = sys::O_ACCMODE | sys::O_CREAT | sys::O_PATH | sys::O_DIRECTORY;
    if flags & refused != 0 {
        return None;
    }
    // SAFETY: by the caller's contract.
    let bytes = unsafe { sys::c_bytes(path) };
    let target = paths::classify(bytes)?;
    if bytes == b"/etc/mtab" && !mtab_is_procs() {
        return None;
    }
    match target.shows {
        Shows::Cgroup => cgroup_fd(target.whose, flags),
        Shows::Controllers => {
            let info = sys::read_file(b"/proc/self/mountinfo\0")?;
            rewrite::machine_dev(&info)?;
            let text = rewrite::rewrite_controllers(&sys::read_file(b"/proc/cgroups\0")?);
            Some(sys::memfd_with(
                b"cgroups\0",
                &text,
                flags & sys::O_CLOEXEC != 0,
            ))
        }
        shows => {
            let text = mounts_text(shows, target.whose)?;
            let name: &[u8] = if shows == Shows::Mounts {
                b"mounts\0"
            } else {
                b"mountinfo\0"
            };
            Some(sys::memfd_with(name, &text, flags & sys::O_CLOEXEC != 0))
        }
    }
}

/// `open(2)` flags for an `fopen` mode, if it opens for reading only.
///
/// # Safety
/// `mode` is null or a valid NUL-terminated string.
unsafe fn read_flags(mode: *const c_char) -> Option<c_int> {
    // SAFETY: by the caller's contract.
    let mode = unsafe { sys::c_bytes(mode) };
    if !mode.starts_with(b"r") || mode.contains(&b'+') {
        return None;
    }
    Some(if mode.contains(&b'e') {
        sys::O_CLOEXEC
    } else {
        0
    })
}

/// The shim's answer to an `fopen` of `path` with `mode`: the descriptor
/// (or -1 with errno), or `None` to let the C library open it.
///
/// # Safety
/// `path` and `mode` are null or valid NUL-terminated strings.
unsafe fn answer_stdio(path: *const c_char, mode: *const c_char) -> Option<c_int> {
    // SAFETY: by the caller's contract.
    if !unsafe { may_be_ours(path) } {
        return None;
    }
    // SAFETY: by the caller's contract.
    let flags = unsafe { read_flags(mode) }?;
    // SAFETY: by the caller's contract.
    unsafe { answer(path, flags) }
}

/// A stream over `fd` (-1: none, errno set), closing `fd` if none can be
/// made.
///
/// # Safety
/// `mode` is a valid NUL-terminated string.
unsafe fn stream(fd: c_int, mode: *const c_char) -> *mut File {
    if fd < 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: a descriptor we own and a valid mode.
    let file = unsafe { sys::fdopen(fd, mode) };
    if file.is_null() {
        let e = sys::errno();
        // SAFETY: closing the descriptor no stream took.
        unsafe { sys::close(fd) };
        sys::set_errno(e);
    }
    file
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type OpenAt2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut File;
type FreopenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut File) -> *mut File;

/// -1 with `ENOSYS`: the C library has no such function.
fn missing() -> c_int {
    sys::set_errno(38);
    -1
}

/// An open through the C library's `real`, then `O_TMPFILE` emulated
/// where the filesystem refused it ([`crate::tmpfile`]).
///
/// # Safety
/// `path` is null or a valid NUL-terminated string.
unsafe fn open_with(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: Mode,
    real: impl FnOnce() -> c_int,
) -> c_int {
    // SAFETY: by the caller's contract.
    if let Some(fd) = unsafe { answer(path, flags) } {
        return fd;
    }
    let fd = real();
    if fd < 0 && flags & sys::O_TMPFILE == sys::O_TMPFILE && sys::errno() == sys::EOPNOTSUPP {
        // SAFETY: by the caller's contract.
        let bytes = unsafe { sys::c_bytes(path) };
        return crate::tmpfile::emulate(dirfd, bytes, flags, mode).unwrap_or_else(|| {
            sys::set_errno(sys::EOPNOTSUPP);
            -1
        });
    }
    fd
}

macro_rules! open_fns {
    ($($name:ident),*) => {$(
        /// `open(2)`, as the shim answers it (see the module docs).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: Mode) -> c_int {
            let next = next!(stringify!($name), OpenFn);
            // SAFETY: the caller's arguments, passed on as given.
            unsafe {
                open_with(sys::AT_FDCWD, path, flags, mode, || match next {
                    Some(real) => real(path, flags, mode),
                    None => missing(),
                })
            }
        }
    )*};
}
open_fns!(open, open64);

macro_rules! openat_fns {
    ($($name:ident),*) => {$(
        /// `openat(2)`, as the shim answers it (see the module docs).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            flags: c_int,
            mode: Mode,
        ) -> c_int {
            let next = next!(stringify!($name), OpenAtFn);
            // SAFETY: the caller's arguments, passed on as given.
            unsafe {
                open_with(dirfd, path, flags, mode, || match next {
                    Some(real) => real(dirfd, path, flags, mode),
                    None => missing(),
                })
            }
        }
    )*};
}
openat_fns!(openat, openat64);

macro_rules! open2_fns {
    ($($name:ident),*) => {$(
        /// The fortified `open` (no mode: no `O_CREAT` or `O_TMPFILE`).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int) -> c_int {
            // SAFETY: by the caller's contract.
            if let Some(fd) = unsafe { answer(path, flags) } {
                return fd;
            }
            match next!(stringify!($name), Open2Fn) {
                // SAFETY: the caller's arguments, passed on as given.
                Some(real) => unsafe { real(path, flags) },
                None => missing(),
            }
        }
    )*};
}
open2_fns!(__open_2, __open64_2);

macro_rules! openat2_fns {
    ($($name:ident),*) => {$(
        /// The fortified `openat` (no mode).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
            // SAFETY: by the caller's contract.
            if let Some(fd) = unsafe { answer(path, flags) } {
                return fd;
            }
            match next!(stringify!($name), OpenAt2Fn) {
                // SAFETY: the caller's arguments, passed on as given.
                Some(real) => unsafe { real(dirfd, path, flags) },
                None => missing(),
            }
        }
    )*};
}
openat2_fns!(__openat_2, __openat64_2);

macro_rules! fopen_fns {
    ($($name:ident: $lock:expr),*) => {$(
        /// `fopen(3)` (or `setmntent(3)`, whose stream the caller locks
        /// itself), as the shim answers it (see the module docs).
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char) -> *mut File {
            // SAFETY: by the caller's contract.
            if let Some(fd) = unsafe { answer_stdio(path, mode) } {
                // SAFETY: a descriptor of ours and the caller's mode.
                let file = unsafe { stream(fd, mode) };
                if $lock && !file.is_null() {
                    // SAFETY: a stream just made (FSETLOCKING_BYCALLER).
                    unsafe { sys::__fsetlocking(file, 2) };
                }
                return file;
            }
            match next!(stringify!($name), FopenFn) {
                // SAFETY: the caller's arguments, passed on as given.
                Some(real) => unsafe { real(path, mode) },
                None => {
                    missing();
                    core::ptr::null_mut()
                }
            }
        }
    )*};
}
fopen_fns!(fopen: false, fopen64: false, setmntent: true);

macro_rules! freopen_fns {
    ($($name:ident),*) => {$(
        /// `freopen(3)`: the stream is reopened by the C library, then
        /// its descriptor replaced by the shim's answer.
        ///
        /// # Safety
        /// As the C function's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            path: *const c_char,
            mode: *const c_char,
            old: *mut File,
        ) -> *mut File {
            // SAFETY: by the caller's contract.
            let answer = unsafe { answer_stdio(path, mode) };
            let Some(real) = next!(stringify!($name), FreopenFn) else {
                missing();
                return core::ptr::null_mut();
            };
            // SAFETY: the caller's arguments, passed on as given.
            let file = unsafe { real(path, mode, old) };
            if let Some(fd) = answer.filter(|&fd| fd >= 0) {
                if !file.is_null() {
                    // SAFETY: the stream's descriptor now refers to our
                    // file; ours is closed.
                    unsafe { sys::dup2(fd, sys::fileno(file)) };
                }
                // SAFETY: closing our own descriptor.
                unsafe { sys::close(fd) };
            }
            file
        }
    )*};
}
freopen_fns!(freopen, freopen64);
