//! The daemon's metrics: one registry (`prometheus-client`) that both the Prometheus endpoint
//! and the OTLP metrics exporter read, so a number never has two definitions.
//!
//! Names follow OpenTelemetry's conventions and their Prometheus translation: each family has
//! an OpenTelemetry name with dots and a UCUM unit (`airlock.tool.call.duration`, `s`), which
//! Prometheus sees with underscores and the unit as a suffix
//! (`airlock_tool_call_duration_seconds`); counters gain `_total` there. The model-call
//! families are the GenAI semantic conventions' own (`gen_ai.client.operation.duration`,
//! `gen_ai.client.token.usage`, development status as of semantic conventions 1.39), with
//! their attribute names; [`FAMILIES`] is the table both encoders read names from.
//!
//! Recording is a few atomic adds behind a read lock per labelled family; what is costly to
//! count (bytes on disk, approvals' ages) is sampled when the metrics are read, from a
//! [`Sample`] source the daemon registers ([`Metrics::set_source`]). The registry is the
//! process's ([`global`]): the counters describe the process, as a Prometheus target does.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// One metric family: its Prometheus base name (without unit suffix or `_total`), its
/// OpenTelemetry name and UCUM unit, and what it counts.
#[derive(Debug, Clone, Copy)]
pub struct FamilyName {
    pub prometheus: &'static str,
    pub otel: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
}

macro_rules! families {
    ($($id:ident = $prom:literal, $otel:literal, $unit:literal, $help:literal;)*) => {
        $(pub const $id: FamilyName = FamilyName {
            prometheus: $prom, otel: $otel, unit: $unit, help: $help,
        };)*
        /// Every family the registry holds.
        pub const FAMILIES: &[FamilyName] = &[$($id),*];
    };
}

families! {
    TOOL_CALLS = "airlock_tool_calls", "airlock.tool.calls", "{call}",
        "Tool calls finished, by tool, engine, tenant and status";
    TOOL_CALL_DURATION = "airlock_tool_call_duration", "airlock.tool.call.duration", "s",
        "Time from a tool call's start to its result, by tool and engine";
    RUN_STEPS = "airlock_run_steps", "airlock.run.steps", "{step}",
        "Agent loop steps taken, by tenant";
    RUN_STEP_DURATION = "airlock_run_step_duration", "airlock.run.step.duration", "s",
        "Time one agent loop step took: context, model call, the calls it proposed";
    RUNS = "airlock_runs", "airlock.runs", "{run}",
        "Runs live in this daemon, by state (running or waiting_approval)";
    RUNS_FINISHED = "airlock_runs_finished", "airlock.runs.finished", "{run}",
        "Runs that stopped, by reason";
    APPROVALS_PENDING = "airlock_approvals_pending", "airlock.approvals.pending", "{approval}",
        "Approval requests waiting for a decision";
    APPROVALS_OLDEST_AGE = "airlock_approvals_pending_oldest_age",
        "airlock.approvals.pending.oldest_age", "s",
        "How long the oldest waiting approval request has waited (0 when none waits)";
    APPROVALS_DECIDED = "airlock_approvals_decided", "airlock.approvals.decided", "{approval}",
        "Approval requests resolved, by outcome (approved, denied, expired)";
    MCP_INSTANCES = "airlock_mcp_instances", "airlock.mcp.instances", "{instance}",
        "Hosted MCP server instances running";
    SANDBOXES_READY = "airlock_sandboxes_ready", "airlock.sandboxes.ready", "{sandbox}",
        "Process sandboxes built ahead of their calls, waiting";
    BLOB_STORE_USAGE = "airlock_blob_store_usage", "airlock.blob_store.usage", "By",
        "Bytes held by the change sets' blob store";
    OUTPUT_KEPT_USAGE = "airlock_output_kept_usage", "airlock.output.kept.usage", "By",
        "Bytes of full tool outputs kept for paging";
    STORE_COMMIT_DURATION = "airlock_store_commit_duration", "airlock.store.commit.duration", "s",
        "Time a run store transaction took to commit, by backend";
    STORE_COMMIT_STATEMENTS = "airlock_store_commit_statements",
        "airlock.store.commit.statements", "{statement}",
        "Statements the run store's writes ran in its commits, by backend (not BEGIN, COMMIT or savepoints; a batch run again after a failed write counts again)";
    EGRESS_REQUESTS = "airlock_egress_requests", "airlock.egress.requests", "{request}",
        "Outgoing connections tools asked for, by tenant and decision (allowed, refused)";
    GEN_AI_OPERATION_DURATION = "gen_ai_client_operation_duration",
        "gen_ai.client.operation.duration", "s",
        "GenAI operation duration: model calls, by operation, provider and model";
    GEN_AI_TOKEN_USAGE = "gen_ai_client_token_usage", "gen_ai.client.token.usage", "{token}",
        "Tokens used by model calls, by token type, provider and model";
    BUILD_INFO = "airlock_build_info", "airlock.build.info", "1",
        "Always 1, labelled with the daemon's version";
}

/// The most (provider, model) pairs the GenAI families label series with; later ones are
/// counted under the model `_other`. Every other label's values are bounded by the
/// operator's configuration (tools, tenants) or by the code (statuses, engines), but a model's
/// name can come from a client (a replayed cassette names its own): without a bound, a tenant
/// could make the registry, every scrape and every export grow without end.
pub const MAX_MODEL_SERIES: usize = 64;

/// Prometheus label names whose OpenTelemetry attribute names have dots.
pub const DOTTED_LABELS: &[(&str, &str)] = &[
    ("gen_ai_operation_name", "gen_ai.operation.name"),
    ("gen_ai_provider_name", "gen_ai.provider.name"),
    ("gen_ai_request_model", "gen_ai.request.model"),
    ("gen_ai_token_type", "gen_ai.token.type"),
];

/// Call latencies from 0.1 ms (a warm WebAssembly call) to about 3.5 minutes, doubling: a
/// tool's timeout is at most minutes, and 22 buckets keep a series small.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 22))
}

/// Store commits from 50 µs (SQLite in WAL mode) to about 1.6 s (a PostgreSQL that is
/// failing over).
fn commit_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00005, 2.0, 16))
}

/// Token counts from 1 to about 4 million: the GenAI conventions' recommended boundaries are
/// powers of four.
fn token_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 12))
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    engine: &'static str,
    tenant: String,
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    engine: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EgressLabels {
    tenant: String,
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_provider_name: String,
    gen_ai_request_model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    gen_ai_token_type: &'static str,
    gen_ai_provider_name: String,
    gen_ai_request_model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

/// What is read when the metrics are, rather than counted as it happens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sampled {
    pub runs_running: i64,
    pub runs_waiting_approval: i64,
    pub approvals_pending: i64,
    pub approvals_oldest_age: Duration,
    pub blob_store_bytes: u64,
    pub output_kept_bytes: u64,
}

/// Where [`Sampled`] comes from: the daemon's parts, asked at each read. Must be cheap: it
/// runs on every scrape and export.
pub trait Sample: Send + Sync {
    fn sample(&self) -> Sampled;
}

/// How a model call went, for the GenAI families.
#[derive(Debug, Clone)]
pub struct ModelCall<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub duration: Duration,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The registry and the handles every recording goes through.
pub struct Metrics {
    registry: Registry,
    /// Off: recordings are dropped at the door (the cost comparison's "off" side, and a
    /// daemon configured without metrics).
    enabled: AtomicBool,
    tool_calls: Family<CallLabels, Counter>,
    tool_call_duration: Family<ToolLabels, Histogram, fn() -> Histogram>,
    run_steps: Family<TenantLabel, Counter>,
    run_step_duration: Histogram,
    runs: Family<StateLabel, Gauge>,
    runs_finished: Family<ReasonLabel, Counter>,
    approvals_pending: Gauge,
    approvals_oldest_age: Gauge<f64, AtomicU64>,
    approvals_decided: Family<OutcomeLabel, Counter>,
    mcp_instances: Gauge,
    sandboxes_ready: Gauge,
    blob_store_usage: Gauge,
    output_kept_usage: Gauge,
    store_commit: Family<BackendLabel, Histogram, fn() -> Histogram>,
    store_commit_statements: Family<BackendLabel, Counter>,
    egress: Family<EgressLabels, Counter>,
    model_duration: Family<ModelLabels, Histogram, fn() -> Histogram>,
    token_usage: Family<TokenLabels, Histogram, fn() -> Histogram>,
    source: RwLock<Option<Arc<dyn Sample>>>,
    /// The (provider, model) pairs with series of their own, at most [`MAX_MODEL_SERIES`].
    models: Mutex<HashSet<(String, String)>>,
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// The longest label value a model or provider name keeps (bytes): model names are short;
/// a longer one is cut, so no series' size follows a client's string.
const MAX_LABEL_BYTES: usize = 128;

/// `value` cut to [`MAX_LABEL_BYTES`] on a character boundary.
fn label(value: &str) -> String {
    let mut end = value.len().min(MAX_LABEL_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_owned()
}

/// `value` as a Prometheus gauge's `i64`, saturating.
fn gauge_value(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let metrics = Metrics {
            enabled: AtomicBool::new(true),
            tool_calls: Family::default(),
            tool_call_duration: Family::new_with_constructor(call_buckets as fn() -> Histogram),
            run_steps: Family::default(),
            run_step_duration: call_buckets(),
            runs: Family::default(),
            runs_finished: Family::default(),
            approvals_pending: Gauge::default(),
            approvals_oldest_age: Gauge::default(),
            approvals_decided: Family::default(),
            mcp_instances: Gauge::default(),
            sandboxes_ready: Gauge::default(),
            blob_store_usage: Gauge::default(),
            output_kept_usage: Gauge::default(),
            store_commit: Family::new_with_constructor(commit_buckets as fn() -> Histogram),
            store_commit_statements: Family::default(),
            egress: Family::default(),
            model_duration: Family::new_with_constructor(call_buckets as fn() -> Histogram),
            token_usage: Family::new_with_constructor(token_buckets as fn() -> Histogram),
            source: RwLock::new(None),
            models: Mutex::default(),
            registry: Registry::default(),
        };
        let register =
            |registry: &mut Registry,
             family: FamilyName,
             metric: Box<dyn prometheus_client::registry::Metric>| {
                match unit(family.unit) {
                    Some(unit) => registry.register_with_unit(
                        family.prometheus,
                        family.help,
                        unit,
                        DynMetric(metric),
                    ),
                    None => registry.register(family.prometheus, family.help, DynMetric(metric)),
                }
            };
        register(
            &mut registry,
            TOOL_CALLS,
            Box::new(metrics.tool_calls.clone()),
        );
        register(
            &mut registry,
            TOOL_CALL_DURATION,
            Box::new(metrics.tool_call_duration.clone()),
        );
        register(
            &mut registry,
            RUN_STEPS,
            Box::new(metrics.run_steps.clone()),
        );
        register(
            &mut registry,
            RUN_STEP_DURATION,
            Box::new(metrics.run_step_duration.clone()),
        );
        register(&mut registry, RUNS, Box::new(metrics.runs.clone()));
        register(
            &mut registry,
            RUNS_FINISHED,
            Box::new(metrics.runs_finished.clone()),
        );
        register(
            &mut registry,
            APPROVALS_PENDING,
            Box::new(metrics.approvals_pending.clone()),
        );
        register(
            &mut registry,
            APPROVALS_OLDEST_AGE,
            Box::new(metrics.approvals_oldest_age.clone()),
        );
        register(
            &mut registry,
            APPROVALS_DECIDED,
            Box::new(metrics.approvals_decided.clone()),
        );
        register(
            &mut registry,
            MCP_INSTANCES,
            Box::new(metrics.mcp_instances.clone()),
        );
        register(
            &mut registry,
            SANDBOXES_READY,
            Box::new(metrics.sandboxes_ready.clone()),
        );
        register(
            &mut registry,
            BLOB_STORE_USAGE,
            Box::new(metrics.blob_store_usage.clone()),
        );
        register(
            &mut registry,
            OUTPUT_KEPT_USAGE,
            Box::new(metrics.output_kept_usage.clone()),
        );
        register(
            &mut registry,
            STORE_COMMIT_DURATION,
            Box::new(metrics.store_commit.clone()),
        );
        register(
            &mut registry,
            STORE_COMMIT_STATEMENTS,
            Box::new(metrics.store_commit_statements.clone()),
        );
        register(
            &mut registry,
            EGRESS_REQUESTS,
            Box::new(metrics.egress.clone()),
        );
        register(
            &mut registry,
            GEN_AI_OPERATION_DURATION,
            Box::new(metrics.model_duration.clone()),
        );
        register(
            &mut registry,
            GEN_AI_TOKEN_USAGE,
            Box::new(metrics.token_usage.clone()),
        );
        let build_info: Family<VersionLabel, Gauge> = Family::default();
        build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        register(&mut registry, BUILD_INFO, Box::new(build_info));
        // The runs' states are known ahead: both series exist from the start, at 0.
        for state in ["running", "waiting_approval"] {
            metrics.runs.get_or_create(&StateLabel { state }).set(0);
        }
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Turns recording on or off (it is on from the start).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Where the sampled gauges are read from from now on.
    pub fn set_source(&self, source: Arc<dyn Sample>) {
        *self.source.write().unwrap_or_else(PoisonError::into_inner) = Some(source);
    }

    /// A tool call that finished with `status` after `duration`.
    pub fn tool_call(
        &self,
        tool: &str,
        engine: &'static str,
        tenant: Option<&str>,
        status: &'static str,
        duration: Duration,
    ) {
        if !self.on() {
            return;
        }
        self.tool_calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                engine,
                tenant: tenant.unwrap_or("").to_owned(),
                status,
            })
            .inc();
        self.tool_call_duration
            .get_or_create(&ToolLabels {
                tool: tool.to_owned(),
                engine,
            })
            .observe(duration.as_secs_f64());
    }

    /// One loop step of a run of `tenant`.
    pub fn run_step(&self, tenant: &str, duration: Duration) {
        if !self.on() {
            return;
        }
        self.run_steps
            .get_or_create(&TenantLabel {
                tenant: tenant.to_owned(),
            })
            .inc();
        self.run_step_duration.observe(duration.as_secs_f64());
    }

    /// A run that stopped, for `reason`.
    pub fn run_finished(&self, reason: &'static str) {
        if self.on() {
            self.runs_finished
                .get_or_create(&ReasonLabel { reason })
                .inc();
        }
    }

    /// An approval request resolved: `approved`, `denied` or `expired`.
    pub fn approval_decided(&self, outcome: &'static str) {
        if self.on() {
            self.approvals_decided
                .get_or_create(&OutcomeLabel { outcome })
                .inc();
        }
    }

    /// A hosted MCP server instance started (`1`) or stopped (`-1`).
    pub fn mcp_instances(&self, delta: i64) {
        if self.on() {
            self.mcp_instances.inc_by(delta);
        }
    }

    /// A sandbox built ahead of its call (`1`), or taken or thrown away (`-1`).
    pub fn sandboxes_ready(&self, delta: i64) {
        if self.on() {
            self.sandboxes_ready.inc_by(delta);
        }
    }

    /// A store transaction committed in `duration`.
    pub fn store_commit(&self, backend: &'static str, duration: Duration) {
        if self.on() {
            self.store_commit
                .get_or_create(&BackendLabel { backend })
                .observe(duration.as_secs_f64());
        }
    }

    /// `count` statements the writes of a commit of the run store on `backend` ran.
    pub fn store_commit_statements(&self, backend: &'static str, count: usize) {
        if self.on() {
            self.store_commit_statements
                .get_or_create(&BackendLabel { backend })
                .inc_by(count as u64);
        }
    }

    /// An outgoing connection a tool of `tenant` asked for, allowed or not.
    pub fn egress(&self, tenant: Option<&str>, allowed: bool) {
        if self.on() {
            self.egress
                .get_or_create(&EgressLabels {
                    tenant: tenant.unwrap_or("").to_owned(),
                    decision: if allowed { "allowed" } else { "refused" },
                })
                .inc();
        }
    }

    /// A model call (a `chat` operation in the GenAI conventions' words).
    pub fn model_call(&self, call: &ModelCall<'_>) {
        if !self.on() {
            return;
        }
        let mut labels = ModelLabels {
            gen_ai_operation_name: "chat",
            gen_ai_provider_name: label(call.provider),
            gen_ai_request_model: label(call.model),
        };
        {
            let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
            let pair = (
                labels.gen_ai_provider_name.clone(),
                labels.gen_ai_request_model.clone(),
            );
            if !models.contains(&pair) {
                if models.len() < MAX_MODEL_SERIES {
                    models.insert(pair);
                } else {
                    labels.gen_ai_provider_name = "_other".to_owned();
                    labels.gen_ai_request_model = "_other".to_owned();
                }
            }
        }
        self.model_duration
            .get_or_create(&labels)
            .observe(call.duration.as_secs_f64());
        for (token_type, count) in [("input", call.input_tokens), ("output", call.output_tokens)] {
            // Precision lost past 2^53 tokens in one call is no loss.
            #[allow(clippy::cast_precision_loss)]
            self.token_usage
                .get_or_create(&TokenLabels {
                    gen_ai_token_type: token_type,
                    gen_ai_provider_name: labels.gen_ai_provider_name.clone(),
                    gen_ai_request_model: labels.gen_ai_request_model.clone(),
                })
                .observe(count as f64);
        }
    }

    /// Reads the sampled gauges from the source, if one is set.
    fn refresh(&self) {
        let source = self
            .source
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(source) = source else {
            return;
        };
        let sampled = source.sample();
        self.runs
            .get_or_create(&StateLabel { state: "running" })
            .set(sampled.runs_running);
        self.runs
            .get_or_create(&StateLabel {
                state: "waiting_approval",
            })
            .set(sampled.runs_waiting_approval);
        self.approvals_pending.set(sampled.approvals_pending);
        self.approvals_oldest_age
            .set(sampled.approvals_oldest_age.as_secs_f64());
        self.blob_store_usage
            .set(gauge_value(sampled.blob_store_bytes));
        self.output_kept_usage
            .set(gauge_value(sampled.output_kept_bytes));
    }

    /// Everything, in the Prometheus text format (0.0.4).
    pub fn prometheus_text(&self) -> Result<String, std::fmt::Error> {
        self.refresh();
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// Everything, in the OpenMetrics text format.
    pub fn openmetrics_text(&self) -> Result<String, std::fmt::Error> {
        self.refresh();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// Everything, as Prometheus's data model (what the OTLP exporter maps).
    pub fn snapshot(&self) -> Result<Vec<MetricFamily>, std::fmt::Error> {
        self.refresh();
        prometheus_client::encoding::prometheus_protobuf::encode(&self.registry)
    }
}

/// The Prometheus unit of a UCUM unit: seconds and bytes have suffixes, counts (`{call}`)
/// and ratios (`1`) do not.
fn unit(ucum: &str) -> Option<Unit> {
    match ucum {
        "s" => Some(Unit::Seconds),
        "By" => Some(Unit::Bytes),
        _ => None,
    }
}

/// The family a full Prometheus name (unit suffix and `_total` included) belongs to.
pub fn family(exposed: &str) -> Option<&'static FamilyName> {
    let name = exposed.strip_suffix("_total").unwrap_or(exposed);
    FAMILIES.iter().find(|family| {
        let suffix = match family.unit {
            "s" => "_seconds",
            "By" => "_bytes",
            _ => "",
        };
        name.strip_suffix(suffix) == Some(family.prometheus)
    })
}

/// A registered metric of any kind: [`Registry::register`] takes one concrete type.
#[derive(Debug)]
struct DynMetric(Box<dyn prometheus_client::registry::Metric>);

impl prometheus_client::encoding::EncodeMetric for DynMetric {
    fn encode(
        &self,
        encoder: prometheus_client::encoding::MetricEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        self.0.metric_type()
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
