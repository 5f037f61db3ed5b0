//! `sysinfo`: the memory a program sees is the simulated machine's
//! (`/proc/meminfo`, which `memcg run` binds over the host's), not the
//! host's: `totalram`, `freeram`, `sharedram`, `bufferram`, `totalswap`
//! and `freeswap` come from it, in bytes (`mem_unit` 1). The rest (uptime,
//! loads, processes) is the host's.

use core::ffi::c_int;

use crate::sys;

/// Offsets in `struct sysinfo` (64-bit): the six memory fields from
/// `totalram`, then `mem_unit`.
const TOTALRAM: usize = 32;
const MEM_UNIT: usize = 104;

/// The value of `key` (`MemTotal:`) in a meminfo text, in bytes.
fn kb(text: &[u8], key: &[u8]) -> Option<u64> {
    let line = text.split(|&b| b == b'\n').find(|l| l.starts_with(key))?;
    let digits = line[key.len()..].iter().skip_while(|b| **b == b' ');
    let mut v: u64 = 0;
    for &b in digits.take_while(|b| b.is_ascii_digit()) {
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    v.checked_mul(1024)
}

/// `sysinfo(2)`, its memory from the machine's `/proc/meminfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sysinfo(info: *mut u8) -> c_int {
    let Some(next) = sys::next!("sysinfo", unsafe extern "C" fn(*mut u8) -> c_int) else {
        return -1;
    };
    // SAFETY: the caller's buffer, filled by the C library first.
    let rc = unsafe { next(info) };
    if rc != 0 || info.is_null() {
        return rc;
    }
    let Some(text) = sys::read_file(b"/proc/meminfo\0") else {
        return rc;
    };
    let fields: [&[u8]; 6] = [
        b"MemTotal:",
        b"MemFree:",
        b"Shmem:",
        b"Buffers:",
        b"SwapTotal:",
        b"SwapFree:",
    ];
    for (i, key) in fields.iter().enumerate() {
        if let Some(bytes) = kb(&text, key) {
            // SAFETY: field `i` of the struct, an unsigned long, unaligned
            // writes for safety's sake.
            unsafe { info.add(TOTALRAM + i * 8).cast::<u64>().write_unaligned(bytes) };
        }
    }
    // SAFETY: `mem_unit`, an unsigned int.
    unsafe { info.add(MEM_UNIT).cast::<u32>().write_unaligned(1) };
    rc
}
