"""tuner report --out: PNG heatmaps and an HTML page from a real swept database."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")


def test_report_writes_heatmaps_the_page_embeds(swept_db, tmp_path):
    db = swept_db[0]
    out = tmp_path / "rep"
    r = subprocess.run([sys.executable, "-m", "tuner", "report", "--db", str(db), "--device", "cpu", "--out", str(out)],
                       capture_output=True, text=True, check=True)
    page = out / "index.html"
    assert r.stdout.strip() == str(page)
    text = page.read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs and sorted(re.findall(r'src="([^"]+)"', text)) == pngs
    for p in pngs:
        data = (out / p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert any(p.endswith("-winner.png") for p in pngs) and any(p.endswith("-speedup.png") for p in pngs)
    assert "geometric mean" in text and "torch-sdpa" not in text   # short names in pictures, numbers in text


def test_report_on_an_empty_database_says_so(tmp_path):
    from tuner.store import Store
    Store(tmp_path / "e.db").close()
    r = subprocess.run([sys.executable, "-m", "tuner", "report", "--db", str(tmp_path / "e.db"), "--device", "cpu",
                        "--out", str(tmp_path / "rep")], capture_output=True, text=True)
    assert r.returncode != 0 and "no ok measurements" in r.stderr
