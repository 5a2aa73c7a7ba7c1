"""tuner decide and tuner show: decisions and what a database holds."""
from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from dispatcher import AttentionProblem, Dispatcher
from dispatcher.explain import Explanation
from dispatcher.problem import DEFAULTS, LIMITS

from .. import library
from ..problem_files import iter_problems
from .app import Db, DecideDb, Dev, app, dispatcher_for, err, friendly, given_flags, out, require_db


@app.command()
@friendly
def decide(
    ctx: typer.Context,
    phase: Annotated[Optional[str], typer.Option(help="decode | prefill")] = None,
    num_qo_heads: Annotated[Optional[int], typer.Option()] = None,
    num_kv_heads: Annotated[Optional[int], typer.Option()] = None,
    head_dim: Annotated[int, typer.Option()] = DEFAULTS["head_dim"],
    page_size: Annotated[int, typer.Option()] = DEFAULTS["page_size"],
    batch_size: Annotated[Optional[int], typer.Option()] = None,
    kv_len: Annotated[Optional[int], typer.Option(help="KV tokens per request (the mean in a mixed batch)")] = None,
    max_kv_len: Annotated[Optional[int], typer.Option(help="the longest request's KV tokens (default: kv-len)")] = None,
    kv_balance: Annotated[Optional[float], typer.Option(help="a mixed batch's sum(min(length, mean)) / (batch x "
                                                             "mean) (default 0: one long request, the others "
                                                             "alike)")] = None,
    seq_lens: Annotated[Optional[str], typer.Option(help="every request's KV tokens, comma-separated: the batch "
                                                         "size, mean, longest and balance come from them")] = None,
    q_len: Annotated[Optional[int], typer.Option(help="new tokens per request (default 1 in decode; required "
                                                      "in prefill)")] = None,
    q_dtype: Annotated[str, typer.Option(help="the query's dtype as the model gives it [default: fp16 where "
                                              "--kv-dtype or --out-dtype is, else bf16]", show_default=False)
                       ] = DEFAULTS["q_dtype"],
    kv_dtype: Annotated[str, typer.Option()] = DEFAULTS["kv_dtype"],
    out_dtype: Annotated[str, typer.Option()] = DEFAULTS["out_dtype"],
    causal: Annotated[bool, typer.Option()] = DEFAULTS["causal"],
    window_left: Annotated[int, typer.Option()] = DEFAULTS["window_left"],
    has_sinks: Annotated[bool, typer.Option()] = DEFAULTS["has_sinks"],
    input: Annotated[Optional[str], typer.Option("--input", help="JSON lines of problems ('-': stdin); one decision "
                                                                 "per line out")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the decision as JSON")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="also every pipeline it was chosen from, with the time "
                                                            "compared, and why each other kernel cannot serve it")
                       ] = False,
    device: Dev = None,
    db: DecideDb = None,
):
    """Which pipeline to run for one problem (or each line of --input).

    Example: tuner decide --device "NVIDIA H200" --phase decode --num-qo-heads 40 --num-kv-heads 8 --batch-size 12 --kv-len 1900
    """  # noqa: E501 (one line, so that it pastes)
    if input is not None and seq_lens is not None:
        raise ValueError("--seq-lens and --input are two ways to give problems; give one")
    if input is not None:
        given = given_flags(ctx, lambda name: name not in ("input", "as_json", "explain", "device", "db"))
        if given:
            raise ValueError(f"{given[0]} describes one problem; with --input each line gives its own "
                             "fields: put it in the lines, or leave --input out")
        d = None                      # loaded at the first problem: a bad line is reported as such
        for prob in iter_problems(input):
            d = d or dispatcher_for(db, device)
            print(json.dumps(decision_json(d, prob, explain)), flush=True)
        if d is None:
            dispatcher_for(db, device)
            err.print(f"--input {input} held no problems: nothing decided", highlight=False)
        return
    sized = {} if seq_lens is not None else {"--batch-size": batch_size, "--kv-len": kv_len}
    missing = [f for f, v in {"--phase": phase, "--num-qo-heads": num_qo_heads, "--num-kv-heads": num_kv_heads,
                              **sized}.items() if v is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --input FILE)")
    if phase == "prefill" and q_len is None:        # one new token per request is rarely what was meant
        raise ValueError("--q-len is required for prefill (the new tokens per request); pass --q-len 1 for one "
                         "new token")
    fields = dict(phase=phase, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                  page_size=page_size, q_len=q_len, q_dtype=q_dtype, kv_dtype=kv_dtype, out_dtype=out_dtype,
                  causal=causal, window_left=window_left, has_sinks=has_sinks)
    if seq_lens is not None:
        given = given_flags(ctx, {"batch_size", "kv_len", "max_kv_len", "kv_balance"}.__contains__)
        if given:
            raise ValueError(f"{given[0]} comes from --seq-lens; leave it out")
        prob = AttentionProblem.from_seq_lens(seq_lens=parse_lengths(seq_lens), **fields)
    else:
        prob = AttentionProblem(**fields, batch_size=batch_size, kv_len=kv_len, max_kv_len=max_kv_len or 0,
                                kv_balance=kv_balance or 0.0)
    d = dispatcher_for(db, device)
    if as_json:
        print(json.dumps(decision_json(d, prob, explain)))
        return
    dec = d.choose(prob)
    us = f"{dec.expected_us:.1f} us" if dec.expected_us is not None else "no estimate"
    out.print(f"[bold]{escape(dec.pipeline)}[/] on {escape(dec.device)} ({dec.source}, {us})", highlight=False)
    query = f"quantized to {dec.q_dtype}" if dec.q_quant else f"{dec.q_dtype}, as given"
    output = "written as FP8 by the kernel" if dec.fused_out_quant else (
        "quantized to FP8 after it" if dec.out_quant else "as the kernel writes it")
    out.print(f"  query: {query}   output: {output}", highlight=False)
    out.print(f"  why: {escape(dec.reason)}", highlight=False, soft_wrap=True)
    if explain:
        print_explanation(d.explain(prob))


def decision_json(d: Dispatcher, prob: AttentionProblem, explain: bool) -> dict[str, Any]:
    if not explain:
        return d.choose(prob).to_dict()
    e = d.explain(prob)
    return {**e.decision.to_dict(), "explain": e.to_dict()}


def print_explanation(e: Explanation) -> None:
    t = RichTable(title=escape(f"pipelines considered ({e.decision.source}: {e.timings})"), title_justify="left")
    for col in ("pipeline", "us", "vs chosen", "relerr", "note"):
        t.add_column(col, justify="right" if col in ("us", "vs chosen", "relerr") else "left")
    chosen = e.decision.expected_us
    for c in e.considered:
        note = "; ".join(filter(None, (c.note, f"{e.rule}'s pick" if c.rule_pick else "")))
        t.add_row(escape(c.pipeline), f"{c.us:.1f}" if c.us is not None else "-",
                  f"{c.us / chosen:.2f}x" if c.us is not None and chosen else "-",
                  f"{c.relerr:.3g}" if c.relerr is not None else "-", escape(note))
    out.print(t)
    for kernel, reasons in e.ineligible.items():
        out.print(f"  {escape(kernel)} cannot serve it: {escape('; '.join(reasons))}", highlight=False,
                  soft_wrap=True)


def parse_lengths(text: str) -> list[int]:
    """--seq-lens: every request's KV tokens, each a whole number from 1 to the largest KV length."""
    lo, hi = LIMITS["kv_len"]
    lens = []
    for i, part in enumerate(text.split(","), 1):
        token = part.strip()
        if not (token.isascii() and token.isdigit() and lo <= int(token) <= hi):
            shown = repr(token[:20]) if token else "empty"
            raise ValueError(f"--seq-lens: length {i} is {shown}, not a whole number from {lo} to {hi}; give every "
                             "request's KV tokens, comma-separated (e.g. --seq-lens 64,64,2524)")
        lens.append(int(token))
    return lens


@app.command()
@friendly
def show(db: Db = None, as_json: Annotated[bool, typer.Option("--json")] = False):
    """Environments, counts of measurements and winners, and coverage of a database."""
    require_db(db)
    info = library.overview(db)
    if as_json:
        print(json.dumps(info, default=str))
        return
    out.print(f"{escape(info['db'])}: {info['measurements']} measurements, {info['winners']} winners", soft_wrap=True)
    for e in info["environments"]:
        extra = "".join(f", {n} {what}" for key, what in (("mixed_batches", "mixed-length batches"),
                                                          ("shapes_measured_alone", "shapes measured alone "
                                                                                    "(--problems, misses)"))
                        if (n := e.get(key)))
        out.print(f"[bold]#{e['id']} {escape(e['device_name'])}[/] ({e['timing_mode']}, torch {e['torch']}, "
                  f"flashinfer {e['flashinfer'] or '-'}): {_counts(e['measurements'])} measurements, "
                  f"{e['winners']} winners{extra}", highlight=False, soft_wrap=True)
        for c in e["coverage"]:
            out.print(f"   {c['phase']:7s} {c['num_qo_heads']}/{c['num_kv_heads']} page {c['page_size']} "
                      f"{c['kv_dtype']}/{c['out_dtype']}: {c['buckets']} buckets, batch "
                      f"{c['min_batch']}-{c['max_batch']}, "
                      f"kv {c['min_kv']}-{c['max_kv']}", highlight=False, soft_wrap=True)


def _counts(by_status: dict[str, int]) -> str:
    """A status count as a user reads it: "20341 ok, 1197 failed", ok first."""
    order = sorted(by_status, key=lambda k: (k != "ok", k))
    return ", ".join(f"{by_status[k]} {k}" for k in order) or "0"
