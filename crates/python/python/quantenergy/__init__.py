"""quantenergy: does quantizing this model on this GPU save energy, or cost more?

The Python face of the Rust meter: every figure comes from the same code as the ``quantenergy``
command and the page (``report``, ``analysis``, ``meter``); this module only turns its JSON into
dataclasses. A missing GPU raises ``RuntimeError``; nothing here returns a zero it did not read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _native

__version__: str = _native.__version__
__all__ = ["Campaign", "Meter", "Window", "WindowResult", "Validation", "Issue", "Estimate", "Placement", "validate", "estimate", "compare"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Issue:
    """A problem in a report: where (``$.workload.precision``) and what."""

    path: str
    message: str


@dataclass(frozen=True)
class Validation:
    """What ``quantenergy validate`` says of one report."""

    valid: bool
    errors: List[Issue]
    warnings: List[Issue]
    #: The window-validity verdict (``status``, ``flags``, ``unknown``) of a valid report.
    validity: Optional[dict]


@dataclass(frozen=True)
class Estimate:
    """ΔE vs FP16 from the published dataset: an estimate, never a measurement."""

    delta_pct: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    basis: str
    verdict: str
    raw: dict = field(repr=False)


@dataclass(frozen=True)
class Placement:
    """Where a measured report sits against the published curve of its class (``quantenergy
    compare``): ``outcome`` is ``inside``, ``outside``, or why it is not placed (no curve, an
    estimate, no FP16 figure); ``summary`` says it in words."""

    outcome: str
    summary: str
    precision: Optional[str]
    engine: Optional[str]
    curve: Optional[str]
    measured_delta_pct: Optional[float]
    predicted_pct: Optional[float]
    band_pct: Optional[Tuple[float, float]]
    sigmas: Optional[float]
    inside: Optional[bool]
    raw: dict = field(repr=False)


@dataclass(frozen=True)
class WindowResult:
    """One energy window: the hardware counter's joules over the window (the primary figure), the
    power trace's for comparison, and the validity rules a single window allows, in words."""

    joules: float
    seconds: float
    tokens: Optional[int]
    mj_per_token: Optional[float]
    trace_joules: Optional[float]
    counter_over_trace: Optional[float]
    gpu_busy_pct: Optional[float]
    power_throttle_pct: Optional[float]
    thermal_throttle_pct: Optional[float]
    flags: List[str]
    trace_samples: Optional[int] = None
    #: How often the card's energy counter moves, ms (measured when the ``Meter`` opened).
    counter_update_ms: Optional[float] = None
    #: Rules the meter could not check for want of a figure (e.g. no GPU-busy reading), in words.
    unchecked: List[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """No rule raised a flag (a window under 5 s is ``short_window``; the rules are the
        reports', ``report::validity``, less the cooldown: a bare window has none before it)."""
        return not self.flags


class Window:
    """``with meter.window(tokens=n) as w:`` — the result is ``w.result`` after the block."""

    def __init__(self, meter: "Meter", tokens: Optional[int]):
        self._meter = meter
        self._tokens = tokens
        self.result: Optional[WindowResult] = None

    def __enter__(self) -> "Window":
        self._meter._native.begin()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        # Always close (the trace thread stops); a failing body's exception wins, as in the CLI.
        try:
            result = self._meter._native.end(self._tokens)
        except RuntimeError:
            if exc_type is None:
                raise
            return False
        if exc_type is None:
            self.result = WindowResult(**json.loads(result))
        return False


class Meter:
    """GPU energy meter: NVML on ``gpus`` (CUDA-visible indices, counters summed), or, with
    ``fake=True``, the documented test meter (100 W over real time, no GPU). Opening it reads the
    energy counter for up to 1.5 s to learn how often it moves (≈ 100 ms on an H200): a window
    shorter than 50 such steps is flagged ``coarse_counter``."""

    def __init__(self, gpus: Optional[Sequence[int]] = None, fake: bool = False, trace_hz: float = 50.0):
        self._native = _native.Meter(list(gpus) if gpus is not None else None, fake, trace_hz)

    @property
    def device(self) -> str:
        """The card's name as the meter reads it."""
        return self._native.device

    def window(self, tokens: Optional[int] = None) -> Window:
        """An energy window around a ``with`` block; ``tokens`` gives mJ per token."""
        return Window(self, tokens)


#: The meter's whole protocol over your code (the CLI's ``measure``, arm by arm):
#: ``Campaign(model=, params_b=, precisions=["F16", "Q4_0"], stack="torch.compile",
#: stack_version=torch.__version__, tokens=256, warmup=2, iterations=10, order="balanced",
#: repeat=1, min_window_s=5.0, gpus=None, fake=False, synthetic_seed=None).run(load, out="reports")``
#: (``synthetic_seed``: the arms decode seeded random weights, and the reports say so) calls
#: ``load(precision)`` for each arm (spelled as reports spell it: "FP16", "Q4_0"); the object it returns has ``generate(batch, prompt_len,
#: new_tokens) -> tokens generated`` and optionally ``synchronize()``, ``kernel`` (what runs the
#: matmuls, in words) and ``weight_bytes_per_step`` (bytes of weights one decode step reads, as the
#: arm holds them; the report's memory-roofline share comes from it). It writes
#: one ``energy.json`` per precision (FP16 the baseline) and returns their paths.
Campaign = _native.Campaign


def _read(path: PathLike) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def validate(path: PathLike) -> Validation:
    """Validate an ``energy.json`` report (schema and semantic checks, as ``quantenergy validate``)."""
    v = json.loads(_native.validate(_read(path)))
    return Validation(
        valid=v["valid"],
        errors=[Issue(**i) for i in v["errors"]],
        warnings=[Issue(**i) for i in v["warnings"]],
        validity=v["validity"],
    )


def estimate(
    params_b: float,
    precision: str,
    gpu: Optional[str] = None,
    arch: Optional[str] = None,
    batch: int = 1,
    context: int = 2048,
    engine: Optional[str] = None,
) -> Estimate:
    """ΔE vs FP16 for a model from the published dataset (``quantenergy estimate``)."""
    e = json.loads(_native.estimate(params_b, precision, gpu, arch, batch, context, engine))
    return Estimate(
        delta_pct=e.get("delta_pct"),
        ci_low=e.get("ci_low"),
        ci_high=e.get("ci_high"),
        basis=e.get("basis"),
        verdict=e["verdict"],
        raw=e,
    )


def compare(path: PathLike, any_stack: bool = False) -> Placement:
    """Where a report's measured ΔE sits against its class's curve (``quantenergy compare``)."""
    p = json.loads(_native.compare(_read(path), any_stack))
    c = p.get("comparison") or {}
    band = c.get("band_pct")
    return Placement(
        outcome=p["outcome"],
        summary=p["summary"],
        precision=p.get("precision"),
        engine=p.get("engine"),
        curve=p.get("curve"),
        measured_delta_pct=p.get("measured_delta_pct"),
        predicted_pct=c.get("predicted_pct"),
        band_pct=tuple(band) if band else None,
        sigmas=c.get("sigmas"),
        inside=c.get("inside"),
        raw=p,
    )
