//! What a tenant sees of a failed call, and what of a result is stored.
//!
//! A tenant controls its target URL, so the text of a transport error is an oracle: raw
//! socket messages tell a closed port from a silent one, PostgreSQL from NATS. A tenant sees
//! only the [`FailureClass`] of a failure (its `Display`); the full detail
//! ([`operator_detail`]) is for the operator's log.
//!
//! A stored result is capped ([`DEFAULT_RESULT_CAP`]) and must be storable on every backend
//! (JSON without NUL): anything else is replaced by a marker ([`stored_result`]) so the call
//! still counts as delivered and is never sent again.

use std::error::Error as StdError;
use std::fmt;

use serde_json::{Value, json};

use super::egress::EgressDenied;

/// How much of an error response's body a tenant sees.
pub const STATUS_EXCERPT_BYTES: usize = 512;

/// The default cap on a stored job result (bytes of the response body).
pub const DEFAULT_RESULT_CAP: usize = 16 * 1024;

/// The key of the marker object stored instead of a result that cannot be stored.
pub const RESULT_MARKER_KEY: &str = "sentin8_result_omitted";

/// The class of a failed call: all a tenant is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureClass {
    /// The call did not complete in time.
    Timeout,
    /// Nothing listens at the target's port.
    ConnectionRefused,
    /// Any other transport failure (reset, unreachable, closed mid-response).
    Connection,
    /// The TLS handshake or certificate check failed.
    Tls,
    /// The target answered with a non-success status.
    Status {
        /// The status code.
        code: u16,
        /// Up to [`STATUS_EXCERPT_BYTES`] of the body, control characters replaced.
        excerpt: String,
    },
    /// The response could not be read or decoded.
    Decode,
    /// The call could not be made as configured (egress policy, invalid URL or request).
    Configuration,
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureClass::Timeout => f.write_str("timeout"),
            FailureClass::ConnectionRefused => f.write_str("connection refused"),
            FailureClass::Connection => f.write_str("connection failed"),
            FailureClass::Tls => f.write_str("tls"),
            FailureClass::Status { code, excerpt } if excerpt.is_empty() => {
                write!(f, "status {code}")
            }
            FailureClass::Status { code, excerpt } => write!(f, "status {code}: {excerpt}"),
            FailureClass::Decode => f.write_str("decode"),
            FailureClass::Configuration => f.write_str("configuration"),
        }
    }
}

/// An error and its causes, looking inside `io::Error`s (whose `source` skips the error they
/// wrap) so a TLS error wrapped twice is still seen.
fn chain<'a>(err: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut causes = Vec::new();
    let mut next = Some(err);
    while let Some(cause) = next {
        causes.push(cause);
        if causes.len() >= 32 {
            break;
        }
        next = match cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => cause.source(),
        };
    }
    causes
}

/// The class of a reqwest error. Only the error's kind and the types in its source chain are
/// looked at, never its text.
pub fn classify_error(err: &reqwest::Error) -> FailureClass {
    let mut io_kinds = Vec::new();
    for cause in chain(err) {
        if cause.is::<EgressDenied>() {
            return FailureClass::Configuration;
        }
        if cause.is::<rustls::Error>() {
            return FailureClass::Tls;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            io_kinds.push(io.kind());
        }
    }
    if err.is_timeout() || io_kinds.contains(&std::io::ErrorKind::TimedOut) {
        FailureClass::Timeout
    } else if io_kinds.contains(&std::io::ErrorKind::ConnectionRefused) {
        FailureClass::ConnectionRefused
    } else if err.is_builder() || err.is_redirect() {
        FailureClass::Configuration
    } else if err.is_decode() {
        FailureClass::Decode
    } else {
        FailureClass::Connection
    }
}

/// The class of a non-success response: `status N` with an excerpt of its body.
pub fn classify_status(status: reqwest::StatusCode, body: &[u8]) -> FailureClass {
    FailureClass::Status {
        code: status.as_u16(),
        excerpt: excerpt(body, STATUS_EXCERPT_BYTES),
    }
}

/// At most `max` bytes of `body` as text: cut at a character boundary, invalid UTF-8 and
/// control characters (NUL included) replaced, surrounding whitespace trimmed.
pub fn excerpt(body: &[u8], max: usize) -> String {
    let cut = &body[..body.len().min(max)];
    let text = match std::str::from_utf8(cut) {
        Ok(s) => s.to_owned(),
        // A character split by the cut is dropped, not replaced.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&cut[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(cut).into_owned(),
    };
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The full description of an error for the operator's log: every cause, the URL removed.
pub fn operator_detail(err: &reqwest::Error) -> String {
    let mut text = String::new();
    for cause in chain(err) {
        let cause_text = match cause.downcast_ref::<reqwest::Error>() {
            Some(e) if e.url().is_some() => {
                let mut e_text = e.to_string();
                if let Some(url) = e.url() {
                    e_text = e_text.replace(&format!(" ({url})"), "");
                    e_text = e_text.replace(url.as_str(), "");
                }
                e_text
            }
            _ => cause.to_string(),
        };
        if text.is_empty() {
            text = cause_text;
        } else if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
    }
    text
}

/// Why a response body was not stored as the job's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omitted {
    /// Longer than the cap.
    TooLarge,
    /// Not JSON.
    NotJson,
    /// JSON holding a NUL character, which PostgreSQL text cannot store.
    Nul,
}

impl Omitted {
    /// The reason as stored in the marker.
    pub fn as_str(self) -> &'static str {
        match self {
            Omitted::TooLarge => "too_large",
            Omitted::NotJson => "not_json",
            Omitted::Nul => "nul",
        }
    }
}

/// The marker stored instead of a result: `{"sentin8_result_omitted": {"reason", "bytes"}}`.
pub fn result_marker(reason: Omitted, bytes: usize) -> Value {
    json!({ RESULT_MARKER_KEY: { "reason": reason.as_str(), "bytes": bytes } })
}

/// What to store as a job's result for a success response `body`: the parsed JSON (`null`
/// for an empty body), or a marker when it is longer than `cap` bytes, is not JSON or holds a
/// NUL. Either way the call succeeded.
pub fn stored_result(body: &[u8], cap: usize) -> Value {
    match parse_result(body, cap) {
        Ok(value) => value,
        Err(reason) => result_marker(reason, body.len()),
    }
}

/// Like [`stored_result`], with the reason a body was refused.
pub fn parse_result(body: &[u8], cap: usize) -> Result<Value, Omitted> {
    if body.len() > cap {
        return Err(Omitted::TooLarge);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    if body.contains(&0) {
        return Err(Omitted::Nul);
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| Omitted::NotJson)?;
    if holds_nul(&value) {
        return Err(Omitted::Nul);
    }
    Ok(value)
}

/// Caps an already parsed result: its compact serialization must fit `cap` bytes and hold no
/// NUL.
pub fn cap_value(value: Value, cap: usize) -> Value {
    let len = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
    if len > cap {
        result_marker(Omitted::TooLarge, len)
    } else if holds_nul(&value) {
        result_marker(Omitted::Nul, len)
    } else {
        value
    }
}

fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests;
