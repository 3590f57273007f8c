//! The suite's checks of the audit log: each tenant's records chain in order, whatever
//! writes race; a tenant's records are its own; retention cuts only at a checkpoint.

use crate::store::Store;
use crate::store::audit::{AuditDraft, CHECKPOINT, GENESIS, verify};

fn draft(tenant: &str, kind: &str, at_ms: i64) -> AuditDraft {
    AuditDraft {
        tenant: tenant.to_owned(),
        at_ms,
        kind: kind.to_owned(),
        actor: "alice".to_owned(),
        subject: "read_file".to_owned(),
        reason: "why \u{1F512} 'quoted' \"and\" \\ escaped".to_owned(),
        details: r#"{"n":1}"#.to_owned(),
    }
}

pub(super) async fn chains_link_in_order_per_tenant(store: &dyn Store, tenant: &str) {
    let other = format!("{tenant}-other");
    // Handed over together, as acts arrive from many tasks: the store places them, in an
    // order of its choosing, each once, in one chain per tenant.
    let pending: Vec<_> = (0..40)
        .map(|n| {
            let to = if n % 3 == 0 { &other } else { tenant };
            store.append_audit(&draft(to, "approval.decided", 1_000 + n))
        })
        .collect();
    let placed = futures::future::join_all(pending).await;
    let placed: Vec<_> = placed.into_iter().map(|r| r.expect("appended")).collect();
    let first = placed
        .iter()
        .filter(|r| r.tenant == tenant)
        .min_by_key(|r| r.seq)
        .expect("one");
    assert_eq!((first.seq, first.prev.as_str()), (1, GENESIS));

    let records = store.audit_records(tenant, 0, 0, 1000).await.expect("read");
    assert_eq!(records.len(), 26);
    assert!(records.iter().all(|r| r.tenant == tenant), "its own only");
    let head = store.audit_head(tenant).await.expect("head");
    let verified = verify(tenant, &records, head, None).expect("intact");
    assert_eq!((verified.first, verified.last), (1, 26));
    assert_eq!(
        records.last().map(|r| r.digest.clone()),
        Some(verified.head)
    );
    let others = store.audit_records(&other, 0, 0, 1000).await.expect("read");
    verify(
        &other,
        &others,
        store.audit_head(&other).await.expect("head"),
        None,
    )
    .expect("the other chain is intact too");
    assert_eq!(others.len(), 14);

    // Paging and the time filter.
    let page = store.audit_records(tenant, 10, 0, 5).await.expect("page");
    assert_eq!(
        page.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [11, 12, 13, 14, 15]
    );
    let late = store
        .audit_records(tenant, 0, 1_030, 1000)
        .await
        .expect("since");
    assert!(late.iter().all(|r| r.at_ms >= 1_030) && !late.is_empty());
    let tenants = store.audit_tenants().await.expect("tenants");
    assert!(tenants.contains(&tenant.to_owned()) && tenants.contains(&other));
    assert_eq!(store.audit_head("nobody-at-all").await.expect("head"), None);
    assert_eq!(
        store.audit_head(tenant).await.expect("head"),
        records.last().map(|r| (r.seq, r.digest.clone()))
    );
}

pub(super) async fn retention_cuts_only_at_an_old_checkpoint(store: &dyn Store, tenant: &str) {
    let tenant = format!("{tenant}-cut");
    for at in [100, 200] {
        store
            .append_audit(&draft(&tenant, "egress.refused", at))
            .await
            .expect("append");
    }
    // No checkpoint yet: nothing is cut, however old.
    assert_eq!(store.cut_audit(&tenant, 10_000).await.expect("cut"), 0);
    store
        .append_audit(&draft(&tenant, CHECKPOINT, 300))
        .await
        .expect("checkpoint");
    store
        .append_audit(&draft(&tenant, "auth.refused", 400))
        .await
        .expect("append");
    // The checkpoint is not older than the age: nothing is cut.
    assert_eq!(store.cut_audit(&tenant, 300).await.expect("cut"), 0);
    assert_eq!(store.cut_audit(&tenant, 301).await.expect("cut"), 2);
    let left = store.audit_records(&tenant, 0, 0, 100).await.expect("read");
    assert_eq!(left.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
    let head = store.audit_head(&tenant).await.expect("head");
    verify(&tenant, &left, head, None).expect("a chain cut at a checkpoint verifies");
    // And the chain goes on from its head.
    let next = store
        .append_audit(&draft(&tenant, "auth.accepted", 500))
        .await
        .expect("append");
    assert_eq!((next.seq, next.prev.as_str()), (5, left[1].digest.as_str()));
}
