//! Network namespaces for the egress tests: no packet a test sends leaves the machine.
//!
//! A [`NetNs`] is a named namespace (`ip netns add`) whose only interface is `lo`, carrying
//! the addresses the tests' servers listen on: 198.51.100.1 (TEST-NET-2, an address the
//! egress rules treat as public), 10.9.9.1 (private) and 169.254.169.254 (the cloud metadata
//! address). Every address is on `lo` so that a refused connection is always the gate's
//! refusal, never a missing route. (This kernel has no `dummy` link type; `lo` serves.)
//!
//! Servers bind inside the namespace from a short-lived thread that `setns()`es into it (a
//! socket keeps its namespace for life), then run on the test's runtime. `airlockd` runs in
//! it through `ip netns exec`, which also bind-mounts `/etc/netns/<name>/resolv.conf` over
//! `/etc/resolv.conf`: the harness points that at a DNS listener it runs on 198.51.100.1:53,
//! which records every query, so a test can prove a name was never looked up.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use airlock_proto::v1 as pb;

use crate::{AuthedChannel, RunStream, Startup, await_serving, cargo_bin, connect_with_token};

/// The public-looking address of the namespace (TEST-NET-2).
pub const PUBLIC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// A private (RFC 1918) address of the namespace.
pub const PRIVATE: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 1);
/// The cloud metadata address, present in the namespace so that only the gate refuses it.
pub const METADATA: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);

/// Longest the harness waits for a request's head; test servers answer in microseconds.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A named network namespace, deleted (with its resolv.conf) when dropped.
pub struct NetNs {
    name: String,
    fd: File,
}

impl NetNs {
    /// Creates `airlock-t-<pid>-<n>` with `lo` up and the test addresses on it, and a
    /// resolv.conf that sends lookups to the namespace's own [`DnsRecorder`] address.
    pub fn new() -> NetNs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "airlock-t-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        // Constructed before anything else can fail, so Drop cleans up.
        let fd = File::open(Path::new("/run/netns").join(&name))
            .unwrap_or_else(|err| panic!("open /run/netns/{name}: {err}"));
        let netns = NetNs { name, fd };
        ip(&["-n", &netns.name, "link", "set", "lo", "up"]);
        for addr in [
            format!("{PUBLIC}/24"),
            format!("{PRIVATE}/24"),
            format!("{METADATA}/32"),
        ] {
            ip(&["-n", &netns.name, "addr", "add", &addr, "dev", "lo"]);
        }
        let etc = netns.etc_dir();
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("resolv.conf"), format!("nameserver {PUBLIC}\n")).unwrap();
        netns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn etc_dir(&self) -> PathBuf {
        Path::new("/etc/netns").join(&self.name)
    }

    /// Runs `work` on a thread that has entered this namespace; what it creates (sockets)
    /// stays in the namespace.
    pub fn run_inside<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        let fd = self.fd.as_raw_fd();
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    // SAFETY: setns on a namespace descriptor we hold moves only this
                    // thread, which ends when `work` returns.
                    let entered = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
                    assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
                    work()
                })
                .join()
                .expect("the namespace thread does not panic")
        })
    }

    /// A TCP listener bound inside the namespace, on the test's runtime.
    pub fn bind_tcp(&self, addr: SocketAddr) -> tokio::net::TcpListener {
        let listener = self.run_inside(|| std::net::TcpListener::bind(addr).unwrap());
        listener.set_nonblocking(true).unwrap();
        tokio::net::TcpListener::from_std(listener).unwrap()
    }

    /// A command run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("ip");
        command
            .args(["netns", "exec", &self.name])
            .arg(program)
            .kill_on_drop(true);
        command
    }
}

impl Default for NetNs {
    fn default() -> Self {
        NetNs::new()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.etc_dir());
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One request a test server received.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    /// The request target as sent (`/path`, or an absolute URI through a proxy).
    pub target: String,
    /// Header names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What a test server answers.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn ok(body: impl Into<Vec<u8>>) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn redirect(location: &str) -> HttpResponse {
        HttpResponse {
            status: 302,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }

    /// The status line and headers, as the server sends them.
    fn head(&self) -> String {
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head
    }

    /// Every byte the server sends for this response: what a ledger of the bytes a tool
    /// received must count.
    pub fn wire_len(&self) -> u64 {
        (self.head().len() + self.body.len()) as u64
    }
}

pub type Handler = Arc<dyn Fn(&HttpRequest) -> HttpResponse + Send + Sync>;

/// An HTTP/1.1 server in a namespace; one request per connection. Stops when dropped.
pub struct HttpServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<HttpRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Every request received so far.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `handler` on `addr` inside `netns`.
pub fn spawn_http_server(netns: &NetNs, addr: SocketAddr, handler: Handler) -> HttpServer {
    let listener = netns.bind_tcp(addr);
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = handler.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &handler, &seen)).await;
            });
        }
    });
    HttpServer {
        addr,
        requests,
        task,
    }
}

async fn answer(
    stream: tokio::net::TcpStream,
    handler: &Handler,
    seen: &Mutex<Vec<HttpRequest>>,
) -> std::io::Result<()> {
    let mut stream = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    stream.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    let request = HttpRequest {
        method,
        target,
        headers,
        body,
    };
    let response = handler(&request);
    seen.lock().unwrap().push(request);
    let stream = stream.get_mut();
    stream.write_all(response.head().as_bytes()).await?;
    stream.write_all(&response.body).await?;
    stream.shutdown().await
}

/// A DNS server on 198.51.100.1:53 in a namespace that answers every query NXDOMAIN and
/// records the names asked. Stops when dropped.
pub struct DnsRecorder {
    queries: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl DnsRecorder {
    pub fn spawn(netns: &NetNs) -> DnsRecorder {
        let socket = netns.run_inside(|| {
            std::net::UdpSocket::bind(SocketAddr::new(IpAddr::V4(PUBLIC), 53)).unwrap()
        });
        socket.set_nonblocking(true).unwrap();
        let socket = tokio::net::UdpSocket::from_std(socket).unwrap();
        let queries = Arc::new(Mutex::new(Vec::new()));
        let seen = queries.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((len, from)) = socket.recv_from(&mut buf).await {
                let packet = &buf[..len];
                if let Some(name) = query_name(packet) {
                    seen.lock().unwrap().push(name);
                }
                if len >= 12 {
                    let mut reply = packet.to_vec();
                    // QR = response, keep the opcode and RD; RA; RCODE 3 = NXDOMAIN.
                    reply[2] |= 0x80;
                    reply[3] = 0x80 | 3;
                    let _ = socket.send_to(&reply, from).await;
                }
            }
        });
        DnsRecorder { queries, task }
    }

    /// Every name queried so far, lowercase.
    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }
}

impl Drop for DnsRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The first question's name of a DNS query.
fn query_name(packet: &[u8]) -> Option<String> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*packet.get(at)?);
        if len == 0 {
            break;
        }
        let label = packet.get(at + 1..at + 1 + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += 1 + len;
    }
    Some(labels.join("."))
}

/// `airlockd` running inside a namespace, serving gRPC on a Unix socket (which crosses
/// namespaces). Killed when dropped.
pub struct NetnsDaemon {
    child: tokio::process::Child,
    pub endpoint: String,
    pub token: String,
    log: Arc<Mutex<String>>,
}

impl NetnsDaemon {
    /// Starts `airlockd --listen unix:<dir>/airlockd.sock ARGS` in `netns` and `cwd`, and
    /// waits until it serves.
    pub async fn start(netns: &NetNs, args: &[&str], cwd: &Path) -> NetnsDaemon {
        let socket = cwd.join("airlockd.sock");
        let mut child = netns
            .command(cargo_bin("airlockd"))
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .args(args)
            .current_dir(cwd)
            .env("AIRLOCK_LOG", "info,airlock_daemon::egress=debug")
            .env("NO_COLOR", "1")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("airlockd starts");
        let Startup { token, log, .. } = await_serving(&mut child).await;
        NetnsDaemon {
            child,
            endpoint: format!("unix:{}", socket.display()),
            token,
            log,
        }
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// A connection as the `default` tenant.
    pub async fn channel(&self) -> AuthedChannel {
        connect_with_token(&self.endpoint, &self.token).await
    }

    pub async fn agent(&self) -> pb::agent_client::AgentClient<AuthedChannel> {
        pb::agent_client::AgentClient::new(self.channel().await)
    }

    /// Starts a run, as [`crate::TestDaemon::start_run`] does for an in-process daemon.
    pub async fn start_run(&self, start: pb::StartRun) -> RunStream {
        RunStream::open(self.agent().await, pb::run_request::Request::Start(start))
            .await
            .unwrap_or_else(|status| panic!("the run starts: {status}\n{}", self.log()))
    }

    /// Runs `tool` with `arguments` and returns its result, as [`crate::TestDaemon::exec`]
    /// does for an in-process daemon; a call that fails or ends without one shows the log.
    pub async fn execute(&self, tool: &str, arguments: serde_json::Value) -> pb::ToolResult {
        let mut stream = pb::tools_client::ToolsClient::new(self.channel().await)
            .execute_tool(pb::ExecuteToolRequest {
                tool: tool.to_owned(),
                arguments_json: arguments.to_string(),
                workspace: String::new(),
                timeout_ms: 0,
                require_approval: false,
            })
            .await
            .unwrap_or_else(|status| panic!("{status}\n{}", self.log()))
            .into_inner();
        while let Some(event) = stream.message().await.unwrap() {
            if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
                return result;
            }
        }
        panic!("no result for {tool}:\n{}", self.log());
    }

    /// Kills the daemon and waits until it is gone.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

impl Drop for NetnsDaemon {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn servers_answer_inside_and_lookups_are_recorded() {
        let netns = NetNs::new();
        let server = spawn_http_server(
            &netns,
            SocketAddr::new(IpAddr::V4(PUBLIC), 0),
            Arc::new(|request| HttpResponse::ok(format!("you asked {}", request.target))),
        );
        let dns = DnsRecorder::spawn(&netns);
        let output = netns
            .command("curl")
            .args(["-sS", &format!("http://{}/hello", server.addr)])
            .output()
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "you asked /hello");
        assert_eq!(server.requests().len(), 1);
        let lookup = netns
            .command("getent")
            .args(["hosts", "probe.harness.test"])
            .output()
            .await
            .unwrap();
        assert!(!lookup.status.success(), "the recorder answers NXDOMAIN");
        assert!(
            dns.queries()
                .iter()
                .any(|name| name == "probe.harness.test"),
            "{:?}",
            dns.queries()
        );
        let name = netns.name().to_owned();
        drop(netns);
        assert!(!Path::new("/run/netns").join(name).exists());
    }
}
