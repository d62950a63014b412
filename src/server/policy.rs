//! Authorization: which [`Principal`] may do what to which environment.
//!
//! Pure functions, no I/O. The lattice of scopes is
//!
//! - [`SCOPE_READ`]: read the schedules of the granted environments;
//! - [`SCOPE_WRITE`]: everything read allows, plus every mutation, in the granted environments;
//! - [`SCOPE_ADMIN`]: everything write allows, in every environment, whatever the token's
//!   environment list says.
//!
//! Any other scope is ignored. A principal with none of the three may do nothing.

use axum::http::StatusCode;

use crate::core::model::EnvId;
use crate::server::auth::{EnvGrant, Principal};

/// Read the schedules (and jobs, dead letters, events) of the granted environments.
pub const SCOPE_READ: &str = "sentin8:cron:read";
/// Create, change, pause, trigger and delete in the granted environments. Implies read.
pub const SCOPE_WRITE: &str = "sentin8:cron:write";
/// Everything, in every environment. Implies write and read.
pub const SCOPE_ADMIN: &str = "sentin8:cron:admin";

/// What a request does to an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Looks only.
    Read,
    /// Changes anything (every mutation, including triggering a run or replaying a dead letter).
    Write,
}

impl Access {
    /// The least scope that grants this access (admin grants it too).
    pub fn required_scope(self) -> &'static str {
        match self {
            Access::Read => SCOPE_READ,
            Access::Write => SCOPE_WRITE,
        }
    }
}

/// Why a request is refused. Maps to `403 Forbidden`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The caller is authenticated but not allowed. `reason` is safe to show the caller.
    #[error("forbidden: {reason}")]
    Forbidden { reason: &'static str },
}

impl PolicyError {
    /// Always `403 Forbidden`.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::FORBIDDEN
    }

    /// The reason, for the response body.
    pub fn reason(&self) -> &'static str {
        match self {
            PolicyError::Forbidden { reason } => reason,
        }
    }
}

const MISSING_READ: &str = "missing scope sentin8:cron:read";
const MISSING_WRITE: &str = "missing scope sentin8:cron:write";
const ENV_NOT_GRANTED: &str = "environment not granted";

/// Whether the principal holds the admin scope.
pub fn is_admin(principal: &Principal) -> bool {
    principal.scopes.contains(SCOPE_ADMIN)
}

/// Whether the principal's scopes allow `access` somewhere (environments aside).
pub fn allows(principal: &Principal, access: Access) -> bool {
    let scopes = &principal.scopes;
    let write = scopes.contains(SCOPE_WRITE) || scopes.contains(SCOPE_ADMIN);
    match access {
        Access::Write => write,
        Access::Read => write || scopes.contains(SCOPE_READ),
    }
}

/// Whether the principal holds any of the read, write or admin scopes, i.e. may see anything at
/// all.
pub fn has_any_scope(principal: &Principal) -> bool {
    allows(principal, Access::Read)
}

/// Allows `access` to `env`, or says why not. The scope is checked before the environment, so a
/// caller lacking both is told about the scope.
pub fn authorize(principal: &Principal, env: EnvId, access: Access) -> Result<(), PolicyError> {
    if is_admin(principal) {
        return Ok(());
    }
    if !allows(principal, access) {
        let reason = match access {
            Access::Read => MISSING_READ,
            Access::Write => MISSING_WRITE,
        };
        return Err(PolicyError::Forbidden { reason });
    }
    if !principal.envs.contains(env) {
        return Err(PolicyError::Forbidden {
            reason: ENV_NOT_GRANTED,
        });
    }
    Ok(())
}

/// The environments the principal may at least read: all of them for an admin, none without
/// any relevant scope, otherwise the token's list. For pages that let the caller pick one.
pub fn granted_envs(principal: &Principal) -> EnvGrant {
    if is_admin(principal) {
        EnvGrant::All
    } else if !has_any_scope(principal) {
        EnvGrant::none()
    } else {
        principal.envs.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;
    use uuid::Uuid;

    use super::*;

    fn env(n: u128) -> EnvId {
        EnvId(Uuid::from_u128(n))
    }

    fn principal(scopes: &[&str], envs: EnvGrant) -> Principal {
        Principal {
            subject: "svc".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            envs,
            dev: false,
            expires_at: None,
        }
    }

    fn some(envs: &[EnvId]) -> EnvGrant {
        EnvGrant::Some(envs.iter().copied().collect())
    }

    const NOT_GRANTED: Result<(), PolicyError> = Err(PolicyError::Forbidden {
        reason: "environment not granted",
    });
    const NO_READ: Result<(), PolicyError> = Err(PolicyError::Forbidden {
        reason: "missing scope sentin8:cron:read",
    });
    const NO_WRITE: Result<(), PolicyError> = Err(PolicyError::Forbidden {
        reason: "missing scope sentin8:cron:write",
    });

    /// Every combination of the three scopes, both accesses and four kinds of environment grant,
    /// against a table written out by hand.
    #[test]
    fn full_matrix() {
        let mine = env(1);
        let other = env(2);
        // (scopes, read on a granted env, write on a granted env); on an env not granted only
        // admin passes, and the scope failure is reported before the environment one.
        type Row = (
            &'static [&'static str],
            Result<(), PolicyError>,
            Result<(), PolicyError>,
        );
        let table: &[Row] = &[
            (&[], NO_READ, NO_WRITE),
            (&[SCOPE_READ], Ok(()), NO_WRITE),
            (&[SCOPE_WRITE], Ok(()), Ok(())),
            (&[SCOPE_READ, SCOPE_WRITE], Ok(()), Ok(())),
            (&[SCOPE_ADMIN], Ok(()), Ok(())),
            (&[SCOPE_READ, SCOPE_ADMIN], Ok(()), Ok(())),
            (&[SCOPE_WRITE, SCOPE_ADMIN], Ok(()), Ok(())),
            (&[SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN], Ok(()), Ok(())),
        ];
        for (scopes, read, write) in table {
            let admin = scopes.contains(&SCOPE_ADMIN);
            let ungranted = |expected: &Result<(), PolicyError>| {
                if admin {
                    Ok(())
                } else if expected.is_ok() {
                    NOT_GRANTED
                } else {
                    expected.clone()
                }
            };
            for grant in [some(&[mine]), some(&[mine, other]), EnvGrant::All] {
                let p = principal(scopes, grant.clone());
                assert_eq!(
                    &authorize(&p, mine, Access::Read),
                    read,
                    "{scopes:?} {grant:?}"
                );
                assert_eq!(
                    &authorize(&p, mine, Access::Write),
                    write,
                    "{scopes:?} {grant:?}"
                );
            }
            for grant in [some(&[other]), EnvGrant::none()] {
                let p = principal(scopes, grant.clone());
                assert_eq!(
                    authorize(&p, mine, Access::Read),
                    ungranted(read),
                    "{scopes:?} {grant:?}"
                );
                assert_eq!(
                    authorize(&p, mine, Access::Write),
                    ungranted(write),
                    "{scopes:?} {grant:?}"
                );
            }
        }
    }

    #[test]
    fn unknown_scopes_grant_nothing() {
        let p = principal(
            &[
                "sentin8:cron:superuser",
                "read",
                "SENTIN8:CRON:ADMIN",
                "openid",
            ],
            EnvGrant::All,
        );
        assert!(!has_any_scope(&p));
        assert_eq!(authorize(&p, env(1), Access::Read), NO_READ);
        assert_eq!(granted_envs(&p), EnvGrant::none());
    }

    #[test]
    fn granted_envs_follow_the_scopes() {
        let list = some(&[env(1), env(2)]);
        assert_eq!(granted_envs(&principal(&[SCOPE_READ], list.clone())), list);
        assert_eq!(granted_envs(&principal(&[SCOPE_WRITE], list.clone())), list);
        assert_eq!(
            granted_envs(&principal(&[SCOPE_ADMIN], list.clone())),
            EnvGrant::All
        );
        assert_eq!(granted_envs(&principal(&[], list)), EnvGrant::none());
    }

    #[test]
    fn errors_map_to_403_with_a_showable_reason() {
        let err = authorize(
            &principal(&[SCOPE_READ], EnvGrant::All),
            env(1),
            Access::Write,
        )
        .unwrap_err();
        assert_eq!(err.status_code(), StatusCode::FORBIDDEN);
        assert_eq!(err.reason(), "missing scope sentin8:cron:write");
        assert_eq!(
            err.to_string(),
            "forbidden: missing scope sentin8:cron:write"
        );
        assert_eq!(Access::Read.required_scope(), SCOPE_READ);
        assert_eq!(Access::Write.required_scope(), SCOPE_WRITE);
    }

    fn arb_principal() -> impl Strategy<Value = Principal> {
        let scope = prop_oneof![
            Just(SCOPE_READ.to_owned()),
            Just(SCOPE_WRITE.to_owned()),
            Just(SCOPE_ADMIN.to_owned()),
            "[a-z:]{0,20}",
        ];
        let grant = prop_oneof![
            1 => Just(EnvGrant::All),
            4 => proptest::collection::btree_set(0u128..6, 0..6)
                .prop_map(|ids| EnvGrant::Some(ids.into_iter().map(env).collect())),
        ];
        (
            proptest::collection::btree_set(scope, 0..5),
            grant,
            any::<bool>(),
        )
            .prop_map(|(scopes, envs, dev)| Principal {
                subject: "p".into(),
                scopes,
                envs,
                dev,
                expires_at: None,
            })
    }

    fn arb_access() -> impl Strategy<Value = Access> {
        prop_oneof![Just(Access::Read), Just(Access::Write)]
    }

    proptest! {
        #[test]
        fn write_implies_read(p in arb_principal(), e in 0u128..6) {
            if authorize(&p, env(e), Access::Write).is_ok() {
                prop_assert!(authorize(&p, env(e), Access::Read).is_ok());
            }
        }

        #[test]
        fn admin_may_do_everything(mut p in arb_principal(), e in any::<u128>(), a in arb_access()) {
            p.scopes.insert(SCOPE_ADMIN.to_owned());
            prop_assert_eq!(authorize(&p, env(e), a), Ok(()));
            prop_assert_eq!(granted_envs(&p), EnvGrant::All);
        }

        #[test]
        fn no_scope_means_nothing(mut p in arb_principal(), e in 0u128..6, a in arb_access()) {
            p.scopes.retain(|s| ![SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN].contains(&s.as_str()));
            prop_assert!(!has_any_scope(&p));
            prop_assert!(authorize(&p, env(e), a).is_err());
            prop_assert_eq!(granted_envs(&p), EnvGrant::Some(BTreeSet::new()));
        }

        #[test]
        fn ungranted_env_is_forbidden_unless_admin(
            p in arb_principal(),
            e in 0u128..6,
            a in arb_access(),
        ) {
            let granted = match &p.envs {
                EnvGrant::All => true,
                EnvGrant::Some(ids) => ids.contains(&env(e)),
            };
            let result = authorize(&p, env(e), a);
            if !granted && !is_admin(&p) {
                prop_assert!(result.is_err());
            }
            // The whole rule, stated independently of the implementation's order of checks.
            let scope_ok = match a {
                Access::Read => p.scopes.iter().any(|s| [SCOPE_READ, SCOPE_WRITE].contains(&s.as_str())),
                Access::Write => p.scopes.contains(SCOPE_WRITE),
            };
            prop_assert_eq!(result.is_ok(), is_admin(&p) || (scope_ok && granted));
        }

        #[test]
        fn granted_envs_agree_with_authorize(p in arb_principal(), e in 0u128..6) {
            let listed = granted_envs(&p).contains(env(e));
            prop_assert_eq!(listed, authorize(&p, env(e), Access::Read).is_ok());
        }
    }
}
