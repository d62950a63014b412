//! `token issue`: an API token signed with the same HS256 secret `serve` checks tokens with,
//! carrying the claims it reads (subject, scopes, environments, expiry, and the issuer and
//! audience when they are configured). In JWKS mode the identity provider issues tokens, and
//! this command refuses to.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use chrono::Utc;
use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::UsageError;
use super::output::{self, OutputArgs};
use crate::callback::Secret;
use crate::core::model::EnvId;
use crate::server::auth::{AuthArgs, AuthConfig, KeySource};
use crate::server::policy::{SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};
use crate::util::duration::positive_duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Sign an API token with the HS256 secret `serve` checks (SENTIN8_CRON_JWT_HS256_SECRET).
    #[command(after_help = "Examples:
  TOKEN=$(sentin8-cron token issue --sub ci-deploy --scope write --env $ENV --ttl 1h)
  sentin8-cron token issue --sub oncall --scope read --env $ENV_A --env $ENV_B --ttl 12h
  sentin8-cron token issue --sub platform-admin --scope admin --ttl 15m -o json")]
    Issue(IssueArgs),
}

#[derive(Debug, clap::Args)]
pub struct IssueArgs {
    /// The subject: who the token's holder is (named in the audit journal and in events).
    #[arg(long, value_name = "SUB")]
    pub sub: String,
    /// A scope to grant: read, write or admin (or its full name, sentin8:cron:write);
    /// repeatable. Write includes read; admin includes write, in every environment.
    #[arg(long, value_name = "SCOPE", required = true, value_parser = scope)]
    pub scope: Vec<String>,
    /// An environment the token may address; repeatable. Required unless the scope is admin.
    #[arg(long, value_name = "ENV_ID")]
    pub env: Vec<EnvId>,
    /// How long the token is valid, e.g. 1h, 12h, 30d (at most 366d).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = ttl)]
    pub ttl: Duration,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The longest validity a token may be issued with.
const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

fn ttl(text: &str) -> Result<Duration, String> {
    let ttl = positive_duration(text)?;
    if ttl > MAX_TTL {
        return Err("at most 366d: issue a new token instead of one that never ends".to_owned());
    }
    Ok(ttl)
}

fn scope(text: &str) -> Result<String, String> {
    match text {
        "read" | SCOPE_READ => Ok(SCOPE_READ.to_owned()),
        "write" | SCOPE_WRITE => Ok(SCOPE_WRITE.to_owned()),
        "admin" | SCOPE_ADMIN => Ok(SCOPE_ADMIN.to_owned()),
        _ => Err("one of read, write, admin".to_owned()),
    }
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let TokenCommand::Issue(args) = args.command;
    let config = AuthConfig::from_args(&args.auth)?;
    match config.as_ref().map(|c| &c.keys) {
        Some(KeySource::Hs256(_)) => {}
        Some(KeySource::Jwks { .. }) => {
            return Err(UsageError(
                "SENTIN8_CRON_JWKS_URL is set: in JWKS mode tokens come from your identity \
                 provider, with the claims the README's \"Access for a team\" lists"
                    .to_owned(),
            )
            .into());
        }
        None => {
            return Err(UsageError(
                "set SENTIN8_CRON_JWT_HS256_SECRET (--jwt-hs256-secret) to the secret `serve` \
                 checks tokens with"
                    .to_owned(),
            )
            .into());
        }
    }
    let admin = args.scope.iter().any(|s| s == SCOPE_ADMIN);
    if args.env.is_empty() && !admin {
        return Err(UsageError(
            "give --env (repeatable): a read or write token names its environments; only the \
             admin scope grants them all"
                .to_owned(),
        )
        .into());
    }
    let secret = Secret::given(&args.auth.jwt_hs256_secret).context("the secret")?;
    let now = Utc::now();
    let expires_at = now
        + chrono::Duration::from_std(args.ttl).context("the token's lifetime is out of range")?;
    let mut scopes = args.scope.clone();
    scopes.sort();
    scopes.dedup();
    let environments: Vec<String> = args.env.iter().map(ToString::to_string).collect();
    let mut claims = Map::new();
    claims.insert("sub".into(), Value::from(args.sub.clone()));
    claims.insert(
        args.auth.jwt_scope_claim.clone(),
        Value::from(scopes.join(" ")),
    );
    claims.insert(args.auth.jwt_envs_claim.clone(), json!(environments));
    claims.insert("iat".into(), Value::from(now.timestamp()));
    claims.insert("exp".into(), Value::from(expires_at.timestamp()));
    if let Some(issuer) = args
        .auth
        .jwt_issuer
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        claims.insert("iss".into(), Value::from(issuer));
    }
    if let Some(audience) = args
        .auth
        .jwt_audience
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        claims.insert("aud".into(), Value::from(audience));
    }
    let key = jsonwebtoken::EncodingKey::from_secret(secret.expose().as_bytes())
        .context("the HS256 secret")?;
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    let token = jsonwebtoken::encode(&header, &claims, &key).context("signing the token")?;
    if args.output.format.is_structured() {
        let document = json!({
            "token": token,
            "subject": args.sub,
            "scopes": scopes,
            "environments": environments,
            "all_environments": admin,
            "expires_at": expires_at,
        });
        output::write_structured(out, args.output.format, &document)?;
    } else {
        // The token alone on stdout, so `TOKEN=$(...)` takes it; what it grants on stderr.
        writeln!(out, "{token}")?;
        eprintln!(
            "note: {} for {} in {}, until {}",
            scopes.join(" "),
            args.sub,
            if admin {
                "every environment".to_owned()
            } else {
                environments.join(", ")
            },
            expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
    }
    Ok(ExitCode::SUCCESS)
}
