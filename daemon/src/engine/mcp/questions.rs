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
//! instance ([`Callers::sole`]); with two or more — a call given up on counts while its
//! server may still be at work on it — it could be either's, and the approvers are asked
//! instead. (A server that asks about nothing of the call at all still reaches the call's
//! client: that revision cannot tell.) A call's client is asked [`MAX_ROUNDS`] questions
//! at most, at either revision.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ErrorData, InputRequest, InputRequests, InputResponses};

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
    /// The server refused the call because the client lacks a capability it needs
    /// (`MissingRequiredClientCapabilityError`, -32021, naming it): told to the client as
    /// that error rather than as the call's failure.
    fn lacks(&self, _error: &ErrorData) {}
    /// Puts `requests`, keyed as the server keyed them, to the client; its answers by the
    /// same keys. An error when the client went away or would not answer.
    fn ask(&self, requests: InputRequests) -> BoxFuture<'static, Result<InputResponses, String>>;
}

/// Whether `questions` can answer `request`. A URL elicitation (go to this address) is
/// never relayed: airlock declines it, so a server cannot send a client's person to a page
/// of its choosing through airlock.
pub fn answers(questions: &dyn Questions, request: &InputRequest) -> bool {
    match request {
        InputRequest::Elicitation(request) => {
            questions.elicits()
                && matches!(
                    request.params,
                    ElicitRequestParams::FormElicitationParams { .. }
                )
        }
        InputRequest::CreateMessage(_) => questions.samples(),
        // Roots are airlock's to answer; a kind of question newer than airlock stays here
        // (and is refused), never reaching a client airlock cannot check the answer of.
        InputRequest::ListRoots(_) => false,
        _ => false,
    }
}

/// `requests` as the client is shown them: each form's message says which server asks, so
/// that a server's question cannot pass for airlock's own (an approval's).
pub fn attributed(server: &str, mut requests: InputRequests) -> InputRequests {
    for request in requests.values_mut() {
        if let InputRequest::Elicitation(request) = request
            && let ElicitRequestParams::FormElicitationParams { message, .. } = &mut request.params
        {
            *message = format!("MCP server `{server}` asks: {message}");
        }
    }
    requests
}

/// One call in flight: its place, its client when it can answer, and how many questions
/// have gone to that client.
struct Caller {
    id: u64,
    questions: Option<Arc<dyn Questions>>,
    asked: usize,
}

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
    /// Counts a call in flight until the returned guard is dropped. `None`: a call no client
    /// answers for — or one given up on whose server may still be at work on it (then its
    /// late questions find two calls, not the next call's client alone).
    pub fn enter(self: &Arc<Self>, questions: Option<Arc<dyn Questions>>) -> InFlight {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Caller {
                id,
                questions,
                asked: 0,
            });
        InFlight {
            callers: self.clone(),
            id,
        }
    }

    /// The client of the one call in flight, when there is exactly one, it can answer, and
    /// it has been asked fewer than [`MAX_ROUNDS`] questions (a server of 2025-11-25 that
    /// keeps asking is answered by airlock from then on, as a 2026-07-28 one is cut off).
    pub fn sole(&self) -> Option<Arc<dyn Questions>> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        match calls.as_mut_slice() {
            [caller] if caller.asked < MAX_ROUNDS => {
                let questions = caller.questions.clone()?;
                caller.asked += 1;
                Some(questions)
            }
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
            .retain(|caller| caller.id != self.id);
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

    fn elicitation(params: ElicitRequestParams) -> InputRequest {
        InputRequest::Elicitation(rmcp::model::ElicitRequest::new(params))
    }

    #[test]
    #[expect(deprecated, reason = "roots, what hosted servers still ask")]
    fn a_form_is_relayed_saying_whose_it_is_and_a_url_never() {
        let form = elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "airlock: allow this write_file call?".into(),
            requested_schema: rmcp::model::ElicitationSchema::new(Default::default()),
        });
        let url = elicitation(ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: "Sign in".into(),
            url: "https://phish.example/".into(),
            elicitation_id: "e1".into(),
        });
        assert!(answers(&Client, &form));
        assert!(!answers(&Client, &url), "a URL is never relayed");
        let roots = InputRequest::ListRoots(rmcp::model::ListRootsRequest::default());
        assert!(!answers(&Client, &roots), "roots are airlock's");
        let shown = attributed("asking", InputRequests::from([("q".to_owned(), form)]));
        let Some(InputRequest::Elicitation(shown)) = shown.get("q") else {
            panic!("the question is kept");
        };
        let ElicitRequestParams::FormElicitationParams { message, .. } = &shown.params else {
            panic!("a form stays a form");
        };
        assert_eq!(
            message,
            "MCP server `asking` asks: airlock: allow this write_file call?"
        );
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
        // A call's client is asked at most MAX_ROUNDS questions.
        let fifth = callers.enter(Some(Arc::new(Client)));
        for _ in 0..MAX_ROUNDS {
            assert!(callers.sole().is_some());
        }
        assert!(callers.sole().is_none(), "no more questions to this client");
        drop(fifth);
    }
}
