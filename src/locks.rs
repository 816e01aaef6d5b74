//! Locks that survive a panic. A thread that panics while holding a lock poisons it; every lock
//! in capvault guards state that stays consistent step by step (a cache, a queue, a status
//! line), so the next holder takes the value as the panicking thread left it rather than
//! panicking in turn. These four spell that once; no module writes
//! `unwrap_or_else(|e| e.into_inner())` itself.

use std::sync::{LockResult, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, recovering it if a thread panicked while holding it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    recover(m.lock())
}

/// Read-locks `l`, recovering it if a thread panicked while holding it.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    recover(l.read())
}

/// Write-locks `l`, recovering it if a thread panicked while holding it.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    recover(l.write())
}

/// The guard or value of any other lock operation (a condition variable's wait, a mutex taken
/// apart), poisoned or not.
pub fn recover<G>(r: LockResult<G>) -> G {
    r.unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_usable() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let l = std::sync::Arc::new(RwLock::new(2));
        let (m2, l2) = (m.clone(), l.clone());
        let _ = std::thread::spawn(move || {
            let _m = m2.lock().unwrap();
            let _l = l2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && l.is_poisoned());
        *lock(&m) += 1;
        *write(&l) += 1;
        assert_eq!((*lock(&m), *read(&l)), (2, 3));
    }
}
