"""The MLCommons LoadGen engine of ``MLPerf.run_standard_benchmark`` (perf/benchmarking.py).

What this file owns
  loadgen_status()      (module or None, version or the reason it is missing). LoadGen is the
                        optional extra ``tinytorch[mlperf]`` (PyPI ``mlcommons-loadgen``, imported
                        as ``mlperf_loadgen``); it is imported here at call time, never at import.
  run_loadgen(...)      one LoadGen test per scenario (SingleStream, Offline, Server) through a
                        real SUT and QSL, then, when labels are given, one AccuracyOnly test whose
                        logged responses give the accuracy. Returns a dict per scenario.
  parse_summary(text)   the ``key : value`` lines of ``mlperf_log_summary.txt`` as a dict.
  read_accuracy_log()   ``mlperf_log_accuracy.json`` decoded to {sample index: predicted class}.

How the SUT answers
  The caller gives ``predict(indices) -> int64 classes`` (the model run on those samples). Each
  response handed to LoadGen is that int64 class, 8 bytes, so the accuracy log holds exactly what
  the model answered; the accuracy is computed from LoadGen's log, not from a side channel. Every
  sample lives in memory already, so the QSL's load/unload callbacks do nothing. Offline queries
  (thousands of samples at once) are answered in batches of ``batch_size``.

How the settings are chosen (short runs on one machine, not a submission)
  min_duration_ms is the caller's (1 s by default, MLPerf's rules ask 600 s). The expected
  latency / QPS LoadGen schedules with come from a calibration the caller measures first:
    SingleStream  expected latency = the calibrated median (LoadGen pre-generates min_duration /
                  expected latency queries, so an overestimate leaves the duration unmet); at
                  least 64 queries (early stopping's floor).
    Offline       expected QPS = 3 x the calibrated batch throughput (the faster of two timed
                  passes), so the one big query lasts at least min_duration even when the
                  calibration ran slow (an underestimate makes the run INVALID: "min duration").
    Server        target QPS = half the single-sample capacity, 0.5 / the calibrated mean latency
                  (capped at 1000/s), unless given;
                  at least 512 queries, enough for early stopping's p99 estimate when every query
                  meets the 100 ms latency bound.
  Every test is capped at max(20 x min_duration_ms, 10 s) (LoadGen's max_duration_ms), a bound
  for a machine much slower than its calibration said. LoadGen's verdict (VALID / INVALID) is
  about those settings and is reported as LoadGen wrote it, with the unmet constraints.

What it assumes: LoadGen's Python API (SUT, QSL, TestSettings, its summary and
accuracy logs); MLPerf (perf/mlperf.py) gives the model's batch runner and the inputs.
"""
from __future__ import annotations

import json
import os
import threading

import numpy as np

SCENARIO_NAMES = {"single_stream": "SingleStream", "offline": "Offline", "server": "Server"}

_MIN_SINGLE_STREAM_QUERIES = 64
_MIN_SERVER_QUERIES = 512
SERVER_QPS_CAP = 1000.0
_MAX_DURATION_FLOOR_MS = 10_000
_OFFLINE_QPS_MARGIN = 3.0


def loadgen_status():
    """``(module, "mlcommons-loadgen X.Y.Z")`` when LoadGen imports, else ``(None, reason)``."""
    try:
        import mlperf_loadgen
    except Exception as exc:  # ImportError, or a broken binary wheel
        return None, (f"MLCommons LoadGen is not installed ({type(exc).__name__}: {exc}); "
                      "install it with `pip install tinytorch[mlperf]` or `pip install mlcommons-loadgen`")
    try:
        from importlib.metadata import version
        ver = version("mlcommons-loadgen")
    except Exception:
        ver = "unknown version"
    return mlperf_loadgen, f"mlcommons-loadgen {ver}"


def parse_summary(text: str) -> dict:
    """The ``key : value`` lines of an ``mlperf_log_summary.txt``, keys and values stripped.

    Args:
        text: the summary file's text.
    """
    out = {}
    for line in text.splitlines():
        if ":" not in line or line.lstrip().startswith("*"):
            continue
        key, value = line.split(":", 1)
        key, value = key.strip(), value.strip()
        if key and value and key not in out:
            out[key] = value
    return out


def read_accuracy_log(path: str) -> dict:
    """{QSL sample index: int64 class} from an ``mlperf_log_accuracy.json`` whose responses are
    one little-endian int64 each.

    Args:
        path: the accuracy log's path.
    """
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    out = {}
    for entry in entries:
        raw = bytes.fromhex(entry["data"])
        if len(raw) != 8:
            raise ValueError(f"{path}: response of sample {entry['qsl_idx']} has {len(raw)} bytes, expected 8")
        out[int(entry["qsl_idx"])] = int(np.frombuffer(raw, dtype="<i8")[0])
    return out


def _ns_to_ms(summary: dict, key: str):
    value = summary.get(key)
    return float(value) * 1e-6 if value is not None else None


class _SystemUnderTest:
    """The SUT's two callbacks over ``predict``; keeps every response buffer alive until LoadGen
    has copied it, counts the samples answered, and keeps the first exception for the caller."""

    def __init__(self, lg, predict, batch_size):
        self.lg, self.predict, self.batch_size = lg, predict, batch_size
        self.samples = 0
        self.error = None
        self._lock = threading.Lock()

    def issue_queries(self, query_samples):
        lg = self.lg
        for start in range(0, len(query_samples), self.batch_size):
            chunk = query_samples[start:start + self.batch_size]
            try:
                if self.error is not None:
                    raise RuntimeError("an earlier query failed")
                classes = np.ascontiguousarray(self.predict(np.array([q.index for q in chunk])), dtype="<i8")
                if classes.shape != (len(chunk),):
                    raise ValueError(f"predict returned shape {classes.shape} for {len(chunk)} samples")
                responses = [lg.QuerySampleResponse(q.id, classes[i:].ctypes.data, 8)
                             for i, q in enumerate(chunk)]
            except Exception as exc:  # answer empty so LoadGen finishes; the caller re-raises
                with self._lock:
                    self.error = self.error or exc
                responses = [lg.QuerySampleResponse(q.id, 0, 0) for q in chunk]
                classes = None
            lg.QuerySamplesComplete(responses)  # copies the bytes before returning
            with self._lock:
                self.samples += len(chunk)
            del classes

    def flush_queries(self):
        pass


def _settings(lg, scenario, mode, *, min_duration_ms, min_queries, latency_s, throughput, server_qps):
    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, SCENARIO_NAMES[scenario])
    s.mode = mode
    s.min_duration_ms = int(min_duration_ms)
    # a bound on the run when the calibration was far too optimistic (a loaded machine)
    s.max_duration_ms = max(20 * int(min_duration_ms), _MAX_DURATION_FLOOR_MS)
    if scenario == "single_stream":
        s.single_stream_expected_latency_ns = max(int(latency_s * 1e9), 1000)
        s.min_query_count = max(min_queries, _MIN_SINGLE_STREAM_QUERIES)
    elif scenario == "offline":
        s.offline_expected_qps = max(_OFFLINE_QPS_MARGIN * throughput, 1.0)
        s.min_query_count = min_queries
    else:
        s.server_target_qps = float(server_qps)
        s.min_query_count = max(min_queries, _MIN_SERVER_QUERIES)
    return s


def _start(lg, sut, qsl, settings, outdir):
    os.makedirs(outdir, exist_ok=True)
    out = lg.LogOutputSettings()
    out.outdir = outdir
    out.copy_summary_to_stdout = False
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    lg.StartTestWithLogSettings(sut.handle, qsl, settings, log)


def run_loadgen(predict, num_samples: int, scenarios, *, log_dir: str, batch_size: int,
                min_duration_ms: int, min_queries: int, latency_s: float, throughput: float,
                server_qps: float | None, labels=None) -> dict:
    """Run LoadGen's tests; returns {scenario: metrics} and, with labels, "accuracy".

    Args:
        predict: ``predict(indices) -> int64 classes``, the model on those samples.
        num_samples: samples in the QSL (all of them fit in memory).
        scenarios: names among "single_stream", "offline", "server".
        log_dir: folder for LoadGen's logs, one subfolder per test (kept).
        batch_size: most samples answered per model call (the offline query is split).
        min_duration_ms: LoadGen's minimum test duration per scenario.
        min_queries: LoadGen's minimum query count (raised to each scenario's floor).
        latency_s: calibrated (median) single-sample latency in seconds.
        throughput: calibrated batch throughput in samples per second.
        server_qps: Server target QPS; None means 0.5 / latency_s, capped at SERVER_QPS_CAP.
        labels: optional int labels, one per sample, for the AccuracyOnly test.
    """
    lg, version = loadgen_status()
    if lg is None:
        raise RuntimeError(version)
    server_qps = server_qps or min(0.5 / max(latency_s, 1e-9), SERVER_QPS_CAP)
    sut = _SystemUnderTest(lg, predict, batch_size)
    sut.handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    qsl = lg.ConstructQSL(num_samples, num_samples, lambda samples: None, lambda samples: None)
    results = {}
    try:
        for scenario in scenarios:
            settings = _settings(lg, scenario, lg.TestMode.PerformanceOnly, min_duration_ms=min_duration_ms,
                                 min_queries=min_queries, latency_s=latency_s, throughput=throughput,
                                 server_qps=server_qps)
            outdir = os.path.join(log_dir, scenario)
            sut.samples = 0
            _start(lg, sut, qsl, settings, outdir)
            if sut.error is not None:
                raise sut.error
            results[scenario] = _scenario_result(scenario, outdir, sut.samples, settings)
        if labels is not None:
            settings = _settings(lg, "offline", lg.TestMode.AccuracyOnly, min_duration_ms=0, min_queries=1,
                                 latency_s=latency_s, throughput=throughput, server_qps=server_qps)
            outdir = os.path.join(log_dir, "accuracy")
            _start(lg, sut, qsl, settings, outdir)
            if sut.error is not None:
                raise sut.error
            answered = read_accuracy_log(os.path.join(outdir, "mlperf_log_accuracy.json"))
            idx = np.fromiter(answered.keys(), dtype=np.int64)
            preds = np.fromiter(answered.values(), dtype=np.int64)
            results["accuracy"] = float(np.mean(preds == np.asarray(labels)[idx])) if idx.size else None
            results["accuracy_samples"] = int(idx.size)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut.handle)
    results["engine_version"] = version
    return results


def _scenario_result(scenario, outdir, samples, settings) -> dict:
    path = os.path.join(outdir, "mlperf_log_summary.txt")
    with open(path, encoding="utf-8") as f:
        summary = parse_summary(f.read())
    verdict = summary.get("Result is")
    if verdict not in ("VALID", "INVALID"):
        raise RuntimeError(f"LoadGen's summary {path} has no 'Result is : VALID|INVALID' line")
    rate_key = {"single_stream": "QPS w/ loadgen overhead", "offline": "Samples per second",
                "server": "Completed samples per second"}[scenario]
    failed = [k.strip() for k, v in summary.items() if v.upper().startswith("NO")
              and ("satisfied" in k or "constraints" in k)]
    out = {"engine": "loadgen", "verdict": verdict, "valid": verdict == "VALID",
           "unmet": failed, "samples": int(samples),
           "p50_latency_ms": _ns_to_ms(summary, "50.00 percentile latency (ns)"),
           "p90_latency_ms": _ns_to_ms(summary, "90.00 percentile latency (ns)"),
           "p99_latency_ms": _ns_to_ms(summary, "99.00 percentile latency (ns)"),
           "mean_latency_ms": _ns_to_ms(summary, "Mean latency (ns)"),
           "throughput_samples_per_s": float(summary[rate_key]),
           "min_duration_ms": int(settings.min_duration_ms),
           "log_dir": outdir, "summary_file": path, "summary": summary}
    if scenario == "server":
        out["target_qps"] = float(settings.server_target_qps)
    if scenario == "offline":
        out["expected_qps"] = float(settings.offline_expected_qps)
    return out
