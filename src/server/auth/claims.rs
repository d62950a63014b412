//! JWT verification shared by both JWT modes: the header peeked before a key is chosen, the
//! signature check, and the claims turned into a [`Principal`].

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::config::ClaimRules;
use super::{AuthError, EnvGrant, FALLBACK_SCOPE_CLAIM, Principal};
use crate::core::model::EnvId;
use crate::server::policy::SCOPE_ADMIN;

/// The parts of a JOSE header needed before verification.
pub(super) struct PeekedHeader {
    pub(super) alg: Algorithm,
    pub(super) kid: Option<String>,
}

/// Reads `alg` and `kid` from an unverified token, so the key can be chosen. Nothing read here
/// is trusted beyond that: the signature is checked against the chosen key and algorithm.
pub(super) fn peek_header(token: &str) -> Result<PeekedHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AuthError::Malformed)?;
    let Ok(Value::Object(header)) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(AuthError::Malformed);
    };
    let Some(Value::String(alg)) = header.get("alg") else {
        return Err(AuthError::Malformed);
    };
    // `none` (in any spelling) is not an algorithm jsonwebtoken knows, so it fails here.
    let alg: Algorithm = alg.parse().map_err(|_| AuthError::UnsupportedAlgorithm)?;
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(AuthError::Malformed),
    };
    Ok(PeekedHeader { alg, kid })
}

/// Verifies the signature with `key` under exactly `alg`, then the claims.
pub(super) fn verify(
    token: &str,
    alg: Algorithm,
    key: &DecodingKey,
    rules: &ClaimRules,
    now: DateTime<Utc>,
) -> Result<Principal, AuthError> {
    // jsonwebtoken checks only the signature (and that `alg` is the one given, of the key's
    // family); every claim, time included, is checked below against the injected clock.
    let mut validation = Validation::new(alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation)
        .map_err(|e| jwt_error(e.kind()))?;
    principal_from_claims(&data.claims, rules, now)
}

fn jwt_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::UnsupportedAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::MissingAlgorithm => AuthError::UnsupportedAlgorithm,
        ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat
        | ErrorKind::Provider(_) => {
            tracing::warn!(error = ?kind, "a verification key could not be used");
            AuthError::BadSignature
        }
        _ => AuthError::Malformed,
    }
}

/// A NumericDate (RFC 7519 §2): seconds since the epoch, possibly fractional.
fn numeric_date(value: &Value) -> Option<f64> {
    value.as_f64().filter(|v| v.is_finite())
}

pub(super) fn invalid(claim: &str) -> AuthError {
    AuthError::InvalidClaim {
        claim: claim.to_owned(),
    }
}

fn principal_from_claims(
    claims: &Map<String, Value>,
    rules: &ClaimRules,
    now: DateTime<Utc>,
) -> Result<Principal, AuthError> {
    // Microsecond precision keeps f64 exact for any date this service will see.
    let now = now.timestamp_micros() as f64 / 1e6;
    let leeway = rules.leeway.as_secs_f64();

    let exp = claims
        .get("exp")
        .and_then(numeric_date)
        .ok_or_else(|| invalid("exp"))?;
    if now >= exp + leeway {
        return Err(AuthError::Expired);
    }
    if let Some(nbf) = claims.get("nbf") {
        let nbf = numeric_date(nbf).ok_or_else(|| invalid("nbf"))?;
        if now + leeway < nbf {
            return Err(AuthError::NotYetValid);
        }
    }

    if let Some(expected) = &rules.issuer {
        match claims.get("iss") {
            Some(Value::String(iss)) if iss == expected => {}
            _ => return Err(AuthError::WrongIssuer),
        }
    }
    if let Some(expected) = &rules.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(aud)) => aud == expected,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(expected)),
            _ => false,
        };
        if !ok {
            return Err(AuthError::WrongAudience);
        }
    }

    let subject = match claims.get("sub") {
        Some(Value::String(sub)) if !sub.trim().is_empty() => sub.clone(),
        _ => return Err(invalid("sub")),
    };
    let scopes = scopes_from_claims(claims, &rules.scope_claim)?;
    let envs = envs_from_claims(claims, &rules.envs_claim)?;
    let envs = if scopes.contains(SCOPE_ADMIN) {
        EnvGrant::All
    } else {
        EnvGrant::Some(envs)
    };

    Ok(Principal {
        subject,
        scopes,
        envs,
        dev: false,
        // A NumericDate beyond what an instant can hold has no instant to show.
        expires_at: DateTime::from_timestamp_micros((exp * 1e6) as i64),
    })
}

/// Scopes from `claim`, or from `scp` when `claim` is absent: a space-separated string or an
/// array of strings. Any other shape rejects the token.
fn scopes_from_claims(
    claims: &Map<String, Value>,
    claim: &str,
) -> Result<BTreeSet<String>, AuthError> {
    let (name, value) = match claims.get(claim) {
        Some(value) => (claim, value),
        None => match claims.get(FALLBACK_SCOPE_CLAIM) {
            Some(value) => (FALLBACK_SCOPE_CLAIM, value),
            None => return Ok(BTreeSet::new()),
        },
    };
    match value {
        Value::String(s) => Ok(s.split_ascii_whitespace().map(str::to_owned).collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                _ => Err(invalid(name)),
            })
            .filter(|s| !matches!(s, Ok(s) if s.is_empty()))
            .collect(),
        _ => Err(invalid(name)),
    }
}

/// Environment ids from `claim`: absent means none; otherwise an array of UUID strings, every
/// one valid.
fn envs_from_claims(
    claims: &Map<String, Value>,
    claim: &str,
) -> Result<BTreeSet<EnvId>, AuthError> {
    match claims.get(claim) {
        None => Ok(BTreeSet::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .and_then(|s| s.parse::<EnvId>().ok())
                    .ok_or_else(|| invalid(claim))
            })
            .collect(),
        Some(_) => Err(invalid(claim)),
    }
}

pub(super) fn log_rejection(mode: &'static str, result: &Result<Principal, AuthError>) {
    if let Err(err) = result {
        tracing::debug!(mode, error = %err, "bearer token rejected");
    }
}
