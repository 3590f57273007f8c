//! The MCP endpoint's HTTP edge: the input is one request — method, target, header lines and
//! body, split at NUL bytes (see `airlock_daemon::testing::McpEdgeProbe`) — sent through the
//! real endpoint over a daemon with no tools. Every request gets an answer: no panic, no hang.

#![no_main]

use std::sync::OnceLock;

use airlock_daemon::testing::McpEdgeProbe;
use libfuzzer_sys::fuzz_target;

fn probe() -> &'static McpEdgeProbe {
    static PROBE: OnceLock<McpEdgeProbe> = OnceLock::new();
    PROBE.get_or_init(|| match McpEdgeProbe::new() {
        Ok(probe) => probe,
        Err(err) => panic!("cannot start the probe: {err}"),
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = probe().send(data);
});
