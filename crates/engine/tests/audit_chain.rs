//! The hash-chained audit log on both backends: an untouched log verifies, and a row edited,
//! deleted, inserted or reordered directly in the database is named by the kind of break it
//! is, in its session's chain (`docs/engine.md` §7.6). The provenance statement of a completed
//! session verifies with the published keys and names the chain entry of its completion.

use std::{collections::BTreeMap, sync::Arc};

use rimthan_engine::{
    ActivePayload, Engine, Status, Store,
    chain::{BreakKind, verify_audit, verify_session_chain},
    provenance::{EnvelopeFailure, PublicKeys, verify_envelope},
    store::{PostgresStore, SqliteStore},
};

use crate::common::*;

/// A backend the test can also reach with plain SQL, as someone with access to the database.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn run(&self, sql: &str) {
        match self {
            Raw::Sqlite(pool) => {
                sqlx::raw_sql(sql).execute(pool).await.unwrap();
            }
            Raw::Postgres(pool) => {
                sqlx::raw_sql(sql).execute(pool).await.unwrap();
            }
        }
    }

    /// Lifts the append-only triggers, as someone who owns the database can.
    async fn unguard(&self) {
        match self {
            Raw::Sqlite(_) => {
                self.run("DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete")
                    .await
            }
            Raw::Postgres(_) => self.run("ALTER TABLE audit_log DISABLE TRIGGER USER").await,
        }
    }
}

async fn sqlite_backend() -> (Arc<dyn Store>, Raw, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("chain.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
    let raw = sqlx::SqlitePool::connect(&url).await.unwrap();
    (store, Raw::Sqlite(raw), dir)
}

async fn postgres_backend() -> Option<(Arc<dyn Store>, Raw)> {
    let Ok(url) = std::env::var(PG_ENV) else {
        eprintln!("{PG_ENV} is not set: skipping this PostgreSQL test");
        return None;
    };
    let schema = format!("t_{}", rimthan_engine::SessionId::generate());
    let store = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let raw = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.options([("search_path", schema.as_str())]))
        .await
        .unwrap();
    Some((Arc::new(store), Raw::Postgres(raw)))
}

/// The public key of a key this server never had.
fn stranger_keys() -> PublicKeys {
    let key = rimthan_engine::provenance::ProvenanceKey::from_seed(&[7; 32]).unwrap();
    PublicKeys::from_files(&[key.public_key_file()])
}

/// A session driven to completion.
async fn completed(engine: &Engine) -> ActivePayload {
    let start = start_request("claude-code");
    let mut payload = active(engine.start(start.clone(), None).await.unwrap());
    while payload.status != Status::Completed {
        payload = pass_step(engine, &payload, &start).await;
    }
    payload
}

async fn kinds_by_session(store: &dyn Store) -> BTreeMap<String, Vec<BreakKind>> {
    let report = verify_audit(store).await.unwrap();
    let mut kinds: BTreeMap<String, Vec<BreakKind>> = BTreeMap::new();
    for b in report.breaks {
        kinds
            .entry(b.session.clone().unwrap_or_default())
            .or_default()
            .push(b.kind);
    }
    for k in kinds.values_mut() {
        k.sort();
        k.dedup();
    }
    kinds
}

async fn each_way_of_tampering_is_named(store: Arc<dyn Store>, raw: Raw) {
    let engine = engine_on(store.clone()).await;
    let mut sessions = Vec::new();
    for _ in 0..5 {
        sessions.push(completed(&engine).await.session_id);
    }
    let report = verify_audit(&*store).await.unwrap();
    assert!(report.verified(), "{:?}", report.breaks);
    assert_eq!(report.chains, 5);
    assert!(report.entries >= 45, "{report:?}");

    raw.unguard().await;
    let [edited, deleted, inserted, reordered, intact] = &sessions[..] else {
        unreachable!()
    };
    raw.run(&format!(
        "UPDATE audit_log SET outcome = 'rejected' WHERE chain = '{edited}' AND chain_index = 3"
    ))
    .await;
    raw.run(&format!(
        "DELETE FROM audit_log WHERE chain = '{deleted}' AND chain_index = 4"
    ))
    .await;
    raw.run(&format!(
        "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, at) \
         VALUES ('{inserted}', 2, 'get_active_step', 'rejected', '[]', '2026-01-01T00:00:00Z')"
    ))
    .await;
    // Swap two neighbours' places in the table: every column travels with its row but the id.
    raw.run(&format!(
        "UPDATE audit_log SET id = -id WHERE chain = '{reordered}' AND chain_index = 2;
         UPDATE audit_log SET id = (SELECT -id FROM audit_log WHERE chain = '{reordered}' AND chain_index = 2)
             WHERE chain = '{reordered}' AND chain_index = 3;
         UPDATE audit_log SET id = (SELECT min(id) FROM audit_log WHERE chain = '{reordered}' AND chain_index > 3) - 1
             WHERE chain = '{reordered}' AND chain_index = 2"
    ))
    .await;

    let kinds = kinds_by_session(&*store).await;
    assert_eq!(kinds[edited.as_str()], [BreakKind::Edited], "{kinds:?}");
    assert_eq!(kinds[deleted.as_str()], [BreakKind::Deleted], "{kinds:?}");
    assert_eq!(kinds[inserted.as_str()], [BreakKind::Inserted], "{kinds:?}");
    assert_eq!(
        kinds[reordered.as_str()],
        [BreakKind::Reordered],
        "{kinds:?}"
    );
    assert!(!kinds.contains_key(intact.as_str()), "{kinds:?}");
    let one = verify_session_chain(&*store, &intact.parse().unwrap())
        .await
        .unwrap();
    assert!(one.verified() && one.chains == 1);
    let report = verify_audit(&*store).await.unwrap();
    let edit = report
        .breaks
        .iter()
        .find(|b| b.kind == BreakKind::Edited)
        .unwrap();
    assert_eq!(edit.index, Some(3), "the break names the entry: {edit:?}");

    // A forged copy of a row at a place already taken, and the tail cut off.
    raw.run(&format!(
        "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, at, chain, chain_index, \
         prev_sha256, entry_sha256) SELECT session_id, seq, tool, 'completed', codes, at, chain, \
         chain_index, prev_sha256, entry_sha256 FROM audit_log WHERE chain = '{intact}' AND chain_index = 2;
         DELETE FROM audit_log WHERE chain = '{intact}' AND chain_index = \
         (SELECT max(chain_index) FROM audit_log WHERE chain = '{intact}')"
    ))
    .await;
    let kinds = kinds_by_session(&*store).await;
    assert_eq!(
        kinds[intact.as_str()],
        [BreakKind::Deleted, BreakKind::Inserted],
        "{kinds:?}"
    );
}

/// What the chains alone cannot show, the seals name: a session's last entry cut with its head
/// row set back, a session deleted with its whole chain and head row, and a seal taken out of
/// the sequence. A seal signed by a key the verifier does not trust is a break too.
async fn each_deletion_after_a_seal_is_named(store: Arc<dyn Store>, raw: Raw) {
    let engine = engine_on(store.clone()).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(completed(&engine).await.session_id);
    }
    assert_eq!(engine.seal().await.unwrap(), Some(1));
    assert_eq!(engine.seal().await.unwrap(), None, "nothing changed since");
    sessions.push(completed(&engine).await.session_id);
    assert_eq!(engine.seal().await.unwrap(), Some(2));
    let report = verify_audit(&*store).await.unwrap();
    assert!(report.verified(), "{:?}", report.breaks);
    assert_eq!(report.seals, 2);
    let stranger = stranger_keys();
    let untrusted = rimthan_engine::chain::verify_audit_trusting(&*store, &stranger)
        .await
        .unwrap();
    assert!(
        untrusted
            .breaks
            .iter()
            .any(|b| b.chain == "seals" && b.kind == BreakKind::Edited),
        "{:?}",
        untrusted.breaks
    );

    raw.unguard().await;
    let [cut, gone, intact, late] = &sessions[..] else {
        unreachable!()
    };
    let last =
        |chain: &str| format!("(SELECT max(chain_index) FROM audit_log WHERE chain = '{chain}')");
    raw.run(&format!(
        "DELETE FROM audit_log WHERE chain = '{cut}' AND chain_index = {last};
         UPDATE audit_chains SET length = length - 1, head = (SELECT entry_sha256 FROM audit_log \
             WHERE chain = '{cut}' AND chain_index = {last}) WHERE chain = '{cut}'",
        last = last(cut)
    ))
    .await;
    raw.run(&format!(
        "DELETE FROM audit_log WHERE chain = '{gone}';
         DELETE FROM audit_chains WHERE chain = '{gone}';
         DELETE FROM sessions WHERE id = '{gone}'"
    ))
    .await;
    let kinds = kinds_by_session(&*store).await;
    assert_eq!(kinds[cut.as_str()], [BreakKind::Deleted], "{kinds:?}");
    assert_eq!(kinds[gone.as_str()], [BreakKind::Deleted], "{kinds:?}");
    assert!(!kinds.contains_key(intact.as_str()), "{kinds:?}");
    assert!(!kinds.contains_key(late.as_str()), "{kinds:?}");

    raw.run("DELETE FROM audit_seals WHERE seq = 1").await;
    let report = verify_audit(&*store).await.unwrap();
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.chain == "seals" && b.kind == BreakKind::Deleted),
        "{:?}",
        report.breaks
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_names_each_deletion_after_a_seal() {
    let (store, raw, _dir) = sqlite_backend().await;
    each_deletion_after_a_seal_is_named(store, raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_names_each_deletion_after_a_seal() {
    let Some((store, raw)) = postgres_backend().await else {
        return;
    };
    each_deletion_after_a_seal_is_named(store, raw).await;
}

/// The completing answer carries a statement the published keys verify, about the outputs the
/// session accepted, naming the audit entry of its completion; another key's is unknown.
async fn the_completing_answer_carries_a_verifiable_statement(store: Arc<dyn Store>) {
    let engine = engine_on(store.clone()).await;
    let done = completed(&engine).await;
    let file = done
        .provenance
        .as_ref()
        .expect("a completed session has provenance");
    assert_eq!(file.path, ".rimthan/workflow-session.intoto.json");
    let bytes = serde_json::to_vec(&file.content).unwrap();
    let keys = PublicKeys::from_files(&engine.provenance_keys().await.unwrap().keys);
    let statement = verify_envelope(&bytes, &keys).unwrap();
    let session = store
        .load_session(&done.session_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let subjects: Vec<_> = statement.subject.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        subjects,
        session
            .ledger
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    let chain = &statement.predicate["audit_chain"];
    let completion = store.completion_link(&session.id).await.unwrap().unwrap();
    assert_eq!(chain["sha256"], completion.sha256.as_str());
    assert_eq!(
        statement.predicate["workflow"]["id"],
        session.workflow.to_string()
    );
    assert!(statement.predicate["host_attestation_sha256"].is_string());
    let steps = statement.predicate["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| !s["validators"].as_array().unwrap().is_empty())
    );

    // Asking again (a harness that lost the answer) gives the same statement.
    let again = step_active(
        engine
            .active_step(
                rimthan_engine::ActiveStepRequest {
                    checkpoint: done.checkpoint.clone(),
                },
                None,
            )
            .await
            .unwrap(),
    );
    assert_eq!(again.provenance, done.provenance);

    let stranger = stranger_keys();
    assert_eq!(
        verify_envelope(&bytes, &stranger),
        Err(EnvelopeFailure::UnknownKeyId)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_names_each_way_of_tampering() {
    let (store, raw, _dir) = sqlite_backend().await;
    each_way_of_tampering_is_named(store, raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_names_each_way_of_tampering() {
    let Some((store, raw)) = postgres_backend().await else {
        return;
    };
    each_way_of_tampering_is_named(store, raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_completing_answer_carries_a_verifiable_statement() {
    the_completing_answer_carries_a_verifiable_statement(sqlite_memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_completing_answer_carries_a_verifiable_statement() {
    let Some(store) = postgres().await else {
        return;
    };
    the_completing_answer_carries_a_verifiable_statement(store).await;
}

/// A key given by file replaces the stored one for new statements; the stored one, named as
/// retired, stays published, so what it signed still verifies. No key is minted in the store,
/// and a key added to the store is not published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_stays_published_and_keeps_verifying_what_it_signed() {
    let store = sqlite_memory().await;
    let first = engine_on(store.clone()).await;
    let before = completed(&first).await.provenance.unwrap();
    let retired = first.provenance_keys().await.unwrap().keys;
    let rotated = rimthan_engine::provenance::ProvenanceKey::from_seed(&[9; 32]).unwrap();
    let second = Engine::with_configured_key(
        releases(),
        store.clone(),
        None,
        rotated.clone(),
        retired.clone(),
    )
    .await
    .unwrap();
    let planted = rimthan_engine::provenance::ProvenanceKey::from_seed(&[7; 32]).unwrap();
    store
        .add_provenance_key(&planted.public_key_file())
        .await
        .unwrap();
    let after = completed(&second).await.provenance.unwrap();
    let published = second.provenance_keys().await.unwrap().keys;
    assert_eq!(published.len(), 2);
    assert!(
        published
            .iter()
            .all(|k| k.key_id.as_str() != planted.key_id()),
        "a key inserted into the store is not published"
    );
    let keys = PublicKeys::from_files(&published);
    for file in [&before, &after] {
        verify_envelope(&serde_json::to_vec(&file.content).unwrap(), &keys).unwrap();
    }
    assert_eq!(after.content.signatures[0].keyid, rotated.key_id());
    assert_ne!(before.content.signatures[0].keyid, rotated.key_id());
    let custody = |file: &rimthan_engine::ProvenanceFile| {
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(&file.content.payload)
            .unwrap();
        let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        statement["predicate"]["signer"]["custody"].clone()
    };
    assert_eq!(custody(&before), "store");
    assert_eq!(custody(&after), "file");
}

#[tokio::test]
async fn a_configured_key_mints_no_seed_in_the_store() {
    let store = sqlite_memory().await;
    let key = rimthan_engine::provenance::ProvenanceKey::from_seed(&[5; 32]).unwrap();
    let engine = Engine::with_configured_key(releases(), store.clone(), None, key, Vec::new())
        .await
        .unwrap();
    assert_eq!(
        engine.key_custody(),
        rimthan_engine::provenance::KeyCustody::File
    );
    // The store lists only the configured key's public half, and holds no seed: asked for
    // one, it keeps the probe's bytes, as it does when none was ever generated.
    let stored = store.provenance_keys().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].key_id.as_str(), engine.provenance_key().key_id());
    let probe = vec![42; 32];
    assert_eq!(
        store
            .secret("provenance-ed25519-seed", probe.clone())
            .await
            .unwrap(),
        probe
    );
}
