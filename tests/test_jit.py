"""The JIT prebuild's ninja log hand-over, with the real ninja: after one parallel build of several
modules, loading a module (ninja in its own directory) must find nothing to rebuild."""
import os
import shutil
import subprocess
import time

import pytest

from tuner.runners.jit import share_ninja_log

pytestmark = pytest.mark.skipif(shutil.which("ninja") is None or shutil.which("cc") is None,
                                reason="ninja or a C compiler is not installed")


def _module(root, name):
    """A module laid out as FlashInfer writes it: absolute output paths, its own build.ninja, and
    FlashInfer's compile rule (header dependencies kept by ninja in .ninja_deps: deps = gcc)."""
    d = root / name
    d.mkdir(parents=True)
    src, hdr = root.parent / f"{name}.c", root.parent / f"{name}.h"
    hdr.write_text(f"#define VALUE_{name} 1\n")
    src.write_text(f'#include "{hdr}"\nint {name}(void) {{ return VALUE_{name}; }}\n')
    (d / "build.ninja").write_text(
        "rule compile\n  command = cc -MMD -MF $out.d -fPIC -c $in -o $out\n  depfile = $out.d\n  deps = gcc\n"
        "rule link\n  command = cc -shared $in -o $out\n"
        f"build {d}/{name}.o: compile {src}\nbuild {d}/{name}.so: link {d}/{name}.o\ndefault {d}/{name}.so\n")
    return d


def _ninja(workdir, ninja_file, *extra):
    out = subprocess.run(["ninja", "-C", str(workdir), "-f", str(ninja_file), *extra],
                         capture_output=True, text=True, check=True)
    return out.stdout


@pytest.fixture
def built(tmp_path):
    root = tmp_path / "cached_ops"
    mods = [_module(root, n) for n in ("fa3_prefill", "xqa_decode")]
    (root / "all.ninja").write_text("".join(f"subninja {d}/build.ninja\n" for d in mods))
    _ninja(root, root / "all.ninja")                 # the parallel build: one log, in the root
    return root, mods


def test_without_the_log_a_module_load_rebuilds_everything(built):
    root, mods = built
    assert "no work to do" not in _ninja(mods[0], mods[0] / "build.ninja", "-n")


def test_the_log_alone_is_not_enough_ninja_also_needs_the_header_deps(built):
    # what the H200 showed (2026-12-03b call 3): with only the log copied, every load still
    # recompiled its module, ninja finding no recorded header dependencies for its objects
    root, mods = built
    d = mods[0]
    (d / ".ninja_log").write_text((root / ".ninja_log").read_text())
    out = subprocess.run(["ninja", "-C", str(d), "-f", str(d / "build.ninja"), "-n", "-d", "explain"],
                         capture_output=True, text=True, check=True)
    assert "no work to do" not in out.stdout and "deps for" in out.stderr + out.stdout


def test_shared_log_makes_each_module_load_a_no_op(built):
    root, mods = built
    assert share_ninja_log(root, mods) == 4
    for d in mods:
        assert "no work to do" in _ninja(d, d / "build.ninja", "-n")
    # a module's entries only: the other module's outputs are not in its log
    assert "xqa_decode" not in (mods[0] / ".ninja_log").read_text()
    # and the handed-over dependencies are real: an edited header rebuilds its module, only that one
    hdr = root.parent / "fa3_prefill.h"
    hdr.write_text(hdr.read_text() + "/* edited */\n")
    os.utime(hdr, (time.time() + 5, time.time() + 5))
    assert "no work to do" not in _ninja(mods[0], mods[0] / "build.ninja", "-n")
    assert "no work to do" in _ninja(mods[1], mods[1] / "build.ninja", "-n")


def test_missing_root_log_copies_nothing(tmp_path):
    assert share_ninja_log(tmp_path, [tmp_path / "m"]) == 0


def test_sharing_twice_copies_nothing_new(built):
    root, mods = built
    share_ninja_log(root, mods)
    assert share_ninja_log(root, mods) == 0


def test_a_long_build_reports_its_progress(tmp_path):
    # the cold H200 build is ten silent minutes otherwise; here ninja compiles two modules while
    # the reporter polls, and the count it reports is read from ninja's own log
    from types import SimpleNamespace

    from tuner.runners.jit import build_progress
    root = tmp_path / "cached_ops"
    mods = [_module(root, n) for n in ("fa3_prefill", "xqa_decode")]
    slow = root.parent / "slow.c"
    slow.write_text("int slow(void) { return 0; }\n")
    # a third, slow edge keeps the build running past a few polls
    (root / "all.ninja").write_text("".join(f"subninja {d}/build.ninja\n" for d in mods)
                                    + f"rule wait\n  command = sleep 0.6 && touch $out\nbuild {root}/late: wait\n")
    specs = [SimpleNamespace(build_dir=d, sources=[f"{d.name}.c"]) for d in mods]
    said = []
    with build_progress(root, specs, said.append, every_s=0.1):
        _ninja(root, root / "all.ninja")
        time.sleep(0.3)
    assert said, "no progress was reported during the build"
    assert said[-1].startswith("4/4 files compiled (100%)")
    assert all(m.split("/")[1].startswith("4 ") for m in said)


def _reinstall(path, module):
    """What pip does to a header it reinstalls: the same bytes, a fresh mtime (the outputs of the
    module including it are first dated back, so that "newer" holds at any file-time granularity)."""
    past = time.time() - 10
    for f in [*module.glob("*.o"), *module.glob("*.so")]:
        os.utime(f, (past, past))
    path.write_text(path.read_text())


def test_a_reinstalled_header_makes_its_module_out_of_date_and_one_parallel_run_fixes_it(built, monkeypatch):
    # the H200 (2026-12-04b): setup.sh reinstalled tvm-ffi every call, and every module then
    # compiled again at its first load, one at a time, inside the sweep's measuring
    import tuner.runners.jit as jit
    root, mods = built
    share_ninja_log(root, mods)
    assert jit.out_of_date(mods) == []
    _reinstall(root.parent / "fa3_prefill.h", mods[0])
    assert jit.out_of_date(mods) == [mods[0]]
    monkeypatch.setattr(jit, "_jit_root", lambda: root)
    said = []
    jit.rebuild([mods[0]], said.append)
    assert jit.out_of_date(mods) == []
    for d in mods:                                   # and a module load afterwards compiles nothing
        assert "no work to do" in _ninja(d, d / "build.ninja", "-n")


def test_the_verified_shortcut_first_rebuilds_what_went_stale_and_says_so(built, monkeypatch, tmp_path):
    import json

    import tuner.runners.jit as jit
    root, mods = built
    share_ninja_log(root, mods)
    manifest = tmp_path / "manifest.json"
    monkeypatch.setattr(jit, "manifest_path", lambda: manifest)
    monkeypatch.setattr(jit, "_jit_root", lambda: root)
    manifest.write_text(json.dumps(["config-a"]))    # an older manifest: configurations only
    assert jit._verified() == {"config-a"} and jit.refresh_verified(print) == 0
    jit._remember(modules={str(d) for d in mods})
    jit._remember({"config-b"})
    assert jit._verified() == {"config-a", "config-b"}
    said = []
    assert jit.refresh_verified(said.append) == 0 and said == []      # all up to date: nothing said
    _reinstall(root.parent / "xqa_decode.h", mods[1])
    assert jit.refresh_verified(said.append) == 1
    assert "1 modules built earlier are out of date" in said[0]
    assert jit.out_of_date(mods) == [] and jit.refresh_verified(said.append) == 0
