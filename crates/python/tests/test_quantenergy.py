"""The installed wheel: its `quantenergy` console script and the Python API, against the committed
reports and the documented test meter (`Meter(fake=True)`: 100 W over real time, no GPU).
Run by ./dev test in a fresh venv: `pytest crates/python/tests` with QE_REPO set to the checkout."""

import ctypes.util
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import quantenergy as qe

REPO = Path(os.environ.get("QE_REPO", Path(__file__).resolve().parents[3]))
EXAMPLES = REPO / "data" / "examples"
H200_Q4_0 = REPO / "data/measurements/h200/llama/raw/qwen2-0.5b_server_b1_r1_Q4_0.json"


def run(*args):
    exe = shutil.which("quantenergy")
    assert exe, "the wheel's console script is not on PATH"
    return subprocess.run([exe, *args], capture_output=True, text=True)


def test_the_console_script_is_the_cli_with_its_exit_codes(tmp_path):
    assert run("--version").stdout.strip() == f"quantenergy {qe.__version__}"
    ok = run("validate", str(EXAMPLES / "measured.json"))
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": "1.0"}))
    assert run("validate", str(bad)).returncode == 1
    bad.write_text("{not json")
    assert run("validate", str(bad)).returncode == 2
    assert run("no-such-command").returncode == 2
    est = run("estimate", "--gpu", "RTX 4090", "--params-b", "7", "--precision", "NF4")
    assert est.returncode == 0 and "ΔE vs FP16" in est.stdout


def test_the_wheel_measures_servers_and_says_where_our_engines_are():
    r = run("measure", "--synthetic", "qwen2-0.5b", "--precision", "Q4_K")
    assert r.returncode == 2
    assert "servers only" in r.stderr and "scripts/build-cuda.sh" in r.stderr
    # A server that does not answer is an error, never an estimate that looks like a run.
    r = run("measure", "--server", "http://127.0.0.1:9", "--precision", "Q4_K", "--params-b", "0.5")
    assert r.returncode == 2, r.stdout + r.stderr


def test_validate_names_the_field():
    v = qe.validate(EXAMPLES / "measured.json")
    assert v.valid and v.errors == []
    assert v.validity is not None and v.validity["status"] in ("valid", "flagged", "unknown")
    report = json.loads((EXAMPLES / "measured.json").read_text())
    report["workload"]["precision"] = "NF5"
    bad = Path(os.environ.get("TMPDIR", "/tmp")) / f"qe-bad-{os.getpid()}.json"
    bad.write_text(json.dumps(report))
    try:
        v = qe.validate(bad)
    finally:
        bad.unlink()
    assert not v.valid
    assert any(i.path == "$.workload.precision" for i in v.errors), v.errors


def test_estimate_is_the_cli_figure():
    e = qe.estimate(params_b=7, precision="NF4", gpu="RTX 4090")
    cli = run("estimate", "--gpu", "RTX 4090", "--params-b", "7", "--precision", "NF4", "--json")
    rep = json.loads(cli.stdout)
    assert e.basis == rep["results"]["basis"]
    assert round(e.delta_pct, 2) == round(rep["results"]["vs_fp16_energy_pct"], 2)
    assert e.ci_low < e.delta_pct < e.ci_high
    with pytest.raises(ValueError, match="precision"):
        qe.estimate(params_b=7, precision="NF5", gpu="RTX 4090")
    with pytest.raises(ValueError, match="params_b"):
        qe.estimate(params_b=1e12, precision="NF4", gpu="RTX 4090")


def test_compare_places_a_measured_h200_report_on_its_stacks_curve():
    p = qe.compare(H200_Q4_0)
    assert isinstance(p, qe.Placement)
    assert p.raw["params_b"] == pytest.approx(0.494, abs=0.01)
    assert p.engine == "llama.cpp" and p.raw["curve_engines"] == ["llama.cpp"]
    assert p.outcome == "inside" and p.inside and p.band_pct[0] <= p.measured_delta_pct <= p.band_pct[1]
    assert p.summary.startswith("inside the hopper Q4_0 band")
    with pytest.raises(ValueError, match="invalid report"):
        qe.compare(EXAMPLES / "../anchors.csv")


def test_a_window_on_the_test_meter_reads_its_counter_and_says_what_it_cannot_trust():
    m = qe.Meter(fake=True)
    assert "simulated" in m.device
    with m.window(tokens=1000) as w:
        time.sleep(0.5)
    r = w.result
    # 100 W over ≈ 0.5 s: the counter's joules, and mJ per token from them.
    assert r.seconds == pytest.approx(0.5, abs=0.2)
    assert r.joules == pytest.approx(100 * r.seconds, rel=0.01)
    assert r.mj_per_token == pytest.approx(r.joules, rel=1e-9)  # 1000 tokens: J → mJ/token
    assert not r.valid and any(f.startswith("short_window") for f in r.flags)
    # One window at a time; a failing block still closes its window and its exception wins.
    with pytest.raises(ZeroDivisionError):
        with m.window():
            1 / 0
    with m.window() as w2:
        pass
    assert w2.result is not None


def test_a_five_second_window_is_valid():
    m = qe.Meter(fake=True)
    with m.window(tokens=500) as w:
        time.sleep(5.05)
    assert w.result.valid, w.result.flags
    assert w.result.counter_over_trace == pytest.approx(1.0, abs=0.02)
    # The counter period was measured when the meter opened (the test meter moves continuously).
    assert w.result.counter_update_ms is not None and w.result.counter_update_ms < 50
    assert not w.result.unchecked or all("busy" in u or "throttl" in u for u in w.result.unchecked)


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML")
def test_no_gpu_raises_never_zero():
    with pytest.raises(RuntimeError, match="NVML"):
        qe.Meter()


class SleepyArm:
    """An arm whose tokens cost wall time: Q4_0 a quarter less than F16."""

    def __init__(self, precision, fail=False):
        self.per_token = 0.0004 if precision == "FP16" else 0.0003  # the report's spelling
        self.fail = fail
        self.kernel = f"time.sleep ({precision})"

    def generate(self, batch, prompt_len, new_tokens):
        if self.fail:
            raise RuntimeError("CUDA out of memory (scripted)")
        time.sleep(self.per_token * new_tokens * batch)
        return batch * new_tokens


def test_a_campaign_runs_the_protocol_over_python_arms_and_writes_reports_validate_accepts(tmp_path):
    c = qe.Campaign(model="toy", params_b=0.5, precisions=["F16", "Q4_0"], stack="python-sleep",
                    stack_version="1", tokens=64, warmup=1, iterations=2, min_window_s=0.3,
                    cooldown_max_s=1, fake=True)
    paths = c.run(lambda p: SleepyArm(p), out=str(tmp_path))
    assert len(paths) == 2
    for p in paths:
        v = qe.validate(p)
        assert v.valid, v.errors
    q4 = json.loads(Path([p for p in paths if "Q4_0" in p][0]).read_text())
    assert q4["results"]["basis"] == "measured"
    assert q4["stack"]["engine"] == "python-sleep"
    # 100 W over a quarter less time per token: Q4_0 costs about 25 % less than F16.
    assert q4["results"]["vs_fp16_energy_pct"] == pytest.approx(-25, abs=8)
    # The windows were stretched to min_window_s.
    assert q4["energy"]["window_seconds"] >= 0.3
    assert q4["weights"]["kind"] == "real"
    # The CLI reads them too.
    assert run("validate", *paths).returncode in (0, 1)


def test_a_campaign_on_seeded_weights_says_synthetic(tmp_path):
    c = qe.Campaign(model="Qwen2-0.5B", params_b=0.494, precisions=["FP16"], stack="python-sleep",
                    tokens=16, warmup=0, iterations=1, min_window_s=0.0, cooldown_max_s=1, fake=True,
                    synthetic_seed=7)
    rep = json.loads(Path(c.run(lambda p: SleepyArm(p), out=str(tmp_path))[0]).read_text())
    assert rep["weights"]["kind"] == "synthetic" and rep["weights"]["seed"] == 7


class Int4Arm(SleepyArm):
    """A weight-only int4 arm that says how many bytes of weights a step reads."""

    weight_bytes_per_step = 280_000_000


def test_an_int4_weight_only_arm_reports_its_weight_reads(tmp_path):
    c = qe.Campaign(model="toy", params_b=0.5, precisions=["FP16", "INT4-WO"], stack="python-sleep",
                    tokens=16, warmup=0, iterations=1, min_window_s=0.0, cooldown_max_s=1, fake=True)
    paths = c.run(lambda p: Int4Arm(p) if p == "INT4-WO" else SleepyArm(p), out=str(tmp_path))
    reps = {json.loads(Path(p).read_text())["workload"]["precision"]: json.loads(Path(p).read_text())
            for p in paths}
    assert set(reps) == {"FP16", "INT4-WO"}
    arms = {a["precision"]: a for a in reps["INT4-WO"]["protocol"]["arms"]}
    assert arms["INT4-WO"]["weight_bytes_per_token"] == 280_000_000
    assert "weight_bytes_per_token" not in arms["FP16"]  # that arm did not say: left out, never guessed
    for p in paths:
        assert qe.validate(p).valid
    bad = Int4Arm("INT4-WO")
    bad.weight_bytes_per_step = -1  # a wrong figure fails the arm, in words; it is never reported
    out = qe.Campaign(model="toy", params_b=0.5, precisions=["INT4-WO"], stack="x", tokens=16, warmup=0,
                      iterations=1, min_window_s=0.0, cooldown_max_s=1, fake=True).run(
        lambda p: bad, out=str(tmp_path / "bad"))
    failed = json.loads(Path(out[0]).read_text())
    assert "weight_bytes_per_step: a positive integer" in json.dumps(failed)


def test_a_failing_arm_is_recorded_with_the_python_error(tmp_path):
    c = qe.Campaign(model="toy", params_b=0.5, precisions=["F16", "Q4_0"], stack="python-sleep",
                    tokens=16, warmup=0, iterations=1, min_window_s=0.0, cooldown_max_s=1, fake=True)
    paths = c.run(lambda p: SleepyArm(p, fail=(p == "Q4_0")), out=str(tmp_path))
    q4 = json.loads(Path([p for p in paths if "Q4_0" in p][0]).read_text())
    assert "CUDA out of memory (scripted)" in json.dumps(q4)
    with pytest.raises(ValueError, match="precisions"):
        qe.Campaign(model="toy", params_b=0.5, precisions=["NF5"], stack="x", fake=True)
