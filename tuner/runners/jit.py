"""Build every FlashInfer JIT module a sweep needs, up front and in parallel, before any timing.

Which modules a pipeline needs is FlashInfer's business, so we ask it: each distinct pipeline
configuration runs once on a tiny problem with module loading intercepted; every module not yet
compiled is collected instead of built, then all are built in one ninja run
(flashinfer.jit.build_jit_specs). Repeat until a pass finds nothing new.

That one ninja run keeps its log in the JIT root, while loading a module later runs ninja in the
module's own directory: finding no log entry there ("command line not found in log"), ninja would
compile the whole module again, one module at a time (minutes per sweep on the H200). Its compile
rules also record header dependencies (deps = gcc) in .ninja_deps, in the same directory: without
a record, ninja rebuilds the object ("deps for ... are missing"). So after the build the log entries
and the dependency records are handed to each module's directory (share_ninja_log).

A module compiled earlier can still be stale in ninja's eyes (a header rewritten since, with a fresh
mtime): a compiled module is checked with ninja's dry run before it is trusted, in the discovery and
in the shortcut that skips it (the manifest lists the modules too), and stale ones are rebuilt
together, up front, like missing ones (out_of_date, rebuild)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline
from dispatcher.problem import AttentionProblem

from ..inputs import make_inputs
from . import runnable

JIT_KERNELS = {"trtllm-xqa", "trtllm-fmha-v2", "fa2", "fa2-tc", "fa3", "cudnn", "trtllm-gen"}


class _Needs(Exception):
    def __init__(self, spec):
        self.spec = spec


def tiny(p: AttentionProblem) -> AttentionProblem:
    q = 1 if p.phase == "decode" else 16
    return p.with_sizes(batch_size=1, q_len=q, kv_len=max(4 * p.page_size, 64))      # a batch of one is uniform


def compile_key(p: AttentionProblem, pipe: Pipeline) -> tuple:
    return (pipe.id, *tiny(p).family())


def representatives(plan: list[tuple[AttentionProblem, list[Pipeline]]]) -> dict[tuple, tuple]:
    reps = {}
    for p, pipes in plan:
        for pipe in pipes:
            if pipe.kernel in JIT_KERNELS:
                reps.setdefault(compile_key(p, pipe), (tiny(p), pipe))
    return reps


def _discover(reps, device: DeviceInfo) -> tuple[dict[str, object], int]:
    from flashinfer.jit import core
    original = core.JitSpec.build_and_load
    found: dict[str, object] = {}
    seen: dict[str, bool] = {}       # compiled module dir -> up to date

    def intercept(spec):
        if getattr(spec, "is_aot", False):
            return original(spec)           # loaded as it is: no ninja runs for it
        if spec.is_compiled:
            d = str(spec.build_dir)
            if d not in seen:               # several configurations share a module: check it once
                # built by an earlier, interrupted prebuild: its log entries may still be in the root only
                share_ninja_log(_jit_root(), [spec.build_dir])
                seen[d] = not out_of_date([spec.build_dir])
            if seen[d]:
                return original(spec)
        raise _Needs(spec)                  # built with the others, in one parallel run

    core.JitSpec.build_and_load = intercept
    ran = 0
    try:
        for p, pipe in reps.values():
            runner, why = runnable(pipe.kernel, device)
            if why:
                continue
            try:
                runner.build(pipe, make_inputs(p, device.torch_device))()
                ran += 1
            except _Needs as n:
                found.setdefault(n.spec.name, n.spec)
            except Exception:  # noqa: BLE001 (a pipeline that fails will be recorded by the sweep)
                pass
    finally:
        core.JitSpec.build_and_load = original
    _remember(modules=set(seen) | {str(sp.build_dir) for sp in found.values()})
    return found, ran


def _jit_root() -> Path:
    from flashinfer.jit import env
    return Path(env.FLASHINFER_JIT_DIR)


def share_ninja_log(root: Path, build_dirs: list[Path]) -> int:
    """Append the entries of `root`/.ninja_log for outputs under each build dir to that dir's own
    .ninja_log (outputs are absolute paths in FlashInfer's ninja files, so the entries match), and
    give it the root's .ninja_deps (binary, records by path: other modules' records are harmless).
    Entries already there are not copied again. Returns how many log entries were copied."""
    try:
        header, *entries = (root / ".ninja_log").read_text().splitlines()
    except (OSError, ValueError):
        return 0
    copied = 0
    for d in build_dirs:
        _share_deps(root / ".ninja_deps", Path(d) / ".ninja_deps")
        prefix = str(Path(d).resolve()) + "/"
        log = Path(d) / ".ninja_log"
        have = set(log.read_text().splitlines()) if log.exists() else set()
        mine = [e for e in _entries_under(entries, (prefix,)) if e not in have]
        if not mine:
            continue
        head = "" if have else header + "\n"
        with open(log, "a") as f:
            f.write(head + "\n".join(mine) + "\n")
        copied += len(mine)
    return copied


def compiled_outputs(root: Path, build_dirs: list[Path], since: int = 0) -> int:
    """How many ninja log entries (past the first `since` lines) are outputs under the build dirs:
    ninja appends one as each object or library finishes."""
    try:
        entries = (root / ".ninja_log").read_text().splitlines()[1 + since:]
    except OSError:
        return 0
    return len(_entries_under(entries, tuple(str(Path(d).resolve()) + "/" for d in build_dirs)))


def _entries_under(entries: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """ninja log lines (start, end, mtime, output, hash) whose output lies under a prefix."""
    return [e for e in entries if len(f := e.split("\t")) >= 5 and f[3].startswith(prefixes)]


@contextmanager
def build_progress(root: Path, specs: list, say: Callable[[str], None], every_s: float = 30.0):
    """Report, every `every_s` while the block runs, how many of the specs' files ninja has
    compiled: the build is minutes long and silent otherwise."""
    try:
        since = max(0, len((root / ".ninja_log").read_text().splitlines()) - 1)
    except OSError:
        since = 0
    dirs = [s.build_dir for s in specs]
    total = sum(len(getattr(s, "sources", ())) + 1 for s in specs)  # objects + each module's link
    stop, t0 = threading.Event(), time.time()

    def watch():
        while not stop.wait(every_s):
            done = min(compiled_outputs(root, dirs, since), total)
            say(f"{done}/{total} files compiled ({100 * done // max(total, 1)}%), {time.time() - t0:.0f} s")

    thread = threading.Thread(target=watch, name="jit-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _share_deps(src: Path, dst: Path) -> None:
    """The root's records replace the module's unless the module's are newer (a build of its own
    since, which the root's would not know)."""
    try:
        if not dst.exists() or src.stat().st_mtime > dst.stat().st_mtime:
            shutil.copy2(src, dst)
    except OSError:
        pass            # no records to hand over: the module's load rebuilds, slowly but correctly


def out_of_date(build_dirs) -> list[Path]:
    """The module build dirs where ninja would compile something. Its dry run (-n) reads the same
    log, dependency records and file times a module load would, and changes nothing. A header
    rewritten with a fresh mtime (pip reinstalling tvm-ffi does) leaves every object that includes
    it stale: each module would then be compiled again at its first load, one at a time, inside
    the sweep's measuring (minutes of it: benchmarks/results/h200-2026-12-04b/)."""
    stale = []
    for d in map(Path, build_dirs):
        if not (d / "build.ninja").exists():
            continue                       # gone (a cleared cache): discovery finds it again
        try:
            r = subprocess.run(["ninja", "-n", "-C", str(d), "-f", str(d / "build.ninja")],
                               capture_output=True, text=True)
        except OSError:
            return []                      # no ninja to ask: loads behave as they always did
        if r.returncode != 0 or "no work to do" not in r.stdout:
            stale.append(d)
    return stale


def rebuild(build_dirs: list[Path], say: Callable[[str], None]) -> None:
    """Bring these modules up to date in one parallel ninja run (as FlashInfer's own parallel
    build does: a root file of subninja lines; its outputs are absolute paths), with progress,
    then hand the log entries to each module's directory (share_ninja_log)."""
    root = _jit_root()
    top = root / "switchyard-rebuild.ninja"
    top.write_text("".join(f"subninja {Path(d) / 'build.ninja'}\n" for d in build_dirs))
    jobs = os.environ.get("MAX_JOBS", "")
    parts = [SimpleNamespace(build_dir=Path(d), sources=_objects(Path(d))) for d in build_dirs]
    with build_progress(root, parts, lambda m: say(f"JIT rebuild: {m}")):
        subprocess.run(["ninja", "-C", str(root), "-f", str(top), *(["-j", jobs] if jobs.isdigit() else [])],
                       capture_output=True, text=True, check=True)
    share_ninja_log(root, list(build_dirs))


def _objects(d: Path) -> list[str]:
    """The compile outputs a module's build.ninja declares (for the progress count)."""
    return [ln for ln in (d / "build.ninja").read_text().splitlines() if ln.startswith("build ") and ".o:" in ln]


def manifest_path() -> Path:
    """Beside FlashInfer's JIT cache, so that clearing the cache clears it too."""
    import flashinfer
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE", Path.home()))
    return base / ".cache" / f"switchyard-jit-{flashinfer.__version__}.json"


def _manifest() -> dict:
    """{"configs": [...], "modules": [build dirs]}; an older manifest was the list of configs alone."""
    try:
        m = json.loads(manifest_path().read_text())
    except (OSError, ValueError):
        return {"configs": [], "modules": []}
    return {"configs": m, "modules": []} if isinstance(m, list) else m


def _verified() -> set[str]:
    return set(_manifest()["configs"])


def _write_manifest(configs: set[str], modules: set[str]) -> None:
    path = manifest_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"configs": sorted(configs), "modules": sorted(modules)}))
    tmp.replace(path)


def _remember(configs: set[str] = frozenset(), modules: set[str] = frozenset()) -> None:
    """Add verified configurations and compiled module dirs to the manifest."""
    if configs or modules:
        m = _manifest()
        _write_manifest(set(configs) | set(m["configs"]), set(modules) | set(m["modules"]))


def refresh_verified(say: Callable[[str], None]) -> int:
    """Before trusting the manifest: rebuild, in parallel, the modules ninja finds out of date.
    Returns how many were rebuilt."""
    stale = out_of_date(_manifest()["modules"])
    if stale:
        say(f"JIT: {len(stale)} modules built earlier are out of date (a source or header changed since): "
            "rebuilding them together before any measuring")
        try:
            rebuild(stale, say)
        except (subprocess.CalledProcessError, OSError) as e:
            say(f"JIT: the rebuild failed ({str(e)[:200]}); the modules rebuild one by one as they load")
    return len(stale)


def prebuild(plan, device: DeviceInfo, say: Callable[[str], None] = print, max_passes: int = 4) -> dict:
    """Compile what the plan needs. Returns {"modules": n, "seconds": s}.

    Configurations found loadable before (the manifest) are not run again: checking them all costs
    a minute or two per sweep call even when nothing needs building."""
    reps = representatives(plan)
    if device.kind != "cuda" or not reps:
        return {"modules": 0, "seconds": 0.0}
    from flashinfer.jit import build_jit_specs
    known = _verified()
    todo = {k: v for k, v in reps.items() if repr(k) not in known}
    if not todo:
        t0 = time.time()
        n = refresh_verified(say)
        say(f"JIT: all {len(reps)} pipeline configurations were verified earlier ({manifest_path()})")
        return {"modules": n, "seconds": time.time() - t0}
    reps = todo
    t0, built = time.time(), 0
    for n in range(max_passes):
        # said before, not after: a module that rebuilds on load makes this step minutes long
        say(f"JIT: loading {len(reps)} pipeline configurations to find the modules they need")
        specs, ran = _discover(reps, device)
        if not specs:
            say(f"JIT: all {len(reps)} pipeline configurations load ({built} modules built, {time.time() - t0:.0f} s)")
            _remember({repr(k) for k in reps})
            break
        names = sorted(specs)
        say(f"JIT pass {n + 1}: building {len(names)} modules in parallel: {', '.join(x[:60] for x in names[:6])}"
            + (" ..." if len(names) > 6 else ""))
        t = time.time()
        try:
            progress = lambda m, n=n: say(f"JIT pass {n + 1}: {m}")
            with build_progress(_jit_root(), [specs[k] for k in names], progress):
                build_jit_specs([specs[k] for k in names], verbose=False)
            share_ninja_log(_jit_root(), [specs[k].build_dir for k in names])
        except Exception as e:  # noqa: BLE001 (a module that cannot build fails its pipelines later)
            say(f"JIT: parallel build failed ({type(e).__name__}: {str(e)[:300]}); building one by one")
            for k in names:
                try:
                    specs[k].build_and_load()
                except Exception:  # noqa: BLE001
                    say(f"JIT: {k} does not build")
        built += len(names)
        say(f"JIT pass {n + 1}: {time.time() - t:.0f} s")
    return {"modules": built, "seconds": time.time() - t0}
