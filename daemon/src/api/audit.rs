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

pub struct AuditService {
    store: Arc<dyn Store>,
}

impl AuditService {
    pub fn new(store: Arc<dyn Store>) -> AuditService {
        AuditService { store }
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
        | Broken::Foreign { seq, .. } => *seq,
        Broken::Truncated { .. } | Broken::MissingHead { .. } => 0,
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
        let next_after_seq = if records.len() == limit {
            records.last().map_or(0, |last| last.seq)
        } else {
            0
        };
        Ok(Response::new(pb::ListAuditRecordsResponse {
            records: records.into_iter().map(record).collect(),
            next_after_seq,
        }))
    }

    async fn verify_audit(
        &self,
        request: Request<pb::VerifyAuditRequest>,
    ) -> Result<Response<pb::VerifyAuditResponse>, Status> {
        let tenant = caller(&request)?;
        let expect = request.into_inner().expect_head;
        let expect = (!expect.is_empty()).then_some(expect.as_str());
        // The head row first: records appended while the chain is read only lengthen it.
        let head = self
            .store
            .audit_head(&tenant.name)
            .await
            .map_err(ApiError::from)?;
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
            None => verifier.finish(head),
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
