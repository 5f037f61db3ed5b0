//! What a mapping's pages hold, generated so that it can be regenerated
//! for verification without keeping a copy.

use rand::{Rng, RngExt, SeedableRng};
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
    /// Seeded source-code-like text: compresses about 3:1, as a build's
    /// memory does.
    Text,
    /// One non-zero byte per page, the rest zero (what `test_zswap.c`
    /// writes): compresses to almost nothing, but is not a zero page.
    Sparse,
    /// The first half of each page the bytes 0, 1, 2, ... (wrapping), the
    /// rest zero (`test_zswap.c`'s writeback test): compressible, with a
    /// material compressed size.
    Half,
}

impl Fill {
    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Fill::Zero => "zero",
            Fill::Random => "random",
            Fill::Pattern => "pattern",
            Fill::Text => "text",
            Fill::Sparse => "sparse",
            Fill::Half => "half",
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
            "text" => Ok(Fill::Text),
            "sparse" => Ok(Fill::Sparse),
            "half" => Ok(Fill::Half),
            _ => Err(format!(
                "{s:?} is not a fill (zero, random, pattern, text, sparse or half)"
            )),
        }
    }
}

/// Lines of source code that `Fill::Text` strings together.
const LINES: [&str; 16] = [
    "let nr_pages = folio.nr();",
    "if memcg.is_root() {",
    "return Err(Errno::ENOMEM);",
    "for page in bytes.chunks_exact(PAGE_BYTES) {",
    "let entry = swap.alloc(order)?;",
    "}",
    "self.count.fetch_add(1, Ordering::Relaxed);",
    "match lruvec.isolate(list, nr_to_scan) {",
    "let mut lists = lock(&self.lists);",
    "debug_assert!(was == list as u8);",
    "memcg.mod_stat(MemcgStat::File, nr);",
    "Some(folio) => folio,",
    "None => continue,",
    "pub fn charge(&self, nr_pages: u64) {",
    "// Relaxed: a statistic.",
    "let shadow = workingset_eviction(folio, target);",
];

/// Seeded lines of code, indented, each with a number that varies: about
/// 3:1 under LZ4, as a kernel build's memory is.
fn fill_text(stream: u64, page: u64, buf: &mut [u8]) {
    let mut rng = ChaCha8Rng::seed_from_u64(stream ^ page.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut text = Vec::with_capacity(buf.len() + 128);
    while text.len() < buf.len() {
        let indent = rng.random_range(0..4) * 4;
        text.extend(std::iter::repeat_n(b' ', indent));
        text.extend_from_slice(LINES[rng.random_range(0..LINES.len())].as_bytes());
        text.extend_from_slice(format!(" // {}\n", rng.random_range(0..100_000u32)).as_bytes());
    }
    buf.copy_from_slice(&text[..buf.len()]);
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
        Fill::Text => fill_text(stream, page, buf),
        Fill::Sparse => {
            buf.fill(0);
            let mix = (stream ^ page.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as usize;
            buf[mix % buf.len()] = 1 + (mix % 255) as u8;
        }
        Fill::Half => {
            let half = buf.len() / 2;
            for (i, b) in buf.iter_mut().enumerate() {
                *b = if i < half { i as u8 } else { 0 };
            }
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

/// The bytes of a file filled with `fill` from `stream`, produced in
/// order and in pieces of any length, so that a large file is never held
/// whole.
#[derive(Debug, Clone)]
pub struct FileBytes {
    fill: FileFill,
    stream: u64,
    /// Bytes produced so far.
    offset: u64,
    /// `seq`: the next number, and what is left of the current line.
    next_line: u64,
    line: Vec<u8>,
    /// A page fill's current page.
    page: Vec<u8>,
}

impl FileBytes {
    /// The bytes from the start of the file.
    pub fn new(fill: FileFill, stream: u64) -> Self {
        Self {
            fill,
            stream,
            offset: 0,
            next_line: 1,
            line: Vec::new(),
            page: Vec::new(),
        }
    }

    /// Fills `buf` with the next `buf.len()` bytes.
    pub fn next_into(&mut self, buf: &mut [u8]) {
        match self.fill {
            FileFill::Seq => {
                let mut done = 0;
                while done < buf.len() {
                    if self.line.is_empty() {
                        self.line = format!("{}\n", self.next_line).into_bytes();
                        self.line.reverse();
                        self.next_line += 1;
                    }
                    while done < buf.len() {
                        let Some(b) = self.line.pop() else { break };
                        buf[done] = b;
                        done += 1;
                    }
                }
            }
            FileFill::Page(fill) => {
                for b in buf.iter_mut() {
                    let in_page = (self.offset % 4096) as usize;
                    if in_page == 0 || self.page.is_empty() {
                        self.page.resize(4096, 0);
                        fill_page(fill, self.stream, self.offset / 4096, &mut self.page);
                    }
                    *b = self.page[in_page];
                    self.offset += 1;
                }
                return;
            }
        }
        self.offset += buf.len() as u64;
    }
}

/// The `size` bytes of a file filled with `fill` from `stream`.
pub fn file_contents(fill: FileFill, stream: u64, size: usize) -> Vec<u8> {
    let mut out = vec![0; size];
    FileBytes::new(fill, stream).next_into(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_compresses_about_three_to_one_and_sparse_far_more() {
        let mut page = vec![0u8; 4096];
        let (mut text, mut sparse) = (0, 0);
        for p in 0..64 {
            fill_page(Fill::Text, 5, p, &mut page);
            text += lz4_flex::block::compress(&page).len();
            fill_page(Fill::Sparse, 5, p, &mut page);
            assert_eq!(page.iter().filter(|&&b| b != 0).count(), 1);
            sparse += lz4_flex::block::compress(&page).len();
        }
        let ratio = (64 * 4096) as f64 / text as f64;
        assert!((2.3..4.5).contains(&ratio), "text compresses {ratio:.2}:1");
        assert!(sparse < 64 * 64, "sparse: {sparse} bytes");
    }

    #[test]
    fn file_bytes_in_pieces_equal_the_whole() {
        for fill in [
            FileFill::Seq,
            FileFill::Page(Fill::Pattern),
            FileFill::Page(Fill::Random),
        ] {
            let whole = file_contents(fill, 9, 20000);
            let mut bytes = FileBytes::new(fill, 9);
            let mut pieces = Vec::new();
            for len in [1, 7, 4096, 5000, 10896] {
                let mut buf = vec![0; len];
                bytes.next_into(&mut buf);
                pieces.extend(buf);
            }
            assert_eq!(pieces, whole, "{fill:?}");
        }
    }

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
