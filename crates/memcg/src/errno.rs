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
    /// Numerical result out of range.
    ERANGE = 34,
    /// File name too long.
    ENAMETOOLONG = 36,
    /// Operation not supported.
    EOPNOTSUPP = 95,
}

impl Errno {
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
            Errno::ENODEV => "ENODEV",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::ERANGE => "ERANGE",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
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
            Errno::ENODEV => "No such device",
            Errno::ENOTDIR => "Not a directory",
            Errno::EISDIR => "Is a directory",
            Errno::EINVAL => "Invalid argument",
            Errno::EFBIG => "File too large",
            Errno::ENOSPC => "No space left on device",
            Errno::ERANGE => "Numerical result out of range",
            Errno::ENAMETOOLONG => "File name too long",
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
