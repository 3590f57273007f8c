//! The audit log's records and their chain: each tenant's security-relevant acts in one
//! sequence, each record carrying the digest of the one before it, so that editing, removing
//! or reordering any record breaks every digest after it ([`verify`]).
//!
//! A record's digest is SHA-256 over a fixed, length-prefixed encoding of every field but
//! itself (`airlock-audit-v1`, then each field as its byte length in 8 little-endian bytes
//! and its bytes): no two different records encode the same, whatever bytes their fields
//! hold. The first record of a chain follows [`GENESIS`].
//!
//! Retention may cut a chain's beginning only at a checkpoint record (kind
//! [`CHECKPOINT`]): verification then accepts a chain that starts at a checkpoint, whose
//! predecessor is gone, and nothing else that does not start at sequence 1. What a chain
//! cannot prove by itself is its own end: a truncated tail is a shorter valid chain. The
//! store's head row (written with each record) catches a truncation that did not also
//! rewrite it; an operator who keeps the head digest somewhere else catches any
//! (`airlock audit verify --expect-head`).

use sha2::{Digest, Sha256};

/// What the first record of a chain names as its predecessor.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The kind of a checkpoint record: where retention may cut.
pub const CHECKPOINT: &str = "audit.checkpoint";

/// An act to be recorded, before the store places it in its tenant's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditDraft {
    pub tenant: String,
    pub at_ms: i64,
    /// What happened, dotted: `auth.refused`, `approval.decided`, `egress.refused`, …
    pub kind: String,
    /// Who did it: a tenant's token, an approver, the policy, the daemon.
    pub actor: String,
    /// What it was done to: a tool, a run, a host, a server.
    pub subject: String,
    /// Why, in words.
    pub reason: String,
    /// The rest, as a JSON object.
    pub details: String,
}

/// A record in its chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub tenant: String,
    /// 1 for a chain's first record, then one more each.
    pub seq: u64,
    pub at_ms: i64,
    pub kind: String,
    pub actor: String,
    pub subject: String,
    pub reason: String,
    pub details: String,
    /// The digest of the record before (or [`GENESIS`]).
    pub prev: String,
    /// This record's digest, hex.
    pub digest: String,
}

impl AuditRecord {
    /// `draft` placed after `prev` at `seq`, its digest computed.
    pub fn chain(draft: &AuditDraft, seq: u64, prev: &str) -> AuditRecord {
        let mut record = AuditRecord {
            tenant: draft.tenant.clone(),
            seq,
            at_ms: draft.at_ms,
            kind: draft.kind.clone(),
            actor: draft.actor.clone(),
            subject: draft.subject.clone(),
            reason: draft.reason.clone(),
            details: draft.details.clone(),
            prev: prev.to_owned(),
            digest: String::new(),
        };
        record.digest = record.expected_digest();
        record
    }

    /// The digest this record's fields call for.
    pub fn expected_digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"airlock-audit-v1");
        let seq = self.seq.to_le_bytes();
        let at = self.at_ms.to_le_bytes();
        for field in [
            self.tenant.as_bytes(),
            &seq,
            &at,
            self.kind.as_bytes(),
            self.actor.as_bytes(),
            self.subject.as_bytes(),
            self.reason.as_bytes(),
            self.details.as_bytes(),
            self.prev.as_bytes(),
        ] {
            hasher.update(u64::try_from(field.len()).unwrap_or(u64::MAX).to_le_bytes());
            hasher.update(field);
        }
        hex::encode(hasher.finalize())
    }
}

/// Where a chain was found broken: the first record that does not hold, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error("record {seq}: its digest does not match its contents (the record was edited)")]
    Edited { seq: u64 },
    #[error(
        "record {seq}: it does not follow record {before} (records between were removed, or reordered)"
    )]
    Gap { seq: u64, before: u64 },
    #[error(
        "record {seq}: its predecessor's digest is not the one it names (the record before it was replaced)"
    )]
    Unlinked { seq: u64 },
    #[error(
        "the chain starts at record {seq}, which is not a checkpoint: the records before it were removed"
    )]
    Headless { seq: u64 },
    #[error("record {seq} belongs to tenant {found:?}, not {tenant:?}")]
    Foreign {
        seq: u64,
        tenant: String,
        found: String,
    },
    #[error(
        "the chain ends at record {last}, but its head says {head}: the records after {last} were removed"
    )]
    Truncated { last: u64, head: u64 },
    #[error(
        "the chain goes on past its head (record {head}) to record {last}: records were added outside the daemon"
    )]
    BeyondHead { head: u64, last: u64 },
    #[error(
        "record {seq}: its digest is not the one the chain's head names (the last record was replaced)"
    )]
    HeadMismatch { seq: u64 },
    #[error(
        "the expected head {expected} is not in the chain (its last record is {last}): the chain was truncated or rewritten"
    )]
    MissingHead { expected: String, last: u64 },
}

/// What a verified chain holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verified {
    pub records: u64,
    /// The first record's sequence number (1, or a checkpoint's after retention).
    pub first: u64,
    pub last: u64,
    /// The last record's digest: what to keep and pass as `expect_head` next time.
    pub head: String,
}

/// Checks one tenant's chain, record by record in order (a chain may be read a page at a
/// time), then its end.
#[derive(Debug)]
pub struct Verifier {
    tenant: String,
    expect_head: Option<String>,
    expected_found: bool,
    previous: Option<(u64, String)>,
    verified: Verified,
}

impl Verifier {
    /// `expect_head`: a digest the caller kept, which must be in the chain.
    pub fn new(tenant: &str, expect_head: Option<&str>) -> Verifier {
        Verifier {
            tenant: tenant.to_owned(),
            expect_head: expect_head.map(str::to_owned),
            expected_found: expect_head.is_none(),
            previous: None,
            verified: Verified::default(),
        }
    }

    /// Checks the next record.
    pub fn feed(&mut self, record: &AuditRecord) -> Result<(), Broken> {
        if record.tenant != self.tenant {
            return Err(Broken::Foreign {
                seq: record.seq,
                tenant: self.tenant.clone(),
                found: record.tenant.clone(),
            });
        }
        if record.expected_digest() != record.digest {
            return Err(Broken::Edited { seq: record.seq });
        }
        match &self.previous {
            None => {
                if record.seq == 1 {
                    if record.prev != GENESIS {
                        return Err(Broken::Unlinked { seq: record.seq });
                    }
                } else if record.kind != CHECKPOINT {
                    return Err(Broken::Headless { seq: record.seq });
                }
                self.verified.first = record.seq;
            }
            Some((seq, digest)) => {
                if record.seq != seq + 1 {
                    return Err(Broken::Gap {
                        seq: record.seq,
                        before: *seq,
                    });
                }
                if record.prev != *digest {
                    return Err(Broken::Unlinked { seq: record.seq });
                }
            }
        }
        if self.expect_head.as_deref() == Some(record.digest.as_str()) {
            self.expected_found = true;
        }
        self.verified.records += 1;
        self.verified.last = record.seq;
        self.verified.head.clone_from(&record.digest);
        self.previous = Some((record.seq, record.digest.clone()));
        Ok(())
    }

    /// Checks the end against `head`: the sequence number and digest the store's head row
    /// names, written with each record.
    pub fn finish(self, head: Option<(u64, String)>) -> Result<Verified, Broken> {
        if let Some((seq, digest)) = head {
            let last = self.verified.last;
            if seq > last {
                return Err(Broken::Truncated { last, head: seq });
            }
            if seq < last {
                return Err(Broken::BeyondHead { head: seq, last });
            }
            if last > 0 && digest != self.verified.head {
                return Err(Broken::HeadMismatch { seq: last });
            }
        }
        if !self.expected_found {
            return Err(Broken::MissingHead {
                expected: self.expect_head.unwrap_or_default(),
                last: self.verified.last,
            });
        }
        Ok(self.verified)
    }
}

/// Checks one tenant's whole chain, given in order (see [`Verifier`]).
#[cfg(test)]
pub fn verify(
    tenant: &str,
    records: &[AuditRecord],
    head: Option<(u64, String)>,
    expect_head: Option<&str>,
) -> Result<Verified, Broken> {
    let mut verifier = Verifier::new(tenant, expect_head);
    for record in records {
        verifier.feed(record)?;
    }
    verifier.finish(head)
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
