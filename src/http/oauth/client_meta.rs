//! The rules for an OAuth client's metadata, wherever it comes from (a dynamic registration,
//! RFC 7591, or a client metadata document fetched by its URL): which redirect URIs are allowed,
//! and how a client's name may read on the consent page.

use crate::http::oauth::page;

/// Most redirect URIs one client may list.
pub const MAX_REDIRECT_URIS: usize = 10;
/// Longest redirect URI.
const MAX_URI_LEN: usize = 2000;
/// Most characters of a client's name shown.
const MAX_NAME_CHARS: usize = 80;

/// A refused redirect URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectError {
    /// Over [`MAX_URI_LEN`].
    #[error("a redirect URI is too long")]
    TooLong,
    /// Not a URL.
    #[error("`{0}` is not a URL")]
    NotAUrl(String),
    /// It has a `#fragment`.
    #[error("`{0}` has a fragment")]
    Fragment(String),
    /// `http` on a host that is not loopback, or `https` without a host.
    #[error("`{0}`: http is allowed only on a loopback address")]
    NotLoopback(String),
    /// A scheme a browser runs or reads files with.
    #[error("`{0}`: that scheme is not allowed")]
    Scheme(String),
}

/// A client name holding a control or invisible character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`client_name` holds U+{:04X}, an invisible or control character (text-direction and \
     zero-width characters are refused: they can disguise the name)",
    *.0 as u32
)]
pub struct NameCharError(pub char);

/// Checks one redirect URI of a registration: no fragment; https, http on a loopback address,
/// or an app's own scheme (not one a browser runs or reads files with).
pub fn check_redirect_uri(uri: &str) -> Result<(), RedirectError> {
    if uri.len() > MAX_URI_LEN {
        return Err(RedirectError::TooLong);
    }
    let u = url::Url::parse(uri).map_err(|_| RedirectError::NotAUrl(uri.to_owned()))?;
    if u.fragment().is_some() {
        return Err(RedirectError::Fragment(uri.to_owned()));
    }
    let loopback = crate::net::is_loopback_host(&u);
    match u.scheme() {
        "https" if u.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" | "https" => Err(RedirectError::NotLoopback(uri.to_owned())),
        "javascript" | "data" | "file" | "vbscript" | "blob" | "about" | "filesystem" | "ftp"
        | "ws" | "wss" => Err(RedirectError::Scheme(uri.to_owned())),
        _ => Ok(()),
    }
}

/// A client's name as the consent page shows it: at most [`MAX_NAME_CHARS`], a stand-in when it
/// is missing or blank. A name holding a control character or an invisible one (a text-direction
/// override, a zero-width character, a tag character: they could reorder or hide what the page
/// says around it) is refused, with the reason.
pub fn client_name(given: Option<&str>) -> Result<String, NameCharError> {
    if let Some(c) = given.and_then(page::forbidden_char) {
        return Err(NameCharError(c));
    }
    Ok(given
        .map(|n| n.chars().take(MAX_NAME_CHARS).collect::<String>())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "An unnamed application".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_that_could_run_or_leak_are_refused() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost:8080/cb",
            "http://[::1]:9/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "https://x.example/cb#frag",
            "not a url",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }
}
