//! Network egress by allow-list: the one place that decides whether a tool may reach a host,
//! resolves its name, opens the connection and accounts for the bytes.
//!
//! Both engines go through a per-call [`Gate`]: neither opens a socket to the outside world
//! by itself, and no guest ever resolves a name. The rules are checked on the name *before*
//! it is resolved (an unlisted name is never looked up, so a lookup cannot leak a secret),
//! and again on every resolved address (a listed name that resolves to loopback, link-local
//! or a private range is refused unless that address itself is listed). The process engine
//! reaches the gate through [`proxy`], an HTTP forward proxy listening inside the sandbox's
//! network namespace.

mod gate;
mod ledger;
mod metered;
pub mod proxy;
mod resolver;
mod rules;

pub use gate::{EgressApprover, Gate, Refusal};
pub use ledger::Contact;
pub use resolver::Resolver;
pub use rules::{Rules, Verdict};
