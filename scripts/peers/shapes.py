"""Qwen2 and Llama shapes for the peer engines: rows of data/models.csv, with a built-in copy as fallback.

Names are matched case-insensitively ("qwen2-0.5b" == "Qwen2-0.5B"). `tiny` (2 layers, hidden 256),
`tiny-untied` (the same with 7B's padded 152064-row vocabulary and an untied LM head) and `tiny-llama` (the
Llama family at that size) are test shapes for CPU checks only.
"""
import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Copied from data/models.csv (Qwen/Qwen2-* config.json); used when that file is not beside the scripts.
BUILTIN = {
    "qwen2-0.5b": dict(name="Qwen2-0.5B", layers=24, hidden=896, heads=14, kv_heads=2, head_dim=64,
                       intermediate=4864, vocab=151936, tied=True, rope_theta=1e6, rms_eps=1e-6,
                       max_position=32768),
    "qwen2-1.5b": dict(name="Qwen2-1.5B", layers=28, hidden=1536, heads=12, kv_heads=2, head_dim=128,
                       intermediate=8960, vocab=151936, tied=True, rope_theta=1e6, rms_eps=1e-6,
                       max_position=32768),
    "qwen2-7b": dict(name="Qwen2-7B", layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128,
                     intermediate=18944, vocab=152064, tied=False, rope_theta=1e6, rms_eps=1e-6,
                     max_position=32768),
    "tiny": dict(name="tiny", layers=2, hidden=256, heads=4, kv_heads=2, head_dim=64, intermediate=512,
                 vocab=151936, tied=True, rope_theta=1e6, rms_eps=1e-6, max_position=4096),
    # 7B's padded vocabulary and untied head at test size
    "tiny-untied": dict(name="tiny-untied", layers=2, hidden=256, heads=4, kv_heads=2, head_dim=64,
                        intermediate=512, vocab=152064, tied=False, rope_theta=1e6, rms_eps=1e-6,
                        max_position=4096),
    # The Llama family (TinyLlama's: no q/k/v biases, SentencePiece vocabulary) at test size
    "tiny-llama": dict(name="tiny-llama", family="llama", layers=2, hidden=256, heads=4, kv_heads=2,
                       head_dim=64, intermediate=512, vocab=32000, tied=False, rope_theta=1e4,
                       rms_eps=1e-5, max_position=2048),
}
TEST_SHAPES = ("tiny", "tiny-untied", "tiny-llama")


def default_csv():
    for p in (os.environ.get("QE_MODELS_CSV"), os.path.join(HERE, "..", "..", "data", "models.csv")):
        if p and os.path.exists(p):
            return p
    return None


def load(name, models_csv=None):
    """Shape dict: name, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied,
    rope_theta, rms_eps, max_position, source."""
    key = name.lower()
    path = models_csv or default_csv()
    if path and key not in TEST_SHAPES:  # TinyLlama itself is a CSV row
        for r in csv.DictReader(open(path)):
            if r["name"].lower() == key:
                if r["family"] not in ("qwen2", "llama"):
                    raise SystemExit(f"{name}: family {r['family']} is neither qwen2 nor llama")
                return dict(name=r["name"], family=r["family"], layers=int(r["layers"]), hidden=int(r["hidden"]),
                            heads=int(r["heads"]), kv_heads=int(r["kv_heads"]), head_dim=int(r["head_dim"]),
                            intermediate=int(r["intermediate"]), vocab=int(r["vocab"]),
                            tied=r["tied_embeddings"] == "1", rope_theta=float(r["rope_theta"]),
                            rms_eps=float(r["rms_eps"]), max_position=int(r["max_position"]),
                            source=os.path.relpath(path))
    if key in BUILTIN:
        return {"family": "qwen2", **BUILTIN[key], "source": "scripts/peers/shapes.py (built-in copy)"}
    raise SystemExit(f"unknown shape {name} (known: {', '.join(BUILTIN)})")


def linear_shapes(s):
    """(name, out_features, in_features, has_bias) of every matrix read once per decoded token,
    per layer, plus the LM head (which is the embedding matrix when tied)."""
    h, hd = s["hidden"], s["head_dim"]
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    bias = s.get("family", "qwen2") == "qwen2"  # Qwen2 has q/k/v biases, Llama none
    layer = [("q", q, h, bias), ("k", kv, h, bias), ("v", kv, h, bias), ("o", h, q, False),
             ("gate", s["intermediate"], h, False), ("up", s["intermediate"], h, False),
             ("down", h, s["intermediate"], False)]
    return layer, ("lm_head", s["vocab"], h, False)


def params_b(s):
    layer, head = linear_shapes(s)
    n = s["layers"] * sum(o * i + (o if b else 0) + 0 for _, o, i, b in layer)
    n += s["layers"] * 2 * s["hidden"] + s["hidden"]  # norms
    n += s["vocab"] * s["hidden"] * (1 if s["tied"] else 2)
    return n / 1e9
