"""Moving measurements between hosts (JSONL, merged by environment) and exporting decisions as
per-device JSON in the spirit of vLLM's tuned-config files."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from dispatcher import store as reader
from dispatcher.device import folded, named
from dispatcher.policy import max_relerr
from dispatcher.problem import AttentionProblem
from dispatcher.registry import load_registry
from dispatcher.rules import DEFAULT_RULE, rule_pick
from dispatcher.schema import MEASUREMENTS
from dispatcher.table import problem_of, rank

from .store import STATUSES, Store, balance_key, now, timings

IMPORTED = {k: v for k, v in MEASUREMENTS.items() if k not in ("id", "env_id")}     # the store's own ids stay
# the row's identity and the problem's fields that have no default
REQUIRED = ("problem_key", "pipeline", "status", "kernel", "kernel_q_dtype", "kernel_out_dtype") + tuple(
    f.name for f in dataclasses.fields(AttentionProblem)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
ENV_FIELDS = ("device_name", "device_kind", "compute_capability", "sm_count", "memory_bytes", "driver",
              "cuda", "torch", "flashinfer", "python", "timing_mode")


def _require_device(db, device: str | None, held: list[str]) -> str | None:
    """The recorded name of the device an export names (in any case and spacing), or None (all of them)."""
    matches = [n for n in held if device and folded(n) == folded(device)]
    if device and not matches:
        raise ValueError(f"device {device!r} is not in {reader.default_path(db)}; it holds: "
                         f"{', '.join(held) or 'no environments yet'} (export names a recorded device)")
    return matches[0] if matches else None


def export_jsonl(db, out: Path, device: str | None = None) -> int:
    """One measurement per line, each carrying its environment; returns the number written."""
    conn = reader.open_readonly(db)
    if conn is None:
        raise ValueError(f"{reader.default_path(db)} does not exist; nothing to export")
    n = 0
    try:
        envs = {e["id"]: e for e in reader.environments(conn)}
        device = _require_device(db, device, sorted({e["device_name"] for e in envs.values()}))
        with open(out, "w") as f:
            for r in conn.execute("select * from measurements order by env_id, id"):
                env = envs[r["env_id"]]
                if device and env["device_name"] != device:
                    continue
                row = {k: r[k] for k in r.keys() if k not in ("id", "env_id")}
                item = {"environment": {k: env[k] for k in ENV_FIELDS + ("key", "created_at")}, "measurement": row}
                f.write(json.dumps(item) + "\n")
                n += 1
    finally:
        conn.close()
    return n


def import_jsonl(db, src: Path, keep_newer: bool = True, as_grid: bool = False) -> dict:
    """Merge measurements into `db`: environments matched by key; a (problem, pipeline) already present is
    replaced by the imported one unless the stored one is newer (`keep_newer`); a measurement always replaces a
    screened row (one an adaptive search left out) and is never replaced by one, whatever the dates. Every line
    is checked before anything is written, and the rows and recomputed winners go in one transaction: a bad
    file changes nothing. `as_grid` stores rows measured alone (`tuner sweep --problems`) as grid points, inputs
    of the estimators: how a measured tile set joins a table (benchmarks/score_added.sh scores both readings)."""
    items = read_export(src)
    if as_grid:
        items = [(env, {**m, "alone": 0}) for env, m in items]
    s = Store(db)
    touched: dict[int, set] = {}
    kept = new = over_screened = 0
    try:
        with s.transaction():
            for env, m in items:
                env_id = _environment(s, env)
                stored = s.db.execute("select created_at, status from measurements where env_id = ? and "
                                      "problem_key = ? and pipeline = ?",
                                      [env_id, m["problem_key"], m["pipeline"]]).fetchone()
                why = _kept(stored, m, keep_newer)
                if why:
                    kept += why == "newer"
                    over_screened += why == "measured"
                    continue
                s.db["measurements"].insert({**m, "env_id": env_id}, replace=True)
                new += stored is None
                touched.setdefault(env_id, set()).add(m["problem_key"])
            for env_id, keys in touched.items():
                _rewin(s, env_id, keys)
        return {"environments": len(touched), "problems": sum(len(k) for k in touched.values()),
                "kept_newer": kept, "kept_measured": over_screened, "new": new,
                "replaced": len(items) - kept - over_screened - new}
    finally:
        s.close()


def _kept(stored: tuple | None, m: dict, keep_newer: bool) -> str | None:
    """Why the stored row (created_at, status) stays instead of the imported `m`: "measured" (the file's row
    was screened out, the stored one measured), "newer" (keep_newer), or None: import it. A measurement
    always replaces a screened row, whatever the dates."""
    if stored is None:
        return None
    if m["status"] == "screened" and stored[1] != "screened":
        return "measured"
    if stored[1] == "screened" and m["status"] != "screened":
        return None
    newer = keep_newer and stored[0] and m.get("created_at") and stored[0] > m["created_at"]
    return "newer" if newer else None


def read_export(src: Path) -> list[tuple[dict, dict]]:
    """(environment, measurement) per line of a `tuner export --format jsonl` file, each checked: a line
    that is not one raises ValueError naming the line, the field and the fix."""
    hint = "export one with `tuner export --format jsonl`"
    try:
        lines = Path(src).read_text().split("\n")        # not splitlines: U+2028 may sit inside a string
    except UnicodeDecodeError:
        raise ValueError(f"{src} is not a JSONL export (not text: a database? {hint})") from None
    except OSError as e:
        raise ValueError(f"{src} cannot be read ({e.strerror}); {hint}") from None
    items = []
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                items.append(_checked(json.loads(line)))
            except json.JSONDecodeError as e:
                if n == last and line.lstrip().startswith("{") and e.pos > 0:    # a cut copy ends mid-line
                    raise ValueError(f"line {n} of {src}, its last, is cut short ({e.msg}, character {e.pos}): "
                                     f"the file looks truncated; export it again (nothing was imported)") from None
                raise ValueError(f"line {n} of {src} is not a Switchyard measurement ({e}); {hint}") from None
            except ValueError as e:
                raise ValueError(f"line {n} of {src} is not a Switchyard measurement ({e}); {hint}") from None
    return items


def _checked(item: Any) -> tuple[dict, dict]:
    if not isinstance(item, dict) or not isinstance(item.get("environment"), dict) \
            or not isinstance(item.get("measurement"), dict):
        raise ValueError("it needs an 'environment' and a 'measurement' object")
    env, m = item["environment"], dict(item["measurement"])
    for f in ("key", "device_name"):
        if not isinstance(env.get(f), str) or not env[f]:
            raise ValueError(f"environment.{f} is missing or not text")
    for f in sorted(set(m) - set(IMPORTED)):
        raise ValueError(f"measurement.{f} is not a measurement field")
    for f, kind in IMPORTED.items():
        v = m.get(f)
        if v is not None and not _of_kind(v, kind):
            raise ValueError(f"measurement.{f} is {v!r}, not {kind.__name__}")
    for f in REQUIRED:
        if m.get(f) is None or m[f] == "":
            raise ValueError(f"measurement.{f} is missing")
    if m["status"] not in STATUSES:
        raise ValueError(f"measurement.status is {m['status']!r}, not one of {', '.join(STATUSES)}")
    for f in ("median_us", "relerr") if m["status"] == "ok" else ():      # what a ranking reads
        if m.get(f) is None or m[f] < 0:
            raise ValueError(f"measurement.{f} of an ok row is {m.get(f)!r}; it needs a number >= 0")
    try:
        if not isinstance(json.loads(m.get("tactic") or "{}"), dict):
            raise ValueError
    except ValueError:
        raise ValueError(f"measurement.tactic {m['tactic']!r} is not a JSON object of knob settings") from None
    try:
        problem = problem_of(m)
    except (TypeError, ValueError) as e:
        raise ValueError(f"its problem fields do not make a problem: {e}") from None
    if m.get("lengths") and m.get("kv_balance") is None:        # exported before schema 5
        m["problem_key"], m["kv_balance"] = balance_key(m)
    elif problem.key() != m["problem_key"]:
        raise ValueError(f"measurement.problem_key {m['problem_key']!r} is not its fields' key {problem.key()!r}")
    return env, m


def _of_kind(v: Any, kind: type) -> bool:
    if kind is str:
        return isinstance(v, str)
    if isinstance(v, bool):                      # JSON true/false: stored as 0/1 only where the column is a flag
        return kind is int
    return isinstance(v, int) if kind is int else isinstance(v, (int, float))


def _environment(s: Store, env: dict) -> int:
    row = s.db.execute("select id from environments where key = ?", [env["key"]]).fetchone()
    if row:
        return row[0]
    # a file exported before environments carried created_at: when it first came into this database
    return s.db["environments"].insert({**{k: env.get(k) for k in ENV_FIELDS}, "key": env["key"],
                                         "created_at": env.get("created_at") or now()}).last_pk


def _rewin(s: Store, env_id: int, keys: set) -> None:
    env = s.db["environments"].get(env_id)
    cc = tuple(int(x) for x in env["compute_capability"].split(".")) if env["compute_capability"] else None
    dev, reg = named(env["device_name"], cc, env["sm_count"] or 0), load_registry()
    for key in keys:
        r = s.db.execute("select * from measurements where env_id = ? and problem_key = ? limit 1", [env_id, key])
        cols = [d[0] for d in r.description]
        row = dict(zip(cols, r.fetchone()))
        p = problem_of(row)
        pick, _ = rule_pick(DEFAULT_RULE, p, dev, reg)
        ranking = rank(timings(s, env_id, p), max_relerr(p.kv_dtype, p.out_dtype), pick.id if pick else None)
        s.record(env_id, p, [], ranking)


KEYS = ("batch_size,q_len,kv_len,max_kv_len,kv_balance of each measured cell (kv_len the mean KV length per "
        "request, max_kv_len the longest; kv_balance 0: the sweep's canonical layout, docs/mixed-batches.md)")


def export_vllm_json(db, out_dir: Path, device: str | None = None) -> list[Path]:
    """Per device: {config: {"batch_size,q_len,kv_len,max_kv_len,kv_balance": decision}} for every measured
    cell, mixed-length batches apart from the uniform batch of their mean."""
    from dispatcher import load
    conn = reader.open_readonly(db)
    if conn is None:
        raise ValueError(f"{reader.default_path(db)} does not exist; nothing to export")
    try:
        names = sorted({e["device_name"] for e in reader.environments(conn)})
    finally:
        conn.close()
    device = _require_device(db, device, names)          # `--device cpu` used to write an empty cpu.json
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in [device] if device else names:
        d = load(db, name, borrow=False)      # the measured cells of this device alone
        configs: dict[str, dict] = {}
        for b in sorted(d.table.by_cell, key=lambda b: b.key()):
            dec = d.choose(b)
            cfg = (f"phase={b.phase},num_qo_heads={b.num_qo_heads},num_kv_heads={b.num_kv_heads},"
                   f"head_dim={b.head_dim},page_size={b.page_size},q_dtype={b.q_dtype},"
                   f"kv_dtype={b.kv_dtype},out_dtype={b.out_dtype}")
            configs.setdefault(cfg, {})[f"{b.batch_size},{b.q_len},{b.kv_len},{b.max_kv_len},{b.kv_balance:g}"] = {
                "kernel": dec.kernel, "pipeline": dec.pipeline, "use_trtllm": dec.kernel.startswith("trtllm"),
                "fused_out_quant": dec.fused_out_quant, "q_quant": dec.q_quant, "expected_us": dec.expected_us}
        path = out_dir / (re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + ".json")
        path.write_text(json.dumps({"device": name, "keys": KEYS,
                                    "configs": configs}, indent=1))
        written.append(path)
    return written
