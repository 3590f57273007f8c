//! `airlockd`: the airlock daemon.

use std::io::IsTerminal;
use std::path::PathBuf;

use airlock_daemon::config::{ConfigFile, DaemonConfig, ListenAddr, Overrides};
use airlock_daemon::{CheckOptions, Daemon};
use anyhow::Context;
use clap::{Parser, ValueEnum};
use tracing_subscriber::EnvFilter;

/// jemalloc rather than glibc's malloc: a loop step allocates and frees many small objects
/// (JSON, protobuf, the shell parser's tokens), and with jemalloc a step takes about a third
/// less time for 8% more memory per waiting run (BENCHMARKS.md, finding 17). Built without
/// its background threads: `privileges::take_up` must run while the daemon is one thread.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs AI agents' tools in WebAssembly and Linux sandboxes, driven over gRPC.
#[derive(Debug, Parser)]
#[command(name = "airlockd", version)]
struct Args {
    /// TOML configuration file; flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to serve gRPC on: host:port, or unix:/path for a Unix socket (mode 0600)
    /// [default: 127.0.0.1:7411].
    #[arg(long, value_name = "ADDR")]
    listen: Option<ListenAddr>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (mutual TLS).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Let clients on the Unix socket in without a token, as the default tenant: the
    /// socket's mode already limits it to this user.
    #[arg(long)]
    unix_socket_trust: bool,
    /// A directory of tools (one folder with a tool.toml per tool); repeatable, adds to
    /// ./plugins and the config file's.
    #[arg(long = "tools-dir", value_name = "DIR")]
    tools_dirs: Vec<PathBuf>,
    /// A policy rule file every tenant's calls are judged by; repeatable, after the config
    /// file's `[policy] files`.
    #[arg(long = "policy", value_name = "FILE")]
    policy_files: Vec<PathBuf>,
    /// Directory of sandbox profiles [default: ./sandbox-profiles].
    #[arg(long, value_name = "DIR", global = true)]
    profiles_dir: Option<PathBuf>,
    /// Where the daemon keeps its state (compiled modules, ...) [default:
    /// $XDG_STATE_HOME/airlock or ~/.local/state/airlock].
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,
    /// Requests may only name workspaces inside these directories; repeatable [default: the
    /// current directory].
    #[arg(long = "workspace-root", value_name = "DIR")]
    workspace_roots: Vec<PathBuf>,
    /// Export traces, metrics and the audit log to this OpenTelemetry collector, e.g.
    /// http://127.0.0.1:4317 or https://collector:4317 (gRPC unless [otlp] protocol or
    /// OTEL_EXPORTER_OTLP_PROTOCOL says http/protobuf). The OTEL_EXPORTER_OTLP_* variables
    /// set the rest (headers, certificates, timeout), or the endpoint when this is unset.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (off unless set). A non-loopback
    /// address needs --metrics-token-file.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// The bearer token scrapes of --metrics-listen must send, read from FILE.
    #[arg(long, value_name = "FILE")]
    metrics_token_file: Option<PathBuf>,
    /// Also serve airlock's tools over MCP (Streamable HTTP, path /mcp) on this address, with
    /// the same tokens and tenants; off unless set.
    #[arg(long, value_name = "ADDR")]
    mcp_listen: Option<std::net::SocketAddr>,
    /// Where runs are kept: `sqlite` (airlock.db in the state dir, the default) or a
    /// PostgreSQL URL that several daemons may share, postgres://user@host:port/db. Prefer
    /// the environment variable when the URL holds a password: flags are visible in `ps`.
    #[arg(long, value_name = "URL", env = "AIRLOCK_STORE")]
    store: Option<String>,
    /// Do not serve the web console's pages (gRPC-Web stays: it is part of the API).
    #[arg(long)]
    no_console: bool,
    /// Serve the web console's files from this directory, read on each request, instead of
    /// those built in: for working on the console (console/dist).
    #[arg(long, value_name = "DIR", conflicts_with = "no_console")]
    console_dir: Option<PathBuf>,
    /// Log format; the filter comes from AIRLOCK_LOG (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Check a tool before deploying it: its manifest, module, imports against its profile,
    /// whether it loads, and its example calls (what `airlock tools check` runs). Exits 0
    /// when everything passed, 1 otherwise.
    CheckTool {
        /// The tool's folder (or its tool.toml).
        tool: PathBuf,
        /// The workspace example calls run in [default: the examples file's `workspace`].
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Run one call with these arguments (JSON) instead of the examples.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// For a hosted MCP server: write the listing it printed to FILE as JSON (each tool's
        /// name on the server → its pin), as `airlock mcp add` pins it.
        #[arg(long, value_name = "FILE")]
        listing_out: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> anyhow::Result<()> {
    // With RUST_BACKTRACE set (as it often is where Rust is developed), every error value
    // captures a backtrace — and a WASI tool's ordinary exit is an error value inside
    // wasmtime, so each call would walk its stack (about a tenth of a warm call's CPU).
    // Panics still print theirs: RUST_LIB_BACKTRACE only governs captured ones.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: nothing else runs yet: no thread has been started that could read the
        // environment concurrently.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    // Before any thread starts: each thread the daemon makes inherits the main thread's
    // capabilities.
    let taken_up = airlock_daemon::privileges::take_up();
    // Before any thread starts too, as SQLite asks of its configuration; an error is
    // reported when the store opens.
    let _ = airlock_daemon::install_page_cache();
    let args = Args::parse();
    init_logging(args.log_format);
    match taken_up {
        Ok(taken_up) if taken_up.raised.is_empty() => {}
        Ok(taken_up) => tracing::info!(
            "took up {}, permitted by the executable's file capabilities",
            taken_up.raised.join(", ")
        ),
        Err(err) => tracing::warn!(
            "cannot take up the capabilities the process engine needs: {err}; it will name \
             those it lacks"
        ),
    }
    let file = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    let config = DaemonConfig::resolve(
        file,
        Overrides {
            listen: args.listen,
            tls_cert: args.tls_cert,
            tls_key: args.tls_key,
            tls_client_ca: args.tls_client_ca,
            unix_socket_trust: args.unix_socket_trust,
            tools_dirs: args.tools_dirs,
            policy_files: args.policy_files,
            profiles_dir: args.profiles_dir,
            state_dir: args.state_dir,
            workspace_roots: args.workspace_roots,
            otlp_endpoint: args.otlp_endpoint,
            metrics_listen: args.metrics_listen,
            metrics_token_file: args.metrics_token_file,
            mcp_listen: args.mcp_listen,
            no_console: args.no_console,
            console_dir: args.console_dir,
            store: args.store,
        },
    )?;
    if let Some(Command::CheckTool {
        tool,
        workspace,
        args,
        listing_out,
    }) = args.command
    {
        return check_tool(&config, tool, workspace, args, listing_out);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("airlockd")
        .on_thread_park(airlock_daemon::on_worker_park)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Installed first: a signal that arrives while the daemon starts stops it cleanly,
        // rather than killing it with the default action.
        let mut shutdown =
            Box::pin(shutdown_signal().context("cannot install the signal handlers")?);
        // SIGHUP's default is to end the process: handled from the start too. One that
        // arrives while the daemon starts is kept, and reloads once it serves.
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("cannot install the SIGHUP handler")?;
        // Building waits on the store, which may take long to answer (or never answer):
        // a signal meanwhile stops the daemon before it served anything.
        let daemon = tokio::select! {
            built = Daemon::build(config) => built?,
            () = &mut shutdown => {
                tracing::info!("stopped while starting, before serving anything");
                return anyhow::Ok(());
            }
        };
        let listener = daemon.bind().await?;
        let reloader = daemon.reloader();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP received: reloading the tools and profiles");
                if let Err(error) = reloader.reload().await {
                    tracing::error!(%error, "the tools were not reloaded");
                }
            }
        });
        daemon.serve(listener, shutdown).await?;
        tracing::info!("airlockd stopped");
        anyhow::Ok(())
    })
}

/// `airlockd check-tool`: the report on stdout, the exit code its verdict.
fn check_tool(
    config: &DaemonConfig,
    tool: PathBuf,
    workspace: Option<PathBuf>,
    arguments: Option<String>,
    listing_out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let options = CheckOptions {
        tool,
        profiles_dir: config.profiles_dir.clone(),
        cache_dir: config.module_cache(),
        state_dir: config.state_dir.clone(),
        workspace,
        arguments,
        listing_out,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let passed = runtime.block_on(check_tool_report(&options))?;
    if !passed {
        std::process::exit(1);
    }
    Ok(())
}

async fn check_tool_report(options: &CheckOptions) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    Ok(airlock_daemon::check_tool(options, &mut out).await?)
}

/// What the daemon logs unless `AIRLOCK_LOG` says otherwise. wasmtime-wasi opens an
/// info-level span for every WASI call a guest makes (several per tool call), and the text
/// formatter renders each span's fields as it opens (it showed in the warm call's profile):
/// work for spans nothing prints, since no event is logged inside one.
const DEFAULT_LOG_FILTER: &str = "info,wasmtime_wasi=warn";

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_env("AIRLOCK_LOG")
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_on_stderr(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Colour codes only for a person at a terminal: a log file or a pipe gets plain text, and
/// `NO_COLOR` set to anything but the empty string turns colour off (no-color.org).
fn colour_on_stderr(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// Installs the handlers of SIGINT and SIGTERM at once; the future resolves on either.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT received"),
            _ = terminate.recv() => tracing::info!("SIGTERM received"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour_on_stderr(true, None));
        assert!(colour_on_stderr(true, Some(OsStr::new(""))));
        assert!(!colour_on_stderr(true, Some(OsStr::new("1"))));
        assert!(!colour_on_stderr(false, None));
    }
}
