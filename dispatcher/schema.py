"""The store's schema, shared by the reader (dispatcher) and the writer (tuner)."""
from __future__ import annotations

SCHEMA_VERSION = 6      # 2: the misses table; 3: the tactic_trials table; 4: max_kv_len, lengths; 5: kv_balance;
                        # 6: alone

PROBLEM_COLUMNS = {
    "phase": str, "num_qo_heads": int, "num_kv_heads": int, "head_dim": int, "page_size": int,
    "batch_size": int, "kv_len": int, "max_kv_len": int, "q_len": int, "q_dtype": str, "kv_dtype": str,
    "out_dtype": str, "causal": int, "window_left": int, "has_sinks": int, "kv_balance": float,
}
# added in version 4: a batch's longest request (kv_len is the mean); the requests' KV lengths where a
# measured batch was not laid out by the canonical distribution (tuner/lengths.py), as JSON
ADDED_IN_4 = {"measurements": {"max_kv_len": "integer", "lengths": "text"}, "winners": {"max_kv_len": "integer"},
              "misses": {"max_kv_len": "integer"}}
# added in version 5: a mixed batch's kv_balance (dispatcher/balance.py; 0 or NULL: the canonical layout's).
# The migration gives a row measured at its own lengths their balance, and the problem key that carries it
ADDED_IN_5 = {"measurements": {"kv_balance": "real"}, "winners": {"kv_balance": "real"},
              "misses": {"kv_balance": "real"}}
# added in version 6: 1 where a shape was measured as itself (a problem list, the daemon's misses), not as a point of
# a sweep's grid: the model reads it as a correction near it (PredictorConfig.alone_k); NULL before, a grid's
ADDED_IN_6 = {"measurements": {"alone": "integer"}}
SQL_TYPES = {str: "text", int: "integer", float: "real"}

ENVIRONMENTS = {
    "id": int, "key": str, "device_name": str, "device_kind": str, "compute_capability": str,
    "sm_count": int, "memory_bytes": int, "driver": str, "cuda": str, "torch": str, "flashinfer": str,
    "python": str, "timing_mode": str, "created_at": str,
}

PIPELINE_COLUMNS = {
    "pipeline": str, "kernel": str, "kernel_q_dtype": str, "kernel_out_dtype": str,
    "q_quant": int, "out_quant": int, "tactic": str,
}

MEASUREMENTS = {
    "id": int, "env_id": int, "problem_key": str, **PROBLEM_COLUMNS, **PIPELINE_COLUMNS,
    "status": str, "median_us": float, "min_us": float, "max_us": float, "spread_us": float,
    "reps": int, "relerr": float, "max_relerr": float, "error": str, "lengths": str, "alone": int, "created_at": str,
}

WINNERS = {
    "env_id": int, "problem_key": str, **PROBLEM_COLUMNS, **PIPELINE_COLUMNS,
    "median_us": float, "spread_us": float, "relerr": float, "runner_up": str, "runner_up_us": float,
    "margin": float, "tie": int, "candidates": int, "created_at": str,
}


MISSES_DDL = ("create table if not exists misses (device_name text, timing_mode text, problem_key text, "
              + ", ".join(f"{k} {SQL_TYPES[t]}" for k, t in PROBLEM_COLUMNS.items())
              + ", source text, count integer, last_seen text, primary key (device_name, timing_mode, problem_key))")

# every Optuna trial of a tactic search (tuner/tactics.py), repeated settings included
TRIALS_DDL = ("create table if not exists tactic_trials (env_id integer, problem_key text, base text, "
              "number integer, params text, pipeline text, value_us real, status text, remeasured integer, "
              "created_at text, primary key (env_id, problem_key, base, number))")


class StoreError(RuntimeError):
    """A database that cannot be used; the message says why and what to do."""
