"""benchmarks/trace_report.py: the GPU-time breakdown of traces, checked against timelines built
here by hand, in torch.profiler's Chrome trace format, whose idle time, causes, launches and
synchronisations are counted by hand; and its refusals, before any analysis."""

import gzip
import json
import os
import re

import pytest
from conftest import REPO, example_script

trace_report = example_script(os.path.join(REPO, "benchmarks", "trace_report.py"))
LAUNCH_US = 5  # every launch call takes 5 µs on the host


def event(category, name, start, duration, args, pid=1, tid=1):
    return {
        "ph": "X",
        "cat": category,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": start,
        "dur": duration,
        "args": args,
    }


def chrome_trace(kernels, syncs=()):
    """A torch.profiler-style trace: each kernel (launch call start, kernel start, kernel duration,
    stream if not 7) under its aten op and its cudaLaunchKernel, linked by their correlation id; syncs (start,
    duration) as cuda*Synchronize calls (the name, the start, the duration)."""
    events = []
    for i, (launch, start, duration, *stream) in enumerate(kernels):
        op, linked = {"External id": i + 1}, {"External id": i + 1, "correlation": 100 + i}
        events += [
            event("cpu_op", "aten::mul", launch - 1, LAUNCH_US + 2, op),
            event("cuda_runtime", "cudaLaunchKernel", launch, LAUNCH_US, linked),
            event(
                "kernel",
                f"k{i}",
                start,
                duration,
                {**linked, "device": 0, "stream": (stream or [7])[0]},
                pid=0,
                tid=7,
            ),
        ]
    for j, (name, start, duration) in enumerate(syncs):
        events.append(
            event("cuda_runtime", name, start, duration, {"External id": 0, "correlation": 900 + j})
        )
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": events}


def write(directory, name, trace):
    os.makedirs(directory, exist_ok=True)
    with gzip.open(os.path.join(directory, name), "wt", encoding="utf-8") as f:
        json.dump(trace, f)


# stock: k1 launched after k0 ended (host wait 20 µs), k2 queued before k1 ended with a 10 µs gap
# (kernel wait), k3 queued early but started 46 µs after k2 ended (other); k2 runs 4 µs, less than
# its 5 µs launch call
STOCK = [(0, 10, 20), (40, 50, 10), (55, 70, 4), (56, 120, 10)]
STOCK_SYNCS = [("cudaStreamSynchronize", 140, 30), ("cudaDeviceSynchronize", 180, 12)]
# plugin: two more kernels, each launched after the one before ended: host waits of 15 and 25 µs;
# and two on another stream while stream 7 runs (neither GPU idle time nor compute time changes;
# stream 13 waits 36 µs for the host, which is not stream 7's idle time)
PLUGIN = STOCK + [(135, 145, 3), (170, 173, 2), (8, 12, 4, 13), (45, 52, 4, 13)]
PLUGIN_SYNCS = [("cudaStreamSynchronize", 190, 30)]


@pytest.fixture
def traces(tmp_path):
    d = tmp_path / "trace_x"
    write(d, "stock.trace.json.gz", chrome_trace(STOCK, STOCK_SYNCS))
    write(d, "plugin.trace.json.gz", chrome_trace(PLUGIN, PLUGIN_SYNCS))
    write(d, "stock.beam.trace.json.gz", chrome_trace(STOCK[:2]))
    return d


def test_each_models_gpu_time_by_cause_against_the_timeline_and_the_baseline(traces, tmp_path, capsys):
    result = trace_report.main([str(traces), "--models", "stock,plugin", "--json", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(json.dumps(result))
    stock, plugin = result["models"]["stock"], result["models"]["plugin"]
    ms = pytest.approx
    assert stock == {
        "kernels": 4,
        "stream": 7,
        "stream_kernels": 4,
        "span_ms": ms(0.120),  # 10 to 130 µs
        "idle_ms": ms(0.076),  # 20 + 10 + 46
        "idle_pct": ms(100 * 76 / 120, abs=0.01),
        "host_wait_ms": ms(0.020),
        "kernel_wait_ms": ms(0.010),
        "other_idle_ms": ms(0.046),
        "compute_ms": ms(0.044),  # 20 + 10 + 4 + 10
        "shorter_than_launch": 1,
        "syncs": 2,
        "sync_ms": ms(0.042),
    }
    assert plugin == {
        **stock,
        "kernels": 8,
        "stream_kernels": 6,
        "span_ms": ms(0.165),  # 10 to 175 µs
        "idle_ms": ms(0.116),  # stock's 76 + 15 + 25
        "idle_pct": ms(100 * 116 / 165, abs=0.01),
        "host_wait_ms": ms(0.060),
        "compute_ms": ms(0.049),
        "shorter_than_launch": 5,
        "syncs": 1,
        "sync_ms": ms(0.030),
    }
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith(
        "| model | kernels | kernel span ms | GPU idle ms | idle % | main stream kernels | its host wait ms"
    )
    assert table[2].startswith("| stock | 4 | 0.120 | 0.076 |")
    assert table[3].startswith("| plugin | 8 (+4) | 0.165 (+0.045) | 0.116 (+0.040) |")


def test_the_beam_searches_and_every_trace_by_default(traces, capsys):
    assert list(trace_report.main([str(traces), "--beam"])["models"]) == ["stock"]
    assert trace_report.main([str(traces), "--beam"])["models"]["stock"]["kernels"] == 2
    assert list(trace_report.main([str(traces)])["models"]) == ["plugin", "stock"]  # by name


def test_a_trace_without_kernels_is_refused_in_one_line(tmp_path):
    """A CPU run's trace, as the benchmarks' --trace writes it (benchmarks/tracing.py)."""
    import sys

    import torch

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import tracing

    tracing.trace_call(lambda: torch.ones(4).mul(2), str(tmp_path / "cpu"), "stock", cuda=False)
    with pytest.raises(SystemExit, match=r"stock.trace.json.gz has no CUDA kernels \(a CPU trace\)"):
        trace_report.main([str(tmp_path / "cpu")])


DAMAGED = {  # test id: (the file's bytes, what the line says); mtime=0: the same bytes in every run
    "not gzip": (b"garbage", "is not a gzipped Chrome trace (BadGzipFile"),
    "empty": (b"", "is not a gzipped Chrome trace (JSONDecodeError"),  # no gzip member: no JSON
    "cut JSON": (
        gzip.compress(b'{"traceEvents": [', mtime=0),
        "is not a gzipped Chrome trace (JSONDecodeError",
    ),
    "a list": (gzip.compress(b"[1, 2]", mtime=0), "is not a gzipped Chrome trace (AttributeError"),
    "no events": (
        gzip.compress(b'{"events": []}', mtime=0),
        "is not a Chrome trace: it has no traceEvents list",
    ),
}


@pytest.mark.parametrize("content, message", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_trace_is_refused_in_one_line_before_any_analysis(traces, content, message):
    (traces / "damaged.trace.json.gz").write_bytes(content)
    with pytest.raises(
        SystemExit, match=r"^trace_report: error: \S+/damaged.trace.json.gz " + re.escape(message)
    ):
        trace_report.main([str(traces), "--models", "stock,damaged"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["{d}/nope"], "DIR {d}/nope: no such directory"),
        (["{d}/empty"], "DIR {d}/empty has no <model>.trace.json.gz"),
        (
            ["{d}/trace_x", "--models", "stock,other"],
            "--models must name distinct traces of {d}/trace_x: plugin, stock",
        ),
        (["{d}/trace_x", "--models", "stock,stock"], "--models must name distinct traces"),
        (["{d}/trace_x", "--json", "{d}/trace_x/stock.trace.json.gz"], "exists; refusing to overwrite it"),
        (
            ["{d}/trace_x", "--consecutive-kernel-delay", "0"],
            "--consecutive-kernel-delay must be > 0 µs, got 0",
        ),
    ],
)
def test_bad_options_are_refused_before_any_analysis(traces, tmp_path, args, message, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        trace_report.parse_args([a.format(d=tmp_path) for a in args])
    assert message.format(d=tmp_path) in capsys.readouterr().err
