//! Bounds on connections, before any request is read: how many may be open in all and from one
//! client address. A connection past either bound is closed as soon as it is accepted, so a
//! client that opens connections and never finishes a request (or finishes one and keeps the
//! connection idle) holds at most its own share; the header timeout set on the server closes
//! each such connection soon after.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Counts the open connections, in all and per client address.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// An acceptor (for axum-server) that refuses a connection past the bounds: past `max_total`
/// open connections, or past `max_per_address` from the connection's address.
#[derive(Debug, Clone)]
pub struct ConnectionLimit {
    counts: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_address: usize,
}

impl ConnectionLimit {
    pub fn new(max_total: usize, max_per_address: usize) -> ConnectionLimit {
        ConnectionLimit {
            counts: Arc::new(Mutex::new(Counts::default())),
            max_total,
            max_per_address,
        }
    }

    /// A place for one more connection from `ip`, or why there is none.
    fn take(&self, ip: IpAddr) -> Result<Slot, &'static str> {
        let mut c = crate::locks::lock(&self.counts);
        if c.total >= self.max_total {
            return Err("too many connections");
        }
        let n = c.per_address.entry(ip).or_insert(0);
        if *n >= self.max_per_address {
            return Err("too many connections from this address");
        }
        *n += 1;
        c.total += 1;
        Ok(Slot {
            counts: Arc::clone(&self.counts),
            ip,
        })
    }
}

/// One open connection's place; given back when the connection is dropped.
#[derive(Debug)]
struct Slot {
    counts: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = crate::locks::lock(&self.counts);
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_address.remove(&self.ip);
            }
        }
    }
}

/// A connection that holds its place while it is open.
#[derive(Debug)]
pub struct Counted {
    inner: TcpStream,
    _slot: Slot,
}

impl<S> axum_server::accept::Accept<TcpStream, S> for ConnectionLimit {
    type Stream = Counted;
    type Service = S;
    type Future = std::future::Ready<io::Result<(Counted, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let taken = stream
            .peer_addr()
            .map_err(|e| io::Error::other(format!("no peer address: {e}")))
            .and_then(|peer| {
                self.take(peer.ip())
                    .map_err(|why| io::Error::other(format!("{why} ({})", peer.ip())))
            });
        std::future::ready(taken.map(|slot| {
            (
                Counted {
                    inner: stream,
                    _slot: slot,
                },
                service,
            )
        }))
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_address_and_in_all_and_given_back() {
        let limit = ConnectionLimit::new(3, 2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            "10.0.0.3".parse().unwrap(),
        );
        let a1 = limit.take(a).unwrap();
        let _a2 = limit.take(a).unwrap();
        assert!(limit.take(a).is_err(), "a third from one address");
        let _b1 = limit.take(b).unwrap();
        assert!(limit.take(c).is_err(), "a fourth in all");
        drop(a1);
        assert!(limit.take(c).is_ok(), "the place was given back");
    }
}
