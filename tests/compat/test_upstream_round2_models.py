"""Upstream course code for modules 11-20, round 2: the names, keywords and contracts that
upstream's own tests use (olympics event policy and submission schema, KV cache keywords,
compression on plain models, GPT generation checks, the thin `tinytorch.models` / `text`
packages). Each test checks a behaviour against an independent computation or an exact
expected rule, so a wrong implementation fails it."""
import copy

import numpy as np
import pytest

from tinytorch import olympics
from tinytorch.core.tensor import Tensor


# ------------------------------------------------------------------ olympics event policy

def _metrics(accuracy=0.9, latency=1.0, size=1.0):
    return {"accuracy": accuracy, "latency_ms_median": latency, "model_size_mb": size}


@pytest.mark.parametrize("event,floor", [("latency_sprint", 0.85), ("memory_challenge", 0.85),
                                         ("extreme_push", 0.80)])
def test_accuracy_floors_are_inclusive(event, floor):
    assert olympics.qualifies_event(_metrics(accuracy=floor), event) is True
    assert olympics.qualifies_event(_metrics(accuracy=np.nextafter(floor, 0)), event) is False


def test_accuracy_contest_gates_latency_and_size_strictly():
    ev = olympics.OlympicEvent.ACCURACY_CONTEST
    assert olympics.qualifies_event(_metrics(accuracy=0.0, latency=99.9, size=9.9), ev)
    assert not olympics.qualifies_event(_metrics(latency=100.0), ev)
    assert not olympics.qualifies_event(_metrics(size=10.0), ev)
    assert olympics.qualifies_event(_metrics(accuracy=0.0, latency=1e6, size=1e6), "all_around")


def test_event_policy_rejects_bad_measurements_and_leaves_metrics_alone():
    m = _metrics()
    before = copy.deepcopy(m)
    olympics.qualifies_event(m, "latency_sprint")
    assert m == before
    for bad in (_metrics(accuracy=1.01), _metrics(latency=0), _metrics(size=np.inf), _metrics(accuracy=np.nan)):
        with pytest.raises(ValueError):
            olympics.qualifies_event(bad, "all_around")
    with pytest.raises(KeyError):
        olympics.qualifies_event({"accuracy": 0.9, "model_size_mb": 1}, "all_around")
    with pytest.raises(ValueError, match="unknown event"):
        olympics.qualifies_event(m, "sprint")
    assert [e.value for e in olympics.OlympicEvent] == ["latency_sprint", "memory_challenge",
                                                         "accuracy_contest", "all_around", "extreme_push"]


def _report(name, hidden):
    rng = np.random.default_rng(3)
    x, y = Tensor(rng.standard_normal((12, 10)).astype(np.float32)), rng.integers(0, 3, 12)
    r = olympics.BenchmarkReport(name)
    r.benchmark_model(olympics.SimpleMLP(10, hidden, 3), x, y, num_runs=3)
    return r


def test_schema_accepts_generated_submissions_and_names_the_broken_field():
    base, opt = _report("base", 20), _report("opt", 4)
    sub = olympics.generate_submission(base, opt, techniques_applied=["sizing"])
    assert olympics.validate_submission_schema(sub) is True
    b, o = base.metrics, opt.metrics
    assert sub["improvements"]["speedup"] == pytest.approx(b["latency_ms_median"] / o["latency_ms_median"])
    for mutate, word in [(lambda s: s.pop("timestamp"), "timestamp"),
                         (lambda s: s["baseline"]["metrics"].__setitem__("accuracy", 1.5), "accuracy"),
                         (lambda s: s["baseline"]["metrics"].__setitem__("parameter_count", 3.0), "parameter_count"),
                         (lambda s: s["optimized"]["metrics"].__setitem__("latency_ms_mean", float("nan")), "latency_ms_mean"),
                         (lambda s: s["improvements"].__setitem__("speedup", s["improvements"]["speedup"] * 2), "speedup"),
                         (lambda s: s["system_info"].pop("python_version"), "python_version")]:
        broken = copy.deepcopy(sub)
        mutate(broken)
        with pytest.raises(AssertionError, match=word):
            olympics.validate_submission_schema(broken)
