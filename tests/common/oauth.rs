//! Helpers of the OAuth tests (tests/oauth_*.rs): a vault with its passphrase set, the built-in
//! server, registration, PKCE, the consent page, code and refresh exchanges, and MCP calls
//! with a token.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{HttpChild, write_tree};

pub const PASSPHRASE: &str = "a long owner passphrase 42";
pub const REDIRECT: &str = "http://127.0.0.1:9/callback";

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A vault and a state folder whose passphrase is set by `capvault passwd` (from stdin).
pub fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(&vault, &[("Home.md", "# Home\nthe otter note\n")]);
    let state = tmp.path().join("state");
    passwd(&vault, &state, PASSPHRASE);
    (tmp, vault, state)
}

pub fn passwd(vault: &Path, state: &Path, passphrase: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = super::capvault()
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

pub fn http() -> reqwest::Client {
    super::install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A client whose requests come from `source` (another loopback address: another machine, as
/// far as the server can tell).
pub fn http_from(source: &str) -> reqwest::Client {
    super::install_tls_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(source.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

pub async fn builtin(vault: &Path, state: &Path, write: bool) -> HttpChild {
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
pub fn base_url(server: &HttpChild) -> String {
    server.url.trim_end_matches("/mcp").to_owned()
}

/// A PKCE verifier and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = b64(&rand::random::<[u8; 32]>());
    let challenge = b64(&Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

pub async fn register(base: &str, name: &str, method: &str) -> Value {
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

pub fn field(html: &str, name: &str) -> String {
    let pat = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&pat)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + pat.len();
    html[at..].split('"').next().unwrap().to_owned()
}

pub struct Page {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

pub async fn get(url: &str) -> Page {
    let r = http().get(url).send().await.unwrap();
    Page {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap(),
    }
}

pub async fn post_form(url: &str, form: &[(&str, &str)]) -> Page {
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

pub fn location(p: &Page) -> url::Url {
    let l = p
        .headers
        .get("location")
        .expect("a Location")
        .to_str()
        .unwrap();
    url::Url::parse(l).unwrap()
}

pub fn query(u: &url::Url, key: &str) -> Option<String> {
    u.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

pub fn authorize_url(base: &str, client_id: &str, challenge: &str, scope: &str) -> String {
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
pub async fn consent(base: &str, page_url: &str, passphrase: &str, extra: &[(&str, &str)]) -> Page {
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
pub async fn tokens(base: &str, scope: &str, extra: &[(&str, &str)]) -> Value {
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

pub async fn exchange(base: &str, client_id: &str, code: &str, verifier: &str) -> (u16, Value) {
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

pub async fn refresh(base: &str, client_id: &str, token: &str) -> (u16, Value) {
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
pub async fn mcp(
    server: &HttpChild,
    token: &str,
    method: &str,
    params: Value,
) -> (u16, String, Value) {
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

pub fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}
