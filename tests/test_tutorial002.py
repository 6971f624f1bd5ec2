"""Tutorial 002's worked example, reproduced: every number the tutorial prints (div_term, k·div_term,
the encodings for n = 1000, 100 and 10000, its embedding and the two embedding + encoding sums)
equals the preset's figure and table to the tutorial's printed precision. The printed values are
read from the tutorial itself (../shared/seeds/002_*.txt), not copied here."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import model
from explorer.views import stages
from explorer.views import tutorial002 as tut
from model.arch.positional import sinusoidal

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT.parent / "shared" / "seeds").glob("002_*.txt")) or sorted(
    Path("/work/shared/seeds").glob("002_*.txt"))
pytestmark = pytest.mark.skipif(not SEEDS, reason="the tutorial (shared/seeds/002_*.txt) is not on this machine")


def cell(n: int) -> str:
    """The text of notebook cell In [n] (its code and its printed output)."""
    text = SEEDS[0].read_text(encoding="utf-8")
    start = text.index(f"In [{n}]:")
    nxt = re.search(r"\nIn \[\d+\]:", text[start + 5:])
    return text[start: start + 5 + nxt.start()] if nxt else text[start:]


def printed(n: int, after: str = "") -> tuple[np.ndarray, int]:
    """The numbers of the first tensor or array a cell printed (after the marker ``after``), and
    their printed decimals."""
    out = cell(n)
    out = out[out.index(after) + len(after):] if after else out
    out = out[re.search(r"tensor\(|array\(", out).start():]
    depth, end = 0, None
    for i, ch in enumerate(out):  # up to the bracket that closes the first one
        depth += (ch == "[") - (ch == "]")
        if ch == "]" and depth == 0:
            end = i
            break
    nums = re.findall(r"-?\d+\.\d*", out[:end])
    return np.array([float(x) for x in nums]), max(len(x.split(".")[1]) for x in nums)


def same_to_printed(ours: np.ndarray, shown: np.ndarray, decimals: int) -> bool:
    ours = np.round(np.asarray(ours, dtype=np.float64).ravel(), decimals) + 0.0  # -0.00 is 0.00
    return ours.shape == shown.shape and np.array_equal(ours, shown + 0.0)


def table(df: pd.DataFrame, name: str, n: float | None = None, sentence: int | None = None) -> np.ndarray:
    rows = df[df.iloc[:, 0] == name]
    if n is not None:
        rows = rows[rows["n"] == n]
    if sentence is not None:
        rows = rows[rows.iloc[:, 2] == sentence]
    return rows[[c for c in df.columns if str(c).startswith("dim ")]].to_numpy(float)


@pytest.fixture(scope="module")
def preset():
    m = model.load("seed", random=True, d_model=32, n_heads=2)
    run = stages.run_data(m, ["hello world"])
    sel = stages.Selection("seed", 0, 0, 0, "encoder.self_attn")
    return m, run, sel


def test_every_printed_table_is_reproduced_to_its_precision(preset):
    m, run, sel = preset
    fig, df = stages.stage_figure("pe_tutorial", run, m.info, sel)
    checks = {
        "In [10] PE n = 1000 (nested loop, 8 decimals)": (printed(10), table(df, "PE", 1000.0)),
        "In [20] div_term n = 100": (printed(20, "div_term"), table(df, "div_term", 100.0)[:, :2]),
        "In [26] k·div_term n = 100": (printed(26, "k*div_term"), table(df, "k*div_term", 100.0)[:, :2]),
        "In [28] PE n = 100": (printed(28, "print(pe)"), table(df, "PE", 100.0)),
        "In [29] PE n = 100 (gen_pe)": (printed(29, "gen_pe(max_length, d_model, n)  \n"), table(df, "PE", 100.0)),
        "In [34] PE n = 10000 (the class)": (printed(34, "state_dict()"), table(df, "PE", 10000.0)),
        "In [33] the embedding": (printed(33), np.concatenate([table(df, "embedding", sentence=s) for s in range(3)])),
        "In [17] embedding + PE, n = 1000": (printed(17, "# encodings[:6]"),
                                             np.concatenate([table(df, "embedding+PE", 1000.0, s) for s in range(3)])),
        "In [36] embedding + PE, n = 10000": (printed(36, "pe(embeddings)"),
                                              np.concatenate([table(df, "embedding+PE", 10000.0, s) for s in range(3)])),
    }
    bad = []
    for what, ((shown, decimals), ours) in checks.items():
        assert shown.size >= 2, what
        if not same_to_printed(ours, shown, decimals):
            bad.append(f"{what}: max |diff| {np.abs(np.round(ours.ravel(), decimals) - shown).max():.3g}")
    assert bad == []
    # the figure shows the same numbers (two decimals in the cells), and the encodings are the model's
    z = {t.name: np.asarray(t.z, dtype=float) for t in fig.data if t.type == "heatmap"}
    assert same_to_printed(z["PE, n = 100"], printed(28, "print(pe)")[0], 2)
    assert same_to_printed(z["PE, n = 10000"], printed(34, "state_dict()")[0], 2)
    assert same_to_printed(z["embedding + PE, n = 10000"], printed(36, "pe(embeddings)")[0][:24], 2)
    assert all(np.allclose(tut.encoding(n), sinusoidal(10, 4, n).numpy(), atol=1e-6) for n in tut.BASES)
    assert "[1.00, 0.10]" in fig.layout.title.subtitle.text and "[1.00, 0.01]" in fig.layout.title.subtitle.text


def test_the_check_can_fail():
    shown, decimals = printed(36, "pe(embeddings)")
    plain = np.round(tut.embeddings().reshape(-1, 4)[:0], 2)  # nothing: a shape mismatch fails
    assert not same_to_printed(plain, shown, decimals)
    printed_embedding = printed(33)[0].reshape(3, 6, 4)  # the printed (rounded) embedding alone
    with_rounded = printed_embedding + tut.encoding(10000.0)[:6]
    assert not same_to_printed(with_rounded, shown, decimals)  # off by 0.01 in 9 of 72 cells


def test_the_preset_sets_the_positional_figures_to_the_example(preset):
    m, run, sel = preset
    opts = dict(pe_base=100.0, pe_d_model=4, pe_positions=10, pe_dims=[0, 1, 2, 3])
    _, curves = stages.stage_figure("pe_curves", run, m.info, sel, **opts)
    assert same_to_printed(curves.to_numpy(), printed(28, "print(pe)")[0], 2)
    fig, df = stages.stage_figure("pe_compare", run, m.info, sel, pe_bases=(100.0, 10000.0), pe_d_model=4,
                                  pe_positions=10)
    assert same_to_printed(df[[f"n=100 dim {d}" for d in range(4)]].to_numpy(), printed(28, "print(pe)")[0], 2)
    assert same_to_printed(df[[f"n=10000 dim {d}" for d in range(4)]].to_numpy(), printed(34, "state_dict()")[0], 2)
    assert fig.layout.title.text.endswith("n = 100 · n = 10000")


def test_the_exporter_preset_writes_the_tutorials_numbers(tmp_path):
    out = subprocess.run([sys.executable, "-m", "explorer.export", "--model", "seed", "--text", "hello", "--stages",
                          "pe_tutorial,pe_curves", "--format", "csv", "--preset", "tutorial002", "--out",
                          str(tmp_path), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (curves,) = tmp_path.glob("*pe_curves.csv")
    (example,) = tmp_path.glob("*pe_tutorial.csv")
    assert same_to_printed(pd.read_csv(curves, index_col=0).to_numpy(), printed(28, "print(pe)")[0], 2)
    df = pd.read_csv(example, index_col=0)
    assert same_to_printed(table(df, "embedding+PE", 1000.0, 0), printed(17, "# encodings[:6]")[0][:24], 2)
