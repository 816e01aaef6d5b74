//! The stop request the engine's background threads (the first build, the watcher, the
//! embedder, the PDFs) sleep on and wake up for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::locks::{lock, recover};

/// A stop request that sleeping background threads wake up for.
#[derive(Debug, Default)]
pub(super) struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Stop {
    pub(super) fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _held = lock(&self.lock);
        self.wake.notify_all();
    }

    /// The flag itself, for walks that poll it.
    pub(super) fn flag(&self) -> &AtomicBool {
        &self.flag
    }

    pub(super) fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Sleeps for `d` or until a stop is requested; true when one was.
    pub(super) fn sleep(&self, d: Duration) -> bool {
        let held = lock(&self.lock);
        let _held = recover(self.wake.wait_timeout_while(held, d, |_| !self.is_set()));
        self.is_set()
    }
}
