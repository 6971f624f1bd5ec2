"""Long inputs (issue 34): ``python -m bench --only long`` — the long view against a bare forward pass of
the same text, at 1,024, 2,048 and 4,096 tokens on Gemma 3 and SmolLM2 (``--long-models``,
``--long-lengths``), measured side by side in one run.

    bare       the input-side stack's forward pass (``m.decode``), no hook, no readout
    long       a new text to the drawn view: ``model.analysis.long.long_run`` (the same forward pass,
               keeping q and k of every layer) + the selected head's grid + the whole-pattern figure and
               the zoom, serialised as the page sends them (``fastpath.to_json``)

Figures and floors (issue 34 items 2, 3):
  time ratio     long / bare, each the median of ``repeats`` alternating runs in this process    <= 2
  memory ratio   peak RSS of a process that loads the model and runs ``long`` once / of one that runs
                 ``bare`` once (VmHWM, each a fresh child process: malloc keeps its high-water mark)
                 <= 1.5; the increments above the loaded model are printed beside it
  payload        JSON bytes of the whole-pattern figure                                          <= 3 MB
The summaries (every layer and head, blocks of queries) are timed on their own, beside.

On the page, the view's new text also costs the page's own run of the box's first sentence (at most 64
tokens, through the readout): not counted here.

The bare pass leaves the readout out (Gemma 3's 262,144-entry output over 4,096 positions is 4.3 GB of
logits): the comparison is with the cheapest forward pass there is. Not run by the test suite (a smoke
check only: tests/test_long.py does not call it).
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("gemma3", "smollm2")
LENGTHS = (1024, 2048, 4096)
TIME_FLOOR = 2.0
MEMORY_FLOOR = 1.5
PAYLOAD_FLOOR = 3 * 2**20


def long_text(n_chars: int = 60_000) -> str:
    """English and Korean prose from the repository (README, the docs, the lessons' words), repeated to
    ``n_chars`` characters: long enough for 4,096 tokens of either tokenizer."""
    parts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    ko = ROOT / "explorer" / "words" / "ko.toml"
    parts.append("\n".join(line.split(" = ", 1)[1].strip('"') for line in ko.read_text(encoding="utf-8").splitlines()
                           if " = " in line))
    text = "\n".join(parts)
    return (text * (1 + n_chars // len(text)))[:n_chars]


def _ids(m, text: str, tokens: int):
    from model.analysis import long as ml
    from model.runtime.limits import cut_to_limit

    enc = m.tokenizer.encode([text])[0]
    text, _ = cut_to_limit(text, enc, m.tokenizer, tokens)
    encs, _ = m._tokens([text], keep_last=m.info.kind != "decoder")
    ids, real = m._batch(encs)
    return text, ids, real, ml


def bare(m, ids, real) -> None:
    import torch

    with torch.inference_mode():
        if m.info.kind == "decoder":
            m.decode(ids, real)
        else:
            m.encode(ids, real)


def drawn(m, text: str, tokens: int, layer: int = 0, head: int = 0) -> dict:
    """A new text to the drawn view (what the page does for a new text, summaries aside)."""
    from explorer import fastpath, i18n
    from explorer.views import long as lv
    from model.analysis import long as ml

    lr = ml.long_run(m, text, tokens)
    grid, block = ml.block_grid(lr, layer, head, lv.GRID_CELLS)
    rule = lr.rules[layer]
    labels = i18n.fig_labels("en")
    fig = lv.overview_figure(grid, block, lr.tokens, window=rule.window, causal=rule.causal,
                             zoom=(lr.T - lv.ZOOM, lr.T - lv.ZOOM, lv.ZOOM), labels=labels, title="long")
    w, ok = ml.region(lr, layer, head, lr.T - lv.ZOOM, lr.T, lr.T - lv.ZOOM, lr.T)
    zoom, _ = lv.zoom_figure(w, ok, lr.T - lv.ZOOM, lr.T - lv.ZOOM, lr.tokens, labels=labels)
    sent = [fastpath.to_json(fastpath.plain_dict(f)) for f in (fig, zoom)]
    return {"lr": lr, "T": lr.T, "kept_bytes": lr.nbytes, "payload_bytes": len(sent[0].encode()),
            "zoom_bytes": len(sent[1].encode()), "block": block}


def child(name: str, tokens: int, phase: str) -> dict:
    """In a fresh process: load, RSS, one ``phase`` ("bare" or "long"), peak RSS (ru_maxrss)."""
    import model

    m = model.load(name)
    text, ids, real, _ = _ids(m, long_text(), tokens)

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    loaded = rss()
    t = time.perf_counter()
    if phase == "bare":
        bare(m, ids, real)
    else:
        drawn(m, text, tokens)
    seconds = time.perf_counter() - t
    return {"loaded_rss": loaded, "peak_rss": peak_rss(), "seconds": seconds}


def peak_rss() -> int:
    """This process's peak resident memory in bytes: VmHWM, the high-water mark of its own address space.
    Not ru_maxrss: Linux carries the parent's high-water mark over fork and exec into the child's
    ru_maxrss, so a child of this bench (holding a model and a long run) reported the parent's size
    (both children of one row the same number, ratio 1.00)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux


def _in_child(name: str, tokens: int, phase: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.long", "--child", name, str(tokens), phase], cwd=ROOT,
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(m, name: str, tokens: int, repeats: int = 3, memory: bool = True) -> dict:
    from model.analysis import long as ml

    text, ids, real, _ = _ids(m, long_text(), tokens)
    times = {"bare": [], "long": []}
    made = None
    for _ in range(repeats):  # alternating, so that a busy moment of the machine lands on both
        t = time.perf_counter()
        bare(m, ids, real)
        times["bare"].append(time.perf_counter() - t)
        t = time.perf_counter()
        made = drawn(m, text, tokens)
        times["long"].append(time.perf_counter() - t)
    t = time.perf_counter()
    ml.summaries(made["lr"])
    summaries_s = time.perf_counter() - t
    b, lg = statistics.median(times["bare"]), statistics.median(times["long"])
    r = {"model": name, "tokens": made["T"], "bare_s": b, "long_s": lg, "time_ratio": lg / b,
         "summaries_s": summaries_s, "payload_bytes": made["payload_bytes"], "zoom_bytes": made["zoom_bytes"],
         "kept_bytes": made["kept_bytes"], "grid_block": made["block"], "repeats": repeats}
    if memory:
        mb, ml_ = _in_child(name, tokens, "bare"), _in_child(name, tokens, "long")
        r.update(bare_peak_rss=mb["peak_rss"], long_peak_rss=ml_["peak_rss"], loaded_rss=mb["loaded_rss"],
                 memory_ratio=ml_["peak_rss"] / mb["peak_rss"],
                 increment_ratio=(ml_["peak_rss"] - ml_["loaded_rss"]) / max(1, mb["peak_rss"] - mb["loaded_rss"]))
    return r


def run(models=MODELS, lengths=LENGTHS, repeats: int = 3, memory: bool = True, log=print) -> list[dict]:
    import model

    out = []
    for name in models:
        m = model.load(name)
        for n in lengths:
            if n > m.info.max_len:
                continue
            log(f"long: {name} at {n} tokens")
            out.append(measure(m, name, n, repeats, memory))
    return out


def targets(rows: list[dict]) -> dict:
    t = {}
    for r in rows:
        key = f"long.{r['model']}.{r['tokens']}"
        t[f"{key}.time_ratio"] = {"value": r["time_ratio"], "target": f"<= {TIME_FLOOR}", "ok": r["time_ratio"] <= TIME_FLOOR}
        t[f"{key}.payload_bytes"] = {"value": r["payload_bytes"], "target": f"<= {PAYLOAD_FLOOR}",
                                     "ok": r["payload_bytes"] <= PAYLOAD_FLOOR}
        if "memory_ratio" in r:
            t[f"{key}.memory_ratio"] = {"value": r["memory_ratio"], "target": f"<= {MEMORY_FLOOR}",
                                        "ok": r["memory_ratio"] <= MEMORY_FLOOR}
    return t


def format_table(rows: list[dict]) -> str:
    lines = ["", "long inputs (issue 34): a new text to the drawn view / the bare forward pass, side by side",
             f"  {'model':<8} {'tokens':>6} {'bare s':>7} {'long s':>7} {'ratio':>6} {'summ. s':>7} "
             f"{'payload':>9} {'kept':>8} {'peak MB':>15} {'ratio':>6} {'above load':>10}"]
    for r in rows:
        mem = (f"{r['bare_peak_rss'] / 2**20:>6.0f}/{r['long_peak_rss'] / 2**20:<6.0f} {r['memory_ratio']:>6.2f} "
               f"{r['increment_ratio']:>10.2f}") if "memory_ratio" in r else f"{'—':>15} {'—':>6} {'—':>10}"
        lines.append(f"  {r['model']:<8} {r['tokens']:>6} {r['bare_s']:>7.2f} {r['long_s']:>7.2f} {r['time_ratio']:>6.2f} "
                     f"{r['summaries_s']:>7.2f} {r['payload_bytes'] / 2**20:>7.2f}MB {r['kept_bytes'] / 2**20:>6.0f}MB {mem}")
    lines.append(f"  floors: time ratio <= {TIME_FLOOR}, peak memory ratio <= {MEMORY_FLOOR}, payload <= "
                 f"{PAYLOAD_FLOOR / 2**20:.0f} MB")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
