//! `airlock.v1.Audit`: a tenant's audit chain, paged and verified. Translation only: the
//! chain is the store's (`store::audit`); a caller names no tenant, and sees its own.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::auth::caller;
use super::error::ApiError;
use crate::store::Store;
use crate::store::audit::{AuditRecord, Broken, Verifier};

/// A page's size when the request names none.
const DEFAULT_PAGE: usize = 500;

/// The largest page: records are at most a few KiB each (their fields are bounded), so a
/// page stays well under the response size limit.
const MAX_PAGE: usize = 5000;

/// Records read per store round trip while verifying: a chain of any length is checked in
/// bounded memory.
const VERIFY_PAGE: usize = 2000;

/// The most bytes of records a page carries: a record is at most about 20 KiB, and 5,000 of
/// them would pass the 16 MiB a reply may be; the page ends early instead, and says where
/// to go on.
const MAX_PAGE_BYTES: usize = 4 << 20;

pub struct AuditService {
    store: Arc<dyn Store>,
    /// The tenants verifying now: one verification at a time each, since each reads the
    /// whole chain through the store.
    verifying: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl AuditService {
    pub fn new(store: Arc<dyn Store>) -> AuditService {
        AuditService {
            store,
            verifying: std::sync::Mutex::default(),
        }
    }
}

/// A tenant's turn to verify, given back when dropped.
struct Turn<'a> {
    verifying: &'a std::sync::Mutex<std::collections::HashSet<String>>,
    tenant: String,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.verifying
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.tenant);
    }
}

fn record(record: AuditRecord) -> pb::AuditRecord {
    pb::AuditRecord {
        tenant: record.tenant,
        seq: record.seq,
        at_ms: record.at_ms,
        kind: record.kind,
        actor: record.actor,
        subject: record.subject,
        reason: record.reason,
        details_json: record.details,
        prev: record.prev,
        digest: record.digest,
    }
}

/// The first record a broken chain names; 0 when the problem is its end.
fn broken_seq(broken: &Broken) -> u64 {
    match broken {
        Broken::Edited { seq }
        | Broken::Gap { seq, .. }
        | Broken::Unlinked { seq }
        | Broken::Headless { seq }
        | Broken::Foreign { seq, .. }
        | Broken::HeadMismatch { seq } => *seq,
        Broken::Truncated { .. } | Broken::MissingHead { .. } | Broken::BeyondHead { .. } => 0,
    }
}

impl AuditService {
    /// Whether records lie past the tenant's head row: written outside the daemon, since the
    /// daemon moves the head with each record in one transaction. A record appended between
    /// reading the head and looking past it has moved the head too: the head is read again,
    /// a few times, before records past it count as forged.
    async fn nothing_past_the_head(&self, tenant: &str) -> Result<Option<Broken>, ApiError> {
        let mut past = None;
        for _ in 0..3 {
            let head = self.store.audit_head(tenant).await?;
            let seq = head.map_or(0, |(seq, _)| seq);
            let beyond = self.store.audit_records(tenant, seq, 0, 1).await?;
            match beyond.first() {
                None => return Ok(None),
                Some(record) => {
                    past = Some(Broken::BeyondHead {
                        head: seq,
                        last: record.seq,
                    });
                }
            }
        }
        Ok(past)
    }
}

#[tonic::async_trait]
impl pb::audit_server::Audit for AuditService {
    async fn list_audit_records(
        &self,
        request: Request<pb::ListAuditRecordsRequest>,
    ) -> Result<Response<pb::ListAuditRecordsResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let limit = match usize::try_from(request.page_size).unwrap_or(MAX_PAGE) {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        let records = self
            .store
            .audit_records(&tenant.name, request.after_seq, request.since_ms, limit)
            .await
            .map_err(ApiError::from)?;
        let full = records.len() == limit;
        let mut page = Vec::with_capacity(records.len());
        let mut bytes = 0;
        let mut cut = false;
        for stored in records {
            let record = record(stored);
            bytes += prost::Message::encoded_len(&record);
            if bytes > MAX_PAGE_BYTES && !page.is_empty() {
                cut = true;
                break;
            }
            page.push(record);
        }
        let next_after_seq = if full || cut {
            page.last().map_or(0, |last| last.seq)
        } else {
            0
        };
        Ok(Response::new(pb::ListAuditRecordsResponse {
            records: page,
            next_after_seq,
        }))
    }

    async fn verify_audit(
        &self,
        request: Request<pb::VerifyAuditRequest>,
    ) -> Result<Response<pb::VerifyAuditResponse>, Status> {
        let tenant = caller(&request)?;
        let newly = self
            .verifying
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(tenant.name.clone());
        if !newly {
            return Err(ApiError::Capacity {
                tenant: tenant.name.clone(),
                max: 1,
                what: "audit verifications",
            }
            .into());
        }
        let _turn = Turn {
            verifying: &self.verifying,
            tenant: tenant.name.clone(),
        };
        let expect = request.into_inner().expect_head;
        let expect = (!expect.is_empty()).then_some(expect.as_str());
        // The chain up to its head as it is now: records appended while it is read come
        // after the head and are left for the next verification.
        let head = self
            .store
            .audit_head(&tenant.name)
            .await
            .map_err(ApiError::from)?;
        let until = head.as_ref().map_or(u64::MAX, |(seq, _)| *seq);
        let mut verifier = Verifier::new(&tenant.name, expect);
        let mut after = 0;
        let mut broken = None;
        'pages: loop {
            let page = self
                .store
                .audit_records(&tenant.name, after, 0, VERIFY_PAGE)
                .await
                .map_err(ApiError::from)?;
            for record in &page {
                if record.seq > until {
                    break 'pages;
                }
                if let Err(problem) = verifier.feed(record) {
                    broken = Some(problem);
                    break 'pages;
                }
                after = record.seq;
            }
            if page.len() < VERIFY_PAGE {
                break;
            }
        }
        let outcome = match broken {
            Some(problem) => Err(problem),
            None => match verifier.finish(head) {
                Ok(verified) => self
                    .nothing_past_the_head(&tenant.name)
                    .await?
                    .map_or(Ok(verified), Err),
                Err(problem) => Err(problem),
            },
        };
        Ok(Response::new(match outcome {
            Ok(verified) => pb::VerifyAuditResponse {
                intact: true,
                records: verified.records,
                first_seq: verified.first,
                last_seq: verified.last,
                head: verified.head,
                broken_seq: 0,
                problem: String::new(),
            },
            Err(problem) => pb::VerifyAuditResponse {
                intact: false,
                broken_seq: broken_seq(&problem),
                problem: problem.to_string(),
                ..pb::VerifyAuditResponse::default()
            },
        }))
    }
}
