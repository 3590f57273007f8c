//! Decoding of every request message of the `airlock.v1` services, as tonic decodes them
//! from a client's bytes. The first byte picks the message type; the rest is the message.
//!
//! Beyond "no panic", a decoded message re-encodes to its `encoded_len` and decodes back to
//! itself: what the daemon logs or stores (the run event log keeps the wire format) is what it
//! was sent, minus unknown fields.

#![no_main]

use airlock_proto::v1 as pb;
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Decodes `bytes` as `M` and checks that its encoding is stable.
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let Ok(message) = M::decode(bytes) else {
        return;
    };
    let encoded = message.encode_to_vec();
    assert_eq!(encoded.len(), message.encoded_len());
    let again = M::decode(encoded.as_slice()).expect("an encoded message decodes");
    // `==` fails on a NaN float (`ModelConfig.temperature`) and bytes differ for a map
    // (`labels`), which encodes in hash order; no request has both, so one of them holds.
    assert!(
        again == message || again.encode_to_vec() == encoded,
        "{message:?} does not survive a round trip"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    // Every message a client sends: the request of each unary call and each stream's items.
    match selector % 11 {
        0 => round_trip::<pb::CreateSessionRequest>(message),
        1 => round_trip::<pb::RunRequest>(message),
        2 => round_trip::<pb::ApprovalDecision>(message),
        3 => round_trip::<pb::CancelRunRequest>(message),
        4 => round_trip::<pb::GetRunRequest>(message),
        5 => round_trip::<pb::ListRunsRequest>(message),
        6 => round_trip::<pb::GetTraceRequest>(message),
        7 => round_trip::<pb::ListToolsRequest>(message),
        8 => round_trip::<pb::ExecuteToolRequest>(message),
        9 => round_trip::<pb::CancelExecutionRequest>(message),
        _ => round_trip::<pb::ReadOutputRequest>(message),
    }
});
