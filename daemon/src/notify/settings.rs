//! `[approvals]` in the daemon's config: where approval requests are posted, and the base of
//! the links that answer them.

use std::path::PathBuf;

use serde::Deserialize;

/// How long a link stays good when the approval's own deadline is later: long enough to
/// read a message that arrived during a meeting, short enough that a link found in a
/// channel's history a day later decides nothing.
pub const DEFAULT_LINK_TTL_SECS: u64 = 60 * 60;

/// The longest a link may be configured to last: a day.
pub const MAX_LINK_TTL_SECS: u64 = 24 * 60 * 60;

/// More webhooks than this is not a team's notification setup but a broadcast; each costs a
/// POST per approval.
pub const MAX_WEBHOOKS: usize = 16;

/// `[approvals]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsFile {
    /// The address people's browsers reach this daemon (or the fleet's balancer) at, e.g.
    /// `https://airlock.example.com`: links are `<public_url>/approve/<token>`. Required
    /// with any webhook.
    pub public_url: Option<String>,
    /// How long a link lasts at most (it never outlives the approval's deadline); default
    /// an hour, at most a day.
    pub link_ttl_s: Option<u64>,
    #[serde(default)]
    pub webhooks: Vec<WebhookFile>,
}

/// `[[approvals.webhooks]]`: one receiver of approval requests.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookFile {
    /// Names the webhook in logs, the audit log and the links it sent.
    pub name: String,
    /// The URL posted to. An incoming webhook's URL is a credential (whoever has it may
    /// post to the channel): prefer `url_file`.
    pub url: Option<String>,
    /// A file (mode 0600, like a token file) holding the URL.
    pub url_file: Option<PathBuf>,
    /// `json` (airlock's own body) or `slack` (Slack's incoming-webhook message format,
    /// which Mattermost, Rocket.Chat and others accept too).
    #[serde(default)]
    pub format: WebhookFormat,
    /// The tenant whose approval requests go to this webhook, and whose rights its links
    /// decide with; default `default`.
    pub tenant: Option<String>,
    /// A file holding a secret the daemon signs each body with (`X-Airlock-Signature`), so
    /// that the receiver can tell airlock's posts from forged ones.
    pub secret_file: Option<PathBuf>,
}

impl std::fmt::Debug for WebhookFile {
    /// An inline `url` is a credential: shown only as whether it is set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookFile")
            .field("name", &self.name)
            .field("url", &self.url.as_ref().map(|_| "<hidden>"))
            .field("url_file", &self.url_file)
            .field("format", &self.format)
            .field("tenant", &self.tenant)
            .field("secret_file", &self.secret_file)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    #[default]
    Json,
    Slack,
}

impl ApprovalsFile {
    /// Refuses what no daemon could post or link with: a webhook without exactly one of
    /// `url` and `url_file`, names that are not short words or repeat, too many webhooks,
    /// a link lifetime past a day, and webhooks without a `public_url` to link to.
    pub fn check(&self) -> Result<(), String> {
        if self.webhooks.len() > MAX_WEBHOOKS {
            return Err(format!(
                "{} webhooks, over the {MAX_WEBHOOKS} a daemon posts to",
                self.webhooks.len()
            ));
        }
        if let Some(ttl) = self.link_ttl_s
            && !(1..=MAX_LINK_TTL_SECS).contains(&ttl)
        {
            return Err(format!(
                "link_ttl_s = {ttl}: a link lasts from 1 s to a day ({MAX_LINK_TTL_SECS} s)"
            ));
        }
        if let Some(url) = &self.public_url {
            public_url(url)?;
        } else if !self.webhooks.is_empty() {
            return Err(
                "public_url is required with webhooks: the links they carry are \
                 <public_url>/approve/…"
                    .to_owned(),
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for webhook in &self.webhooks {
            let word = !webhook.name.is_empty()
                && webhook.name.len() <= 64
                && webhook
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !word {
                return Err(format!(
                    "webhook name {:?}: letters, digits, `-` and `_`, at most 64",
                    webhook.name
                ));
            }
            if !names.insert(&webhook.name) {
                return Err(format!("webhook `{}` is named twice", webhook.name));
            }
            if webhook.url.is_some() == webhook.url_file.is_some() {
                return Err(format!(
                    "webhook `{}`: give exactly one of url and url_file",
                    webhook.name
                ));
            }
            if let Some(url) = &webhook.url {
                post_url(url).map_err(|reason| format!("webhook `{}`: {reason}", webhook.name))?;
            }
        }
        Ok(())
    }
}

/// The links' base: an http(s) URL with a host, and nothing after its path; with it, the
/// links' origin (what a browser sends as `Origin` from their page). A path is kept in the
/// links (`<public_url>/approve/…`); the daemon serves `/approve/…`, so a proxy in front of
/// it must take the path off.
pub fn public_url(text: &str) -> Result<(String, String), String> {
    let url = reqwest::Url::parse(text).map_err(|err| format!("public_url {text:?}: {err}"))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none_or(str::is_empty)
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(format!(
            "public_url {text:?}: an http or https URL with a host and no query, fragment or \
             user"
        ));
    }
    Ok((
        url.as_str().trim_end_matches('/').to_owned(),
        url.origin().ascii_serialization(),
    ))
}

/// A webhook's URL: http or https, with a host. Its text is never shown (it is a
/// credential): errors name only what is wrong.
pub fn post_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text.trim()).map_err(|err| format!("its URL: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("its URL must be http or https, with a host".to_owned());
    }
    Ok(url)
}
