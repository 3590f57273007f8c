//! Argument validation: a call's arguments must be one JSON object that matches the tool's
//! input schema before anything runs. A mismatch is reported field by field, with the JSON
//! pointer of each failing field, so a model can correct its call.

use serde_json::Value;

/// At most this many violations are reported; past that the caller has enough to go on.
const MAX_VIOLATIONS: usize = 10;

/// A tool's input schema, compiled once when the tool loads.
pub struct ArgumentSchema {
    json: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentSchema")
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

/// One field that does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer of the field (`""` is the whole document).
    pub path: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(String),
    #[error("the arguments must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    #[error("the arguments do not match the tool's input schema: {}", describe(.0))]
    Schema(Vec<Violation>),
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            let path = if v.path.is_empty() { "/" } else { &v.path };
            format!("at {path}: {}", v.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl ArgumentSchema {
    /// Compiles `json`; refuses a document that is not a valid JSON Schema. References to
    /// other documents are never fetched (the build has no resolvers), so a schema cannot make
    /// the daemon reach the network or the filesystem.
    pub fn compile(json: Value) -> Result<ArgumentSchema, String> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&json)
            .map_err(|err| format!("input_schema is not a valid JSON Schema: {err}"))?;
        Ok(ArgumentSchema { json, validator })
    }

    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Parses `arguments_json` and checks it. Empty text stands for `{}`, so clients of tools
    /// without arguments may send nothing.
    pub fn validate(&self, arguments_json: &str) -> Result<Value, ArgumentError> {
        let text = arguments_json.trim();
        let value: Value = if text.is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(text).map_err(|err| ArgumentError::NotJson(err.to_string()))?
        };
        let kind = match &value {
            Value::Object(_) => None,
            Value::Null => Some("null"),
            Value::Bool(_) => Some("a boolean"),
            Value::Number(_) => Some("a number"),
            Value::String(_) => Some("a string"),
            Value::Array(_) => Some("an array"),
        };
        if let Some(kind) = kind {
            return Err(ArgumentError::NotAnObject(kind));
        }
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(&value)
            .take(MAX_VIOLATIONS)
            .map(|error| Violation {
                path: error.instance_path().to_string(),
                message: error.to_string(),
            })
            .collect();
        if violations.is_empty() {
            Ok(value)
        } else {
            Err(ArgumentError::Schema(violations))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::compile(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "options": {
                    "type": "object",
                    "properties": {"max_lines": {"type": "integer", "minimum": 1}},
                    "additionalProperties": false
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .expect("valid schema")
    }

    #[test]
    fn valid_arguments_pass() {
        let value = schema()
            .validate(r#"{"path": "a.txt", "options": {"max_lines": 3}}"#)
            .expect("valid");
        assert_eq!(value["path"], "a.txt");
    }

    #[test]
    fn a_failing_nested_field_is_named_by_its_path() {
        let err = schema()
            .validate(r#"{"path": "a", "options": {"max_lines": 0}}"#)
            .expect_err("invalid");
        let ArgumentError::Schema(violations) = &err else {
            panic!("expected a schema error, got {err:?}");
        };
        assert_eq!(violations[0].path, "/options/max_lines");
        assert!(err.to_string().contains("/options/max_lines"), "{err}");
    }

    #[test]
    fn missing_and_extra_fields_are_reported() {
        let err = schema().validate(r#"{"pth": "a"}"#).expect_err("invalid");
        let text = err.to_string();
        assert!(text.contains("path"), "{text}");
        assert!(text.contains("pth"), "{text}");
    }

    #[test]
    fn not_json_and_not_an_object_are_distinct_errors() {
        assert!(matches!(
            schema().validate("{\"path\": "),
            Err(ArgumentError::NotJson(_))
        ));
        assert_eq!(
            schema().validate("[1]"),
            Err(ArgumentError::NotAnObject("an array"))
        );
    }

    #[test]
    fn empty_text_is_an_empty_object() {
        let schema = ArgumentSchema::compile(json!({"type": "object"})).expect("valid");
        assert_eq!(schema.validate("  "), Ok(json!({})));
    }

    #[test]
    fn invalid_schemas_and_remote_references_are_refused() {
        assert!(ArgumentSchema::compile(json!({"type": "objekt"})).is_err());
        assert!(
            ArgumentSchema::compile(json!({"$ref": "https://example.invalid/schema.json"}))
                .is_err()
        );
    }
}
