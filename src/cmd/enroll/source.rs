//! Where `enroll` reads its declaration document from: a file, or the standard output of a
//! command.
//!
//! A command line is split into words like a shell would split a simple command (blanks
//! separate words; single quotes, double quotes and backslashes quote) and run directly, without
//! a shell: nothing is expanded, and pipes, redirections and variables are refused with a hint
//! to wrap the command in `sh -c '...'` when a shell is really wanted. This keeps the common
//! case (`my-service --print-registration --section=schedules`) independent of the shell and of
//! quoting surprises.
//!
//! The command is not trusted with the caller's secrets: it starts with an empty environment
//! plus `PATH`, `HOME`, `LANG` and the variables named with `--pass-env`. It runs in its own
//! process group, and on timeout the whole group is killed, so a background process it started
//! does not outlive `enroll`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::core::decl::DeclFormat;
use crate::util::io::read_capped;

/// The largest document read from a command (or a file).
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;
/// How much of a failed command's standard error is shown.
const STDERR_TAIL_BYTES: usize = 2048;
const STDERR_TAIL_LINES: usize = 20;

/// A declaration document as read, with what it is called in messages.
#[derive(Debug, Clone)]
pub struct Document {
    pub text: String,
    pub format: DeclFormat,
    /// `path/to/file.yaml` or `` the output of `command` ``.
    pub origin: String,
}

/// Reads a declaration file; its format comes from its extension, else from its content.
pub async fn read_file(path: &Path) -> anyhow::Result<Document> {
    read_input(path)
}

/// Reads a document from a file, or from standard input when the path is `-`. Messages name
/// the file by its absolute path.
pub fn read_input(path: &Path) -> anyhow::Result<Document> {
    use std::io::Read as _;
    let stdin = path.as_os_str() == "-";
    let origin = if stdin {
        "standard input".to_owned()
    } else {
        std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string()
    };
    let mut bytes = Vec::new();
    let limit = MAX_DOCUMENT_BYTES as u64 + 1;
    let read = if stdin {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|file| file.take(limit).read_to_end(&mut bytes))
    };
    read.with_context(|| format!("cannot read {origin}"))?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        bail!(
            "{origin} is larger than {} MiB",
            MAX_DOCUMENT_BYTES / (1024 * 1024)
        );
    }
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{origin} is not UTF-8 text"))?;
    Ok(Document {
        format: DeclFormat::detect((!stdin).then_some(path), &text),
        text,
        origin,
    })
}

/// The variables a command always gets from `enroll`'s environment (when they are set).
pub const ALWAYS_PASSED: [&str; 3] = ["PATH", "HOME", "LANG"];

/// The environment of a command: of `parent`'s variables, only [`ALWAYS_PASSED`] and `pass`.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    parent
        .into_iter()
        .filter(|(name, _)| {
            ALWAYS_PASSED.iter().any(|kept| name == kept) || pass.iter().any(|p| name == p.as_str())
        })
        .collect()
}

/// Checks a `--pass-env` name.
pub fn env_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err("a variable name, without = or NUL".to_owned());
    }
    Ok(name.to_owned())
}

/// Runs `line` (see the module documentation for how it is split, and what environment it
/// gets) with no input and reads its standard output as a declaration document (JSON when it
/// starts with `{`, YAML otherwise). Fails on a non-zero exit (with the end of its standard
/// error), after `timeout` (its whole process group is killed), and on output that is too large
/// or not UTF-8.
pub async fn run_command(
    line: &str,
    timeout: Duration,
    pass_env: &[String],
) -> anyhow::Result<Document> {
    let words =
        split_command(line).map_err(|problem| anyhow::anyhow!("--from-command: {problem}"))?;
    let Some((program, arguments)) = words.split_first() else {
        bail!("--from-command: the command is empty");
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(arguments)
        .env_clear()
        .envs(child_env(std::env::vars_os(), pass_env))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot run `{line}`"))?;
    let group = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();

    let finished = tokio::time::timeout(timeout, async {
        tokio::join!(
            async {
                match stdout {
                    Some(stdout) => read_capped(stdout, MAX_DOCUMENT_BYTES).await,
                    None => Ok(Some(Vec::new())),
                }
            },
            read_tail(stderr, STDERR_TAIL_BYTES),
            child.wait()
        )
    })
    .await;
    let Ok((stdout, stderr, status)) = finished else {
        // Everything the command started goes with it; then reap the child so it does not
        // linger as a zombie.
        kill_group(group);
        let _ = child.start_kill();
        let _ = child.wait().await;
        bail!(
            "`{line}` did not finish within {}; it was stopped",
            duration_text(timeout)
        );
    };
    let status = status.with_context(|| format!("cannot wait for `{line}`"))?;
    let stdout = stdout.with_context(|| format!("cannot read the output of `{line}`"))?;
    let stderr = stderr.unwrap_or_default();
    if !status.success() {
        let tail = stderr_tail(&stderr);
        if tail.is_empty() {
            bail!("`{line}` failed ({status}) and wrote nothing to standard error");
        }
        bail!("`{line}` failed ({status}); the end of its standard error:\n{tail}");
    }
    let Some(stdout) = stdout else {
        bail!(
            "the output of `{line}` is larger than {} MiB",
            MAX_DOCUMENT_BYTES / (1024 * 1024)
        );
    };
    let text = String::from_utf8(stdout)
        .map_err(|_| anyhow::anyhow!("the output of `{line}` is not UTF-8 text"))?;
    Ok(Document {
        format: DeclFormat::detect(None, &text),
        text,
        origin: format!("the output of `{line}`"),
    })
}

/// Kills the process group led by `leader` (the command runs in its own group).
fn kill_group(leader: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = leader
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
        && let Err(err) = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
    {
        tracing::debug!(error = %err, "cannot kill the command's process group");
    }
    #[cfg(not(unix))]
    let _ = leader;
}

/// Reads to the end, keeping only the last `keep` bytes (roughly: whole chunks are dropped).
async fn read_tail(
    reader: Option<impl AsyncRead + Unpin>,
    keep: usize,
) -> std::io::Result<Vec<u8>> {
    let Some(mut reader) = reader else {
        return Ok(Vec::new());
    };
    let mut tail = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = reader.read(&mut chunk).await?;
        if read == 0 {
            return Ok(tail);
        }
        tail.extend_from_slice(chunk.get(..read).unwrap_or_default());
        if tail.len() > keep * 2 {
            tail.drain(..tail.len() - keep);
        }
    }
}

/// The last lines of a command's standard error, indented, at most
/// [`STDERR_TAIL_BYTES`] and [`STDERR_TAIL_LINES`].
fn stderr_tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    let text = String::from_utf8_lossy(bytes.get(start..).unwrap_or_default());
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let first = lines.len().saturating_sub(STDERR_TAIL_LINES);
    lines
        .get(first..)
        .unwrap_or_default()
        .iter()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `30s`, `1500ms`.
pub fn duration_text(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// Characters a shell would treat as syntax; refused unquoted because no shell runs.
const SHELL_SYNTAX: &[char] = &['|', '&', ';', '<', '>', '(', ')', '$', '`'];

/// Splits a command line into words: blanks separate words; `'...'` quotes literally; `"..."`
/// quotes with `\"`, `\\`, `\$` and `` \` `` as escapes; a backslash outside quotes escapes the
/// next character. Unquoted shell syntax and unterminated quotes are errors.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated single quote".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated double quote".to_owned()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated double quote".to_owned()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err("a trailing backslash escapes nothing".to_owned()),
            },
            c if SHELL_SYNTAX.contains(&c) => {
                return Err(format!(
                    "{c:?} is shell syntax, and the command does not run in a shell; quote it, \
                     or run a shell explicitly: sh -c '...'"
                ));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The source given on the command line.
#[derive(Debug, Clone)]
pub enum Source {
    File(PathBuf),
    Command {
        line: String,
        timeout: Duration,
        /// Variables passed to the command besides [`ALWAYS_PASSED`].
        pass_env: Vec<String>,
    },
}

impl Source {
    /// Reads the document.
    pub async fn read(&self) -> anyhow::Result<Document> {
        match self {
            Source::File(path) => read_file(path).await,
            Source::Command {
                line,
                timeout,
                pass_env,
            } => run_command(line, *timeout, pass_env).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        split_command(line).unwrap_or_else(|err| panic!("{line}: {err}"))
    }

    #[test]
    fn splits_like_a_simple_shell_command() {
        assert_eq!(
            words("svc --print-registration --section=schedules"),
            ["svc", "--print-registration", "--section=schedules"]
        );
        assert_eq!(words("  a \t b\n"), ["a", "b"]);
        assert_eq!(
            words("sh -c 'cat \"x y\" | jq .'"),
            ["sh", "-c", "cat \"x y\" | jq ."]
        );
        assert_eq!(
            words(r#"echo "a \"b\" \$HOME \n""#),
            ["echo", r#"a "b" $HOME \n"#]
        );
        assert_eq!(words(r"a\ b c\'d"), ["a b", "c'd"]);
        assert_eq!(words(r#"x''y "" ''"#), ["xy", "", ""]);
        assert_eq!(words("a\\\nb"), ["ab"]);
        assert!(words("").is_empty());
        assert!(words("   ").is_empty());
    }

    #[test]
    fn refuses_what_only_a_shell_would_understand() {
        for (line, problem) in [
            ("cat x | jq", "'|' is shell syntax"),
            ("svc > out", "'>' is shell syntax"),
            ("echo $HOME", "'$' is shell syntax"),
            ("a; b", "';' is shell syntax"),
            ("echo 'open", "unterminated single quote"),
            ("echo \"open", "unterminated double quote"),
            ("echo \\", "a trailing backslash escapes nothing"),
        ] {
            let err = split_command(line).unwrap_err();
            assert!(err.starts_with(problem), "{line}: {err}");
        }
        // Quoted, the same characters are ordinary.
        assert_eq!(words("echo '$HOME|x'"), ["echo", "$HOME|x"]);
    }

    #[test]
    fn stderr_tails_are_bounded() {
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = stderr_tail(many.as_bytes());
        assert_eq!(tail.lines().count(), STDERR_TAIL_LINES);
        assert!(tail.ends_with("  line 99"), "{tail}");
        let long = "x".repeat(10_000);
        assert!(stderr_tail(long.as_bytes()).len() <= STDERR_TAIL_BYTES + 2);
    }

    #[tokio::test]
    async fn stderr_is_read_to_its_tail() {
        let big = vec![b'b'; 50_000];
        let tail = read_tail(Some(&big[..]), 1000).await.unwrap();
        assert!(tail.len() <= 2000 + 8192, "{}", tail.len());
        assert!(tail.len() >= 1000);
    }

    #[test]
    fn commands_get_only_the_basic_variables_and_the_named_ones() {
        let parent = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/op"),
            ("LANG", "C.UTF-8"),
            ("SENTIN8_CRON_M2M_CLIENT_SECRET", "s3cret"),
            ("SENTIN8_CRON_DATABASE_URL", "postgres://u:p@db/cron"),
            ("REGISTRY_TOKEN", "t"),
            ("PATHX", "not PATH"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let names = |pass: &[String]| -> Vec<String> {
            child_env(parent.clone(), pass)
                .into_iter()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&[]), ["PATH", "HOME", "LANG"]);
        assert_eq!(
            names(&["REGISTRY_TOKEN".to_owned()]),
            ["PATH", "HOME", "LANG", "REGISTRY_TOKEN"]
        );
        assert!(env_name("A=B").is_err());
        assert!(env_name("").is_err());
        assert_eq!(env_name("REGISTRY_TOKEN").unwrap(), "REGISTRY_TOKEN");
    }

    /// Whether `pid` is gone: no such process, or only its exit status is left.
    #[cfg(unix)]
    fn gone(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // The state follows the parenthesised command name.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_timeout_kills_every_process_the_command_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("background.pid");
        let line = format!(
            "sh -c 'sleep 300 & echo $! > \"{}\"; wait'",
            pid_file.display()
        );
        let err = run_command(&line, Duration::from_secs(1), &[])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("did not finish within 1s"), "{err}");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL is delivered asynchronously: give it a bounded moment.
        let mut waited = 0;
        while !gone(pid) && waited < 100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += 1;
        }
        assert!(gone(pid), "the background sleep {pid} survived the timeout");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration_text(Duration::from_secs(30)), "30s");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    }
}
