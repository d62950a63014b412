//! How a failed command ends: one line naming what failed and why (each cause once), and an
//! exit status that tells a runtime failure (1) from a usage error (2) and from invalid input
//! (3). A missing or unreadable file is a runtime failure, wherever it is read. A closed
//! standard output (`... | head -1`) never gets here: the writer commands are given drops what
//! follows (`output::ClosedPipeIsDone`), so any broken pipe seen here is a real failure.

use std::process::ExitCode;

use crate::client::ClientError;

use super::schedule_args::EXIT_INVALID;

/// Exit status of a runtime failure.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit status of a command line that cannot be run as given (as clap's own usage errors).
pub const EXIT_USAGE: u8 = 2;

/// A command line that cannot be run as given: a flag it needs is missing, or the flags it
/// has ask for nothing. Ends the process with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Input that is not valid: a document that does not parse, or is not the shape asked for.
/// Ends the process with status 3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

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

/// The exit status an error ends the process with.
pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    ExitCode::from(status(err))
}

/// The status number of an error: usage (2), invalid input (3), else a runtime failure (1).
fn status(err: &anyhow::Error) -> u8 {
    let usage = err.chain().any(|cause| {
        cause.is::<UsageError>()
            || matches!(
                cause.downcast_ref::<ClientError>(),
                Some(ClientError::NoServer)
            )
    });
    if usage {
        return EXIT_USAGE;
    }
    let invalid = err.chain().any(|cause| {
        cause.is::<InvalidInput>()
            || cause
                .downcast_ref::<ClientError>()
                .is_some_and(ClientError::is_invalid_input)
    });
    if invalid { EXIT_INVALID } else { EXIT_RUNTIME }
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
    fn a_broken_pipe_that_reaches_here_is_a_failure_and_invalid_input_has_its_own_status() {
        // Standard output's closed pipe is absorbed by its writer; any other (a child's
        // standard input, say) is a real failure.
        let pipe = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing");
        assert_eq!(exit_code(&pipe), ExitCode::from(EXIT_RUNTIME));
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

    #[test]
    fn usage_errors_exit_2_and_invalid_documents_exit_3_however_wrapped() {
        let no_server = anyhow::Error::new(ClientError::NoServer).context("listing schedules");
        assert_eq!(status(&no_server), EXIT_USAGE);
        let usage = anyhow::Error::new(UsageError("nothing to change".into())).context("patch");
        assert_eq!(status(&usage), EXIT_USAGE);
        let invalid = anyhow::Error::new(InvalidInput("f.json is not valid JSON".into()));
        assert_eq!(status(&invalid), EXIT_INVALID);
        let missing = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::NotFound))
            .context("cannot read /nonexistent");
        assert_eq!(status(&missing), EXIT_RUNTIME);
    }
}
