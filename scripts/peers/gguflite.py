"""A minimal GGUF reader: the key/value section and the tensor infos, with plain struct reads.

gguf-py's GGUFReader builds a numpy view per string and takes minutes over a 151k-token vocabulary on
a small CPU; these walks take well under a second.
"""
import struct

# ggml type id -> (name, block size, bytes per block), from ggml.h / gguf-py's GGML_QUANT_SIZES
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
         7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84),
         11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
         15: ("Q8_K", 256, 292), 30: ("BF16", 1, 2)}

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read(path, tensors=True):
    """(kv dict, [(name, ne list (GGUF order: ne[0] = row length), type name, n_bytes)])"""
    with open(path, "rb") as f:
        buf = f.read(64 << 20)  # the KV and tensor-info sections of a Qwen2 GGUF take ~6 MB
    magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", buf, 0)
    if magic != 0x46554747 or version < 2:
        raise SystemExit(f"{path}: not a GGUF v2+ file")
    off = 24

    def string(off):
        (n,) = struct.unpack_from("<Q", buf, off)
        return buf[off + 8:off + 8 + n].decode("utf-8", errors="surrogateescape"), off + 8 + n

    def value(t, off):
        if t == 8:
            return string(off)
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, off)
            off += 12
            if et in _SCALAR:
                f = _SCALAR[et]
                sz = struct.calcsize(f)
                return list(struct.unpack_from("<" + f[1] * n, buf, off)), off + sz * n
            out = []
            for _ in range(n):
                v, off = value(et, off)
                out.append(v)
            return out, off
        f = _SCALAR[t]
        return struct.unpack_from(f, buf, off)[0], off + struct.calcsize(f)

    kv = {}
    for _ in range(n_kv):
        k, off = string(off)
        (t,) = struct.unpack_from("<I", buf, off)
        kv[k], off = value(t, off + 4)
    infos = []
    if tensors:
        for _ in range(n_tensors):
            name, off = string(off)
            (nd,) = struct.unpack_from("<I", buf, off)
            ne = list(struct.unpack_from("<" + "Q" * nd, buf, off + 4))
            typ, _ofs = struct.unpack_from("<IQ", buf, off + 4 + 8 * nd)
            off += 4 + 8 * nd + 12
            tname, bs, ts = TYPES.get(typ, (f"type{typ}", None, None))
            n = 1
            for d in ne:
                n *= d
            infos.append((name, ne, tname, n // bs * ts if bs else None))
    return kv, infos


def read_kv(path):
    return read(path, tensors=False)[0]

