//! Where the token a client sends comes from, named so that a refusal can say what to change.
//! Below both the lookup (`auth`) and the errors that describe it.

use std::path::PathBuf;

/// The environment variable holding a token.
pub const TOKEN_ENV: &str = "AIRLOCK_TOKEN";

/// Where the token a client sends came from, so that a refusal can say what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// Given by the caller (`--token`).
    Given,
    /// `$AIRLOCK_TOKEN`.
    Environment,
    /// The token file of a daemon on this host with the default state dir.
    File(PathBuf),
    /// None anywhere; this is where the token file was looked for.
    Missing { looked_in: PathBuf },
    /// None given, and the token file at `path` not sent: it is the local daemon's, and the
    /// daemon addressed is not on this host (a mistyped or hostile address would get it).
    Withheld { path: PathBuf },
}

impl TokenSource {
    /// How a message names the token: "the access token given with --token", …
    pub fn describe(&self) -> String {
        match self {
            TokenSource::Given => "the access token given with --token".to_owned(),
            TokenSource::Environment => format!("the access token in {TOKEN_ENV}"),
            TokenSource::File(path) => format!(
                "the access token read from {} (the token file of a daemon with the default \
                 state dir)",
                path.display()
            ),
            TokenSource::Missing { .. } | TokenSource::Withheld { .. } => {
                "no access token".to_owned()
            }
        }
    }
}
