//! A bound on the documents waiting for tantivy's indexing threads.
//!
//! tantivy queues up to 10,000 added documents for its indexing threads. A first build reads
//! notes faster than tantivy indexes them, so that queue stays full, and each queued document
//! carries a copy of its note's whole text: about 40 MB at 100,000 notes, held through the whole
//! build. [`Queue`] lets only [`MAX_QUEUED`] documents be staged and not yet indexed: each one
//! holds a permit, given back when tantivy drops the document once it has indexed it. Readers
//! that stage more wait for a permit, which keeps the indexing threads fed without holding the
//! vault's text twice.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::locks::{lock, recover};

use tantivy::TantivyDocument;
use tantivy::schema::document::{
    DeserializeError, Document, DocumentDeserialize, DocumentDeserializer,
};

/// Documents staged but not yet indexed, at most (a few MB of note text). Enough to keep
/// tantivy's threads busy: readers stage far faster than they index.
pub const MAX_QUEUED: usize = 512;

/// How long a reader waits for a permit before staging anyway. tantivy's threads drop every
/// document they index, so a wait this long means they are stuck or gone; staging on then falls
/// back to tantivy's own bound rather than hanging here.
const MAX_WAIT: Duration = Duration::from_secs(2);

/// Counts the documents in flight; see the module docs.
#[derive(Debug, Clone)]
pub struct Queue(Arc<Gate>);

#[derive(Debug)]
struct Gate {
    max: usize,
    state: Mutex<State>,
    reopened: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Documents admitted and not yet dropped.
    in_flight: usize,
    /// Set when the queue fills, cleared when it is half empty: readers wait meanwhile, and
    /// are woken together rather than one per document indexed (a context switch per note).
    closed: bool,
}

impl Queue {
    /// A queue letting `max` documents (at least one) be in flight.
    pub fn new(max: usize) -> Queue {
        Queue(Arc::new(Gate {
            max: max.max(1),
            state: Mutex::default(),
            reopened: Condvar::new(),
        }))
    }

    /// `doc`, holding a permit until it is dropped; once the queue is full, waits until it is
    /// half empty.
    pub fn admit(&self, doc: TantivyDocument) -> Queued {
        let gate = &self.0;
        let mut state = lock(&gate.state);
        if state.in_flight >= gate.max {
            state.closed = true;
        }
        if state.closed {
            state = recover(
                gate.reopened
                    .wait_timeout_while(state, MAX_WAIT, |s| s.closed),
            )
            .0;
        }
        state.in_flight += 1;
        Queued {
            doc,
            _permit: Some(Permit(Arc::clone(&self.0))),
        }
    }

    /// Documents admitted and not yet dropped.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        lock(&self.0.state).in_flight
    }
}

#[derive(Debug)]
struct Permit(Arc<Gate>);

impl Drop for Permit {
    fn drop(&mut self) {
        let gate = &self.0;
        let mut state = lock(&gate.state);
        state.in_flight = state.in_flight.saturating_sub(1);
        let reopen = state.closed && state.in_flight <= gate.max / 2;
        if reopen {
            state.closed = false;
        }
        drop(state);
        if reopen {
            gate.reopened.notify_all();
        }
    }
}

/// A document on its way to tantivy's indexing threads, holding its permit.
#[derive(Debug)]
pub struct Queued {
    doc: TantivyDocument,
    _permit: Option<Permit>,
}

impl Document for Queued {
    type Value<'a> = <TantivyDocument as Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.doc.iter_fields_and_values()
    }
}

/// Only required by tantivy's writer type; capvault reads stored documents as
/// [`TantivyDocument`]. A document read back holds no permit.
impl DocumentDeserialize for Queued {
    fn deserialize<'de, D>(deserializer: D) -> Result<Self, DeserializeError>
    where
        D: DocumentDeserializer<'de>,
    {
        Ok(Queued {
            doc: TantivyDocument::deserialize(deserializer)?,
            _permit: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_holds_its_permit_until_dropped() {
        let q = Queue::new(2);
        let a = q.admit(TantivyDocument::default());
        let b = q.admit(TantivyDocument::default());
        assert_eq!(q.in_flight(), 2);
        drop(a);
        assert_eq!(q.in_flight(), 1);
        drop(b);
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn a_full_queue_waits_until_it_is_half_empty() {
        let q = Queue::new(4);
        let mut held: Vec<Queued> = (0..4)
            .map(|_| q.admit(TantivyDocument::default()))
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || {
            let fifth = q2.admit(TantivyDocument::default());
            tx.send(()).unwrap();
            drop(fifth);
        });
        // Wait until the fifth has found the queue full.
        while !q.0.state.lock().unwrap().closed {
            std::thread::yield_now();
        }
        // One place free is not enough: the queue reopens at half.
        held.pop();
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        held.pop();
        rx.recv_timeout(Duration::from_secs(1)).unwrap();
        waiter.join().unwrap();
        drop(held);
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn a_full_queue_waits_until_a_document_is_dropped() {
        let q = Queue::new(1);
        let first = q.admit(TantivyDocument::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || {
            let second = q2.admit(TantivyDocument::default());
            tx.send(()).unwrap();
            drop(second);
        });
        // The second admission cannot complete while the first document is held.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        drop(first);
        rx.recv_timeout(Duration::from_secs(1)).unwrap();
        waiter.join().unwrap();
        assert_eq!(q.in_flight(), 0);
    }
}
