//! The README's library snippet ("Use it as a library") is the crate
//! root's first doctest, line for line (less the doctest's hidden lines),
//! so what the README shows compiles and its assertions hold: `cargo test
//! --doc` runs that doctest.

use std::path::Path;

/// The lines of the first fenced block after `start` in `text`, fences
/// excluded.
fn first_block<'a>(mut lines: impl Iterator<Item = &'a str>, start: &str) -> Vec<&'a str> {
    lines
        .by_ref()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with {start:?}"));
    lines
        .by_ref()
        .find(|l| l.starts_with("```"))
        .expect("a block");
    lines.take_while(|l| *l != "```").collect()
}

#[test]
fn the_readme_library_snippet_is_the_crate_root_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let docs = lib.lines().filter_map(|l| {
        l.strip_prefix("//!")
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
    });
    let doctest: Vec<&str> = first_block(docs, "# A first program")
        .into_iter()
        .filter(|l| !(l.starts_with("# ") || *l == "#"))
        .collect();
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let snippet = first_block(readme.lines(), "## Use it as a library");
    assert!(doctest.len() > 10, "the doctest was found: {doctest:?}");
    assert_eq!(snippet, doctest, "README.md differs from src/lib.rs");
}
