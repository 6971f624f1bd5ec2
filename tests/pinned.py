"""Every shipped model's outputs, pinned: what the code computed when the file was written, kept in
tests/fixtures/pinned/<model>.safetensors so that a rewrite of the model code (issue "One path")
shows it computes the same numbers (tests/test_pinned.py).

    python tests/pinned.py                 # write the pins of every shipped, fetched model
    python tests/pinned.py seed smollm2    # only these

What a pin holds, for TEXTS (a padded batch, English and Korean):
- the token ids and the tokens as shown, per sentence (and the decoder's, with what an
  encoder–decoder wrote): compared exactly;
- every hook tensor of the last block of each stack, and every hook outside the blocks;
- the logits at every position, on the ids that are among the 10 most likely anywhere plus 64
  fixed ids (the whole vocabulary of Gemma 3 alone would be 1 MB a row);
- a decoding of 5 tokens (decoders and encoder–decoders): the ids written (exactly), the
  probabilities of the 5 candidates of every step, and the last block's pattern at each step.
The file's metadata says the revision that wrote it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PINNED = ROOT / "tests" / "fixtures" / "pinned"
SHIPPED = ("seed", "seed-sort", "minilm", "smollm2", "gemma3")
TEXTS = ["The cat sat on the mat.", "나는 학교에 간다", "hi"]
DECODE_TEXTS = TEXTS[:2]
NEW_TOKENS = 5
TOP_LOGITS = 10
FIXED_IDS = 64


def pinned_hooks(m) -> list[str]:
    """Every hook outside the blocks, and every hook of the last block of each stack (which every block
    before it feeds: the same code computes them all)."""
    info = m.info
    ends = {"encoder": (info.n_layers - 1,),
            "decoder": ((info.n_decoder_layers or info.n_layers) - 1,)}
    out = []
    for name in m.hook_names:
        stack, _, rest = name.partition(".")
        if not rest.startswith("blocks."):
            out.append(name)
            continue
        layer = int(rest.split(".")[1])
        if layer in ends[stack]:
            out.append(name)
    return out


def logit_ids(logits: torch.Tensor, vocab: int) -> torch.Tensor:
    """The vocabulary ids whose logits are pinned: the TOP_LOGITS most likely at any position of any
    sentence, and FIXED_IDS ids drawn with a fixed generator."""
    top = logits.topk(min(TOP_LOGITS, vocab), dim=-1).indices.flatten()
    fixed = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[:FIXED_IDS]
    return torch.unique(torch.cat([top, fixed]))


def record(m, edits: str | None = None, ids: torch.Tensor | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, facts) of one model on TEXTS, as described in the module. ``ids``: the vocabulary ids
    whose logits to keep (a pin's ``logit_ids``; default chosen by ``logit_ids``); ``edits``: a
    deliberate mistake, for the test that shows a wrong computation fails the comparison."""
    names = pinned_hooks(m)
    out, cache = m.run_with_cache(TEXTS, names=names, edits=edits)
    tensors = {f"hook/{n}": cache[n].clone(memory_format=torch.contiguous_format) for n in names}  # clone: hooks may share memory
    facts: dict = {"tokens": cache.tokens, "token_ids": cache.token_ids, "hooks": names}
    if cache.decoder_token_ids is not None:
        facts["decoder_tokens"], facts["decoder_token_ids"] = cache.decoder_tokens, cache.decoder_token_ids
    if out.generated is not None:
        facts["generated"] = out.generated
    if out.logits is not None:
        ids = logit_ids(out.logits, m.info.vocab_size) if ids is None else ids
        tensors["logit_ids"] = ids
        tensors["logits"] = out.logits[..., ids].contiguous()
    if out.hidden is not None and m.info.kind == "encoder":  # an encoder's output (a decoder's: its logits)
        tensors["hidden"] = out.hidden.contiguous()
    if m.info.kind != "encoder":
        stack = "decoder"
        last = (m.info.n_decoder_layers or m.info.n_layers) - 1
        pattern = f"{stack}.blocks.{last}.self_attn.hook_pattern"
        trace = m.generate_with_cache(DECODE_TEXTS, max_new_tokens=NEW_TOKENS, names=[pattern])
        facts["decode"] = {"token_ids": trace.token_ids, "generated": trace.generated,
                           "top_ids": [t.ids.tolist() for t in trace.top], "pattern": pattern}
        tensors["decode/top_probs"] = torch.stack([t.probs for t in trace.top]).contiguous()
        for i, step in enumerate(trace.steps):
            tensors[f"decode/step{i}"] = step[pattern].clone(memory_format=torch.contiguous_format)
    return tensors, facts


def revision() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def path_of(name: str) -> Path:
    return PINNED / f"{name}.safetensors"


def write(name: str) -> Path:
    import model
    from safetensors.torch import save_file

    m = model.load(name)
    tensors, facts = record(m)
    PINNED.mkdir(parents=True, exist_ok=True)
    meta = {"facts": json.dumps(facts, ensure_ascii=False), "revision": revision(), "texts": json.dumps(TEXTS)}
    save_file(tensors, str(path_of(name)), metadata=meta)
    return path_of(name)


def read(name: str) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors import safe_open

    with safe_open(str(path_of(name)), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return tensors, json.loads(meta["facts"])


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name in sys.argv[1:] or SHIPPED:
        print(write(name), path_of(name).stat().st_size, "bytes")
