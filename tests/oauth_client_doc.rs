//! OAuth client ID metadata documents: the built-in server reading a client's document over
//! HTTPS on loopback (a testing aid) in place of a registration, and refusing the documents it
//! must not fetch. Shared helpers: tests/common/oauth.rs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::{Arc, Mutex};

use crate::common::HttpChild;
use crate::common::oauth::*;
use serde_json::{Value, json};

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

#[cfg(target_os = "linux")]
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
