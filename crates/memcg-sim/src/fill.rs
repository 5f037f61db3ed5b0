//! What a mapping's pages hold, generated so that it can be regenerated
//! for verification without keeping a copy.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a mapping's pages are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fill {
    /// All zeros (never written to swap: the zero bitmap covers them).
    Zero,
    /// Seeded pseudo-random bytes (incompressible, always written).
    Random,
    /// Per-page words naming the page, ending in a checksum of the rest.
    Pattern,
}

impl Fill {
    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Fill::Zero => "zero",
            Fill::Random => "random",
            Fill::Pattern => "pattern",
        }
    }
}

impl std::str::FromStr for Fill {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "zero" => Ok(Fill::Zero),
            "random" => Ok(Fill::Random),
            "pattern" => Ok(Fill::Pattern),
            _ => Err(format!("{s:?} is not a fill (zero, random or pattern)")),
        }
    }
}

/// A stream identifier for a mapping's contents: the simulation seed mixed
/// with the mapping's name, so equal names in different runs match.
pub fn stream(seed: u64, name: &str) -> u64 {
    // FNV-1a: a stable hash (std's hasher is randomly keyed per process).
    name.bytes().fold(0xcbf2_9ce4_8422_2325_u64 ^ seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes page `page` of a mapping with stream `stream` into `buf`.
pub fn fill_page(fill: Fill, stream: u64, page: u64, buf: &mut [u8]) {
    match fill {
        Fill::Zero => buf.fill(0),
        Fill::Random => {
            ChaCha8Rng::seed_from_u64(stream ^ page.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .fill_bytes(buf);
        }
        Fill::Pattern => {
            let words = buf.len() / 8;
            let mut sum = 0u64;
            for (i, chunk) in buf.chunks_exact_mut(8).enumerate() {
                let word = if i + 1 == words {
                    sum
                } else {
                    (page << 32) ^ i as u64 ^ stream
                };
                sum = sum.rotate_left(5) ^ word;
                chunk.copy_from_slice(&word.to_le_bytes());
            }
        }
    }
}

/// What a file written through the page cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFill {
    /// As a mapping's pages ([`Fill`]), page by page.
    Page(Fill),
    /// The output of `seq 1 N`, cut to the size (`seq 8000` is 38893
    /// bytes: seed 002's files).
    Seq,
}

impl std::str::FromStr for FileFill {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "seq" => Ok(FileFill::Seq),
            other => other
                .parse()
                .map(FileFill::Page)
                .map_err(|_| format!("{s:?} is not a fill (zero, random, pattern or seq)")),
        }
    }
}

/// The `size` bytes of a file filled with `fill` from `stream`.
pub fn file_contents(fill: FileFill, stream: u64, size: usize) -> Vec<u8> {
    match fill {
        FileFill::Seq => {
            let mut out = Vec::with_capacity(size + 8);
            let mut n = 1u64;
            while out.len() < size {
                out.extend_from_slice(format!("{n}\n").as_bytes());
                n += 1;
            }
            out.truncate(size);
            out
        }
        FileFill::Page(fill) => {
            let mut out = vec![0; size.next_multiple_of(4096)];
            for (page, buf) in out.chunks_exact_mut(4096).enumerate() {
                fill_page(fill, stream, page as u64, buf);
            }
            out.truncate(size);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_8000_is_seed_002s_file() {
        let text = file_contents(FileFill::Seq, 0, 38893);
        assert!(text.starts_with(b"1\n2\n"));
        assert!(text.ends_with(b"7999\n8000\n"));
    }

    #[test]
    fn fills_are_deterministic_and_distinct() {
        let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
        for fill in [Fill::Random, Fill::Pattern] {
            fill_page(fill, stream(1, "m"), 3, &mut a);
            fill_page(fill, stream(1, "m"), 3, &mut b);
            assert_eq!(a, b, "{fill:?} replays");
            fill_page(fill, stream(1, "m"), 4, &mut b);
            assert_ne!(a, b, "{fill:?} differs per page");
            assert!(a.iter().any(|&x| x != 0));
        }
        fill_page(Fill::Zero, 0, 0, &mut a);
        assert!(a.iter().all(|&x| x == 0));
        assert_eq!("pattern".parse::<Fill>(), Ok(Fill::Pattern));
        assert!("ones".parse::<Fill>().is_err());
    }
}
