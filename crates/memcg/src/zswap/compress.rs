//! zswap's compressors and their reusable state.
//!
//! The kernel compresses through the crypto API with one context and one
//! two-page output buffer per CPU (`acomp_ctx`), so a store allocates
//! nothing. Here output buffers and zstd's contexts (which cost an
//! allocation of tens of KiB each to make) are kept in small free lists:
//! a store takes one, uses it, and puts it back, so that there are about
//! as many as threads storing at once. (A buffer on the stack would have
//! to be zeroed on every store: a tenth of LZ4's time on a mostly-zero
//! page, measured with `memcg bench zswap`.) LZ4 (`lz4_flex`) keeps no
//! state between pages.
//!
//! Locking: each free list has its own mutex, held only to pop or push.

use crate::mm_types::PAGE_BYTES;
use crate::sync::{Mutex, lock};

/// The compressors zswap can use (`compressor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compressor {
    /// LZ4 (`lz4_flex`), the default here.
    Lz4,
    /// Zstandard at the kernel crypto API's default level 3 (`zstd`).
    Zstd,
}

impl Compressor {
    /// The name `/sys/module/zswap/parameters/compressor` shows.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Lz4 => "lz4",
            Compressor::Zstd => "zstd",
        }
    }

    /// The compressor of that name, if built in.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "lz4" => Some(Compressor::Lz4),
            "zstd" => Some(Compressor::Zstd),
            _ => None,
        }
    }
}

/// Bytes of the output buffer a page is compressed into: two pages, as
/// the kernel's (room for LZ4's worst case, a page and a tenth).
pub(super) const OUT_BYTES: usize = 2 * PAGE_BYTES;

/// The zstd level the crypto API uses by default.
const ZSTD_LEVEL: i32 = 3;

/// Reusable compressor state (see the module docs).
#[derive(Default)]
pub(super) struct Codecs {
    buffers: Mutex<Vec<Box<[u8; OUT_BYTES]>>>,
    zstd_compressors: Mutex<Vec<zstd::bulk::Compressor<'static>>>,
    zstd_decompressors: Mutex<Vec<zstd::bulk::Decompressor<'static>>>,
}

impl Codecs {
    /// Compresses `page` with `compressor` and calls `f` with the result:
    /// the compressed bytes, or `None` if they take more than a page (the
    /// page is refused as incompressible).
    pub(super) fn compress<R>(
        &self,
        compressor: Compressor,
        page: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> R {
        let mut out = lock(&self.buffers)
            .pop()
            .unwrap_or_else(|| Box::new([0; OUT_BYTES]));
        let len = self.compress_into(compressor, page, &mut out);
        let result = f(len.filter(|&n| n <= PAGE_BYTES).map(|n| &out[..n]));
        lock(&self.buffers).push(out);
        result
    }

    fn compress_into(
        &self,
        compressor: Compressor,
        page: &[u8],
        out: &mut [u8; OUT_BYTES],
    ) -> Option<usize> {
        match compressor {
            Compressor::Lz4 => lz4_flex::block::compress_into(page, out).ok(),
            Compressor::Zstd => {
                let mut ctx = match lock(&self.zstd_compressors).pop() {
                    Some(ctx) => ctx,
                    None => zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?,
                };
                let n = ctx.compress_to_buffer(page, &mut out[..]).ok();
                lock(&self.zstd_compressors).push(ctx);
                n
            }
        }
    }

    /// Decompresses `compressed` (made by `compressor`) into `page`; true
    /// if it filled the page exactly.
    pub(super) fn decompress(
        &self,
        compressor: Compressor,
        compressed: &[u8],
        page: &mut [u8],
    ) -> bool {
        let n = match compressor {
            Compressor::Lz4 => lz4_flex::block::decompress_into(compressed, page).ok(),
            Compressor::Zstd => {
                let mut ctx = match lock(&self.zstd_decompressors).pop() {
                    Some(ctx) => ctx,
                    None => match zstd::bulk::Decompressor::new() {
                        Ok(ctx) => ctx,
                        Err(_) => return false,
                    },
                };
                let n = ctx.decompress_to_buffer(compressed, page).ok();
                lock(&self.zstd_decompressors).push(ctx);
                n
            }
        };
        n == Some(PAGE_BYTES)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn both_compressors_round_trip_and_refuse_noise() {
        let codecs = Codecs::default();
        let text: Vec<u8> = (0..PAGE_BYTES).map(|i| b"let x = 1;\n"[i % 11]).collect();
        // xorshift64: bytes no compressor finds a pattern in.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..PAGE_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for c in [Compressor::Lz4, Compressor::Zstd] {
            let compressed = codecs.compress(c, &text, |out| out.unwrap().to_vec());
            assert!(
                compressed.len() < PAGE_BYTES / 4,
                "{c:?}: {}",
                compressed.len()
            );
            let mut page = vec![0u8; PAGE_BYTES];
            assert!(codecs.decompress(c, &compressed, &mut page));
            assert_eq!(page, text);
            assert!(!codecs.decompress(c, &compressed[..compressed.len() - 1], &mut page));
            assert!(
                codecs.compress(c, &noise, |out| out.is_none()),
                "{c:?}: noise"
            );
        }
        // The buffer and the contexts went back for the next store.
        assert_eq!(lock(&codecs.buffers).len(), 1);
        assert_eq!(lock(&codecs.zstd_compressors).len(), 1);
        assert_eq!(lock(&codecs.zstd_decompressors).len(), 1);
    }
}
