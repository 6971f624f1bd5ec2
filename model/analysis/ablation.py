"""Looking is not causing: what each head's output does to the model's own prediction.

    import model
    from model.analysis import ablation
    m = model.load("smollm2")
    res = ablation.head_effects(m, "The capital of France is")
    res.effect[layer][head][i]   # log p(answer_i | head ablated) − log p(answer_i), at position i
    res.answers[i]               # answer_i: the model's own top next token after position i

Every head of one attention block is ablated in turn with the existing edit (model.edits:
``ablate=BLOCK:LAYER:HEAD``, that head's z = pattern · V set to 0 at every position) and the
log-probability of the intact run's top next token is read at every position of the predicting
stack. The ablated runs are batched (one copy of the sentence a head, each row edited by that head's
own ``ablate`` hook function applied to its row alone: model.runtime.edits.hook_fns), never by
changing the model. Row 0 of the first batch is the intact run, so every number comes from the same
kind of batch.

- a decoder (SmolLM2, GPT-2, Gemma 3): its own run of the sentence; the positions are its tokens.
- an encoder–decoder (the seed, T5, Marian): the decoder reads its own greedy output (the start token
  and what it wrote, as ``run_with_cache`` shows it) under teacher forcing, and the positions are the
  decoder's; its blocks decoder.self_attn and decoder.cross_attn.
- an encoder alone predicts no token: ``AblationError``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.runtime.edits import Ablate, hook_fns
from model.runtime.hooks import hooks

DEFAULT_BATCH = 32
LOGITS_BYTES = 64 * 2**20  # a batch's logits at most (log_softmax makes one copy more: Gemma 3, 262,144 tokens, 12 positions: 5 rows)
Progress = Callable[[int, int], None]


class AblationError(ValueError):
    """The model or block has no prediction to measure (the message says why and what to do)."""


class AblationCancelled(RuntimeError):
    """``cancel()`` said stop."""


@dataclass(frozen=True)
class HeadEffects:
    """Every head of ``block``: ``effect[layer][head][i]`` = log p(answers[i]) with that head ablated
    minus log p(answers[i]) intact, at position i of the predicting stack. Tuples: hashable."""

    block: str
    text: str
    tokens: tuple[str, ...]  # the predicting stack's input, one a position
    answer_ids: tuple[int, ...]  # per position, the intact run's top next token
    answers: tuple[str, ...]
    clean_logp: tuple[float, ...]  # per position, log p(answer) intact
    effect: tuple[tuple[tuple[float, ...], ...], ...]  # (layers, heads, positions)
    forwards: int  # ablated rows run (one a head)

    @property
    def n_layers(self) -> int:
        return len(self.effect)


def _setup(m, text: str, block: str):
    """(forward(n) -> logits (n, T, V), tokens): n copies of the sentence as the predicting stack reads it."""
    info = m.info
    if info.kind == "encoder":
        raise AblationError(f"{info.name} is an encoder without an output head: it predicts no token, so "
                            f"there is no effect to measure; use a decoder (smollm2) or the seed model")
    if not block.startswith("decoder."):
        raise AblationError(f"{block}: the effect is measured on the decoder's next token; choose "
                            f"decoder.self_attn{' or decoder.cross_attn' if info.kind == 'encoder-decoder' else ''}")
    prep = m.prepare_texts([text])
    text = prep.texts[0]
    _, cache = m.run_with_cache([text], names=[])  # tokenized (and, seed, decoded) as its runs are
    if info.kind == "decoder":
        tokens = tuple(cache.tokens[0])

        def forward(n: int) -> torch.Tensor:
            return m.run([text] * n).logits  # (n, T, V)

        return forward, tokens, text
    src = torch.tensor([cache.token_ids[0]], dtype=torch.long)  # (1, S)
    tgt = torch.tensor([cache.decoder_token_ids[0]], dtype=torch.long)  # (1, T)

    def forward(n: int) -> torch.Tensor:
        return m.teacher_forced(src.expand(n, -1), tgt.expand(n, -1))  # (n, T, V)

    return forward, tuple(cache.decoder_tokens[0]), text


def n_forwards(m, block: str) -> int:
    """Ablated rows ``head_effects`` runs for ``block``: one a head of every layer."""
    from model.runtime.edits import _layers

    return len(_layers(m.hook_names, block)) * m.info.n_heads


@torch.inference_mode()
def head_effects(m, text: str, block: str | None = None, *, batch_size: int = DEFAULT_BATCH,
                 progress: Progress | None = None, cancel: Callable[[], bool] | None = None) -> HeadEffects:
    """Every head of ``block`` (default the decoder's self-attention) ablated in turn: the change of
    log p of the intact run's top next token at every position (see the module)."""
    from model.runtime.edits import _layers

    block = block or "decoder.self_attn"
    forward, tokens, text = _setup(m, text, block)
    layers = _layers(m.hook_names, block)
    if not layers:
        raise AblationError(f"{m.info.name} has no {block}; its blocks are {', '.join(m.info.blocks)}")
    stack, attn = block.split(".")
    cells = [(li, h) for li in layers for h in range(m.info.n_heads)]
    T = len(tokens)
    per_row = 4 * T * m.info.vocab_size
    batch_size = max(1, min(batch_size, LOGITS_BYTES // per_row))
    rows: list = [None] + cells  # row 0: the intact run
    logp: list[torch.Tensor] = []
    answer: torch.Tensor | None = None
    done = 0
    for start in range(0, len(rows), batch_size):
        if cancel is not None and cancel():
            raise AblationCancelled(f"stopped after {done} of {len(cells)} heads")
        chunk = rows[start: start + batch_size]
        edit: dict[str, list[tuple[int, Callable]]] = {}
        for r, cell in enumerate(chunk):
            if cell is None:
                continue
            li, h = cell
            fns = hook_fns(m, Ablate(block, li, h))  # the what-if edit itself: {hook_z name: fn}
            for name, fn in fns.items():
                edit.setdefault(name, []).append((r, fn))

        def apply(x: torch.Tensor, name: str) -> torch.Tensor:
            x = x.clone()
            for r, fn in edit[name]:
                x[r: r + 1] = fn(x[r: r + 1], name)  # that row's head, as the edit does it to a run
            return x

        with hooks({name: apply for name in edit}):
            lp = torch.log_softmax(forward(len(chunk)).float(), dim=-1)  # (n, T, V)
        if answer is None:
            answer = lp[0].argmax(-1)  # (T,) the intact run's top next token at every position
        logp.append(lp.gather(-1, answer[None, :, None].expand(lp.shape[0], -1, 1))[..., 0])  # (n, T)
        done += sum(c is not None for c in chunk)
        if progress is not None:
            progress(done, len(cells))
    at = torch.cat(logp)  # (1 + cells, T): log p(answer) of every row at every position
    clean = at[0]
    delta = (at[1:] - clean).view(len(layers), m.info.n_heads, T)  # (layers, heads, T)
    ids = [int(i) for i in answer.tolist()]
    return HeadEffects(block=block, text=text, tokens=tokens, answer_ids=tuple(ids),
                       answers=tuple(m.token_text(i) for i in ids),
                       clean_logp=tuple(float(v) for v in clean.tolist()),
                       effect=tuple(tuple(tuple(float(v) for v in head) for head in layer) for layer in delta.tolist()),
                       forwards=len(cells))


__all__ = ["HeadEffects", "AblationError", "AblationCancelled", "head_effects", "n_forwards"]
