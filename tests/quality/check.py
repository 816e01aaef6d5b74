#!/usr/bin/env python3
"""Validate the labelled semantic-search query set in queries.jsonl.

Usage: python3 tests/quality/check.py [QUERIES_FILE] [--vaults DIR]

Each line of the query file is a JSON object:
    {"vault": "obsidian-hub", "kind": "paraphrase" | "keyword",
     "query": "...", "expect": ["Folder/Note.md", ...]}

Checks, for every line:
  * the JSON parses and has the required fields with the right types;
  * the vault directory and every expected note exist under the vaults dir;
  * paraphrase queries (3-10 words) share NO content word with any expected
    note, neither with its full text (front matter, links and boilerplate
    included) nor with the components of its path (folders and file name);
  * keyword queries (2-5 words) share AT LEAST ONE content word with each
    expected note;
  * no query text is repeated within a vault.

A "content word" is a run of 3 or more letters that is not in STOPWORDS.
Words are compared case-insensitively after removing simple inflections:
a trailing "s", "es", "ed" or "ing" is stripped, on both sides, and two
words match when any of their variants are equal (see variants(); it also
tries the obvious spelling repairs: using -> use, tagged -> tag,
copies -> copy).

Prints every violation and a summary, and exits 1 if there was any
violation (2 if the file itself cannot be read).  Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_QUERIES = HERE / "queries.jsonl"
DEFAULT_VAULTS = Path("/work/shared/vaults")

KINDS = {"paraphrase": (3, 10), "keyword": (2, 5)}

# Genuine English function words only: articles, pronouns, determiners,
# prepositions, conjunctions, auxiliaries and modals, and a few very common
# adverbs.  Anything that carries topic meaning is deliberately NOT here.
STOPWORDS = frozenset(
    """
    the and but nor yet for from with without within into onto upon about
    above below over under again further then once than too very just also
    only even still both either neither each every all any some such own
    same other another more most less least few many much
    how what which who whom whose when where why whether while though
    although because since until unless till whereas
    this that these those there here
    are was were been being have has had having does did doing done
    can could will would shall should may might must ought
    not off out per via like
    you your yours yourself yourselves
    she her hers herself him his himself its itself
    they them their theirs themselves
    our ours ourselves myself mine
    one ones
    after before between during through toward towards around against
    along among across behind beside beyond inside outside near
    something anything everything nothing someone anyone everyone
    whatever whichever whenever wherever however
    """.split()
)

WORD_RE = re.compile(r"[^\W\d_]+", re.UNICODE)
SUFFIXES = ("ing", "es", "ed", "s")
MIN_LEN = 3


def words(text: str) -> list[str]:
    """All letter runs of `text`, lower-cased."""
    return WORD_RE.findall(text.lower())


def variants(word: str) -> set[str]:
    """The word plus its forms with a simple inflection removed.

    "notes" -> {notes, note}; "copies" -> {copies, copie, copi, copy};
    "tagged" -> {tagged, tagg, tag, tagge}.  Only forms of 3+ letters that
    are not stopwords are kept.  Generating several candidates (rather than
    one canonical stem) errs on the side of reporting an overlap, which is
    the safe direction for paraphrase queries.
    """
    w = word.lower()
    out = {w}
    for suf in SUFFIXES:
        if w.endswith(suf):
            stem = w[: -len(suf)]
            cands = {stem}
            if suf in ("es", "ed") and stem.endswith("i"):
                cands.add(stem[:-1] + "y")  # copies -> copy, tried -> try
            if suf != "s":
                cands.add(stem + "e")  # using -> use, named -> name
                if len(stem) >= 2 and stem[-1] == stem[-2]:
                    cands.add(stem[:-1])  # tagged -> tag, running -> run
            out |= {c for c in cands if len(c) >= MIN_LEN}
    # A stripped form that is a function word ("outing" -> "out") is not
    # evidence of a shared content word.
    return {w} | (out - STOPWORDS)


def content_words(text: str) -> list[str]:
    """Content words of a query, in order, without duplicates."""
    seen: list[str] = []
    for w in words(text):
        if len(w) >= MIN_LEN and w not in STOPWORDS and w not in seen:
            seen.append(w)
    return seen


class NoteIndex:
    """Caches the variant set of each note (text + path components)."""

    def __init__(self, vaults: Path):
        self.vaults = vaults
        self._cache: dict[tuple[str, str], set[str]] = {}

    def forms(self, vault: str, rel: str) -> set[str]:
        key = (vault, rel)
        if key not in self._cache:
            path = self.vaults / vault / rel
            text = path.read_text(encoding="utf-8", errors="replace")
            parts = Path(rel).with_suffix("").parts
            forms: set[str] = set()
            for w in set(words(text)) | set(words(" ".join(parts))):
                forms |= variants(w)
            self._cache[key] = forms
        return self._cache[key]

    def shared(self, vault: str, rel: str, query: str) -> list[str]:
        """Content words of `query` that also occur in the note."""
        forms = self.forms(vault, rel)
        return [w for w in content_words(query) if variants(w) & forms]


def check(queries_file: Path, vaults: Path) -> int:
    try:
        lines = queries_file.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        print(f"cannot read {queries_file}: {e}")
        return 2

    index = NoteIndex(vaults)
    violations: list[str] = []
    counts: Counter[tuple[str, str]] = Counter()
    seen_queries: dict[tuple[str, str], int] = {}

    def bad(lineno: int, msg: str) -> None:
        violations.append(f"{queries_file.name}:{lineno}: {msg}")

    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            bad(lineno, f"invalid JSON: {e}")
            continue
        if not isinstance(obj, dict):
            bad(lineno, "line is not a JSON object")
            continue
        vault, kind = obj.get("vault"), obj.get("kind")
        query, expect = obj.get("query"), obj.get("expect")
        extra = set(obj) - {"vault", "kind", "query", "expect"}
        if extra:
            bad(lineno, f"unexpected fields {sorted(extra)}")
        if not isinstance(vault, str) or not vault:
            bad(lineno, "missing or invalid 'vault'")
            continue
        if kind not in KINDS:
            bad(lineno, f"kind must be one of {sorted(KINDS)}, got {kind!r}")
            continue
        if not isinstance(query, str) or not query.strip():
            bad(lineno, "missing or empty 'query'")
            continue
        if (
            not isinstance(expect, list)
            or not expect
            or not all(isinstance(p, str) and p for p in expect)
        ):
            bad(lineno, "'expect' must be a non-empty list of paths")
            continue
        label = f"[{vault}/{kind}] {query!r}"
        if not (vaults / vault).is_dir():
            bad(lineno, f"{label}: vault directory {vaults / vault} not found")
            continue

        key = (vault, query.strip().lower())
        if key in seen_queries:
            bad(lineno, f"{label}: duplicate of line {seen_queries[key]}")
        seen_queries[key] = lineno

        lo, hi = KINDS[kind]
        n = len(query.split())
        if not lo <= n <= hi:
            bad(lineno, f"{label}: {n} words, {kind} queries need {lo}-{hi}")
        if not content_words(query):
            bad(lineno, f"{label}: query has no content words")

        ok_paths = []
        for rel in expect:
            p = vaults / vault / rel
            if rel.startswith("/") or ".." in Path(rel).parts:
                bad(lineno, f"{label}: path must be relative to the vault: {rel}")
            elif not rel.endswith(".md"):
                bad(lineno, f"{label}: expected path is not a .md note: {rel}")
            elif not p.is_file():
                bad(lineno, f"{label}: expected note not found: {rel}")
            else:
                ok_paths.append(rel)
        if len(set(expect)) != len(expect):
            bad(lineno, f"{label}: duplicate paths in 'expect'")

        for rel in ok_paths:
            shared = index.shared(vault, rel, query)
            if kind == "paraphrase" and shared:
                bad(lineno, f"{label}: shares content words {shared} with {rel}")
            if kind == "keyword" and not shared:
                bad(lineno, f"{label}: shares no content word with {rel}")

        counts[(vault, kind)] += 1

    for v in violations:
        print(v)

    print()
    print("summary:")
    for vault in sorted({v for v, _ in counts}):
        row = ", ".join(f"{k} {counts[(vault, k)]}" for k in KINDS)
        print(f"  {vault}: {row}")
    total = sum(counts.values())
    print(f"  total: {total} queries, {len(violations)} violation(s)")
    return 1 if violations else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("queries", nargs="?", type=Path, default=DEFAULT_QUERIES)
    ap.add_argument("--vaults", type=Path, default=DEFAULT_VAULTS)
    args = ap.parse_args()
    return check(args.queries, args.vaults)


if __name__ == "__main__":
    sys.exit(main())
