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
    /// Input/output error.
    EIO = 5,
    /// Out of memory.
    ENOMEM = 12,
    /// Permission denied.
    EACCES = 13,
    /// Device or resource busy.
    EBUSY = 16,
    /// File exists.
    EEXIST = 17,
    /// Is a directory.
    EISDIR = 21,
    /// Invalid argument.
    EINVAL = 22,
    /// No space left on device.
    ENOSPC = 28,
    /// Numerical result out of range.
    ERANGE = 34,
    /// File name too long.
    ENAMETOOLONG = 36,
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
            Errno::EIO => "EIO",
            Errno::EISDIR => "EISDIR",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::EINVAL => "EINVAL",
            Errno::ENOSPC => "ENOSPC",
            Errno::ERANGE => "ERANGE",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
        }
    }

    /// The message glibc's `strerror` prints for it.
    pub fn message(self) -> &'static str {
        match self {
            Errno::EPERM => "Operation not permitted",
            Errno::ENOENT => "No such file or directory",
            Errno::ESRCH => "No such process",
            Errno::EIO => "Input/output error",
            Errno::EISDIR => "Is a directory",
            Errno::ENOMEM => "Cannot allocate memory",
            Errno::EACCES => "Permission denied",
            Errno::EBUSY => "Device or resource busy",
            Errno::EEXIST => "File exists",
            Errno::EINVAL => "Invalid argument",
            Errno::ENOSPC => "No space left on device",
            Errno::ERANGE => "Numerical result out of range",
            Errno::ENAMETOOLONG => "File name too long",
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
