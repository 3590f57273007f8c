//! A process tool's command line. Under `abi = "argv"`, `${field}` in an element is replaced
//! by that string argument, inside that one element: a value is never split, never seen by
//! a shell, and never becomes more than the one element it was written into. `$$` is a
//! literal `$`; any other `$` is literal too (there is no environment expansion).
//!
//! A value must not become an option by accident. The program's own option grammar is
//! unknown, so the rule is structural and checked when the tool loads: before the first
//! element that is exactly `--`, no element may *start* with a placeholder. The manifest
//! author binds a value to its option (`--regexp=${pattern}`, `-e${pattern}`) or places it
//! after `--`; either way a value such as `-rf` reaches the program as data.
//!
//! Every placeholder must name a required string property of the tool's input schema, so
//! the executor's validation guarantees a value for it; the checks at call time remain for
//! what a schema cannot say (a NUL byte, which no argv element can carry).

use std::ffi::CString;

use serde_json::Value;

use crate::engine::image::Abi;

/// The separator after which elements may start with a value.
const END_OF_OPTIONS: &str = "--";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Field(String),
}

/// A checked command line, ready to be rendered for each call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    elements: Vec<Vec<Piece>>,
}

impl CommandLine {
    /// Checks `command` for `abi` against the tool's input schema.
    pub fn parse(command: &[String], abi: Abi, schema: &Value) -> Result<CommandLine, String> {
        let mut elements = Vec::with_capacity(command.len());
        let mut options_ended = false;
        for (index, element) in command.iter().enumerate() {
            if element.contains('\0') {
                return Err(format!("`command` element {index} contains a NUL byte"));
            }
            let pieces = match abi {
                // The JSON ABI passes its command verbatim; a placeholder in it is a mistake
                // that would otherwise reach the program as literal text.
                Abi::JsonStdio => {
                    if parse_element(element)?
                        .iter()
                        .any(|piece| matches!(piece, Piece::Field(_)))
                    {
                        return Err(format!(
                            "`command` element {index} (`{element}`) has a `${{…}}` placeholder, but placeholders are only substituted under abi = \"argv\"; tools with abi = \"json-stdio\" read their arguments on stdin"
                        ));
                    }
                    vec![Piece::Text(element.clone())]
                }
                Abi::Argv => parse_element(element)?,
            };
            let fields = || {
                pieces.iter().filter_map(|piece| match piece {
                    Piece::Field(name) => Some(name.as_str()),
                    Piece::Text(_) => None,
                })
            };
            if index == 0 && fields().next().is_some() {
                return Err(
                    "the program (`command[0]`) cannot come from an argument: name it literally"
                        .into(),
                );
            }
            if !options_ended && let Some(Piece::Field(name)) = pieces.first() {
                return Err(format!(
                    "`command` element {index} (`{element}`) starts with `${{{name}}}` before any `--`: a value starting with `-` would be read as an option. Bind it to its option (`--flag=${{{name}}}`) or put it after a `--` element"
                ));
            }
            for name in fields() {
                check_field(schema, name)?;
            }
            if element == END_OF_OPTIONS {
                options_ended = true;
            }
            elements.push(pieces);
        }
        if elements.is_empty() {
            return Err("`command` must name a program".into());
        }
        Ok(CommandLine { elements })
    }

    /// The program as written in the manifest.
    pub fn program(&self) -> &str {
        match self.elements.first().and_then(|pieces| pieces.first()) {
            Some(Piece::Text(text)) => text,
            Some(Piece::Field(_)) | None => "",
        }
    }

    /// The argv of one call; `arguments` is the call's validated JSON object.
    pub fn render(&self, arguments: &[u8]) -> Result<Vec<CString>, String> {
        let needs_arguments = self
            .elements
            .iter()
            .flatten()
            .any(|piece| matches!(piece, Piece::Field(_)));
        let object = if needs_arguments {
            match serde_json::from_slice::<Value>(arguments) {
                Ok(Value::Object(object)) => Some(object),
                Ok(_) => return Err("the arguments are not a JSON object".into()),
                Err(err) => return Err(format!("the arguments are not JSON: {err}")),
            }
        } else {
            None
        };
        self.elements
            .iter()
            .map(|pieces| {
                let mut element = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => element.push_str(text),
                        Piece::Field(name) => {
                            let value = object.as_ref().and_then(|object| object.get(name));
                            match value {
                                Some(Value::String(value)) => element.push_str(value),
                                Some(other) => {
                                    return Err(format!(
                                        "argument `{name}` must be a string to fill `${{{name}}}`, not {}",
                                        json_kind(other)
                                    ));
                                }
                                None => {
                                    return Err(format!(
                                        "argument `{name}` is missing; the command needs it for `${{{name}}}`"
                                    ));
                                }
                            }
                        }
                    }
                }
                CString::new(element).map_err(|_| {
                    "an argument contains a NUL byte, which a command-line argument cannot carry"
                        .to_owned()
                })
            })
            .collect()
    }
}

/// Splits one element into text and placeholders.
fn parse_element(element: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = element;
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(after_dollar) = after.strip_prefix('$') {
            text.push('$');
            rest = after_dollar;
        } else if let Some(open) = after.strip_prefix('{') {
            let close = open.find('}').ok_or_else(|| {
                format!("`{element}` has a `${{` without its closing `}}` (write `$$` for a literal `$`)")
            })?;
            let name = &open[..close];
            if !is_field_name(name) {
                return Err(format!(
                    "`${{{name}}}` in `{element}` is not a placeholder: names are letters, digits and `_`"
                ));
            }
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Field(name.to_owned()));
            rest = &open[close + 1..];
        } else {
            text.push('$');
            rest = after;
        }
    }
    text.push_str(rest);
    if !text.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn is_field_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A placeholder must name a required string property, so that validation guarantees it.
fn check_field(schema: &Value, name: &str) -> Result<(), String> {
    let property = schema
        .get("properties")
        .and_then(|properties| properties.get(name));
    let Some(property) = property else {
        return Err(format!(
            "`${{{name}}}` names no property of the input schema; declare `{name}` as a required string"
        ));
    };
    if property.get("type").and_then(Value::as_str) != Some("string") {
        return Err(format!(
            "`${{{name}}}` fills a command-line argument, so property `{name}` must have `type = \"string\"`"
        ));
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|required| required.iter().any(|entry| entry.as_str() == Some(name)));
    if !required {
        return Err(format!(
            "`${{{name}}}` needs a value on every call, so property `{name}` must be listed in `required`"
        ));
    }
    Ok(())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The argv a call of the tool `argv` (under `abi`, with `schema`) would run, as text: what
/// the permission policy judges. `None` when the arguments do not fill it (the call is then
/// refused by the engine, and judged by the policy without a command line).
pub fn render_for_policy(
    argv: &[String],
    abi: Abi,
    schema: &Value,
    arguments: &Value,
) -> Option<Vec<String>> {
    let line = CommandLine::parse(argv, abi, schema).ok()?;
    let rendered = line.render(arguments.to_string().as_bytes()).ok()?;
    rendered
        .into_iter()
        .map(|arg| arg.into_string().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "count": {"type": "integer"},
                "optional": {"type": "string"},
            },
            "required": ["pattern", "path", "count"],
        })
    }

    fn argv(command: &[&str]) -> Result<CommandLine, String> {
        let command: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        CommandLine::parse(&command, Abi::Argv, &schema())
    }

    fn render(line: &CommandLine, arguments: Value) -> Result<Vec<String>, String> {
        line.render(arguments.to_string().as_bytes()).map(|argv| {
            argv.into_iter()
                .map(|arg| arg.into_string().expect("utf-8"))
                .collect()
        })
    }

    #[test]
    fn each_value_stays_one_element_whatever_it_contains() {
        let line = argv(&[
            "/usr/bin/grep",
            "--regexp=${pattern}",
            "--",
            "${path}",
            "x${path}y",
        ])
        .expect("valid");
        for value in [
            "two words",
            "it's \"quoted\"",
            "$(touch /tmp/pwned)",
            "`id`; rm -rf /",
            "-rf",
            "--help",
            "*.rs",
            "line\nbreak",
            "${pattern}",
            "",
        ] {
            let rendered =
                render(&line, json!({"pattern": "p", "path": value, "count": 1})).expect("renders");
            assert_eq!(
                rendered,
                vec![
                    "/usr/bin/grep".to_owned(),
                    "--regexp=p".to_owned(),
                    "--".to_owned(),
                    value.to_owned(),
                    format!("x{value}y"),
                ]
            );
        }
    }

    #[test]
    fn dollars_escape_and_stay_literal() {
        let line = argv(&[
            "prog",
            "$$HOME",
            "$HOME",
            "cost: 5$",
            "a$$b",
            "--x=${pattern}$$",
        ])
        .expect("valid");
        let rendered = render(&line, json!({"pattern": "p"})).expect("renders");
        assert_eq!(
            rendered,
            ["prog", "$HOME", "$HOME", "cost: 5$", "a$b", "--x=p$"]
        );
    }

    #[test]
    fn a_value_cannot_start_an_element_before_the_end_of_options() {
        let err = argv(&["/usr/bin/grep", "-e", "${pattern}"]).expect_err("refused");
        assert!(err.contains("before any `--`"), "{err}");
        let err = argv(&["/usr/bin/grep", "${pattern}${path}", "--"]).expect_err("refused");
        assert!(err.contains("before any `--`"), "{err}");
        argv(&["/usr/bin/grep", "-e${pattern}", "--", "${path}"]).expect("bound or after --");
        // `--` must be a whole element to end the options.
        let err = argv(&["/usr/bin/grep", "--x", "${pattern}"]).expect_err("refused");
        assert!(err.contains("before any `--`"), "{err}");
    }

    #[test]
    fn placeholders_must_be_required_strings_of_the_schema() {
        let cases = [
            (vec!["p", "--", "${nope}"], "names no property"),
            (vec!["p", "--", "${count}"], "type = \"string\""),
            (vec!["p", "--", "${optional}"], "`required`"),
            (vec!["p", "--", "${pat tern}"], "not a placeholder"),
            (vec!["p", "--", "${pattern"], "closing"),
            (vec!["${pattern}"], "program"),
            (vec!["p", "a\0b"], "NUL"),
        ];
        for (command, expected) in cases {
            let err = argv(&command).expect_err("refused");
            assert!(err.contains(expected), "{command:?}: {err}");
        }
    }

    #[test]
    fn calls_with_missing_or_wrong_values_are_refused() {
        let line = argv(&["p", "--", "${pattern}"]).expect("valid");
        let missing = render(&line, json!({})).expect_err("missing");
        assert!(missing.contains("missing"), "{missing}");
        let number = render(&line, json!({"pattern": 3})).expect_err("number");
        assert!(number.contains("a number"), "{number}");
        let nul = render(&line, json!({"pattern": "a\u{0}b"})).expect_err("nul");
        assert!(nul.contains("NUL"), "{nul}");
        assert!(line.render(b"[1]").is_err());
    }

    #[test]
    fn json_stdio_commands_are_verbatim_and_refuse_placeholders() {
        let command = vec!["/tool/run.py".to_owned(), "$$".to_owned()];
        let line = CommandLine::parse(&command, Abi::JsonStdio, &schema()).expect("valid");
        assert_eq!(line.program(), "/tool/run.py");
        let rendered = line.render(b"not even json").expect("needs no arguments");
        assert_eq!(rendered[1].to_str().expect("utf-8"), "$$");
        let command = vec![
            "/tool/run.py".to_owned(),
            "--".to_owned(),
            "${pattern}".to_owned(),
        ];
        let err = CommandLine::parse(&command, Abi::JsonStdio, &schema()).expect_err("refused");
        assert!(err.contains("json-stdio"), "{err}");
    }
}
