//! The lib's test build counts heap bytes: those in use in the whole process (one relaxed
//! atomic per allocation), for `model::tests::hostile_note_costs`, and those each thread has
//! asked for so far, for tests that bound what one computation allocates
//! (`obsidian::bases::tests`), whatever the tests running beside it do.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Heap bytes in use in the process.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Heap bytes this thread has asked for (a reallocation counts its new size).
    static ASKED: Cell<u64> = const { Cell::new(0) };
}

/// Heap bytes the calling thread has asked for so far.
pub fn asked_by_this_thread() -> u64 {
    ASKED.with(Cell::get)
}

fn count(n: usize) {
    // No destructor and a constant initial value: safe to reach from the allocator, and
    // `try_with` gives up quietly while the thread is being torn down.
    let _ = ASKED.try_with(|a| a.set(a.get() + n as u64));
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
