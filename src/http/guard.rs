//! DNS-rebinding protection: the `Host` header must name this server (loopback names, or a
//! host given with `--allowed-host`), and a browser's `Origin`, when present, must be one this
//! server trusts (its own loopback origins, or one given with `--allowed-origin`). A web page a
//! user visits can make the browser send requests to `127.0.0.1`, but it cannot choose the
//! `Origin` the browser sends, and a rebound DNS name still arrives in `Host`.

/// A malformed `--allowed-host` or `--allowed-origin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// Not `name` or `name:port`.
    #[error("--allowed-host `{0}`: give a host name or host:port")]
    Host(String),
    /// Not `scheme://host[:port]`.
    #[error("--allowed-origin `{0}`: give scheme://host or scheme://host:port")]
    Origin(String),
}

/// What `Host` and `Origin` may be.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Allowed hosts: `(name, port)` with `None` for any port; names lowercase, IPv6 without
    /// brackets.
    hosts: Vec<(String, Option<u16>)>,
    /// Allowed origins, normalised: `scheme://host:port`.
    origins: Vec<String>,
}

/// The loopback names always allowed in `Host`.
pub const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

impl Guard {
    /// A guard for a server on `port`, with `extra_hosts` (`name` or `name:port`) and
    /// `extra_origins` (`scheme://host[:port]`) allowed besides the loopback ones.
    pub fn new(
        port: u16,
        tls: bool,
        extra_hosts: &[String],
        extra_origins: &[String],
    ) -> Result<Guard, GuardError> {
        let mut hosts: Vec<(String, Option<u16>)> = LOOPBACK_HOSTS
            .iter()
            .map(|h| ((*h).to_owned(), None))
            .collect();
        for h in extra_hosts {
            hosts.push(split_authority(h).ok_or_else(|| GuardError::Host(h.clone()))?);
        }
        let scheme = if tls { "https" } else { "http" };
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("{scheme}://{h}:{port}"))
            .collect();
        for o in extra_origins {
            origins.push(normal_origin(o).ok_or_else(|| GuardError::Origin(o.clone()))?);
        }
        Ok(Guard { hosts, origins })
    }

    /// The allowed hosts as rmcp's own Host check takes them (`name` or `name:port`).
    pub fn rmcp_hosts(&self) -> Vec<String> {
        self.hosts
            .iter()
            .map(|(n, p)| match (p, n.contains(':')) {
                (None, _) => n.clone(),
                (Some(p), true) => format!("[{n}]:{p}"),
                (Some(p), false) => format!("{n}:{p}"),
            })
            .collect()
    }

    /// The allowed origins, `scheme://host:port` (rmcp's own Origin check takes them as they are).
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Checks a request's `Host` (or HTTP/2 `:authority`) value.
    pub fn check_host(&self, host: Option<&str>) -> Result<(), &'static str> {
        let Some((name, port)) = host.and_then(split_authority) else {
            return Err("a Host header naming this server is required");
        };
        let ok = self
            .hosts
            .iter()
            .any(|(n, p)| *n == name && (p.is_none() || *p == port));
        if ok {
            Ok(())
        } else {
            Err("this Host is not allowed (see --allowed-host)")
        }
    }

    /// Checks a request's `Origin`, when it has one.
    pub fn check_origin(&self, origin: Option<&[u8]>) -> Result<(), &'static str> {
        let Some(raw) = origin else {
            return Ok(());
        };
        let Some(o) = std::str::from_utf8(raw).ok().and_then(normal_origin) else {
            return Err("the Origin header is malformed");
        };
        if self.origins.contains(&o) {
            Ok(())
        } else {
            Err("this Origin is not allowed (see --allowed-origin)")
        }
    }
}

/// `host[:port]` as (lowercase name without IPv6 brackets, port).
fn split_authority(s: &str) -> Option<(String, Option<u16>)> {
    let s = s.trim();
    if s.is_empty() || s.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let (name, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        (v6.to_owned(), port)
    } else if s.matches(':').count() > 1 {
        // A bare IPv6 address (only in --allowed-host).
        (s.to_owned(), None)
    } else {
        match s.split_once(':') {
            Some((n, p)) => (n.to_owned(), Some(p.parse().ok()?)),
            None => (s.to_owned(), None),
        }
    };
    if name.is_empty() {
        return None;
    }
    Some((name.to_ascii_lowercase(), port))
}

/// An origin as `scheme://host:port` (default port made explicit), or `None` when it is not
/// an http(s) origin. `null` (sandboxed frames, local files) is never allowed.
fn normal_origin(s: &str) -> Option<String> {
    let (scheme, rest) = s.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (name, port) = split_authority(rest)?;
    let host = if name.contains(':') {
        format!("[{name}]")
    } else {
        name
    };
    Some(format!("{scheme}://{host}:{}", port.unwrap_or(default)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new(
            8000,
            false,
            &["vault.example.org".into(), "10.0.0.5:9000".into()],
            &["https://app.example.org".into()],
        )
        .unwrap()
    }

    #[test]
    fn hosts_that_are_allowed() {
        let g = guard();
        for h in [
            "localhost",
            "localhost:8000",
            "127.0.0.1:8000",
            "[::1]:8000",
            "LOCALHOST:1",
            "vault.example.org",
            "vault.example.org:443",
            "10.0.0.5:9000",
        ] {
            assert!(g.check_host(Some(h)).is_ok(), "{h}");
        }
    }

    #[test]
    fn rebinding_hosts_are_refused() {
        let g = guard();
        for h in [
            "evil.example",
            "evil.example:8000",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "10.0.0.5:9001",
            "10.0.0.5",
            "user@localhost",
            "",
            "[::1",
            "localhost:notaport",
        ] {
            assert!(g.check_host(Some(h)).is_err(), "{h}");
        }
        assert!(g.check_host(None).is_err());
    }

    #[test]
    fn origins_that_are_allowed() {
        let g = guard();
        assert!(g.check_origin(None).is_ok());
        for o in [
            "http://localhost:8000",
            "http://127.0.0.1:8000",
            "http://[::1]:8000",
            "https://app.example.org",
            "https://app.example.org:443",
            "HTTPS://APP.example.org/",
        ] {
            assert!(g.check_origin(Some(o.as_bytes())).is_ok(), "{o}");
        }
    }

    #[test]
    fn foreign_and_malformed_origins_are_refused() {
        let g = guard();
        for o in [
            "http://evil.example",
            "http://localhost:3000",
            "https://localhost:8000",
            "http://app.example.org",
            "https://app.example.org:8443",
            "null",
            "file://",
            "not an origin",
            "http://",
            "http://localhost:8000/path",
            "javascript:alert(1)",
        ] {
            assert!(g.check_origin(Some(o.as_bytes())).is_err(), "{o}");
        }
        assert!(g.check_origin(Some(b"\xff\xfe")).is_err());
    }

    #[test]
    fn bad_flags_are_errors() {
        assert_eq!(
            Guard::new(1, false, &["a/b".into()], &[])
                .unwrap_err()
                .to_string(),
            "--allowed-host `a/b`: give a host name or host:port"
        );
        assert!(Guard::new(1, false, &[], &["app.example.org".into()]).is_err());
        assert!(Guard::new(1, false, &[], &["ftp://x".into()]).is_err());
    }
}
