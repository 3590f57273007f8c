//! The client the MCP conformance suite launches for its client scenarios
//! (`conformance client --command "mcp-conformance-client"`, which appends the test server's
//! URL): airlock's MCP client, exactly as the daemon reaches a remote hosted server, through
//! an egress gate. It starts a session, lists the tools and calls each — or, when the
//! scenario names the calls to make (`toolCalls` in the JSON of `MCP_CONFORMANCE_CONTEXT`),
//! makes those — then exits 0; the suite judges what it saw. Which revision it speaks is the
//! client's own choice, as with any server it reaches: `MCP_CONFORMANCE_PROTOCOL_VERSION`
//! is not read.

use anyhow::Context;

type Arguments = serde_json::Map<String, serde_json::Value>;

/// The calls a scenario's context names, in order; none when it names none.
fn scenario_calls(context: &str) -> anyhow::Result<Vec<(String, Arguments)>> {
    let context: serde_json::Value =
        serde_json::from_str(context).context("MCP_CONFORMANCE_CONTEXT is not JSON")?;
    let Some(calls) = context.get("toolCalls").and_then(|calls| calls.as_array()) else {
        return Ok(Vec::new());
    };
    calls
        .iter()
        .map(|call| {
            let name = call
                .get("name")
                .and_then(|name| name.as_str())
                .context("a call of MCP_CONFORMANCE_CONTEXT names no tool")?;
            let arguments = call
                .get("arguments")
                .and_then(|arguments| arguments.as_object())
                .cloned()
                .unwrap_or_default();
            Ok((name.to_owned(), arguments))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .context("usage: mcp-conformance-client SERVER_URL")?;
    let calls = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(context) => scenario_calls(&context)?,
        Err(std::env::VarError::NotPresent) => Vec::new(),
        Err(err @ std::env::VarError::NotUnicode(_)) => {
            return Err(err).context("MCP_CONFORMANCE_CONTEXT");
        }
    };
    let answers = airlock_daemon::testing::mcp_conformance_client(&url, calls)
        .await
        .map_err(anyhow::Error::msg)?;
    for answer in answers {
        println!("{answer}");
    }
    Ok(())
}
