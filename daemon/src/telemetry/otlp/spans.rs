//! From airlock's spans to OTLP's, in the words of OpenTelemetry's semantic conventions for
//! GenAI and MCP ([`SCHEMA_URL`]; the GenAI and MCP conventions are at "development"
//! stability there): a run is `invoke_agent`, a model call `chat {model}` (a `CLIENT` span
//! with `gen_ai.provider.name`, `gen_ai.request.model` and `gen_ai.usage.*_tokens`), a tool
//! call `execute_tool {tool}` (`gen_ai.tool.name`, `gen_ai.tool.call.id`), and a call to a
//! hosted MCP server also carries `mcp.method.name = tools/call`. Attributes with no
//! convention keep airlock's name under the `airlock.` namespace, as the conventions ask of
//! vendor attributes; the stored span (what `GetTrace` returns) is unchanged. Ids become
//! bytes, the status becomes OTLP's, and every span is sent under the daemon's resource
//! (`service.name`, `service.version`, `service.instance.id`, `OTEL_RESOURCE_ATTRIBUTES`).

use airlock_proto::otlp::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use airlock_proto::otlp::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use airlock_proto::otlp::resource::v1::Resource;
use airlock_proto::otlp::trace::v1::span::SpanKind;
use airlock_proto::otlp::trace::v1::status::StatusCode;
use airlock_proto::otlp::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use airlock_proto::v1 as pb;

use super::batch::{Batch, BatchExporter};
use crate::trace::SpanSink;

/// The semantic conventions' version the names below follow.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.39.0";

/// The instrumentation scope: the code that records the spans.
pub const SCOPE_NAME: &str = "airlock";

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// OTLP `trace_id` length in bytes (32 hex digits).
const TRACE_ID_BYTES: usize = 16;

/// OTLP `span_id` and `parent_span_id` length in bytes (16 hex digits).
const SPAN_ID_BYTES: usize = 8;

/// W3C trace flags in the low byte, and OTLP's "is the parent remote" bits above it: every
/// span airlock records is kept (sampled, 0x01), and a span's parent is always in the same
/// daemon (has-is-remote 0x100 set, is-remote 0x200 clear).
const FLAGS: u32 = 0x01 | 0x100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// OTLP ids are fixed-length, non-zero byte strings; anything else is rejected by
    /// collectors, so such a span is not sent.
    #[error(
        "span {span_id:?} cannot be exported: its {field} {value:?} is not {bytes} non-zero bytes in hex"
    )]
    InvalidId {
        span_id: String,
        field: &'static str,
        value: String,
        bytes: usize,
    },
}

/// The provider and the model of a provider's description (`openai:gpt-4o`), as the GenAI
/// conventions name them; a description without a provider is airlock's own (scripted runs,
/// cassettes).
pub fn provider_and_model(described: &str) -> (&str, &str) {
    match described.split_once(':') {
        Some((provider, model)) if !provider.is_empty() => (provider, model),
        _ => ("airlock", described),
    }
}

/// Attributes whose conventional name differs from airlock's, and whose values are numbers.
const RENAMED: &[(&str, &str, bool)] = &[
    ("input_tokens", "gen_ai.usage.input_tokens", true),
    ("output_tokens", "gen_ai.usage.output_tokens", true),
    ("tool", "gen_ai.tool.name", false),
];

/// One span in OTLP form.
pub fn span(span: &pb::Span) -> Result<Span, MappingError> {
    let id = |field: &'static str, value: &str, bytes: usize| {
        decode_id(value, bytes).ok_or_else(|| MappingError::InvalidId {
            span_id: span.span_id.clone(),
            field,
            value: value.to_owned(),
            bytes,
        })
    };
    let parent_span_id = if span.parent_span_id.is_empty() {
        Vec::new()
    } else {
        id("parent_span_id", &span.parent_span_id, SPAN_ID_BYTES)?
    };
    let value_of = |key: &str| {
        span.attributes
            .iter()
            .find(|attribute| attribute.key == key)
            .map(|attribute| attribute.value.as_str())
    };
    let mut attributes: Vec<KeyValue> = Vec::with_capacity(span.attributes.len() + 4);
    let mut kind = SpanKind::Internal;
    let name = match span.name.as_str() {
        "run" => {
            attributes.push(string_attribute("gen_ai.operation.name", "invoke_agent"));
            attributes.push(string_attribute("gen_ai.agent.name", "airlock"));
            if let Some(run_id) = value_of("run_id") {
                attributes.push(string_attribute("gen_ai.agent.id", run_id));
            }
            "invoke_agent airlock".to_owned()
        }
        "model" => {
            kind = SpanKind::Client;
            let (provider, model) = provider_and_model(value_of("model").unwrap_or_default());
            attributes.push(string_attribute("gen_ai.operation.name", "chat"));
            attributes.push(string_attribute("gen_ai.provider.name", provider));
            attributes.push(string_attribute("gen_ai.request.model", model));
            format!("chat {model}")
        }
        "tool" => {
            let tool = value_of("tool").unwrap_or_default();
            attributes.push(string_attribute("gen_ai.operation.name", "execute_tool"));
            attributes.push(string_attribute("gen_ai.tool.type", "function"));
            let call_id = value_of("provider_call_id")
                .filter(|id| !id.is_empty())
                .or(value_of("call_id"));
            if let Some(call_id) = call_id {
                attributes.push(string_attribute("gen_ai.tool.call.id", call_id));
            }
            if value_of("engine") == Some("mcp") {
                attributes.push(string_attribute("mcp.method.name", "tools/call"));
            }
            format!("execute_tool {tool}")
        }
        other => other.to_owned(),
    };
    if span.status == pb::SpanStatus::Error as i32 {
        let error_type = value_of("status").unwrap_or("_OTHER");
        attributes.push(string_attribute("error.type", error_type));
    }
    for attribute in &span.attributes {
        match RENAMED.iter().find(|(ours, _, _)| *ours == attribute.key) {
            Some((_, conventional, true)) => match attribute.value.parse::<i64>() {
                Ok(number) => attributes.push(int_attribute(conventional, number)),
                Err(_) => attributes.push(string_attribute(conventional, &attribute.value)),
            },
            Some((_, conventional, false)) => {
                attributes.push(string_attribute(conventional, &attribute.value));
            }
            None => attributes.push(string_attribute(
                &format!("airlock.{}", attribute.key),
                &attribute.value,
            )),
        }
    }
    Ok(Span {
        trace_id: id("trace_id", &span.trace_id, TRACE_ID_BYTES)?,
        span_id: id("span_id", &span.span_id, SPAN_ID_BYTES)?,
        trace_state: String::new(),
        parent_span_id,
        flags: FLAGS,
        name,
        kind: kind as i32,
        start_time_unix_nano: unix_nano(span.start_unix_nano),
        end_time_unix_nano: unix_nano(span.end_unix_nano),
        attributes,
        dropped_attributes_count: 0,
        events: Vec::new(),
        dropped_events_count: 0,
        links: Vec::new(),
        dropped_links_count: 0,
        status: Some(status(span)),
    })
}

/// The daemon's resource, from its attributes.
pub fn resource(attributes: &[(String, String)]) -> Resource {
    Resource {
        attributes: attributes
            .iter()
            .map(|(key, value)| string_attribute(key, value))
            .collect(),
        dropped_attributes_count: 0,
    }
}

/// The instrumentation scope every signal is sent under.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE_NAME.to_owned(),
        version: VERSION.to_owned(),
        attributes: Vec::new(),
        dropped_attributes_count: 0,
    }
}

/// One `Export` request carrying `spans`, under `resource` and airlock's scope.
pub fn request(resource: Resource, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans,
                schema_url: SCHEMA_URL.to_owned(),
            }],
            schema_url: SCHEMA_URL.to_owned(),
        }],
    }
}

/// Spans, as one signal's batches.
pub struct Spans {
    pub resource: Resource,
}

impl Batch for Spans {
    type Item = pb::Span;
    type Request = ExportTraceServiceRequest;
    type Response = ExportTraceServiceResponse;
    const NOUN: &'static str = "spans";

    fn request(&self, items: Vec<pb::Span>) -> (ExportTraceServiceRequest, u64) {
        let mut spans = Vec::with_capacity(items.len());
        for item in &items {
            match span(item) {
                Ok(span) => spans.push(span),
                Err(error) => tracing::warn!(%error, "span left out of the OTLP export"),
            }
        }
        let count = u64::try_from(spans.len()).unwrap_or(u64::MAX);
        (request(self.resource.clone(), spans), count)
    }

    fn rejected(response: &ExportTraceServiceResponse) -> (i64, String) {
        response
            .partial_success
            .as_ref()
            .map(|partial| (partial.rejected_spans, partial.error_message.clone()))
            .unwrap_or_default()
    }
}

/// The span exporter.
pub type SpanExporter = BatchExporter<Spans>;

impl SpanSink for SpanExporter {
    fn export(&self, span: &pb::Span) {
        self.push(span.clone());
    }
}

/// `bytes` bytes from hex digits; `None` for anything else, or for all zeros (the invalid id
/// in OpenTelemetry).
fn decode_id(hex_id: &str, bytes: usize) -> Option<Vec<u8>> {
    hex::decode(hex_id)
        .ok()
        .filter(|id| id.len() == bytes && id.iter().any(|&byte| byte != 0))
}

/// Times before the epoch cannot be told in OTLP's unsigned nanoseconds; they only come from
/// a clock set wrong, and are sent as 0 (unknown) rather than wrapped into the far future.
fn unix_nano(nanos: i64) -> u64 {
    u64::try_from(nanos).unwrap_or(0)
}

fn status(span: &pb::Span) -> Status {
    let (code, message) = match pb::SpanStatus::try_from(span.status) {
        Ok(pb::SpanStatus::Ok) => (StatusCode::Ok, String::new()),
        Ok(pb::SpanStatus::Error) => (StatusCode::Error, span.status_message.clone()),
        // A status this daemon does not know says nothing about how the operation went.
        Ok(pb::SpanStatus::Unspecified) | Err(_) => (StatusCode::Unset, String::new()),
    };
    Status {
        message,
        code: code as i32,
    }
}

pub fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
    }
}

pub fn int_attribute(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn airlock_span() -> pb::Span {
        pb::Span {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
            parent_span_id: "00f067aa0ba902b7".into(),
            name: "tool".into(),
            start_unix_nano: 1_700_000_000_000_000_000,
            end_unix_nano: 1_700_000_000_250_000_000,
            attributes: vec![
                pb::SpanAttribute {
                    key: "tool".into(),
                    value: "read_file".into(),
                },
                pb::SpanAttribute {
                    key: "peak_memory_bytes".into(),
                    value: "1048576".into(),
                },
            ],
            status: pb::SpanStatus::Ok as i32,
            status_message: String::new(),
        }
    }

    fn string_value(attribute: &KeyValue) -> Option<&str> {
        match attribute.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(value) => Some(value),
            _ => None,
        }
    }

    #[test]
    fn ids_become_bytes_and_the_rest_is_carried_over() -> Result<(), MappingError> {
        let mapped = span(&airlock_span())?;
        assert_eq!(
            mapped.trace_id,
            [
                0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80,
                0x31, 0x9c
            ]
        );
        assert_eq!(
            mapped.span_id,
            [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(
            mapped.parent_span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert_eq!(mapped.name, "execute_tool read_file");
        assert_eq!(mapped.kind, SpanKind::Internal as i32);
        assert_eq!(mapped.start_time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(mapped.end_time_unix_nano, 1_700_000_000_250_000_000);
        assert_eq!(mapped.flags & 0xff, 0x01, "sampled");
        let attributes: Vec<(&str, Option<&str>)> = mapped
            .attributes
            .iter()
            .map(|kv| (kv.key.as_str(), string_value(kv)))
            .collect();
        assert_eq!(
            attributes,
            [
                ("gen_ai.operation.name", Some("execute_tool")),
                ("gen_ai.tool.type", Some("function")),
                ("gen_ai.tool.name", Some("read_file")),
                ("airlock.peak_memory_bytes", Some("1048576"))
            ]
        );
        assert_eq!(
            mapped.status,
            Some(Status {
                message: String::new(),
                code: StatusCode::Ok as i32
            })
        );
        Ok(())
    }

    #[test]
    fn a_root_span_has_no_parent_bytes() -> Result<(), MappingError> {
        let mut root = airlock_span();
        root.parent_span_id.clear();
        assert!(span(&root)?.parent_span_id.is_empty());
        Ok(())
    }

    #[test]
    fn errors_keep_their_message_and_unknown_statuses_are_unset() -> Result<(), MappingError> {
        let mut failed = airlock_span();
        failed.status = pb::SpanStatus::Error as i32;
        failed.status_message = "tool timed out".into();
        assert_eq!(
            span(&failed)?.status,
            Some(Status {
                message: "tool timed out".into(),
                code: StatusCode::Error as i32
            })
        );
        for unknown in [pb::SpanStatus::Unspecified as i32, 42] {
            let mut odd = airlock_span();
            odd.status = unknown;
            odd.status_message = "ignored".into();
            assert_eq!(
                span(&odd)?.status,
                Some(Status {
                    message: String::new(),
                    code: StatusCode::Unset as i32
                })
            );
        }
        Ok(())
    }

    #[test]
    fn times_before_the_epoch_are_sent_as_unknown() -> Result<(), MappingError> {
        let mut skewed = airlock_span();
        skewed.start_unix_nano = -5;
        assert_eq!(span(&skewed)?.start_time_unix_nano, 0);
        Ok(())
    }

    #[test]
    fn malformed_ids_are_refused_naming_the_field() {
        type Break = fn(&mut pb::Span);
        let cases: [(&str, Break); 5] = [
            ("trace_id", |s| s.trace_id = "not hex".into()),
            ("trace_id", |s| s.trace_id = "0af7651916cd43dd".into()),
            ("span_id", |s| s.span_id = "0000000000000000".into()),
            ("span_id", |s| s.span_id = "b7ad6b71692033".into()),
            ("parent_span_id", |s| s.parent_span_id = "xyz".into()),
        ];
        for (field, break_it) in cases {
            let mut broken = airlock_span();
            break_it(&mut broken);
            match span(&broken) {
                Err(MappingError::InvalidId { field: named, .. }) => assert_eq!(named, field),
                Ok(mapped) => panic!("{field}: a malformed id was mapped: {mapped:?}"),
            }
        }
    }

    #[test]
    fn a_request_names_the_service_and_the_scope() -> Result<(), MappingError> {
        let spans = vec![span(&airlock_span())?, span(&airlock_span())?];
        let request = request(
            resource(&[
                ("service.name".to_owned(), "airlockd".to_owned()),
                ("service.version".to_owned(), VERSION.to_owned()),
            ]),
            spans.clone(),
        );
        assert_eq!(request.resource_spans.len(), 1);
        let resource_spans = &request.resource_spans[0];
        let resource = resource_spans.resource.as_ref().map(|r| {
            r.attributes
                .iter()
                .map(|kv| (kv.key.as_str(), string_value(kv)))
                .collect::<Vec<_>>()
        });
        assert_eq!(
            resource,
            Some(vec![
                ("service.name", Some("airlockd")),
                ("service.version", Some(VERSION)),
            ])
        );
        assert_eq!(resource_spans.scope_spans.len(), 1);
        let scope_spans = &resource_spans.scope_spans[0];
        assert_eq!(
            scope_spans.scope.as_ref().map(|s| s.name.as_str()),
            Some("airlock")
        );
        assert_eq!(scope_spans.spans, spans);
        Ok(())
    }

    #[test]
    fn model_calls_and_runs_speak_the_genai_conventions() -> Result<(), MappingError> {
        let mut model = airlock_span();
        model.name = "model".into();
        model.attributes = vec![
            pb::SpanAttribute {
                key: "model".into(),
                value: "openai:gpt-4o".into(),
            },
            pb::SpanAttribute {
                key: "input_tokens".into(),
                value: "1200".into(),
            },
            pb::SpanAttribute {
                key: "output_tokens".into(),
                value: "not a number".into(),
            },
        ];
        let mapped = span(&model)?;
        assert_eq!(mapped.name, "chat gpt-4o");
        assert_eq!(mapped.kind, SpanKind::Client as i32);
        let find = |key: &str| {
            mapped
                .attributes
                .iter()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.as_ref()?.value.clone())
        };
        assert_eq!(
            find("gen_ai.provider.name"),
            Some(any_value::Value::StringValue("openai".into()))
        );
        assert_eq!(
            find("gen_ai.request.model"),
            Some(any_value::Value::StringValue("gpt-4o".into()))
        );
        assert_eq!(
            find("gen_ai.usage.input_tokens"),
            Some(any_value::Value::IntValue(1200)),
            "token counts are integers"
        );
        assert_eq!(
            find("gen_ai.usage.output_tokens"),
            Some(any_value::Value::StringValue("not a number".into())),
            "a value that is not a number is carried as recorded"
        );
        let mut run = airlock_span();
        run.name = "run".into();
        run.status = pb::SpanStatus::Error as i32;
        run.attributes = vec![pb::SpanAttribute {
            key: "run_id".into(),
            value: "run_123".into(),
        }];
        let mapped = span(&run)?;
        assert_eq!(mapped.name, "invoke_agent airlock");
        let keys: Vec<&str> = mapped.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert!(keys.contains(&"gen_ai.agent.id"), "{keys:?}");
        assert!(keys.contains(&"error.type"), "{keys:?}");
        assert_eq!(provider_and_model("scripted"), ("airlock", "scripted"));
        Ok(())
    }

    #[test]
    fn an_mcp_tool_call_names_its_method() -> Result<(), MappingError> {
        let mut call = airlock_span();
        call.attributes.push(pb::SpanAttribute {
            key: "engine".into(),
            value: "mcp".into(),
        });
        let mapped = span(&call)?;
        assert!(
            mapped
                .attributes
                .iter()
                .any(|kv| kv.key == "mcp.method.name"),
            "{:?}",
            mapped.attributes
        );
        Ok(())
    }

    #[test]
    fn the_wire_uses_the_otlp_field_numbers() -> Result<(), MappingError> {
        use prost::Message;
        // Field 1 (trace_id) as length-delimited: tag 0x0a, length 16; field 7
        // (start_time_unix_nano) as fixed64: tag 0x39; field 16 (flags) as fixed32: tag 0x85
        // 0x01. A renumbered field would move these bytes.
        let bytes = span(&airlock_span())?.encode_to_vec();
        assert_eq!(&bytes[..2], &[0x0a, 16]);
        let start = 1_700_000_000_000_000_000_u64.to_le_bytes();
        let at = |tag: &[u8], value: &[u8]| {
            let needle = [tag, value].concat();
            bytes.windows(needle.len()).any(|window| window == needle)
        };
        assert!(
            at(&[0x39], &start),
            "start_time_unix_nano is fixed64 field 7"
        );
        assert!(
            at(&[0x85, 0x01], &FLAGS.to_le_bytes()),
            "flags is fixed32 field 16"
        );
        Ok(())
    }
}
