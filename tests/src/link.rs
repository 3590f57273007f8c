//! A link to a server that a test can break: a TCP proxy on loopback in front of the real
//! server (the test PostgreSQL, say), switched between forwarding, down (every connection
//! cut and each new one closed at once, as a stopped server or a refused port looks to a
//! client), silent (connections taken and never answered, as a black-holed route looks) and
//! frozen (nothing moves either way on any connection, old or new, until the link is up
//! again, as a server stopped with SIGSTOP looks: what was sent meanwhile then arrives,
//! a client's close included). The tests of a fleet's database outages use it: stopping the
//! shared test server itself would take every other test's database down with it.

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the link does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Forwards to the server.
    Up,
    /// Cuts every connection and closes each new one at once.
    Down,
    /// Takes connections and never answers; cuts those it forwarded.
    Silent,
    /// Holds every connection, forwarding nothing, until the link is up again; then
    /// forwards what waited, both ways.
    Frozen,
}

pub struct Link {
    addr: SocketAddr,
    state: watch::Sender<LinkState>,
    accepting: JoinHandle<()>,
}

impl Link {
    /// A link on a free loopback port to `server`, in `state`.
    pub async fn to(server: SocketAddr, state: LinkState) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = watch::Sender::new(state);
        let accepting = tokio::spawn(accept(listener, server, state.clone()));
        Link {
            addr,
            state,
            accepting,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set(&self, state: LinkState) {
        self.state.send_replace(state);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accepting.abort();
        // The connections' tasks see the sender go and end.
    }
}

async fn accept(listener: TcpListener, server: SocketAddr, state: watch::Sender<LinkState>) {
    while let Ok((client, _)) = listener.accept().await {
        tokio::spawn(carry(client, server, state.subscribe()));
    }
}

/// One connection, for as long as the link's state allows it.
async fn carry(mut client: TcpStream, server: SocketAddr, mut state: watch::Receiver<LinkState>) {
    let at_accept = *state.borrow_and_update();
    match at_accept {
        LinkState::Down => {
            let _ = client.shutdown().await;
            return;
        }
        LinkState::Silent => {
            // Held without a word until the link changes; then closed, as a server that
            // wakes up finds a connection it never answered timed out.
            let _ = state.changed().await;
            return;
        }
        LinkState::Frozen => {
            // Held until the server wakes up, which then answers it.
            match state.wait_for(|state| *state != LinkState::Frozen).await {
                Ok(now) if *now == LinkState::Up => {}
                _ => return,
            }
        }
        LinkState::Up => {}
    }
    let Ok(mut upstream) = TcpStream::connect(server).await else {
        return;
    };
    let copying = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    tokio::pin!(copying);
    loop {
        let now = *state.borrow_and_update();
        match now {
            LinkState::Up => tokio::select! {
                _ = &mut copying => return,
                changed = state.changed() => if changed.is_err() { return },
            },
            // Not polled, the copy moves nothing: what either side sends waits in the
            // sockets' buffers, and goes on when the link is up again.
            LinkState::Frozen => {
                if state.changed().await.is_err() {
                    return;
                }
            }
            // Dropping both sockets cuts the connection both ways.
            LinkState::Down | LinkState::Silent => return,
        }
    }
}
