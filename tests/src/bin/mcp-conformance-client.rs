//! The client the MCP conformance suite launches for its client scenarios
//! (`conformance client --command "mcp-conformance-client"`, which appends the test server's
//! URL): airlock's MCP client, exactly as the daemon reaches a remote hosted server, through
//! an egress gate. It initializes, lists the tools and calls each, then exits 0; the suite
//! judges what it saw.

use anyhow::Context;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .context("usage: mcp-conformance-client SERVER_URL")?;
    let answers = airlock_daemon::testing::mcp_conformance_client(&url)
        .await
        .map_err(anyhow::Error::msg)?;
    for answer in answers {
        println!("{answer}");
    }
    Ok(())
}
