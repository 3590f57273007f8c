//! One output story: what a caller sees of a cut result is a prefix (head), a suffix (tail)
//! or both ends (head_tail) of exactly the bytes `ReadOutput` and `airlock tools output`
//! return; the sizes agree with those bytes, and reading from `head_bytes` continues where
//! the shown head ends. For all three policies, for JSON and for plain output, on both
//! engines.

use airlock_proto::v1 as pb;
use airlock_tests::{AuthedChannel, TestDaemon, ToolsDir, cargo_bin, test_module};
use serde_json::{Value, json};

/// Bytes a caller is shown of each result here; every result is many times longer.
const SHOWN: u64 = 300;

const POLICIES: [&str; 3] = ["head", "tail", "head_tail"];

/// How each tool writes its output, and what its whole output must be.
struct Case {
    tool: String,
    arguments: Value,
    /// The whole output, exactly.
    whole: Vec<u8>,
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// A JSON value with keys out of alphabetical order and a long, varied text: a daemon that
/// re-serialised it (sorting keys, changing spacing) would not pass.
fn document() -> Value {
    json!({"zeta": 1, "alpha": [true, null], "text": lines(400)})
}

async fn all_of(tools: &mut pb::tools_client::ToolsClient<AuthedChannel>, id: &str) -> Vec<u8> {
    let mut whole = Vec::new();
    loop {
        let page = tools
            .read_output(pb::ReadOutputRequest {
                execution_id: id.to_owned(),
                offset: whole.len() as u64,
                length: 1000,
            })
            .await
            .unwrap()
            .into_inner();
        whole.extend_from_slice(&page.data);
        if page.eof {
            assert_eq!(page.total_bytes, whole.len() as u64);
            return whole;
        }
    }
}

#[tokio::test]
async fn the_shown_part_is_cut_from_exactly_the_kept_output() {
    let tools = ToolsDir::new();
    for policy in POLICIES {
        let output = format!("[output]\nmax_bytes = {SHOWN}\ntruncate = \"{policy}\"");
        // WebAssembly, JSON: echo answers `{"ok": <its arguments>}`.
        tools.add_file(
            &format!("wasm_json_{policy}"),
            &test_module("echo"),
            &output,
        );
        // A program, JSON: cat answers with its stdin, which here is a result document.
        tools.write_manifest(
            &format!("process_json_{policy}"),
            &format!(
                "name = \"process_json_{policy}\"\nversion = \"0.1.0\"\ndescription = \"cat\"\n\
                 risk = \"read_only\"\nengine = \"process\"\ncommand = [\"/usr/bin/cat\"]\n\
                 abi = \"json-stdio\"\nprofile = \"process-readonly\"\ninput_schema = {{ type = \"object\" }}\n{output}\n"
            ),
        );
        // A program, plain output.
        tools.write_manifest(
            &format!("process_plain_{policy}"),
            &format!(
                "name = \"process_plain_{policy}\"\nversion = \"0.1.0\"\ndescription = \"seq\"\n\
                 risk = \"read_only\"\nengine = \"process\"\ncommand = [\"/usr/bin/seq\", \"1\", \"2000\"]\n\
                 abi = \"argv\"\nprofile = \"process-readonly\"\ninput_schema = {{ type = \"object\" }}\n{output}\n"
            ),
        );
    }
    let daemon = TestDaemon::with_tools(&tools).await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    let workspace = daemon.workspace("project");
    let mut client = daemon.tools().await;

    for policy in POLICIES {
        let cases = [
            Case {
                tool: format!("wasm_json_{policy}"),
                arguments: document(),
                // echo re-serialises its arguments (the daemon hands them over canonical):
                // the whole output is what the tool wrote as its `ok`.
                whole: Vec::new(),
            },
            Case {
                tool: format!("process_json_{policy}"),
                arguments: json!({"ok": document()}),
                whole: Vec::new(),
            },
            Case {
                tool: format!("process_plain_{policy}"),
                arguments: json!({}),
                whole: lines(2000).into_bytes(),
            },
        ];
        for case in cases {
            let context = &case.tool;
            let execution = daemon
                .exec(&case.tool, case.arguments.clone(), Some(&workspace))
                .await;
            execution.assert_status(pb::ToolStatus::Ok);
            let result = execution.result();
            assert!(result.truncated, "{context}: {result:?}");
            let whole = all_of(&mut client, &result.execution_id).await;
            if case.whole.is_empty() {
                // JSON: the kept output is the `ok` value as the tool wrote it, whole.
                let kept: Value = serde_json::from_slice(&whole).unwrap();
                assert_eq!(kept, document(), "{context}");
                if case.tool.starts_with("process_json") {
                    // cat wrote back exactly the daemon's canonical arguments.
                    assert_eq!(
                        whole,
                        serde_json::to_vec(&document()).unwrap(),
                        "{context}: not as written"
                    );
                }
            } else {
                assert_eq!(whole, case.whole, "{context}");
            }
            let (n, h, t) = (whole.len() as u64, result.head_bytes, result.tail_bytes);
            assert_eq!(result.original_bytes, n, "{context}");
            let content = result.content.as_bytes();
            match policy {
                "head" => {
                    assert_eq!((h, t), (content.len() as u64, 0), "{context}");
                    assert_eq!(content, &whole[..h as usize], "{context}");
                }
                "tail" => {
                    assert_eq!((h, t), (0, content.len() as u64), "{context}");
                    assert_eq!(content, &whole[(n - t) as usize..], "{context}");
                }
                _ => {
                    assert!(h > 0 && t > 0, "{context}");
                    let marker = format!("\n…[{} bytes omitted]…\n", n - h - t);
                    let mut expected = whole[..h as usize].to_vec();
                    expected.extend_from_slice(marker.as_bytes());
                    expected.extend_from_slice(&whole[(n - t) as usize..]);
                    assert_eq!(content, expected.as_slice(), "{context}");
                }
            }
            assert!(content.len() as u64 <= SHOWN, "{context}");

            // The CLI continues exactly where the shown head ends.
            let rest = tokio::process::Command::new(cargo_bin("airlock"))
                .args([
                    "--server",
                    &daemon.endpoint,
                    "tools",
                    "output",
                    &result.execution_id,
                    "--offset",
                    &h.to_string(),
                ])
                .env("AIRLOCK_TOKEN", &daemon.token)
                .env_remove("AIRLOCK_SERVER")
                .output()
                .await
                .unwrap();
            assert_eq!(rest.status.code(), Some(0), "{context}");
            assert_eq!(rest.stdout, &whole[h as usize..], "{context}: --offset {h}");
        }
    }
}
