//! Kernel error numbers, so every failure can be reported the way the kernel
//! reports it to userspace (`write error: Device or resource busy`).
//!
//! Typed errors elsewhere in the crate carry the detail; each maps onto one
//! [`Errno`] through its `errno()` method.

use std::fmt;

/// A Linux `errno` value, limited to the ones memory cgroups return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Errno {
    /// Operation not permitted.
    EPERM = 1,
    /// No such file or directory.
    ENOENT = 2,
    /// No such process.
    ESRCH = 3,
    /// Interrupted system call.
    EINTR = 4,
    /// Input/output error.
    EIO = 5,
    /// Argument list too long (a write longer than a file takes at once).
    E2BIG = 7,
    /// Bad file descriptor (not open for that).
    EBADF = 9,
    /// Try again.
    EAGAIN = 11,
    /// Out of memory.
    ENOMEM = 12,
    /// Permission denied.
    EACCES = 13,
    /// Device or resource busy.
    EBUSY = 16,
    /// File exists.
    EEXIST = 17,
    /// Invalid cross-device link (a rename or link between filesystems).
    EXDEV = 18,
    /// No such device (a file of a removed cgroup).
    ENODEV = 19,
    /// Not a directory.
    ENOTDIR = 20,
    /// Is a directory.
    EISDIR = 21,
    /// Invalid argument.
    EINVAL = 22,
    /// File too large.
    EFBIG = 27,
    /// No space left on device.
    ENOSPC = 28,
    /// Too many links (hard links of a file, or subdirectories).
    EMLINK = 31,
    /// Numerical result out of range.
    ERANGE = 34,
    /// File name too long.
    ENAMETOOLONG = 36,
    /// Directory not empty.
    ENOTEMPTY = 39,
    /// Too many levels of symbolic links.
    ELOOP = 40,
    /// Operation not supported.
    EOPNOTSUPP = 95,
}

impl Errno {
    /// Every errno this crate reports, for [`Errno::from_code`].
    const ALL: [Errno; 25] = [
        Errno::EPERM,
        Errno::ENOENT,
        Errno::ESRCH,
        Errno::EINTR,
        Errno::EIO,
        Errno::E2BIG,
        Errno::EBADF,
        Errno::EAGAIN,
        Errno::ENOMEM,
        Errno::EACCES,
        Errno::EBUSY,
        Errno::EEXIST,
        Errno::EXDEV,
        Errno::ENODEV,
        Errno::ENOTDIR,
        Errno::EISDIR,
        Errno::EINVAL,
        Errno::EFBIG,
        Errno::ENOSPC,
        Errno::EMLINK,
        Errno::ERANGE,
        Errno::ENAMETOOLONG,
        Errno::ENOTEMPTY,
        Errno::ELOOP,
        Errno::EOPNOTSUPP,
    ];

    /// The errno numbered `code`, if it is one this crate reports.
    pub fn from_code(code: i32) -> Option<Errno> {
        Self::ALL.into_iter().find(|e| e.code() == code)
    }

    /// The errno of a failed host system call (`EIO` for one this crate
    /// does not report, or for an error that carries none).
    pub fn from_io(error: &std::io::Error) -> Errno {
        error
            .raw_os_error()
            .and_then(Errno::from_code)
            .unwrap_or(Errno::EIO)
    }

    /// The positive errno number, as `errno(3)` shows it.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The symbolic name (`"EBUSY"`).
    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::ESRCH => "ESRCH",
            Errno::EINTR => "EINTR",
            Errno::EIO => "EIO",
            Errno::E2BIG => "E2BIG",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::EXDEV => "EXDEV",
            Errno::ENODEV => "ENODEV",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::EMLINK => "EMLINK",
            Errno::ERANGE => "ERANGE",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
            Errno::ENOTEMPTY => "ENOTEMPTY",
            Errno::ELOOP => "ELOOP",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
        }
    }

    /// The message glibc's `strerror` prints for it.
    pub fn message(self) -> &'static str {
        match self {
            Errno::EPERM => "Operation not permitted",
            Errno::ENOENT => "No such file or directory",
            Errno::ESRCH => "No such process",
            Errno::EINTR => "Interrupted system call",
            Errno::EIO => "Input/output error",
            Errno::E2BIG => "Argument list too long",
            Errno::EBADF => "Bad file descriptor",
            Errno::EAGAIN => "Resource temporarily unavailable",
            Errno::ENOMEM => "Cannot allocate memory",
            Errno::EACCES => "Permission denied",
            Errno::EBUSY => "Device or resource busy",
            Errno::EEXIST => "File exists",
            Errno::EXDEV => "Invalid cross-device link",
            Errno::ENODEV => "No such device",
            Errno::ENOTDIR => "Not a directory",
            Errno::EISDIR => "Is a directory",
            Errno::EINVAL => "Invalid argument",
            Errno::EFBIG => "File too large",
            Errno::ENOSPC => "No space left on device",
            Errno::EMLINK => "Too many links",
            Errno::ERANGE => "Numerical result out of range",
            Errno::ENAMETOOLONG => "File name too long",
            Errno::ENOTEMPTY => "Directory not empty",
            Errno::ELOOP => "Too many levels of symbolic links",
            Errno::EOPNOTSUPP => "Operation not supported",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_linux_asm_generic() {
        assert_eq!(Errno::EBUSY.code(), 16);
        assert_eq!(Errno::EINVAL.code(), 22);
        assert_eq!(Errno::ENOSPC.code(), 28);
        assert_eq!(Errno::EBUSY.to_string(), "Device or resource busy");
        assert_eq!(Errno::ENOENT.name(), "ENOENT");
    }
}
