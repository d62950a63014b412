//! The development token, accepted as an admin: random per process, or one the operator
//! fixed (`SENTIN8_CRON_DEV_TOKEN`) so a restart does not force re-pasting it.

use std::fmt;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AuthError, Authenticator, DEV_TOKEN_PREFIX, EnvGrant, Principal, bearer_token};
use crate::server::policy::{SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};

/// Accepts exactly one random token, generated at start-up, as an admin over every
/// environment (`dev: true`). For local development: the token is printed once by the caller
/// and lives as long as the process.
pub struct DevTokenAuthenticator {
    /// The token's SHA-256: comparing fixed-size digests leaks neither content nor length.
    digest: [u8; 32],
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl fmt::Debug for DevTokenAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DevTokenAuthenticator(<redacted>)")
    }
}

impl DevTokenAuthenticator {
    /// A fresh authenticator and its token: [`DEV_TOKEN_PREFIX`] followed by 256 bits from the
    /// operating system's RNG, base64url-encoded.
    ///
    /// # Panics
    ///
    /// When the operating system's RNG fails, which leaves no safe token to make. Use
    /// [`DevTokenAuthenticator::try_generate`] to handle that instead.
    pub fn generate() -> (Self, String) {
        match Self::try_generate() {
            Ok(pair) => pair,
            Err(err) => panic!("the operating system's random number generator failed: {err}"),
        }
    }

    /// Like [`DevTokenAuthenticator::generate`], reporting an RNG failure.
    pub fn try_generate() -> Result<(Self, String), getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        let token = format!("{DEV_TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        Ok((
            Self {
                digest: digest(&token),
            },
            token,
        ))
    }

    /// Accepts `token`, chosen by the operator: at least [`MIN_FIXED_TOKEN_LEN`] printable
    /// ASCII characters without spaces (it goes into an `Authorization` header).
    pub fn fixed(token: &str) -> Result<Self, DevTokenError> {
        if token.len() < MIN_FIXED_TOKEN_LEN {
            return Err(DevTokenError::TooShort);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(DevTokenError::NotPrintable);
        }
        Ok(Self {
            digest: digest(token),
        })
    }

    /// The principal every accepted request gets.
    pub fn principal() -> Principal {
        Principal {
            subject: "dev".to_owned(),
            scopes: [SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN]
                .into_iter()
                .map(str::to_owned)
                .collect(),
            envs: EnvGrant::All,
            dev: true,
            expires_at: None,
        }
    }
}

/// Shortest development token an operator may fix.
pub const MIN_FIXED_TOKEN_LEN: usize = 32;

/// Why a fixed development token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DevTokenError {
    #[error("must be at least {MIN_FIXED_TOKEN_LEN} characters")]
    TooShort,
    #[error("must be printable ASCII without spaces")]
    NotPrintable,
}

#[async_trait]
impl Authenticator for DevTokenAuthenticator {
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let token = bearer_token(authorization_header)?;
        // Constant time, and the same work whatever the presented token's length.
        if bool::from(digest(token).ct_eq(&self.digest)) {
            Ok(Self::principal())
        } else {
            tracing::debug!(mode = "dev", "bearer token rejected");
            Err(AuthError::Unrecognised)
        }
    }
}
