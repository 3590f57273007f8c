//! A hosted server's questions put to the client whose call raised them.
//!
//! A server may ask its user something in the middle of a call: a form to fill
//! (elicitation) or a completion of the user's model (sampling). When the call came from an
//! MCP client that offered to answer such a question, the question goes to that client
//! ([`Questions`], implemented at the MCP endpoint, which puts it to the client at the
//! revision it speaks). Otherwise airlock answers as `client.rs` says: elicitation to the
//! tenant's approvers, sampling refused. Roots are always airlock's to answer (the
//! sandbox's `/workspace`): a client's roots are paths of its own host, which mean nothing
//! in the sandbox and are not the server's to learn.
//!
//! Which call a question is about: a server of 2026-07-28 answers the very call with an
//! `input_required` result (`Instance::call_tool` drives it), so there is no doubt. A server
//! of 2025-11-25 sends a request of its own that names no call (over stdio nothing ties the
//! two), so its question goes to a client only while exactly one call is in flight on the
//! instance ([`Callers::sole`]); with two or more, it could be either's, and the approvers
//! are asked instead — a client never sees a question that may be another call's.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use rmcp::model::{InputRequest, InputRequests, InputResponses};

/// The most rounds of questions one call may take, as rmcp's own loop allows: a server that
/// keeps asking cannot hold a call (and the client) forever below its deadline.
pub const MAX_ROUNDS: usize = 10;

/// The client whose call is in flight, when it can answer a server's questions.
pub trait Questions: Send + Sync {
    /// The client offered to fill in forms (elicitation).
    fn elicits(&self) -> bool;
    /// The client offered to sample its model.
    fn samples(&self) -> bool;
    /// Answers the client sent with the call itself, before anything was asked (a client of
    /// 2026-07-28 may answer a stateless server's question up front): for the server's
    /// first round, once.
    fn opening_answers(&self) -> Option<InputResponses> {
        None
    }
    /// Puts `requests`, keyed as the server keyed them, to the client; its answers by the
    /// same keys. An error when the client went away or would not answer.
    fn ask(&self, requests: InputRequests) -> BoxFuture<'static, Result<InputResponses, String>>;
}

/// Whether `questions` can answer `request`.
pub fn answers(questions: &dyn Questions, request: &InputRequest) -> bool {
    match request {
        InputRequest::Elicitation(_) => questions.elicits(),
        InputRequest::CreateMessage(_) => questions.samples(),
        // Roots are airlock's to answer; a kind of question newer than airlock stays here
        // (and is refused), never reaching a client airlock cannot check the answer of.
        InputRequest::ListRoots(_) => false,
        _ => false,
    }
}

/// One call in flight: its place, and its client when it can answer.
type Caller = (u64, Option<Arc<dyn Questions>>);

/// The calls in flight on one instance, with the clients that can answer for them.
#[derive(Default)]
pub struct Callers {
    calls: Mutex<Vec<Caller>>,
    next: std::sync::atomic::AtomicU64,
}

/// A call's place among [`Callers`], given up when dropped.
pub struct InFlight {
    callers: Arc<Callers>,
    id: u64,
}

impl Callers {
    /// Counts a call in flight until the returned guard is dropped.
    pub fn enter(self: &Arc<Self>, questions: Option<Arc<dyn Questions>>) -> InFlight {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, questions));
        InFlight {
            callers: self.clone(),
            id,
        }
    }

    /// The client of the one call in flight, when there is exactly one and it can answer.
    pub fn sole(&self) -> Option<Arc<dyn Questions>> {
        match self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_slice()
        {
            [(_, questions)] => questions.clone(),
            _ => None,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.callers
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Client;

    impl Questions for Client {
        fn elicits(&self) -> bool {
            true
        }
        fn samples(&self) -> bool {
            false
        }
        fn ask(&self, _: InputRequests) -> BoxFuture<'static, Result<InputResponses, String>> {
            Box::pin(async { Ok(InputResponses::new()) })
        }
    }

    #[test]
    fn a_question_goes_to_a_client_only_while_its_call_is_the_only_one() {
        let callers = Arc::new(Callers::default());
        assert!(callers.sole().is_none());
        let first = callers.enter(Some(Arc::new(Client)));
        assert!(callers.sole().is_some());
        let second = callers.enter(None);
        assert!(callers.sole().is_none(), "two calls: either's question");
        drop(first);
        assert!(callers.sole().is_none(), "the one left cannot answer");
        drop(second);
        let third = callers.enter(Some(Arc::new(Client)));
        let fourth = callers.enter(Some(Arc::new(Client)));
        assert!(
            callers.sole().is_none(),
            "two that can answer: still either's"
        );
        drop(fourth);
        assert!(callers.sole().is_some());
        drop(third);
        assert!(callers.sole().is_none());
    }
}
