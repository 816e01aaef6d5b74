#!/usr/bin/env python3
"""Writes fuzz/seeds/transformer_files/tiny_bert: a BERT sentence encoder small enough to fuzz
(12 tokens, width 4, one layer, one head), in the transformer_files target's input format:
u16 config length, u32 tokenizer length (little-endian), config.json, tokenizer.json, then
model.safetensors. The weights are small deterministic numbers. Standard library only."""

import json
import pathlib
import struct

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "quick", "brown", "fox", "a", "note", "garden", "##s"]
H, I, P = 4, 8, 16

config = {
    "model_type": "bert", "vocab_size": len(VOCAB), "hidden_size": H, "num_hidden_layers": 1,
    "num_attention_heads": 1, "intermediate_size": I, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "max_position_embeddings": P, "type_vocab_size": 2,
    "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
}
tokenizer = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
    "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                          "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
    "decoder": None,
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(VOCAB)}},
}

tensors = {}
seed = 1


def numbers(n):
    global seed
    out = []
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) % 2**31
        out.append((seed / 2**31 - 0.5) * 0.2)
    return out


def add(name, shape, values=None):
    n = 1
    for d in shape:
        n *= d
    tensors[name] = (shape, values if values is not None else numbers(n))


add("embeddings.word_embeddings.weight", [len(VOCAB), H])
add("embeddings.position_embeddings.weight", [P, H])
add("embeddings.token_type_embeddings.weight", [2, H])
for ln in ["embeddings.LayerNorm", "encoder.layer.0.attention.output.LayerNorm",
           "encoder.layer.0.output.LayerNorm"]:
    add(ln + ".weight", [H], [1.0] * H)
    add(ln + ".bias", [H], [0.0] * H)
for lin, out_dim, in_dim in [("attention.self.query", H, H), ("attention.self.key", H, H),
                             ("attention.self.value", H, H), ("attention.output.dense", H, H),
                             ("intermediate.dense", I, H), ("output.dense", H, I)]:
    add(f"encoder.layer.0.{lin}.weight", [out_dim, in_dim])
    add(f"encoder.layer.0.{lin}.bias", [out_dim])

header, body = {}, b""
for name in sorted(tensors):
    shape, values = tensors[name]
    data = struct.pack(f"<{len(values)}f", *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
    body += data
head = json.dumps(header, separators=(",", ":")).encode()
head += b" " * (-len(head) % 8)
weights = struct.pack("<Q", len(head)) + head + body

c = json.dumps(config, separators=(",", ":")).encode()
t = json.dumps(tokenizer, separators=(",", ":")).encode()
out = pathlib.Path(__file__).parent / "transformer_files" / "tiny_bert"
out.parent.mkdir(exist_ok=True)
out.write_bytes(struct.pack("<HI", len(c), len(t)) + c + t + weights)
print(f"{out}: {out.stat().st_size} bytes")
