//! A small client of sentin8-cron's own HTTP API, for the operator commands: a bearer token on
//! every request, problem documents turned into messages a person can act on, and pages
//! followed to the end.

pub mod records;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

/// How long connecting to the server may take: a closed port is reported at once anyway.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, its answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest page the API serves.
pub const PAGE: u32 = 100;

/// Why a call to the API did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached (refused, unresolvable, timed out, TLS failed).
    #[error("cannot reach {server}: {cause}")]
    Unreachable { server: String, cause: String },
    /// The server answered with an error (a problem document, or a bare status).
    #[error("{server} refused the request ({status}): {detail}")]
    Rejected {
        server: String,
        status: u16,
        detail: String,
    },
    /// The server answered with something that is not the API's JSON.
    #[error("{server} answered {what} with an unexpected body: {cause}")]
    Unexpected {
        server: String,
        what: String,
        cause: String,
    },
    /// The command needs a server and none was given.
    #[error("no server given: pass --server URL (or set SENTIN8_CRON_SERVER)")]
    NoServer,
}

impl ClientError {
    /// True when the server refused the request's content (a validation problem): the
    /// command's input was invalid rather than the call failing.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, ClientError::Rejected { status, .. } if *status == 400 || *status == 422)
    }

    /// The HTTP status the server answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The parts of an RFC 9457 problem document a message needs.
#[derive(Debug, Deserialize)]
struct Problem {
    #[serde(default)]
    title: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    errors: Vec<ProblemField>,
}

#[derive(Debug, Deserialize)]
struct ProblemField {
    field: String,
    message: String,
}

/// Checks a `--server` value: an http(s) URL (a bare host:port gets a hint).
pub fn parse_server_url(text: &str) -> Result<Url, String> {
    let hint = || {
        format!(
            "{text:?} is not a server URL; give one such as http://127.0.0.1:8080 or \
             https://cron.example.com"
        )
    };
    if !text.contains("://") {
        return Err(hint());
    }
    let url = Url::parse(text).map_err(|err| format!("{}: {err}", hint()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(hint());
    }
    Ok(url)
}

/// A client of one server, with one token.
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
}

impl ApiClient {
    /// A client of the server at `base`, sending `token` as its bearer token.
    pub fn new(base: Url, token: Option<String>) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("sentin8-cron-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ClientError::Unreachable {
                server: base.to_string(),
                cause: deepest_cause(&err),
            })?;
        Ok(Self { base, token, http })
    }

    /// The server as named in messages: scheme, host and port.
    pub fn server(&self) -> String {
        self.base.origin().ascii_serialization()
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let prefix = url.path().trim_end_matches('/').to_owned();
        url.set_path(&format!("{prefix}{path}"));
        url
    }

    /// One request; the JSON answer of a 2xx, or the error it amounts to.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let what = format!("{method} {path}");
        let mut request = self.http.request(method, self.url(path)).query(query);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|err| ClientError::Unreachable {
                server: self.server(),
                cause: deepest_cause(&err),
            })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|err| ClientError::Unreachable {
                server: self.server(),
                cause: deepest_cause(&err),
            })?;
        if !status.is_success() {
            return Err(ClientError::Rejected {
                server: self.server(),
                status: status.as_u16(),
                detail: problem_text(status, &text),
            });
        }
        if status == StatusCode::NO_CONTENT || text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|err| ClientError::Unexpected {
            server: self.server(),
            what,
            cause: err.to_string(),
        })
    }

    /// `GET` one record.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, ClientError> {
        self.call(Method::GET, path, query, None).await
    }

    /// The items of a paged list, following `next_cursor` until `limit` items are read or the
    /// list ends.
    pub async fn list(
        &self,
        path: &str,
        query: &[(&str, String)],
        limit: usize,
    ) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = u32::try_from(limit.saturating_sub(items.len()))
                .unwrap_or(PAGE)
                .clamp(1, PAGE);
            let mut params = query.to_vec();
            params.push(("limit", page.to_string()));
            if let Some(cursor) = &cursor {
                params.push(("cursor", cursor.clone()));
            }
            let body = self.get(path, &params).await?;
            let unexpected = |cause: &str| ClientError::Unexpected {
                server: self.server(),
                what: format!("GET {path}"),
                cause: cause.to_owned(),
            };
            let Some(page_items) = body.get("items").and_then(Value::as_array) else {
                return Err(unexpected("no items array"));
            };
            items.extend(page_items.iter().cloned());
            cursor = body
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() || items.len() >= limit || page_items.is_empty() {
                break;
            }
        }
        items.truncate(limit);
        Ok(items)
    }
}

/// A problem document's message: its detail and each field's problem, or the bare status.
fn problem_text(status: StatusCode, body: &str) -> String {
    match serde_json::from_str::<Problem>(body) {
        Ok(problem) if !problem.detail.is_empty() || !problem.errors.is_empty() => {
            let mut text = if problem.detail.is_empty() {
                problem.title
            } else {
                problem.detail
            };
            for field in problem.errors {
                let line = format!("{}: {}", field.field, field.message);
                if !text.contains(&line) {
                    text.push_str("; ");
                    text.push_str(&line);
                }
            }
            text
        }
        _ => status
            .canonical_reason()
            .unwrap_or("unexpected status")
            .to_lowercase(),
    }
}

/// The innermost cause of an error ("Connection refused (os error 111)"), said plainly, with
/// a timeout named as one.
fn deepest_cause(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "the request timed out".to_owned();
    }
    let mut source: &dyn std::error::Error = err;
    while let Some(next) = source.source() {
        source = next;
    }
    let text = source.to_string();
    match text.split_once(" (os error") {
        Some((reason, _)) => reason.to_lowercase(),
        None => text,
    }
}
