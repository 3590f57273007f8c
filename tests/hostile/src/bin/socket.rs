//! `socket` (built as a wasm32-wasip2 component, the only kind that can ask for sockets):
//! tries every kind of network access and reports each attempt.
//! Args: `{"tcp": "host:port"?, "udp": "host:port"?, "dns": string?}`; `tcp` defaults to
//! `127.0.0.1:9`, `udp` to the `tcp` address, `dns` to `example.com`.
//!
//! Attacks the network grant (none, for every profile without one). Returns
//! `{"ok": [attempt, …]}` (see `Attempt`) in this order: `tcp connect <tcp>` (then, only if it
//! connected, `tcp send <tcp>`), `udp bind 0.0.0.0:0` (then, only if bound, `udp send <udp>`),
//! `dns localhost`, `dns <dns>`, `tcp listen 127.0.0.1:0`. Successful attempts report the
//! addresses involved as their content. The sandbox must make every attempt fail; a test that
//! listens on the `tcp`/`udp` addresses also checks that nothing arrived there.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::process::ExitCode;

use airlock_hostile::{Attempt, ToolError, run};
use serde::Deserialize;

/// What the tool sends wherever it gets through, so a listening test can recognise it.
const PAYLOAD: &[u8] = b"airlock-hostile socket\n";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The discard port: nothing answers there on a test machine, yet a connect that the
    /// sandbox lets through still fails differently (refused, not denied).
    #[serde(default = "default_tcp")]
    tcp: String,
    udp: Option<String>,
    #[serde(default = "default_dns")]
    dns: String,
}

fn default_tcp() -> String {
    "127.0.0.1:9".to_owned()
}

fn default_dns() -> String {
    "example.com".to_owned()
}

fn addresses(addrs: impl IntoIterator<Item = SocketAddr>) -> Vec<u8> {
    let shown: Vec<String> = addrs.into_iter().map(|addr| addr.to_string()).collect();
    shown.join(", ").into_bytes()
}

fn tcp(target: &str, attempts: &mut Vec<Attempt>) {
    match TcpStream::connect(target) {
        Ok(mut stream) => {
            let peer = stream.peer_addr().map(|peer| peer.to_string());
            let content = format!("connected to {}", peer.unwrap_or_else(|e| e.to_string()));
            attempts.push(Attempt::record(
                format!("tcp connect {target}"),
                Ok(content.into_bytes()),
            ));
            let sent = stream.write_all(PAYLOAD).map(|()| Vec::new());
            attempts.push(Attempt::record(format!("tcp send {target}"), sent));
        }
        Err(error) => attempts.push(Attempt::record(format!("tcp connect {target}"), Err(error))),
    }
}

fn udp(target: &str, attempts: &mut Vec<Attempt>) {
    const BIND: &str = "0.0.0.0:0";
    match UdpSocket::bind(BIND) {
        Ok(socket) => {
            let local = socket.local_addr().map(|local| addresses([local]));
            attempts.push(Attempt::record(format!("udp bind {BIND}"), local));
            let sent = socket
                .send_to(PAYLOAD, target)
                .map(|sent| format!("sent {sent} bytes").into_bytes());
            attempts.push(Attempt::record(format!("udp send {target}"), sent));
        }
        Err(error) => attempts.push(Attempt::record(format!("udp bind {BIND}"), Err(error))),
    }
}

fn dns(name: &str) -> Attempt {
    // Port 0 only completes the (host, port) pair that `ToSocketAddrs` resolves.
    let resolved = (name, 0).to_socket_addrs().map(addresses);
    Attempt::record(format!("dns {name}"), resolved)
}

fn listen() -> Attempt {
    const LISTEN: &str = "127.0.0.1:0";
    let bound = TcpListener::bind(LISTEN).and_then(|listener| {
        listener
            .local_addr()
            .map(|local| format!("listening on {local}").into_bytes())
    });
    Attempt::record(format!("tcp listen {LISTEN}"), bound)
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Vec<Attempt>, ToolError> {
        let mut attempts = Vec::new();
        tcp(&args.tcp, &mut attempts);
        udp(args.udp.as_deref().unwrap_or(&args.tcp), &mut attempts);
        attempts.push(dns("localhost"));
        attempts.push(dns(&args.dns));
        attempts.push(listen());
        Ok(attempts)
    })
}
