//! Bearer tokens: where they come from (`CAPVAULT_TOKEN`, `--token-file`), what each allows, and
//! how a presented token is checked.
//!
//! Only SHA-256 digests of the tokens are kept in memory. A presented token is hashed and
//! compared with every digest in constant time (`subtle`), so neither the match nor its
//! position shows in the timing.

use std::sync::Arc;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::server::Grant;
use crate::server::policy::{PolicyError, profile_tools};

/// Shortest plain token accepted from the environment or a token file.
pub const MIN_TOKEN_LEN: usize = 32;

/// The prefix of the tokens `capvault token new` makes.
pub const TOKEN_PREFIX: &str = "cvt_";

/// The longest token name (`name=` in a token file).
pub const MAX_TOKEN_NAME: usize = 32;

pub use crate::server::vaults::{BadName, check_name_within};

/// A token too weak to accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakToken {
    /// Shorter than [`MIN_TOKEN_LEN`].
    #[error("a token needs at least {MIN_TOKEN_LEN} characters (`capvault token new` makes one)")]
    TooShort,
    /// A space, a control character or non-ASCII.
    #[error("a token is printable ASCII without spaces")]
    NotPrintable,
}

/// What is wrong with one line of a token file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// A plain token too weak to accept.
    #[error(transparent)]
    Weak(#[from] WeakToken),
    /// `sha256:` without 64 hex digits after it.
    #[error("`sha256:` needs 64 hex digits")]
    Digest,
    /// A scope other than `read` or `write`.
    #[error("scope `{0}` is not `read` or `write`")]
    Scope(String),
    /// A profile naming no known tool set.
    #[error(transparent)]
    Profile(#[from] PolicyError),
    /// A word after the profile.
    #[error("unexpected `{0}` (a line is TOKEN [read|write] [PROFILE] [name=NAME] [vaults=A,B])")]
    Unexpected(String),
    /// A token an earlier line already gave.
    #[error("the same token is listed twice")]
    Twice,
    /// A bad `name=`.
    #[error(transparent)]
    Name(#[from] NameError),
    /// `vaults=` with no name in it.
    #[error("`vaults=` needs vault names separated by commas")]
    NoVaults,
}

/// A refused token name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token name `{name}`: {why}")]
pub struct NameError {
    /// The name given.
    pub name: String,
    /// What a name must be.
    pub why: BadName,
}

/// Why tokens could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// `CAPVAULT_TOKEN` is too weak.
    #[error("CAPVAULT_TOKEN: {0}")]
    Env(WeakToken),
    /// A token file line is refused.
    #[error("line {line}: {error}")]
    Line {
        /// 1-based.
        line: usize,
        /// What is wrong with it.
        error: LineError,
    },
    /// A new token's name is refused.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The operating system gave no random bytes.
    #[error("no randomness from the system: {0}")]
    NoRandomness(getrandom::Error),
}

/// The accepted tokens.
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    digest: [u8; 32],
    grant: Grant,
}

impl Tokens {
    /// No tokens: allowed on a loopback listener only.
    pub fn none() -> Self {
        Tokens::default()
    }

    /// True when no token is configured.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds the `CAPVAULT_TOKEN` value: the server's own token, with every right the server
    /// has (`write` only matters when it runs with `--write`).
    pub fn add_env(&mut self, token: &str) -> Result<(), TokenError> {
        let token = token.trim();
        check_strength(token).map_err(TokenError::Env)?;
        self.entries.push(Entry {
            digest: digest(token),
            grant: Grant::full("env"),
        });
        Ok(())
    }

    /// The vault names the tokens are limited to (`vaults=`), each once, sorted: the server checks
    /// them against the vaults it serves.
    pub fn vault_names(&self) -> std::collections::BTreeSet<String> {
        self.entries
            .iter()
            .filter_map(|e| e.grant.vaults.as_deref())
            .flatten()
            .cloned()
            .collect()
    }

    /// Adds the tokens of a token file. Each line is `TOKEN [read|write] [PROFILE] [name=NAME]
    /// [vaults=A,B]`, where
    /// TOKEN is the token itself or `sha256:` and its digest in hex (what `capvault token new`
    /// prints, so the file holds no secret), the scope defaults to `read`, PROFILE (`all`,
    /// `read`, `minimal` or tool names separated by commas) narrows the tools further, and NAME
    /// names the token in the access log (beside its digest's first digits), and `vaults=`
    /// limits it to those vaults of a server of several (by name). Blank
    /// lines and lines starting with `#` are skipped.
    pub fn add_file(&mut self, text: &str, known_tools: &[String]) -> Result<(), TokenError> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |e: LineError| TokenError::Line {
                line: n + 1,
                error: e,
            };
            // `name=NAME` and `vaults=A,B` may stand anywhere after the token; the other words
            // keep their order.
            let mut name = None;
            let mut vaults = None;
            let mut words = line.split_whitespace().filter(|w| {
                if let Some(n) = w.strip_prefix("name=") {
                    name = Some(n);
                    false
                } else if let Some(v) = w.strip_prefix("vaults=") {
                    vaults = Some(v);
                    false
                } else {
                    true
                }
            });
            let secret = words.next().unwrap_or_default();
            let digest = match secret.strip_prefix("sha256:") {
                Some(hex) => parse_digest(hex).map_err(at)?,
                None => {
                    check_strength(secret).map_err(|e| at(e.into()))?;
                    digest(secret)
                }
            };
            let write = match words.next() {
                None | Some("read") => false,
                Some("write") => true,
                Some(other) => {
                    return Err(at(LineError::Scope(other.to_owned())));
                }
            };
            let tools = match words.next() {
                None => None,
                Some(spec) => profile_tools(spec, known_tools)
                    .map_err(|e| at(e.into()))?
                    .map(Arc::new),
            };
            if let Some(extra) = words.next() {
                return Err(at(LineError::Unexpected(extra.to_owned())));
            }
            drop(words);
            if self.entries.iter().any(|e| e.digest == digest) {
                return Err(at(LineError::Twice));
            }
            let vaults = match vaults {
                None => None,
                Some(list) => {
                    let set: std::collections::BTreeSet<String> = list
                        .split(',')
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if set.is_empty() {
                        return Err(at(LineError::NoVaults));
                    }
                    Some(Arc::new(set))
                }
            };
            let id = match name {
                Some(n) => {
                    check_name(n).map_err(|e| at(e.into()))?;
                    format!("{n} ({})", short_id(&digest))
                }
                None => short_id(&digest),
            };
            self.entries.push(Entry {
                digest,
                grant: Grant {
                    id,
                    write,
                    tools,
                    vaults,
                },
            });
        }
        Ok(())
    }

    /// Every token's grant, in the file's order (for `capvault tokens list`).
    pub fn grants(&self) -> impl Iterator<Item = &Grant> {
        self.entries.iter().map(|e| &e.grant)
    }

    /// The grant of `presented`, when it is one of the tokens. Every digest is compared, in
    /// constant time.
    pub fn check(&self, presented: &str) -> Option<&Grant> {
        let d = digest(presented);
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&d)) {
                found = Some(&e.grant);
            }
        }
        found
    }
}

/// The token of an `Authorization: Bearer <token>` header value (scheme in any case).
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// A token's name (`name=laptop` in the token file, shown in the access log): 1 to
/// [`MAX_TOKEN_NAME`] letters, digits, `-`, `_` or `.`.
pub fn check_name(name: &str) -> Result<(), NameError> {
    check_name_within(name, MAX_TOKEN_NAME).map_err(|why| NameError {
        name: name.to_owned(),
        why,
    })
}

/// A fresh random token (32 bytes from the operating system, URL-safe base64) and the token
/// file line for it (its digest, the scope, the optional profile and name).
pub fn new_token(
    write: bool,
    profile: Option<&str>,
    name: Option<&str>,
) -> Result<(String, String), TokenError> {
    if let Some(n) = name {
        check_name(n)?;
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(TokenError::NoRandomness)?;
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let mut line = format!(
        "sha256:{} {}",
        base16ct::lower::encode_string(&digest(&token)),
        if write { "write" } else { "read" }
    );
    if let Some(p) = profile {
        line.push(' ');
        line.push_str(p);
    }
    if let Some(n) = name {
        line.push_str(" name=");
        line.push_str(n);
    }
    Ok((token, line))
}

fn check_strength(token: &str) -> Result<(), WeakToken> {
    if token.len() < MIN_TOKEN_LEN {
        return Err(WeakToken::TooShort);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(WeakToken::NotPrintable);
    }
    Ok(())
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_digest(hex: &str) -> Result<[u8; 32], LineError> {
    let mut out = [0u8; 32];
    match base16ct::mixed::decode(hex, &mut out) {
        Ok(d) if d.len() == 32 => Ok(out),
        _ => Err(LineError::Digest),
    }
}

/// A token's name in logs: the first 8 hex digits of its digest.
fn short_id(digest: &[u8; 32]) -> String {
    format!("token-{}", base16ct::lower::encode_string(&digest[..4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        crate::server::CapvaultServer::tool_names()
    }

    #[test]
    fn a_token_file_line_sets_scope_and_profile() {
        let (t1, l1) = new_token(true, None, None).unwrap();
        let (t2, l2) = new_token(false, Some("minimal"), None).unwrap();
        let plain = "p".repeat(40);
        let text = format!("# tokens\n{l1}\n\n{l2}\n{plain}\n");
        let mut tokens = Tokens::none();
        tokens.add_file(&text, &known()).unwrap();
        assert_eq!(tokens.len(), 3);
        let g1 = tokens.check(&t1).unwrap();
        assert!(g1.write && g1.tools.is_none());
        let g2 = tokens.check(&t2).unwrap();
        assert!(!g2.write);
        assert!(g2.allows("read_note") && !g2.allows("list_tags"));
        assert!(
            !tokens.check(&plain).unwrap().write,
            "scope defaults to read"
        );
        assert!(
            tokens
                .check("wrong-token-wrong-token-wrong-token")
                .is_none()
        );
        assert!(tokens.check(&t1[..t1.len() - 1]).is_none());
        // No other token matches: every byte of the digest counts.
        for _ in 0..2000 {
            let (other, _) = new_token(false, None, None).unwrap();
            assert!(tokens.check(&other).is_none());
        }
    }

    #[test]
    fn a_bad_token_file_names_the_line() {
        let mut t = Tokens::none();
        let mut refusal = |text: &str| t.add_file(text, &known()).unwrap_err().to_string();
        let e = refusal("short\n");
        assert!(e.starts_with("line 1:") && e.contains("32"), "{e}");
        let long = "x".repeat(40);
        let e = refusal(&format!("\n{long} admin\n"));
        assert!(e.starts_with("line 2:") && e.contains("admin"), "{e}");
        let e = refusal(&format!("{long} read nope_tool\n"));
        assert!(e.contains("nope_tool"), "{e}");
        let e = refusal("sha256:abc read\n");
        assert!(e.contains("64 hex"), "{e}");
        // 64 characters that are not 32 bytes of hex (a sign before each digit pair's second
        // half parsed as a number before).
        let signed = "+f".repeat(32);
        let e = refusal(&format!("sha256:{signed} read\n"));
        assert!(e.contains("64 hex"), "{e}");
        let upper = "AB".repeat(32);
        assert!(
            Tokens::none()
                .add_file(&format!("sha256:{upper} read\n"), &known())
                .is_ok()
        );
        let e = Tokens::none()
            .add_file(&format!("{long}\n{long} write\n"), &known())
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn a_named_token_is_logged_by_its_name() {
        let (t, line) = new_token(true, Some("minimal"), Some("laptop")).unwrap();
        assert!(line.ends_with(" write minimal name=laptop"), "{line}");
        let mut tokens = Tokens::none();
        tokens.add_file(&line, &known()).unwrap();
        let g = tokens.check(&t).unwrap();
        assert!(g.id.starts_with("laptop (token-"), "{}", g.id);
        assert!(g.write && g.allows("read_note") && !g.allows("list_tags"));
        let long = "x".repeat(40);
        let e = Tokens::none()
            .add_file(&format!("{long} name=a/b\n"), &known())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "line 1: token name `a/b`: use 1 to 32 letters, digits, `-`, `_` or `.`"
        );
        assert!(new_token(false, None, Some("")).is_err());
    }

    #[test]
    fn one_name_check_serves_token_names_and_install_names() {
        assert!(check_name(&"a".repeat(32)).is_ok());
        let e = check_name(&"a".repeat(33)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "token name `{}`: use 1 to 32 letters, digits, `-`, `_` or `.`",
                "a".repeat(33)
            )
        );
        assert!(check_name_within(&"a".repeat(64), 64).is_ok());
        for bad in ["", "a b", "a/b", "../x", "é"] {
            assert_eq!(
                check_name_within(bad, 64),
                Err(BadName { max: 64 }),
                "{bad:?}"
            );
        }
        assert_eq!(
            BadName { max: 64 }.to_string(),
            "use 1 to 64 letters, digits, `-`, `_` or `.`"
        );
    }

    #[test]
    fn a_weak_environment_token_is_named_as_such() {
        let e = Tokens::none().add_env("short").unwrap_err().to_string();
        assert!(
            e.starts_with("CAPVAULT_TOKEN: a token needs at least 32"),
            "{e}"
        );
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn new_tokens_differ_and_match_their_line() {
        let (a, la) = new_token(false, None, None).unwrap();
        let (b, _) = new_token(false, None, None).unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() >= MIN_TOKEN_LEN);
        let mut t = Tokens::none();
        t.add_file(&la, &known()).unwrap();
        assert!(t.check(&a).is_some() && t.check(&b).is_none());
    }
}
