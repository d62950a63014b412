//! The M2M tokens of proxy-back calls: OAuth2 client credentials fetched, cached, refreshed
//! and retried after a 401; what the token endpoint's failures become.

use super::*;

#[tokio::test]
async fn oauth2_token_is_fetched_once_and_shared() {
    let tokens = token_server(json!(3600)).await;
    let target = ok_target().await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&tokens)).unwrap();

    // Concurrent first calls share one fetch rather than each refreshing.
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let dispatcher = dispatcher.clone();
        let request = run_request(Some(target.url()));
        calls.spawn(async move { dispatcher.run(&request).await });
    }
    while let Some(result) = calls.join_next().await {
        assert_eq!(result.unwrap(), Ok(json!({"ok": true})));
    }
    for _ in 0..3 {
        dispatcher
            .run(&run_request(Some(target.url())))
            .await
            .unwrap();
    }

    assert_eq!(tokens.requests().len(), 1);
    assert_eq!(bearers(&target), vec!["tok-1"; 11]);

    // The token request itself: client credentials, Basic client authentication, scope.
    let fetch = &tokens.requests()[0];
    assert_eq!(fetch.method, "POST");
    assert_eq!(fetch.path, "/oauth/token");
    assert_eq!(
        fetch.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        fetch.header("authorization"),
        Some(format!("Basic {BASIC_CREDENTIALS}").as_str())
    );
    let mut form: Vec<&str> = std::str::from_utf8(&fetch.body)
        .unwrap()
        .split('&')
        .collect();
    form.sort_unstable();
    // The token is asked for the target's origin, under both parameter names.
    let origin = target.url().replace(':', "%3A").replace('/', "%2F");
    assert_eq!(
        form,
        vec![
            format!("audience={origin}"),
            "grant_type=client_credentials".to_owned(),
            format!("resource={origin}"),
            "scope=schedules%3Arun".to_owned(),
        ]
    );
    // The secret travels only in the Authorization header.
    assert!(!String::from_utf8_lossy(&fetch.body).contains(CLIENT_SECRET));
}

#[tokio::test]
async fn oauth2_token_is_refreshed_shortly_before_expiry() {
    let tokens = token_server(json!(3600)).await;
    let target = ok_target().await;
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap(),
    ));
    let dispatcher = HttpDispatcher::with_clock(&oauth_config(&tokens), clock.clone()).unwrap();
    let request = run_request(Some(target.url()));
    let call = || dispatcher.run(&request);

    call().await.unwrap();
    // A 3600 s token is refreshed 30 s early: still fresh at 3569 s...
    clock.advance(TimeDelta::seconds(3569));
    call().await.unwrap();
    assert_eq!(tokens.requests().len(), 1);
    // ...and replaced at 3570 s.
    clock.advance(TimeDelta::seconds(1));
    call().await.unwrap();
    call().await.unwrap();
    assert_eq!(tokens.requests().len(), 2);
    assert_eq!(bearers(&target), vec!["tok-1", "tok-1", "tok-2", "tok-2"]);
}

#[tokio::test]
async fn tokens_without_a_positive_lifetime_are_not_cached() {
    for expires_in in [json!(0), json!(-10), Value::Null] {
        let tokens = token_server(expires_in.clone()).await;
        let target = ok_target().await;
        let dispatcher = HttpDispatcher::new(&oauth_config(&tokens)).unwrap();
        for _ in 0..2 {
            dispatcher
                .run(&run_request(Some(target.url())))
                .await
                .unwrap();
        }
        assert_eq!(tokens.requests().len(), 2, "expires_in {expires_in}");
        assert_eq!(bearers(&target), vec!["tok-1", "tok-2"]);
    }
}

#[tokio::test]
async fn a_401_refreshes_the_token_and_retries_once() {
    let tokens = token_server(json!(3600)).await;
    let target = RawServer::start(|r| match r.bearer() {
        Some("tok-1") => Reply::status(401),
        _ => Reply::json(200, json!({"second": "try"})),
    })
    .await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&tokens)).unwrap();

    let request = run_request(Some(target.url()));
    assert_eq!(dispatcher.run(&request).await, Ok(json!({"second": "try"})));
    assert_eq!(bearers(&target), vec!["tok-1", "tok-2"]);
    assert_eq!(tokens.requests().len(), 2);
    // The retry is the same call: same envelope, same idempotency key.
    let seen = target.requests();
    assert_eq!(seen[0].body, seen[1].body);
    assert_eq!(
        seen[1].header("idempotency-key"),
        Some(request.idempotency_key.as_str())
    );

    // The fresh token is cached for later calls.
    dispatcher.run(&request).await.unwrap();
    assert_eq!(tokens.requests().len(), 2);
}

#[tokio::test]
async fn a_second_401_is_final() {
    let tokens = token_server(json!(3600)).await;
    let target = RawServer::start(|_| Reply::status(401)).await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&tokens)).unwrap();

    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(err, DispatchError::Status(401, String::new()));
    assert_eq!(err.to_string(), "proxy-back status 401");
    assert_eq!(bearers(&target), vec!["tok-1", "tok-2"]);
    assert_eq!(tokens.requests().len(), 2);
}

#[tokio::test]
async fn a_static_token_is_not_retried_after_a_401() {
    let target = RawServer::start(|_| Reply::status(401)).await;
    let dispatcher = HttpDispatcher::new(&static_config("dev-token")).unwrap();
    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(err, DispatchError::Status(401, String::new()));
    // Resending the only token there is would be pointless.
    assert_eq!(target.requests().len(), 1);
}

#[tokio::test]
async fn token_endpoint_failures_are_token_errors_without_secrets() {
    let target = ok_target().await;
    let rejecting = RawServer::start(|_| {
        Reply::json(
            401,
            json!({"error": "invalid_client", "error_description": format!("bad secret {CLIENT_SECRET}")}),
        )
    })
    .await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&rejecting)).unwrap();
    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        DispatchError::Token("token endpoint returned status 401 (invalid_client)".into())
    );
    assert_eq!(
        err.to_string(),
        "M2M token: token endpoint returned status 401 (invalid_client)"
    );
    assert!(!format!("{err} {err:?}").contains(CLIENT_SECRET));

    let garbled = RawServer::start(|_| Reply::body(200, "text/plain", b"hello".to_vec())).await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&garbled)).unwrap();
    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "M2M token: token endpoint response is not JSON"
    );

    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: format!("http://{down}/oauth/token"),
            client_id: CLIENT_ID.into(),
            client_secret: Secret::new(CLIENT_SECRET),
            scope: None,
            resource_param: None,
            audience_param: None,
        }),
        ..oauth_config(&garbled)
    };
    let err = HttpDispatcher::new(&config)
        .unwrap()
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    let text = err.to_string();
    // The class only: the socket detail goes to the operator's log, not to the tenant's job.
    assert_eq!(text, "M2M token: token endpoint unreachable");
    assert!(!text.contains(CLIENT_SECRET), "{text}");

    // No target was ever called without a token.
    assert_eq!(target.connections(), 0);
}

#[test]
fn an_invalid_token_url_is_a_config_error() {
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: "idp.example/token".into(),
            client_id: CLIENT_ID.into(),
            client_secret: Secret::new(CLIENT_SECRET),
            scope: None,
            resource_param: None,
            audience_param: None,
        }),
        ..DispatchConfig::default()
    };
    let err = HttpDispatcher::new(&config).unwrap_err();
    assert!(matches!(err, ConfigError::InvalidUrl { .. }), "{err:?}");
    assert!(err.to_string().starts_with("SENTIN8_CRON_M2M_TOKEN_URL: "));
}
