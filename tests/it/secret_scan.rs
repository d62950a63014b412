//! Every command of the binary, with a secret planted in every setting that can carry one and
//! the most verbose log level: neither its help nor a run of it shows any of them, dependencies'
//! log lines included. The settings point where nothing listens, so each run fails (or is
//! stopped) after it has read them, tried them and reported.

use std::process::Stdio;
use std::time::Duration;

use clap::CommandFactory as _;
use sentin8_cron::cmd::Cli;
use tokio::io::AsyncReadExt as _;

/// Every runnable command, as the words that name it (`["dlq", "list"]`), followed by a value
/// for each argument it requires that no setting provides.
fn commands() -> Vec<(Vec<String>, Vec<String>)> {
    fn walk(
        command: &clap::Command,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Vec<String>)>,
    ) {
        let subcommands: Vec<_> = command
            .get_subcommands()
            .filter(|sub| sub.get_name() != "help")
            .collect();
        if subcommands.is_empty() && !path.is_empty() {
            out.push((path.clone(), required_arguments(command)));
        }
        for sub in subcommands {
            path.push(sub.get_name().to_owned());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut Vec::new(), &mut out);
    out
}

/// A plausible value for each required argument of `command` without a setting behind it.
fn required_arguments(command: &clap::Command) -> Vec<String> {
    let mut args = Vec::new();
    for arg in command
        .get_arguments()
        .filter(|arg| arg.is_required_set() && arg.get_env().is_none())
    {
        let name = arg
            .get_value_names()
            .and_then(|names| names.first())
            .map_or(String::new(), |name| name.to_string());
        let value = match name.as_str() {
            "RFC3339" => "2026-01-01T00:00:00Z".to_owned(),
            "EXPR" => "* * * * *".to_owned(),
            "DOMAIN" => "scan".to_owned(),
            _ => "6b0c2b8e-4f55-4d1c-9c53-2b9f3a4b5c6d".to_owned(),
        };
        if let Some(long) = arg.get_long() {
            args.push(format!("--{long}"));
        }
        args.push(value);
    }
    args
}

/// Every setting (variable) of every command whose value is hidden because it can carry a
/// credential.
fn secret_settings() -> Vec<String> {
    fn walk(command: &clap::Command, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(name) = arg.get_env().and_then(|n| n.to_str())
                && arg.is_hide_env_values_set()
                && !out.iter().any(|known| known == name)
            {
                out.push(name.to_owned());
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut out);
    out
}

const MARK: &str = "PLANTED";

/// A value for `setting` that carries secrets everywhere its kind allows, each marked; URLs
/// point at a closed port so every command gets as far as trying them. Without `userinfo`, an
/// HTTP URL carries its secrets in the query only (the server URL refuses user info, so the
/// commands that use it stop at that check otherwise).
fn planted(setting: &str, userinfo: bool) -> String {
    let tag = format!("{MARK}{}", setting.len());
    if setting.ends_with("DATABASE_URL") {
        format!(
            "postgres://cron:{tag}-USER@127.0.0.1:9/cron?sslmode=disable\
             &password={tag}-Q&sslpassword={tag}-SSL&PassWord={tag}-CASE"
        )
    } else if setting.contains("NATS") || setting.contains("BUS_URL") {
        format!("nats://cron:{tag}-USER@127.0.0.1:9")
    } else if setting.ends_with("_URL") || setting.ends_with("SERVER") {
        let user = if userinfo {
            format!("cron:{tag}-USER@")
        } else {
            String::new()
        };
        format!("http://{user}127.0.0.1:9/x?client_secret={tag}-Q&token={tag}-T")
    } else {
        format!("{tag}-VALUE")
    }
}

/// Output of one run (both streams), stopped after `bound` if it has not ended by then (a
/// server keeps retrying); what it wrote until then is kept.
async fn output_of(args: &[String], settings: &[(String, String)], bound: Duration) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(args)
        .current_dir(dir.path())
        .env("RUST_LOG", "trace")
        .env_remove("SENTIN8_CRON_ENV")
        .envs(settings.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let read_all = |mut stream: Box<dyn tokio::io::AsyncRead + Send + Unpin>| {
        tokio::spawn(async move {
            let mut text = Vec::new();
            let _ = stream.read_to_end(&mut text).await;
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    if tokio::time::timeout(bound, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    format!("{}{}", stdout.await.unwrap(), stderr.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_shows_a_secret_planted_in_any_setting() {
    let secrets = secret_settings();
    for expected in [
        "SENTIN8_CRON_DATABASE_URL",
        "SENTIN8_CRON_JWT_HS256_SECRET",
        "SENTIN8_CRON_SERVER",
        "SENTIN8_CRON_API_TOKEN",
    ] {
        assert!(
            secrets.iter().any(|s| s == expected),
            "{expected} is hidden: {secrets:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let key = crate::support::signing_key(dir.path());
    // As planted; then with what the commands need to get past their own checks to the
    // network (an environment, a signing key, HTTP URLs without user info), in each mode of
    // token checks (a key set and a shared secret exclude each other).
    #[derive(Clone, Copy, PartialEq)]
    enum Variant {
        AsPlanted,
        SharedSecret,
        KeySet,
    }
    let with = |variant: Variant| -> Vec<(String, String)> {
        let dropped = match variant {
            Variant::AsPlanted => "",
            Variant::SharedSecret => "SENTIN8_CRON_JWKS_URL",
            Variant::KeySet => "SENTIN8_CRON_JWT_HS256_SECRET",
        };
        let mut settings: Vec<_> = secrets
            .iter()
            .filter(|name| *name != dropped)
            .map(|name| (name.clone(), planted(name, variant == Variant::AsPlanted)))
            .collect();
        if variant != Variant::AsPlanted {
            let env = "6b0c2b8e-4f55-4d1c-9c53-2b9f3a4b5c6d".to_owned();
            settings.push(("SENTIN8_CRON_ENV".to_owned(), env));
            settings.push(("SENTIN8_CRON_SIGNING_KEY_FILE".to_owned(), key.clone()));
            settings.push(("SENTIN8_CRON_JWT_ISSUER".to_owned(), "scan".to_owned()));
        }
        settings
    };
    let commands = commands();
    assert!(
        commands.len() > 15,
        "the walk found the commands: {commands:?}"
    );

    let runs = commands.iter().flat_map(|(words, required)| {
        let full = [words.clone(), required.clone()].concat();
        [
            (
                [words.clone(), vec!["--help".to_owned()]].concat(),
                Variant::AsPlanted,
            ),
            (words.clone(), Variant::AsPlanted),
            (full.clone(), Variant::SharedSecret),
            (full, Variant::KeySet),
        ]
    });
    let mut shown = Vec::new();
    let mut reached = Vec::new();
    for (args, variant) in runs {
        let output = output_of(&args, &with(variant), Duration::from_secs(6)).await;
        if output.contains(MARK) {
            shown.push(format!("{args:?}:\n{output}"));
        }
        if output.contains("127.0.0.1:9") {
            reached.push(args);
        }
    }
    assert!(
        shown.is_empty(),
        "a secret was shown:\n{}",
        shown.join("\n---\n")
    );
    // The scan is only as good as how far the commands got: most named the address they tried.
    assert!(reached.len() > commands.len(), "{reached:?}");
}
