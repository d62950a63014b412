//! How a failed command ends: one line naming what failed and why (each cause once), and an
//! exit status that tells a runtime failure (1) from invalid input (3). A closed standard
//! output (`... | head -1`) is not a failure at all.

use std::process::ExitCode;

use crate::client::ClientError;

use super::schedule_args::EXIT_INVALID;

/// Exit status of a runtime failure.
pub const EXIT_RUNTIME: u8 = 1;

/// The error as one line: the outermost message, then each cause that does not repeat what
/// was already said (database errors carry their cause in their own text too).
pub fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// True when the error is a write to a closed pipe: the reader has what it wanted.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    let pipe = Some(std::io::ErrorKind::BrokenPipe);
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().map(|io| io.kind()) == pipe
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == pipe
    })
}

/// The exit status an error ends the process with.
pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    let invalid = err.chain().any(|cause| {
        cause
            .downcast_ref::<ClientError>()
            .is_some_and(ClientError::is_invalid_input)
    });
    ExitCode::from(if invalid { EXIT_INVALID } else { EXIT_RUNTIME })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("database error: {0}")]
    struct Wrapped(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let inner = std::io::Error::other("role \"nouser\" does not exist");
        let err = anyhow::Error::new(Wrapped(inner)).context("cannot open the database db");
        assert_eq!(
            message(&err),
            "cannot open the database db: database error: role \"nouser\" does not exist"
        );
    }

    #[test]
    fn a_closed_pipe_ends_quietly_and_invalid_input_has_its_own_status() {
        let pipe = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing");
        assert!(is_broken_pipe(&pipe));
        assert_eq!(exit_code(&pipe), ExitCode::SUCCESS);
        let invalid = anyhow::Error::new(ClientError::Rejected {
            server: "http://127.0.0.1:1".into(),
            status: 400,
            detail: "cron: bad".into(),
        });
        assert_eq!(exit_code(&invalid), ExitCode::from(EXIT_INVALID));
        let missing = anyhow::Error::new(ClientError::Rejected {
            server: "http://127.0.0.1:1".into(),
            status: 404,
            detail: "not found".into(),
        });
        assert_eq!(exit_code(&missing), ExitCode::from(EXIT_RUNTIME));
    }
}
