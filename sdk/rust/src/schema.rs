//! The JSON Schema of a tool's input type, as committed in its `schema.json`.

use schemars::JsonSchema;

/// The pretty-printed JSON Schema (draft 2020-12) of `I`, with a trailing newline: what
/// `<tool> --schema` prints. A tool's test should compare its committed `schema.json`
/// with this so the two never drift.
pub fn input_schema<I: JsonSchema>() -> String {
    let schema = schemars::schema_for!(I);
    // `Value`'s alternate `Display` is pretty printing and, unlike `to_string_pretty`,
    // cannot fail.
    format!("{:#}\n", schema.as_value())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::Value;

    use super::*;

    /// An example input.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only the schema of this type is used")]
    struct Example {
        /// Which file.
        path: String,
        #[serde(default)]
        verbose: bool,
    }

    #[test]
    fn deny_unknown_fields_makes_the_schema_strict() -> anyhow::Result<()> {
        let text = input_schema::<Example>();
        assert!(text.ends_with("}\n"));
        let schema: Value = serde_json::from_str(&text)?;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["path"]));
        assert_eq!(schema["properties"]["path"]["description"], "Which file.");
        assert_eq!(schema["properties"]["verbose"]["default"], false);
        Ok(())
    }
}
