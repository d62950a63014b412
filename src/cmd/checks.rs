//! What the commands that check declarations share (`validate-expr`, `enroll --dry-run`,
//! `schedules apply --dry-run`): the egress policy built from `serve`'s own settings, problems
//! located as `file:line:column`, and the `-o github` output (GitHub Actions workflow
//! commands, one `::error` line per problem, for CI annotations).

use std::io::Write;
use std::path::Path;

use clap::ValueEnum;

use super::output::OutputFormat;
use super::proxy_back;
use crate::callback::TargetAllowArgs;
use crate::callback::config::{ENV_PLATFORM_DOMAIN, ENV_TARGET_ALLOW, egress_policy};
use crate::callback::egress::EgressPolicy;
use crate::core::decl::{DeclError, EntryError, FieldError, Position};
use crate::server::auth::AuthConfig;
use crate::util::setting::given;

use super::{AuthArgs, DatabaseUrlArg};

/// How a checking command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CheckFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// Aligned columns with every column (long texts in full).
    Wide,
    /// One JSON document, for machines.
    Json,
    /// One YAML document.
    Yaml,
    /// The table, and an `::error file=F,line=L,col=C::message` line per problem (GitHub
    /// Actions annotations).
    Github,
}

impl CheckFormat {
    /// The format of everything but the annotations.
    pub fn format(self) -> OutputFormat {
        match self {
            CheckFormat::Table | CheckFormat::Github => OutputFormat::Table,
            CheckFormat::Wide => OutputFormat::Wide,
            CheckFormat::Json => OutputFormat::Json,
            CheckFormat::Yaml => OutputFormat::Yaml,
        }
    }

    /// Whether problems are also printed as annotations.
    pub fn is_github(self) -> bool {
        self == CheckFormat::Github
    }
}

/// The egress policy `serve` would apply, from the same settings: the allow list, the
/// platform domain and development mode (the embedded store without authentication, read
/// from the database URL and the authentication settings).
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    #[command(flatten)]
    pub allow: TargetAllowArgs,
    /// Platform domain: without --target-allow, targets under https://*.{domain} are allowed.
    #[arg(long, env = ENV_PLATFORM_DOMAIN, value_name = "DOMAIN", help_heading = "Egress")]
    pub platform_domain: Option<String>,
    /// Read only to know whether `serve` would be in development mode (nothing is opened).
    #[command(flatten)]
    pub database: DatabaseUrlArg,
    /// Read as `serve` reads them: with authentication configured, the embedded store is not
    /// development mode, so loopback targets are refused as `serve` refuses them.
    #[command(flatten)]
    pub auth: AuthArgs,
}

impl PolicyArgs {
    /// The policy, and a sentence saying which settings it came from.
    pub fn policy(&self) -> anyhow::Result<(EgressPolicy, String)> {
        let auth_configured = AuthConfig::from_args(&self.auth)?.is_some();
        let dev_mode = proxy_back::dev_mode(&self.database.database_url, auth_configured)?;
        let platform_domain = given(&self.platform_domain);
        let policy = egress_policy(&self.allow, platform_domain.as_deref(), dev_mode)?;
        Ok((
            policy,
            describe(&self.allow, platform_domain.as_deref(), dev_mode),
        ))
    }
}

/// Which settings a locally built policy came from, for the note a check prints.
pub fn describe(allow: &TargetAllowArgs, platform_domain: Option<&str>, dev_mode: bool) -> String {
    let entries = allow
        .target_allow
        .iter()
        .flat_map(|s| s.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|s| !s.is_empty())
        .count();
    let list = match (entries, platform_domain) {
        (0, Some(domain)) => format!("{ENV_PLATFORM_DOMAIN}={domain} (https://*.{domain})"),
        (0, None) => format!("{ENV_TARGET_ALLOW} and {ENV_PLATFORM_DOMAIN} unset"),
        (1, _) => format!("{ENV_TARGET_ALLOW} with 1 entry"),
        (n, _) => format!("{ENV_TARGET_ALLOW} with {n} entries"),
    };
    let dev = if dev_mode {
        "development mode (embedded store, no authentication: loopback allowed)"
    } else {
        "not development mode"
    };
    format!("the egress policy of this command's settings: {list}, {dev}")
}

/// One problem to report: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub position: Option<Position>,
    pub message: String,
}

impl Problem {
    /// A problem of the command's own arguments (no place in the document).
    pub fn field(problem: &FieldError) -> Self {
        Problem {
            position: None,
            message: printable(&problem.to_string()),
        }
    }

    /// A problem of one entry, at the entry's start.
    pub fn entry(entry: &EntryError) -> Self {
        Problem {
            position: entry
                .line
                .zip(entry.column)
                .map(|(line, column)| Position { line, column }),
            message: printable(&entry.to_string()),
        }
    }

    /// A problem of the document as a whole, where the parser found it.
    pub fn document(err: &DeclError) -> Self {
        Problem {
            position: err.position(),
            message: printable(&format!("not a valid declaration document: {err}")),
        }
    }

    /// `origin:line:column: message` (or `origin: message` without a position).
    pub fn located(&self, origin: &str) -> String {
        match self.position {
            Some(Position { line, column }) => {
                format!("{origin}:{line}:{column}: {}", self.message)
            }
            None => format!("{origin}: {}", self.message),
        }
    }
}

/// Prints one GitHub Actions `::error` workflow command per problem. `file` is the path as
/// given on the command line (GitHub resolves it against the workspace), `None` for standard
/// input or a command's output.
pub fn annotate(
    out: &mut (dyn Write + Send),
    file: Option<&Path>,
    problems: &[Problem],
) -> std::io::Result<()> {
    for problem in problems {
        let mut properties = Vec::new();
        if let Some(file) = file.filter(|f| f.as_os_str() != "-") {
            properties.push(format!(
                "file={}",
                escape_property(&file.display().to_string())
            ));
            if let Some(Position { line, column }) = problem.position {
                properties.push(format!("line={line}"));
                properties.push(format!("col={column}"));
            }
        }
        let properties = if properties.is_empty() {
            String::new()
        } else {
            format!(" {}", properties.join(","))
        };
        writeln!(
            out,
            "::error{properties}::{}",
            escape_data(&problem.message)
        )?;
    }
    Ok(())
}

/// `text` with its control characters (a line break, an escape sequence) and the marks that
/// reverse text's direction written as escapes (`\n`, `\u{1b}`): a problem is one line that
/// says what the document holds, so a declaration's content cannot start a line of its own
/// (a workflow command under `-o github`, a forged message) or move the terminal's cursor.
pub fn printable(text: &str) -> String {
    let hidden =
        |c: char| c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(hidden) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The escaping of a workflow command's message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// The escaping of a workflow command's property value.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_one_printable_line_whatever_the_document_holds() {
        assert_eq!(
            printable("plain: 61 is out of range"),
            "plain: 61 is out of range"
        );
        assert_eq!(
            printable("x\n::warning::forged\r\u{1b}[2K\u{202E}é"),
            "x\\n::warning::forged\\r\\u{1b}[2K\\u{202e}é"
        );
        let entry = Problem::field(&FieldError::new("schedule_type", "bad \"a\nb\""));
        assert!(!entry.message.contains('\n'), "{}", entry.message);
    }

    #[test]
    fn annotations_follow_the_workflow_command_format() {
        let problems = [
            Problem {
                position: Some(Position { line: 7, column: 5 }),
                message:
                    "schedule #2 (bad.minute): cron: minute: 61 is out of range 0-59\nmore 100%"
                        .to_owned(),
            },
            Problem {
                position: None,
                message: "domain: is required".to_owned(),
            },
        ];
        let mut out = Vec::new();
        annotate(&mut out, Some(Path::new("ci/a,b:c.yaml")), &problems).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "::error file=ci/a%2Cb%3Ac.yaml,line=7,col=5::schedule #2 (bad.minute): cron: \
             minute: 61 is out of range 0-59%0Amore 100%25\n\
             ::error file=ci/a%2Cb%3Ac.yaml::domain: is required\n"
        );
        let mut out = Vec::new();
        annotate(&mut out, Some(Path::new("-")), &problems[1..]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "::error::domain: is required\n"
        );
    }
}
