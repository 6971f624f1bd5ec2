"""The benchmark tables, generated from bench/results/*.json at build time: the history stays in the
result files, and the pages only read them. ``tables()`` gives {marker: Markdown table}; the page
docs/benchmarks.md carries the prose and a marker ``<!-- bench:NAME -->`` where each table goes
(and docs/host*.md the memory table: ``<!-- bench:memory -->``)."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
KINDS = ("workshop", "floor", "noisy", "poll", "soak", "peers")


def num(x) -> str:
    """A measured number as every table prints it: three significant digits (whole numbers from 100)."""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"
    return str(x)


def _value(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {num(x)}" for k, x in v.items() if not isinstance(x, (dict, list)))
    return num(v)


def _load(kind: str) -> list[tuple[str, dict]]:
    out = []
    for f in sorted(RESULTS.glob(f"{kind}*.json")):
        data = json.loads(f.read_text())
        out.append((f.name, data))
    return sorted(out, key=lambda x: (_date(x[1]), x[0]))


def _date(data: dict) -> str:
    return str((data.get("meta") or {}).get("date") or data.get("date") or "")[:16].replace("T", " ")


def targets_table(kind: str) -> str:
    """Every run's targets: the figure each run checked against its floor, and whether it held."""
    rows = ["| run (bench/results/) | date | load (start) | target | value | floor | held |", "|---|---|---|---|---|---|---|"]
    for name, data in _load(kind):
        load = (data.get("meta") or {}).get("load_avg", "")
        load = str(load).split()[0] if load else ""
        for target, t in (data.get("targets") or {}).items():
            rows.append(f"| `{name}` | {_date(data)} | {load} | `{target}` | {_value(t.get('value'))} | "
                        f"{t.get('target', '')} | {'yes' if t.get('ok') else '**no**'} |")
        if kind == "peers":
            for floor, ok in (data.get("floors") or {}).items():
                rows.append(f"| `{name}` | {_date(data)} | {load} | `{floor}` | | | {'yes' if ok else '**no**'} |")
    return "\n".join(rows)


def workshop_table() -> str:
    rows = ["| run (bench/results/) | date | model | learners | replicas | code | click p95 s | new sentence p95 s | "
            "burst p95 s | errors | peak RSS MiB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, data in _load("workshop"):
        for key in ("workshop", "workshop_baseline"):
            for w in data.get(key) or []:
                code = w.get("code", "baseline" if key == "workshop_baseline" else "")
                p95 = [num(w[k]["p95_s"]) if k in w else num(w.get(f"{k}_p95", "")) for k in ("click", "sentence", "burst")]
                rows.append(f"| `{name}` | {_date(data)} | {w.get('model', '')} | {w.get('learners', '')} | "
                            f"{w.get('replicas', '')} | {code} | {' | '.join(p95)} | {w.get('errors', '')} | "
                            f"{num(w.get('rss_max_mb', ''))} |")
    return "\n".join(rows)


def peers_table() -> str:
    rows = ["| run (bench/results/) | date | model | cold start × | load × | peak memory × | forward 16 × | "
            "forward 128 × | forward 512 × |", "|---|---|---|---|---|---|---|---|---|"]
    for name, data in _load("peers"):
        for model, m in (data.get("models") or {}).items():
            fwd = m.get("forward_s") or {}
            cells = [num((m.get(k) or {}).get("ratio", "")) for k in ("cold_s", "load_s", "peak_mb")]
            cells += [num((fwd.get(n) or {}).get("ratio", "")) for n in ("16", "128", "512")]
            rows.append(f"| `{name}` | {_date(data)} | {model} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def revisions_table() -> str:
    rows = ["| run (bench/results/) | date | baseline | model | measure | current / baseline, median [min, max] |",
            "|---|---|---|---|---|---|"]
    for f in sorted(RESULTS.glob("revisions*.json")):
        data = json.loads(f.read_text())
        for model, measures in (data.get("ratios") or {}).items():
            for measure, r in measures.items():
                if isinstance(r, dict) and "median" in r:
                    span = f" [{num(r.get('min'))}, {num(r.get('max'))}]" if "min" in r else ""
                    rows.append(f"| `{f.name}` | {_date(data)} | `{data.get('baseline')}` | {model} | {measure} | "
                                f"{num(r['median'])}{span} |")
    return "\n".join(rows)


def memory_table() -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("deploy_memory", ROOT / "deploy" / "memory.py")
    memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(memory)
    return memory.markdown()


def tables() -> dict[str, str]:
    out = {f"targets-{k}": targets_table(k) for k in KINDS}
    out.update(workshop=workshop_table(), peers=peers_table(), revisions=revisions_table(), memory=memory_table())
    return out


def fill(text: str, made: dict[str, str]) -> str:
    """The page with each ``<!-- bench:NAME -->`` replaced by its table (an unknown name fails the build)."""
    import re

    def one(m):
        if m.group(1) not in made:
            raise KeyError(f"no benchmark table {m.group(1)!r}; there are {sorted(made)}")
        return made[m.group(1)]

    return re.sub(r"<!-- bench:([a-z0-9-]+) -->", one, text)
