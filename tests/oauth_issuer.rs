//! OAuth with an external issuer (`--oauth-issuer`): JWTs minted here, with keys made here, the
//! issuer's metadata and JWKS served on loopback, checked by the real binary. Shared helpers:
//! tests/common/oauth.rs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::{Arc, Mutex};

use crate::common::oauth::*;
use crate::common::{HttpChild, poll, write_tree};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

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
    // Refused (no fetch) until a second has passed since the startup fetch; then fetched once
    // and accepted.
    let token = mint(&newer, c("vault:read"));
    poll(
        "the rotated key accepted",
        std::time::Duration::from_secs(30),
        async || (mcp(&server, &token, "tools/list", json!({})).await.0 == 200).then_some(()),
    )
    .await;
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
