//! The layering `lib.rs` documents is the layering the code has.
//!
//! `lib.rs`'s module table gives every module a floor. A module may name
//! (`crate::X`, in a `use` line or inline) only modules on a lower floor;
//! the one exception is the type knot `memcontrol`/`folio`/`lruvec` (a
//! folio holds its memory cgroup, whose lruvec lists folios), whose three
//! modules share a floor and may name each other. Test code
//! (`#[cfg(test)]` items) and comments do not count. Every module file
//! must have a row in the table.
//!
//! Plain string parsing, no regex: paths are found by scanning for
//! `crate::` (and a submodule's `super::` chains that reach the crate
//! root), macros by their `#[macro_export]` definitions.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The one cycle the floors allow: the kernel's mm_types.h / memcontrol.h
/// / mmzone.h knot of types.
const KNOT: [&str; 3] = ["memcontrol", "folio", "lruvec"];

/// Imports still against the floors, each to be cut (lib.rs's module docs
/// name them): the memory controller's tree holds state of modules above
/// it. The test fails when one of them is gone, so that this list only
/// shrinks.
const NOT_YET_CUT: [(&str, &str); 2] = [
    // A cgroup's `PsiGroup`; psi names `Cgroup` and the tree back.
    ("cgroup", "psi"),
    // The task hooks' `PsiTask`/`Memstall`, while psi names the tree for
    // its clock and its `impl CgroupTree`.
    ("memcontrol", "psi"),
];

/// Module name → floor, from `lib.rs`'s table rows
/// `//! | floor | module | kernel file | what it does |`.
fn parse_floors(lib_rs: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut floors = BTreeMap::new();
    for line in lib_rs.lines() {
        let Some(row) = line.trim().strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(floor), Some(module)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let Ok(floor) = floor.parse::<u32>() else {
            continue; // the header and its rule
        };
        let name: String = module
            .trim_matches(|c| c == '[' || c == ']' || c == '`')
            .to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            return Err(format!("lib.rs: bad module cell {module:?}"));
        }
        if floors.insert(name.clone(), floor).is_some() {
            return Err(format!("lib.rs: module {name} listed twice"));
        }
    }
    if floors.is_empty() {
        return Err("lib.rs: no module table rows (`//! | floor | module | ...`)".into());
    }
    Ok(floors)
}

/// Whether `from` may name `to`.
fn allowed(floors: &BTreeMap<String, u32>, from: &str, to: &str) -> bool {
    if from == to || (KNOT.contains(&from) && KNOT.contains(&to)) {
        return true;
    }
    match (floors.get(from), floors.get(to)) {
        (Some(a), Some(b)) => b < a,
        _ => false,
    }
}

/// One import against the floors.
#[derive(Debug, PartialEq, Eq)]
struct Violation {
    file: String,
    line: usize,
    module: String,
    imports: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} imports {}",
            self.file, self.line, self.module, self.imports
        )
    }
}

/// `line` without its comment and the contents of its string literals.
fn code_of(line: &str, in_block_comment: &mut bool) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if *in_block_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                *in_block_comment = false;
            }
            continue;
        }
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_str = false;
                    out.push('"');
                }
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push('"');
            }
            '/' if chars.peek() == Some(&'/') => break,
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                *in_block_comment = true;
            }
            // A char literal such as '"' or '{' is not code to scan.
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether an attribute line makes the next item test-only.
fn is_test_cfg(code: &str) -> bool {
    let c: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    c.starts_with("#[cfg(test)]") || c.starts_with("#[cfg(all(test")
}

/// Whether a line opens an inline module (`mod x {`).
fn is_inline_mod(code: &str) -> bool {
    let rest = code
        .strip_prefix("pub(crate) ")
        .or_else(|| code.strip_prefix("pub "))
        .unwrap_or(code);
    rest.strip_prefix("mod ")
        .is_some_and(|r| r[ident(r).len()..].trim_start().starts_with('{'))
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The crate-level modules `code` names: `crate::x`, `crate::{x, y::z}`,
/// and `super::` chains `depth` deep (they reach the crate root). Macros
/// (`crate::m!`) and root re-exports map through `aliases`.
fn named_modules(code: &str, depth: usize, aliases: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut roots: Vec<usize> = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            roots.push(i + "crate::".len());
        }
    }
    if depth > 0 {
        let chain = "super::".repeat(depth);
        for (i, _) in code.match_indices(&chain) {
            let before = code[..i].chars().next_back();
            let after = &code[i + chain.len()..];
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !after.starts_with("super::")
            {
                roots.push(i + chain.len());
            }
        }
    }
    for start in roots {
        let rest = &code[start..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c}`: the first identifier of each top-level
            // item (nested groups are below those, hence skipped).
            let mut depth_braces = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth_braces += 1,
                    '}' if depth_braces == 0 => break,
                    '}' => depth_braces -= 1,
                    ',' if depth_braces == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[j..]);
                        if !name.is_empty() && name != "self" {
                            out.push(name.to_string());
                        }
                    }
                    _ => {}
                }
            }
            continue;
        }
        let name = ident(rest);
        if name.is_empty() {
            continue;
        }
        // A macro or an item `lib.rs` re-exports stands for its module.
        match aliases.get(name) {
            Some(module) => out.push(module.clone()),
            None => out.push(name.to_string()),
        }
    }
    out
}

/// The violations in one source file of `module` at `depth` (its module
/// path's length: 1 for `x.rs` and `x/mod.rs`, 2 for `x/y.rs`).
fn check_source(
    floors: &BTreeMap<String, u32>,
    aliases: &BTreeMap<String, String>,
    file: &str,
    module: &str,
    depth: usize,
    text: &str,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut in_block_comment = false;
    let mut test_item_pending = false;
    let mut skip_depth: Option<i64> = None;
    let mut braces: i64 = 0;
    // Inline `mod x { ... }` blocks open at these brace levels: each adds
    // one `super::` to the way up to the crate root.
    let mut inline_mods: Vec<i64> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = code_of(line, &mut in_block_comment);
        let opens = code.matches('{').count() as i64;
        let closes = code.matches('}').count() as i64;
        if let Some(base) = skip_depth {
            braces += opens - closes;
            if braces <= base {
                skip_depth = None;
            }
            continue;
        }
        let trimmed = code.trim();
        if is_test_cfg(trimmed) {
            test_item_pending = true;
            continue;
        }
        if test_item_pending && !trimmed.is_empty() && !trimmed.starts_with("#[") {
            // The test item's lines are skipped: up to its `;`, or its
            // body's closing brace.
            if opens > closes {
                test_item_pending = false;
                skip_depth = Some(braces);
                braces += opens - closes;
            } else if code.contains(';') || opens > 0 {
                test_item_pending = false;
            }
            continue;
        }
        if is_inline_mod(trimmed) {
            inline_mods.push(braces);
        }
        braces += opens - closes;
        while inline_mods.last().is_some_and(|&level| braces <= level) {
            inline_mods.pop();
        }
        for to in named_modules(&code, depth + inline_mods.len(), aliases) {
            if !allowed(floors, module, &to) {
                violations.push(Violation {
                    file: file.to_string(),
                    line: n + 1,
                    module: module.to_string(),
                    imports: to,
                });
            }
        }
    }
    violations
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read src dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A source file's top-level module and its module path's length; `None`
/// for `lib.rs`.
fn module_of(rel: &Path) -> Option<(String, usize)> {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts == ["lib.rs"] {
        return None;
    }
    let top = parts[0].trim_end_matches(".rs").to_string();
    let last = parts.last().map(String::as_str);
    let depth = if last == Some("mod.rs") {
        parts.len() - 1
    } else {
        parts.len()
    };
    Some((top, depth))
}

/// Modules with a file that the table does not list, and rows with no
/// file.
fn unlisted(floors: &BTreeMap<String, u32>, modules: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for m in modules.difference(&floors.keys().cloned().collect()) {
        problems.push(format!(
            "module {m} has a file but no row in lib.rs's table"
        ));
    }
    for m in floors.keys().filter(|m| !modules.contains(*m)) {
        problems.push(format!("lib.rs's table lists {m}, which has no file"));
    }
    problems
}

/// Names the crate root has that are not modules, each → the module that
/// defines it: `#[macro_export]` aliases and `lib.rs`'s `pub use x::Y`.
fn root_aliases(
    lib_rs: &str,
    files: &[(String, String, usize, String)],
) -> BTreeMap<String, String> {
    let mut aliases = BTreeMap::new();
    for line in lib_rs.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = ident(rest).to_string();
        let items = rest[module.len()..].trim_start_matches("::");
        let items = items
            .trim_end_matches(';')
            .trim_matches(|c| c == '{' || c == '}');
        for item in items.split(',') {
            // `A as B` is reached as `crate::B`.
            let item = item.split(" as ").last().unwrap_or(item).trim();
            aliases.insert(ident(item).to_string(), module.clone());
        }
    }
    for (_, module, _, text) in files {
        let mut exported = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("#[macro_export]") {
                exported = true;
            } else if let Some(rest) = t.strip_prefix("macro_rules!") {
                if exported {
                    aliases.insert(ident(rest.trim()).to_string(), module.clone());
                }
                exported = false;
            }
        }
    }
    aliases
}

#[test]
fn every_import_goes_down_the_floors_of_lib_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib_rs = fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let floors = parse_floors(&lib_rs).unwrap_or_else(|e| panic!("{e}"));
    let knot_floors: BTreeSet<_> = KNOT.iter().map(|m| floors.get(*m)).collect();
    assert_eq!(
        knot_floors.len(),
        1,
        "the knot {KNOT:?} shares one floor in lib.rs's table"
    );
    assert!(
        knot_floors.iter().all(Option::is_some),
        "the knot {KNOT:?} is in the table"
    );

    let mut files = Vec::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).expect("under src");
        let Some((module, depth)) = module_of(rel) else {
            continue;
        };
        let text = fs::read_to_string(&path).expect("read source");
        let shown = format!("crates/memcg/src/{}", rel.display());
        files.push((shown, module, depth, text));
    }
    let modules: BTreeSet<String> = files.iter().map(|f| f.1.clone()).collect();
    let problems = unlisted(&floors, &modules);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let aliases = root_aliases(&lib_rs, &files);
    let all: Vec<Violation> = files
        .iter()
        .flat_map(|(file, module, depth, text)| {
            check_source(&floors, &aliases, file, module, *depth, text)
        })
        .collect();
    let is_known = |v: &Violation| NOT_YET_CUT.contains(&(v.module.as_str(), v.imports.as_str()));
    let cut: Vec<_> = NOT_YET_CUT
        .iter()
        .filter(|(from, to)| !all.iter().any(|v| v.module == *from && v.imports == *to))
        .collect();
    assert!(
        cut.is_empty(),
        "cut already, take them off NOT_YET_CUT and lib.rs: {cut:?}"
    );
    let violations: Vec<String> = all
        .iter()
        .filter(|v| !is_known(v))
        .map(|v| {
            format!(
                "{v} (floor {} names floor {})",
                floors[&v.module],
                floors.get(&v.imports).map_or("?".into(), u32::to_string)
            )
        })
        .collect();
    assert!(
        violations.is_empty(),
        "imports against lib.rs's floors (a module names only lower floors; \
         only {KNOT:?} may name each other):\n{}",
        violations.join("\n")
    );
}

/// A table of four floors for the checks below.
fn sample_floors() -> BTreeMap<String, u32> {
    parse_floors(
        "//! | floor | module | kernel file | what it does |\n\
         //! |---|---|---|---|\n\
         //! | 0 | [`mm_types`] | mm_types.h | units |\n\
         //! | 1 | `sync` | (none) | locks |\n\
         //! | 2 | [`memcontrol`] | memcontrol.c | memcgs |\n\
         //! | 2 | [`folio`] | mm_types.h | folios |\n\
         //! | 2 | [`lruvec`] | mmzone.h | lists |\n\
         //! | 3 | [`shrinker`] | shrinker.c | shrinkers |\n\
         //! | 3 | [`psi`] | psi.c | pressure |\n\
         //! | 4 | [`vmscan`] | vmscan.c | reclaim |\n",
    )
    .expect("sample table")
}

fn check(module: &str, depth: usize, text: &str) -> Vec<(usize, String)> {
    let aliases = BTreeMap::from([("named_enum".to_string(), "sync".to_string())]);
    check_source(&sample_floors(), &aliases, "x.rs", module, depth, text)
        .into_iter()
        .map(|v| (v.line, v.imports))
        .collect()
}

#[test]
fn a_bad_import_is_caught_with_its_line() {
    let src = "//! docs: crate::vmscan is above\n\
               use crate::sync::Arc;\n\
               use crate::vmscan::SwapSpace;\n\
               fn f() { crate::vmscan::drop_slab(); }\n";
    assert_eq!(
        check("folio", 1, src),
        [(3, "vmscan".to_string()), (4, "vmscan".to_string())]
    );
    let v = &check_source(
        &sample_floors(),
        &BTreeMap::new(),
        "src/folio.rs",
        "folio",
        1,
        src,
    )[0];
    assert_eq!(v.to_string(), "src/folio.rs:3: folio imports vmscan");
}

#[test]
fn same_floor_imports_are_caught_except_in_the_knot() {
    assert_eq!(
        check("shrinker", 1, "use crate::psi::PsiGroup;\n"),
        [(1, "psi".to_string())]
    );
    let knot = "use crate::memcontrol::MemCgroup;\nuse crate::lruvec::Lruvec;\n";
    assert!(check("folio", 1, knot).is_empty());
    assert_eq!(
        check("memcontrol", 1, "use crate::shrinker::Shrinkers;\n"),
        [(1, "shrinker".to_string())]
    );
}

#[test]
fn groups_super_chains_and_macros_count() {
    assert_eq!(
        check(
            "memcontrol",
            1,
            "use crate::{sync::Arc, vmscan::{self, X}};\n"
        ),
        [(1, "vmscan".to_string())]
    );
    // From memcontrol/charge.rs, `super::super::` is the crate root.
    assert_eq!(
        check(
            "memcontrol",
            2,
            "use super::super::psi::X;\nuse super::Y;\n"
        ),
        [(1, "psi".to_string())]
    );
    assert!(check("memcontrol", 2, "use super::stat::Z;\n").is_empty());
    assert_eq!(
        check("mm_types", 1, "crate::named_enum! { A }\n"),
        [(1, "sync".to_string())]
    );
    // An inline module's `super::` is its file's module.
    let inline =
        "mod host {\n    use super::CHUNK;\n    use super::super::psi::X;\n}\nuse super::Y;\n";
    assert_eq!(
        check("memcontrol", 1, inline),
        [(3, "psi".to_string()), (5, "Y".to_string())]
    );
    assert_eq!(
        root_aliases(
            "pub use errno::Errno;\npub use swapops::{MAX_SWAPFILES, SwapEntry as E};\n",
            &[]
        ),
        BTreeMap::from([
            ("E".to_string(), "swapops".to_string()),
            ("Errno".to_string(), "errno".to_string()),
            ("MAX_SWAPFILES".to_string(), "swapops".to_string()),
        ])
    );
    // `$crate` inside a macro is not this module's import.
    assert!(
        check(
            "mm_types",
            1,
            "macro_rules! m { () => { $crate::sync::X } }\n"
        )
        .is_empty()
    );
}

#[test]
fn test_code_comments_and_strings_do_not_count() {
    let src = "use crate::sync::Arc;\n\
               /// See [`crate::vmscan`].\n\
               let s = \"crate::vmscan\"; // crate::vmscan\n\
               /* crate::vmscan */\n\
               #[cfg(test)]\n\
               fn helper() {\n\
               \x20   crate::vmscan::x();\n\
               }\n\
               #[cfg(all(test, not(loom)))]\n\
               mod tests {\n\
               \x20   use crate::vmscan::SwapSpace;\n\
               \x20   fn g() { if true { crate::vmscan::y(); } }\n\
               }\n\
               #[cfg(test)]\n\
               use crate::vmscan::Z;\n\
               fn after() { crate::vmscan::z(); }\n";
    assert_eq!(check("folio", 1, src), [(16, "vmscan".to_string())]);
}

#[test]
fn an_unlisted_module_file_is_caught() {
    let modules: BTreeSet<String> = ["mm_types", "sync", "memcontrol", "folio", "lruvec"]
        .into_iter()
        .chain(["shrinker", "psi", "vmscan", "machine"])
        .map(String::from)
        .collect();
    assert_eq!(
        unlisted(&sample_floors(), &modules),
        ["module machine has a file but no row in lib.rs's table"]
    );
    assert_eq!(
        module_of(Path::new("memcontrol/charge.rs")),
        Some(("memcontrol".into(), 2))
    );
    assert_eq!(module_of(Path::new("fs/mod.rs")), Some(("fs".into(), 1)));
    assert_eq!(module_of(Path::new("lib.rs")), None);
}
