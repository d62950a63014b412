//! Process plumbing of the commands: the shutdown signal and the log subscriber.

use clap::ValueEnum;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Installs the process's log subscriber, writing to standard error (standard output is kept
/// for results), filtered by `RUST_LOG` or else `default_filter` (`info`, `warn`, ...). Does
/// nothing when the process already has one.
pub fn init_logging(format: LogFormat, default_filter: &str) {
    init(Style::from(format), default_filter);
}

/// Like [`init_logging`], in JSON with each record's fields nested under `fields`: the shape
/// of the log bus's event records, which `relay` writes and consumers parse.
pub fn init_nested_json_logging(default_filter: &str) {
    init(Style::NestedJson, default_filter);
}

enum Style {
    Pretty,
    Json,
    NestedJson,
}

impl From<LogFormat> for Style {
    fn from(format: LogFormat) -> Self {
        match format {
            LogFormat::Pretty => Style::Pretty,
            LogFormat::Json => Style::Json,
        }
    }
}

fn init(style: Style, default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_wanted())
        .with_writer(std::io::stderr);
    let _ = match style {
        Style::Json => builder.json().flatten_event(true).try_init(),
        Style::NestedJson => builder.json().try_init(),
        Style::Pretty => builder.try_init(),
    };
}

/// Whether log lines may carry colour: only when standard error is a terminal, and never when
/// `NO_COLOR` is set to anything (<https://no-color.org>).
pub fn colour_wanted() -> bool {
    use std::io::IsTerminal as _;
    std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
        && std::io::stderr().is_terminal()
}

/// Resolves on SIGINT (Ctrl-C) or, where there is one, SIGTERM.
pub async fn shutdown_signal() {
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
