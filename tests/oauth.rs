//! OAuth, driven as remote clients use it: the real binary with `--oauth builtin` (its own
//! authorization server: registration, the consent page, PKCE, tokens, refresh, revocation,
//! `capvault passwd` and `capvault tokens`) and with `--oauth-issuer` (JWTs minted here, with
//! keys made here, the issuer's metadata and JWKS served on loopback). HTTP by reqwest with
//! redirects off; MCP by rmcp's client with the access token. The Python SDK's OAuth client
//! and a real browser on the consent page are in tests/python and tests/browser.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use common::{HttpChild, write_tree};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const PASSPHRASE: &str = "a long owner passphrase 42";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A vault and a state folder whose passphrase is set by `capvault passwd` (from stdin).
fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(&vault, &[("Home.md", "# Home\nthe otter note\n")]);
    let state = tmp.path().join("state");
    passwd(&vault, &state, PASSPHRASE);
    (tmp, vault, state)
}

fn passwd(vault: &Path, state: &Path, passphrase: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capvault"))
        .arg("passwd")
        .arg(vault)
        .arg("--state-dir")
        .arg(state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{passphrase}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

fn cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_capvault"))
        .args(args)
        .output()
        .unwrap()
}

fn http() -> reqwest::Client {
    common::install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A client whose requests come from `source` (another loopback address: another machine, as
/// far as the server can tell).
fn http_from(source: &str) -> reqwest::Client {
    common::install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(source.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn builtin(vault: &Path, state: &Path, write: bool) -> HttpChild {
    let state = state.to_str().unwrap();
    let mut extra = vec![
        "--no-index-cache",
        "--oauth",
        "builtin",
        "--state-dir",
        state,
    ];
    if write {
        extra.push("--write");
    }
    HttpChild::spawn(vault, &extra, &[]).await
}

/// The server's base URL (`http://127.0.0.1:PORT`).
fn base_url(server: &HttpChild) -> String {
    server.url.trim_end_matches("/mcp").to_owned()
}

/// A PKCE verifier and its S256 challenge.
fn pkce() -> (String, String) {
    let verifier = b64(&rand::random::<[u8; 32]>());
    let challenge = b64(&Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

async fn register(base: &str, name: &str, method: &str) -> Value {
    let r = http()
        .post(format!("{base}/oauth/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "client_name": name,
                      "token_endpoint_auth_method": method}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json().await.unwrap()
}

fn field(html: &str, name: &str) -> String {
    let pat = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&pat)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + pat.len();
    html[at..].split('"').next().unwrap().to_owned()
}

struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

async fn get(url: &str) -> Page {
    let r = http().get(url).send().await.unwrap();
    Page {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap(),
    }
}

async fn post_form(url: &str, form: &[(&str, &str)]) -> Page {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let r = http()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    Page {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap(),
    }
}

fn location(p: &Page) -> url::Url {
    let l = p
        .headers
        .get("location")
        .expect("a Location")
        .to_str()
        .unwrap();
    url::Url::parse(l).unwrap()
}

fn query(u: &url::Url, key: &str) -> Option<String> {
    u.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

fn authorize_url(base: &str, client_id: &str, challenge: &str, scope: &str) -> String {
    let q = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "st-123"),
            ("scope", scope),
            ("resource", &format!("{base}/mcp")),
        ])
        .finish();
    format!("{base}/oauth/authorize?{q}")
}

/// Opens the consent page and answers it with `passphrase`; the reply to the answer.
async fn consent(base: &str, page_url: &str, passphrase: &str, extra: &[(&str, &str)]) -> Page {
    let page = get(page_url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let (request, csrf) = (field(&page.body, "request"), field(&page.body, "csrf"));
    let mut form = vec![
        ("request", request.as_str()),
        ("csrf", csrf.as_str()),
        ("passphrase", passphrase),
        ("decision", "allow"),
    ];
    form.extend_from_slice(extra);
    post_form(&format!("{base}/oauth/authorize"), &form).await
}

/// Registration, consent and code exchange: the token reply.
async fn tokens(base: &str, scope: &str, extra: &[(&str, &str)]) -> Value {
    let client = register(base, "Test client", "none").await;
    let id = client["client_id"].as_str().unwrap();
    let (verifier, challenge) = pkce();
    let answer = consent(
        base,
        &authorize_url(base, id, &challenge, scope),
        PASSPHRASE,
        extra,
    )
    .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let code = query(&location(&answer), "code").unwrap();
    exchange(base, id, &code, &verifier).await.1
}

async fn exchange(base: &str, client_id: &str, code: &str, verifier: &str) -> (u16, Value) {
    let p = post_form(
        &format!("{base}/oauth/token"),
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", client_id),
            ("code_verifier", verifier),
            ("resource", &format!("{base}/mcp")),
        ],
    )
    .await;
    (
        p.status,
        serde_json::from_str(&p.body).unwrap_or(Value::Null),
    )
}

async fn refresh(base: &str, client_id: &str, token: &str) -> (u16, Value) {
    let p = post_form(
        &format!("{base}/oauth/token"),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client_id),
        ],
    )
    .await;
    (
        p.status,
        serde_json::from_str(&p.body).unwrap_or(Value::Null),
    )
}

/// A stateless (2026-07-28) JSON-RPC call to /mcp with `token`: status, WWW-Authenticate,
/// body.
async fn mcp(server: &HttpChild, token: &str, method: &str, params: Value) -> (u16, String, Value) {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let mut req = http()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        req = req.header("mcp-name", name);
    }
    let r = req
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = r.text().await.unwrap();
    (
        status,
        challenge,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

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
    // Five wrong passphrases from this address: it waits a second before its next one.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    // A wrong verifier, then a code used twice (what the first use gave is revoked).
    let answer = consent(&base, &good, PASSPHRASE, &[]).await;
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
        let out = cli(&[
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
    let out = cli(&[
        "tokens",
        "revoke",
        vault.to_str().unwrap(),
        &id,
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 401);
    let out = cli(&[
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
    let out = cli(&[
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
    let out = cli(&[
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
    let out = cli(&[
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
    let out = cli(&[
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
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capvault"))
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

// ---- External issuer ----

/// An issuer on loopback: its metadata and a JWKS that the test can change, counting fetches.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Value>>,
    fetches: Arc<Mutex<usize>>,
}

impl Issuer {
    async fn start() -> Issuer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(json!({"keys": []})));
        let fetches = Arc::new(Mutex::new(0));
        let (j, f, u) = (Arc::clone(&jwks), Arc::clone(&fetches), url.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let (j, f, u) = (Arc::clone(&j), Arc::clone(&f), u.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let (status, body) = match path.as_str() {
                        "/.well-known/oauth-authorization-server" => (
                            "200 OK",
                            json!({"issuer": u, "jwks_uri": format!("{u}/jwks")}),
                        ),
                        "/jwks" => {
                            *f.lock().unwrap() += 1;
                            ("200 OK", j.lock().unwrap().clone())
                        }
                        _ => ("404 Not Found", json!({})),
                    };
                    let body = body.to_string();
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        Issuer { url, jwks, fetches }
    }
}

/// A 2048-bit RSA key (PKCS#1 DER, base64) made for this test only with `openssl genrsa`:
/// generating one in an unoptimised test build takes too long.
const RSA_TEST_KEY: &str = "MIIEogIBAAKCAQEAkgnleXW4+vHGihPtxq3zs2z0JJJUxnJ7GKbdqKXtrxWrydhYyh0XLr8XQms5m5uooWjcRdz1kySlYLmQ3V1tbN90EHzfdmVJopJZtDrZsCVYG/BMVaBjDIGLT/Of3IJ1dqd0IikGMDwuFp09tOdUE7b97djBi6/ynuXSQkSpqMgqprRtDRLdrI8u850N0VoIevKpI1VcHtISRVfWFVuVFnDfwvLqOmjPccV0vVJ4yTnimSg5PyJKBg/0ujxUDRjyzhcXoJ5lubXqHvcI8xmfJk8WLZFNt5LAo7WVZCE9BrxTIHdtfWz+t7vhlJD/qIY12RN7gv+ScV5bLVdopUyXwQIDAQABAoIBAAUndkLgJcQtjk1HQMgXUZeOi9tSks1iMvf+w6n1GTtpr2NzUEbp2eybb+23LRRR3RS9R7DriHtF+tQ8GGHHr1n9VPJUBer+zid/tMzImvA9kSuDQp5vB6/kTo9m0MiOjii+5jlia0Z+iT3hFNFyrKP5fGLNmJ8eeZikEdSm6bn8MOChaHOQN6B8hm8xLuWw7mXDT/ZRVK75BOtp+mAenJ0nu20VxE1vZCO1KlCogpAK7AHv5x5Ll6o3btdAPvEsYvfAF6RNF4BKiaEqr8NrHMOPUgY1uWcxTc35K15U5jNatp8+jDWPeHtXxaP80WS0T6rSQNgjj6/NO1jITCerC3UCgYEAzZOkYm6ETmT66OVk3FYDgL6zT+fnIiTeX6jK7Nxu9wu7joU0Ag1JO6aMqtr7WeEk2bKqx9b8kIfDVLgkmd5Tr4xqpQhJN8VWDXMtaAiOedI+2nXuQxDIY9rEMnMuAKPd9GT6QYJrw6WF7IMDDceLVD1o9eU2M9TRCieClZBRnIsCgYEAtdvNZ18QXWVyFSq0zsUuAxC6O4AhMaRRyV0IOwDPwnsenoPlDFiLF+7v9Z8teybIjNhVQq2vhijYL0Lw24+wVCzb/wC7d/TQGVsRWy1L7ZUiGTzPsCAgeIjc34KS4u4AWd4Af09ETCLlKeOScMUCzxwsRkPChtvCNFr7kayy6mMCgYBEeSnm01LkXcQpMMcgkNHH3z0Qn3igKdGb4Tf+Hwoi5ViKhxmkmVJMORRfkGLqNBC3Jki2GYi0h1Prcw5V5fTP4yBead0hY2xfPH7iSP9T2lCvKVq8IentQJ/bAfxPoEU8symcClnkp8xs09J/k3h4DaBZTwh3ySn7jN90+8YDMwKBgAtL7xN3xUV38sE72OVrPDN2i4r8p5M02NvASq2XnFBBY6KHIOhGa8V90ywXyjR3MUgGfC1bKqcTzHILH3kUEOj5rGTHv91wuKiKjqZyRuAoPmkA7QnMxReXsNi1fLhZ/m2Wq8M8wkpUdJXIjCUzJ7yDzIBE30WPSx4DdNMUvjxvAoGAAaMvI5lIJ8VLzsg2vMGfXfysieQKCifhaI0xzWHdiWIcJiTbdXXN8l9QjYr47QGqB035cFIQWRxhExqLKvfQSFQWtrqmP0stNF/b+oHgBXTJHzQbei3D2rfzIwYPk1b2jEwNiGVgPiQg105rOLQF/CjpJa5v8j1YRsSOpHtYrGM=";

/// A signing key made here, and its public JWK.
struct Key {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

fn key(kid: &str, alg: Algorithm) -> Key {
    if alg == Algorithm::RS256 {
        let der = base64::engine::general_purpose::STANDARD
            .decode(RSA_TEST_KEY)
            .unwrap();
        let encoding = EncodingKey::from_rsa_der(&der);
        let mut jwk = serde_json::to_value(
            jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, alg).unwrap(),
        )
        .unwrap();
        jwk["kid"] = json!(kid);
        return Key {
            kid: kid.to_owned(),
            alg,
            encoding,
            jwk,
        };
    }
    let pair = match alg {
        Algorithm::EdDSA => rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
        Algorithm::ES256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        _ => unreachable!(),
    };
    let der = pair.serialize_der();
    let raw = pair.public_key_raw();
    let (encoding, jwk) = match alg {
        Algorithm::EdDSA => (
            EncodingKey::from_ed_der(&der),
            json!({"kty": "OKP", "crv": "Ed25519", "x": b64(raw), "kid": kid, "use": "sig"}),
        ),
        _ => (
            EncodingKey::from_ec_der(&der),
            json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
                   "kid": kid, "alg": "ES256"}),
        ),
    };
    Key {
        kid: kid.to_owned(),
        alg,
        encoding,
        jwk,
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn mint(k: &Key, claims: Value) -> String {
    let mut h = Header::new(k.alg);
    h.kid = Some(k.kid.clone());
    jsonwebtoken::encode(&h, &claims, &k.encoding).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_issuer_jwts_are_checked_for_signature_issuer_audience_time_and_scope() {
    let issuer = Issuer::start().await;
    let ed = key("ed-1", Algorithm::EdDSA);
    let ec = key("ec-1", Algorithm::ES256);
    let rsa = key("rsa-1", Algorithm::RS256);
    *issuer.jwks.lock().unwrap() = json!({"keys": [ed.jwk, ec.jwk, rsa.jwk]});
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(&vault, &[("Home.md", "# Home\n")]);
    let state = tmp.path().join("state");
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--write",
            "--state-dir",
            state.to_str().unwrap(),
            "--oauth-issuer",
            &issuer.url,
        ],
        &[],
    )
    .await;
    assert_eq!(
        *issuer.fetches.lock().unwrap(),
        1,
        "the keys are fetched at startup"
    );
    let base = base_url(&server);
    let aud = format!("{base}/mcp");
    let prm: Value = serde_json::from_str(
        &get(&format!("{base}/.well-known/oauth-protected-resource/mcp"))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(prm["authorization_servers"], json!([issuer.url]));
    assert_eq!(
        get(&format!("{base}/.well-known/oauth-authorization-server"))
            .await
            .status,
        404,
        "no built-in authorization server in this mode"
    );
    let claims = |scope: &str| {
        json!({"iss": issuer.url, "aud": aud, "sub": "owner", "exp": now() + 600,
               "nbf": now() - 10, "scope": scope})
    };

    // Both algorithms, each scope.
    let read = mint(&ed, claims("vault:read"));
    let (status, _, list) = mcp(&server, &read, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    assert!(!tool_names(&list).contains(&"create_note".to_owned()));
    let (status, challenge, _) = mcp(
        &server,
        &read,
        "tools/call",
        json!({"name": "create_note", "arguments": {"path": "R.md", "content": "x"}}),
    )
    .await;
    assert_eq!(status, 403);
    assert!(challenge.contains("insufficient_scope") && challenge.contains("vault:write"));
    let write = mint(&ec, claims("vault:read vault:write"));
    let (status, _, r) = mcp(
        &server,
        &write,
        "tools/call",
        json!({"name": "create_note", "arguments": {"path": "W.md", "content": "x"}}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert!(vault.join("W.md").exists() && !vault.join("R.md").exists());
    let (status, _, list) = mcp(
        &server,
        &mint(&rsa, claims("vault:read")),
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "RS256: {list}");
    // `scp` as a list is read too.
    let mut c = claims("");
    c["scp"] = json!(["vault:read"]);
    assert_eq!(
        mcp(&server, &mint(&ed, c), "tools/list", json!({})).await.0,
        200
    );

    // Refusals: expired, not yet valid, another issuer, another audience, no vault scope.
    let mut expired = claims("vault:read");
    expired["exp"] = json!(now() - 120);
    let mut early = claims("vault:read");
    early["nbf"] = json!(now() + 600);
    let mut other_iss = claims("vault:read");
    other_iss["iss"] = json!("https://other.example");
    let mut other_aud = claims("vault:read");
    other_aud["aud"] = json!("https://other.example/mcp");
    let mut no_exp = claims("vault:read");
    no_exp.as_object_mut().unwrap().remove("exp");
    for (what, c) in [
        ("expired", expired),
        ("not yet valid", early),
        ("issuer", other_iss),
        ("audience", other_aud),
        ("no exp", no_exp),
    ] {
        let (status, challenge, _) = mcp(&server, &mint(&ed, c), "tools/list", json!({})).await;
        assert_eq!(status, 401, "{what}");
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
    }
    let (status, challenge, _) = mcp(
        &server,
        &mint(&ed, claims("profile email")),
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(status, 403);
    assert!(challenge.contains("insufficient_scope"));

    // Forgeries: `alg: none`, HMAC keyed with the public key, a key the issuer does not have,
    // a signature from one key under the other's kid.
    let body = b64(claims("vault:read").to_string().as_bytes());
    let none = format!(
        "{}.{body}.",
        b64(br#"{"alg":"none","typ":"JWT","kid":"ed-1"}"#)
    );
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("ed-1".into());
    let x = ed.jwk["x"].as_str().unwrap().to_owned();
    let hmac = jsonwebtoken::encode(
        &h,
        &claims("vault:read"),
        &EncodingKey::from_secret(x.as_bytes()).unwrap(),
    )
    .unwrap();
    let stranger = key("ed-1", Algorithm::EdDSA);
    let forged = mint(&stranger, claims("vault:read"));
    let mut swapped = key("ec-1", Algorithm::EdDSA);
    swapped.kid = "ec-1".into();
    let confused = mint(&swapped, claims("vault:read"));
    for (what, t) in [
        ("none", none),
        ("hmac", hmac),
        ("stranger", forged),
        ("alg swap", confused),
    ] {
        assert_eq!(
            mcp(&server, &t, "tools/list", json!({})).await.0,
            401,
            "{what}"
        );
    }

    // An unknown kid refetches the JWKS at most once a minute: the startup fetch was just
    // now, so this one waits its turn.
    let fetches = *issuer.fetches.lock().unwrap();
    let rotated = key("ed-2", Algorithm::EdDSA);
    *issuer.jwks.lock().unwrap() = json!({"keys": [ed.jwk, rotated.jwk]});
    let t = mint(&rotated, claims("vault:read"));
    assert_eq!(mcp(&server, &t, "tools/list", json!({})).await.0, 401);
    assert_eq!(*issuer.fetches.lock().unwrap(), fetches, "rate-limited");
    drop(server);

    // Key rotation: with the wait shortened (a testing aid), the unknown kid is fetched
    // through the sandbox (which allows a connection to the JWKS port only) and accepted.
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth-issuer",
            &issuer.url,
            "--jwks-refetch-after",
            "1",
        ],
        &[],
    )
    .await;
    let aud = server.url.clone();
    let c = |k: &str| json!({"iss": issuer.url, "aud": aud, "exp": now() + 60, "scope": k});
    let fetches = *issuer.fetches.lock().unwrap();
    let newer = key("ed-3", Algorithm::EdDSA);
    *issuer.jwks.lock().unwrap() = json!({"keys": [rotated.jwk, newer.jwk]});
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        mcp(
            &server,
            &mint(&newer, c("vault:read")),
            "tools/list",
            json!({})
        )
        .await
        .0,
        200
    );
    assert_eq!(*issuer.fetches.lock().unwrap(), fetches + 1);
    let unknown = key("ed-4", Algorithm::EdDSA);
    assert_eq!(
        mcp(
            &server,
            &mint(&unknown, c("vault:read")),
            "tools/list",
            json!({})
        )
        .await
        .0,
        401
    );
    assert_eq!(
        *issuer.fetches.lock().unwrap(),
        fetches + 1,
        "one refetch per wait"
    );
    drop(server);

    // A JWKS file: its keys only, never a fetch.
    let jwks = tmp.path().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [ed.jwk]}).to_string()).unwrap();
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth-issuer",
            &issuer.url,
            "--jwks-file",
            jwks.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let fetches = *issuer.fetches.lock().unwrap();
    let aud = server.url.clone();
    let c = json!({"iss": issuer.url, "aud": aud, "exp": now() + 60, "scope": "vault:read"});
    assert_eq!(
        mcp(&server, &mint(&ed, c.clone()), "tools/list", json!({}))
            .await
            .0,
        200
    );
    assert_eq!(
        mcp(&server, &mint(&rotated, c), "tools/list", json!({}))
            .await
            .0,
        401
    );
    assert_eq!(*issuer.fetches.lock().unwrap(), fetches);
}

// ---- Client ID metadata documents ----

/// An HTTPS server on loopback (a self-signed certificate for `localhost`) serving client
/// metadata documents: `/app.json` names itself, `/liar.json` claims another URL.
struct DocServer {
    base: String,
    ca_pem: String,
    fetches: Arc<Mutex<usize>>,
}

impl DocServer {
    async fn start() -> DocServer {
        use rustls_pki_types::pem::PemObject;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(
            cert.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let fetches = Arc::new(Mutex::new(0));
        let (b, f) = (base.clone(), Arc::clone(&fetches));
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, b, f) = (acceptor.clone(), b.clone(), Arc::clone(&f));
                tokio::spawn(async move {
                    let Ok(mut s) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                    *f.lock().unwrap() += 1;
                    let doc = match path.as_str() {
                        "/app.json" => json!({"client_id": format!("{b}/app.json"),
                            "client_name": "Metadata App", "redirect_uris": [REDIRECT]}),
                        "/liar.json" => json!({"client_id": "https://claude.ai/app.json",
                            "client_name": "Liar", "redirect_uris": [REDIRECT]}),
                        _ => json!({}),
                    };
                    let body = doc.to_string();
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        DocServer {
            base,
            ca_pem: cert.cert.pem(),
            fetches,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_metadata_document_stands_in_for_registration_and_is_fenced() {
    let (tmp, vault, state) = fixture();
    let docs = DocServer::start().await;
    let ca = tmp.path().join("ca.pem");
    std::fs::write(&ca, &docs.ca_pem).unwrap();
    let st = state.to_str().unwrap();
    // The test's documents are on loopback, on a port the sandbox would not open: the testing
    // aid allows both, with the sandbox off.
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth",
            "builtin",
            "--state-dir",
            st,
            "--oauth-client-metadata",
            "--oauth-test-ca",
            ca.to_str().unwrap(),
            "--sandbox",
            "off",
        ],
        &[],
    )
    .await;
    let base = base_url(&server);
    let meta: Value = serde_json::from_str(
        &get(&format!("{base}/.well-known/oauth-authorization-server"))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(meta["client_id_metadata_document_supported"], true);

    let id = format!("{}/app.json", docs.base);
    let (verifier, challenge) = pkce();
    let url = authorize_url(&base, &id, &challenge, "vault:read");
    let page = get(&url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Metadata App")
            && page.body.contains("published by <bdi>localhost</bdi>")
    );
    let answer = consent(&base, &url, PASSPHRASE, &[]).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let code = query(&location(&answer), "code").unwrap();
    let (status, t) = exchange(&base, &id, &code, &verifier).await;
    assert_eq!(status, 200, "{t}");
    let access = t["access_token"].as_str().unwrap();
    assert_eq!(mcp(&server, access, "tools/list", json!({})).await.0, 200);
    // Fetched once for the page, once more at most: the document is cached.
    assert!(
        *docs.fetches.lock().unwrap() <= 2,
        "{}",
        docs.fetches.lock().unwrap()
    );

    // A document that claims another client's URL, and a redirect URI the document lacks.
    let liar = format!("{}/liar.json", docs.base);
    let p = get(&authorize_url(&base, &liar, &challenge, "vault:read")).await;
    assert_eq!(p.status, 400);
    assert!(
        p.body.contains("own URL") && p.headers.get("location").is_none(),
        "{}",
        p.body
    );
    let p = get(&url.replace("127.0.0.1%3A9", "127.0.0.1%3A10")).await;
    assert_eq!(p.status, 400);
    assert!(p.headers.get("location").is_none());
    drop(server);

    // Without the testing aid: loopback, other ports and plain http are never fetched.
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth",
            "builtin",
            "--state-dir",
            st,
            "--oauth-client-metadata",
            "--sandbox-probe",
            "/etc/hosts",
        ],
        &[],
    )
    .await;
    let base = base_url(&server);
    let before = *docs.fetches.lock().unwrap();
    for (id, why) in [
        (format!("{}/app.json", docs.base), "port 443"),
        ("https://127.0.0.1/app.json".to_owned(), "an address"),
        (
            "https://localhost/app.json".to_owned(),
            "not a public address",
        ),
    ] {
        let p = get(&authorize_url(&base, &id, &challenge, "vault:read")).await;
        assert_eq!(p.status, 400, "{id}");
        assert!(p.body.contains(why), "{id}: {}", p.body);
    }
    assert_eq!(*docs.fetches.lock().unwrap(), before);
    // The sandbox lets the resolver read its files now (and only then).
    let log = server.stderr.lock().unwrap().join("\n");
    assert!(log.contains("sandbox probe: /etc/hosts: read"), "{log}");
    drop(server);
    let server = HttpChild::spawn(
        &vault,
        &[
            "--no-index-cache",
            "--oauth",
            "builtin",
            "--state-dir",
            st,
            "--sandbox-probe",
            "/etc/hosts",
        ],
        &[],
    )
    .await;
    let log = server.stderr.lock().unwrap().join("\n");
    assert!(log.contains("sandbox probe: /etc/hosts: denied"), "{log}");
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
