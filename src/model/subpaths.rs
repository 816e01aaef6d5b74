//! The subpath cache: whether a link's `#heading` or `#^block` exists in its target, fast.

use std::collections::HashMap;
use std::hash::BuildHasher;

use super::linkres::key;
use crate::markdown::{ParsedNote, Subpath};

/// Answers "does this `#heading` or `#^block` exist in that note?" for many links at once.
///
/// A target with more than [`SubpathCache::INDEX_FROM`] headings and block ids is indexed on
/// first use (the hashes of its heading keys and block ids, sorted, with each item's position)
/// and then answered by a binary search and one exact comparison, so L links into a note with H
/// headings cost O((L + H) log H) instead of O(L × H) key computations (20,000 links into a note
/// of 20,000 headings took minutes). At most [`SubpathCache::MAX_TARGETS`] targets are kept, so a
/// thread holds at most that many notes' keys (12 bytes per heading or block id).
#[derive(Default)]
pub(super) struct SubpathCache {
    hasher: std::hash::RandomState,
    targets: HashMap<u32, SubpathKeys>,
    /// Lookups answered through an index, and key computations made (for tests).
    steps: u64,
}

/// The indexed headings and block ids of one note: (hash of the key, position), sorted.
struct SubpathKeys {
    headings: Vec<(u64, u32)>,
    blocks: Vec<(u64, u32)>,
}

impl SubpathCache {
    /// Targets with at most this many headings and block ids are searched item by item.
    const INDEX_FROM: usize = 16;
    /// Indexed targets kept at once; the cache is emptied when it would hold more.
    const MAX_TARGETS: usize = 64;

    /// [`subpath_exists`] for the note with file id `id`, whose parse is `target`.
    pub(super) fn exists(&mut self, id: u32, target: &ParsedNote, sub: &Subpath) -> bool {
        if target.headings.len() + target.block_ids.len() <= Self::INDEX_FROM {
            self.steps += (target.headings.len() + target.block_ids.len()) as u64;
            return subpath_exists(target, sub);
        }
        if !self.targets.contains_key(&id) {
            if self.targets.len() >= Self::MAX_TARGETS {
                self.targets.clear();
            }
            let keys = self.index(target);
            self.targets.insert(id, keys);
        }
        let Some(keys) = self.targets.get(&id) else {
            return subpath_exists(target, sub);
        };
        self.steps += 1;
        let (want, heading) = match sub {
            Subpath::Heading(chain) => match chain.last() {
                Some(last) => (heading_key(last), true),
                None => return true,
            },
            Subpath::Block(b) => (b.to_lowercase(), false),
        };
        let sorted = if heading {
            &keys.headings
        } else {
            &keys.blocks
        };
        let key_of = |i: u32| -> Option<String> {
            if heading {
                target
                    .headings
                    .get(i as usize)
                    .map(|h| heading_key(&h.text))
            } else {
                target
                    .block_ids
                    .get(i as usize)
                    .map(|b| b.id.to_lowercase())
            }
        };
        let h = self.hasher.hash_one(&want);
        let from = sorted.partition_point(|&(x, _)| x < h);
        sorted[from..]
            .iter()
            .take_while(|&&(x, _)| x == h)
            .any(|&(_, i)| key_of(i).as_deref() == Some(want.as_str()))
    }

    /// Hashes the heading keys and block ids of `target`.
    fn index(&mut self, target: &ParsedNote) -> SubpathKeys {
        let n = target.headings.len() + target.block_ids.len();
        self.steps += n as u64;
        let hash_all = |keys: &mut dyn Iterator<Item = String>| -> Vec<(u64, u32)> {
            let mut v: Vec<(u64, u32)> = keys
                .enumerate()
                .map(|(i, k)| {
                    (
                        self.hasher.hash_one(&k),
                        u32::try_from(i).unwrap_or(u32::MAX),
                    )
                })
                .collect();
            v.sort_unstable();
            v
        };
        SubpathKeys {
            headings: hash_all(&mut target.headings.iter().map(|h| heading_key(&h.text))),
            blocks: hash_all(&mut target.block_ids.iter().map(|b| b.id.to_lowercase())),
        }
    }
}

/// True when the heading chain or block id named by `sub` exists in `target`.
pub fn subpath_exists(target: &ParsedNote, sub: &Subpath) -> bool {
    match sub {
        Subpath::Heading(chain) => match chain.last() {
            Some(last) => {
                let want = heading_key(last);
                target.headings.iter().any(|h| heading_key(&h.text) == want)
            }
            None => true,
        },
        Subpath::Block(id) => {
            let want = id.to_lowercase();
            target.block_ids.iter().any(|b| b.id.to_lowercase() == want)
        }
    }
}

/// How a `#Heading` subpath is compared with a note's headings, as Obsidian's `stripHeading`
/// does: punctuation and other special characters count as spaces, runs of spaces collapse, and
/// case and Unicode normalisation are ignored. So `[[README#What is the Hub]]` finds the heading
/// `What is the Hub?`.
pub fn heading_key(s: &str) -> String {
    let spaced: String = key(s)
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' || (!c.is_ascii() && !c.is_whitespace())
            {
                c
            } else {
                ' '
            }
        })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A note of `n` headings and a note of `n` links to headings of it (every other one
/// missing), and `n` block ids with as many block links (for the tests here and the model's).
#[cfg(test)]
pub(super) fn heading_bomb(n: usize) -> (String, String) {
    let mut target = String::new();
    let mut source = String::new();
    for i in 0..n {
        target.push_str(&format!("## Part {i}?\npara ^b{i}\n\n"));
        let h = if i % 2 == 0 { i } else { n + i };
        source.push_str(&format!("[[T#part {h}]] [[T#^B{h}]]\n"));
    }
    (target, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown;

    #[test]
    fn links_into_a_note_of_many_headings_cost_linear_time() {
        let n = 20_000;
        let (target, source) = heading_bomb(n);
        let (target, source) = (markdown::parse_note(&target), markdown::parse_note(&source));
        assert_eq!((target.headings.len(), source.links.len()), (n, 2 * n));
        let mut cache = SubpathCache::default();
        let found = source
            .links
            .iter()
            .filter(|l| cache.exists(7, &target, l.subpath().unwrap()))
            .count();
        assert_eq!(found, n, "every other link finds its heading or block");
        // Linear: each item hashed once, each link one lookup (the scan did n × n = 4e8).
        assert!(cache.steps <= 4 * n as u64, "{} steps", cache.steps);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 200, ..proptest::prelude::ProptestConfig::default()
        })]

        /// The indexed lookup answers as the item-by-item scan does, for notes above and
        /// below the indexing threshold, headings differing in case and punctuation included.
        #[test]
        fn indexed_subpath_lookups_agree_with_the_scan(
            headings in proptest::collection::vec("[aAbB?! é]{0,4}", 0..40),
            blocks in proptest::collection::vec("[abAB1]{1,3}", 0..30),
            wanted in proptest::collection::vec(("[aAbB?! é]{0,4}", proptest::bool::ANY), 0..30),
        ) {
            let mut text = String::new();
            for h in &headings {
                text.push_str(&format!("## x{h}\n"));
            }
            for b in &blocks {
                text.push_str(&format!("para ^{b}\n\n"));
            }
            let target = markdown::parse_note(&text);
            let mut cache = SubpathCache::default();
            for (w, block) in &wanted {
                let sub = if *block {
                    Subpath::Block(w.trim().into())
                } else {
                    Subpath::Heading([format!("x{w}").into_boxed_str()].into())
                };
                proptest::prop_assert_eq!(
                    cache.exists(3, &target, &sub),
                    subpath_exists(&target, &sub),
                    "{:?}", sub
                );
            }
        }
    }

    #[test]
    fn heading_subpaths_match_like_obsidian_strip_heading() {
        assert_eq!(
            heading_key("What is the Obsidian Hub?"),
            heading_key("What is the Obsidian Hub")
        );
        assert_eq!(heading_key("  Sowing   dates "), "sowing dates");
        assert_eq!(heading_key("A: b / c (d)"), "a b c d");
        assert_eq!(heading_key("Café ☕"), "café ☕");
        assert_ne!(heading_key("Plan A"), heading_key("Plan B"));
    }
}
