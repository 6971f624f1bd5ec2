"""The project against its peers, measured side by side: ``python -m bench peers``.

    python -m bench peers --threads 2 --check          # the full run (17 minutes on 2 cores)
    python -m bench peers --quick --threads 1          # a short run (fewer repetitions, no SmolLM2 512-token HTML)
    python -m bench peers --json bench/results/peers.json
    python -m bench peers --malloc default             # the project side with glibc's malloc defaults
    python -m bench peers --models gemma3,gpt2-random,qwen-random --only parity   # the families (issues 24, 25)

The peers run in a throwaway virtual environment (``--venv``, default /tmp/peers-venv) that sees
the packages of the interpreter running the bench after its own (``new_venv``: a venv's, when bench
runs from one), so the installed torch and gguf are reused (torch pinned by a constraints file, pip
never replaces it), plus the pinned transformers and accelerate of scripts/make_parity_fixtures.py,
transformer-lens and bertviz. The project never depends on any of them.
No hub download: transformers loads the same fetched files the project loads (the MiniLM folder,
the SmolLM2 and Gemma 3 GGUFs), and TransformerLens's ``TransformerBridge`` wraps that same loaded model
(``boot_transformers(folder, hf_model=..., tokenizer=...)``: given the model it reads nothing from
the hub; without ``hf_model`` it would fetch the config from the hub by name).

Two checkpoints are made, not fetched: ``gpt2-random`` (GPT-2 small's shape: 12 layers, 12 heads,
d_model 768, 50,257-token vocabulary; 124M parameters) and ``qwen-random`` (Qwen2.5-0.5B's shape: 24
layers, 14 query heads sharing 2 K/V heads, d_model 896, 151,936-token vocabulary, tied output;
494M parameters), randomly initialised by transformers itself in the peers' venv (seed 0, its
default init; no download) and saved as a Hugging Face folder (config.json, model.safetensors and
a small byte-level tokenizer.json from scripts/make_family_fixtures.py) under ``--checkpoints``
(default /tmp/peers-checkpoints), once. Both sides load that folder: the project through
model/files/hf.py, transformers with AutoModelForCausalLM (eager, float32).

What is measured (every other case in a fresh subprocess, the project's and the peer's alternating,
round after round, the order flipped every round; figures are medians over the rounds):
  cold      process start -> import -> load -> first forward with attentions (a 16-token sentence)
  load      the load alone (weights read, model built), in the same process
  peak      the RSS high-water mark of that fresh process after it also ran the 512-token forward
  forward   warm forward at 16/128/512 tokens, batch 1, tokenization included on both sides:
            both models in ONE process (the peers' venv), call after call, the order flipped every
            pair (``job_paired``); the figure is the median ratio of neighbouring calls, with a
            bootstrap 90% interval and the share of pairs the project won. The same forward varies
            by a third between fresh processes on a shared machine, so medians of separate
            processes could not tell a few per cent apart; neighbouring calls can
  hooks     TransformerLens: run_with_cache / its plain forward, against the project's
            run_with_cache / run, on the same 128-token sentence
  payload   BertViz's head_view HTML against the project's largest figure JSON (and the page's
            whole payload for one selection), same sentences
  parity    max |pattern difference| over every layer and head on the 512-token sentence (<= 2e-3)

Like with like: transformers with ``output_attentions=True`` keeps one (heads x T x T) pattern
per layer; the project is measured (a) keeping those patterns only (``run_with_cache(names=
<every hook_pattern>)``) -- the floor -- and (b) keeping every hook (its default).
Threads: ``--threads N`` sets torch.set_num_threads(N) and OMP/MKL_NUM_THREADS=N on both sides.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.models import interleaved  # standard library only: safe in the peers' venv

ROOT = Path(__file__).resolve().parent.parent
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_FILES = {"smollm2": GGUF_FILE, "gemma3": "gemma-3-270m-q4_k_m.gguf"}  # gemma3: model.fetch.GEMMA3_FILE
RANDOM = {  # name -> (the family of scripts/make_family_fixtures.py's tokenizer, transformers' config)
    "gpt2-random": ("gpt2", dict(model_type="gpt2", vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,
                                 n_head=12)),
    "qwen-random": ("qwen2", dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                  num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                  max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                                  tie_word_embeddings=True, use_sliding_window=False)),
}
CHECKPOINTS = Path("/tmp/peers-checkpoints")
TRANSFORMER_LENS = "transformer-lens==4.3.0"
BERTVIZ = "bertviz==1.4.1"
PARITY_LIMIT = 2e-3
HOOK_TOKENS = 128
MODELS = ("minilm", "smollm2", "gemma3", *RANDOM)
RESULT = "PEERS-RESULT "


def _parity_pins() -> tuple[str, str]:
    """transformers and accelerate as pinned by scripts/make_parity_fixtures.py (one place)."""
    spec = importlib.util.spec_from_file_location("_parity", ROOT / "scripts" / "make_parity_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TRANSFORMERS, mod.ACCELERATE


def pins(only: set[str] | None = None) -> list[str]:
    """The peers' packages: transformers and accelerate, TransformerLens for "hooks", BertViz for
    "payload" (``only`` None: all of them)."""
    return [*_parity_pins(), *([TRANSFORMER_LENS] if only is None or "hooks" in only else []),
            *([BERTVIZ] if only is None or "payload" in only else [])]


SITE_PTH = "_attention_explorer_project_site.pth"
PEERS_NEED = ("torch", "gguf", "tokenizers", "safetensors", "transformers", "accelerate")  # imported by the peers


def _site_dirs() -> list[str]:
    """This interpreter's own package folders (a virtual environment's, when bench runs from one)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return [p for p in dict.fromkeys((paths["purelib"], paths["platlib"])) if os.path.isdir(p)]


def new_venv(venv: Path) -> Path:
    """A venv (made once) that sees this interpreter's packages after its own: its python.

    ``--system-site-packages`` alone gives a venv the *base* interpreter's packages. When bench runs
    from a virtual environment's interpreter (activated or not), that base lacks the project's
    packages (gguf: transformers could not read SmolLM2's and Gemma 3's GGUFs; torch: pip would
    install another). A .pth file in the new venv adds this interpreter's package folders right
    after the venv's own, so the peers' pins win and torch, gguf and tokenizers are the project's.
    Standard library only (tests/test_bench_env.py runs it from a bare venv)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    probe = subprocess.run([str(python), "-c", "import sys, sysconfig; print(sys.version_info[:2]); "
                            "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise RuntimeError(f"the peers' venv {venv} does not run ({probe.returncode}): {probe.stderr[-1500:]}")
    version, purelib = probe.stdout.splitlines()[:2]
    if version != str(sys.version_info[:2]):
        raise RuntimeError(f"the peers' venv {venv} is Python {version}, this one {tuple(sys.version_info[:2])}: "
                           f"delete it (or pass --venv elsewhere) and it is made again from this interpreter")
    dirs = _site_dirs()
    # a .pth line that starts with "import" runs (one statement list; a comprehension would not see `site`)
    (Path(purelib) / SITE_PTH).write_text("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
    return python


def ensure_venv(venv: Path, only: set[str] | None = None) -> Path:
    """The peers' virtual environment (made once, reused while its pins match), with this
    interpreter's packages (``new_venv``). A venv that still cannot import what the peers need is
    an error naming the module and the cause, before any measurement."""
    import torch

    python = new_venv(venv)
    wanted = pins(only)
    check = ("import importlib.metadata as m; print(' '.join(f'{n}=={m.version(n)}' for n in "
             f"{[p.split('==')[0] for p in wanted]!r}))")
    has = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    if has.stdout.strip() != " ".join(wanted):
        constraints = venv / "constraints.txt"  # pip must never replace the project's torch
        constraints.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *wanted], check=True)
    needed = ("import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
              "import torch; print(torch.__version__)")
    got = subprocess.run([str(python), "-c", needed, *PEERS_NEED], capture_output=True, text=True)
    if got.returncode != 0 or got.stdout.strip() != torch.__version__:
        why = (got.stderr.strip().splitlines() or ["?"])[-1] if got.returncode else \
            f"its torch is {got.stdout.strip()}, this interpreter's {torch.__version__}"
        raise RuntimeError(f"the peers' venv {venv} ({python}) cannot run the peers: {why}. It sees this "
                           f"interpreter's packages ({sys.executable}: {', '.join(_site_dirs())}) through "
                           f"{SITE_PTH}; install the project's packages there (sh scripts/setup.sh) or delete "
                           f"{venv} to make it again")
    return python


# --- inside a fresh process ----------------------------------------------------------------------
def _maxrss_mb() -> float:
    """This process's peak resident memory, MB: VmHWM (its own address space's high-water mark); not
    ru_maxrss, which Linux carries over fork and exec from the parent (bench/long.py: peak_rss)."""
    from bench.long import peak_rss

    return peak_rss() / 2**20


def target(name: str, checkpoints: str | Path = CHECKPOINTS) -> str:
    """What model.load and transformers read: the fetched name, or the made checkpoint's folder."""
    return str(Path(checkpoints) / name) if name in RANDOM else name


def job_make(job: dict) -> dict:
    """In the peers' venv: the random checkpoints, made once by transformers (no download)."""
    import torch
    import transformers as tf

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_family_fixtures import make_tokenizer

    made = {}
    for name in job["names"]:
        folder = Path(job["checkpoints"]) / name
        if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
            continue
        family, raw = RANDOM[name]
        tok, ids = make_tokenizer(family)
        cfg = tf.AutoConfig.for_model(**raw, bos_token_id=ids.get("bos"), eos_token_id=ids["eos"],
                                      pad_token_id=ids["pad"])
        torch.manual_seed(0)
        t0 = time.time()
        ref = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        folder.mkdir(parents=True, exist_ok=True)
        ref.save_pretrained(folder)  # config.json + model.safetensors
        tok.save(str(folder / "tokenizer.json"))
        made[name] = {"parameters": sum(p.numel() for p in ref.parameters()), "seconds": time.time() - t0}
    return made


class Project:
    """The project's side: ``variant`` "patterns" keeps what transformers returns, "all" every hook."""

    def __init__(self, name: str, variant: str = "patterns", checkpoints: str | Path = CHECKPOINTS) -> None:
        import model

        self.m = model.load(target(name, checkpoints))
        self.pattern_names = [h for h in self.m.hook_names if h.endswith("self_attn.hook_pattern")]
        self.variant = variant

    def forward(self, text: str, variant: str | None = None):
        names = self.pattern_names if (variant or self.variant) == "patterns" else None
        return self.m.run_with_cache([text], names=names)

    def plain(self, text: str):
        return self.m.run([text])

    def patterns(self, result) -> "torch.Tensor":  # noqa: F821
        import torch

        _, cache = result
        return torch.stack([cache[n][0] for n in self.pattern_names])  # (L, H, T, T)

    def n_tokens(self, result) -> int:
        return len(result[1].token_ids[0])


class Transformers:
    """transformers, eager attention, ``output_attentions=True``, from the same fetched files."""

    def __init__(self, name: str, lm_head: bool = False, checkpoints: str | Path = CHECKPOINTS) -> None:
        import torch
        from transformers import (AutoModelForCausalLM, AutoTokenizer, BertForMaskedLM, BertModel,
                                  PreTrainedTokenizerFast)

        from model import fetch

        if name in RANDOM:  # the made folder: its tokenizer.json as is, the model as saved
            folder = Path(checkpoints) / name
            self.tok = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
            self.ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
            self.source = str(folder)
            return
        folder = fetch.model_dir(name)
        if name == "minilm":
            self.tok = AutoTokenizer.from_pretrained(folder)
            cls = BertForMaskedLM if lm_head else BertModel
            self.ref = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
            self.source = str(folder)
        else:
            gguf = GGUF_FILES[name]
            self.tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
            self.ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
            self.source = str(folder)

    def forward(self, text: str, variant: str | None = None):
        import torch

        with torch.inference_mode():
            batch = self.tok([text], return_tensors="pt")
            return self.ref(**batch, output_attentions=True)

    def patterns(self, out) -> "torch.Tensor":  # noqa: F821
        import torch

        return torch.stack([a[0] for a in out.attentions])  # (L, H, T, T)

    def n_tokens(self, out) -> int:
        return int(out.attentions[0].shape[-1])


def _side(job: dict):
    where = job.get("checkpoints", CHECKPOINTS)
    if job["side"] == "project":
        return Project(job["model"], job.get("variant", "patterns"), where)
    return Transformers(job["model"], checkpoints=where)


def job_cold(job: dict) -> dict:
    """Import, load, first forward (16 tokens) -> the 512-token forward -> the RSS high-water mark."""
    t_import = time.time()
    import torch

    torch.set_num_threads(job["threads"])
    if job["side"] == "project":
        import model  # noqa: F401
    else:
        import transformers  # noqa: F401
    t_load = time.time()
    side = _side(job)
    t_loaded = time.time()
    shortest, longest = (job["texts"][k] for k in (min(job["texts"], key=int), max(job["texts"], key=int)))
    first = side.forward(shortest)
    t_first = time.time()
    n16 = side.n_tokens(first)
    del first
    out = side.forward(longest)
    peak = _maxrss_mb()
    res = {"cold_s": t_first - job["t_spawn"], "import_s": t_load - t_import, "load_s": t_loaded - t_load,
           "spawn_s": t_import - job["t_spawn"], "peak_mb": peak, "tokens": [n16, side.n_tokens(out)]}
    if job.get("save"):
        pat = side.patterns(out)
        torch.save(pat.contiguous(), job["save"])
    return res


def job_paired(job: dict) -> dict:
    """Warm forwards, the project's and transformers' in ONE process, call after call.

    Both models are loaded in this process (the order of loading flipped by ``job["first"]``),
    then at every length the two forwards alternate, the order flipped every repetition: each
    project forward has a peer forward next to it, under the same machine conditions. On a
    shared machine the same forward varies by a third between fresh processes and by a tenth
    between calls, in time with the machine's other work; a ratio of neighbouring calls cancels
    that, where medians of separate processes cannot. Same interpreter, same torch, same
    allocator settings (``import model`` applies the app's malloc settings to the whole process).
    """
    import torch

    torch.set_num_threads(job["threads"])
    made = {}
    for side in (("project", "transformers") if job["first"] == "project" else ("transformers", "project")):
        where = job.get("checkpoints", CHECKPOINTS)
        made[side] = Project(job["model"], job["variant"], where) if side == "project" \
            else Transformers(job["model"], checkpoints=where)
    proj, peer = made["project"], made["transformers"]
    out: dict = {"times": {}, "cpu": {}, "tokens": {}}
    for n, text in job["texts"].items():
        out["tokens"][n] = [proj.n_tokens(proj.forward(text)), peer.n_tokens(peer.forward(text))]  # warm-up
        t = {"project": [], "transformers": []}
        c = {"project": [], "transformers": []}
        for i in range(job["reps"]):
            for side in (("project", "transformers") if i % 2 == 0 else ("transformers", "project")):
                c0, t0 = time.process_time(), time.perf_counter()
                made[side].forward(text)
                t[side].append(time.perf_counter() - t0)
                c[side].append(time.process_time() - c0)
        out["times"][n], out["cpu"][n] = t, c
    return out


def job_hooks(job: dict) -> dict:
    """run_with_cache over the plain forward, alternating, on the 128-token sentence."""
    import torch

    torch.set_num_threads(job["threads"])
    text = job["texts"][str(HOOK_TOKENS)]
    if job["side"] == "project":
        p = Project(job["model"], "all")
        n_hooks = len(p.m.hook_names)
        fns = {"plain": lambda: p.plain(text), "cached": lambda: p.forward(text, "all")}
    else:
        from transformer_lens.model_bridge import TransformerBridge

        t = Transformers(job["model"], lm_head=True)
        bridge = TransformerBridge.boot_transformers(t.source, hf_model=t.ref, tokenizer=t.tok, device="cpu")
        ids = t.tok([text], return_tensors="pt")["input_ids"]

        def plain():
            with torch.inference_mode():
                return bridge(ids)

        def cached():
            with torch.inference_mode():
                return bridge.run_with_cache(ids)

        n_hooks = len(cached()[1])
        fns = {"plain": plain, "cached": cached}
    times = interleaved(fns, job["reps"])
    return {"times": times, "n_hooks": n_hooks}


def job_payload(job: dict) -> dict:
    """Bytes: BertViz's head_view HTML (peer) or the project's figures for one selection."""
    out = {}
    if job["side"] == "project":
        sys.path.insert(0, str(ROOT))
        from bench import models as mb
        from explorer.views import stages

        m = Project(job["model"]).m
        for n, text in job["texts"].items():
            run = stages.run_data(m, [text])
            block = stages.blocks_for(m.info)[0]
            sizes = mb.all_figures(run, m.info, stages.Selection(model=job["model"], sentence=0, layer=0,
                                                                  head=0, block=block))
            big = max(sizes, key=sizes.get)
            out[n] = {"largest_bytes": sizes[big], "largest_stage": big, "page_bytes": sum(sizes.values())}
    else:
        from bertviz import head_view

        t = Transformers(job["model"])
        for n, text in job["texts"].items():
            res = t.forward(text)
            tokens = t.tok.convert_ids_to_tokens(t.tok([text])["input_ids"][0])
            html = head_view(list(res.attentions), tokens, html_action="return")
            data = html.data if hasattr(html, "data") else str(html)
            out[n] = {"html_bytes": len(data.encode()), "cdn": "cdnjs" in data or "require.js" in data}
            del res, html, data
    return out


JOBS = {"cold": job_cold, "paired": job_paired, "hooks": job_hooks, "payload": job_payload, "make": job_make}


def worker(raw: str) -> None:
    job = json.loads(raw)
    res = JOBS[job["kind"]](job)
    print(RESULT + json.dumps(res), flush=True)


# --- outside: the schedule -------------------------------------------------------------------------
def run_job(job: dict, python: str, threads: int, env_extra: dict | None = None, timeout: float = 1800) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1",
           **(env_extra or {})}
    job = {**job, "threads": threads, "t_spawn": time.time()}
    p = subprocess.run([python, "-m", "bench.peers", "--worker", json.dumps(job)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    raise RuntimeError(f"{job['kind']} {job['side']} {job['model']} failed (exit {p.returncode}):\n"
                       + (p.stderr or p.stdout)[-3000:])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def interval(xs: list[float], level: float = 0.9, draws: int = 2000) -> tuple[float, float]:
    """A bootstrap interval of the median of ``xs`` (seeded: the same figures give the same interval)."""
    if len(xs) < 2:
        return (med(xs), med(xs))
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    cut = int(draws * (1 - level) / 2)
    return meds[cut], meds[-cut - 1]


def texts_for(name: str, lengths: list[int], checkpoints: str | Path = CHECKPOINTS) -> dict[str, str]:
    from bench import models as mb
    import model

    m = model.load(target(name, checkpoints))
    return {str(n): mb.text_of(m, n) for n in lengths}


def measure(a) -> dict:
    import torch

    python_peer = str(ensure_venv(a.venv, a.only))
    python_project = sys.executable
    project_env = {"ATTENTION_EXPLORER_MALLOC": "default"} if a.malloc == "default" else {}
    rounds = 1 if a.quick else a.rounds
    forward_rounds = 1 if a.quick else (a.forward_rounds or a.rounds)  # fresh processes differ: more of them
    reps = 1 if a.quick else a.reps
    pairs = 2 if a.quick else a.pairs
    res: dict = {"meta": {"date": dt.datetime.now().isoformat(timespec="seconds"), "threads": a.threads,
                          "rounds": rounds, "forward_rounds": forward_rounds, "reps": reps, "pairs": pairs, "cpus": os.cpu_count(), "quick": a.quick,
                          "load_avg": " ".join(f"{x:.1f}" for x in os.getloadavg()), "malloc": a.malloc,
                          "torch": torch.__version__, "peers": pins(a.only)}, "models": {}}
    tmp = Path(tempfile.mkdtemp(prefix="peers-"))
    randoms = [n for n in a.models if n in RANDOM]
    if randoms:
        print(f"making (once) {', '.join(randoms)} in {a.checkpoints} with transformers", file=sys.stderr, flush=True)
        res["meta"]["made"] = run_job({"kind": "make", "side": "transformers", "model": "", "names": randoms,
                                       "checkpoints": str(a.checkpoints)}, python_peer, a.threads, timeout=3600)
    for name in a.models:
        lengths = a.lengths
        texts = texts_for(name, lengths, a.checkpoints)
        r: dict = {"cold": {"project": [], "project_all": [], "transformers": []},
                   "warm": {"patterns": [], "all": []}}
        base = {"model": name, "texts": texts, "checkpoints": str(a.checkpoints)}

        def proj(job, variant="patterns"):
            return run_job({**job, "side": "project", "variant": variant}, python_project, a.threads, project_env)

        def peer(job):
            return run_job({**job, "side": "transformers"}, python_peer, a.threads)

        print(f"[{name}] cold start, load, peak memory ({rounds} rounds)", file=sys.stderr, flush=True)
        for i in range(rounds):
            save = i == 0 and "parity" in a.only
            order = [("project", lambda s: proj({**base, "kind": "cold", "save": s}, "patterns")),
                     ("transformers", lambda s: peer({**base, "kind": "cold", "save": s})),
                     ("project_all", lambda s: proj({**base, "kind": "cold"}, "all"))]
            for key, fn in (order if i % 2 == 0 else order[::-1]):
                path = str(tmp / f"{name}-{key}.pt") if save and key != "project_all" else None
                r["cold"][key].append(fn(path))
        if "parity" in a.only:
            ours, theirs = torch.load(tmp / f"{name}-project.pt"), torch.load(tmp / f"{name}-transformers.pt")
            r["parity_512"] = {"shape_equal": list(ours.shape) == list(theirs.shape),
                               "max_abs": float((ours - theirs).abs().max()) if ours.shape == theirs.shape
                               else float("inf"), "shape": list(ours.shape)}
            del ours, theirs
        print(f"[{name}] warm forward at {lengths}, paired in one process ({forward_rounds} rounds x {pairs} pairs, "
              f"patterns only and every hook)", file=sys.stderr, flush=True)
        for i in range(forward_rounds):
            for variant in ("patterns", "all"):
                first = "project" if (i + (variant == "all")) % 2 == 0 else "transformers"
                r["warm"][variant].append(peer({**base, "kind": "paired", "reps": pairs, "variant": variant,
                                                "first": first}))
        if "hooks" in a.only and name not in RANDOM:  # TransformerLens: the fetched models only
            print(f"[{name}] hook overhead vs TransformerLens", file=sys.stderr, flush=True)
            r["hooks"] = {"project": [], "transformer_lens": []}
            hreps = 3 if a.quick else 2 * a.reps + 1
            for i in range(rounds):
                order = [("project", lambda: proj({**base, "kind": "hooks", "reps": hreps}, "all")),
                         ("transformer_lens", lambda: peer({**base, "kind": "hooks", "reps": hreps}))]
                for key, fn in (order if i % 2 == 0 else order[::-1]):
                    r["hooks"][key].append(fn())
        if "payload" in a.only and name not in RANDOM:
            print(f"[{name}] payload vs BertViz", file=sys.stderr, flush=True)
            ptexts = {k: v for k, v in texts.items() if not (a.quick and name != "minilm" and k == "512")}
            r["payload"] = {"project": proj({**base, "texts": ptexts, "kind": "payload"}),
                            "bertviz": peer({**base, "texts": ptexts, "kind": "payload"})}
        res["models"][name] = summarise(r)
        res["models"][name]["raw"] = r
    res["meta"]["load_avg_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    return res


def summarise(r: dict) -> dict:
    """Medians and ratios; every ratio is peer / project for times and sizes (> 1: the project wins)."""
    s: dict = {}
    c = r["cold"]
    for key in ("cold_s", "load_s", "peak_mb"):
        s[key] = {side: med([x[key] for x in c[side]]) for side in c}
        s[key]["ratio"] = s[key]["transformers"] / s[key]["project"]
        s[key]["ratio_all"] = s[key]["transformers"] / s[key]["project_all"]
    s["tokens"] = {side: c[side][0]["tokens"] for side in c}
    w = r["warm"]
    s["forward_s"] = {}
    for n in sorted(w["patterns"][0]["times"], key=int):
        f: dict = {"tokens": w["patterns"][0]["tokens"][n][0], "tokens_transformers": w["patterns"][0]["tokens"][n][1]}
        for variant, key in (("patterns", ""), ("all", "_all")):
            pairs = [(x["times"][n]["project"], x["times"][n]["transformers"]) for x in w[variant]]
            cpus = [(x["cpu"][n]["project"], x["cpu"][n]["transformers"]) for x in w[variant]]
            ours = [t for p, _ in pairs for t in p]
            theirs = [t for _, q in pairs for t in q]
            ratios = [b / a for p, q in pairs for a, b in zip(p, q)]  # neighbouring calls, peer / project
            cpu_ratios = [b / a for p, q in cpus for a, b in zip(p, q)]
            lo, hi = interval(ratios)
            f["project" + key] = med(ours)
            f["transformers" + key] = med(theirs)  # the peer's calls paired with this variant's
            f["ratio" + key] = med(ratios)
            f["ratio" + key + "_interval"] = [lo, hi]
            f["ahead" + key] = sum(x > 1 for x in ratios) / len(ratios)  # share of pairs the project won
            f["cpu_ratio" + key] = med(cpu_ratios)
            f["pairs" + key] = len(ratios)
            f["per_process" + key] = [med([b / a for a, b in zip(p, q)]) for p, q in pairs]
        s["forward_s"][n] = f
    if "hooks" in r:
        h = {}
        for side, runs in r["hooks"].items():
            plain = med([t for x in runs for t in x["times"]["plain"]])
            cached = med([t for x in runs for t in x["times"]["cached"]])
            h[side] = {"plain_s": plain, "cached_s": cached, "overhead": cached / plain, "n_hooks": runs[0]["n_hooks"]}
        h["ratio"] = h["transformer_lens"]["overhead"] / h["project"]["overhead"]
        s["hooks"] = h
    if "payload" in r:
        p = {}
        for n, ours in r["payload"]["project"].items():
            theirs = r["payload"]["bertviz"][n]
            p[n] = {**ours, **theirs, "ratio": theirs["html_bytes"] / ours["largest_bytes"]}
        s["payload"] = p
    if "parity_512" in r:
        s["parity_512"] = r["parity_512"]
    return s


def floors(res: dict) -> dict[str, bool]:
    """Every ratio in the project's favour (>= 1), the like-for-like ones, a warm forward's paired
    interval containing 1 counting as a tie (which meets it); parity within 2e-3."""
    out = {}
    for name, s in res["models"].items():
        out[f"{name} cold start"] = s["cold_s"]["ratio"] >= 1
        out[f"{name} load"] = s["load_s"]["ratio"] >= 1
        out[f"{name} peak memory (512)"] = s["peak_mb"]["ratio"] >= 1
        for n, f in s["forward_s"].items():  # paired calls: an interval containing 1 is a tie, and meets it
            out[f"{name} forward {n}"] = f["ratio"] >= 1 or f["ratio_interval"][1] >= 1
        if "hooks" in s:
            out[f"{name} hook overhead"] = s["hooks"]["ratio"] >= 1
        for n, p in s.get("payload", {}).items():
            out[f"{name} payload {n}"] = p["ratio"] >= 1
        if "parity_512" in s:
            out[f"{name} parity (512)"] = s["parity_512"]["shape_equal"] and s["parity_512"]["max_abs"] <= PARITY_LIMIT
    return out


def _x(r: float) -> str:
    return f"{r:.2f}x in the project's favour" if r >= 1 else f"{1 / r:.2f}x AGAINST"


def table(res: dict) -> str:
    m = res["meta"]
    L = [f"# the project against its peers · {m['date']} · {m['threads']} thread(s) each side · "
         f"{m['rounds']} rounds (forward: {m.get('forward_rounds', m['rounds'])} x 2 processes of {m.get('pairs', m['reps'])} pairs) · load average {m['load_avg']} -> {m.get('load_avg_end', '?')} · "
         f"malloc: {m['malloc']} · torch {m['torch']} · {', '.join(m['peers'])}"]
    for name, s in res["models"].items():
        L.append("")
        L.append(f"## {name} (tokens: project {s['tokens']['project']}, transformers {s['tokens']['transformers']})")
        L.append(f"{'what':<34}{'project':>12}{'every hook':>12}{'peer':>12}   ratio (patterns only; every hook)")
        for key, label, unit in (("cold_s", "cold start to first patterns", "s"), ("load_s", "load", "s"),
                                 ("peak_mb", "peak RSS, load + 512 forward", "MB")):
            v = s[key]
            fmt = (lambda x: f"{x:.0f} MB") if unit == "MB" else (lambda x: f"{x:.3f} s")
            L.append(f"{label:<34}{fmt(v['project']):>12}{fmt(v['project_all']):>12}{fmt(v['transformers']):>12}"
                     f"   {_x(v['ratio'])}; {_x(v['ratio_all'])}")
        for n, f in s["forward_s"].items():
            L.append(f"{f'warm forward, {n} tokens':<34}{f['project']:>10.4f} s{f['project_all']:>10.4f} s"
                     f"{f['transformers']:>10.4f} s   {_x(f['ratio'])}; {_x(f['ratio_all'])}")
            lo, hi = f["ratio_interval"]
            alo, ahi = f["ratio_all_interval"]
            L.append(f"{'  paired calls, peer / project':<34}{f['pairs']:>6} pairs: 90% interval of the median "
                     f"{lo:.3f}-{hi:.3f} (every hook {alo:.3f}-{ahi:.3f}); the project faster in "
                     f"{f['ahead']:.0%} of pairs; per process {' '.join(f'{x:.2f}' for x in f['per_process'])}; "
                     f"CPU seconds {f['cpu_ratio']:.3f}")
        if "hooks" in s:
            h = s["hooks"]
            L.append(f"hook overhead at {HOOK_TOKENS} tokens (run_with_cache / plain forward): project "
                     f"{h['project']['overhead']:.2f} ({h['project']['n_hooks']} hooks), TransformerLens "
                     f"TransformerBridge {h['transformer_lens']['overhead']:.2f} ({h['transformer_lens']['n_hooks']} "
                     f"hooks): {_x(h['ratio'])}")
        for n, p in s.get("payload", {}).items():
            L.append(f"payload {n} tokens: BertViz head_view {p['html_bytes'] / 1e6:.2f} MB HTML"
                     f"{' (+ a CDN)' if p['cdn'] else ''}, the project's largest figure {p['largest_bytes'] / 1e6:.3f} MB "
                     f"({p['largest_stage']}; the page's whole payload {p['page_bytes'] / 1e6:.3f} MB): {_x(p['ratio'])}")
        if "parity_512" in s:
            pr = s["parity_512"]
            L.append(f"parity at 512 tokens: max |pattern difference| {pr['max_abs']:.2e} over {pr['shape']} "
                     f"(limit {PARITY_LIMIT:g})")
    if res.get("floors"):
        L.append("")
        L.append("floors: " + ", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in res["floors"].items()))
    return "\n".join(L)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="one round, one repetition, no SmolLM2 512-token HTML")
    p.add_argument("--check", action="store_true", help="exit 1 when a floor is missed")
    p.add_argument("--threads", type=int, default=2, help="torch threads on both sides (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="fresh-process rounds per case, alternating (default 3)")
    p.add_argument("--forward-rounds", type=int, default=None,
                   help="rounds of the paired warm forward (default: --rounds); each round is two processes, one per "
                        "project variant, each holding both models")
    p.add_argument("--reps", type=int, default=3, help="the hook-overhead case runs 2N+1 repetitions per process (default 3)")
    p.add_argument("--pairs", type=int, default=10,
                   help="warm-forward pairs (project, transformers) per length per process (default 10)")
    p.add_argument("--models", default="minilm,smollm2",
                   help=f"comma-separated, from {', '.join(MODELS)} (default minilm,smollm2)")
    p.add_argument("--lengths", default="16,128,512", help="warm-forward lengths in tokens (default 16,128,512; "
                   "the cold case runs the first and the last)")
    p.add_argument("--checkpoints", type=Path, default=CHECKPOINTS,
                   help=f"where the random checkpoints are made and kept (default {CHECKPOINTS})")
    p.add_argument("--only", default="parity,hooks,payload",
                   help="optional parts besides cold/load/peak/forward: parity, hooks, payload")
    p.add_argument("--malloc", choices=("app", "default"), default="app",
                   help="the project side's malloc settings: the app's (model/runtime/malloc.py) or glibc's defaults")
    p.add_argument("--venv", type=Path, default=Path("/tmp/peers-venv"))
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker)
        return 0
    a.models = [x.strip() for x in a.models.split(",") if x.strip()]
    try:
        a.lengths = sorted({int(x) for x in a.lengths.split(",") if x.strip()})
    except ValueError:
        p.error("--lengths: comma-separated token counts")
    if "hooks" in a.only and HOOK_TOKENS not in a.lengths:
        p.error(f"the hook-overhead case (--only hooks) runs on {HOOK_TOKENS} tokens: keep it in --lengths")
    a.only = {x.strip() for x in a.only.split(",") if x.strip()}
    if set(a.models) - set(MODELS) or a.only - {"parity", "hooks", "payload"} or a.threads < 1 or a.rounds < 1 \
            or a.reps < 1 or a.pairs < 1 or (a.forward_rounds is not None and a.forward_rounds < 1) \
            or not a.lengths or min(a.lengths) < 2:
        p.error(f"--models from {', '.join(MODELS)}; --only from parity, hooks, payload; counts >= 1")
    from model import fetch

    missing = [n for n in a.models if n not in RANDOM and not fetch.is_fetched(n)]
    if missing:
        p.error(f"weights missing: run `python -m model.fetch {' '.join(missing)}` first")
    res = measure(a)
    res["floors"] = floors(res)
    print(table(res))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1, ensure_ascii=False, default=float) + "\n")
        print(f"\nwrote {a.json}")
    return 1 if a.check and not all(res["floors"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
