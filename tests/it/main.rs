//! The integration tests: one binary (one link step) with a module per area.

mod api;
mod cli_engine;
mod conformance;
mod dispatch;
mod engine;
mod pg_only;
mod raw_http;
mod relay;
mod support;
mod tls;

mod store_sqlite {
    crate::conformance_suite!(sqlite, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::engine_suite!(sqlite_engine, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::api_suite!(sqlite_api, async {
        Some((crate::support::sqlite_store().await, ()))
    });
}

mod store_postgres {
    crate::conformance_suite!(postgres, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::engine_suite!(postgres_engine, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::api_suite!(postgres_api, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
}

mod relay_suites {
    crate::relay_suite!(relay_on_sqlite, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::relay_suite!(relay_on_postgres, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
}
