//! Start-up wiring of proxy-back: the egress policy as the operations' [`TargetPolicy`], the
//! call signer (a key file, or in development mode a generated key kept beside the embedded
//! database), and the warnings an operator should see once.

use std::path::{Path, PathBuf};

use super::config::{DispatchConfig, ENV_SIGNING_KEY_FILE, SigningSettings, TokenSettings};
use super::egress::EgressPolicy;
use super::signing::{CallSigner, SigningError};
use crate::core::target::{BaseUrl, TargetPolicy};

impl TargetPolicy for EgressPolicy {
    fn check(&self, url: &BaseUrl) -> Result<(), String> {
        self.check_url_explained(url.as_url())
    }
}

/// Why no signer could be set up.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// Outside development mode a key file is required.
    #[error(
        "proxy-back calls are signed: set --signing-key-file ({ENV_SIGNING_KEY_FILE}) to a \
         PKCS#8 PEM Ed25519 or P-256 private key (only development mode, on the embedded store \
         without authentication, generates one)"
    )]
    KeyRequired,
    /// A private key file that users other than the owner can read (checked on Unix).
    #[error(
        "the signing key {path} is readable by other users (mode {mode:04o}): make it readable \
         by the service's user alone (chmod 600 or 400)"
    )]
    KeyFileExposed { path: PathBuf, mode: u32 },
    #[error(transparent)]
    Key(#[from] SigningError),
}

/// Where a development key lives when no key file is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevKey {
    /// Not development mode: a key file is required.
    None,
    /// Development mode on a database file: the key is kept in this file.
    File(PathBuf),
    /// Development mode on an in-memory database: a key for this process only.
    Memory,
}

impl DevKey {
    /// The development key of the database at `url` when `dev_mode`: a file beside an
    /// embedded SQLite file (`{database}-signing-key.pem`), or memory for `sqlite::memory:`.
    pub fn for_database(url: &str, dev_mode: bool) -> DevKey {
        if !dev_mode {
            return DevKey::None;
        }
        match embedded_file(url) {
            Some(path) => {
                let mut name = path.file_name().unwrap_or_default().to_os_string();
                name.push("-signing-key.pem");
                DevKey::File(path.with_file_name(name))
            }
            None => DevKey::Memory,
        }
    }
}

/// The file of an embedded SQLite URL (`sqlite://path`, `sqlite:path`, query ignored);
/// `None` for an in-memory database or another scheme.
fn embedded_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || query.contains("mode=memory") {
        return None;
    }
    Some(Path::new(path).to_path_buf())
}

/// The signer of proxy-back calls: the configured key file (and previous keys), else the
/// development key, else [`SignerError::KeyRequired`]. A key file other users can read is
/// refused, or in development mode only warned about.
pub fn call_signer(settings: &SigningSettings, dev: &DevKey) -> Result<CallSigner, SignerError> {
    let issuer = settings.issuer.clone();
    if let Some(current) = &settings.key_file {
        let previous: Vec<&Path> = settings
            .previous_files
            .iter()
            .map(PathBuf::as_path)
            .collect();
        for path in std::iter::once(current.as_path()).chain(previous.iter().copied()) {
            check_private(path, *dev != DevKey::None)?;
        }
        return Ok(CallSigner::from_pem_files(issuer, current, &previous)?);
    }
    match dev {
        DevKey::None => Err(SignerError::KeyRequired),
        DevKey::File(path) => {
            // Created 0600; one loosened since is reported, not refused (development mode).
            if path.exists() {
                check_private(path, true)?;
            }
            Ok(CallSigner::load_or_create(issuer, path)?)
        }
        DevKey::Memory => Ok(CallSigner::generate_dev(issuer)?),
    }
}

/// Refuses (or with `warn_only`, logs) a key file whose group or other users may read it. A
/// file that cannot be inspected is left to the read that follows, which names the error.
#[cfg(unix)]
fn check_private(path: &Path, warn_only: bool) -> Result<(), SignerError> {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o044 == 0 {
        return Ok(());
    }
    let exposed = SignerError::KeyFileExposed {
        path: path.to_path_buf(),
        mode,
    };
    if warn_only {
        tracing::warn!("{exposed} (accepted in development mode only)");
        return Ok(());
    }
    Err(exposed)
}

#[cfg(not(unix))]
fn check_private(_path: &Path, _warn_only: bool) -> Result<(), SignerError> {
    Ok(())
}

/// Logs, once at start-up, what the operator should know of the proxy-back configuration.
pub fn warn_about(config: &DispatchConfig) {
    let egress = &config.egress;
    if egress.is_empty() && !egress.dev_mode() {
        tracing::warn!(
            "the egress policy allows no target: every proxy-back call will be refused until \
             SENTIN8_CRON_TARGET_ALLOW or SENTIN8_CRON_PLATFORM_DOMAIN is set"
        );
    }
    if matches!(config.token, TokenSettings::Static(_)) && !egress.dev_mode() {
        tracing::warn!(
            "the static SENTIN8_CRON_TOKEN is sent only to origins SENTIN8_CRON_TARGET_ALLOW \
             names exactly (a host or address, not a wildcard or network); other targets get \
             signed calls without a bearer token"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_key_lives_beside_the_database_file() {
        let key = |url: &str| DevKey::for_database(url, true);
        assert_eq!(
            key("sqlite://sentin8-cron.db"),
            DevKey::File("sentin8-cron.db-signing-key.pem".into())
        );
        assert_eq!(
            key("sqlite:///var/lib/cron/cron.db?mode=rwc"),
            DevKey::File("/var/lib/cron/cron.db-signing-key.pem".into())
        );
        assert_eq!(key("sqlite::memory:"), DevKey::Memory);
        assert_eq!(key("sqlite://x.db?mode=memory"), DevKey::Memory);
        assert_eq!(DevKey::for_database("sqlite://x.db", false), DevKey::None);
    }

    #[test]
    fn outside_dev_mode_a_key_file_is_required() {
        let err = call_signer(&SigningSettings::default(), &DevKey::None).unwrap_err();
        assert!(
            err.to_string()
                .contains("--signing-key-file (SENTIN8_CRON_SIGNING_KEY_FILE)"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_read_is_refused_outside_development_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signing.pem");
        let (_, pem) = crate::callback::signing::SigningKey::generate_ed25519().unwrap();
        std::fs::write(&path, pem).unwrap();
        let settings = SigningSettings {
            key_file: Some(path.clone()),
            ..SigningSettings::default()
        };
        let chmod = |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        for exposed in [0o644, 0o640, 0o604] {
            chmod(exposed).unwrap();
            let err = call_signer(&settings, &DevKey::None).unwrap_err();
            assert!(
                matches!(err, SignerError::KeyFileExposed { mode, .. } if mode == exposed),
                "{err}"
            );
            assert!(err.to_string().contains("chmod 600"), "{err}");
            // Development mode accepts it, with a warning.
            call_signer(&settings, &DevKey::Memory).unwrap();
        }
        for private in [0o600, 0o400] {
            chmod(private).unwrap();
            call_signer(&settings, &DevKey::None).unwrap();
        }
        // A previous key is held to the same rule.
        let previous = dir.path().join("previous.pem");
        let (_, pem) = crate::callback::signing::SigningKey::generate_ed25519().unwrap();
        std::fs::write(&previous, pem).unwrap();
        std::fs::set_permissions(&previous, std::fs::Permissions::from_mode(0o644)).unwrap();
        let rotated = SigningSettings {
            previous_files: vec![previous],
            ..settings
        };
        let err = call_signer(&rotated, &DevKey::None).unwrap_err();
        assert!(matches!(err, SignerError::KeyFileExposed { .. }), "{err}");
    }

    #[test]
    fn a_dev_key_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let dev = DevKey::File(dir.path().join("cron.db-signing-key.pem"));
        let first = call_signer(&SigningSettings::default(), &dev).unwrap();
        let again = call_signer(&SigningSettings::default(), &dev).unwrap();
        assert_eq!(first.current().kid(), again.current().kid());
        assert_eq!(first.issuer(), "sentin8-cron");
    }

    #[test]
    fn the_egress_policy_is_the_operations_target_policy() {
        let policy = EgressPolicy::parse(&["*.svc.example.com".into()], None, false).unwrap();
        let url = |s: &str| BaseUrl::parse(s).unwrap();
        assert!(TargetPolicy::check(&policy, &url("https://billing.svc.example.com")).is_ok());
        let refused = TargetPolicy::check(&policy, &url("http://169.254.169.254")).unwrap_err();
        assert!(refused.contains("169.254.169.254"), "{refused}");
    }
}
