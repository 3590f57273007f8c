//! Approvals where people are: each approval request a run of this daemon asks is posted to
//! the webhooks configured for its tenant (`[[approvals.webhooks]]`: airlock's JSON, or a
//! Slack incoming-webhook message), with two links — approve, deny — that decide exactly
//! that call once, until they expire (see [`links`]; `api::approval_links` serves them).
//!
//! The notifier follows the daemon's approval broker, so each request is posted by the
//! daemon whose run asked it (in a fleet, once). A post is best effort and never holds up a
//! run: bounded in time, retried a few times, and dropped (with a warning) when receivers
//! fall so far behind that posts pile up. What a person may decide through a link is what
//! the console would let the link's tenant decide: the links go through the same check.

pub mod links;
mod message;
pub mod settings;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;
use tokio::sync::{Semaphore, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::agent::AgentRuntime;
use crate::ids::{RunId, now_ms};
use links::{Claims, LinkDecision, LinkKey};
use message::Links;
pub use settings::{ApprovalsFile, WebhookFile, WebhookFormat};

/// A post that gets no answer within this is given up (and retried): a receiver that slow
/// would only hold connections open.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Attempts per post, and the wait before each retry: a receiver restarting or rate
/// limiting for a few seconds still gets the message, a dead one costs under a minute.
const RETRY_WAITS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(5)];

/// Posts in flight at once to one webhook: a burst of requests reaches a working receiver
/// together, and a slow one holds at most this many connections.
const POSTS_IN_FLIGHT: usize = 4;

/// Requests waiting for one webhook; more are dropped with a warning (each is on every
/// console anyway). Each webhook has its own queue, so a receiver that hangs — a tenant's
/// own, or one under attack — delays and drops only its own requests, never another
/// webhook's.
const QUEUED: usize = 64;

/// Approval ids remembered as posted (a request is seen again on each update); the oldest
/// is forgotten first, long after it was decided.
const REMEMBERED: usize = 4096;

/// One receiver, as the daemon uses it: its URL and secret read from their files.
#[derive(Clone)]
pub struct Webhook {
    pub name: String,
    pub url: reqwest::Url,
    pub format: WebhookFormat,
    pub tenant: String,
    pub secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for Webhook {
    /// The URL of an incoming webhook is a credential: only its host is shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("host", &self.url.host_str())
            .field("format", &self.format)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// What the notifier needs, resolved from `[approvals]`.
#[derive(Debug, Clone)]
pub struct NotifySettings {
    /// The base of the links, without a trailing slash.
    pub public_url: String,
    /// Its origin: what a browser names as `Origin` on the links' page.
    pub origin: String,
    pub link_ttl: Duration,
    pub webhooks: Vec<Webhook>,
}

/// Posts every new approval request of this daemon's runs to the webhooks of its tenant,
/// until `stop`.
pub fn start(
    runtime: Arc<AgentRuntime>,
    settings: NotifySettings,
    key: Arc<LinkKey>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, String> {
    crate::http_client::install_crypto_provider();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(
            crate::http_client::tls_config(None, None)
                .map_err(|reason| format!("webhooks' TLS: {reason}"))?,
        )
        // A post goes to the URL configured, and nowhere a receiver redirects it.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(POST_TIMEOUT)
        .user_agent(concat!("airlockd/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot set up the webhooks' HTTP client: {err}"))?;
    let notifier = Arc::new(Notifier {
        runtime,
        settings,
        key,
        client,
    });
    let mut queues = Vec::with_capacity(notifier.settings.webhooks.len());
    for webhook in notifier.settings.webhooks.clone() {
        let (queue, mut waiting) = mpsc::channel::<Arc<pb::ApprovalRequest>>(QUEUED);
        let (notifier, stop) = (notifier.clone(), stop.clone());
        tokio::spawn(async move {
            let in_flight = Arc::new(Semaphore::new(POSTS_IN_FLIGHT));
            loop {
                let request = tokio::select! {
                    request = waiting.recv() => match request {
                        Some(request) => request,
                        None => return,
                    },
                    () = stop.cancelled() => return,
                };
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    return;
                };
                let (notifier, webhook, stop) = (notifier.clone(), webhook.clone(), stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = notifier.post(&webhook, &request) => {}
                        () = stop.cancelled() => {}
                    }
                    drop(permit);
                });
            }
        });
        queues.push(queue);
    }
    Ok(tokio::spawn(async move {
        tokio::select! {
            () = notifier.follow(&queues) => {}
            () = stop.cancelled() => {}
        }
    }))
}

struct Notifier {
    runtime: Arc<AgentRuntime>,
    settings: NotifySettings,
    key: Arc<LinkKey>,
    client: reqwest::Client,
}

/// Each webhook's queue, in the order of `NotifySettings::webhooks`.
type Queues = [mpsc::Sender<Arc<pb::ApprovalRequest>>];

impl Notifier {
    async fn follow(&self, queues: &Queues) {
        let (pending, mut updates) = self.runtime.approvals().subscribe();
        let mut posted = Posted::default();
        for request in pending {
            self.notice(queues, &mut posted, request).await;
        }
        loop {
            match updates.recv().await {
                Ok(request) => self.notice(queues, &mut posted, request).await,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let (pending, fresh) = self.runtime.approvals().subscribe();
                    updates = fresh;
                    for request in pending {
                        self.notice(queues, &mut posted, request).await;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Queues `request` for its tenant's webhooks if it is a pending one not queued yet.
    async fn notice(&self, queues: &Queues, posted: &mut Posted, request: pb::ApprovalRequest) {
        if request.state != pb::ApprovalState::Pending as i32 || !posted.first(&request) {
            return;
        }
        let tenant = if request.run_id.is_empty() {
            request.tenant.clone()
        } else {
            let Ok(run_id) = RunId::parse(&request.run_id) else {
                return;
            };
            match self.runtime.run_owner(&run_id).await {
                Ok(owner) => owner,
                Err(_) => return,
            }
        };
        let request = Arc::new(request);
        for (webhook, queue) in self.settings.webhooks.iter().zip(queues) {
            if webhook.tenant != tenant {
                continue;
            }
            if queue.try_send(request.clone()).is_err() {
                tracing::warn!(webhook = %webhook.name, approval = %request.approval_id, "approval not posted: {QUEUED} requests are waiting on this webhook's receiver");
            }
        }
    }

    /// The two links of `request` for `webhook`; none (with a warning) when the system has
    /// no randomness for their nonces.
    fn links(&self, webhook: &Webhook, request: &pb::ApprovalRequest) -> Option<Links> {
        let ttl = i64::try_from(self.settings.link_ttl.as_millis()).unwrap_or(i64::MAX);
        let expires_ms = now_ms().saturating_add(ttl).min(request.deadline_ms);
        let link = |decision| -> Result<String, String> {
            let token = self.key.mint(&Claims {
                approval_id: request.approval_id.clone(),
                digest: request.digest.clone(),
                tenant: webhook.tenant.clone(),
                decision,
                expires_ms,
                nonce: links::nonce()?,
                webhook: webhook.name.clone(),
            });
            Ok(format!("{}/approve/{token}", self.settings.public_url))
        };
        match (link(LinkDecision::Approve), link(LinkDecision::Deny)) {
            (Ok(approve), Ok(deny)) => Some(Links {
                approve,
                deny,
                run: (!request.run_id.is_empty())
                    .then(|| format!("{}/#/runs/{}", self.settings.public_url, request.run_id)),
                expires_ms,
            }),
            (Err(err), _) | (_, Err(err)) => {
                tracing::warn!(webhook = %webhook.name, approval = %request.approval_id, error = %err, "approval not posted");
                None
            }
        }
    }

    async fn post(&self, webhook: &Webhook, request: &pb::ApprovalRequest) {
        let Some(links) = self.links(webhook, request) else {
            return;
        };
        let body = message::body(
            webhook.format,
            &webhook.name,
            &webhook.tenant,
            request,
            &links,
        );
        let body = body.to_string().into_bytes();
        let mut waits = RETRY_WAITS.iter();
        loop {
            // A request that waited in the queue (or for a retry) may be decided by now: its
            // links would only say so.
            if now_ms() >= request.deadline_ms
                || self
                    .runtime
                    .pending_approval(&request.approval_id)
                    .await
                    .is_none()
            {
                return;
            }
            let mut post = self
                .client
                .post(webhook.url.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header("x-airlock-approval", request.approval_id.as_str());
            if let Some(secret) = &webhook.secret {
                let unix_s = now_ms() / 1000;
                post = post.header(
                    "x-airlock-signature",
                    links::sign_body(secret, unix_s, &body),
                );
            }
            let outcome = post.body(body.clone()).send().await;
            let retry = match outcome {
                Ok(answer) if answer.status().is_success() => {
                    tracing::info!(webhook = %webhook.name, approval = %request.approval_id, "approval request posted");
                    return;
                }
                // A refusal other than "too many" or "timed out" will not change on retry.
                Ok(answer) => {
                    let status = answer.status();
                    tracing::warn!(webhook = %webhook.name, approval = %request.approval_id, %status, "the webhook refused the approval request");
                    status.is_server_error()
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                }
                Err(err) => {
                    // reqwest's error names the URL; only its host is shown.
                    let err = err.without_url();
                    tracing::warn!(webhook = %webhook.name, host = ?webhook.url.host_str(), approval = %request.approval_id, error = %err, "cannot post the approval request");
                    true
                }
            };
            match waits.next() {
                Some(wait) if retry => tokio::time::sleep(*wait).await,
                _ => return,
            }
        }
    }
}

/// The approval ids posted lately.
#[derive(Default)]
struct Posted {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl Posted {
    /// Whether `request` is posted for the first time (and remembers it).
    fn first(&mut self, request: &pb::ApprovalRequest) -> bool {
        if !self.ids.insert(request.approval_id.clone()) {
            return false;
        }
        self.order.push_back(request.approval_id.clone());
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.ids.remove(&oldest);
        }
        true
    }
}

/// The notifier's settings and the link key from `file`, reading the webhooks' URL and
/// secret files with `read_secret` (a token file's rules) and making the key in
/// `shared_dir`; none when there is nothing to post or link. Every webhook's tenant must be
/// one of `tenants`.
pub fn resolve(
    file: &ApprovalsFile,
    shared_dir: &std::path::Path,
    tenants: &[&str],
    read_secret: impl Fn(&std::path::Path) -> Result<String, String>,
) -> Result<Option<(NotifySettings, Arc<LinkKey>)>, String> {
    let Some(public_url) = &file.public_url else {
        return Ok(None);
    };
    let (public_url, origin) = settings::public_url(public_url)?;
    let mut webhooks = Vec::with_capacity(file.webhooks.len());
    for webhook in &file.webhooks {
        let named = |reason: String| format!("webhook `{}`: {reason}", webhook.name);
        let tenant = webhook
            .tenant
            .clone()
            .unwrap_or_else(|| crate::domain::DEFAULT_TENANT.to_owned());
        if !tenants.contains(&tenant.as_str()) {
            return Err(named(format!("no tenant `{tenant}` is configured")));
        }
        let url = match (&webhook.url, &webhook.url_file) {
            (Some(url), _) => settings::post_url(url),
            (None, Some(path)) => settings::post_url(&read_secret(path).map_err(&named)?),
            (None, None) => Err("no url".to_owned()),
        }
        .map_err(&named)?;
        let secret = webhook
            .secret_file
            .as_deref()
            .map(|path| read_secret(path).map(String::into_bytes))
            .transpose()
            .map_err(&named)?;
        webhooks.push(Webhook {
            name: webhook.name.clone(),
            url,
            format: webhook.format,
            tenant,
            secret,
        });
    }
    let key = LinkKey::load_or_create(shared_dir)?;
    Ok(Some((
        NotifySettings {
            public_url,
            origin,
            link_ttl: Duration::from_secs(
                file.link_ttl_s.unwrap_or(settings::DEFAULT_LINK_TTL_SECS),
            ),
            webhooks,
        },
        Arc::new(key),
    )))
}
