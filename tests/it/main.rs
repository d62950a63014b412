//! The integration tests: one binary (one link step) with a module per area.

mod conformance;
mod dispatch;
mod pg_only;
mod raw_http;
mod relay;
mod support;

conformance_suite!(sqlite, async {
    Some((crate::support::sqlite_store().await, ()))
});

conformance_suite!(postgres, async {
    let db = crate::support::PgTestDb::create().await?;
    Some((db.dyn_store(), db))
});

relay_suite!(relay_on_sqlite, async {
    Some((crate::support::sqlite_store().await, ()))
});

relay_suite!(relay_on_postgres, async {
    let db = crate::support::PgTestDb::create().await?;
    Some((db.dyn_store(), db))
});
