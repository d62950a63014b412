//! The cost of signing one proxy-back call: the body hash, the claims and the signature
//! (Ed25519, and ES256 for comparison). See BENCHMARKS.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sentin8_cron::callback::signing::{CallClaims, CallSigner, SigningKey};
use uuid::Uuid;

/// A fresh P-256 key as PKCS#8 PEM.
fn es256_pem() -> String {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use base64::Engine as _;
    let der = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &aws_lc_rs::rand::SystemRandom::new(),
    )
    .unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
}

fn bench(c: &mut Criterion) {
    let target = url::Url::parse("https://billing.svc.example.com/base").unwrap();
    // A typical run envelope: ids, an idempotency key and a small payload.
    let body = serde_json::to_vec(&serde_json::json!({
        "schedule_id": Uuid::now_v7(),
        "job_id": Uuid::now_v7(),
        "env_id": Uuid::now_v7(),
        "attempt": 1,
        "scheduled_for": "2026-01-01T00:00:00Z",
        "payload": {"report": "daily", "region": "eu-west-1", "limit": 500},
    }))
    .unwrap();
    let (env, schedule, job) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let ed = CallSigner::generate_dev("https://cron.example.com").unwrap();
    let es = CallSigner::new(
        "https://cron.example.com",
        SigningKey::from_pem(es256_pem().as_bytes(), "bench").unwrap(),
        Vec::new(),
    )
    .unwrap();

    let mut group = c.benchmark_group("call_signing");
    for (name, signer) in [("eddsa", &ed), ("es256", &es)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let claims = CallClaims::for_call(
                    &target,
                    env,
                    schedule,
                    job,
                    black_box(&body),
                    1_767_225_600,
                )
                .unwrap();
                black_box(signer.sign(&claims).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
