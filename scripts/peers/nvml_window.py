#!/usr/bin/env python3
"""NVML energy window shared by the peer arms, and a sidecar that brackets part of a command's run.

Library (imported by torch_compile.py and llamacpp_arm.py):
  Meter            the GPU's NVML handle: energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ),
                   POWER_INSTANT, temperature, an idle reference with a live context, a bounded cooldown
  Trace            a 50 Hz POWER_INSTANT sampler: a cross-check of the counter, never the result
  run_bracketed()  run a command; open the window when a line of its output matches START (or at
                   spawn), close it when a line matches STOP (or at exit)
  arm_record()     the flat per-arm JSON record (schema in README.md)

Sidecar:
  nvml_window.py [--start-on REGEX] [--stop-on REGEX] [--out FILE] -- CMD ARGS...
  prints/writes {"energy_j", "window_s", "avg_power_w", "start", "stop", "rc", ...}. Without --start-on the
  window opens at spawn and so includes the command's start-up (model load...).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import threading
import time

HBM_BYTES_PER_S = 4.8e12  # H200 datasheet
FI_POWER_INSTANT = 186    # NVML_FI_DEV_POWER_INSTANT
SCHEMA = "quantenergy-peer/1"


class FakeNvml:
    """QE_FAKE_NVML=1: a stand-in for machines without a GPU (tests of the scripts' plumbing only). Energy
    is wall time x 100 W; every record made with it says meter: fake."""
    NVML_TEMPERATURE_GPU = 0

    def __init__(self):
        self.t0 = time.perf_counter()

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return int((time.perf_counter() - self.t0) * 100 * 1000)

    def nvmlDeviceGetFieldValues(self, h, ids):
        raise RuntimeError("fake")

    def nvmlDeviceGetPowerUsage(self, h):
        return 100000

    def nvmlDeviceGetTemperature(self, h, k):
        return 30

    def nvmlDeviceGetName(self, h):
        return "FAKE (no NVML)"

    def nvmlSystemGetDriverVersion(self):
        return "none"

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 0


class Meter:
    def __init__(self, index=None):
        # NVML_INDEX: the card to meter when a campaign runs one job per GPU.
        index = int(os.environ.get("NVML_INDEX", "0")) if index is None else index
        if os.environ.get("QE_FAKE_NVML") == "1":
            self.nv, self.h, self.fake = FakeNvml(), None, True
            return
        self.fake = False
        import pynvml
        self.nv = pynvml
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(index)

    def energy_mj(self):
        return self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h)

    def power_w(self):
        try:
            v = self.nv.nvmlDeviceGetFieldValues(self.h, [FI_POWER_INSTANT])[0]
            if v.nvmlReturn == 0:
                return v.value.uiVal / 1000.0
        except Exception:
            pass
        return self.nv.nvmlDeviceGetPowerUsage(self.h) / 1000.0

    def temp_c(self):
        return float(self.nv.nvmlDeviceGetTemperature(self.h, self.nv.NVML_TEMPERATURE_GPU))

    def info(self):
        def s(x):
            return x.decode() if isinstance(x, bytes) else x
        d = {"gpu": s(self.nv.nvmlDeviceGetName(self.h)), "driver": s(self.nv.nvmlSystemGetDriverVersion())}
        try:
            d["power_limit_w"] = self.nv.nvmlDeviceGetEnforcedPowerLimit(self.h) / 1000.0
        except Exception:
            pass
        d["meter"] = "fake" if self.fake else "nvml"
        return d

    def idle(self, reads=30, dt=0.02):
        """Minimum POWER_INSTANT and temperature over `reads` reads (call with the CUDA context live)."""
        p, t = [], []
        for _ in range(reads):
            p.append(self.power_w())
            t.append(self.temp_c())
            time.sleep(dt)
        return min(p), min(t)

    def cooldown(self, idle_w, idle_c, max_s, margin_w=6.0, margin_c=5.0, poll_s=0.5):
        """Wait until power <= idle + margin_w and temp <= idle + margin_c, at most max_s."""
        t0 = time.perf_counter()
        while True:
            p, t = self.power_w(), self.temp_c()
            ok = p <= idle_w + margin_w and t <= idle_c + margin_c
            if ok or time.perf_counter() - t0 >= max_s:
                return {"cooldown_converged": ok, "cooldown_s": round(time.perf_counter() - t0, 2),
                        "cooldown_end_power_w": round(p, 1), "cooldown_end_temp_c": t}
            time.sleep(poll_s)


class Trace(threading.Thread):
    """POWER_INSTANT at `hz`, trapezoid-integrated: a cross-check of the counter window."""

    def __init__(self, meter, hz=50.0):
        super().__init__(daemon=True)
        self.m, self.period, self.samples, self.failed = meter, 1.0 / hz, [], 0
        self.halt = threading.Event()

    def run(self):
        t0 = nxt = time.perf_counter()
        while True:
            stopping = self.halt.is_set()
            try:
                self.samples.append((time.perf_counter() - t0, self.m.power_w()))
            except Exception:
                self.failed += 1
            if stopping:
                return
            nxt += self.period
            time.sleep(max(0.0, nxt - time.perf_counter()))

    def stop(self):
        self.halt.set()
        self.join()

    def energy_j(self):
        s = self.samples
        return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(s, s[1:])) if len(s) > 1 else None


class Window:
    """One energy window: open() and close() read time, then the counter (same order at both edges)."""

    def __init__(self, meter, trace_hz=50.0):
        self.m, self.trace_hz = meter, trace_hz
        self.t0 = self.t1 = self.e0 = self.e1 = None
        self.trace = None

    def open(self):
        if self.trace_hz > 0:
            self.trace = Trace(self.m, self.trace_hz)
            self.trace.start()
        self.t0 = time.perf_counter()
        self.e0 = self.m.energy_mj()

    def close(self):
        self.t1 = time.perf_counter()
        self.e1 = self.m.energy_mj()
        if self.trace:
            self.trace.stop()

    @property
    def is_open(self):
        return self.t0 is not None and self.t1 is None

    def result(self):
        w = self.t1 - self.t0
        e = (self.e1 - self.e0) / 1000.0
        d = {"window_s": w, "energy_j": e, "avg_power_w": e / w if w > 0 else None}
        if self.trace:
            tj = self.trace.energy_j()
            d.update(trace_energy_j=tj, counter_over_trace=(e / tj if tj else None),
                     trace_samples=len(self.trace.samples), trace_failed_reads=self.trace.failed)
        return d


def run_bracketed(cmd, meter, start_re=None, stop_re=None, trace_hz=50.0, log_path=None, timeout_s=None,
                  env=None):
    """Run `cmd`; the window opens at the first output line (stdout or stderr) matching start_re (at spawn
    when None) and closes at the first later line matching stop_re (at exit when None or never seen).
    Returns (window dict or None, rc, stdout text, notes list)."""
    start_c = re.compile(start_re) if start_re else None
    stop_c = re.compile(stop_re) if stop_re else None
    win = Window(meter, trace_hz)
    lock = threading.Lock()
    out_lines, notes = [], []
    log = open(log_path, "a") if log_path else None
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=env,
                         errors="replace")
    if start_c is None:
        win.open()

    def pump(stream, name):
        for line in stream:
            with lock:
                if start_c is not None and win.t0 is None and start_c.search(line):
                    win.open()
                elif stop_c is not None and win.is_open and stop_c.search(line):
                    win.close()
                if name == "stdout":
                    out_lines.append(line)
                if log:
                    log.write(f"[{name}] {line}")

    ths = [threading.Thread(target=pump, args=(p.stdout, "stdout"), daemon=True),
           threading.Thread(target=pump, args=(p.stderr, "stderr"), daemon=True)]
    for t in ths:
        t.start()
    try:
        rc = p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
        notes.append(f"killed after {timeout_s} s")
    for t in ths:
        t.join(timeout=10)
    with lock:
        if win.is_open:
            win.close()
            if stop_c is not None:
                notes.append("stop marker not seen: the window closed at process exit")
    if log:
        log.close()
    if win.t0 is None:
        notes.append("start marker never seen: no window")
        return None, rc, "".join(out_lines), notes
    return win.result(), rc, "".join(out_lines), notes


def mean_cv(xs):
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2 or m == 0:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, 100.0 * sd / m


def rnd(x, n):
    return None if x is None else round(x, n)


def arm_record(*, engine, engine_version, arm, mode, shape, precision, tokens_generated, iter_s, window,
               weight_bytes_per_token, meter_info, idle=None, cooldown=None, extra=None, notes=None):
    """The flat per-arm record (README.md documents every key)."""
    w = window or {}
    ws, ej = w.get("window_s"), w.get("energy_j")
    tok_s = tokens_generated / ws if ws else None
    m, cv = mean_cv(iter_s)
    rec = {
        "schema": SCHEMA, "ok": True, "engine": engine, "engine_version": engine_version, "arm": arm,
        "mode": mode, "shape": shape, "precision": precision, "batch": 1,
        "tokens_generated": tokens_generated, "window_s": rnd(ws, 4), "tok_s": rnd(tok_s, 3),
        "energy_j": rnd(ej, 3), "mj_per_token": rnd(ej * 1000 / tokens_generated, 3) if ej and tokens_generated else None,
        "avg_power_w": rnd(w.get("avg_power_w"), 2),
        "iter_s": [round(x, 5) for x in iter_s], "iter_mean_s": rnd(m, 5), "iter_cv_pct": rnd(cv, 3),
        "weight_bytes_per_token": weight_bytes_per_token,
        "hbm_fraction": rnd(weight_bytes_per_token * tok_s / HBM_BYTES_PER_S, 5) if tok_s and weight_bytes_per_token else None,
        "hbm_bytes_per_s_assumed": HBM_BYTES_PER_S,
        "trace_energy_j": rnd(w.get("trace_energy_j"), 3), "counter_over_trace": rnd(w.get("counter_over_trace"), 4),
        "trace_samples": w.get("trace_samples"),
    }
    if ej and w.get("trace_energy_j") and tokens_generated:
        rec["mj_per_token_trace"] = round(w["trace_energy_j"] * 1000 / tokens_generated, 3)
    rec.update(meter_info or {})
    if idle:
        rec["idle_power_w"], rec["idle_temp_c"] = round(idle[0], 2), idle[1]
    rec.update(cooldown or {})
    rec.update(extra or {})
    rec["notes"] = "; ".join(notes or [])
    return rec


def failure_record(*, engine, arm, shape, precision, error, mode=None):
    return {"schema": SCHEMA, "ok": False, "engine": engine, "arm": arm, "mode": mode, "shape": shape,
            "precision": precision, "error": error}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--start-on", help="regex: open the window at the first output line matching it")
    ap.add_argument("--stop-on", help="regex: close the window at the first later line matching it")
    ap.add_argument("--trace-hz", type=float, default=50.0)
    ap.add_argument("--log", help="append the command's stdout/stderr here")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    m = Meter()
    win, rc, _, notes = run_bracketed(cmd, m, a.start_on, a.stop_on, a.trace_hz, a.log)
    d = dict(win or {}, rc=rc, start=a.start_on or "spawn", stop=a.stop_on or "exit", notes="; ".join(notes))
    d.update(m.info())
    s = json.dumps(d)
    print(s)
    if a.out:
        open(a.out, "w").write(s + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
