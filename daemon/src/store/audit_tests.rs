//! The chain against tampering: a random search over chains and edits, removals, reorders,
//! truncations and forged checkpoints, each of which verification must refuse, naming the
//! first record that does not hold; and the cuts retention makes, which it must accept.

use super::*;

fn draft(tenant: &str, kind: &str, n: u64) -> AuditDraft {
    AuditDraft {
        tenant: tenant.to_owned(),
        at_ms: 1_700_000_000_000 + i64::try_from(n).unwrap_or(0),
        kind: kind.to_owned(),
        actor: format!("actor-{n}"),
        subject: format!("subject-{n}"),
        reason: "because".to_owned(),
        details: format!("{{\"n\":{n}}}"),
    }
}

/// A chain of `len` records, every `checkpoint_every`th a checkpoint.
fn chain(tenant: &str, len: u64, checkpoint_every: u64) -> Vec<AuditRecord> {
    let mut records: Vec<AuditRecord> = Vec::new();
    for seq in 1..=len {
        let prev = records
            .last()
            .map_or(GENESIS.to_owned(), |last| last.digest.clone());
        let kind = if seq % checkpoint_every == 0 {
            CHECKPOINT
        } else {
            "approval.decided"
        };
        records.push(AuditRecord::chain(&draft(tenant, kind, seq), seq, &prev));
    }
    records
}

#[test]
fn an_untouched_chain_verifies_and_names_its_head() {
    let records = chain("acme", 10, 4);
    let verified = verify(
        "acme",
        &records,
        Some((10, records[9].digest.clone())),
        Some(&records[9].digest),
    )
    .unwrap();
    assert_eq!(
        verified,
        Verified {
            records: 10,
            first: 1,
            last: 10,
            head: records[9].digest.clone()
        }
    );
    assert_eq!(verify("acme", &[], None, None).unwrap().records, 0);
}

#[test]
fn fields_cannot_be_shifted_between_each_other() {
    // The same bytes split differently between two fields digest differently.
    let mut a = draft("t", "k", 1);
    a.actor = "ab".into();
    a.subject = "c".into();
    let mut b = a.clone();
    b.actor = "a".into();
    b.subject = "bc".into();
    assert_ne!(
        AuditRecord::chain(&a, 1, GENESIS).digest,
        AuditRecord::chain(&b, 1, GENESIS).digest
    );
}

#[test]
fn retention_cuts_at_a_checkpoint_and_nowhere_else() {
    let records = chain("acme", 12, 4);
    // Cut before record 8 (a checkpoint): accepted.
    let head = Some((12, records[11].digest.clone()));
    let verified = verify("acme", &records[7..], head.clone(), None).unwrap();
    assert_eq!((verified.first, verified.last), (8, 12));
    // Cut before record 7 (not one): refused.
    assert_eq!(
        verify("acme", &records[6..], head, None),
        Err(Broken::Headless { seq: 7 })
    );
}

#[test]
fn a_truncated_tail_is_caught_by_the_head_row_or_the_kept_head() {
    let records = chain("acme", 6, 100);
    assert_eq!(
        verify(
            "acme",
            &records[..4],
            Some((6, records[5].digest.clone())),
            None
        ),
        Err(Broken::Truncated { last: 4, head: 6 })
    );
    // The head row rewritten too: only the digest the operator kept tells.
    let kept = records[5].digest.clone();
    assert_eq!(
        verify(
            "acme",
            &records[..4],
            Some((4, records[3].digest.clone())),
            Some(&kept)
        ),
        Err(Broken::MissingHead {
            expected: kept,
            last: 4
        })
    );
}

#[test]
fn another_tenants_record_is_refused() {
    let mut records = chain("acme", 3, 100);
    records.push(AuditRecord::chain(
        &draft("other", "x", 4),
        4,
        &records[2].digest,
    ));
    assert!(matches!(
        verify("acme", &records, None, None),
        Err(Broken::Foreign { seq: 4, .. })
    ));
}

/// One way to tamper with a chain, and the first record verification must then name.
fn tamper(records: &mut Vec<AuditRecord>, rng: &mut fastrand::Rng) -> Option<u64> {
    let len = records.len();
    let at = rng.usize(..len);
    let seq = records[at].seq;
    match rng.u8(..8) {
        // Edit one field of one record, keeping its digest.
        0 => {
            let record = &mut records[at];
            match rng.u8(..6) {
                0 => record.actor.push('!'),
                1 => record.reason = "edited".into(),
                2 => record.details = "{}".into(),
                3 => record.at_ms += 1,
                4 => record.kind = CHECKPOINT.into(),
                _ => record.subject.clear(),
            }
            // Some edits leave the field as it was (a kind that already was a checkpoint).
            (record.expected_digest() != record.digest).then_some(seq)
        }
        // Edit a record and recompute its digest: its successor no longer links.
        1 => {
            let record = &mut records[at];
            record.reason.push_str(" (amended)");
            record.digest = record.expected_digest();
            (at + 1 < len).then(|| records[at + 1].seq)
        }
        // Remove one record in the middle.
        2 if at > 0 && at + 1 < len => {
            records.remove(at);
            Some(records[at].seq)
        }
        // Swap two neighbours.
        3 if at > 0 && at + 1 < len => {
            records.swap(at, at + 1);
            Some(records[at].seq)
        }
        // Duplicate a record.
        4 => {
            let copy = records[at].clone();
            records.insert(at + 1, copy);
            Some(records[at + 1].seq)
        }
        // Remove a prefix that does not end at a checkpoint.
        5 if at > 0 && records[at].kind != CHECKPOINT => {
            records.drain(..at);
            Some(records[0].seq)
        }
        // Renumber a record (and re-digest it): a gap or a repeat.
        6 if at > 0 => {
            let record = &mut records[at];
            record.seq += 1 + rng.u64(..3);
            record.digest = record.expected_digest();
            Some(record.seq)
        }
        // Remove a prefix and pass the new first record off as a checkpoint.
        7 if at > 0 && records[at].kind != CHECKPOINT => {
            records.drain(..at);
            let record = &mut records[0];
            record.kind = CHECKPOINT.into();
            // Without re-digesting: caught as an edit.
            Some(record.seq)
        }
        _ => None,
    }
}

#[test]
fn every_tampering_is_refused_at_its_first_bad_record() {
    let cases: u64 = std::env::var("AIRLOCK_AUDIT_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut refused = 0;
    for case in 0..cases {
        let len = rng.u64(2..40);
        let mut records = chain("acme", len, rng.u64(2..10));
        let original = records.clone();
        let Some(first_bad) = tamper(&mut records, &mut rng) else {
            continue;
        };
        let result = verify(
            "acme",
            &records,
            Some((len, original[original.len() - 1].digest.clone())),
            None,
        );
        let named = match &result {
            Err(
                Broken::Edited { seq }
                | Broken::Gap { seq, .. }
                | Broken::Unlinked { seq }
                | Broken::Headless { seq },
            ) => Some(*seq),
            Err(
                Broken::Truncated { .. }
                | Broken::MissingHead { .. }
                | Broken::Foreign { .. }
                | Broken::BeyondHead { .. }
                | Broken::HeadMismatch { .. },
            ) => None,
            Ok(_) => panic!(
                "seed {seed}, case {case}: a tampered chain verified:\n{records:#?}\nwas:\n{original:#?}"
            ),
        };
        if let Some(named) = named {
            assert_eq!(
                named, first_bad,
                "seed {seed}, case {case}: {result:?}\n{records:#?}"
            );
        }
        refused += 1;
    }
    assert!(
        refused > cases / 2,
        "seed {seed}: only {refused} tamperings tried"
    );
}

#[test]
fn records_forged_past_the_head_or_a_replaced_last_record_are_caught_by_the_head_row() {
    let records = chain("acme", 5, 100);
    // Two more records, linked and digested right, appended outside the daemon.
    let mut longer = records.clone();
    for seq in 6..=7 {
        let prev = longer[longer.len() - 1].digest.clone();
        longer.push(AuditRecord::chain(
            &draft("acme", "auth.accepted", seq),
            seq,
            &prev,
        ));
    }
    assert_eq!(
        verify("acme", &longer, Some((5, records[4].digest.clone())), None),
        Err(Broken::BeyondHead { head: 5, last: 7 })
    );
    // The last record replaced by one digested right.
    let mut replaced = records.clone();
    replaced[4].reason = "nothing happened".into();
    replaced[4].digest = replaced[4].expected_digest();
    assert_eq!(
        verify(
            "acme",
            &replaced,
            Some((5, records[4].digest.clone())),
            None
        ),
        Err(Broken::HeadMismatch { seq: 5 })
    );
}
