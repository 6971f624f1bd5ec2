"""What each what-if edit does to the shipped models' outputs, measured (Markdown tables).

    OMP_NUM_THREADS=1 python scripts/edit_consequences.py            # seed models only
    OMP_NUM_THREADS=1 python scripts/edit_consequences.py --all      # + MiniLM and SmolLM2 (fetched)

seed / seed-sort: what the model writes, intact and edited, and how many characters match the
intact output position by position. MiniLM: the cosine between the intact and the edited
sentence embedding (mean over real tokens, normalised, as sentence-transformers does).
SmolLM2: the top next token and its probability, and KL(intact ‖ edited) of the next-token
distribution in nats.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import model  # noqa: E402
from model import fetch  # noqa: E402

SEED_EDITS = ["", "ablate=decoder.cross_attn:1:*", "ablate=decoder.cross_attn:1:0",
              "ablate=decoder.cross_attn:0:*", "ablate_mean=decoder.cross_attn:1:*",
              "ablate=encoder.self_attn:0:*", "ablate=decoder.self_attn:1:*", "no_position",
              "no_causal", "temperature=4", "temperature=0.25", "no_scale", "scale=0.5"]
SORT_EDITS = ["", "ablate=decoder.cross_attn:1:*", "ablate=decoder.cross_attn:0:*",
              "ablate=decoder.cross_attn:0:*,ablate=decoder.cross_attn:1:*", "no_position", "no_causal",
              "temperature=4", "no_scale"]


def same_chars(a: str, b: str) -> str:
    n = sum(x == y for x, y in zip(a, b))
    return f"{n}/{max(len(a), len(b))}"


def seed_table(name: str, text: str, edits: list[str], batch_with: str) -> None:
    m = model.load(name)
    intact = m.run([text]).generated[0]
    print(f"\n### {name}: {text!r} (intact: {intact!r})\n")
    print("| edits | output | chars as intact |\n|---|---|---|")
    for e in edits:
        out = m.run([text], edits=e).generated[0]
        print(f"| `{e or '(none)'}` | `{out}` | {same_chars(out, intact)} |")
    alone = m.run([batch_with]).generated[0]
    for e in ("", "no_padding"):
        out = m.run([text, batch_with], edits=e).generated
        print(f"| `{e or '(none)'}`, batch [{text!r}, {batch_with!r}] | `{out[0]}` / `{out[1]}` | "
              f"{same_chars(out[0], intact)} / {same_chars(out[1], alone)} (short one vs alone) |")


def embedding(m, texts, edits=""):
    out, cache = m.run_with_cache(texts, edits=edits, names=[])
    real = torch.tensor([[j < len(t) for j in range(out.hidden.shape[1])] for t in cache.token_ids])
    v = (out.hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True)
    return torch.nn.functional.normalize(v, dim=-1)


def minilm_table() -> None:
    if not fetch.is_fetched("minilm"):
        print("\n(minilm not fetched)")
        return
    m = model.load("minilm")
    text, long = "The cat sat on the mat.", "A considerably longer sentence about attention in transformers."
    a, b = "the dog bit the man", "the man bit the dog"
    print(f"\n### minilm: cosine(intact, edited) of {text!r}; cosine({a!r}, {b!r})\n")
    print("| edits | cos(intact, edited) | cos(a, b) under the edits |\n|---|---|---|")
    base = embedding(m, [text])
    for e in ["", "no_position", "ablate=encoder.self_attn:0:*", "ablate=encoder.self_attn:5:*",
              "ablate_mean=encoder.self_attn:0:*", "temperature=4", "temperature=0.25", "no_scale"]:
        cos = (embedding(m, [text], e) * base).sum().item()
        ab = embedding(m, [a, b], e)
        print(f"| `{e or '(none)'}` | {cos:.4f} | {(ab[0] * ab[1]).sum().item():.4f} |")
    for e in ("", "no_padding"):
        v = embedding(m, [long, text], e)[1]
        print(f"| `{e or '(none)'}`, in a batch after a longer sentence | "
              f"{(v * base[0]).sum().item():.4f} | |")


def smollm2_table() -> None:
    if not fetch.is_fetched("smollm2"):
        print("\n(smollm2 not fetched)")
        return
    m = model.load("smollm2")
    text, long = "The capital of France is", "Here is a much longer first sentence that pads the batch, so"

    def next_token(edits="", batch=None):
        texts = [text] if batch is None else [batch, text]
        out, cache = m.run_with_cache(texts, edits=edits, names=[])
        i = len(texts) - 1
        return torch.log_softmax(out.logits[i, len(cache.token_ids[i]) - 1], -1)

    base = next_token()
    top = base.exp().topk(5)
    tops = ", ".join(f"{m.token_text(int(t))!r} {p:.3f}" for p, t in zip(top.values.tolist(), top.indices))
    print(f"\n### smollm2: next token after {text!r} (intact top 5: {tops})\n")
    print("| edits | top next token | its probability | KL(intact ‖ edited), nats |\n|---|---|---|---|")
    rows = [(e, next_token(e)) for e in ["", "no_causal", "no_position", "temperature=4", "temperature=0.25",
                                          "no_scale", "ablate=decoder.self_attn:0:*",
                                          "ablate=decoder.self_attn:15:*", "ablate=decoder.self_attn:29:*",
                                          "ablate_mean=decoder.self_attn:0:*"]]
    rows += [(f"{e or '(none)'}, in a batch after a longer sentence", next_token(e, long))
             for e in ("", "no_padding")]
    for e, logp in rows:
        p, t = logp.exp().max(-1)
        kl = (base.exp() * (base - logp)).sum().item()
        kl = 0.0 if abs(kl) < 5e-5 else kl  # float rounding of an unchanged distribution
        label = e if "batch" in e else f"`{e or '(none)'}`"
        print(f"| {label} | {m.token_text(int(t))!r} | {p.item():.3f} | {kl:.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="also MiniLM and SmolLM2 (fetched weights)")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    seed_table("seed", "attention is all you need", SEED_EDITS, "hello")
    seed_table("seed-sort", "thequickbrownfox", SORT_EDITS, "zebra")
    if args.all:
        minilm_table()
        smollm2_table()


if __name__ == "__main__":
    main()
