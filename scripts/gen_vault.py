#!/usr/bin/env python3
"""Writes a synthetic vault for timing on the wire: `scripts/gen_vault.py DIR N` makes N notes
in 50 folders (frontmatter, a heading, 5 to 40 lines drawn from a skewed vocabulary of 20,000
made-up words, some wikilinks and tags), the same for the same N (seed 42). Prints three words
of falling frequency to search for. Quicker to make than the benches' generator; not the same
vault.
"""
import random, os, sys
random.seed(42)
root = sys.argv[1]; n = int(sys.argv[2])
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(3, 9))) for _ in range(20000)]
weights = [1.0 / (i + 1) for i in range(len(words))]
os.makedirs(os.path.join(root, '.obsidian'), exist_ok=True)
for i in range(n):
    folder = os.path.join(root, f"f{i % 50}")
    os.makedirs(folder, exist_ok=True)
    body = []
    for _ in range(random.randint(5, 40)):
        line = ' '.join(random.choices(words, weights, k=random.randint(5, 20)))
        if random.random() < 0.2:
            line += f" [[note {random.randrange(n)}]]"
        if random.random() < 0.1:
            line += f" #tag{random.randrange(100)}"
        body.append(line)
    with open(os.path.join(folder, f"note {i}.md"), 'w') as f:
        f.write(f"---\ntags: [t{i % 20}]\nn: {i}\n---\n# Note {i}\n\n" + '\n\n'.join(body) + '\n')
print(words[10], words[200], words[3000])
