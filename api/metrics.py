"""Prometheus text exposition, by hand (no client library): counters, a latency histogram, gauges."""
from __future__ import annotations

import threading
from collections import Counter

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Metrics:
    def __init__(self) -> None:
        self.decisions: Counter[str] = Counter()
        # route -> ([count per bucket..., +Inf], [sum of seconds, count])
        self._lat: dict[str, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, route: str, seconds: float) -> None:
        with self._lock:
            b, s = self._lat.setdefault(route, ([0] * (len(BUCKETS_S) + 1), [0.0, 0]))
            for i, le in enumerate(BUCKETS_S):
                if seconds <= le:
                    b[i] += 1
            b[-1] += 1
            s[0] += seconds
            s[1] += 1

    def render(self, gauges: dict[str, tuple[str, list[tuple[dict[str, str], float]]]]) -> str:
        out = ["# HELP switchyard_decisions_total Decisions answered, by source.",
               "# TYPE switchyard_decisions_total counter"]
        for src in ("measured", "learned", "nearest", "rule"):
            out.append(f'switchyard_decisions_total{{source="{src}"}} {self.decisions.get(src, 0)}')
        out += ["# HELP switchyard_request_seconds Request latency.", "# TYPE switchyard_request_seconds histogram"]
        with self._lock:
            for route, (b, (total, n)) in sorted(self._lat.items()):
                for le, c in zip(BUCKETS_S, b):
                    out.append(f'switchyard_request_seconds_bucket{{route="{route}",le="{le}"}} {c}')
                out.append(f'switchyard_request_seconds_bucket{{route="{route}",le="+Inf"}} {b[-1]}')
                out.append(f'switchyard_request_seconds_sum{{route="{route}"}} {total}')
                out.append(f'switchyard_request_seconds_count{{route="{route}"}} {n}')
        for name, (help_, samples) in gauges.items():
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
            for labels, v in samples:
                lab = ",".join(f'{k}="{val}"' for k, val in labels.items())
                out.append(f"{name}{{{lab}}} {v}" if lab else f"{name} {v}")
        return "\n".join(out) + "\n"
