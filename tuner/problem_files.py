"""JSON-lines files of problems (`tuner sweep --problems`, `tuner decide --input`, `tuner import`),
read line by line with a bound on each line, so that no file (a binary one, /dev/zero, a line of
100,000 '[') can take more than a line's worth of memory or raise anything but a one-line error."""
from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from dispatcher.problem import AttentionProblem, ProblemError

MAX_LINE_BYTES = 64 * 1024


@contextmanager
def _opened(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise ValueError(f"{path} cannot be read ({e.strerror}); check the path") from None
    with f:
        yield f


def read_jsonl(path: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line of `path` ('-': stdin)."""
    with _opened(path) as f:
        n = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise ValueError(f"line {n} of {path} is longer than {MAX_LINE_BYTES} bytes; write one JSON "
                                 "object per line")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"line {n} of {path} is not UTF-8 text; write one JSON object per line") from None
            if not text.strip():
                continue
            try:
                yield n, json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {n} of {path} is not JSON: {e.msg}") from None
            except RecursionError:
                raise ValueError(f"line {n} of {path} is nested too deeply to be a problem") from None


def problem_at(n: int, path: str, data: Any) -> AttentionProblem:
    """The problem on line `n`, or a ProblemError naming the line and the field."""
    try:
        p = AttentionProblem.from_dict(data)
    except ProblemError as e:
        raise ProblemError(e.field, f"line {n} of {path}: {e}") from None
    return p


def iter_problems(path: str) -> Iterator[AttentionProblem]:
    for n, data in read_jsonl(path):
        yield problem_at(n, path, data)


def read_problems(path: str) -> list[AttentionProblem]:
    out = list(iter_problems(path))
    if not out:
        raise ValueError(f"{path} holds no problems; write one JSON problem per line")
    return out


def write_problems(path: str | Path, problems: Iterable[AttentionProblem]) -> int:
    """`problems` as the JSON lines read_problems reads (its folder made); how many were written."""
    lines = [json.dumps(p.to_dict()) + "\n" for p in problems]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(lines))
    return len(lines)
