//! Ctrl-C as a stream of presses: the agent commands give the first press a meaning (cancel
//! the run, detach from it) and the second its usual one (stop now).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The presses of Ctrl-C (SIGINT) from the moment this is created; until then, and if no
/// handler can be installed, Ctrl-C keeps its default effect of ending the process.
pub struct Interrupts {
    signal: Option<Signal>,
}

impl Interrupts {
    /// Installs the handler; must be called within the async runtime.
    pub fn new() -> Self {
        Self {
            signal: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Resolves at the next press.
    pub async fn next(&mut self) {
        match &mut self.signal {
            Some(signal) => {
                if signal.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}
