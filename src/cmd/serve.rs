//! `sentin8-cron serve`: the HTTP API, the ticker and the admin pages in one process.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;

use super::{DatabaseArgs, EngineArgs, StoreUse, open_store, parse_duration_arg};
use crate::callback::{DispatchConfig, HttpDispatcher, TokenSettings};
use crate::core::clock::{Clock, SystemClock};
use crate::core::metrics::Metrics;
use crate::daemon::Service;
use crate::server::auth::{self, AuthConfig, Authenticator, DevTokenAuthenticator};
use crate::store::redact;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Serve the HTTP API and run the ticker.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, env = "SENTIN8_CRON_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, env = "SENTIN8_CRON_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "SENTIN8_CRON_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// After SIGTERM/SIGINT: how long in-flight requests and the in-flight tick get to finish.
    #[arg(long, env = "SENTIN8_CRON_DRAIN_TIMEOUT", default_value = "30s", value_parser = parse_duration_arg)]
    pub drain_timeout: Duration,
    #[arg(
        long,
        env = "SENTIN8_CRON_LOG_FORMAT",
        value_enum,
        default_value = "pretty"
    )]
    pub log_format: LogFormat,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    init_logging(args.log_format);
    let url = args.database.database_url.clone();
    let store = open_store(&args.database, StoreUse::Serve).await?;
    let capabilities = store.capabilities();
    if capabilities.rls_bypassed {
        tracing::warn!(
            "connected as a role that BYPASSES row-level security: tenant isolation rests on the \
             application alone; connect as sentin8_cron_service in production"
        );
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);

    let http = reqwest::Client::builder()
        .build()
        .context("cannot build the HTTP client for the JWKS")?;
    let auth: Arc<dyn Authenticator> = match AuthConfig::from_env()? {
        Some(config) => auth::build(&config, http, clock.clone()),
        None if capabilities.embedded => {
            let (dev, token) = DevTokenAuthenticator::generate();
            tracing::warn!(
                "DEV MODE: no authentication is configured; a one-time admin token was generated \
                 and printed on standard output. Configure SENTIN8_CRON_JWKS_URL or \
                 SENTIN8_CRON_JWT_HS256_SECRET before exposing this server"
            );
            writeln!(out, "DEV MODE: no authentication configured.")?;
            writeln!(
                out,
                "Admin token for this process only (printed once): {token}"
            )?;
            writeln!(
                out,
                "  curl -H 'Authorization: Bearer {token}' http://{}/v1/health",
                args.listen
            )?;
            out.flush()?;
            Arc::new(dev)
        }
        None => anyhow::bail!(
            "no authentication configured: set SENTIN8_CRON_JWKS_URL (with \
             SENTIN8_CRON_JWT_ISSUER and SENTIN8_CRON_JWT_AUDIENCE) or \
             SENTIN8_CRON_JWT_HS256_SECRET; dev mode is only available on the embedded SQLite store"
        ),
    };

    let dispatch = DispatchConfig::from_env()?;
    if dispatch.token == TokenSettings::None {
        tracing::warn!(
            "no M2M token source configured: every proxy-back call will fail until \
             SENTIN8_CRON_M2M_TOKEN_URL/_CLIENT_ID/_CLIENT_SECRET (or SENTIN8_CRON_TOKEN for dev) is set"
        );
    }
    let dispatcher = Arc::new(HttpDispatcher::with_clock(&dispatch, clock.clone())?);

    let relay = crate::bus::RelayConfig::from_env()?;
    let sink = crate::bus::sink_for(&relay.bus, clock.clone())?;
    tracing::info!(bus = relay.bus.kind(), "outbox relay configured");

    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::server::tls::rustls_config(cert, key)?),
        _ => None,
    };
    let listener = std::net::TcpListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
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

    let service = Service {
        store,
        auth,
        dispatcher,
        clock,
        engine: args.engine.engine_config(dispatch.job_timeout),
        metrics: Arc::new(Metrics::default()),
        tls,
        drain: args.drain_timeout,
        run_ticker: true,
        relay: Some((sink, relay.options)),
        extra_routes: axum::Router::new(),
    };
    service.run(listener, shutdown_signal()).await?;
    tracing::info!("stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
