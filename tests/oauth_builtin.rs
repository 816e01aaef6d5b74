//! OAuth with the built-in authorization server (`--oauth builtin`), driven as remote clients
//! use it through the real binary: registration, the consent page, PKCE, tokens, refresh,
//! revocation, `capvault passwd` and `capvault tokens`, and the limits that keep one client
//! from denying another. HTTP by reqwest with redirects off; MCP by rmcp's client with the
//! access token. The Python SDK's OAuth client and a real browser on the consent page are in
//! tests/python and tests/browser. Shared helpers: tests/common/oauth.rs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::oauth::*;
use crate::common::{HttpChild, poll, run, write_tree};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_server_discovery_consent_tokens_session_and_rotation() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, true).await;
    let base = base_url(&server);

    // Discovery: 401 points at the resource metadata, which names this server as issuer.
    let r = http().post(&server.url).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
        )) && challenge.contains("scope=\"vault:read vault:write\""),
        "{challenge}"
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let prm: Value = serde_json::from_str(&get(&format!("{base}{path}")).await.body).unwrap();
        assert_eq!(prm["resource"], format!("{base}/mcp"));
        assert_eq!(prm["authorization_servers"], json!([base]));
        assert_eq!(
            prm["scopes_supported"],
            json!(["vault:read", "vault:write"])
        );
    }
    let meta: Value = serde_json::from_str(
        &get(&format!("{base}/.well-known/oauth-authorization-server"))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(meta["issuer"], base);
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["token_endpoint"], format!("{base}/oauth/token"));

    // The consent page: what it shows and the headers that protect it.
    let client = register(&base, "Notes <Assistant>", "none").await;
    let id = client["client_id"].as_str().unwrap().to_owned();
    assert!(
        client.get("client_secret").is_none(),
        "a public client gets no secret"
    );
    let (verifier, challenge) = pkce();
    let page_url = authorize_url(&base, &id, &challenge, "vault:read vault:write");
    let page = get(&page_url).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("Notes &lt;Assistant&gt;"),
        "the name is escaped"
    );
    assert!(page.body.contains("http://127.0.0.1:9") && page.body.contains("read and write"));
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.starts_with("default-src 'none'"));
    assert_eq!(page.headers["x-frame-options"], "DENY");
    assert_eq!(page.headers["cache-control"], "no-store");
    assert!(
        page.headers.get("set-cookie").is_none(),
        "nothing is kept in the browser"
    );
    assert!(
        page.headers.get("access-control-allow-origin").is_none(),
        "no other origin may read the consent page"
    );

    // A wrong passphrase: the page again with an error, no code.
    let wrong = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&page.body, "request")),
            ("csrf", &field(&page.body, "csrf")),
            ("passphrase", "not the passphrase"),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("id=\"error\"") && wrong.headers.get("location").is_none());
    // The right one, on the re-rendered form (a fresh CSRF token).
    let right = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&wrong.body, "request")),
            ("csrf", &field(&wrong.body, "csrf")),
            ("passphrase", PASSPHRASE),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(right.status, 303, "{}", right.body);
    let to = location(&right);
    assert!(to.as_str().starts_with(REDIRECT));
    assert_eq!(query(&to, "state").as_deref(), Some("st-123"));
    assert_eq!(query(&to, "iss"), Some(base.clone()));
    let code = query(&to, "code").unwrap();

    let (status, t) = exchange(&base, &id, &code, &verifier).await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 3600);
    assert_eq!(t["scope"], "vault:read vault:write");
    let access = t["access_token"].as_str().unwrap();

    // The access token opens an rmcp session with every tool.
    let session = server.connect(Some(access)).await;
    let names: Vec<String> = session
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"read_note".to_owned()) && names.contains(&"create_note".to_owned()));
    session.cancel().await.unwrap();
    let (status, _, _) = mcp(
        &server,
        access,
        "tools/call",
        json!({"name": "create_note", "arguments": {"path": "By OAuth.md", "content": "hi"}}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(vault.join("By OAuth.md").exists());

    // Refresh rotates; the spent refresh token presented again revokes the whole family.
    let r1 = t["refresh_token"].as_str().unwrap();
    let (status, t2) = refresh(&base, &id, r1).await;
    assert_eq!(status, 200, "{t2}");
    let r2 = t2["refresh_token"].as_str().unwrap();
    assert_ne!(r1, r2);
    let a2 = t2["access_token"].as_str().unwrap();
    assert_eq!(mcp(&server, a2, "tools/list", json!({})).await.0, 200);
    let (status, e) = refresh(&base, &id, r1).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")));
    assert_eq!(
        refresh(&base, &id, r2).await.0,
        400,
        "the family is revoked"
    );
    let (status, challenge, _) = mcp(&server, a2, "tools/list", json!({})).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_refusals_pkce_redirects_codes_csrf_and_passphrase_attempts() {
    let (_tmp, vault, state) = fixture();
    // A static token beside OAuth (it keeps working; checked at the end).
    const STATIC: &str = "a-static-token-beside-oauth-0123456789";
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth",
            "builtin",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &[("CAPVAULT_TOKEN", STATIC)],
    )
    .await;
    let base = base_url(&server);
    let client = register(&base, "Refused", "none").await;
    let id = client["client_id"].as_str().unwrap().to_owned();
    let (verifier, challenge) = pkce();
    let good = authorize_url(&base, &id, &challenge, "vault:read");

    // Registration refuses redirect URIs that could run code or leave loopback in clear.
    for bad in [
        "javascript:alert(1)",
        "http://evil.example/cb",
        "https://x.example/cb#f",
    ] {
        let r = http()
            .post(format!("{base}/oauth/register"))
            .json(&json!({"redirect_uris": [bad]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"], "invalid_redirect_uri");
    }

    // An unknown client or a redirect URI it did not register: an error page, never a redirect.
    for url in [
        good.replace(&id, "cvc_unknown"),
        good.replace("127.0.0.1%3A9", "evil.example"),
    ] {
        let p = get(&url).await;
        assert_eq!(p.status, 400, "{url}");
        assert!(p.headers.get("location").is_none());
    }
    // PKCE missing, or `plain`: back to the client with invalid_request and its state.
    let no_pkce = good.replace(&format!("code_challenge={challenge}&"), "");
    let plain = good.replace("code_challenge_method=S256", "code_challenge_method=plain");
    for url in [no_pkce, plain] {
        let p = get(&url).await;
        assert_eq!(p.status, 303, "{url}: {}", p.body);
        let to = location(&p);
        assert_eq!(query(&to, "error").as_deref(), Some("invalid_request"));
        assert_eq!(query(&to, "state").as_deref(), Some("st-123"));
        assert!(query(&to, "code").is_none());
    }
    // Write access from a read-only server, a resource that is not this one.
    let p = get(&good.replace("scope=vault%3Aread", "scope=vault%3Awrite")).await;
    assert_eq!(
        query(&location(&p), "error").as_deref(),
        Some("invalid_scope")
    );
    let p = get(&good.replace(
        "resource=http",
        "resource=https%3A%2F%2Fother.example%2Fmcp&x=http",
    ))
    .await;
    assert_eq!(
        query(&location(&p), "error").as_deref(),
        Some("invalid_target")
    );

    // A forged form (wrong CSRF token) and a denial.
    let page = get(&good).await;
    let forged = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&page.body, "request")),
            ("csrf", "forged"),
            ("passphrase", PASSPHRASE),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(forged.status, 403);
    assert!(forged.headers.get("location").is_none());
    let page = get(&good).await;
    let denied = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&page.body, "request")),
            ("csrf", &field(&page.body, "csrf")),
            ("decision", "deny"),
        ],
    )
    .await;
    assert_eq!(
        query(&location(&denied), "error").as_deref(),
        Some("access_denied")
    );

    // Five wrong passphrases end the request.
    let mut page = get(&good).await;
    for n in 1..=5 {
        let p = post_form(
            &format!("{base}/oauth/authorize"),
            &[
                ("request", &field(&page.body, "request")),
                ("csrf", &field(&page.body, "csrf")),
                ("passphrase", "guess"),
                ("decision", "allow"),
            ],
        )
        .await;
        if n < 5 {
            assert_eq!(p.status, 401);
            page = p;
        } else {
            assert_eq!(p.status, 400);
            assert!(p.body.contains("has ended"), "{}", p.body);
        }
    }
    // Five wrong passphrases from this address: it waits a second before its next one (429
    // with Retry-After meanwhile, which counts as no guess).
    let answer = poll(
        "the consent page after the wait",
        std::time::Duration::from_secs(30),
        async || {
            let p = consent(&base, &good, PASSPHRASE, &[]).await;
            (p.status != 429).then_some(p)
        },
    )
    .await;

    // A wrong verifier, then a code used twice (what the first use gave is revoked).
    let code = query(&location(&answer), "code").unwrap();
    let (other_verifier, _) = pkce();
    let (status, e) = exchange(&base, &id, &code, &other_verifier).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")));
    let answer = consent(&base, &good, PASSPHRASE, &[]).await;
    let code = query(&location(&answer), "code").unwrap();
    let (status, t) = exchange(&base, &id, &code, &verifier).await;
    assert_eq!(status, 200, "{t}");
    let access = t["access_token"].as_str().unwrap();
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 200);
    let (status, e) = exchange(&base, &id, &code, &verifier).await;
    assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")));
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 401);
    // A client that is not the one the code was issued to.
    let other = register(&base, "Other", "none").await;
    let answer = consent(&base, &good, PASSPHRASE, &[]).await;
    let code = query(&location(&answer), "code").unwrap();
    let (status, _) = exchange(
        &base,
        other["client_id"].as_str().unwrap(),
        &code,
        &verifier,
    )
    .await;
    assert_eq!(status, 400);
    // The static token still works, and a wrong one is not taken for an OAuth token.
    assert_eq!(mcp(&server, STATIC, "tools/list", json!({})).await.0, 200);
    assert_eq!(
        mcp(&server, &STATIC.replace('a', "b"), "tools/list", json!({}))
            .await
            .0,
        401
    );
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_grant_cannot_write_and_revocation_from_the_command_line_holds_at_once() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, true).await;
    let base = base_url(&server);
    // The owner grants reading only, although the client asked for write.
    let t = tokens(&base, "vault:read vault:write", &[("read_only", "on")]).await;
    assert_eq!(t["scope"], "vault:read");
    let access = t["access_token"].as_str().unwrap();
    let (status, _, list) = mcp(&server, access, "tools/list", json!({})).await;
    assert_eq!(status, 200);
    let names = tool_names(&list);
    assert!(names.contains(&"read_note".to_owned()) && !names.contains(&"create_note".to_owned()));
    let (status, challenge, _) = mcp(
        &server,
        access,
        "tools/call",
        json!({"name": "create_note", "arguments": {"path": "Nope.md", "content": "x"}}),
    )
    .await;
    assert_eq!(status, 403);
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("vault:write"),
        "{challenge}"
    );
    assert!(!vault.join("Nope.md").exists());
    // A refresh cannot widen it.
    let id = {
        let out = run(&[
            "tokens",
            "list",
            vault.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Test client") && text.contains(" read "),
            "{text}"
        );
        text.lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    };
    // Revoked from the command line while the server runs: refused at the next request.
    let out = run(&[
        "tokens",
        "revoke",
        vault.to_str().unwrap(),
        &id,
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 401);
    let out = run(&[
        "tokens",
        "list",
        vault.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("No client has access")
    );
    // --all ends every grant.
    let t = tokens(&base, "vault:read", &[]).await;
    let access = t["access_token"].as_str().unwrap();
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 200);
    let out = run(&[
        "tokens",
        "revoke",
        vault.to_str().unwrap(),
        "--all",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 401);
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_oauth_needs_a_passphrase_and_a_public_url_off_loopback() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(&vault, &[("a.md", "a")]);
    let state = tmp.path().join("state");
    let out = run(&[
        "serve",
        vault.to_str().unwrap(),
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--oauth",
        "builtin",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && err.contains("capvault passwd"),
        "{err}"
    );
    let out = run(&[
        "serve",
        vault.to_str().unwrap(),
        "--transport",
        "http",
        "--listen",
        "0.0.0.0:0",
        "--oauth",
        "builtin",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && err.contains("--public-url"),
        "{err}"
    );
    let out = run(&[
        "serve",
        vault.to_str().unwrap(),
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--oauth",
        "builtin",
        "--public-url",
        "http://vault.example.org",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && err.contains("must be https"),
        "{err}"
    );
    // A short passphrase is refused.
    let mut child = crate::common::capvault()
        .args([
            "passwd",
            vault.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "short").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("12 characters"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_name_with_a_bidi_override_or_invisible_characters_is_refused_at_registration() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, false).await;
    let base = base_url(&server);
    for (name, code) in [
        ("<b>Evil</b>\u{202e}abc", "U+202E"),
        ("Claude\u{200b}", "U+200B"),
        ("App\u{2067}x", "U+2067"),
        ("\u{feff}App", "U+FEFF"),
        ("App\u{e0041}", "U+E0041"),
        ("App\u{7}", "U+0007"),
    ] {
        let r = http()
            .post(format!("{base}/oauth/register"))
            .json(&json!({"redirect_uris": [REDIRECT], "client_name": name}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{name:?}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"], "invalid_client_metadata", "{name:?}");
        let why = e["error_description"].as_str().unwrap();
        assert!(why.contains(code) && why.contains("client_name"), "{why}");
    }
    // Names in other scripts are fine.
    let c = register(&base, "Évil ☂ 日本語 עברית", "none").await;
    assert_eq!(c["client_name"], "Évil ☂ 日本語 עברית");
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_consent_pages_from_one_client_does_not_evict_the_owners_request() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, false).await;
    let base = base_url(&server);
    let owner = register(&base, "Owner's app", "none").await;
    let (_, challenge) = pkce();
    let owner_page = get(&authorize_url(
        &base,
        owner["client_id"].as_str().unwrap(),
        &challenge,
        "vault:read",
    ))
    .await;
    assert_eq!(owner_page.status, 200);
    // Anyone may register a client and open its consent page, without a token: 100 times.
    let evil = register(&base, "Flood", "none").await;
    let evil_url = authorize_url(
        &base,
        evil["client_id"].as_str().unwrap(),
        &challenge,
        "vault:read",
    );
    let mut evil_pages = Vec::new();
    for _ in 0..100 {
        let p = get(&evil_url).await;
        assert_eq!(p.status, 200);
        evil_pages.push(p);
    }
    // The owner's request is still there.
    let answer = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&owner_page.body, "request")),
            ("csrf", &field(&owner_page.body, "csrf")),
            ("passphrase", PASSPHRASE),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert!(query(&location(&answer), "code").is_some());
    // The flood evicted only its own oldest pages; its newest still answers.
    let newest = evil_pages.last().unwrap();
    let denied = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&newest.body, "request")),
            ("csrf", &field(&newest.body, "csrf")),
            ("decision", "deny"),
        ],
    )
    .await;
    assert_eq!(denied.status, 303, "{}", denied.body);
    let oldest = &evil_pages[0];
    let gone = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &field(&oldest.body, "request")),
            ("csrf", &field(&oldest.body, "csrf")),
            ("decision", "deny"),
        ],
    )
    .await;
    assert_eq!(gone.status, 400, "{}", gone.body);
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passphrases_from_one_address_slow_that_address_and_never_lock_out_the_owner() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, false).await;
    let base = base_url(&server);
    let (_, challenge) = pkce();
    // Someone else, from another address, guesses on consent pages of a client of their own.
    let attacker = http_from("127.0.0.2");
    let evil = register(&base, "Guesser", "none").await;
    let evil_url = authorize_url(
        &base,
        evil["client_id"].as_str().unwrap(),
        &challenge,
        "vault:read",
    );
    let mut statuses = Vec::new();
    for n in 0..14 {
        let page = attacker
            .get(&evil_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("request", field(&page, "request").as_str()),
                ("csrf", &field(&page, "csrf")),
                ("passphrase", &format!("guess number {n}")),
                ("decision", "allow"),
            ])
            .finish();
        let r = attacker
            .post(format!("{base}/oauth/authorize"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status == 429 {
            assert!(r.headers().get("retry-after").is_some());
            let text = r.text().await.unwrap();
            assert!(text.contains("from here"), "{text}");
        }
        statuses.push(status);
    }
    assert_eq!(&statuses[..5], &[401; 5], "{statuses:?}");
    assert!(
        statuses.contains(&429),
        "the guessing address was never slowed: {statuses:?}"
    );
    // The owner, from their own address, is not locked out.
    let owner = register(&base, "Owner's app", "none").await;
    let answer = consent(
        &base,
        &authorize_url(
            &base,
            owner["client_id"].as_str().unwrap(),
            &challenge,
            "vault:read",
        ),
        PASSPHRASE,
        &[],
    )
    .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_revoke_another_clients_grant() {
    let (_tmp, vault, state) = fixture();
    let server = builtin(&vault, &state, false).await;
    let base = base_url(&server);
    let mine = register(&base, "Mine", "none").await;
    let mine_id = mine["client_id"].as_str().unwrap();
    let (verifier, challenge) = pkce();
    let answer = consent(
        &base,
        &authorize_url(&base, mine_id, &challenge, "vault:read"),
        PASSPHRASE,
        &[],
    )
    .await;
    let code = query(&location(&answer), "code").unwrap();
    let (status, t) = exchange(&base, mine_id, &code, &verifier).await;
    assert_eq!(status, 200, "{t}");
    let access = t["access_token"].as_str().unwrap();
    let refresh_token = t["refresh_token"].as_str().unwrap();
    // Another registered client that got hold of the tokens tries to revoke them.
    let other = register(&base, "Other", "none").await;
    for token in [access, refresh_token] {
        let p = post_form(
            &format!("{base}/oauth/revoke"),
            &[
                ("client_id", other["client_id"].as_str().unwrap()),
                ("token", token),
            ],
        )
        .await;
        assert_eq!(p.status, 400, "{}", p.body);
        let e: Value = serde_json::from_str(&p.body).unwrap();
        assert_eq!(e["error"], "unauthorized_client");
    }
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 200);
    // An unknown token is no error; the client itself revokes its own.
    let p = post_form(
        &format!("{base}/oauth/revoke"),
        &[("client_id", mine_id), ("token", "cva_not-a-token")],
    )
    .await;
    assert_eq!(p.status, 200);
    let p = post_form(
        &format!("{base}/oauth/revoke"),
        &[("client_id", mine_id), ("token", access)],
    )
    .await;
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 401);
    assert!(server.terminate().await.success());
}
