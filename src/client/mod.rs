//! A small client of sentin8-cron's own HTTP API, for the operator commands: a bearer token on
//! every request, problem documents turned into messages a person can act on, and pages
//! followed to the end.

pub mod records;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use crate::callback::Secret;

/// How long connecting to the server may take: a closed port is reported at once anyway.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, its answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest page the API serves.
pub const PAGE: u32 = 100;
/// How long, in all, one request waits out the server's rate limit (429 with `Retry-After`)
/// before the refusal is reported.
const RATE_LIMIT_PATIENCE: Duration = Duration::from_secs(60);

/// Why a call to the API did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached (refused, unresolvable, timed out, TLS failed).
    #[error("cannot reach {server}: {cause}")]
    Unreachable { server: String, cause: String },
    /// The server answered with an error (a problem document, or a bare status): a 4xx is a
    /// refusal of the request, a 5xx the server's own failure.
    #[error(
        "{server} {} ({status}): {detail}",
        if *status >= 500 { "failed with a server error" } else { "refused the request" }
    )]
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
    // The text is shown with its secrets hidden: a malformed URL may still carry a password.
    let hint = || {
        format!(
            "{:?} is not a server URL; give one such as http://127.0.0.1:8080 or \
             https://cron.example.com",
            crate::util::url::redact(text)
        )
    };
    if !text.contains("://") {
        return Err(hint());
    }
    let url = Url::parse(text).map_err(|err| format!("{}: {err}", hint()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(hint());
    }
    // A password in the URL would be printed with every message naming the server; the token
    // has its own setting.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "the server URL must not carry a user name or password ({}://user:password@...); \
             give the token with --token or SENTIN8_CRON_API_TOKEN",
            url.scheme()
        ));
    }
    Ok(url)
}

/// A client of one server, with one token (redacted in `Debug`).
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: Url,
    token: Option<Secret>,
    http: reqwest::Client,
    /// How long one request waits out the rate limit in all ([`RATE_LIMIT_PATIENCE`]).
    patience: Duration,
}

impl ApiClient {
    /// A client of the server at `base`, sending `token` as its bearer token.
    pub fn new(base: Url, token: Option<Secret>) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("sentin8-cron-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ClientError::Unreachable {
                server: base.origin().ascii_serialization(),
                cause: deepest_cause(&err),
            })?;
        Ok(Self {
            base,
            token,
            http,
            patience: RATE_LIMIT_PATIENCE,
        })
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
        let (status, text) = self.send(method, path, query, body).await?;
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

    /// `GET` an endpoint that validates: `Ok(Err(fields))` for a 400 naming invalid fields
    /// (each `(field, message)`), so a caller can pick out the fields it asked about.
    pub async fn get_checked(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Result<Value, Vec<(String, String)>>, ClientError> {
        let (status, text) = self.send(Method::GET, path, query, None).await?;
        if status == StatusCode::BAD_REQUEST
            && let Ok(problem) = serde_json::from_str::<Problem>(&text)
            && !problem.errors.is_empty()
        {
            return Ok(Err(problem
                .errors
                .into_iter()
                .map(|f| (f.field, f.message))
                .collect()));
        }
        if !status.is_success() {
            return Err(ClientError::Rejected {
                server: self.server(),
                status: status.as_u16(),
                detail: problem_text(status, &text),
            });
        }
        serde_json::from_str(&text)
            .map(Ok)
            .map_err(|err| ClientError::Unexpected {
                server: self.server(),
                what: format!("GET {path}"),
                cause: err.to_string(),
            })
    }

    /// Sends one request; its status and body. A `429 Too Many Requests` is waited out as its
    /// `Retry-After` says and the request sent again (a refused request did nothing, so this is
    /// safe for every method), for up to [`RATE_LIMIT_PATIENCE`] in all: a long `apply` slows
    /// down to the server's rate instead of stopping half-way.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(StatusCode, String), ClientError> {
        let mut waited = Duration::ZERO;
        loop {
            let (status, retry_after, text) =
                self.send_once(method.clone(), path, query, body).await?;
            match retry_after {
                Some(wait)
                    if status == StatusCode::TOO_MANY_REQUESTS
                        && waited + wait <= self.patience =>
                {
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
                _ => return Ok((status, text)),
            }
        }
    }

    /// Sends one request; its status, its `Retry-After` (whole seconds, at least one), and
    /// its body.
    async fn send_once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(StatusCode, Option<Duration>, String), ClientError> {
        let mut request = self.http.request(method, self.url(path)).query(query);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
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
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|secs| Duration::from_secs(secs.max(1)));
        let text = response
            .text()
            .await
            .map_err(|err| ClientError::Unreachable {
                server: self.server(),
                cause: deepest_cause(&err),
            })?;
        Ok((status, retry_after, text))
    }

    /// `GET` one record.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, ClientError> {
        self.call(Method::GET, path, query, None).await
    }

    /// The items of a paged list from `start` (a cursor the API gave), following
    /// `next_cursor` until `limit` items are read or the list ends; with the cursor where the
    /// list goes on, when it does.
    pub async fn list(
        &self,
        path: &str,
        query: &[(&str, String)],
        limit: usize,
        start: Option<String>,
    ) -> Result<ListPage, ClientError> {
        follow(limit, PAGE as usize, start, |cursor, page| async move {
            let mut params = query.to_vec();
            params.push(("limit", page.to_string()));
            if let Some(cursor) = cursor {
                params.push(("cursor", cursor));
            }
            let body = self.get(path, &params).await?;
            let Some(items) = body.get("items").and_then(Value::as_array) else {
                return Err(ClientError::Unexpected {
                    server: self.server(),
                    what: format!("GET {path}"),
                    cause: "no items array".to_owned(),
                });
            };
            let next = body
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Ok((items.clone(), next))
        })
        .await
    }
}

/// Part of a list, as the API pages it: the items, and the cursor where the list goes on
/// (`None` at its end).
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// Reads pages of at most `page` items from `start` until `limit` items are read or the list
/// ends; `fetch(cursor, n)` reads one page of at most `n` and says where the next starts.
/// Each page asks for no more than is still wanted, so the last cursor is exactly where the
/// items returned end.
pub async fn follow<E, F, Fut>(
    limit: usize,
    page: usize,
    start: Option<String>,
    mut fetch: F,
) -> Result<ListPage, E>
where
    F: FnMut(Option<String>, usize) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<Value>, Option<String>), E>>,
{
    let mut items = Vec::new();
    let mut cursor = start;
    loop {
        let wanted = limit.saturating_sub(items.len()).clamp(1, page.max(1));
        let (page_items, next) = fetch(cursor.clone(), wanted).await?;
        let empty = page_items.is_empty();
        items.extend(page_items);
        cursor = next;
        if cursor.is_none() || items.len() >= limit || empty {
            break;
        }
    }
    if items.len() > limit {
        items.truncate(limit);
    }
    Ok(ListPage {
        items,
        next_cursor: cursor,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A real listener that answers 429 (`Retry-After: 1`) `refusals` times, then 200.
    async fn limited_server(
        refusals: usize,
    ) -> (Url, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let seen = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let app = axum::Router::new().fallback(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < refusals {
                    (
                        axum::http::StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "1"), ("content-type", "application/problem+json")],
                        r#"{"type":"urn:sentin8-cron:problem:rate-limited","title":"Too many requests","status":429,"detail":"slow down"}"#,
                    )
                } else {
                    (
                        axum::http::StatusCode::OK,
                        [("retry-after", "0"), ("content-type", "application/json")],
                        r#"{"ok":true}"#,
                    )
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = parse_server_url(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, seen)
    }

    #[tokio::test]
    async fn a_rate_limited_request_is_sent_again_after_retry_after() {
        use std::sync::atomic::Ordering;
        let (base, seen) = limited_server(1).await;
        let client = ApiClient::new(base, None).unwrap();
        let body = client.get("/v1/schedules", &[]).await.unwrap();
        assert_eq!(body, serde_json::json!({"ok": true}));
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_client_gives_up_on_the_rate_limit_once_its_patience_is_spent() {
        use std::sync::atomic::Ordering;
        let (base, seen) = limited_server(usize::MAX).await;
        let mut client = ApiClient::new(base, None).unwrap();
        client.patience = Duration::from_secs(2);
        let err = client.get("/v1/schedules", &[]).await.unwrap_err();
        assert_eq!(err.status(), Some(429), "{err}");
        assert!(err.to_string().contains("slow down"), "{err}");
        // One try, then one a second for the two seconds of patience.
        assert_eq!(seen.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let base = parse_server_url("http://127.0.0.1:8080").unwrap();
        let client = ApiClient::new(base, Some(Secret::new("tok-not-for-logs"))).unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("tok-not-for-logs"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn a_server_url_with_a_user_or_password_is_refused_without_echoing_it() {
        for text in [
            "http://user:pw-not-shown@127.0.0.1:8080",
            "https://user@cron.example.com",
        ] {
            let err = parse_server_url(text).unwrap_err();
            assert!(
                err.contains("must not carry a user name or password"),
                "{err}"
            );
            assert!(
                !err.contains("pw-not-shown") && !err.contains("user@"),
                "{err}"
            );
        }
        // Malformed, or with no scheme: refused as not a URL, the password still hidden.
        for text in [
            "http://user:pw-not-shown@127.0.0.1:99999",
            "user:pw-not-shown@127.0.0.1:8080",
            "http://127.0.0.1:99999/?token=pw-not-shown",
        ] {
            let err = parse_server_url(text).unwrap_err();
            assert!(err.contains("is not a server URL"), "{err}");
            assert!(!err.contains("pw-not-shown"), "{err}");
        }
        assert!(parse_server_url("https://cron.example.com/base").is_ok());
    }

    #[test]
    fn a_server_error_is_not_called_a_refusal() {
        let rejected = |status| ClientError::Rejected {
            server: "http://127.0.0.1:8080".into(),
            status,
            detail: "detail".into(),
        };
        assert_eq!(
            rejected(500).to_string(),
            "http://127.0.0.1:8080 failed with a server error (500): detail"
        );
        assert_eq!(
            rejected(503).to_string(),
            "http://127.0.0.1:8080 failed with a server error (503): detail"
        );
        assert_eq!(
            rejected(404).to_string(),
            "http://127.0.0.1:8080 refused the request (404): detail"
        );
    }

    /// A list endpoint of `total` numbered items served in pages, as the API serves them.
    async fn paged_server(total: u32) -> (Url, std::sync::Arc<std::sync::Mutex<Vec<u32>>>) {
        use axum::extract::Query;
        use std::collections::HashMap;
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = asked.clone();
        let app = axum::Router::new().route(
            "/v1/schedules",
            axum::routing::get(move |Query(q): Query<HashMap<String, String>>| {
                let seen = seen.clone();
                async move {
                    let limit: u32 = q["limit"].parse().unwrap();
                    seen.lock().unwrap().push(limit);
                    let from: u32 = q.get("cursor").map_or(0, |c| c.parse().unwrap());
                    let to = (from + limit.min(PAGE)).min(total);
                    let next = (to < total).then(|| to.to_string());
                    axum::Json(serde_json::json!({
                        "items": (from..to).map(|n| serde_json::json!({"n": n})).collect::<Vec<_>>(),
                        "next_cursor": next,
                    }))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, asked)
    }

    #[tokio::test]
    async fn lists_follow_every_page_to_the_end_or_the_limit() {
        let (base, asked) = paged_server(250).await;
        let client = ApiClient::new(base, None).unwrap();
        let all = client
            .list("/v1/schedules", &[], usize::MAX, None)
            .await
            .unwrap();
        let numbers: Vec<u64> = all
            .items
            .iter()
            .map(|item| item["n"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..250).collect::<Vec<u64>>());
        assert_eq!(all.next_cursor, None, "the end of the list");
        assert_eq!(*asked.lock().unwrap(), vec![PAGE, PAGE, PAGE]);

        asked.lock().unwrap().clear();
        let some = client.list("/v1/schedules", &[], 150, None).await.unwrap();
        assert_eq!(some.items.len(), 150);
        assert_eq!(some.items[149]["n"], 149);
        assert_eq!(*asked.lock().unwrap(), vec![PAGE, 50]);
        assert_eq!(
            some.next_cursor.as_deref(),
            Some("150"),
            "where the list goes on"
        );

        // From that cursor, the rest.
        let rest = client
            .list("/v1/schedules", &[], usize::MAX, some.next_cursor)
            .await
            .unwrap();
        assert_eq!(rest.items.len(), 100);
        assert_eq!(rest.items[0]["n"], 150);
        assert_eq!(rest.next_cursor, None);
    }
}
