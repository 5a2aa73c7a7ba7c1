"""Moving measurements between hosts (JSONL, merged by environment) and exporting decisions as
per-device JSON in the spirit of vLLM's tuned-config files."""
from __future__ import annotations

import json
import re
from pathlib import Path

from dispatcher import store as reader
from dispatcher.device import named
from dispatcher.policy import max_relerr
from dispatcher.registry import load_registry
from dispatcher.rules import DEFAULT_RULE, rule_pick
from dispatcher.table import problem_of, rank

from .store import Store, balance_key, timings

ENV_FIELDS = ("device_name", "device_kind", "compute_capability", "sm_count", "memory_bytes", "driver",
              "cuda", "torch", "flashinfer", "python", "timing_mode")


def export_jsonl(db, out: Path, device: str | None = None) -> int:
    """One measurement per line, each carrying its environment; returns the number written."""
    conn = reader.open_readonly(db)
    if conn is None:
        raise ValueError(f"{reader.default_path(db)} does not exist; nothing to export")
    n = 0
    try:
        envs = {e["id"]: e for e in reader.environments(conn)}
        with open(out, "w") as f:
            for r in conn.execute("select * from measurements order by env_id, id"):
                env = envs[r["env_id"]]
                if device and env["device_name"] != device:
                    continue
                row = {k: r[k] for k in r.keys() if k not in ("id", "env_id")}
                item = {"environment": {k: env[k] for k in ENV_FIELDS + ("key",)}, "measurement": row}
                f.write(json.dumps(item) + "\n")
                n += 1
    finally:
        conn.close()
    return n


def import_jsonl(db, src: Path) -> dict:
    """Merge measurements into `db`: environments matched by key, a (problem, pipeline) already
    present replaced by the imported one; winners recomputed for the problems touched."""
    s = Store(db)
    touched: dict[int, set] = {}
    try:
        with open(src) as f, s.transaction():
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                    env, m = item["environment"], item["measurement"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise ValueError(f"line {n} of {src} is not a Switchyard measurement ({e}); "
                                     "export one with `tuner export --format jsonl`") from None
                env_id = _environment(s, env)
                if m.get("lengths") and m.get("kv_balance") is None:        # exported before schema 5
                    m["problem_key"], m["kv_balance"] = balance_key(m)
                s.db["measurements"].insert({**m, "env_id": env_id}, replace=True)
                touched.setdefault(env_id, set()).add(m["problem_key"])
        for env_id, keys in touched.items():
            _rewin(s, env_id, keys)
        return {"environments": len(touched), "problems": sum(len(k) for k in touched.values())}
    finally:
        s.close()


def _environment(s: Store, env: dict) -> int:
    row = s.db.execute("select id from environments where key = ?", [env["key"]]).fetchone()
    if row:
        return row[0]
    return s.db["environments"].insert({**{k: env.get(k) for k in ENV_FIELDS}, "key": env["key"],
                                         "created_at": env.get("created_at")}).last_pk


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


def export_vllm_json(db, out_dir: Path, device: str | None = None) -> list[Path]:
    """Per device: {config: {"batch_size,q_len,kv_len": decision}} for every measured bucket."""
    from dispatcher import load
    conn = reader.open_readonly(db)
    if conn is None:
        raise ValueError(f"{reader.default_path(db)} does not exist; nothing to export")
    try:
        names = sorted({e["device_name"] for e in reader.environments(conn)})
    finally:
        conn.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in [device] if device else names:
        d = load(db, name)
        configs: dict[str, dict] = {}
        for b in sorted(d.table.by_cell, key=lambda b: b.key()):
            dec = d.choose(b)
            cfg = (f"phase={b.phase},num_qo_heads={b.num_qo_heads},num_kv_heads={b.num_kv_heads},"
                   f"head_dim={b.head_dim},page_size={b.page_size},q_dtype={b.q_dtype},"
                   f"kv_dtype={b.kv_dtype},out_dtype={b.out_dtype}")
            configs.setdefault(cfg, {})[f"{b.batch_size},{b.q_len},{b.kv_len}"] = {
                "kernel": dec.kernel, "pipeline": dec.pipeline, "use_trtllm": dec.kernel.startswith("trtllm"),
                "fused_out_quant": dec.fused_out_quant, "q_quant": dec.q_quant, "expected_us": dec.expected_us}
        path = out_dir / (re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + ".json")
        path.write_text(json.dumps({"device": name, "keys": "batch_size,q_len,kv_len (bucket upper bounds)",
                                    "configs": configs}, indent=1))
        written.append(path)
    return written
