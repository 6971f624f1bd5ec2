"""Write the parity fixtures (tests/fixtures/parity/) by running the reference `transformers`.

The project never depends on `transformers`. To prove that its own BERT and Llama code
matches the reference, this script runs the reference once, in a throwaway virtual
environment, on a few short sentences (English and Korean, as one padded batch) and commits
what it saw: token ids, the attention pattern of every layer and head (float16, unpadded
per sentence) and, for the decoder, the next-token argmax at every position.
`tests/test_parity.py` compares the project's models against these files.

Regenerate (needs the fetched weights; a few minutes on 2 CPU cores):

    python -m model.fetch minilm smollm2
    python scripts/make_parity_fixtures.py

The script creates /tmp/parity-venv (``--venv`` to change) with ``--system-site-packages`` so
that the installed torch is reused, installs the pinned transformers (and accelerate,
which it needs for GGUF) there (never into the
project's environment; torch is pinned by a constraints file so pip never replaces it), then
re-runs itself inside it with ``--reference``. That run also loads the project's models and
prints the measured max errors in float32. Delete the venv afterwards if you like.

The reference loads the same files the project does: the MiniLM folder (config.json,
model.safetensors, tokenizer.json) and the SmolLM2 GGUF (transformers dequantizes it with
its own code and builds its tokenizer from the GGUF metadata).
Known difference, hence no digits in the sentences: for `tokenizer.ggml.pre = "smollm"`
transformers 5.23 splits digits like GPT-2 ("2024" stays whole), while llama.cpp and
SmolLM2's own tokenizer.json split digits one by one; the project follows llama.cpp.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity"
TRANSFORMERS = "transformers==5.23.0"
ACCELERATE = "accelerate==1.15.0"  # transformers needs it to load a GGUF
SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "나는 학교에 간다.",
    "Attention is all you need.",
]
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


# --- outside: make the venv and re-run inside it ---------------------------------------------
def ensure_venv(venv: Path) -> Path:
    import torch

    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    check = "import accelerate, transformers; print(transformers.__version__, accelerate.__version__)"
    has = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    wanted = f"{TRANSFORMERS.split('==')[1]} {ACCELERATE.split('==')[1]}"
    if has.stdout.strip() != wanted:
        constraints = venv / "constraints.txt"  # pip must never replace the project's torch
        constraints.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints),
                        TRANSFORMERS, ACCELERATE], check=True)
    return python


# --- inside: the reference -----------------------------------------------------------------
def reference_minilm(folder: Path) -> tuple[dict, dict]:
    import torch
    from transformers import AutoTokenizer, BertModel

    tok = AutoTokenizer.from_pretrained(folder)
    ref = BertModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ref(**batch, output_attentions=True)
    lengths = batch["attention_mask"].sum(-1).tolist()
    ids = [batch["input_ids"][b, :n].tolist() for b, n in enumerate(lengths)]
    attn = torch.stack(out.attentions, dim=1)  # (B, L, H, T, T)
    tensors = {}
    for b, n in enumerate(lengths):
        tensors[f"pattern.{b}"] = attn[b, :, :, :n, :n].contiguous()  # (L, H, n, n)
        tensors[f"hidden.{b}"] = out.last_hidden_state[b, :n].contiguous()  # (n, d)
    return {"token_ids": ids}, tensors


def reference_smollm2(gguf: Path) -> tuple[dict, dict]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.padding_side = "right"
    ref = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                               attn_implementation="eager").eval()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = ref(**batch, output_attentions=True)
    lengths = batch["attention_mask"].sum(-1).tolist()
    ids = [batch["input_ids"][b, :n].tolist() for b, n in enumerate(lengths)]
    attn = torch.stack(out.attentions, dim=1)  # (B, L, H, T, T)
    top2 = out.logits.topk(2, dim=-1).values  # (B, T, 2)
    tensors = {}
    for b, n in enumerate(lengths):
        tensors[f"pattern.{b}"] = attn[b, :, :, :n, :n].contiguous()  # (L, H, n, n)
        tensors[f"argmax.{b}"] = out.logits[b, :n].argmax(-1).to(torch.int32)  # (n,)
        tensors[f"margin.{b}"] = (top2[b, :n, 0] - top2[b, :n, 1]).contiguous()  # (n,)
    return {"token_ids": ids}, tensors


def measure(name: str, meta: dict, tensors: dict) -> dict:
    """The project's model against the float32 reference, before rounding to float16."""
    import torch

    sys.path.insert(0, str(ROOT))
    import model

    m = model.load(name)
    out, cache = m.run_with_cache(SENTENCES)
    result = {"token_ids_equal": cache.token_ids == meta["token_ids"], "pattern_max_abs": 0.0}
    for b, ids in enumerate(meta["token_ids"]):
        n = len(ids)
        ours = torch.stack([cache[f"{m.info.stacks[0]}.blocks.{i}.self_attn.hook_pattern"][b, :, :n, :n]
                            for i in range(m.info.n_layers)])  # (L, H, n, n)
        err = (ours - tensors[f"pattern.{b}"]).abs().max().item()
        result["pattern_max_abs"] = max(result["pattern_max_abs"], err)
        if out.logits is not None:
            same = (out.logits[b, :n].argmax(-1) == tensors[f"argmax.{b}"]).all().item()
            result.setdefault("argmax_equal", True)
            result["argmax_equal"] &= bool(same)
        if out.hidden is not None and f"hidden.{b}" in tensors:
            err = (out.hidden[b, :n] - tensors[f"hidden.{b}"]).abs().max().item()
            result["hidden_max_abs"] = max(result.get("hidden_max_abs", 0.0), err)
    return result


def run_reference(out_dir: Path) -> None:
    import torch
    import transformers
    from safetensors.torch import save_file

    sys.path.insert(0, str(ROOT))
    from model import fetch

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {"sentences": SENTENCES, "transformers": transformers.__version__,
               "torch": torch.__version__, "models": {}}
    jobs = {"minilm": lambda: reference_minilm(fetch.model_dir("minilm")),
            "smollm2": lambda: reference_smollm2(fetch.model_dir("smollm2") / GGUF_FILE)}
    for name, job in jobs.items():
        if not fetch.is_fetched(name):
            sys.exit(f"the {name} weights are missing: run `{fetch.fetch_command(name)}` first")
        meta, tensors = job()
        measured = measure(name, meta, tensors)
        print(f"{name}: {json.dumps(measured)}")
        meta["measured_float32"] = measured
        summary["models"][name] = meta
        small = {k: (v.half() if v.is_floating_point() else v) for k, v in tensors.items()}
        save_file(small, str(out_dir / f"{name}.safetensors"))
    (out_dir / "parity.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"wrote {out_dir} ({size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/parity-venv"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--reference", action="store_true",
                        help="(internal) run the reference; needs transformers importable")
    args = parser.parse_args()
    if args.reference:
        run_reference(args.out)
        return
    python = ensure_venv(args.venv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([str(python), __file__, "--reference", "--out", str(args.out)], check=True, env=env)


if __name__ == "__main__":
    main()
