//! The budget of one query, shared by the evaluators of Bases and Dataview: steps, a deadline,
//! and a check of whether the caller still wants the answer. Evaluators charge it inside every
//! loop that can run long; the clock and the stop check are read once per [`CHECK_EVERY`] steps
//! (and on every charge of that many or more), so charging one step costs an atomic add.
//! Each evaluator words the [`Spent`] it gets for its own users.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Most evaluation steps one query may take by default.
pub const MAX_STEPS: u64 = 20_000_000;
/// Longest a query may evaluate by default.
pub const MAX_QUERY_TIME: Duration = Duration::from_secs(3);
/// Steps between two readings of the clock and the stop check.
pub const CHECK_EVERY: u64 = 1024;

/// Why a query must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// Its steps (the number is the budget's).
    Steps(u64),
    /// Its time (the budget's).
    Time(Duration),
    /// The caller stopped wanting the answer.
    Cancelled,
}

/// Steps, a deadline and a stop check for one query, shared by the threads that evaluate it.
pub struct Budget {
    steps: AtomicU64,
    max_steps: u64,
    time: Duration,
    deadline: Instant,
    stop: Option<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("steps", &self.steps)
            .field("max_steps", &self.max_steps)
            .field("time", &self.time)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

impl Budget {
    /// [`MAX_STEPS`] and [`MAX_QUERY_TIME`].
    pub fn new() -> Budget {
        Budget::with(MAX_STEPS, MAX_QUERY_TIME)
    }

    /// `steps` and `time`, the time counted from now.
    pub fn with(steps: u64, time: Duration) -> Budget {
        Budget {
            steps: AtomicU64::new(0),
            max_steps: steps,
            time,
            deadline: Instant::now() + time,
            stop: None,
        }
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

    /// Whether the query may go on now: the stop check, then the clock.
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
}
