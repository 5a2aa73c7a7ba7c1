"""The JIT prebuild's ninja log hand-over, with the real ninja: after one parallel build of several
modules, loading a module (ninja in its own directory) must find nothing to rebuild."""
import shutil
import subprocess

import pytest

from tuner.jit import share_ninja_log

pytestmark = pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed")


def _module(root, name):
    """A module laid out as FlashInfer writes it: absolute output paths, its own build.ninja."""
    d = root / name
    d.mkdir(parents=True)
    src = root.parent / f"{name}.src"
    src.write_text(name)
    (d / "build.ninja").write_text(
        "rule copy\n  command = cp $in $out\n"
        f"build {d}/{name}.o: copy {src}\nbuild {d}/{name}.so: copy {d}/{name}.o\ndefault {d}/{name}.so\n")
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


def test_shared_log_makes_each_module_load_a_no_op(built):
    root, mods = built
    assert share_ninja_log(root, mods) == 4
    for d in mods:
        assert "no work to do" in _ninja(d, d / "build.ninja", "-n")
    # a module's entries only: the other module's outputs are not in its log
    assert "xqa_decode" not in (mods[0] / ".ninja_log").read_text()


def test_missing_root_log_copies_nothing(tmp_path):
    assert share_ninja_log(tmp_path, [tmp_path / "m"]) == 0


def test_sharing_twice_copies_nothing_new(built):
    root, mods = built
    share_ninja_log(root, mods)
    assert share_ninja_log(root, mods) == 0
