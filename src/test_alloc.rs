//! The lib's test build counts heap bytes (one relaxed atomic and one thread-local add per
//! allocation): [`LIVE`], the bytes in use in the whole process, and [`allocated_during`], the
//! bytes a piece of work allocates on its own thread, which the budget tests compare with what
//! the budget let them build.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Heap bytes in use in the process.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Bytes allocated by this thread so far (never decreases).
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(n: usize) {
    // `try_with`: a thread being torn down allocates nothing we count.
    let _ = ALLOCATED.try_with(|a| a.set(a.get().wrapping_add(n as u64)));
}

/// Heap bytes the calling thread has asked for so far (a reallocation counts its new size).
pub fn asked_by_this_thread() -> u64 {
    ALLOCATED.with(Cell::get)
}

/// Runs `work` and returns its result and the bytes it allocated on this thread (every
/// allocation counted in full, whatever was freed since: a bound on what it built).
pub fn allocated_during<T>(work: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATED.with(Cell::get);
    let out = work();
    let after = ALLOCATED.with(Cell::get);
    (out, after.wrapping_sub(before))
}

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        count(layout.size());
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        count(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;
