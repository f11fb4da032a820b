#!/usr/bin/env python3
"""One llama.cpp arm: a GGUF decoded at batch 1 with the peer protocol, energy from the NVML counter.

  llamacpp_arm.py --mode bench  --bin DIR --gguf X.gguf --shape qwen2-0.5b --precision Q4_K --out a.json
  llamacpp_arm.py --mode server ...

bench:  `llama-bench -m X -p 0 -n TOKENS -r WARMUP+ITERATIONS -ngl 999 -fa 1 -o jsonl --progress`.
        llama-bench runs its own 1-token warm-up, then the repetitions; the first WARMUP repetitions are
        our warm-ups. The window opens when llama-bench announces repetition WARMUP+1 on stderr
        ("generation run 3/12"), i.e. after the model load, the context set-up and the warm-ups, and
        closes when its JSON line for the test reaches stdout, right after the last repetition (each
        generated token ends in llama_synchronize, so the device is idle at both edges). Tokens are fed,
        not sampled (llama-bench's test_gen), no prompt.
server: `llama-server -m X -ngl 999 -fa on -c CTX -np 1 --no-webui`, then per generation one POST
        /completion {prompt: PROMPT_LEN fixed token ids, n_predict: TOKENS, ignore_eos, top_k 1,
        temperature 0, cache_prompt false}: WARMUP requests, then the window around ITERATIONS requests
        (each returns after its last token: the device is idle at the edges). Prefill + greedy sampling
        are in the window, as for the torch arm and the project's meter; model load is not.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nvml_window as nw  # noqa: E402
import shapes  # noqa: E402
import gguflite  # noqa: E402


def gguf_weight_bytes(path):
    """Bytes of weights read per decoded token: every tensor of the file, except token_embd when an
    output.weight exists (then only one embedding row is read per token). Also the tensor types."""
    _, infos = gguflite.read(path)
    total, emb, has_out, types = 0, 0, False, {}
    for name, _ne, typ, n in infos:
        total += n
        types[typ] = types.get(typ, 0) + 1
        if name == "token_embd.weight":
            emb = n
        if name == "output.weight":
            has_out = True
    return (total - emb if has_out else total), types


def prompt_ids(n, vocab):
    # the project's meter's fixed prompt (crates/measure/src/candle_decoder.rs)
    return [(i * 7919 + 13) % vocab for i in range(n)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def version_of(binary):
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
        m = re.search(r"version: (.+)", out.stdout + out.stderr)
        v = m.group(1).strip() if m else "version unknown"
    except Exception as e:  # noqa: BLE001
        v = f"version unknown ({e})"
    src = os.environ.get("LLAMA_SRC", os.path.join(HERE, "..", "..", ".peers", "llama.cpp"))
    try:
        # fetch-llama-cpp.sh writes which sdist the tree came from beside it
        v += ", " + open(os.path.join(os.path.dirname(os.path.abspath(src)), "llama.cpp.SOURCE")).read().strip()
    except OSError:
        pass
    return v


def run_bench(a, meter, log):
    reps = a.warmup + a.iterations
    cmd = [os.path.join(a.bin, "llama-bench"), "-m", a.gguf, "-p", "0", "-n", str(a.tokens), "-r", str(reps),
           "-ngl", str(a.ngl), "-fa", "1", "-o", "jsonl", "--progress"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    start = rf"generation run {a.warmup + 1}/{reps}\b" if a.warmup else rf"generation run 1/{reps}\b"
    win, rc, out, notes = nw.run_bracketed(cmd, meter, start_re=start, stop_re=r"^\s*\{", trace_hz=a.trace_hz,
                                           log_path=log, timeout_s=a.timeout)
    if rc != 0 or win is None:
        raise RuntimeError(f"llama-bench rc={rc}; {'; '.join(notes)}")
    res = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")][0]
    ns = res["samples_ns"]
    iter_s = [x / 1e9 for x in ns[a.warmup:]]
    extra = {"llama_bench_avg_ts_all_reps": res.get("avg_ts"),
             "llama_bench_ts_timed_reps": round(a.tokens * len(iter_s) / sum(iter_s), 3) if iter_s else None,
             "llama_bench_warmup_iter_s": [round(x / 1e9, 5) for x in ns[:a.warmup]],
             "gpu_info": res.get("gpu_info"), "n_gpu_layers": res.get("n_gpu_layers"),
             "flash_attn": res.get("flash_attn"), "build_commit": res.get("build_commit"),
             "cmd": " ".join(cmd),
             "window_brackets": f"llama-bench repetitions {a.warmup + 1}..{reps} of {a.tokens} fed tokens "
                                "(no prompt, no sampling); excludes model load, context set-up, warm-ups"}
    return win, iter_s, a.tokens * len(iter_s), extra, notes


def run_server(a, meter, log, vocab):
    port = free_port()
    ctx = max(256, ((a.prompt_len + a.tokens + 255) // 256) * 256)
    cmd = [os.path.join(a.bin, "llama-server"), "-m", a.gguf, "--host", "127.0.0.1", "--port", str(port),
           "-ngl", str(a.ngl), "-fa", "on", "-c", str(ctx), "-np", "1", "--no-webui"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    logf = open(log, "a") if log else subprocess.DEVNULL
    srv = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    notes = []
    try:
        t_load = time.perf_counter()
        while True:
            if srv.poll() is not None:
                raise RuntimeError(f"llama-server exited with {srv.returncode} while loading")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except Exception:  # noqa: BLE001
                pass
            if time.perf_counter() - t_load > a.timeout:
                raise RuntimeError("llama-server not healthy in time")
            time.sleep(0.2)
        load_s = time.perf_counter() - t_load
        # idle reference with the server's context live (as the torch arm and the project's meter)
        a._idle = meter.idle()
        body = {"prompt": prompt_ids(a.prompt_len, vocab), "n_predict": a.tokens, "ignore_eos": True,
                "top_k": 1, "temperature": 0.0, "cache_prompt": False, "stream": False}
        for _ in range(a.warmup):
            r = post(base + "/completion", body, a.timeout)
        cool = meter.cooldown(a._idle[0], a._idle[1], a.cooldown_max_s) if a.cooldown_max_s > 0 else {}
        win = nw.Window(meter, a.trace_hz)
        iter_s, pred_ms, prompt_ms, n = [], [], [], 0
        win.open()
        for _ in range(a.iterations):
            t = time.perf_counter()
            r = post(base + "/completion", body, a.timeout)
            iter_s.append(time.perf_counter() - t)
            n += int(r.get("tokens_predicted", r.get("timings", {}).get("predicted_n", 0)))
            tm = r.get("timings", {})
            pred_ms.append(tm.get("predicted_ms"))
            prompt_ms.append(tm.get("prompt_ms"))
        win.close()
        if n != a.tokens * a.iterations:
            notes.append(f"generated {n} tokens, expected {a.tokens * a.iterations}")
        extra = {"server_load_s": round(load_s, 2), "server_predicted_ms": pred_ms, "server_prompt_ms": prompt_ms,
                 "server_predicted_tok_s": round(1000 * n / sum(pred_ms), 3) if all(pred_ms) else None,
                 "prompt_len": a.prompt_len, "ctx": ctx, "cmd": " ".join(cmd),
                 "window_brackets": f"{a.iterations} /completion requests: {a.prompt_len}-token prefill + "
                                    f"{a.tokens} greedy tokens each, HTTP on loopback; excludes load and warm-ups"}
        extra.update(cool)
        extra["idle_reference"] = "llama-server loaded, idle (its CUDA context live)"
        return win.result(), iter_s, n, extra, notes
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["bench", "server"], default="bench")
    ap.add_argument("--bin", required=True, help="directory with llama-bench / llama-server")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--precision", required=True, help="label: F16, Q8_0, Q4_K, Q4_0")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--ngl", type=int, default=999)
    ap.add_argument("--threads", type=int, default=0, help="-t (0: llama.cpp's default)")
    ap.add_argument("--cooldown-max-s", type=float, default=10.0)
    ap.add_argument("--trace-hz", type=float, default=50.0)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--models-csv")
    ap.add_argument("--log")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s = shapes.load(a.shape, a.models_csv)
    arm = f"llamacpp-{a.mode}-{a.precision.lower()}"
    try:
        wbytes, types = gguf_weight_bytes(a.gguf)
        meter = nw.Meter()
        if a.mode == "bench":
            # no CUDA context exists yet: llama-bench makes its own; this idle reference is context-free
            a._idle = meter.idle()
            cool = meter.cooldown(a._idle[0], a._idle[1], a.cooldown_max_s) if a.cooldown_max_s > 0 else {}
            win, iter_s, n, extra, notes = run_bench(a, meter, a.log)
            extra.update(cool)
            extra["idle_reference"] = "no CUDA context (before llama-bench starts)"
            if cool:
                notes.append("cooldown ran before llama-bench started (its load and warm-ups follow it)")
        else:
            win, iter_s, n, extra, notes = run_server(a, meter, a.log, s["vocab"])
        extra.update(gguf=os.path.basename(a.gguf), gguf_tensor_types=types, warmup=a.warmup,
                     iterations=a.iterations, new_tokens=a.tokens, params_b=round(shapes.params_b(s), 4))
        rec = nw.arm_record(engine="llama.cpp", engine_version=version_of(os.path.join(a.bin, "llama-bench")),
                            arm=arm, mode=f"llama-{a.mode}", shape=s["name"], precision=a.precision,
                            tokens_generated=n, iter_s=iter_s, window=win, weight_bytes_per_token=wbytes,
                            meter_info=meter.info(), idle=a._idle, extra=extra, notes=notes)
    except Exception as e:  # noqa: BLE001
        rec = nw.failure_record(engine="llama.cpp", arm=arm, shape=s["name"], precision=a.precision,
                                error=f"{type(e).__name__}: {e}", mode=f"llama-{a.mode}")
    with open(a.out, "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps({k: rec.get(k) for k in ("arm", "shape", "ok", "tok_s", "mj_per_token", "avg_power_w",
                                               "iter_cv_pct", "hbm_fraction", "error")}))
    sys.exit(0 if rec["ok"] else 1)


if __name__ == "__main__":
    main()
