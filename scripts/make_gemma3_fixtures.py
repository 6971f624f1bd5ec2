"""Write the Gemma 3 parity fixtures (tests/fixtures/gemma3/) by running the reference `transformers`.

The project never depends on `transformers`. To show that `model.load("gemma3")` computes what the
reference computes from the same fetched GGUF, this script runs transformers once, in a throwaway
virtual environment (eager attention, float32; transformers dequantizes the GGUF with its own code
and builds its tokenizer from the GGUF metadata), and commits what it saw:

    tokens.json          the token ids of English, Korean, code and emoji sentences
    gemma3.json          per sentence: ids, top-5 next tokens (ids, logits); the long input's text,
                         ids, chosen layers and rows, top-5
    gemma3.safetensors   every layer's pattern (float16) of the short sentences; of the long input
                         (about 1,100 tokens, past the 512-token window) only the chosen rows of a few
                         local and global layers

`tests/test_gemma3.py` compares the project against these files.

Regenerate (needs the fetched weights; about five minutes on 2 CPU cores):

    python -m model.fetch gemma3
    python scripts/make_gemma3_fixtures.py            # makes or reuses /tmp/family-venv

The venv is made as scripts/make_parity_fixtures.py makes its own (``--system-site-packages``,
the pinned transformers and accelerate, torch pinned by a constraints file).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "gemma3"
SHORT = [  # every layer's pattern is kept for these
    "Paris is the capital of France, and Seoul is the capital of",
    "The cat sat on the mat because it was tired.",
    "나는 어제 도서관에서 트랜스포머 논문을 읽었다.",
    "서울은 대한민국의 수도이고, 파리는 프랑스의",
]
TOKENS_ONLY = [  # token ids only: code, emoji, mixed scripts, spaces
    "def attention(q, k, v):\n    return softmax(q @ k.T / sqrt(d)) @ v  # 😀🚀",
    "🙂👍🏽 안녕하세요 여러분! 오늘은 어텐션을 배워요.",
    "  two  spaces, a\ttab and ünïcödé — “quotes” … 日本語も。",
    "x = [i**2 for i in range(10)]  // 한국어 주석",
    "ꙮ (the multiocular O), 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and 𐍈: characters the vocabulary spells in bytes",
]
LONG_TOKENS = 1100  # the long input: whole sentences until at least this many tokens
LONG_LAYERS = (0, 4, 5, 11, 17)  # local, local, global, global, global (every 6th layer is global)
LONG_ROWS = (600, 1000, -1)  # queries past the 512-token window
TOP = 5


def long_text(count) -> str:
    """Whole sentences of tests/data/natural_sentences.txt, over and over, until ``count(text)`` >= LONG_TOKENS."""
    lines = [s.strip() for s in (ROOT / "tests" / "data" / "natural_sentences.txt").read_text().splitlines() if s.strip()]
    text, i = "", 0
    while count(text) < LONG_TOKENS:
        text = (text + " " + lines[i % len(lines)]).strip()
        i += 1
    return text


# --- inside the venv --------------------------------------------------------------------------
def run_reference(out_dir: Path) -> None:
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(ROOT))
    from model import fetch

    torch.manual_seed(0)
    if not fetch.is_fetched("gemma3"):
        sys.exit(f"the gemma3 weights are missing: run `{fetch.fetch_command('gemma3')}` first")
    folder = fetch.model_dir("gemma3")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fetch.GEMMA3_FILE)
    ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fetch.GEMMA3_FILE, dtype=torch.float32,
                                               attn_implementation="eager").eval()
    out_dir.mkdir(parents=True, exist_ok=True)

    def ids_of(text: str) -> list[int]:
        return tok(text)["input_ids"]

    tokens = {s: {"ids": ids_of(s), "pieces": tok.convert_ids_to_tokens(ids_of(s))} for s in SHORT + TOKENS_ONLY}
    (out_dir / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False, indent=1) + "\n")

    def run(ids: list[int]):
        with torch.inference_mode():
            return ref(input_ids=torch.tensor([ids]), output_attentions=True)

    def top5(logits: torch.Tensor) -> dict:
        v, i = logits.topk(TOP)
        return {"ids": i.tolist(), "logits": v.tolist(), "pieces": tok.convert_ids_to_tokens(i.tolist())}

    tensors, short = {}, []
    for b, s in enumerate(SHORT):
        ids = ids_of(s)
        out = run(ids)
        tensors[f"short.{b}"] = torch.stack([a[0] for a in out.attentions]).half()  # (L, H, T, T)
        short.append({"text": s, "ids": ids, "top5": top5(out.logits[0, -1])})
        print(f"{s!r}: {len(ids)} tokens, next {short[-1]['top5']['pieces']}", flush=True)

    text = long_text(lambda t: len(ids_of(t)))
    ids = ids_of(text)
    out = run(ids)
    T = len(ids)
    rows = [r % T for r in LONG_ROWS]
    tensors["long.rows"] = torch.stack([out.attentions[i][0][:, rows] for i in LONG_LAYERS]).half()  # (5, H, 3, T)
    long = {"text": text, "ids": ids, "layers": list(LONG_LAYERS), "rows": rows, "top5": top5(out.logits[0, -1])}
    print(f"long input: {T} tokens, next {long['top5']['pieces']}", flush=True)
    summary = {"transformers": transformers.__version__, "torch": torch.__version__,
               "gguf_sha256": fetch.SOURCES["gemma3"].sha256, "attn_implementation": "eager", "dtype": "float32",
               "layer_types": list(ref.config.layer_types), "sliding_window": ref.config.sliding_window,
               "short": short, "long": long}
    (out_dir / "gemma3.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out_dir / "gemma3.safetensors"))
    size = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"wrote {out_dir} ({size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/family-venv"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--reference", action="store_true",
                        help="(internal) run the reference; needs transformers importable")
    args = parser.parse_args()
    if args.reference:
        run_reference(args.out)
        return
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_parity_fixtures import ensure_venv

    python = ensure_venv(args.venv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([str(python), __file__, "--reference", "--out", str(args.out)], check=True, env=env)


if __name__ == "__main__":
    main()
