//! The consent page and the authorization server's other pages: small, server-rendered HTML
//! with one inline style sheet (allowed by its hash in the page's CSP), no script at all, and
//! every value from a client escaped.

use sha2::{Digest, Sha256};

const STYLE: &str = "\
:root{color-scheme:light dark;--bg:#f4f4f6;--card:#fff;--text:#1c1c21;--muted:#5d5d6b;\
--line:#dcdce3;--accent:#5b3fd6;--accent-text:#fff;--warn-bg:#fff4e5;--warn:#8a4b00;\
--err-bg:#fdecec;--err:#a11a1a}\
@media (prefers-color-scheme:dark){:root{--bg:#131317;--card:#1e1e24;--text:#ececf1;\
--muted:#a4a4b3;--line:#34343d;--accent:#8f78ff;--accent-text:#101014;--warn-bg:#3a2a12;\
--warn:#ffc27a;--err-bg:#3d1717;--err:#ff9c9c}}\
*{box-sizing:border-box}\
body{margin:0;background:var(--bg);color:var(--text);font:16px/1.5 system-ui,-apple-system,\
'Segoe UI',Roboto,sans-serif;display:flex;justify-content:center;padding:24px 16px}\
main{width:100%;max-width:30rem;background:var(--card);border:1px solid var(--line);\
border-radius:14px;padding:24px}\
.brand{font-size:.85rem;font-weight:600;letter-spacing:.04em;color:var(--muted);margin:0 0 12px}\
h1{font-size:1.3rem;line-height:1.3;margin:0 0 16px;overflow-wrap:anywhere}\
dl{margin:0 0 16px;display:grid;grid-template-columns:auto 1fr;gap:6px 12px}\
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}\
.access{border-radius:10px;padding:12px 14px;margin:0 0 16px;background:var(--bg)}\
.access.write{background:var(--warn-bg);color:var(--warn)}\
.access strong{display:block}\
label{display:block;font-weight:600;margin:0 0 6px}\
input[type=password]{width:100%;font:inherit;padding:10px 12px;border:1px solid var(--line);\
border-radius:8px;background:var(--card);color:var(--text)}\
.check{display:flex;gap:8px;align-items:center;font-weight:400;margin:0 0 16px}\
.buttons{display:flex;gap:12px;margin:16px 0 0}\
button{flex:1;font:inherit;font-weight:600;padding:11px 14px;border-radius:8px;\
border:1px solid var(--line);background:var(--card);color:var(--text);cursor:pointer}\
button.primary{background:var(--accent);border-color:var(--accent);color:var(--accent-text)}\
#error{background:var(--err-bg);color:var(--err);border-radius:8px;padding:10px 12px;margin:0 0 16px}\
.note{font-size:.85rem;color:var(--muted);margin:16px 0 0}\
code{font-size:.85em}\
bdi{unicode-bidi:isolate}.mark{color:var(--err);font-family:monospace}";

use crate::markdown::hidden::is_invisible_control;

/// The first character of `text` that a client may not put in a name shown to the owner: a
/// control character or an invisible one ([`is_invisible_control`]).
pub fn forbidden_char(text: &str) -> Option<char> {
    text.chars()
        .find(|&c| c.is_control() || is_invisible_control(c))
}

/// A value a client chose, as the page shows it: escaped, isolated from the text around it
/// (`<bdi>`, so right-to-left text inside cannot reorder the page), and every invisible control
/// shown as a visible `U+XXXX` mark instead of acting (names holding one are refused at
/// registration; this covers anything stored before that).
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 11);
    out.push_str("<bdi>");
    for c in text.chars() {
        if is_invisible_control(c) {
            out.push_str(&format!("<span class=\"mark\">[U+{:04X}]</span>", c as u32));
        } else {
            push_escaped(&mut out, c);
        }
    }
    out.push_str("</bdi>");
    out
}

/// Escapes text for HTML content and attribute values (control characters are dropped).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c if c.is_control() => {}
        c => out.push(c),
    }
}

/// The page's Content-Security-Policy: nothing but the one style sheet; forms post only to
/// this server and (the redirect after consent) to the client's redirect origin; no framing.
pub fn csp(redirect_source: Option<&str>) -> String {
    let hash = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        Sha256::digest(STYLE.as_bytes()),
    );
    let form = match redirect_source {
        Some(src) => format!("'self' {src}"),
        None => "'self'".to_owned(),
    };
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action {form}; \
         frame-ancestors 'none'; base-uri 'none'"
    )
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"referrer\" content=\"same-origin\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>\
         <p class=\"brand\">CAPVAULT</p>{body}</main></body></html>",
        escape(title)
    )
}

/// What the consent page shows.
pub struct Consent<'a> {
    /// The vault's name, or a server of several's vault names (the owner ticks those the
    /// application may use).
    pub vaults: &'a [String],
    pub client_name: &'a str,
    /// The host that published the client's metadata document, when it has one (otherwise
    /// the name is only what the client said of itself).
    pub publisher: Option<&'a str>,
    /// Where the browser goes afterwards: the redirect URI's host (or scheme, for an app).
    pub redirect_to: &'a str,
    pub write: bool,
    pub request: &'a str,
    pub csrf: &'a str,
    pub error: Option<&'a str>,
}

/// The consent page: who asks, where it returns, what it may do, and the owner's passphrase.
pub fn consent(c: &Consent<'_>) -> String {
    let access = if c.write {
        "<div class=\"access write\"><strong>Read and write</strong>It can search and read \
         every note, and create, edit, move and delete notes (earlier versions are kept and \
         can be restored).</div>"
    } else {
        "<div class=\"access\"><strong>Read only</strong>It can search and read every note \
         in the vault. It cannot change anything.</div>"
    };
    let read_only = if c.write {
        "<label class=\"check\"><input type=\"checkbox\" name=\"read_only\" id=\"read_only\">\
         Allow reading only</label>"
    } else {
        ""
    };
    // Several vaults: one box each, all ticked; the owner unticks those it may not use.
    let choose = if c.vaults.len() > 1 {
        let boxes: String = c
            .vaults
            .iter()
            .map(|v| {
                format!(
                    "<label class=\"check\"><input type=\"checkbox\" name=\"vault.{v}\" \
                     class=\"vault\" checked>{shown}</label>",
                    v = escape(v),
                    shown = shown(v)
                )
            })
            .collect();
        format!("<fieldset id=\"vaults\"><legend>Vaults it may use</legend>{boxes}</fieldset>")
    } else {
        String::new()
    };
    let whose = match c.vaults {
        [one] => format!(
            "your vault \u{201c}<span id=\"vault\">{}</span>\u{201d}",
            shown(one)
        ),
        _ => "<span id=\"vault\">your vaults</span>".to_owned(),
    };
    let error = match c.error {
        Some(e) => format!("<p id=\"error\" role=\"alert\">{}</p>", escape(e)),
        None => String::new(),
    };
    let body = format!(
        "<h1>Allow <span id=\"client\">{client}</span> to use {whose}?</h1>\
         <dl><dt>Application</dt><dd>{client} <small id=\"publisher\">{publisher}</small></dd>\
         <dt>Returns to</dt><dd id=\"redirect\">{redirect}</dd>\
         <dt>Access</dt><dd id=\"scope\">{scope}</dd></dl>\
         {access}{error}\
         <form method=\"post\" action=\"/oauth/authorize\" id=\"consent\">\
         <input type=\"hidden\" name=\"request\" value=\"{request}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         {choose}{read_only}\
         <label for=\"passphrase\">Your capvault passphrase</label>\
         <input type=\"password\" name=\"passphrase\" id=\"passphrase\" autocomplete=\"off\" \
         required autofocus>\
         <div class=\"buttons\">\
         <button type=\"submit\" name=\"decision\" value=\"deny\" id=\"deny\" formnovalidate>Deny</button>\
         <button type=\"submit\" name=\"decision\" value=\"allow\" id=\"allow\" class=\"primary\">Allow</button>\
         </div></form>\
         <p class=\"note\">Approve only if you started this connection yourself. Access lasts \
         until you revoke it (<code>capvault tokens list VAULT</code>, then \
         <code>capvault tokens revoke VAULT ID</code>, VAULT being this vault's folder), or \
         until the application goes {days} days without renewing it.</p>",
        client = shown(c.client_name),
        publisher = match c.publisher {
            Some(host) => format!("(published by {})", shown(host)),
            None => "(the name it gave itself)".to_owned(),
        },
        redirect = shown(c.redirect_to),
        days = super::store::REFRESH_TTL.as_secs() / 86_400,
        scope = if c.write {
            "read and write"
        } else {
            "read only"
        },
        request = escape(c.request),
        csrf = escape(c.csrf),
    );
    page("Allow access to your vault? - capvault", &body)
}

/// A page that says something went wrong (no redirect anywhere).
pub fn message(title: &str, text: &str) -> String {
    page(
        title,
        &format!(
            "<h1>{}</h1><p id=\"message\">{}</p>",
            escape(title),
            escape(text)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_values_are_escaped_and_the_page_has_no_script() {
        let html = consent(&Consent {
            vaults: &["Notes".to_owned()],
            client_name: "<script>alert(1)</script>\"'",
            publisher: None,
            redirect_to: "evil.example\"><img src=x>",
            write: true,
            request: "r\"1",
            csrf: "c<1",
            error: Some("<b>x</b>"),
        });
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;") && html.contains("&quot;&gt;&lt;img"));
        assert!(html.contains("value=\"r&quot;1\"") && html.contains("value=\"c&lt;1\""));
        assert!(html.contains("read and write") && html.contains("id=\"read_only\""));
    }

    #[test]
    fn a_bidi_override_in_a_client_name_is_isolated_and_shown_not_obeyed() {
        let html = consent(&Consent {
            vaults: &["Notes".to_owned()],
            client_name: "<b>Evil</b>\u{202e}abc\u{2066}\u{200b}\u{e0041}",
            publisher: Some("app\u{202e}.example"),
            redirect_to: "cb\u{feff}.example",
            write: false,
            request: "r",
            csrf: "c",
            error: None,
        });
        for c in ['\u{202e}', '\u{2066}', '\u{200b}', '\u{e0041}', '\u{feff}'] {
            assert!(!html.contains(c), "{c:?} reached the page: {html}");
        }
        assert!(
            html.contains("<bdi>&lt;b&gt;Evil&lt;/b&gt;<span class=\"mark\">[U+202E]</span>abc")
        );
        assert!(html.contains("[U+2066]") && html.contains("[U+E0041]"));
        assert!(html.contains("<bdi>app<span class=\"mark\">[U+202E]</span>.example</bdi>"));
        assert!(html.contains("<dd id=\"redirect\"><bdi>cb<span class=\"mark\">[U+FEFF]</span>"));
        assert_eq!(forbidden_char("Claude Desktop"), None);
        assert_eq!(forbidden_char("Évil ☂ 日本"), None);
        assert_eq!(forbidden_char("a\u{202e}b"), Some('\u{202e}'));
        assert_eq!(forbidden_char("a\u{e0001}"), Some('\u{e0001}'));
        assert_eq!(forbidden_char("a\u{7}"), Some('\u{7}'));
    }

    #[test]
    fn the_footer_names_the_vault_argument_and_the_real_lifetime() {
        let html = consent(&Consent {
            vaults: &["Notes".to_owned()],
            client_name: "App",
            publisher: None,
            redirect_to: "app.example",
            write: false,
            request: "r",
            csrf: "c",
            error: None,
        });
        assert!(
            html.contains("<code>capvault tokens list VAULT</code>"),
            "{html}"
        );
        assert!(
            html.contains("<code>capvault tokens revoke VAULT ID</code>"),
            "{html}"
        );
        assert!(html.contains("30 days without renewing it"), "{html}");
    }

    #[test]
    fn the_csp_allows_the_style_by_hash_and_nothing_else() {
        let p = csp(Some("https://client.example"));
        assert!(p.starts_with("default-src 'none'; style-src 'sha256-"));
        assert!(p.contains("frame-ancestors 'none'"));
        assert!(p.contains("form-action 'self' https://client.example;"));
        assert!(!p.contains("script-src") && !p.contains("unsafe"));
    }
}
