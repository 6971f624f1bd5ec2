"""Peak memory per offered model and class size, read from the measurements in bench/results/,
and the replica memory limit that deploy/compose.yaml and deploy/k8s/deployment.yaml set from them.

    python deploy/memory.py        # the table (Markdown) and the limit it asks for
    python deploy/memory.py --all  # every run's source and figure in the table

A replica is one `streamlit run` process in its own container, so only measurements of one
process count: the workshop bench's rows with ``replicas == 0`` (`python -m bench --only
workshop`, field ``rss_max_mb``: the highest RSS sampled during the run) and the soak's
(``soak.rss_max_mb``, one process, seed model). Rows of several replicas behind nginx hold the
sum of their processes (bench/__main__.py, ``_workshop_run``), not one process's peak: left out.
Rows labelled as older code run for comparison (``code`` starting with "baseline" or "before")
are left out; every other row of the app's own code counts, the older ones too (they are the
higher ones: the conservative choice). Nothing here is estimated: a model without a measurement
at a class size says so.

tests/test_deploy.py checks that both deployments' memory limits are at least ``HEADROOM`` times
the peak of every model in ``SERVED`` at its per-core class size, and that every workshop/soak
result file is either read or listed in ``SKIPPED`` with its reason.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# learners one replica (one core) is planned for: README, "A class on one machine, or on
# several", the capacity table (seed: 60 per core on the current page; SmolLM2 and Gemma 3: 10)
PER_CORE = {"seed": 60, "smollm2": 10, "gemma3": 10}
# the models a shipped deployment may serve (the image's shipped seed models, and the real models
# `--build-arg FETCH="minilm smollm2 gemma3"` adds); seed-sort has the seed's architecture and size
SERVED = ("seed", "minilm", "smollm2", "gemma3")
# the limit over the highest measured peak: the same configuration measured again differed by up
# to 11 % (seed, 30 learners: 571-636 MB; SmolLM2, 10 learners: 1878-2037 MB); the rest is for
# what the workshop bench does not do (figure export's chromium, the logit lens, patching)
HEADROOM = 1.3

SKIPPED = {
    "soak-30min.json": "the code before the session-memory fix (README, 'A workshop-length soak': "
                       "+188 % RSS over 30 minutes; fixed, and pinned by tests/test_session_memory.py)",
}
# a single process's peak where no class was measured (what is known, said as what it is)
NO_CLASS = {
    "minilm": ("peers.json", ("models", "minilm", "peak_mb", "project"),
               "no class measured; one process loading MiniLM and running one 512-token sentence, no server"),
}


def _rows(name: str, data: dict):
    """(where, row) for every one-process row of the app's own code in one result file."""
    for key in ("workshop", "runs"):
        for i, row in enumerate(data.get(key) or []):
            if not isinstance(row, dict) or row.get("rss_max_mb") is None:
                continue
            code = str(row.get("code") or "")
            if row.get("replicas") != 0 or code.startswith(("baseline", "before")):
                continue
            yield f"{key}[{i}].rss_max_mb", row
    soak = data.get("soak")
    if isinstance(soak, dict) and soak.get("rss_max_mb") is not None:
        yield "soak.rss_max_mb", dict(soak, model=soak.get("model", "seed"), replicas=0)


def result_files() -> list[Path]:
    return sorted([*RESULTS.glob("workshop*.json"), *RESULTS.glob("soak*.json")])


def measurements() -> list[dict]:
    """Every one-process peak: model, learners, rss_mb, source (file and field)."""
    out = []
    for path in result_files():
        if path.name in SKIPPED:
            continue
        data = json.loads(path.read_text())
        for where, row in _rows(path.name, data):
            out.append({"model": row["model"], "learners": int(row["learners"]),
                        "rss_mb": float(row["rss_max_mb"]), "source": f"{path.name} {where}"})
    return out


def peaks() -> dict[tuple[str, int], dict]:
    """(model, learners) -> the highest peak, how many runs, their range and their sources."""
    table: dict[tuple[str, int], dict] = {}
    for m in measurements():
        t = table.setdefault((m["model"], m["learners"]), {"rss_mb": 0.0, "low": math.inf, "runs": 0, "sources": []})
        t["rss_mb"] = max(t["rss_mb"], m["rss_mb"])
        t["low"] = min(t["low"], m["rss_mb"])
        t["runs"] += 1
        t["sources"].append((m["source"], m["rss_mb"]))
    return table


def no_class(model: str) -> tuple[float, str, str] | None:
    """(MB, source, what it is) for a model measured only outside a class, else None."""
    if model not in NO_CLASS:
        return None
    name, keys, what = NO_CLASS[model]
    value = json.loads((RESULTS / name).read_text())
    for k in keys:
        value = value[k]
    return float(value), f"{name} {'.'.join(keys)}", what


def required_mb() -> tuple[float, str]:
    """The memory a replica needs: HEADROOM × the highest peak of a served model at its per-core
    class size or fewer learners, and which measurement that is."""
    table = peaks()
    need, which = 0.0, ""
    for model in SERVED:
        if model not in PER_CORE:
            continue
        if (model, PER_CORE[model]) not in table:
            raise LookupError(f"no one-process measurement of {model} at {PER_CORE[model]} learners in {RESULTS}")
        # a class of N needs at least what fewer learners were measured to take
        for (m, learners), row in table.items():
            if m == model and learners <= PER_CORE[model] and row["rss_mb"] * HEADROOM > need:
                need, which = row["rss_mb"] * HEADROOM, f"{model}, {learners} learners"
    return need, which


def markdown(full: bool = False) -> str:
    """The table; ``full``: every run's source and figure, not only the highest and lowest."""
    table = peaks()
    lines = ["| model | learners on one process | peak RSS (MiB), highest | runs (lowest) | sources (bench/results/, field) |",
             "|---|---|---|---|---|"]
    for model in ("seed", "seed-sort", "minilm", "smollm2", "gemma3"):
        rows = sorted((k[1], v) for k, v in table.items() if k[0] == model)
        for learners, v in rows:
            mark = " (per core)" if PER_CORE.get(model) == learners else ""
            ranked = sorted(v["sources"], key=lambda x: -x[1])
            sources = f"`{ranked[0][0]}`" if len(ranked) == 1 or full else f"`{ranked[0][0]}`; lowest `{ranked[-1][0]}`"
            if full:
                sources = "; ".join(f"`{s}` {mb:.0f}" for s, mb in ranked)
            lines.append(f"| {model} | {learners}{mark} | **{v['rss_mb']:.0f}** | {v['runs']} ({v['low']:.0f}) | {sources} |")
        if not rows:
            known = no_class(model)
            if known:
                mb, src, what = known
                lines.append(f"| {model} | not measured | — | — | {what}: `{src}` {mb:.0f} |")
            elif model == "seed-sort":
                lines.append(f"| {model} | not measured | — | — | the seed's architecture and size; its figures apply |")
            else:
                lines.append(f"| {model} | not measured | — | — | — |")
    need, which = required_mb()
    lines.append("")
    lines.append(f"Limit needed per replica: {HEADROOM} × {need / HEADROOM:.0f} MiB ({which}) = {need:.0f} MiB.")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(markdown(full="--all" in sys.argv[1:]))
