//! The `memcg sh` command-line parser: the subset of bash's grammar that
//! cgroup scripts use, and a clear refusal of the rest.
//!
//! Supported: words with single and double quotes and backslash escapes,
//! `#` comments, `$?` (the last status, also inside double quotes), lists
//! joined by `;`, `&&` and `||`, output redirection `>`, `>>`, `1>`, `2>`
//! and `&>` (also attached, as in `1>f`), `2>&1` and `>&2`. A quote left
//! open, or a backslash at the end of a line, continues on the next line
//! (the caller joins them: [`ParseError::Unterminated`], [`continues`]). Everything else bash would
//! read differently (pipelines, background jobs, input redirection,
//! subshells, command substitution, variables, compound commands) is a
//! [`ParseError`] with status 2, never silently taken as arguments.
//!
//! Hand-written because redirection and operators must be recognised
//! outside quotes only, which generic shell-word splitters do not do.

use std::fmt;

/// A piece of a word: literal text, or `$?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    Text(String),
    Status,
}

/// A word before expansion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Word(Vec<Piece>);

impl Word {
    fn push(&mut self, c: char) {
        match self.0.last_mut() {
            Some(Piece::Text(text)) => text.push(c),
            _ => self.0.push(Piece::Text(c.to_string())),
        }
    }

    /// The word with `$?` replaced by `status`.
    pub(super) fn expand(&self, status: i32) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Status => status.to_string(),
            })
            .collect()
    }

    /// The word if it has no expansion in it.
    #[cfg(test)]
    pub(super) fn literal(&self) -> Option<String> {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                Piece::Status => None,
            })
            .collect()
    }
}

/// Where a redirection sends output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fd {
    /// `>` or `1>`.
    Stdout,
    /// `2>`.
    Stderr,
    /// `&>`: both.
    Both,
}

/// The only file outside the hierarchy error output may go to.
pub(super) const DEV_NULL: &str = "/dev/null";

/// One simple command with its redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Simple {
    pub(super) words: Vec<Word>,
    /// `> path` (or `>> path`, which cgroup files treat the same).
    pub(super) redirect: Option<Word>,
    /// Error messages are discarded (`2>/dev/null`, `&>/dev/null`).
    pub(super) quiet_errors: bool,
    /// Error messages go wherever output goes (`2>&1`; bash applies
    /// redirections in order, this shell lets `2>&1` follow stdout's final
    /// target whatever the order).
    pub(super) errors_to_stdout: bool,
    /// Output goes to the error stream (`>&2`).
    pub(super) output_to_stderr: bool,
}

/// How a command is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Join {
    /// First command, or after `;`: always runs.
    Always,
    /// After `&&`: runs if the last status is 0.
    IfOk,
    /// After `||`: runs if the last status is not 0.
    IfFailed,
}

/// A line: commands and how each is joined to the previous one.
pub(super) type List = Vec<(Join, Simple)>;

/// Why a line cannot run. Bash reports these and, outside an interactive
/// session, stops the script with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ParseError {
    /// A token where a command should be (`;;`, `&& &&`, `> ;`).
    Unexpected(String),
    /// A quote never closed: bash reads to the end of the script for it.
    Unterminated(char),
    /// Valid bash this shell does not implement.
    Unsupported(&'static str),
    /// A redirection of error output to a file other than `/dev/null`.
    ErrorsToFile(String),
}

impl ParseError {
    /// Whether bash would give up on the rest of the script (it does for
    /// every syntax error outside an interactive session; an unterminated
    /// quote swallows the rest of the script even then).
    pub(super) fn ends_input(&self) -> bool {
        matches!(self, ParseError::Unterminated(_))
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Unexpected(token) => {
                write!(f, "syntax error near unexpected token `{token}'")
            }
            ParseError::Unterminated(q) => write!(
                f,
                "unexpected EOF while looking for matching `{q}'\nsyntax error: unexpected end of file"
            ),
            ParseError::Unsupported(what) => {
                write!(f, "syntax error: {what} not supported by memcg sh")
            }
            ParseError::ErrorsToFile(target) => write!(
                f,
                "syntax error: error output can only go to {DEV_NULL}, not {target}"
            ),
        }
    }
}

/// Whether `line` ends with a backslash that escapes its newline (the
/// command continues on the next line).
pub(super) fn continues(line: &str) -> bool {
    let trailing = line.len() - line.trim_end_matches('\\').len();
    trailing % 2 == 1
}

/// Words that start bash's compound commands.
const RESERVED: [&str; 13] = [
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function",
];

/// Builds one list out of the characters of a line.
struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    list: List,
    join: Join,
    current: Simple,
    word: Option<Word>,
    target: Option<Fd>,
}

/// Parses one line.
pub(super) fn parse(line: &str) -> Result<List, ParseError> {
    let mut p = Parser {
        chars: line.chars().peekable(),
        list: Vec::new(),
        join: Join::Always,
        current: Simple::default(),
        word: None,
        target: None,
    };
    while let Some(c) = p.chars.next() {
        p.step(c)?;
    }
    p.finish_word()?;
    if p.target.is_some() {
        return Err(ParseError::Unexpected("newline".into()));
    }
    if p.current.words.is_empty() {
        // `a &&` at the end: bash would read on; `a ;` is fine.
        if p.join != Join::Always || p.current.redirect.is_some() {
            return Err(ParseError::Unexpected("newline".into()));
        }
    } else {
        p.finish_command(Join::Always)?;
    }
    Ok(p.list)
}

impl Parser<'_> {
    fn step(&mut self, c: char) -> Result<(), ParseError> {
        match c {
            ' ' | '\t' | '\r' | '\n' => self.finish_word()?,
            '#' if self.word.is_none() => {
                // A comment runs to the end of the line.
                for _ in self.chars.by_ref() {}
            }
            '>' => self.redirection()?,
            ';' => self.operator(";", Join::Always)?,
            '&' if self.chars.peek() == Some(&'&') => {
                self.chars.next();
                self.operator("&&", Join::IfOk)?;
            }
            '&' if self.chars.peek() == Some(&'>') && self.word.is_none() => {
                self.word_mut().push('&');
            }
            '&' => return Err(ParseError::Unsupported("background jobs (`&')")),
            '|' if self.chars.peek() == Some(&'|') => {
                self.chars.next();
                self.operator("||", Join::IfFailed)?;
            }
            '|' => return Err(ParseError::Unsupported("pipelines (`|')")),
            '<' => return Err(ParseError::Unsupported("input redirection (`<')")),
            '(' | ')' => return Err(ParseError::Unsupported("subshells (`(...)')")),
            '`' => return Err(ParseError::Unsupported("command substitution")),
            '$' => self.dollar()?,
            '\'' => self.single_quoted()?,
            '"' => self.double_quoted()?,
            '\\' => {
                if let Some(ch) = self.chars.next() {
                    self.word_mut().push(ch);
                }
            }
            _ => self.word_mut().push(c),
        }
        Ok(())
    }

    fn word_mut(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    /// `$?`; `$` before anything that cannot start an expansion is itself.
    fn dollar(&mut self) -> Result<(), ParseError> {
        match self.chars.peek() {
            Some('?') => {
                self.chars.next();
                self.word_mut().0.push(Piece::Status);
                Ok(())
            }
            Some('(') => Err(ParseError::Unsupported("command substitution (`$(...)')")),
            Some(c)
                if c.is_alphanumeric()
                    || matches!(c, '_' | '{' | '@' | '*' | '#' | '$' | '!' | '-') =>
            {
                Err(ParseError::Unsupported("variables"))
            }
            _ => {
                self.word_mut().push('$');
                Ok(())
            }
        }
    }

    fn single_quoted(&mut self) -> Result<(), ParseError> {
        self.word_mut();
        loop {
            match self.chars.next() {
                Some('\'') => return Ok(()),
                Some(ch) => self.word_mut().push(ch),
                None => return Err(ParseError::Unterminated('\'')),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<(), ParseError> {
        self.word_mut();
        loop {
            match self.chars.next() {
                Some('"') => return Ok(()),
                Some('\\') => match self.chars.next() {
                    Some(ch @ ('"' | '\\' | '$' | '`')) => self.word_mut().push(ch),
                    Some(ch) => {
                        self.word_mut().push('\\');
                        self.word_mut().push(ch);
                    }
                    None => return Err(ParseError::Unterminated('"')),
                },
                Some('$') => self.dollar()?,
                Some('`') => return Err(ParseError::Unsupported("command substitution")),
                Some(ch) => self.word_mut().push(ch),
                None => return Err(ParseError::Unterminated('"')),
            }
        }
    }

    /// `>`, `>>`, `1>`, `2>`, `&>`: the word so far may name the descriptor.
    fn redirection(&mut self) -> Result<(), ParseError> {
        let fd = match self.word.as_ref().and_then(|w| match w.0.as_slice() {
            [Piece::Text(t)] => Some(t.as_str()),
            _ => None,
        }) {
            Some("1") => Some(Fd::Stdout),
            Some("2") => Some(Fd::Stderr),
            Some("&") => Some(Fd::Both),
            _ => None,
        };
        if fd.is_some() {
            self.word = None;
        } else {
            self.finish_word()?;
        }
        if self.chars.peek() == Some(&'>') {
            self.chars.next();
        }
        if self.target.is_some() {
            return Err(ParseError::Unexpected(">".into()));
        }
        // `2>&1` and `>&2` / `1>&2`: one stream joins the other.
        if self.chars.peek() == Some(&'&') {
            self.chars.next();
            match (fd.unwrap_or(Fd::Stdout), self.chars.next()) {
                (Fd::Stderr, Some('1')) => self.current.errors_to_stdout = true,
                (Fd::Stdout, Some('2')) => self.current.output_to_stderr = true,
                _ => {
                    return Err(ParseError::Unsupported(
                        "descriptor duplication other than 2>&1 and >&2",
                    ));
                }
            }
            return Ok(());
        }
        self.target = Some(fd.unwrap_or(Fd::Stdout));
        Ok(())
    }

    /// `;`, `&&` or `||`: ends the command before it.
    fn operator(&mut self, token: &str, next: Join) -> Result<(), ParseError> {
        self.finish_word()?;
        if self.target.is_some() || self.current.words.is_empty() {
            return Err(ParseError::Unexpected(token.into()));
        }
        self.finish_command(next)
    }

    fn finish_command(&mut self, next: Join) -> Result<(), ParseError> {
        let command = std::mem::take(&mut self.current);
        if let Some(Piece::Text(first)) = command.words[0].0.first()
            && command.words[0].0.len() == 1
            && RESERVED.contains(&first.as_str())
        {
            return Err(ParseError::Unsupported(
                "compound commands (if, for, while, case)",
            ));
        }
        self.list.push((self.join, command));
        self.join = next;
        Ok(())
    }

    /// Ends the current word: a command word, or a redirection target.
    fn finish_word(&mut self) -> Result<(), ParseError> {
        let Some(w) = self.word.take() else {
            return Ok(());
        };
        match self.target.take() {
            None => self.current.words.push(w),
            Some(Fd::Stdout) => self.current.redirect = Some(w),
            Some(fd) => {
                let target = w.expand(0);
                if target != DEV_NULL {
                    return Err(ParseError::ErrorsToFile(target));
                }
                self.current.quiet_errors = true;
                if fd == Fd::Both {
                    self.current.redirect = Some(w);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &List) -> Vec<Vec<String>> {
        list.iter()
            .map(|(_, s)| s.words.iter().map(|w| w.literal().unwrap()).collect())
            .collect()
    }

    #[test]
    fn quotes_comments_and_redirection() {
        let l = parse(r#"echo "+memory" 'a b'>f # note"#).unwrap();
        assert_eq!(words(&l), [["echo", "+memory", "a b"]]);
        assert_eq!(l[0].1.redirect.as_ref().unwrap().literal().unwrap(), "f");
        let l = parse("echo 1 >> /x").unwrap();
        assert_eq!(l[0].1.redirect.as_ref().unwrap().literal().unwrap(), "/x");
        assert_eq!(words(&parse(r"echo a\ b").unwrap()), [["echo", "a b"]]);
        assert_eq!(parse("echo 'open"), Err(ParseError::Unterminated('\'')));
        assert_eq!(
            parse("echo >"),
            Err(ParseError::Unexpected("newline".into()))
        );
        let l = parse("echo > a > b").unwrap();
        assert_eq!(
            l[0].1.redirect.as_ref().unwrap().literal().unwrap(),
            "b",
            "last wins, as in bash"
        );
        assert_eq!(parse("echo > > b"), Err(ParseError::Unexpected(">".into())));
        assert!(parse("  # only a comment").unwrap().is_empty());
        let l = parse("rmdir /a &>/dev/null").unwrap();
        assert!(l[0].1.quiet_errors && l[0].1.redirect.is_some());
        let l = parse("rmdir /a 2>/dev/null").unwrap();
        assert!(l[0].1.quiet_errors && l[0].1.redirect.is_none());
        assert!(matches!(
            parse("rmdir /a 2>/elsewhere"),
            Err(ParseError::ErrorsToFile(_))
        ));
    }

    #[test]
    fn descriptor_duplication() {
        let l = parse("rmdir /a 2>&1").unwrap();
        assert!(l[0].1.errors_to_stdout && l[0].1.redirect.is_none());
        let l = parse("echo oops >&2").unwrap();
        assert!(l[0].1.output_to_stderr);
        assert!(matches!(parse("echo >&1"), Err(ParseError::Unsupported(_))));
        assert!(matches!(
            parse("echo 2>&3"),
            Err(ParseError::Unsupported(_))
        ));
        assert!(continues("echo a \\") && !continues("echo a \\\\"));
    }

    #[test]
    fn lists_join_commands() {
        let l = parse("mkdir /a; mkdir /b && cat x || ls").unwrap();
        assert_eq!(
            l.iter().map(|(j, _)| *j).collect::<Vec<_>>(),
            [Join::Always, Join::Always, Join::IfOk, Join::IfFailed]
        );
        assert_eq!(words(&l)[1], ["mkdir", "/b"]);
        assert_eq!(words(&parse("a;").unwrap()), [["a"]]);
        for bad in ["; a", "a ;; b", "a && && b", "a &&", "a || ", "a > ; b"] {
            assert!(
                matches!(parse(bad), Err(ParseError::Unexpected(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn status_expands_and_the_rest_is_refused() {
        let l = parse(r#"echo "rc=$?" $? '$?' cost$"#).unwrap();
        let expanded: Vec<String> = l[0].1.words.iter().map(|w| w.expand(3)).collect();
        assert_eq!(expanded, ["echo", "rc=3", "3", "$?", "cost$"]);
        for bad in [
            "ls / | grep c",
            "sleep 1 &",
            "cat < f",
            "(cd /a)",
            "echo $(pwd)",
            "echo `pwd`",
            "echo $HOME",
            "echo \"${x}\"",
            "if true; then echo; fi",
            "for x in a b; do echo; done",
        ] {
            assert!(
                matches!(parse(bad), Err(ParseError::Unsupported(_))),
                "{bad}: {:?}",
                parse(bad)
            );
        }
    }
}
