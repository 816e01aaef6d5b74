//! Cancellation of one request's work on the blocking pool: the server marks a request's
//! [`Flag`] when the client cancels it or its HTTP reply times out, and [`run`] makes that flag
//! the current thread's while the work runs, so that a long loop anywhere below the server can
//! ask [`requested`] (a thread-local read and an atomic load: cheap enough for every note or
//! every few thousand lines) and stop early. The result of cancelled work is thrown away, so it
//! may stop anywhere a read may; a write must not stop half-way, so write paths do not ask.
//!
//! The flag is the calling thread's only: work spread over other threads (rayon) takes
//! [`current`] along and asks [`Flag::is_cancelled`] there. Layers below `notes` never name
//! this module: they are handed a check (a [`Flag`] in a closure, as the Bases budget is).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::obsidian::budget::Budget;

/// One request's cancellation mark.
#[derive(Debug, Clone, Default)]
pub struct Flag(Arc<AtomicBool>);

impl Flag {
    pub fn new() -> Flag {
        Flag::default()
    }

    /// Marks the request cancelled.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Flag>> = const { RefCell::new(None) };
    static BUDGET: RefCell<Option<Arc<Budget>>> = const { RefCell::new(None) };
    static NOW: std::cell::Cell<Option<chrono::NaiveDateTime>> = const { std::cell::Cell::new(None) };
}

/// "Now", local time, for the request running on this thread (under [`run`]): read once, at
/// its first use, so that every query and date word of one request sees the same moment.
/// Outside [`run`], the clock each call.
pub fn now() -> chrono::NaiveDateTime {
    if current().is_none() {
        return crate::obsidian::bases::eval::local_now();
    }
    NOW.with(|n| {
        *n.get()
            .get_or_insert_with(crate::obsidian::bases::eval::local_now)
    })
}

/// The budget of the request running on this thread (under [`run`]): made at its first use,
/// spent once the request is cancelled, and shared by every query, inline value, prompt embed
/// and image decode of the request, so that one request has one budget of steps, time and bytes
/// however many evaluations it makes. Outside [`run`] (tests, tools that are no request), a
/// fresh budget each call.
pub fn budget() -> Arc<Budget> {
    let Some(flag) = current() else {
        return Arc::new(Budget::new());
    };
    BUDGET.with(|b| {
        b.borrow_mut()
            .get_or_insert_with(|| Arc::new(Budget::new().stop_when(move || flag.is_cancelled())))
            .clone()
    })
}

/// Runs `work` with `flag` as this thread's current flag (the one before is restored after,
/// also when `work` panics).
pub fn run<T>(flag: &Flag, work: impl FnOnce() -> T) -> T {
    struct Restore(
        Option<Flag>,
        Option<Arc<Budget>>,
        Option<chrono::NaiveDateTime>,
    );
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
            let budget = self.1.take();
            BUDGET.with(|b| *b.borrow_mut() = budget);
            NOW.with(|n| n.set(self.2));
        }
    }
    let before = CURRENT.with(|c| c.borrow_mut().replace(flag.clone()));
    let budget = BUDGET.with(|b| b.borrow_mut().take());
    let now = NOW.with(|n| n.take());
    let _restore = Restore(before, budget, now);
    work()
}

/// True when the work running on this thread (under [`run`]) was cancelled.
pub fn requested() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Flag::is_cancelled))
}

/// This thread's flag (under [`run`]), to carry into the threads that share its work.
pub fn current() -> Option<Flag> {
    CURRENT.with(|c| c.borrow().clone())
}

/// An error once the work running on this thread was cancelled (its result is thrown away).
pub fn check() -> Result<(), super::NoteError> {
    if requested() {
        return Err(cancelled());
    }
    Ok(())
}

/// The error of cancelled work.
pub fn cancelled() -> super::NoteError {
    super::NoteError::Unavailable("the request was cancelled".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_seen_only_inside_its_run_and_only_once_marked() {
        let flag = Flag::new();
        assert!(!requested());
        run(&flag, || {
            assert!(!requested());
            flag.cancel();
            assert!(requested());
            let other = Flag::new();
            run(&other, || {
                assert!(!requested(), "an inner run has its own flag")
            });
            assert!(requested(), "the outer flag is back");
            assert!(current().is_some_and(|f| f.is_cancelled()));
            assert!(check().is_err());
        });
        assert!(current().is_none() && check().is_ok());
        assert!(!requested(), "no flag outside a run");
    }

    #[test]
    fn a_request_has_one_budget_which_its_cancellation_spends() {
        use crate::obsidian::budget::Spent;
        let flag = Flag::new();
        run(&flag, || {
            let a = budget();
            let b = budget();
            assert!(
                Arc::ptr_eq(&a, &b),
                "every evaluation of the request shares it"
            );
            a.alloc(1 << 20).unwrap();
            assert_eq!(b.bytes_used(), 1 << 20);
            assert_eq!(b.check(), Ok(()));
            flag.cancel();
            assert_eq!(b.check(), Err(Spent::Cancelled));
            // An inner run is another request, with a budget of its own.
            run(&Flag::new(), || {
                assert_eq!(budget().bytes_used(), 0);
                assert_eq!(budget().check(), Ok(()));
            });
            assert!(Arc::ptr_eq(&budget(), &a), "the outer request's is back");
        });
        // Outside a request every call is a fresh budget.
        assert!(!Arc::ptr_eq(&budget(), &budget()));
    }
}
