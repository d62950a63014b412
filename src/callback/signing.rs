//! Signed proxy-back calls: every call carries a compact JWT, bound to the target's origin and
//! to the exact body bytes, signed with sentin8-cron's own key.
//!
//! The receiver verifies the `Sentin8-Signature` header offline against the public keys served
//! at `GET /.well-known/jwks.json` ([`CallSigner::jwks`]): the signature (by the header's
//! `kid`), `iss`, `aud` equal to its own origin, `exp`, and `body_sha256` equal to the
//! base64url (unpadded) SHA-256 of the body it received. Unlike a shared bearer token, such a
//! call cannot be replayed at another target (the audience differs), with another body (the
//! hash differs) or later than five minutes.
//!
//! Keys are Ed25519 (`EdDSA`, preferred) or P-256 (`ES256`), loaded from PKCS#8 PEM files.
//! Rotation: the current key signs; previous keys stay published so calls signed just before
//! the rotation still verify. In development [`CallSigner::load_or_create`] keeps a generated
//! Ed25519 key in a file (mode 0600) so restarts keep the same key.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

/// The name of the request header that carries the signed call.
pub const SIGNATURE_HEADER: &str = "Sentin8-Signature";

/// Where the public keys are served.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The longest a signed call stays valid (`exp - iat`), and the default.
pub const MAX_CALL_TTL: Duration = Duration::from_secs(300);

/// Why a key could not be loaded or a call could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The key file could not be read or written.
    #[error("signing key file {path}: {source}")]
    Io {
        /// The file, as configured.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The PEM document is not an unencrypted PKCS#8 Ed25519 or P-256 private key.
    #[error("signing key {origin}: not an unencrypted PKCS#8 Ed25519 or P-256 private key")]
    UnsupportedKey {
        /// Where the key came from (a path or "generated").
        origin: String,
    },
    /// Two configured keys are the same key.
    #[error("signing key {kid} is configured twice")]
    DuplicateKey {
        /// The duplicated key's id.
        kid: String,
    },
    /// The token lifetime is zero or longer than [`MAX_CALL_TTL`].
    #[error("signed call lifetime must be between 1 s and {} s", MAX_CALL_TTL.as_secs())]
    InvalidTtl,
    /// The issuer is empty.
    #[error("signed call issuer must not be empty")]
    EmptyIssuer,
    /// The target URL has no origin a receiver could compare with (not http or https).
    #[error("target URL has no http(s) origin")]
    NoOrigin,
    /// The cryptographic library refused to generate a key or sign.
    #[error("signing failed")]
    Crypto,
}

/// The signature algorithm of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// Ed25519 (RFC 8037).
    EdDSA,
    /// ECDSA on P-256 with SHA-256 (RFC 7518).
    ES256,
}

impl SigningAlgorithm {
    /// The JOSE `alg` name.
    pub fn as_str(self) -> &'static str {
        match self {
            SigningAlgorithm::EdDSA => "EdDSA",
            SigningAlgorithm::ES256 => "ES256",
        }
    }
}

enum Pair {
    Ed(Ed25519KeyPair),
    Es(EcdsaKeyPair),
}

/// One private signing key with its public JWK and key id.
pub struct SigningKey {
    pair: Pair,
    kid: String,
    jwk: Value,
    /// The base64url JOSE header, computed once.
    header_b64: String,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.algorithm())
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Parses an unencrypted PKCS#8 PEM private key: Ed25519 or P-256. `origin` names the key
    /// in errors (a path; never the key itself).
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<Self, SigningError> {
        let unsupported = || SigningError::UnsupportedKey {
            origin: origin.to_owned(),
        };
        if let Ok(key) = jsonwebtoken::EncodingKey::from_ed_pem(pem) {
            let pair = Ed25519KeyPair::from_pkcs8(key.as_bytes()).map_err(|_| unsupported())?;
            return Ok(Self::from_pair(Pair::Ed(pair)));
        }
        if let Ok(key) = jsonwebtoken::EncodingKey::from_ec_pem(pem) {
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, key.as_bytes())
                .map_err(|_| unsupported())?;
            return Ok(Self::from_pair(Pair::Es(pair)));
        }
        Err(unsupported())
    }

    /// Reads [`SigningKey::from_pem`] from a file.
    pub fn from_pem_file(path: &Path) -> Result<Self, SigningError> {
        let pem = std::fs::read(path).map_err(|source| SigningError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_pem(&pem, &path.display().to_string())
    }

    /// A fresh Ed25519 key and its PKCS#8 (v1) PEM encoding.
    pub fn generate_ed25519() -> Result<(Self, String), SigningError> {
        let document = Ed25519KeyPair::generate_pkcs8v1(&SystemRandom::new())
            .map_err(|_| SigningError::Crypto)?;
        let pair =
            Ed25519KeyPair::from_pkcs8(document.as_ref()).map_err(|_| SigningError::Crypto)?;
        Ok((
            Self::from_pair(Pair::Ed(pair)),
            pem_encode(document.as_ref()),
        ))
    }

    fn from_pair(pair: Pair) -> Self {
        let (alg, mut jwk, thumbprint_input) = match &pair {
            Pair::Ed(p) => {
                let x = URL_SAFE_NO_PAD.encode(p.public_key().as_ref());
                let input = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
                (
                    SigningAlgorithm::EdDSA,
                    json!({"kty": "OKP", "crv": "Ed25519", "x": x}),
                    input,
                )
            }
            Pair::Es(p) => {
                // An uncompressed SEC1 point: 0x04 || x (32 bytes) || y (32 bytes).
                let point = p.public_key().as_ref();
                let (x, y) = point
                    .get(1..)
                    .unwrap_or_default()
                    .split_at(32.min(point.len()));
                let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
                let input = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
                (
                    SigningAlgorithm::ES256,
                    json!({"kty": "EC", "crv": "P-256", "x": x, "y": y}),
                    input,
                )
            }
        };
        // RFC 7638: the SHA-256 of the required members in lexicographic order, no spaces.
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(thumbprint_input.as_bytes()));
        if let Value::Object(map) = &mut jwk {
            map.insert("kid".into(), Value::String(kid.clone()));
            map.insert("alg".into(), Value::String(alg.as_str().into()));
            map.insert("use".into(), Value::String("sig".into()));
        }
        let header = json!({"alg": alg.as_str(), "typ": "JWT", "kid": kid});
        let header_b64 = URL_SAFE_NO_PAD.encode(header.to_string());
        Self {
            pair,
            kid,
            jwk,
            header_b64,
        }
    }

    /// The key id: the RFC 7638 SHA-256 thumbprint of the public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> SigningAlgorithm {
        match self.pair {
            Pair::Ed(_) => SigningAlgorithm::EdDSA,
            Pair::Es(_) => SigningAlgorithm::ES256,
        }
    }

    /// The public key as a JWK (`kty`, `crv`, `x`[, `y`], `kid`, `alg`, `use`).
    pub fn public_jwk(&self) -> &Value {
        &self.jwk
    }

    fn sign_bytes(&self, message: &[u8]) -> Result<Vec<u8>, SigningError> {
        match &self.pair {
            Pair::Ed(p) => Ok(p.sign(message).as_ref().to_vec()),
            Pair::Es(p) => p
                .sign(&SystemRandom::new(), message)
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| SigningError::Crypto),
        }
    }
}

fn pem_encode(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

/// What a signed call asserts, apart from `iss` and `exp` (the signer adds those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallClaims {
    /// The target origin, `scheme://host[:port]` (default port omitted).
    pub aud: String,
    /// The environment (tenant) the schedule belongs to.
    pub env_id: Uuid,
    /// The schedule that fired.
    pub schedule_id: Uuid,
    /// The job (attempt group) being run.
    pub job_id: Uuid,
    /// Unique per signed call, so a receiver can tell a replayed request (the same `jti`)
    /// from a retry (a new `jti`, the same `Idempotency-Key`).
    pub jti: String,
    /// Base64url (unpadded) SHA-256 of the exact body bytes.
    pub body_sha256: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: i64,
}

impl CallClaims {
    /// The claims for a call to `target` carrying `body`, issued at `iat` (Unix seconds),
    /// with a fresh `jti`. The audience is `target`'s canonical origin, whatever its path.
    pub fn for_call(
        target: &url::Url,
        env_id: Uuid,
        schedule_id: Uuid,
        job_id: Uuid,
        body: &[u8],
        iat: i64,
    ) -> Result<Self, SigningError> {
        Ok(Self {
            aud: target_origin(target)?,
            env_id,
            schedule_id,
            job_id,
            jti: Uuid::new_v4().to_string(),
            body_sha256: body_sha256(body),
            iat,
        })
    }
}

/// The canonical origin of an http(s) URL, `scheme://host[:port]`: the default port omitted,
/// a name lowercased (punycode) without a trailing dot, an IPv4-mapped IPv6 address written as
/// the IPv4 address it is, other IPv6 addresses bracketed and compressed.
/// It is the origin the egress policy judged, so a receiver that knows itself as
/// `http://127.0.0.1:8080` accepts a call the policy let through as `http://[::ffff:7f00:1]:8080`.
pub fn target_origin(url: &url::Url) -> Result<String, SigningError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(SigningError::NoOrigin);
    }
    let host = super::egress::judged_origin_host(url).ok_or(SigningError::NoOrigin)?;
    // `port()` is `None` for the scheme's default port.
    Ok(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// Base64url (unpadded) SHA-256 of `body`: the `body_sha256` claim.
pub fn body_sha256(body: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(body))
}

#[derive(Serialize)]
struct WireClaims<'a> {
    iss: &'a str,
    aud: &'a str,
    env_id: &'a Uuid,
    schedule_id: &'a Uuid,
    job_id: &'a Uuid,
    jti: &'a str,
    body_sha256: &'a str,
    iat: i64,
    exp: i64,
}

/// Signs proxy-back calls with the current key and publishes every configured public key.
#[derive(Debug)]
pub struct CallSigner {
    issuer: String,
    current: SigningKey,
    previous: Vec<SigningKey>,
    ttl: Duration,
}

impl CallSigner {
    /// A signer for `issuer` that signs with `current` and still publishes `previous`.
    pub fn new(
        issuer: impl Into<String>,
        current: SigningKey,
        previous: Vec<SigningKey>,
    ) -> Result<Self, SigningError> {
        let issuer = issuer.into();
        if issuer.trim().is_empty() {
            return Err(SigningError::EmptyIssuer);
        }
        let mut seen = vec![current.kid.as_str()];
        for key in &previous {
            if seen.contains(&key.kid.as_str()) {
                return Err(SigningError::DuplicateKey {
                    kid: key.kid.clone(),
                });
            }
            seen.push(&key.kid);
        }
        Ok(Self {
            issuer,
            current,
            previous,
            ttl: MAX_CALL_TTL,
        })
    }

    /// A signer from PEM files: `current` signs, `previous` are only published.
    pub fn from_pem_files(
        issuer: impl Into<String>,
        current: &Path,
        previous: &[&Path],
    ) -> Result<Self, SigningError> {
        let current = SigningKey::from_pem_file(current)?;
        let previous = previous
            .iter()
            .map(|p| SigningKey::from_pem_file(p))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(issuer, current, previous)
    }

    /// A signer with a fresh Ed25519 key, kept only in memory.
    pub fn generate_dev(issuer: impl Into<String>) -> Result<Self, SigningError> {
        let (key, _pem) = SigningKey::generate_ed25519()?;
        Self::new(issuer, key, Vec::new())
    }

    /// Development mode: the key in `path` (PKCS#8 PEM), generated and written (mode 0600,
    /// never overwriting an existing file) when the file does not exist yet, so restarts keep
    /// the same key. Meant for a file beside the embedded database.
    pub fn load_or_create(issuer: impl Into<String>, path: &Path) -> Result<Self, SigningError> {
        let io_err = |source| SigningError::Io {
            path: path.display().to_string(),
            source,
        };
        if path.exists() {
            return Self::new(issuer, SigningKey::from_pem_file(path)?, Vec::new());
        }
        let (key, pem) = SigningKey::generate_ed25519()?;
        // Written to a private temporary file first, then linked into place: a reader never
        // sees a half-written key, and a concurrent creator's key is never overwritten.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let tmp_name = format!(
            ".{}.{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "signing-key".into()),
            Uuid::new_v4().simple()
        );
        let tmp = dir.map_or_else(|| tmp_name.clone().into(), |d| d.join(&tmp_name));
        let write = || -> std::io::Result<()> {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&tmp)?;
            file.write_all(pem.as_bytes())?;
            file.sync_all()
        };
        let linked = write().and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Self::new(issuer, key, Vec::new()),
            // Another process created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::new(issuer, SigningKey::from_pem_file(path)?, Vec::new())
            }
            Err(e) => Err(io_err(e)),
        }
    }

    /// Sets the lifetime of signed calls (`exp - iat`), at most [`MAX_CALL_TTL`].
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self, SigningError> {
        if ttl.as_secs() == 0 || ttl > MAX_CALL_TTL {
            return Err(SigningError::InvalidTtl);
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// The `iss` claim.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The signing key.
    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// The lifetime of signed calls.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A compact JWS (`header.claims.signature`) for `claims`, signed with the current key:
    /// header `alg`, `typ: JWT`, `kid`; claims `iss`, `aud`, `env_id`, `schedule_id`,
    /// `job_id`, `jti`, `body_sha256`, `iat`, `exp = iat + ttl`.
    pub fn sign(&self, claims: &CallClaims) -> Result<String, SigningError> {
        let wire = WireClaims {
            iss: &self.issuer,
            aud: &claims.aud,
            env_id: &claims.env_id,
            schedule_id: &claims.schedule_id,
            job_id: &claims.job_id,
            jti: &claims.jti,
            body_sha256: &claims.body_sha256,
            iat: claims.iat,
            // ttl ≤ 300 s, so the cast cannot truncate.
            exp: claims.iat.saturating_add(self.ttl.as_secs() as i64),
        };
        let payload = serde_json::to_vec(&wire).map_err(|_| SigningError::Crypto)?;
        let header = &self.current.header_b64;
        let mut token = String::with_capacity(header.len() + payload.len() * 4 / 3 + 100);
        token.push_str(header);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(&payload, &mut token);
        let signature = self.current.sign_bytes(token.as_bytes())?;
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }

    /// The public JWK set (`{"keys": [...]}`), the current key first, for
    /// `GET /.well-known/jwks.json`.
    pub fn jwks(&self) -> Value {
        let keys: Vec<Value> = std::iter::once(&self.current)
            .chain(&self.previous)
            .map(|k| k.jwk.clone())
            .collect();
        json!({ "keys": keys })
    }
}

#[cfg(test)]
mod tests;
