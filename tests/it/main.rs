//! The integration tests: one binary (one link step) with a module per area.

mod admin;
mod admin_browser;
mod admin_oncall;
mod admin_pages;
mod api;
mod architecture;
mod cli;
mod cli_api;
mod cli_engine;
mod cli_lifecycle;
mod conformance;
mod cron_props;
mod deploy_files;
mod dispatch;
mod egress;
mod engine;
mod enroll;
mod event_schemas;
mod health_probe;
mod lifecycle;
mod listener;
mod nats_cluster;
mod nats_drill;
mod nul;
mod pg_failover;
mod pg_instances;
mod pg_only;
mod pg_purge_floor;
mod rate_limits;
mod raw_http;
mod readme_examples;
mod readme_install;
mod readme_tour;
mod registration;
mod relay;
mod relay_cluster;
mod relay_sinks;
mod schema_checks;
mod schema_snapshot;
mod secret_scan;
mod signed_calls;
mod sim;
mod sqlite_readers;
mod stalling_proxy;
mod support;
mod target_examples;
mod tls;
mod tz_restart;
mod webdriver;

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
    crate::cli_api_suite!(sqlite_cli_api, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::enroll_suite!(sqlite_enroll, async {
        let (store, url, dir) = crate::support::sqlite_file_store().await;
        let owner_url = url.clone();
        Some((
            crate::enroll::Db {
                store,
                url,
                owner_url,
            },
            dir,
        ))
    });
    crate::admin_suite!(sqlite_admin, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::nul_suite!(sqlite_nul, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::lifecycle_suite!(sqlite_lifecycle, async {
        Some((crate::support::sqlite_store().await, ()))
    });
    crate::tz_restart_suite!(
        sqlite_tz_restart,
        async {
            let (store, url, dir) = crate::support::sqlite_file_store().await;
            let owner_url = url.clone();
            Some((
                crate::enroll::Db {
                    store,
                    url,
                    owner_url,
                },
                dir,
            ))
        },
        async { Some((crate::support::sqlite_store().await, ())) }
    );
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
    crate::cli_api_suite!(postgres_cli_api, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::enroll_suite!(postgres_enroll, async {
        let db = crate::support::PgTestDb::create().await?;
        let target = crate::enroll::Db {
            store: db.dyn_store(),
            url: db.service_url.clone(),
            owner_url: db.owner_url(),
        };
        Some((target, db))
    });
    crate::admin_suite!(postgres_admin, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::nul_suite!(postgres_nul, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::lifecycle_suite!(postgres_lifecycle, async {
        let db = crate::support::PgTestDb::create().await?;
        Some((db.dyn_store(), db))
    });
    crate::tz_restart_suite!(
        postgres_tz_restart,
        async {
            let db = crate::support::PgTestDb::create().await?;
            let target = crate::enroll::Db {
                store: db.dyn_store(),
                url: db.service_url.clone(),
                owner_url: db.owner_url(),
            };
            Some((target, db))
        },
        async {
            let db = crate::support::PgTestDb::create().await?;
            Some((db.dyn_store(), db))
        }
    );
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

/// The services some suites need: each is reachable, or its skip is recorded and announced
/// (never silent), and a required one that is missing fails here too.
mod skips {
    use crate::support::{Needs, PgTestDb, TestBus, skipped, unavailable};

    #[tokio::test]
    async fn postgresql_is_reachable_or_its_suites_say_they_skip() {
        let before = skipped(Needs::Postgres);
        if PgTestDb::create().await.is_none() {
            assert!(unavailable(Needs::Postgres).is_some());
            assert!(skipped(Needs::Postgres) > before);
            assert!(!Needs::Postgres.required());
        }
    }

    #[tokio::test]
    async fn nats_is_reachable_or_its_suites_say_they_skip() {
        let before = skipped(Needs::Nats);
        if TestBus::create().await.is_none() {
            assert!(unavailable(Needs::Nats).is_some());
            assert!(skipped(Needs::Nats) > before);
            assert!(!Needs::Nats.required());
        }
    }
}
