//! The shipped migration example, rehearsed with psql on the PostgreSQL the tests use
//! (`RIMTHAN_TEST_DATABASE_URL`; skipped without it): the order its change describes (up,
//! the old release still inserting, up again), `verify.sql` failing psql whenever a phase is not
//! proven, a round trip whose schema diff is the declared rollback copy alone and whose next up
//! restores what that copy kept, up giving up on a held lock within its budget, a rerun
//! rebuilding an index left invalid, and down refusing while a writer of the new release
//! inserts, so that no insert fails and no row it wrote is lost.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::repo_root;

/// The newest example; older versions stay as published.
const EXAMPLE: &str = "registry/source/workflows/schema-migration/1.4.0/examples/migration";

/// `public.orders` as release 4.18 of the example's application knows it, with sparse ids.
const ORDERS: &str = "CREATE TABLE public.orders (
        id bigint PRIMARY KEY,
        app_client_id bigint,
        created_at timestamptz NOT NULL DEFAULT now());
    INSERT INTO public.orders (id, app_client_id)
    SELECT g * 7919, CASE WHEN g % 3 = 0 THEN g END FROM generate_series(1, 30000) AS g;";

fn file(name: &str) -> String {
    repo_root()
        .join(EXAMPLE)
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A database of its own, dropped when the test ends.
struct Scratch {
    admin: String,
    url: String,
    name: String,
}

impl Scratch {
    fn create() -> Option<Scratch> {
        let admin = std::env::var("RIMTHAN_TEST_DATABASE_URL").ok()?;
        let name = format!("rimthan_migration_{}_{}", std::process::id(), rand_suffix());
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        let url = format!("{base}/{name}");
        let created = run_psql(&admin, &["-c", &format!("CREATE DATABASE {name}")]);
        assert!(created.status.success(), "{}", text(&created.stderr));
        let db = Scratch { admin, url, name };
        db.sql(ORDERS);
        Some(db)
    }

    fn sql(&self, sql: &str) -> String {
        let out = run_psql(&self.url, &["-Atc", sql]);
        assert!(out.status.success(), "{sql}: {}", text(&out.stderr));
        text(&out.stdout).trim().to_owned()
    }

    /// Runs one example file; `phase` for verify.sql.
    fn run(&self, name: &str, phase: Option<&str>) -> Output {
        self.run_with(name, phase, &[])
    }

    /// Runs one example file with more psql variables (`kept=3` for verify.sql after-down).
    fn run_with(&self, name: &str, phase: Option<&str>, vars: &[&str]) -> Output {
        let path = file(name);
        let mut args = vec!["-v".to_owned(), "ON_ERROR_STOP=1".to_owned()];
        if let Some(phase) = phase {
            args.extend(["-v".to_owned(), format!("phase={phase}")]);
        }
        for var in vars {
            args.extend(["-v".to_owned(), (*var).to_owned()]);
        }
        args.extend(["-f".to_owned(), path]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_psql(&self.url, &args)
    }

    fn ok(&self, name: &str, phase: Option<&str>) -> String {
        self.ok_with(name, phase, &[])
    }

    fn ok_with(&self, name: &str, phase: Option<&str>, vars: &[&str]) -> String {
        let out = self.run_with(name, phase, vars);
        assert!(
            out.status.success(),
            "{name} {phase:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// The schema as pg_dump prints it, without the rollback copy down.sql keeps on purpose.
    fn schema(&self) -> String {
        let out = Command::new("pg_dump")
            .args([
                "--schema-only",
                "--no-owner",
                "--exclude-table=public.orders_sales_channel_rollback",
                &self.url,
            ])
            .output()
            .expect("pg_dump runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            // Comments, and the random key pg_dump 15.14+ fences a dump with.
            .filter(|l| !l.starts_with("--") && !l.starts_with("\\restrict"))
            .filter(|l| !l.starts_with("\\unrestrict"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        run_psql(
            &self.admin,
            &[
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ],
        );
    }
}

/// A random suffix: std's hasher keys are random per process and per `RandomState`.
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 1_000_000
}

fn run_psql(url: &str, args: &[&str]) -> Output {
    Command::new("psql")
        .args(["-X", "-q", url])
        .args(args)
        .output()
        .expect("psql runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `kept=N` count verify.sql's before-down C8 prints, for after-down.
fn kept(before_down: &str) -> String {
    let at = before_down.find("kept=").expect("C8 prints kept=N") + "kept=".len();
    before_down[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

fn failed_with(out: &Output, stderr_has: &str) {
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(stderr_has),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_example_migration_runs_in_the_order_its_change_describes_and_round_trips() {
    let Some(db) = Scratch::create() else { return };
    let before = db.schema();
    let out = db.ok("verify.sql", Some("before-up"));
    assert!(out.contains("C1 t") && out.contains("C2 t"), "{out}");

    db.ok("up.sql", None);
    // The old release still inserts app orders, as 'web', until it is gone.
    db.sql("INSERT INTO public.orders (id, app_client_id) VALUES (1, 11), (2, 12)");
    let early = db.run("verify.sql", Some("after-up"));
    assert!(
        text(&early.stdout).contains("C5 f 2 app orders"),
        "{early:?}"
    );
    failed_with(&early, "check failed");
    // The second run, once the old release is gone, finishes the backfill.
    db.ok("up.sql", None);
    let out = db.ok("verify.sql", Some("after-up"));
    for check in ["C3 t", "C4 t", "C5 t"] {
        assert!(out.contains(check), "{out}");
    }

    // The new release records a channel nothing else can derive.
    let phone = 7919 * 4;
    db.sql(&format!(
        "UPDATE public.orders SET sales_channel = 'phone' WHERE id = {phone}"
    ));
    // The new release is gone (no session of it): before-down holds and counts what to keep.
    let out = db.ok("verify.sql", Some("before-down"));
    assert!(out.contains("C7 t") && out.contains("C8 t kept=1"), "{out}");
    let kept = format!("kept={}", kept(&out));
    db.ok("down.sql", None);
    db.ok("down.sql", None);
    let out = db.ok_with("verify.sql", Some("after-down"), &[&kept]);
    assert!(out.contains("C6 t"), "{out}");
    // after-down needs the count, and fails on a copy smaller than it.
    failed_with(
        &db.run("verify.sql", Some("after-down")),
        "no kept count given",
    );
    let out = db.run_with("verify.sql", Some("after-down"), &["kept=2"]);
    assert!(text(&out.stdout).contains("C6 f"), "{out:?}");
    failed_with(&out, "check failed");
    assert_eq!(db.schema(), before, "down.sql restores the schema");
    assert_eq!(
        db.sql("SELECT count(*) FROM public.orders_sales_channel_rollback"),
        "1"
    );

    // Up after a rollback brings the kept channel back.
    db.ok("up.sql", None);
    assert_eq!(
        db.sql(&format!(
            "SELECT sales_channel FROM public.orders WHERE id = {phone}"
        )),
        "phone"
    );
    db.ok("verify.sql", Some("after-up"));
}

#[test]
fn a_rerun_of_up_rebuilds_an_index_a_failed_concurrent_build_left_invalid() {
    let Some(db) = Scratch::create() else { return };
    db.ok("up.sql", None);
    // What a cancelled CREATE INDEX CONCURRENTLY leaves behind.
    db.sql(
        "UPDATE pg_index SET indisvalid = false \
         WHERE indexrelid = 'public.orders_sales_channel_created_at_idx'::regclass",
    );
    let out = db.run("verify.sql", Some("after-up"));
    assert!(text(&out.stdout).contains("C4 f index INVALID"), "{out:?}");
    failed_with(&out, "check failed");
    db.ok("up.sql", None);
    let out = db.ok("verify.sql", Some("after-up"));
    assert!(out.contains("C4 t index valid"), "{out}");
}

/// order-service 4.19 inserting orders through the new column, one per transaction, as its
/// pool does; it exits non-zero when one insert fails.
const WRITER: &str = "order-service/4.19.0";
const WRITES: i64 = 500;
const FIRST_WRITTEN: i64 = 1_000_000_000;

fn start_writer(db: &Scratch) -> Child {
    let child = Command::new("psql")
        .env("PGAPPNAME", WRITER)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &db.url, "-c"])
        .arg(format!(
            "DO $$ BEGIN FOR i IN 1..{WRITES} LOOP \
             INSERT INTO public.orders (id, app_client_id, sales_channel) \
             VALUES ({FIRST_WRITTEN} + i, i, CASE WHEN i % 2 = 0 THEN 'phone' ELSE 'partner' END); \
             COMMIT; PERFORM pg_sleep(0.01); END LOOP; END $$"
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.sql(&format!(
        "SELECT count(*) FROM public.orders WHERE id > {FIRST_WRITTEN}"
    )) == "0"
    {
        assert!(Instant::now() < deadline, "the writer never inserted");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn down_refuses_while_the_new_release_writes_so_no_insert_fails_and_no_row_is_lost() {
    let Some(db) = Scratch::create() else { return };
    db.ok("up.sql", None);
    db.ok("up.sql", None);
    db.ok("verify.sql", Some("after-up"));

    let writer = start_writer(&db);
    // before-down sees the writer's session and fails psql.
    let out = db.run("verify.sql", Some("before-down"));
    assert!(
        text(&out.stdout).contains("C7 f") && text(&out.stdout).contains("4.19"),
        "{out:?}"
    );
    failed_with(&out, "check failed");
    // down.sql run anyway, while the writer inserts: it refuses inside its transaction and
    // changes nothing, within its lock budget.
    let started = Instant::now();
    let out = db.run("down.sql", None);
    failed_with(&out, "still connected");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        db.sql(
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'orders' AND column_name = 'sales_channel'"
        ),
        "1",
        "the column the writer needs is still there"
    );
    let finished = writer.wait_with_output().expect("the writer ends");
    assert!(
        finished.status.success(),
        "an insert of the new release failed: {}",
        text(&finished.stderr)
    );
    assert_eq!(
        db.sql(&format!(
            "SELECT count(*) FROM public.orders WHERE id > {FIRST_WRITTEN}"
        )),
        WRITES.to_string(),
        "every insert of the new release committed"
    );

    // The writer is gone: before-down holds, down runs, and the copy keeps every row it wrote.
    let out = db.ok("verify.sql", Some("before-down"));
    assert!(out.contains("C7 t"), "{out}");
    assert_eq!(kept(&out), WRITES.to_string(), "{out}");
    let kept = format!("kept={}", kept(&out));
    db.ok("down.sql", None);
    db.ok_with("verify.sql", Some("after-down"), &[&kept]);
    assert_eq!(
        db.sql(&format!(
            "SELECT count(*) FROM public.orders_sales_channel_rollback r \
             JOIN public.orders o ON o.id = r.order_id \
             WHERE o.id > {FIRST_WRITTEN} \
               AND r.sales_channel = CASE WHEN (o.id - {FIRST_WRITTEN}) % 2 = 0 \
                                          THEN 'phone' ELSE 'partner' END"
        )),
        WRITES.to_string(),
        "the rollback copy holds every channel the new release wrote"
    );
}

#[test]
fn verify_fails_psql_without_a_phase_with_an_unknown_one_and_for_a_phase_not_reached() {
    let Some(db) = Scratch::create() else { return };
    failed_with(&db.run("verify.sql", None), "no phase given");
    failed_with(&db.run("verify.sql", Some("after-lunch")), "unknown phase");
    let out = db.run("verify.sql", Some("after-up"));
    assert!(text(&out.stdout).contains("C3 f column missing"), "{out:?}");
    failed_with(&out, "check failed");
}

/// A transaction holding `public.orders`, as a long report query would.
struct Holder {
    child: Child,
    url: String,
}

const HOLDER: &str = "rimthan-lock-holder";

impl Holder {
    fn start(db: &Scratch) -> Holder {
        let child = Command::new("psql")
            .env("PGAPPNAME", HOLDER)
            .args(["-X", "-q", &db.url, "-c"])
            .arg(
                "BEGIN; LOCK TABLE public.orders IN ACCESS SHARE MODE; \
                 SELECT pg_sleep(60); COMMIT;",
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while db.sql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'orders' AND l.mode = 'AccessShareLock' AND l.granted \
             AND l.pid <> pg_backend_pid()",
        ) == "0"
        {
            assert!(Instant::now() < deadline, "the holder never took its lock");
            std::thread::sleep(Duration::from_millis(50));
        }
        Holder {
            child,
            url: db.url.clone(),
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // The server runs the sleep on whether or not its client is alive: end the backend.
        run_psql(
            &self.url,
            &[
                "-c",
                &format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = '{HOLDER}'"
                ),
            ],
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn up_gives_up_within_its_lock_budget_behind_a_held_lock_and_reruns_cleanly() {
    let Some(db) = Scratch::create() else { return };
    let holder = Holder::start(&db);
    let started = Instant::now();
    let out = db.run("up.sql", None);
    let waited = started.elapsed();
    failed_with(&out, "lock timeout");
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert_eq!(
        db.sql(
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'orders' AND column_name = 'sales_channel'"
        ),
        "0",
        "nothing of the migration is left half done"
    );
    drop(holder);
    db.ok("up.sql", None);
    db.ok("verify.sql", Some("after-up"));
}
