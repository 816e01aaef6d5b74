//! The one budget of a request, shared by the evaluators of Bases, Dataview and Tasks (and by
//! whatever else a request builds from hostile input): steps, a deadline, a check of whether
//! the caller still wants the answer, and **bytes**.
//!
//! Evaluators charge steps inside every loop that can run long; the clock and the stop check are
//! read once per [`CHECK_EVERY`] steps (and on every charge of that many or more), so charging
//! one step costs an atomic add.
//!
//! Bytes are charged *before* a value is built, from the size the builder computes from its
//! inputs ([`Budget::alloc`]): a request may build at most [`MAX_REQUEST_BYTES`], and every
//! request draws what it charges from one process-wide [`Pool`] of [`POOL_BYTES`] (image decodes
//! draw from it too), given back when the request's budget is dropped. Past its own bound a
//! request stops with [`Spent::Bytes`]; when the pool is drawn down by others it waits up to
//! [`POOL_WAIT`] and then stops with [`Spent::Busy`]. Charges are counted, not measured: what a
//! request frees early stays charged until it ends, so the bound is conservative.
//!
//! Each evaluator words the [`Spent`] it gets for its own users.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most evaluation steps one request may take by default.
pub const MAX_STEPS: u64 = 20_000_000;
/// Longest one request may evaluate by default.
pub const MAX_QUERY_TIME: Duration = Duration::from_secs(3);
/// Steps between two readings of the clock and the stop check.
pub const CHECK_EVERY: u64 = 1024;
/// Most bytes one request may build.
pub const MAX_REQUEST_BYTES: u64 = 192 << 20;
/// Most bytes the requests of one process may hold at once, evaluations and image decodes
/// together.
pub const POOL_BYTES: u64 = 768 << 20;
/// Longest a request waits for others to give bytes back to the pool.
pub const POOL_WAIT: Duration = Duration::from_millis(750);
/// What a budget draws from the pool at a time (fewer trips to its lock).
const DRAW: u64 = 1 << 20;

/// Why a request must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// Its steps (the number is the budget's).
    Steps(u64),
    /// Its time (the budget's).
    Time(Duration),
    /// Its bytes (the number is the budget's).
    Bytes(u64),
    /// The process's pool of bytes stayed drawn down by other requests.
    Busy,
    /// The caller stopped wanting the answer.
    Cancelled,
}

impl Spent {
    /// True when the request went past a bound of its own (steps, time, bytes), as opposed to
    /// the server being busy or the caller cancelling.
    pub fn is_exceeded(self) -> bool {
        matches!(self, Spent::Steps(_) | Spent::Time(_) | Spent::Bytes(_))
    }
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spent::Steps(max) => write!(f, "stopped after {max} evaluation steps"),
            Spent::Time(t) => write!(f, "stopped at its time limit ({:.1} s)", t.as_secs_f64()),
            Spent::Bytes(max) => write!(
                f,
                "stopped before building more than {} MiB of values",
                max >> 20
            ),
            Spent::Busy => f.write_str(
                "the server's memory for queries and images is in use by other requests; retry shortly",
            ),
            Spent::Cancelled => f.write_str("the request was cancelled"),
        }
    }
}

/// A process's bytes for evaluations and decodes: requests take from it and give back.
#[derive(Debug)]
pub struct Pool {
    capacity: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

static GLOBAL: Pool = Pool::new(POOL_BYTES);

impl Pool {
    /// A pool of `capacity` bytes.
    pub const fn new(capacity: u64) -> Pool {
        Pool {
            capacity,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// The process's pool.
    pub fn global() -> &'static Pool {
        &GLOBAL
    }

    /// Bytes taken now.
    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pool's size.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Takes `n` bytes, waiting for others to give some back until `until` while `stop` says
    /// nothing. `n` over the whole pool is never granted.
    fn take(&self, n: u64, until: Instant, stop: &dyn Fn() -> Option<Spent>) -> Result<(), Spent> {
        if n > self.capacity {
            return Err(Spent::Busy);
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *used + n <= self.capacity {
                *used += n;
                return Ok(());
            }
            if let Some(s) = stop() {
                return Err(s);
            }
            let now = Instant::now();
            if now >= until {
                return Err(Spent::Busy);
            }
            // Woken by a give, or every few milliseconds to read the stop check again.
            let wait = (until - now).min(Duration::from_millis(10));
            used = self
                .freed
                .wait_timeout(used, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn give(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(n);
        drop(used);
        self.freed.notify_all();
    }

    /// Takes `n` bytes for as long as the [`Reservation`] lives, waiting up to [`POOL_WAIT`]
    /// (an image decode, which knows its bound before it starts).
    pub fn reserve(&self, n: u64) -> Result<Reservation<'_>, Spent> {
        self.take(n, Instant::now() + POOL_WAIT, &|| None)?;
        Ok(Reservation { pool: self, n })
    }
}

/// Bytes taken from a [`Pool`], given back when dropped.
#[derive(Debug)]
pub struct Reservation<'p> {
    pool: &'p Pool,
    n: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.pool.give(self.n);
    }
}

/// Steps, a deadline, bytes and a stop check for one request, shared by the threads that
/// evaluate it (`Budget` is `Sync`; hold it in an `Arc` to share it between queries).
pub struct Budget {
    steps: AtomicU64,
    max_steps: u64,
    time: Duration,
    deadline: Instant,
    stop: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    bytes: AtomicU64,
    max_bytes: u64,
    pool: &'static Pool,
    /// What this budget took from the pool (given back on drop).
    drawn: Mutex<u64>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("steps", &self.steps)
            .field("max_steps", &self.max_steps)
            .field("time", &self.time)
            .field("bytes", &self.bytes)
            .field("max_bytes", &self.max_bytes)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        let drawn = *self.drawn.get_mut().unwrap_or_else(|e| e.into_inner());
        self.pool.give(drawn);
    }
}

impl Budget {
    /// [`MAX_STEPS`], [`MAX_QUERY_TIME`] and [`MAX_REQUEST_BYTES`] from the process's pool.
    pub fn new() -> Budget {
        Budget::with(MAX_STEPS, MAX_QUERY_TIME)
    }

    /// `steps` and `time`, the time counted from now; [`MAX_REQUEST_BYTES`].
    pub fn with(steps: u64, time: Duration) -> Budget {
        Budget {
            steps: AtomicU64::new(0),
            max_steps: steps,
            time,
            deadline: Instant::now() + time,
            stop: None,
            bytes: AtomicU64::new(0),
            max_bytes: MAX_REQUEST_BYTES,
            pool: Pool::global(),
            drawn: Mutex::new(0),
        }
    }

    /// The same budget with at most `max` bytes (tests, and callers with a smaller bound).
    pub fn max_bytes(mut self, max: u64) -> Budget {
        self.max_bytes = max;
        self
    }

    /// The same budget drawing from `pool` instead of the process's.
    pub fn in_pool(mut self, pool: &'static Pool) -> Budget {
        self.pool = pool;
        self
    }

    /// The same budget, also spent once `stop` says so (the request was cancelled: the caller
    /// gives the check, this layer knows nothing of requests).
    pub fn stop_when(mut self, stop: impl Fn() -> bool + Send + Sync + 'static) -> Budget {
        self.stop = Some(Box::new(stop));
        self
    }

    /// Steps charged so far.
    pub fn used(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// Bytes charged so far.
    pub fn bytes_used(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The byte bound.
    pub fn bytes_max(&self) -> u64 {
        self.max_bytes
    }

    /// Records `n` steps without checking anything (an evaluator handing back the steps it
    /// counted on its own when it ends).
    pub fn add(&self, n: u64) {
        self.steps.fetch_add(n, Ordering::Relaxed);
    }

    /// Charges `n` steps.
    pub fn charge(&self, n: u64) -> Result<(), Spent> {
        let s = self.steps.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if s > self.max_steps {
            return Err(Spent::Steps(self.max_steps));
        }
        if n >= CHECK_EVERY || s / CHECK_EVERY != (s - n) / CHECK_EVERY {
            self.check()?;
        }
        Ok(())
    }

    /// Charges `n` bytes that the caller is about to allocate: refused, before anything is
    /// built, past the request's bound or when the process's pool cannot give them in time.
    pub fn alloc(&self, n: u64) -> Result<(), Spent> {
        let before = self.bytes.fetch_add(n, Ordering::Relaxed);
        let total = before.saturating_add(n);
        if total > self.max_bytes {
            // Not charged: a refused value is never built.
            self.bytes.fetch_sub(n, Ordering::Relaxed);
            return Err(Spent::Bytes(self.max_bytes));
        }
        let mut drawn = self.drawn.lock().unwrap_or_else(|e| e.into_inner());
        if total > *drawn {
            let want = (total - *drawn).max(DRAW).min(self.max_bytes - *drawn);
            let until = (Instant::now() + POOL_WAIT).min(self.deadline);
            if let Err(e) = self.pool.take(want, until, &|| self.check().err()) {
                self.bytes.fetch_sub(n, Ordering::Relaxed);
                return Err(e);
            }
            *drawn += want;
        }
        Ok(())
    }

    /// Charges `count` items of `each` bytes (saturating), as [`Budget::alloc`].
    pub fn alloc_n(&self, count: usize, each: usize) -> Result<(), Spent> {
        self.alloc((count as u64).saturating_mul(each as u64))
    }

    /// Gives back `n` bytes charged for something already dropped (a compiled pattern that was
    /// not kept); they may be charged again by the same request.
    pub fn release(&self, n: u64) {
        let _ = self
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(n))
            });
    }

    /// Whether the request may go on now: the stop check, then the clock.
    pub fn check(&self) -> Result<(), Spent> {
        if self.stop.as_ref().is_some_and(|stop| stop()) {
            return Err(Spent::Cancelled);
        }
        if Instant::now() > self.deadline {
            return Err(Spent::Time(self.time));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity: u64) -> &'static Pool {
        Box::leak(Box::new(Pool::new(capacity)))
    }

    #[test]
    fn steps_time_and_the_stop_check_each_spend_a_budget() {
        let b = Budget::with(10, Duration::from_secs(60));
        assert_eq!(b.charge(10), Ok(()));
        assert_eq!(b.charge(1), Err(Spent::Steps(10)));
        let b = Budget::with(u64::MAX, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        // One step reads no clock; a charge that crosses a check does.
        assert_eq!(b.charge(1), Ok(()));
        assert_eq!(b.charge(CHECK_EVERY), Err(Spent::Time(Duration::ZERO)));
        let b = Budget::new().stop_when(|| true);
        assert_eq!(b.check(), Err(Spent::Cancelled));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn bytes_past_the_requests_bound_are_refused_and_not_charged() {
        let p = pool(1 << 30);
        let b = Budget::new().max_bytes(10 << 20).in_pool(p);
        assert_eq!(b.alloc(6 << 20), Ok(()));
        assert_eq!(b.alloc(5 << 20), Err(Spent::Bytes(10 << 20)));
        // The refused charge left nothing behind: what fits still fits.
        assert_eq!(b.bytes_used(), 6 << 20);
        assert_eq!(b.alloc(4 << 20), Ok(()));
        assert_eq!(
            b.alloc_n(usize::MAX, usize::MAX),
            Err(Spent::Bytes(10 << 20))
        );
        b.release(4 << 20);
        assert_eq!(b.bytes_used(), 6 << 20);
    }

    #[test]
    fn requests_draw_from_one_pool_and_give_it_back_when_they_end() {
        let p = pool(8 << 20);
        let a = Budget::new().in_pool(p);
        assert_eq!(a.alloc(6 << 20), Ok(()));
        assert!(p.used() >= 6 << 20);
        // A second request finds the pool drawn down, waits, and is refused busy.
        let b = Budget::new().in_pool(p);
        let started = Instant::now();
        assert_eq!(b.alloc(4 << 20), Err(Spent::Busy));
        assert!(started.elapsed() >= POOL_WAIT);
        assert_eq!(b.bytes_used(), 0);
        drop(a);
        assert_eq!(p.used(), 0);
        assert_eq!(b.alloc(4 << 20), Ok(()));
        // An image decode reserves from the same pool.
        assert_eq!(p.reserve(6 << 20).map(|_| ()), Err(Spent::Busy));
        drop(b);
        let r = p.reserve(6 << 20).expect("the pool is free again");
        assert_eq!(p.used(), 6 << 20);
        drop(r);
        assert_eq!(p.used(), 0);
    }

    #[test]
    fn a_waiting_request_takes_what_another_gives_back() {
        let p = pool(4 << 20);
        let a = Budget::new().in_pool(p);
        a.alloc(3 << 20).unwrap();
        let waiter = std::thread::spawn(move || {
            let b = Budget::new().in_pool(p);
            b.alloc(2 << 20)
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(a);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    }

    #[test]
    fn a_cancelled_request_stops_waiting_for_the_pool() {
        let p = pool(2 << 20);
        let _a = {
            let a = Budget::new().in_pool(p);
            a.alloc(2 << 20).unwrap();
            a
        };
        let b = Budget::new().in_pool(p).stop_when(|| true);
        assert_eq!(b.alloc(1 << 20), Err(Spent::Cancelled));
    }
}
