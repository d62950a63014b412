//! The shared-secret mode: HS256 JWTs verified with one secret.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use jsonwebtoken::Algorithm;

use super::claims::{log_rejection, peek_header, verify};
use super::config::{ClaimRules, Hs256Key};
use super::{AuthError, Authenticator, Principal, bearer_token};
use crate::core::clock::Clock;

/// Verifies HS256 JWTs with a shared secret. Every other algorithm is refused.
#[derive(Clone)]
pub struct SharedSecretAuthenticator {
    key: Hs256Key,
    rules: ClaimRules,
    clock: Arc<dyn Clock>,
}

impl SharedSecretAuthenticator {
    pub fn new(key: Hs256Key, rules: ClaimRules, clock: Arc<dyn Clock>) -> Self {
        Self { key, rules, clock }
    }

    fn check(&self, header: Option<&str>) -> Result<Principal, AuthError> {
        let token = bearer_token(header)?;
        if peek_header(token)?.alg != Algorithm::HS256 {
            return Err(AuthError::UnsupportedAlgorithm);
        }
        verify(
            token,
            Algorithm::HS256,
            &self.key.0,
            &self.rules,
            self.clock.now(),
        )
    }
}

impl fmt::Debug for SharedSecretAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSecretAuthenticator")
            .field("key", &self.key)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Authenticator for SharedSecretAuthenticator {
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let result = self.check(authorization_header);
        log_rejection("hs256", &result);
        result
    }
}
