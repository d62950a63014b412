//! `sentin8-cron serve`: the HTTP API, the ticker and the admin pages in one process.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use super::lifecycle_args::{HealthArgs, RetentionArgs};
use super::{
    AuthArgs, BusArgs, CallbackArgs, DatabaseArgs, EngineArgs, ListenerArgs, StoreUse, open_store,
    proxy_back,
};
use crate::bus::RelayConfig;
use crate::callback::{Secret, TokenSettings};
use crate::core::clock::{Clock, SystemClock};
use crate::core::metrics::Metrics;
use crate::core::snapshot::StatsSnapshot;
use crate::core::target::TargetPolicy;
use crate::daemon::Service;
use crate::server::auth::{self, AuthConfig, Authenticator, DevTokenAuthenticator};
use crate::store::redact;
use crate::util::process::shutdown_signal;

/// Serve the HTTP API and run the ticker and the outbox relay.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron serve                                   # embedded SQLite, development mode
  sentin8-cron serve --listen 127.0.0.1:0              # any free port; the bound one is printed
  SENTIN8_CRON_DATABASE_URL=postgres://sentin8_cron_service@db/cron \\
    SENTIN8_CRON_JWT_HS256_SECRET=... SENTIN8_CRON_SIGNING_KEY_FILE=key.pem \\
    sentin8-cron serve --listen 0.0.0.0:8080 --log-format json")]
pub struct Args {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub listener: ListenerArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub callback: CallbackArgs,
    #[command(flatten)]
    pub bus: BusArgs,
    #[command(flatten)]
    pub retention: RetentionArgs,
    #[command(flatten)]
    pub health: HealthArgs,
    /// Development mode only: accept this admin token (at least 32 characters) instead of a
    /// random one per process, so a restart does not force re-pasting it
    #[arg(long, env = "SENTIN8_CRON_DEV_TOKEN", value_name = "TOKEN", hide_env_values = true, value_parser = Secret::parse)]
    pub dev_token: Option<Secret>,
    /// Jobs of one environment that may wait their turn (backfilled occurrences); a backfill
    /// that would leave more is refused with 409
    #[arg(long, env = "SENTIN8_CRON_MAX_WAITING_JOBS", value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_waiting_jobs: u32,
    /// Export each attempt's spans (claim, hand-off, call, record) over OTLP/HTTP to this
    /// collector (spans go to its /v1/traces); OTEL_EXPORTER_OTLP_ENDPOINT when unset. Off
    /// when neither is set.
    #[arg(long, env = "SENTIN8_CRON_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

/// The OTLP endpoint: the setting, else OpenTelemetry's own variable
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, given as `standard`); an http(s) URL.
fn otlp_endpoint(
    setting: Option<&str>,
    standard: Option<&str>,
) -> anyhow::Result<Option<url::Url>> {
    let Some(text) = setting
        .or(standard)
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return Ok(None);
    };
    let url = url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--otlp-endpoint (SENTIN8_CRON_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) must \
                 be an http(s) URL with a host, e.g. http://127.0.0.1:4318"
            )
        })?;
    Ok(Some(url))
}

/// How often the counts health and metrics report are recomputed (at most once per tick
/// interval when that is shorter).
const STATS_REFRESH: std::time::Duration = std::time::Duration::from_secs(15);

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    // Every setting is checked before anything is opened or bound.
    let auth_config = AuthConfig::from_args(&args.auth)?;
    let dev_mode = proxy_back::dev_mode(args.database.url(), auth_config.is_some())?;
    let dispatch = proxy_back::config(&args.callback, dev_mode)?;
    let fixed_dev = match Secret::given(&args.dev_token) {
        Some(_) if !dev_mode => anyhow::bail!(
            "--dev-token (SENTIN8_CRON_DEV_TOKEN) is for development mode only (the embedded \
             store without authentication)"
        ),
        Some(token) => Some(
            DevTokenAuthenticator::fixed(token.expose())
                .context("--dev-token (SENTIN8_CRON_DEV_TOKEN)")?,
        ),
        None => None,
    };
    let relay = RelayConfig::try_from(&args.bus)?;
    let listen = args.listener.listen.clone();
    let url = args.database.url().to_owned();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The addresses are bound before the database is opened or anything is printed: a taken
    // port stops `serve` before it migrates, generates a token or prints a URL.
    let tls = match (&args.listener.tls_cert, &args.listener.tls_key) {
        (Some(cert), Some(key)) => Some(crate::server::tls::rustls_config(cert, key)?),
        _ => None,
    };
    let listener = bind(&listen, "")?;
    let address = listener.local_addr()?;
    let metrics_listener = match &args.listener.metrics_listen {
        Some(metrics_listen) => Some(bind(metrics_listen, " for /metrics")?),
        None => None,
    };
    // The signing key is loaded (or, in development mode, created) before the store opens.
    let no_token = dispatch.token == TokenSettings::None;
    let proxy = proxy_back::build(dispatch, &url, clock.clone())?;
    // The embedded database's file (absolute), and whether this start creates it.
    let embedded_file = crate::store::sqlite_file(&url).map(|path| {
        let existed = path.exists();
        (path, existed)
    });
    let store = open_store(&args.database, StoreUse::Serve).await?;
    match &embedded_file {
        Some((path, true)) => {
            tracing::info!(path = %path.display(), "embedded database {}", path.display());
        }
        Some((path, false)) => tracing::info!(
            path = %path.display(),
            "created a new embedded database at {}",
            path.display()
        ),
        None => {}
    }
    let capabilities = store.capabilities();
    if capabilities.rls_bypassed {
        tracing::warn!(
            "connected as a role that BYPASSES row-level security: tenant isolation rests on the \
             application alone; connect as sentin8_cron_service in production"
        );
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    super::recompute_under_zone_rules(store.as_ref(), clock.as_ref()).await;

    let http = reqwest::Client::builder()
        .build()
        .context("cannot build the HTTP client for the JWKS")?;
    let auth: Arc<dyn Authenticator> = match (auth_config, fixed_dev) {
        (Some(config), _) => auth::build(&config, http, clock.clone()),
        (None, Some(dev)) if capabilities.embedded => {
            tracing::warn!(
                "DEV MODE: no authentication is configured; the admin token is the one in \
                 SENTIN8_CRON_DEV_TOKEN. Configure --jwks-url (SENTIN8_CRON_JWKS_URL) or \
                 --jwt-hs256-secret (SENTIN8_CRON_JWT_HS256_SECRET) before exposing this server"
            );
            writeln!(out, "DEV MODE: no authentication configured.")?;
            writeln!(
                out,
                "Admin token: the one in SENTIN8_CRON_DEV_TOKEN (--dev-token)."
            )?;
            out.flush()?;
            Arc::new(dev)
        }
        (None, None) if capabilities.embedded => {
            let (dev, token) = DevTokenAuthenticator::generate();
            tracing::warn!(
                "DEV MODE: no authentication is configured; a one-time admin token was generated \
                 and printed on standard output. Configure --jwks-url (SENTIN8_CRON_JWKS_URL) or \
                 --jwt-hs256-secret (SENTIN8_CRON_JWT_HS256_SECRET) before exposing this server"
            );
            writeln!(out, "DEV MODE: no authentication configured.")?;
            writeln!(
                out,
                "Admin token for this process only (printed once): {token}"
            )?;
            writeln!(
                out,
                "  curl -H 'Authorization: Bearer {token}' {}://{address}/v1/health",
                if tls.is_some() { "https" } else { "http" }
            )?;
            out.flush()?;
            Arc::new(dev)
        }
        (None, _) => anyhow::bail!(
            "no authentication configured: set --jwks-url (SENTIN8_CRON_JWKS_URL, with \
             SENTIN8_CRON_JWT_ISSUER and SENTIN8_CRON_JWT_AUDIENCE) or --jwt-hs256-secret \
             (SENTIN8_CRON_JWT_HS256_SECRET); dev mode is only available on the embedded SQLite \
             store"
        ),
    };

    if no_token {
        tracing::info!(
            "no M2M token source configured: proxy-back calls carry only their signature \
             (set SENTIN8_CRON_M2M_TOKEN_URL/_CLIENT_ID/_CLIENT_SECRET for a bearer token too)"
        );
    }
    let jwks = proxy.signer.jwks();
    let target_policy: Arc<dyn TargetPolicy> = Arc::new(proxy.config.egress.clone());
    let job_timeout = proxy.config.job_timeout;
    let dispatcher = Arc::new(proxy.dispatcher);

    let sink = crate::bus::sink_for(&relay.bus, clock.clone())?;
    tracing::info!(bus = relay.bus.kind(), "outbox relay configured");

    if let Some(metrics_listener) = &metrics_listener {
        let metrics_address = metrics_listener.local_addr()?;
        tracing::info!(%metrics_address, "metrics served on http://{metrics_address}/metrics only");
        writeln!(out, "metrics: http://{metrics_address}/metrics")?;
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        %address,
        backend = capabilities.backend,
        database = %redact(&url),
        tls = tls.is_some(),
        "sentin8-cron {} serving on {scheme}://{address}",
        env!("CARGO_PKG_VERSION")
    );
    writeln!(out, "listening on {scheme}://{address}")?;
    writeln!(
        out,
        "admin pages: {scheme}://{address}{}/overview",
        crate::server::admin::UI_PREFIX
    )?;
    out.flush()?;

    let metrics = Arc::new(Metrics::with_env_breakdown(
        args.listener.metrics_env_breakdown as usize,
    ));
    let standard = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok();
    let spans = otlp_endpoint(args.otlp_endpoint.as_deref(), standard.as_deref())?.map(|endpoint| {
        tracing::info!(endpoint = %crate::util::url::redact(endpoint.as_str()), "exporting spans over OTLP/HTTP");
        crate::telemetry::OtlpExporter::start(&endpoint, &address.to_string(), metrics.clone())
    });
    let service = Service {
        store,
        auth,
        dispatcher,
        clock,
        engine: args.engine.engine_config(job_timeout),
        metrics,
        tls,
        drain: args.listener.drain_timeout,
        run_ticker: true,
        relay: Some((sink, relay.options)),
        extra_routes: axum::Router::new(),
        limits: args.listener.limits(),
        stats: Arc::new(StatsSnapshot::new(
            args.engine.tick_interval.min(STATS_REFRESH),
        )),
        metrics_listener,
        target_policy,
        jwks: Some(jwks),
        // Calls without a token source carry their signature: a configuration like any other,
        // not a reason for health to say `degraded`.
        health: args.health.rules(),
        retention: Some(args.retention.config()),
        waiting_cap: u64::from(args.max_waiting_jobs),
        spans,
    };
    service.run(listener, shutdown_signal()).await?;
    tracing::info!("stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

/// Binds `address`; a bare port (`8081`, `:8081`) gets a hint, as an address needs a host.
fn bind(address: &str, purpose: &str) -> anyhow::Result<std::net::TcpListener> {
    let port = address.strip_prefix(':').unwrap_or(address);
    if port.parse::<u16>().is_ok() {
        anyhow::bail!(
            "cannot listen on {address:?}{purpose}: an address needs a host, e.g. \
             127.0.0.1:{port} (this machine only) or 0.0.0.0:{port} (every interface)"
        );
    }
    std::net::TcpListener::bind(address)
        .with_context(|| format!("cannot listen on {address}{purpose}"))
}

#[cfg(test)]
mod tests {
    use super::otlp_endpoint;

    #[test]
    fn the_otlp_endpoint_is_the_setting_else_opentelemetrys_variable() {
        let url = |setting, standard| {
            otlp_endpoint(setting, standard)
                .unwrap()
                .map(|u| u.to_string())
        };
        assert_eq!(url(None, None), None);
        assert_eq!(url(Some(" "), None), None);
        assert_eq!(
            url(None, Some("http://collector:4318")),
            Some("http://collector:4318/".to_owned())
        );
        assert_eq!(
            url(Some("https://otel.internal"), Some("http://collector:4318")),
            Some("https://otel.internal/".to_owned())
        );
        for bad in ["collector:4318", "grpc://collector:4317", "http://"] {
            let err = otlp_endpoint(Some(bad), None).unwrap_err().to_string();
            assert!(err.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{bad}: {err}");
        }
    }
}
