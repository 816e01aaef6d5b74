//! Bounds on connections, before any request is read: how many may be open in all and from one
//! client address.
//!
//! A connection is *unproven* until a request on it presents a valid credential (see
//! `admit`), which marks it through the [`Proven`] each of its requests carries. At a bound, a
//! new connection takes the place of the oldest unproven one (which is closed) and is refused
//! only when every place is held by a proven client: idle connections that never showed a token
//! (256 of them from 127.0.0.1 once locked every local client out) cannot keep an authenticated
//! client from connecting. The header timeout set on the server also closes each idle
//! connection soon after.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower_http::add_extension::AddExtension;

/// One open connection's state, shared by the connection, its requests and the bounds.
#[derive(Debug, Default)]
struct Conn {
    /// A request on it presented a valid credential.
    proven: AtomicBool,
    /// Closed to make room for a newer connection: its reads and writes fail.
    evicted: AtomicBool,
    /// The task waiting on the connection, woken when it is evicted.
    waker: Mutex<Option<Waker>>,
}

impl Conn {
    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(w) = crate::locks::lock(&self.waker).take() {
            w.wake();
        }
    }

    /// `Err` once evicted; else remembers the task to wake (called when the socket is not
    /// ready, before the task sleeps).
    fn check(&self, cx: &Context<'_>) -> io::Result<()> {
        {
            let mut w = crate::locks::lock(&self.waker);
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
        }
        self.check_now()
    }

    fn check_now(&self) -> io::Result<()> {
        if self.evicted.load(Ordering::SeqCst) {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for a newer connection",
            ))
        } else {
            Ok(())
        }
    }
}

/// What a request carries of its connection: [`Proven::prove`] once its credential is valid.
#[derive(Debug, Clone)]
pub struct Proven(Arc<Conn>);

impl Proven {
    /// Marks the connection as an authenticated client's: it is never closed to make room.
    pub fn prove(&self) {
        self.0.proven.store(true, Ordering::SeqCst);
    }
}

/// The open connections, in the order they were accepted.
#[derive(Debug, Default)]
struct Counts {
    /// Accepted connections still open and not evicted, by acceptance number.
    open: BTreeMap<u64, (IpAddr, Arc<Conn>)>,
    /// How many of them from each address.
    per_address: std::collections::HashMap<IpAddr, usize>,
    next: u64,
}

impl Counts {
    /// Forgets connection `id` (evicted or closed); false when it was already forgotten.
    fn forget(&mut self, id: u64) -> bool {
        let Some((ip, _)) = self.open.remove(&id) else {
            return false;
        };
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        true
    }

    /// Closes the oldest unproven connection (from `ip` only, when given); false when there is
    /// none.
    fn evict_oldest_unproven(&mut self, ip: Option<IpAddr>) -> bool {
        let victim = self
            .open
            .iter()
            .find(|(_, (from, c))| {
                ip.is_none_or(|ip| *from == ip) && !c.proven.load(Ordering::SeqCst)
            })
            .map(|(id, (_, c))| (*id, Arc::clone(c)));
        let Some((id, conn)) = victim else {
            return false;
        };
        self.forget(id);
        conn.evict();
        true
    }
}

/// An acceptor (for axum-server) that keeps connections within the bounds: past `max_total`
/// open connections, or past `max_per_address` from the connection's address, a new one takes
/// the place of the oldest unproven connection, or is refused when there is none.
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
        if c.per_address.get(&ip).copied().unwrap_or(0) >= self.max_per_address
            && !c.evict_oldest_unproven(Some(ip))
        {
            return Err("too many connections from this address");
        }
        if c.open.len() >= self.max_total && !c.evict_oldest_unproven(None) {
            return Err("too many connections");
        }
        let id = c.next;
        c.next += 1;
        let conn = Arc::new(Conn::default());
        c.open.insert(id, (ip, Arc::clone(&conn)));
        *c.per_address.entry(ip).or_insert(0) += 1;
        Ok(Slot {
            counts: Arc::clone(&self.counts),
            id,
            conn,
        })
    }
}

/// One open connection's place; given back when the connection is dropped (or evicted).
#[derive(Debug)]
struct Slot {
    counts: Arc<Mutex<Counts>>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        crate::locks::lock(&self.counts).forget(self.id);
    }
}

/// A connection that holds its place while it is open.
#[derive(Debug)]
pub struct Counted {
    inner: TcpStream,
    slot: Slot,
}

impl<S> axum_server::accept::Accept<TcpStream, S> for ConnectionLimit {
    type Stream = Counted;
    type Service = AddExtension<S, Proven>;
    type Future = std::future::Ready<io::Result<(Counted, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let taken = stream
            .peer_addr()
            .map_err(|e| io::Error::other(format!("no peer address: {e}")))
            .and_then(|peer| {
                self.take(peer.ip())
                    .map_err(|why| io::Error::other(format!("{why} ({})", peer.ip())))
            });
        std::future::ready(taken.map(|slot| {
            let proven = Proven(Arc::clone(&slot.conn));
            (
                Counted {
                    inner: stream,
                    slot,
                },
                AddExtension::new(service, proven),
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
        self.slot.conn.check_now()?;
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Pending => {
                self.slot.conn.check(cx)?;
                Poll::Pending
            }
            ready => ready,
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.slot.conn.check_now()?;
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
        self.slot.conn.check_now()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn places_are_bounded_per_address_and_in_all_and_given_back() {
        let limit = ConnectionLimit::new(3, 2);
        let (a, b, c) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
        let a1 = limit.take(a).unwrap();
        let a2 = limit.take(a).unwrap();
        a1.conn.proven.store(true, Ordering::SeqCst);
        a2.conn.proven.store(true, Ordering::SeqCst);
        assert!(limit.take(a).is_err(), "a third from one address");
        let b1 = limit.take(b).unwrap();
        b1.conn.proven.store(true, Ordering::SeqCst);
        assert!(limit.take(c).is_err(), "a fourth in all");
        drop(a1);
        assert!(limit.take(c).is_ok(), "the place was given back");
    }

    #[test]
    fn idle_connections_that_never_showed_a_token_make_room_for_a_new_one_oldest_first() {
        let limit = ConnectionLimit::new(4, 3);
        let local = ip("127.0.0.1");
        let client = limit.take(local).unwrap();
        client.conn.proven.store(true, Ordering::SeqCst);
        let idle1 = limit.take(local).unwrap();
        let idle2 = limit.take(local).unwrap();
        // At the address's bound: the oldest unproven connection is closed, never the proven one.
        let newer = limit.take(local).unwrap();
        assert!(idle1.conn.evicted.load(Ordering::SeqCst));
        assert!(!idle2.conn.evicted.load(Ordering::SeqCst));
        assert!(!client.conn.evicted.load(Ordering::SeqCst));
        // The evicted one's place is given back once, not again when it is dropped.
        drop(idle1);
        assert_eq!(crate::locks::lock(&limit.counts).per_address[&local], 3);
        // In all: a connection from another address makes room the same way.
        let other = limit.take(ip("10.0.0.9")).unwrap();
        assert_eq!(crate::locks::lock(&limit.counts).open.len(), 4);
        let fifth = limit.take(ip("10.0.0.10")).unwrap();
        assert!(idle2.conn.evicted.load(Ordering::SeqCst));
        assert!(!other.conn.evicted.load(Ordering::SeqCst));
        assert_eq!(crate::locks::lock(&limit.counts).open.len(), 4);
        // Every place proven: refused.
        for s in [&newer, &other, &fifth] {
            s.conn.proven.store(true, Ordering::SeqCst);
        }
        assert!(limit.take(local).is_err());
        assert!(limit.take(ip("10.0.0.11")).is_err());
    }
}
