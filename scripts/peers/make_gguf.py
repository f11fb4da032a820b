#!/usr/bin/env python3
"""Write a synthetic Qwen2 or Llama GGUF (random weights, seeded) with llama.cpp's own gguf-py.

  make_gguf.py --shape qwen2-0.5b --out X.gguf                  F16 (then `llama-quantize --pure`)
  make_gguf.py --shape qwen2-0.5b --type Q4_K --out X.gguf      random *valid* quantized blocks directly
  make_gguf.py --shape qwen2-0.5b --type BF16 --out X.gguf      BF16 weights (the same value range)

Tensors and metadata are what convert_hf_to_gguf.py writes for a Qwen2 (or Llama: TinyLlama, the
family column of data/models.csv) checkpoint: 2-D weights in the file type, norms and (Qwen2 only) q/k/v
biases in F32, `output.weight` only when the embeddings are untied. The tokenizer metadata is copied from
the tree's vocab-only file: models/ggml-vocab-qwen2.gguf (gpt2 BPE: tokens, types, merges, special ids) or
models/ggml-vocab-llama-spm.gguf (SentencePiece: tokens, scores, types); the token list is padded with
"[PAD<i>]" (type UNUSED) to the embedding rows.

Weights: F16 values of random sign and mantissa with |w| in [2^-7, 2^-5) (≈ the 0.02 std of Qwen2's
init); quantized blocks: random quants and positive random scales chosen so |w| stays below ~0.06.
Speed does not depend on the values; finite values keep the logits finite.

--type Q8_0/Q4_0/Q4_K mirrors `llama-quantize --pure`: every 2-D weight (token_embd and output too, not
the norms) gets the type, and a tensor whose row length is not a multiple of the type's block falls back
as llama-quantize does (Q4_K -> Q5_0, e.g. Qwen2-0.5B's 896-wide rows).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shapes  # noqa: E402
from gguflite import read_kv  # noqa: E402


def find_tree(arg):
    for p in (arg, os.environ.get("LLAMA_SRC"), os.path.join(HERE, "..", "..", ".peers", "llama.cpp"),
              os.path.join(HERE, "..", "llama.cpp")):
        if p and os.path.isdir(os.path.join(p, "gguf-py", "gguf")):
            return os.path.abspath(p)
    raise SystemExit("llama.cpp tree with gguf-py not found (--llama-src or LLAMA_SRC)")


# f16 bit patterns for the scales of each block type: exponent field fixed, mantissa random, sign +.
SCALE_EXP = {"Q8_0": 3, "Q4_0": 6, "Q5_0": 5, "Q4_K": 1}
# llama-quantize's fallback for rows that are not a multiple of the block size (src/llama-quant.cpp)
FALLBACK = {"Q4_K": "Q5_0"}



def tensor_list(s):
    """(name, numpy shape (rows, cols) or (n,), is_matrix)"""
    h, hd, L = s["hidden"], s["head_dim"], s["layers"]
    q, kv, ff = s["heads"] * hd, s["kv_heads"] * hd, s["intermediate"]
    bias = s["family"] == "qwen2"
    t = [("token_embd.weight", (s["vocab"], h), True)]
    for i in range(L):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (h,), False)]
        for proj, rows in (("q", q), ("k", kv), ("v", kv)):
            t.append((b + f"attn_{proj}.weight", (rows, h), True))
            if bias:
                t.append((b + f"attn_{proj}.bias", (rows,), False))
        t += [(b + "attn_output.weight", (h, q), True),
              (b + "ffn_norm.weight", (h,), False),
              (b + "ffn_gate.weight", (ff, h), True), (b + "ffn_up.weight", (ff, h), True),
              (b + "ffn_down.weight", (h, ff), True)]
    t.append(("output_norm.weight", (h,), False))
    if not s["tied"]:
        t.append(("output.weight", (s["vocab"], h), True))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--type", default="F16", choices=["F16", "BF16", "Q8_0", "Q4_0", "Q4_K"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models-csv")
    ap.add_argument("--llama-src", help="llama.cpp tree (gguf-py/, models/ggml-vocab-*.gguf)")
    ap.add_argument("--vocab-gguf")
    a = ap.parse_args()

    tree = find_tree(a.llama_src)
    sys.path.insert(0, os.path.join(tree, "gguf-py"))
    import gguf
    from gguf import GGMLQuantizationType as QT

    s = shapes.load(a.shape, a.models_csv)
    t0 = time.perf_counter()
    arch = s["family"]
    vocab_file = {"qwen2": "ggml-vocab-qwen2.gguf", "llama": "ggml-vocab-llama-spm.gguf"}[arch]
    vocab_path = a.vocab_gguf or os.path.join(tree, "models", vocab_file)
    kv = read_kv(vocab_path)

    def field(k):
        return kv.get(k)

    tokens = list(field("tokenizer.ggml.tokens"))
    ttypes = list(field("tokenizer.ggml.token_type"))
    if len(tokens) > s["vocab"]:
        raise SystemExit(f"vocab {s['vocab']} < tokenizer's {len(tokens)} tokens")
    n_pad = s["vocab"] - len(tokens)
    tokens += [f"[PAD{i}]" for i in range(len(tokens), s["vocab"])]
    ttypes += [int(gguf.TokenType.UNUSED)] * n_pad

    ftype = {"F16": gguf.LlamaFileType.MOSTLY_F16, "BF16": gguf.LlamaFileType.MOSTLY_BF16,
             "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_M}[a.type]
    tmp = a.out + ".part"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(f"synthetic {s['name']} {a.type} seed {a.seed}")
    w.add_context_length(s["max_position"])
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["intermediate"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    if s["head_dim"] * s["heads"] != s["hidden"]:
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(s["rope_theta"])
    if arch == "llama":
        w.add_vocab_size(s["vocab"])
        w.add_rope_dimension_count(s["head_dim"])
    w.add_layer_norm_rms_eps(s["rms_eps"])
    w.add_file_type(int(ftype))
    if a.type not in ("F16", "BF16"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    if field("tokenizer.ggml.pre") is not None:
        w.add_tokenizer_pre(field("tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    w.add_token_types(ttypes)
    if field("tokenizer.ggml.scores") is not None:  # SentencePiece
        w.add_token_scores(list(field("tokenizer.ggml.scores")) + [-1000.0] * n_pad)
    if field("tokenizer.ggml.merges") is not None:  # BPE
        w.add_token_merges(list(field("tokenizer.ggml.merges")))
    for k, fn in (("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
                  ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
                  ("tokenizer.ggml.unknown_token_id", w.add_unk_token_id),
                  ("tokenizer.ggml.padding_token_id", w.add_pad_token_id)):
        if field(k) is not None:
            fn(int(field(k)))
    if field("tokenizer.chat_template"):
        w.add_chat_template(field("tokenizer.chat_template"))

    plan = []  # (name, numpy shape, ggml type name)
    n_fallback = 0
    for name, shp, is_mat in tensor_list(s):
        if not is_mat:
            typ = "F32"
        elif a.type in ("F16", "BF16"):
            typ = a.type
        else:
            typ = a.type
            bs = gguf.GGML_QUANT_SIZES[QT[typ]][0]
            if shp[1] % bs:
                typ = FALLBACK.get(typ, "F16")
                n_fallback += 1
                if shp[1] % gguf.GGML_QUANT_SIZES[QT[typ]][0]:
                    typ = "F16"
        plan.append((name, shp, typ))
        if typ in ("F32", "F16"):
            dt = np.float32 if typ == "F32" else np.float16
            w.add_tensor_info(name, shp, np.dtype(dt), int(np.prod(shp)) * np.dtype(dt).itemsize)
        else:
            bs, ts = gguf.GGML_QUANT_SIZES[QT[typ]]
            row = shp[1] // bs * ts
            w.add_tensor_info(name, (shp[0], row), np.dtype(np.uint8), shp[0] * row, raw_dtype=QT[typ])

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for i, (name, shp, typ) in enumerate(plan):
        rng = np.random.default_rng([a.seed, i])
        if typ == "F32":
            # norms ~1, biases small
            arr = (1.0 + 0.1 * rng.standard_normal(shp)).astype(np.float32) if "norm" in name else \
                (0.02 * rng.standard_normal(shp)).astype(np.float32)
        elif typ == "F16":
            u = np.frombuffer(rng.bytes(int(np.prod(shp)) * 2), dtype=np.uint16).reshape(shp).copy()
            u &= np.uint16(0x87FF)   # keep sign, low exponent bit, mantissa
            u |= np.uint16(0x2000)   # exponent field 8 or 9: |w| in [2^-7, 2^-5)
            arr = u.view(np.float16)
        elif typ == "BF16":
            u = np.frombuffer(rng.bytes(int(np.prod(shp)) * 2), dtype=np.uint16).reshape(shp).copy()
            u &= np.uint16(0x80FF)   # keep sign, low exponent bit, mantissa
            u |= np.uint16(0x3C00)   # exponent field 120 or 121: |w| in [2^-7, 2^-5)
            arr = u.view(np.uint8).reshape(shp[0], -1)
        else:
            bs, ts = gguf.GGML_QUANT_SIZES[QT[typ]]
            nblk = shp[0] * (shp[1] // bs)
            b = np.frombuffer(rng.bytes(nblk * ts), dtype=np.uint8).reshape(nblk, ts).copy()
            n_scales = 2 if typ == "Q4_K" else 1  # Q4_K: d and dmin
            for j in range(n_scales):
                d = (np.frombuffer(rng.bytes(nblk * 2), dtype=np.uint16) & np.uint16(0x03FF)) \
                    | np.uint16(SCALE_EXP[typ] << 10)
                b[:, 2 * j] = (d & 0xFF).astype(np.uint8)
                b[:, 2 * j + 1] = (d >> 8).astype(np.uint8)
            arr = b.reshape(shp[0], -1)
        w.write_tensor_data(arr)
        total += arr.nbytes
    w.close()
    os.replace(tmp, a.out)
    types = {}
    for _, _, typ in plan:
        types[typ] = types.get(typ, 0) + 1
    print(f"{a.out}: {s['name']} {a.type}, {len(plan)} tensors {types}, {n_fallback} fallback, "
          f"{total / 1e9:.3f} GB of weights, {n_pad} padded tokens, {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
