//! `memcg sh`'s `grep`: GNU grep's common options over the simulated
//! machine's files.
//!
//! Options (anywhere before `--`, clustered as `-vc`, `-ePAT` or `-e PAT`,
//! and their long names): `-G` basic regular expressions (the default),
//! `-E` extended, `-F` fixed strings, `-e PAT` (repeatable; a pattern with
//! newlines is one pattern per line), `-i`, `-v`, `-w`, `-x`, `-c`, `-q`,
//! `-l`, `-n`, `-h`, `-H`, `-s`. An unknown option is a usage error
//! (status 2), as is a missing pattern or file: `memcg sh` has no pipes,
//! so there is no standard input to read.
//!
//! POSIX patterns are translated to the `regex` crate's syntax: in a basic
//! expression `\(`, `\)`, `\{`, `\}`, `\|`, `\+` and `\?` are the operators
//! (GNU's extensions) and the bare characters literals; `^` and `$` anchor
//! only at the ends of the expression or of a group; a bracket expression
//! takes `\` and `[` literally. Back references are refused (the crate has
//! none). Exit status as grep's: 0 when a line was selected, 1 when none,
//! 2 on an error (a file that could not be read) unless `-q` found a line.

use regex::Regex;

use super::verbs::{quiet_status, read_text};
use super::{Failure, Shell};

/// How the patterns are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Basic,
    Extended,
    Fixed,
}

/// What `-H`/`-h` ask, or grep's own choice (names when several files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    Auto,
    Always,
    Never,
}

/// A parsed command line.
#[derive(Debug)]
struct Options {
    syntax: Syntax,
    ignore_case: bool,
    invert: bool,
    word: bool,
    line: bool,
    count: bool,
    quiet: bool,
    files_with_matches: bool,
    line_number: bool,
    names: Names,
    no_messages: bool,
    patterns: Vec<String>,
    files: Vec<String>,
}

/// Why a command line is refused.
#[derive(Debug, PartialEq, Eq)]
enum UsageError {
    /// `-z`: not an option grep here knows.
    InvalidOption(char),
    /// `--zap`.
    UnrecognizedOption(String),
    /// `-e` at the end.
    MissingArgument(char),
    /// No pattern, or no file.
    Operands,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InvalidOption(c) => write!(f, "grep: invalid option -- '{c}'"),
            Self::UnrecognizedOption(o) => write!(f, "grep: unrecognized option '{o}'"),
            Self::MissingArgument(c) => write!(f, "grep: option requires an argument -- '{c}'"),
            Self::Operands => Ok(()),
        }
    }
}

/// Why a pattern is refused (GNU grep's messages).
#[derive(Debug, PartialEq, Eq)]
enum PatternError {
    TrailingBackslash,
    UnmatchedBracket,
    BackReference,
    /// Anything the `regex` crate refuses after translation.
    Invalid,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::TrailingBackslash => "Trailing backslash",
            Self::UnmatchedBracket => "Unmatched [, [^, [:, [., or [=",
            Self::BackReference => "Invalid back reference",
            Self::Invalid => "Invalid regular expression",
        })
    }
}

/// Short options without an argument, and their long names.
const FLAGS: &[(char, &str)] = &[
    ('G', "basic-regexp"),
    ('E', "extended-regexp"),
    ('F', "fixed-strings"),
    ('i', "ignore-case"),
    ('v', "invert-match"),
    ('w', "word-regexp"),
    ('x', "line-regexp"),
    ('c', "count"),
    ('q', "quiet"),
    ('q', "silent"),
    ('l', "files-with-matches"),
    ('n', "line-number"),
    ('H', "with-filename"),
    ('h', "no-filename"),
    ('s', "no-messages"),
];

impl Options {
    fn parse(args: &[String]) -> Result<Self, UsageError> {
        let mut o = Options {
            syntax: Syntax::Basic,
            ignore_case: false,
            invert: false,
            word: false,
            line: false,
            count: false,
            quiet: false,
            files_with_matches: false,
            line_number: false,
            names: Names::Auto,
            no_messages: false,
            patterns: Vec::new(),
            files: Vec::new(),
        };
        let mut explicit_pattern = false;
        let mut operands = Vec::new();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                operands.extend(args.by_ref().cloned());
                break;
            }
            if let Some(long) = arg.strip_prefix("--") {
                explicit_pattern |= o.long_option(arg, long, &mut args)?;
                continue;
            }
            let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
                operands.push(arg.clone());
                continue;
            };
            explicit_pattern |= o.short_options(cluster, &mut args)?;
        }
        let mut operands = operands.into_iter();
        if !explicit_pattern {
            let pattern = operands.next().ok_or(UsageError::Operands)?;
            o.add_patterns(&pattern);
        }
        o.files = operands.collect();
        if o.files.is_empty() {
            return Err(UsageError::Operands);
        }
        Ok(o)
    }

    /// One long option `arg` (`--` and `long`), taking its argument from
    /// `args` where it needs one; true when it gave a pattern.
    fn long_option(
        &mut self,
        arg: &str,
        long: &str,
        args: &mut std::slice::Iter<'_, String>,
    ) -> Result<bool, UsageError> {
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (long, None),
        };
        if name == "regexp" {
            let pattern = value
                .or_else(|| args.next().cloned())
                .ok_or(UsageError::MissingArgument('e'))?;
            self.add_patterns(&pattern);
            return Ok(true);
        }
        match FLAGS.iter().find(|(_, n)| *n == name) {
            Some(&(c, _)) if value.is_none() => self.flag(c)?,
            _ => return Err(UsageError::UnrecognizedOption(arg.to_owned())),
        }
        Ok(false)
    }

    /// A cluster of short options (`-ivn`, `-epattern`, `-e pattern`);
    /// true when it gave a pattern.
    fn short_options(
        &mut self,
        cluster: &str,
        args: &mut std::slice::Iter<'_, String>,
    ) -> Result<bool, UsageError> {
        for (i, c) in cluster.char_indices() {
            if c == 'e' {
                let rest = &cluster[i + 1..];
                let pattern = if rest.is_empty() {
                    args.next()
                        .cloned()
                        .ok_or(UsageError::MissingArgument('e'))?
                } else {
                    rest.to_owned()
                };
                self.add_patterns(&pattern);
                return Ok(true);
            }
            self.flag(c)?;
        }
        Ok(false)
    }

    fn flag(&mut self, c: char) -> Result<(), UsageError> {
        match c {
            'G' => self.syntax = Syntax::Basic,
            'E' => self.syntax = Syntax::Extended,
            'F' => self.syntax = Syntax::Fixed,
            'i' => self.ignore_case = true,
            'v' => self.invert = true,
            'w' => self.word = true,
            'x' => self.line = true,
            'c' => self.count = true,
            'q' => self.quiet = true,
            'l' => self.files_with_matches = true,
            'n' => self.line_number = true,
            'H' => self.names = Names::Always,
            'h' => self.names = Names::Never,
            's' => self.no_messages = true,
            c => return Err(UsageError::InvalidOption(c)),
        }
        Ok(())
    }

    /// One pattern per line of `text`, as grep splits `-e` values.
    fn add_patterns(&mut self, text: &str) {
        self.patterns.extend(text.split('\n').map(str::to_owned));
    }

    /// The patterns as one regular expression over a line.
    fn matcher(&self) -> Result<Regex, PatternError> {
        let alternatives = self
            .patterns
            .iter()
            .map(|p| match self.syntax {
                Syntax::Fixed => Ok(regex::escape(p)),
                Syntax::Basic => translate(p, false),
                Syntax::Extended => translate(p, true),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let any = alternatives
            .iter()
            .map(|a| format!("(?:{a})"))
            .collect::<Vec<_>>()
            .join("|");
        // -x: the whole line; -w: a match with a non-word character (or the
        // line's end) on each side. The line is only tested, never cut, so
        // consuming the neighbours is harmless.
        let whole = if self.line {
            format!("^(?:{any})$")
        } else if self.word {
            format!(r"(?:^|\W)(?:{any})(?:\W|$)")
        } else {
            any
        };
        regex::RegexBuilder::new(&whole)
            .case_insensitive(self.ignore_case)
            .build()
            .map_err(|_| PatternError::Invalid)
    }
}

/// A POSIX basic (`extended` false) or extended regular expression in the
/// `regex` crate's syntax.
fn translate(pattern: &str, extended: bool) -> Result<String, PatternError> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    // Where an operand is expected: a repetition operator here is a
    // literal (the start, after a group opens or an alternation).
    let mut at_start = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        // The character as an operator, if it is one in this syntax.
        let op = match c {
            '\\' => {
                let Some(&e) = chars.get(i) else {
                    return Err(PatternError::TrailingBackslash);
                };
                i += 1;
                match e {
                    '(' | ')' | '{' | '}' | '|' | '+' | '?' if !extended => e,
                    '1'..='9' => return Err(PatternError::BackReference),
                    'w' | 'W' | 's' | 'S' | 'b' | 'B' | '<' | '>' => {
                        out.push('\\');
                        out.push(e);
                        at_start = false;
                        continue;
                    }
                    e => {
                        push_literal(&mut out, e);
                        at_start = false;
                        continue;
                    }
                }
            }
            '(' | ')' | '{' | '}' | '|' | '+' | '?' if extended => c,
            '*' | '^' | '$' | '.' | '[' => c,
            c => {
                push_literal(&mut out, c);
                at_start = false;
                continue;
            }
        };
        match op {
            '*' | '+' | '?' if at_start => push_literal(&mut out, op),
            '{' if at_start => push_literal(&mut out, op),
            '{' => match interval(&chars[i..], extended) {
                Some((text, len)) => {
                    out.push_str(&text);
                    i += len;
                }
                None => push_literal(&mut out, '{'),
            },
            '^' if !extended && !at_start => push_literal(&mut out, '^'),
            '$' if !extended && !at_group_end(&chars[i..]) => push_literal(&mut out, '$'),
            '[' => {
                i += bracket(&chars[i..], &mut out)?;
            }
            '(' | '|' => out.push(op),
            '}' => push_literal(&mut out, '}'),
            op => out.push(op),
        }
        at_start = matches!(op, '(' | '|') || (op == '^' && at_start);
    }
    Ok(out)
}

/// Whether a basic expression's `$` before `rest` ends it or a group.
fn at_group_end(rest: &[char]) -> bool {
    rest.is_empty() || matches!(rest, ['\\', ')' | '|', ..])
}

/// `c` matched literally.
fn push_literal(out: &mut String, c: char) {
    out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
}

/// An interval after its `{`: `n}`, `n,}`, `n,m}` or `,m}` (`\}` in a
/// basic expression), as the crate's `{..}` and the characters it took.
fn interval(rest: &[char], extended: bool) -> Option<(String, usize)> {
    let close: &[char] = if extended { &['}'] } else { &['\\', '}'] };
    let end = rest.windows(close.len()).position(|w| w == close)?;
    let body: String = rest[..end].iter().collect();
    let valid = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let text = match body.split_once(',') {
        None if !body.is_empty() && valid(&body) => format!("{{{body}}}"),
        Some((lo, hi)) if valid(lo) && valid(hi) && !(lo.is_empty() && hi.is_empty()) => {
            let lo = if lo.is_empty() { "0" } else { lo };
            format!("{{{lo},{hi}}}")
        }
        _ => return None,
    };
    Some((text, end + close.len()))
}

/// A bracket expression after its `[`, written to `out` in the crate's
/// syntax; returns the characters it took. `]` first is a member; `\`
/// and `[` (outside `[:class:]`) are members; `-` first or last is one.
fn bracket(rest: &[char], out: &mut String) -> Result<usize, PatternError> {
    let mut i = 0;
    out.push('[');
    if rest.first() == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let first = i;
    loop {
        let Some(&c) = rest.get(i) else {
            return Err(PatternError::UnmatchedBracket);
        };
        match c {
            ']' if i > first => {
                out.push(']');
                return Ok(i + 1);
            }
            '[' if rest.get(i + 1) == Some(&':') => {
                let close = rest[i + 2..]
                    .windows(2)
                    .position(|w| w == [':', ']'])
                    .ok_or(PatternError::UnmatchedBracket)?;
                out.extend(&rest[i..i + 2 + close + 2]);
                i += 2 + close + 2;
                continue;
            }
            '[' if matches!(rest.get(i + 1), Some('.' | '=')) => {
                return Err(PatternError::Invalid);
            }
            '-' if i == first || rest.get(i + 1) == Some(&']') => out.push_str(r"\-"),
            '\\' | '[' | ']' | '&' | '~' | '^' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
        i += 1;
    }
}

/// `grep [OPTION]... PATTERN FILE...` (see the module docs).
pub(super) fn cmd_grep(sh: &mut Shell<'_>, args: &[String]) -> Result<(), Failure> {
    let options = match Options::parse(args) {
        Ok(o) => o,
        Err(e) => {
            sh.report(&e.to_string());
            return Err(sh.usage("grep"));
        }
    };
    let matcher = match options.matcher() {
        Ok(m) => m,
        Err(e) => {
            return Err(Failure {
                message: format!("grep: {e}"),
                status: 2,
            });
        }
    };
    let with_names = match options.names {
        Names::Auto => options.files.len() > 1,
        Names::Always => true,
        Names::Never => false,
    };
    let (mut selected_any, mut failed) = (false, false);
    for p in &options.files {
        let text = match read_text(sh, p) {
            Ok(text) => text,
            Err(errno) => {
                if !options.no_messages {
                    sh.report(&format!("grep: {p}: {}", errno.message()));
                }
                failed = true;
                continue;
            }
        };
        let prefix = if with_names {
            format!("{p}:")
        } else {
            String::new()
        };
        let Some(count) = select_lines(sh, &options, &matcher, &prefix, &text)? else {
            // grep -q stops at the first selected line, status 0.
            return Ok(());
        };
        selected_any |= count > 0;
        if options.files_with_matches {
            if count > 0 {
                sh.print(&format!("{p}\n"))?;
            }
        } else if options.count {
            sh.print(&format!("{prefix}{count}\n"))?;
        }
    }
    quiet_status(if failed {
        2
    } else if selected_any {
        0
    } else {
        1
    })
}

/// Prints the lines of `text` that `matcher` selects (each after
/// `prefix`, unless `-c`, `-l` or `-q` print less); returns how many it
/// selected (for `-l`, 1 at the first), or `None` for `-q` at the first.
fn select_lines(
    sh: &mut Shell<'_>,
    options: &Options,
    matcher: &Regex,
    prefix: &str,
    text: &str,
) -> Result<Option<usize>, Failure> {
    let mut count = 0usize;
    for (n, line) in text.lines().enumerate() {
        if matcher.is_match(line) == options.invert {
            continue;
        }
        count += 1;
        if options.quiet {
            return Ok(None);
        }
        if options.files_with_matches {
            break;
        }
        if !options.count {
            let number = if options.line_number {
                format!("{}:", n + 1)
            } else {
                String::new()
            };
            sh.print(&format!("{prefix}{number}{line}\n"))?;
        }
    }
    Ok(Some(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    fn matches(flags: &str, pattern: &str, line: &str) -> bool {
        let mut a = args(flags);
        a.extend(["-e".to_owned(), pattern.to_owned(), "f".to_owned()]);
        Options::parse(&a)
            .unwrap()
            .matcher()
            .unwrap()
            .is_match(line)
    }

    #[test]
    fn options_are_parsed_where_grep_takes_them() {
        let o = Options::parse(&args("-E a|b f")).unwrap();
        assert_eq!(
            (o.syntax, o.patterns, o.files),
            (
                Syntax::Extended,
                vec!["a|b".to_owned()],
                vec!["f".to_owned()]
            )
        );
        let o = Options::parse(&args("-vc -e x -ey f g -i")).unwrap();
        assert!(o.invert && o.count && o.ignore_case);
        assert_eq!((o.patterns, o.files), (args("x y"), args("f g")));
        let o = Options::parse(&args("--count --regexp=-v -- -f")).unwrap();
        assert_eq!(
            (o.count, o.patterns, o.files),
            (true, args("-v"), args("-f"))
        );
        assert_eq!(
            Options::parse(&args("-z x f")).unwrap_err(),
            UsageError::InvalidOption('z')
        );
        assert_eq!(
            Options::parse(&args("--zap x f")).unwrap_err(),
            UsageError::UnrecognizedOption("--zap".into())
        );
        assert_eq!(
            Options::parse(&args("x -e")).unwrap_err(),
            UsageError::MissingArgument('e')
        );
        assert_eq!(
            Options::parse(&args("-v x")).unwrap_err(),
            UsageError::Operands
        );
        assert_eq!(
            Options::parse(&args("-v")).unwrap_err(),
            UsageError::Operands
        );
    }

    #[test]
    fn basic_and_extended_expressions_mean_what_posix_says() {
        // Basic: the bare operators are literals, the escaped ones operate.
        assert!(matches("", "a|b", "x a|b y") && !matches("", "a|b", "a"));
        assert!(matches("", r"a\|b", "b") && matches("", r"\(ab\)\{2\}", "abab"));
        assert!(matches("", "a+", "a+") && !matches("", "a+", "aa"));
        assert!(matches("", "*a", "*a") && !matches("", "*a", "a"));
        assert!(matches("", "a^b$c", "a^b$c") && matches("", "^ab$", "ab"));
        assert!(matches("", "swap.max", "swap_max") && matches("", r"swap\.max", "swap.max"));
        assert!(!matches("", r"swap\.max", "swap_max"));
        // Extended: the bare ones operate.
        assert!(matches("-E", "a|b", "b") && matches("-E", "^(ab){2}$", "abab"));
        assert!(matches("-E", "x{,2}y", "y") && matches("-E", "a{", "a{"));
        // Fixed.
        assert!(matches("-F", "a.*", "xa.*") && !matches("-F", "a.*", "ab"));
        // Brackets take backslash and [ literally; classes work.
        assert!(matches("", r"[\]", r"a\b") && matches("", "[]x]", "]"));
        assert!(matches("", "[[:digit:]-]", "-") && !matches("", "^[^[:digit:]]*$", "a1"));
        // -i, -w, -x.
        assert!(matches("-i", "ZSWP", "zswpout 0"));
        assert!(matches("-w", "max", "memory.max 1") && !matches("-w", "max", "maximum"));
        assert!(matches("-w", "max", "max") && !matches("-x", "max", "max 1"));
        assert!(matches("-x -E", "max|1", "1"));
    }

    #[test]
    fn bad_patterns_are_grep_errors() {
        let err = |p: &str| {
            Options::parse(&args(&format!("-e {p} f")))
                .unwrap()
                .matcher()
                .unwrap_err()
        };
        assert_eq!(err(r"a\"), PatternError::TrailingBackslash);
        assert_eq!(err("[ab"), PatternError::UnmatchedBracket);
        assert_eq!(err(r"\(a\)\1"), PatternError::BackReference);
        assert_eq!(err(r"\(a"), PatternError::Invalid);
    }
}
