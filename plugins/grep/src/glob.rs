//! The file-name filter: a glob with `*` and `?` and nothing else, so a model cannot
//! write one that means something other than it reads.

use airlock_sdk::ToolError;

/// A compiled file-name glob: `*` matches any run of characters (also none), `?` exactly
/// one character; every other character, `[` and `{` included, matches itself.
#[derive(Debug, Clone)]
pub struct Glob {
    pattern: Vec<char>,
}

impl Glob {
    pub fn new(pattern: &str) -> Result<Self, ToolError> {
        if pattern.is_empty() {
            return Err(ToolError::new(
                "glob is empty; leave it out to search every file",
            ));
        }
        if pattern.contains('/') {
            return Err(ToolError::new(format!(
                "glob `{pattern}` contains `/`: it matches file names only (such as `*.rs`); \
                 use `path` to choose the directory"
            )));
        }
        Ok(Self {
            pattern: pattern.chars().collect(),
        })
    }

    /// Whether `name` (a file name, not a path) matches the whole glob.
    pub fn matches(&self, name: &str) -> bool {
        let pattern = &self.pattern;
        let name: Vec<char> = name.chars().collect();
        let (mut p, mut n) = (0, 0);
        // Where the last `*` was and the name position it currently stands for. Going
        // back only to the last star is enough for `*`/`?` globs and keeps the match
        // linear in practice rather than exponential.
        let mut backtrack: Option<(usize, usize)> = None;
        while n < name.len() {
            match pattern.get(p) {
                Some('*') => {
                    backtrack = Some((p, n));
                    p += 1;
                }
                Some(&c) if c == '?' || c == name[n] => {
                    p += 1;
                    n += 1;
                }
                Some(_) | None => match backtrack {
                    Some((star, from)) => {
                        backtrack = Some((star, from + 1));
                        p = star + 1;
                        n = from + 1;
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == '*')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, name: &str) -> bool {
        match Glob::new(pattern) {
            Ok(glob) => glob.matches(name),
            Err(err) => panic!("{pattern}: {err}"),
        }
    }

    #[test]
    fn star_matches_any_run() {
        assert!(matches("*.rs", "main.rs"));
        assert!(matches("*.rs", ".rs"));
        assert!(!matches("*.rs", "main.rsx"));
        assert!(!matches("*.rs", "main.r"));
        assert!(matches("*", "anything"));
        assert!(matches("a*b*c", "aXXbYYbc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("**", ""));
    }

    #[test]
    fn question_mark_matches_one_character() {
        assert!(matches("?.c", "a.c"));
        assert!(matches("?.c", "é.c"));
        assert!(!matches("?.c", ".c"));
        assert!(!matches("?.c", "ab.c"));
    }

    #[test]
    fn other_characters_are_literal() {
        assert!(matches("[ab].txt", "[ab].txt"));
        assert!(!matches("[ab].txt", "a.txt"));
        assert!(matches("Cargo.toml", "Cargo.toml"));
        assert!(!matches("Cargo.toml", "cargo.toml"));
    }

    #[test]
    fn paths_and_empty_globs_are_refused() {
        let Err(err) = Glob::new("src/*.rs") else {
            panic!("a glob with `/` was accepted");
        };
        assert!(err.message().contains("matches file names only"));
        assert!(Glob::new("").is_err());
    }
}
