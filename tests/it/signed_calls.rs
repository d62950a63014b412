//! Signed proxy-back calls end to end: the calls real loopback targets receive carry a
//! `Sentin8-Signature` that verifies, with an independent JOSE implementation, against the key
//! set the service serves at `/.well-known/jwks.json`, bound to that target's origin and to the
//! exact body received; rotation keeps earlier calls verifiable; bearer tokens go only where
//! they may.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use sentin8_cron::callback::egress::EgressPolicy;
use sentin8_cron::callback::setup::{DevKey, call_signer};
use sentin8_cron::callback::signing::{CallSigner, SIGNATURE_HEADER, SigningKey};
use sentin8_cron::callback::{
    DispatchConfig, HttpDispatcher, OAuth2Settings, Secret, SigningSettings, TokenSettings,
};
use sentin8_cron::core::clock::SystemClock;
use sentin8_cron::core::dispatch::{Dispatcher, RunRequest};
use sentin8_cron::core::model::{EnvId, JobId, ScheduleId};
use sentin8_cron::core::target::Target;
use sentin8_cron::daemon::Service;
use sentin8_cron::server::auth::DevTokenAuthenticator;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::oneshot;

use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::dev_egress;

mod prepared;
mod tokens;

const ISSUER: &str = "https://cron.test";

fn run_request(base_url: &str) -> RunRequest {
    let schedule_id = ScheduleId::new();
    let job_id = JobId::new();
    RunRequest {
        schedule_id,
        job_id,
        domain: "billing".into(),
        schedule_type: "invoice.close".into(),
        env_id: EnvId::new(),
        payload: json!({"invoice": 42, "note": "naïve ✓"}),
        attempt: 1,
        scheduled_for: Utc::now(),
        correlation_id: schedule_id.to_string(),
        idempotency_key: format!("schedule:{schedule_id}:{job_id}"),
        base_url: Target::from_stored(json!({"baseUrl": base_url}))
            .base_url()
            .cloned()
            .map_err(Clone::clone),
        fence: None,
        trace: None,
        prepared: None,
    }
}

async fn ok_target() -> RawServer {
    RawServer::start(|_: &Recorded| Reply::json(200, json!({"ok": true}))).await
}

/// A running service publishing `jwks`; returns its base URL and the stop handle.
async fn serve_jwks(jwks: Value) -> (String, oneshot::Sender<()>) {
    let store = crate::support::sqlite_store().await;
    let (auth, _token) = DevTokenAuthenticator::generate();
    let service = Service {
        store,
        auth: Arc::new(auth),
        dispatcher: Arc::new(HttpDispatcher::new(&DispatchConfig::default()).unwrap()),
        clock: Arc::new(SystemClock),
        engine: Default::default(),
        metrics: Default::default(),
        tls: None,
        drain: Duration::from_secs(2),
        run_ticker: false,
        relay: None,
        extra_routes: axum::Router::new(),
        target_policy: Arc::new(dev_egress()),
        jwks: Some(jwks),
        health: Default::default(),
        retention: None,
        waiting_cap: sentin8_cron::core::ops::DEFAULT_WAITING_CAP,
        spans: None,
        limits: Default::default(),
        stats: Default::default(),
        metrics_listener: None,
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = oneshot::channel();
    tokio::spawn(service.run(listener, async move {
        let _ = rx.await;
    }));
    (base, tx)
}

/// The key set as a receiver fetches it, with the response's Cache-Control.
async fn fetch_jwks(base: &str) -> (Value, String) {
    let response = reqwest::get(format!("{base}/.well-known/jwks.json"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let cache = response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.json().await.unwrap(), cache)
}

/// What a receiver does: the key by `kid`, the signature with that key's algorithm, `iss`,
/// `aud` equal to its own origin, `exp`, then the body hash against the bytes it received.
fn verify(call: &Recorded, jwks: &Value, own_origin: &str) -> Result<Map<String, Value>, String> {
    let token = call.header("sentin8-signature").ok_or("no signature")?;
    let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
    let kid = header.kid.ok_or("no kid")?;
    let set: JwkSet = serde_json::from_value(jwks.clone()).map_err(|e| e.to_string())?;
    let jwk = set.find(&kid).ok_or("unknown kid")?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&[own_origin]);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| e.to_string())?
        .claims;
    let received = URL_SAFE_NO_PAD.encode(Sha256::digest(&call.body));
    if claims.get("body_sha256").and_then(Value::as_str) != Some(received.as_str()) {
        return Err("body hash mismatch".into());
    }
    Ok(claims)
}

fn signed_dispatcher(config: &DispatchConfig, signer: Arc<CallSigner>) -> HttpDispatcher {
    HttpDispatcher::new(config).unwrap().signed(signer)
}

fn static_config(egress: EgressPolicy) -> DispatchConfig {
    DispatchConfig {
        token: TokenSettings::Static(Secret::new("dev-static-token")),
        job_timeout: Duration::from_secs(10),
        egress,
        ..DispatchConfig::default()
    }
}

#[tokio::test]
async fn every_delivered_call_verifies_against_the_served_key_set() {
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let (base, _stop) = serve_jwks(signer.jwks()).await;
    let (jwks, cache_control) = fetch_jwks(&base).await;
    assert_eq!(cache_control, "public, max-age=300");
    assert_eq!(jwks, signer.jwks());

    let billing = ok_target().await;
    let reports = ok_target().await;
    let dispatcher = signed_dispatcher(&static_config(dev_egress()), signer);
    let requests = [
        run_request(&billing.url()),
        run_request(&format!("{}/reports/", reports.url())),
        run_request(&billing.url()),
    ];
    for request in &requests {
        dispatcher.run(request).await.unwrap();
    }

    // A retry of the same job: the same Idempotency-Key, a new jti, so a receiver tells a
    // retry from a replayed request.
    dispatcher.run(&requests[0]).await.unwrap();
    let billing_calls = billing.requests();
    let (first, retry) = (&billing_calls[0], &billing_calls[2]);
    assert_eq!(
        first.header("idempotency-key"),
        retry.header("idempotency-key")
    );
    let jti = |call: &Recorded| verify(call, &jwks, &billing.url()).unwrap()["jti"].clone();
    assert_ne!(jti(first), jti(retry));

    let calls: Vec<(Recorded, String)> = billing
        .requests()
        .into_iter()
        .map(|c| (c, billing.url()))
        .chain(reports.requests().into_iter().map(|c| (c, reports.url())))
        .collect();
    assert_eq!(calls.len(), 4);
    for (call, origin) in &calls {
        let claims = verify(call, &jwks, origin).unwrap_or_else(|e| panic!("{origin}: {e}"));
        let envelope = call.json();
        assert_eq!(claims["aud"], origin.as_str());
        assert_eq!(claims["env_id"], envelope["env_id"]);
        assert_eq!(claims["schedule_id"], envelope["schedule_id"]);
        assert_eq!(claims["job_id"], envelope["job_id"]);
        assert_ne!(
            claims["jti"].as_str(),
            call.header("idempotency-key"),
            "jti is per call, the idempotency key per job"
        );
        let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
        assert!((1..=300).contains(&lifetime), "{lifetime}");

        // A receiver at another origin refuses the same call, and a changed body fails.
        let elsewhere = if origin == &billing.url() {
            reports.url()
        } else {
            billing.url()
        };
        assert!(verify(call, &jwks, &elsewhere).is_err());
        let mut tampered = call.clone();
        tampered.body = tampered.body.replace(b"42", b"43");
        assert_eq!(
            verify(&tampered, &jwks, origin).unwrap_err(),
            "body hash mismatch"
        );
    }
}

trait ReplaceBytes {
    fn replace(&self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl ReplaceBytes for Vec<u8> {
    fn replace(&self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(self).replacen(
            std::str::from_utf8(from).unwrap(),
            std::str::from_utf8(to).unwrap(),
            1,
        );
        text.into_bytes()
    }
}

fn write_key(dir: &Path, name: &str) -> std::path::PathBuf {
    let (_, pem) = SigningKey::generate_ed25519().unwrap();
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    // A private key readable by others is refused outside development mode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path
}

#[tokio::test]
async fn after_a_rotation_calls_signed_by_the_previous_key_still_verify() {
    let dir = tempfile::tempdir().unwrap();
    let old_key = write_key(dir.path(), "old.pem");
    let new_key = write_key(dir.path(), "new.pem");
    let settings = |current: &Path, previous: &[&Path]| SigningSettings {
        key_file: Some(current.to_path_buf()),
        previous_files: previous.iter().map(|p| p.to_path_buf()).collect(),
        issuer: ISSUER.into(),
    };
    let target = ok_target().await;
    let config = static_config(dev_egress());

    // Before the rotation: the old key signs.
    let before = Arc::new(call_signer(&settings(&old_key, &[]), &DevKey::None).unwrap());
    signed_dispatcher(&config, before.clone())
        .run(&run_request(&target.url()))
        .await
        .unwrap();

    // After it: the new key signs and the old one is still published.
    let after = Arc::new(call_signer(&settings(&new_key, &[&old_key]), &DevKey::None).unwrap());
    assert_ne!(before.current().kid(), after.current().kid());
    signed_dispatcher(&config, after.clone())
        .run(&run_request(&target.url()))
        .await
        .unwrap();

    let (base, _stop) = serve_jwks(after.jwks()).await;
    let (jwks, _) = fetch_jwks(&base).await;
    let calls = target.requests();
    let kid = |call: &Recorded| {
        jsonwebtoken::decode_header(call.header("sentin8-signature").unwrap())
            .unwrap()
            .kid
            .unwrap()
    };
    assert_eq!(kid(&calls[0]), before.current().kid());
    assert_eq!(kid(&calls[1]), after.current().kid());
    for call in &calls {
        verify(call, &jwks, &target.url()).unwrap();
    }

    // Once the previous key is withdrawn, its calls no longer verify.
    let withdrawn = call_signer(&settings(&new_key, &[]), &DevKey::None).unwrap();
    assert_eq!(
        verify(&calls[0], &withdrawn.jwks(), &target.url()).unwrap_err(),
        "unknown kid"
    );
}

#[tokio::test]
async fn a_target_spelled_as_a_mapped_ipv6_address_is_signed_for_its_canonical_origin() {
    let target = ok_target().await;
    let port = target.url().rsplit(':').next().unwrap().to_owned();
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let egress = EgressPolicy::parse(&[format!("http://127.0.0.1:{port}")], None, false).unwrap();
    let dispatcher = signed_dispatcher(&static_config(egress), signer.clone());
    // The policy judges the address the spelling stands for; the receiver knows itself by
    // that address too, and accepts the call.
    dispatcher
        .run(&run_request(&format!("http://[::ffff:7f00:1]:{port}/")))
        .await
        .unwrap();
    let call = &target.requests()[0];
    let claims = verify(call, &signer.jwks(), &target.url()).unwrap();
    assert_eq!(claims["aud"], format!("http://127.0.0.1:{port}"));
}

#[tokio::test]
async fn the_static_token_reaches_only_origins_the_allow_list_names() {
    let listed = ok_target().await;
    let unlisted = ok_target().await;
    let port = listed.url().rsplit(':').next().unwrap().to_owned();
    // The listed target is named exactly; the other is reachable only through a network entry.
    let egress = EgressPolicy::parse(
        &[
            format!("http://127.0.0.1:{port}"),
            "http://127.0.0.0/8:*".into(),
        ],
        None,
        false,
    )
    .unwrap();
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let dispatcher = signed_dispatcher(&static_config(egress), signer.clone());
    dispatcher.run(&run_request(&listed.url())).await.unwrap();
    dispatcher.run(&run_request(&unlisted.url())).await.unwrap();

    assert_eq!(listed.requests()[0].bearer(), Some("dev-static-token"));
    let call = &unlisted.requests()[0];
    assert_eq!(call.header("authorization"), None);
    assert!(
        !format!("{:?}", call.headers).contains("dev-static-token"),
        "{call:?}"
    );
    // What the unlisted origin gets instead is a call only it can accept.
    verify(call, &signer.jwks(), &unlisted.url()).unwrap();

    // An entry naming the host with a wildcard port names no origin: a tenant's own listener
    // on another port of the same host gets the call, signed, and no token.
    let tenant_own = ok_target().await;
    let wildcard = EgressPolicy::parse(&["http://127.0.0.1:*".to_owned()], None, false).unwrap();
    let dispatcher = signed_dispatcher(&static_config(wildcard), signer.clone());
    dispatcher
        .run(&run_request(&tenant_own.url()))
        .await
        .unwrap();
    let call = &tenant_own.requests()[0];
    assert_eq!(call.header("authorization"), None);
    assert!(!format!("{:?}", call.headers).contains("dev-static-token"));
    verify(call, &signer.jwks(), &tenant_own.url()).unwrap();

    // In development mode (embedded store, no authentication) the token goes to loopback.
    let dev = signed_dispatcher(&static_config(dev_egress()), signer);
    dev.run(&run_request(&unlisted.url())).await.unwrap();
    assert_eq!(unlisted.requests()[1].bearer(), Some("dev-static-token"));
}

#[tokio::test]
async fn a_fired_schedule_calls_its_target_signed_for_that_target() {
    use sentin8_cron::core::clock::{Clock, ManualClock};
    use sentin8_cron::core::decl::ScheduleDecl;
    use sentin8_cron::core::engine::{Engine, EngineConfig};
    use sentin8_cron::core::metrics::Metrics;
    use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};

    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let (base, _stop) = serve_jwks(signer.jwks()).await;
    let target = ok_target().await;
    let store = crate::support::sqlite_store().await;
    // Near the real time, so the receiver's expiry check is a real one.
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let env = EnvId::new();
    let actor = Actor {
        name: "tester".into(),
        correlation_id: None,
        now: Utc::now(),
    };
    let spec = ScheduleDecl {
        schedule_type: "nightly".into(),
        cron: Some("* * * * *".into()),
        payload: Some(json!({"report": "daily"})),
        ..ScheduleDecl::default()
    }
    .validate(actor.now)
    .unwrap();
    let schedule = Ops::new(store.clone())
        .with_target_policy(Arc::new(dev_egress()))
        .schedule_create(
            env,
            CreateSchedule {
                domain: "reports".into(),
                spec,
                target: Target::validate(&json!({"baseUrl": format!("{}/reports", target.url())}))
                    .unwrap(),
            },
            &actor,
        )
        .await
        .unwrap();
    let engine = Engine::new(
        store,
        Arc::new(
            HttpDispatcher::with_clock(&static_config(dev_egress()), clock.clone())
                .unwrap()
                .signed(signer),
        ),
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    clock.set(schedule.next_run_at.unwrap());
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.succeeded, 1, "{summary:?}");

    let (jwks, _) = fetch_jwks(&base).await;
    let call = &target.requests()[0];
    assert_eq!(call.path, "/reports/v1/internal/schedules/run");
    let claims = verify(call, &jwks, &target.url()).unwrap();
    assert_eq!(claims["schedule_id"], schedule.id.to_string());
    assert_eq!(claims["env_id"], env.to_string());
    assert_eq!(claims["iat"], clock.now().timestamp());
}

/// A 401 is answered by sending the call again with a fresh token: a new request, signed on
/// its own (a new `jti`), so a target that accepts each `jti` once does not take it for a
/// replay of the first.
#[tokio::test]
async fn the_resend_after_a_401_has_its_own_signature() {
    let issued = Arc::new(AtomicUsize::new(0));
    let tokens = RawServer::start({
        let issued = issued.clone();
        move |_: &Recorded| {
            let n = issued.fetch_add(1, Ordering::SeqCst);
            Reply::json(
                200,
                json!({"access_token": format!("m2m-token-{n}"), "token_type": "Bearer", "expires_in": 3600}),
            )
        }
    })
    .await;
    let answered = Arc::new(AtomicUsize::new(0));
    let target = RawServer::start({
        let answered = answered.clone();
        move |_: &Recorded| match answered.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::status(401),
            _ => Reply::json(200, json!({"ok": true})),
        }
    })
    .await;
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: format!("{}/oauth/token", tokens.url()),
            client_id: "cron".into(),
            client_secret: Secret::new("secret"),
            scope: None,
            resource_param: None,
            audience_param: None,
        }),
        job_timeout: Duration::from_secs(10),
        egress: dev_egress(),
        ..DispatchConfig::default()
    };
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let dispatcher = signed_dispatcher(&config, signer.clone());
    dispatcher.run(&run_request(&target.url())).await.unwrap();

    let calls = target.requests();
    assert_eq!(calls.len(), 2, "the 401 and the resend");
    assert_eq!(calls[0].bearer(), Some("m2m-token-0"));
    assert_eq!(calls[1].bearer(), Some("m2m-token-1"));
    assert_eq!(
        calls[0].header("idempotency-key"),
        calls[1].header("idempotency-key")
    );
    let claims: Vec<_> = calls
        .iter()
        .map(|call| verify(call, &signer.jwks(), &target.url()).unwrap())
        .collect();
    assert_ne!(claims[0]["jti"], claims[1]["jti"], "a jti per request sent");
    assert_ne!(
        calls[0].header(SIGNATURE_HEADER),
        calls[1].header(SIGNATURE_HEADER)
    );
}
