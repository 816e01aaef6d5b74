//! The model's memo: whole-vault answers computed once per state of the model, under typed keys.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Model;
use crate::locks::{lock, recover};

/// Results derived from the whole model, computed once per state of it. Cleared by every
/// [`Model::apply`]; the upper layers store their own types here, each under its own
/// [`MemoKey`].
#[derive(Default)]
pub struct Memo {
    entries: Mutex<HashMap<std::any::TypeId, std::sync::Arc<dyn std::any::Any + Send + Sync>>>,
}

/// The key of one memoised answer ([`Model::memo`]): a unit type per answer, naming the type
/// of its value, so one key cannot be used with two value types. Entries are stored by the
/// key's `TypeId`.
///
/// ```ignore
/// memo_key!(TagsByName: Vec<TagCount>); // a unit struct and its `MemoKey` impl
/// let tags = model.memo::<TagsByName>(|| tag_counts(model));
/// ```
pub trait MemoKey: 'static {
    /// What is kept under this key.
    type Value: Send + Sync + 'static;
}

/// Declares a [`MemoKey`]: `memo_key!(Name: ValueType);` makes the unit struct `Name` the key of
/// a memoised `ValueType`.
macro_rules! memo_key {
    ($(#[$meta:meta])* $vis:vis $name:ident : $value:ty) => {
        $(#[$meta])*
        $vis struct $name;
        impl $crate::model::MemoKey for $name {
            type Value = $value;
        }
    };
}
pub(crate) use memo_key;

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

impl Memo {
    /// Forgets every answer: the model is about to change.
    pub(super) fn clear(&mut self) {
        recover(self.entries.get_mut()).clear();
    }
}

impl Model {
    /// The value `compute` gives for this state of the model, computed at most once per state
    /// under the key `K`.
    pub fn memo<K: MemoKey>(&self, compute: impl FnOnce() -> K::Value) -> std::sync::Arc<K::Value> {
        let key = std::any::TypeId::of::<K>();
        let mut entries = lock(&self.memo.entries);
        // Only `memo::<K>` inserts under `TypeId::of::<K>()`, always a `K::Value`: the
        // downcast cannot fail, and a failure would only mean computing again.
        if let Some(v) = entries
            .get(&key)
            .and_then(|v| v.clone().downcast::<K::Value>().ok())
        {
            return v;
        }
        let v = std::sync::Arc::new(compute());
        entries.insert(key, v.clone());
        v
    }
}
