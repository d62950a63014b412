//! Bearer tokens beside the signature: OAuth2 tokens go only to origins the allow list names,
//! are requested and cached per origin, and a 401's resend is signed on its own.

use super::*;

#[tokio::test]
async fn oauth2_tokens_reach_only_origins_the_allow_list_names() {
    let tokens = RawServer::start(|_: &Recorded| {
        Reply::json(
            200,
            json!({"access_token": "m2m-token", "token_type": "Bearer", "expires_in": 3600}),
        )
    })
    .await;
    let listed = ok_target().await;
    let tenant_own = ok_target().await;
    let port = listed.url().rsplit(':').next().unwrap().to_owned();
    // The listed target is named exactly; a wildcard-port entry lets the same host's other
    // ports through, so a tenant can aim its base URL at a listener of its own.
    let egress = EgressPolicy::parse(
        &[
            format!("http://127.0.0.1:{port}"),
            "http://127.0.0.1:*".into(),
        ],
        None,
        false,
    )
    .unwrap();
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: format!("{}/oauth/token", tokens.url()),
            client_id: "cron".into(),
            client_secret: Secret::new("secret"),
            scope: None,
            resource_param: Some("resource".into()),
            audience_param: None,
        }),
        job_timeout: Duration::from_secs(10),
        egress,
        ..DispatchConfig::default()
    };
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let dispatcher = signed_dispatcher(&config, signer.clone());
    dispatcher.run(&run_request(&listed.url())).await.unwrap();
    dispatcher
        .run(&run_request(&tenant_own.url()))
        .await
        .unwrap();

    assert_eq!(listed.requests()[0].bearer(), Some("m2m-token"));
    let call = &tenant_own.requests()[0];
    assert_eq!(call.header("authorization"), None);
    assert!(!format!("{:?}", call.headers).contains("m2m-token"));
    verify(call, &signer.jwks(), &tenant_own.url()).unwrap();
    // No token was even asked for the tenant's origin.
    let asked: Vec<String> = tokens
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let listed_origin = listed.url().replace(':', "%3A").replace('/', "%2F");
    assert!(asked[0].contains(&format!("resource={listed_origin}")));
}

#[tokio::test]
async fn oauth2_tokens_are_requested_and_cached_per_origin() {
    let issued = Arc::new(AtomicUsize::new(0));
    let tokens = RawServer::start({
        let issued = issued.clone();
        move |_: &Recorded| {
            let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
            Reply::json(
                200,
                json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": 3600}),
            )
        }
    })
    .await;
    let first = ok_target().await;
    let second = ok_target().await;
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: format!("{}/oauth/token", tokens.url()),
            client_id: "cron".into(),
            client_secret: Secret::new("secret"),
            scope: None,
            resource_param: Some("resource".into()),
            audience_param: Some("aud_name".into()),
        }),
        job_timeout: Duration::from_secs(10),
        egress: dev_egress(),
        ..DispatchConfig::default()
    };
    let dispatcher = HttpDispatcher::new(&config).unwrap();
    for _ in 0..2 {
        dispatcher.run(&run_request(&first.url())).await.unwrap();
        dispatcher.run(&run_request(&second.url())).await.unwrap();
    }
    let bearers = |server: &RawServer| -> Vec<String> {
        server
            .requests()
            .iter()
            .map(|r| r.bearer().unwrap_or("<none>").to_owned())
            .collect()
    };
    assert_eq!(bearers(&first), ["tok-1", "tok-1"]);
    assert_eq!(bearers(&second), ["tok-2", "tok-2"]);
    let asked: Vec<String> = tokens
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(asked.len(), 2);
    for (form, target) in asked.iter().zip([&first, &second]) {
        let origin = target.url().replace(':', "%3A").replace('/', "%2F");
        assert!(form.contains(&format!("resource={origin}")), "{form}");
        assert!(form.contains(&format!("aud_name={origin}")), "{form}");
    }
}
