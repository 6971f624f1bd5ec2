"""Activation patching: where in the network does the clean sentence's answer live?

    import model
    from model.analysis import patching
    m = model.load("smollm2")
    res = patching.patch_positions(m, "The capital of France is", "The capital of Italy is")
    res.logp            # (layers, positions): log p(answer) of the corrupted run, one cell patched
    res.clean_logp      # log p(answer) of the clean run; res.corrupted_logp: of the corrupted run
    heads = patching.patch_heads(m, clean, corrupted)   # (layers, heads)

The clean run is read once (its hooks kept); then, for every cell, the corrupted sentence runs with
that one cell taken from the clean run, and the log-probability of the clean run's top next token
("the answer") is read at the scored position. A cell is

- ``patch_positions``: one layer's ``{stack}.blocks.{L}.hook_resid_post`` at one position: the
  whole residual stream of that token after block L;
- ``patch_heads``: one head's ``hook_z`` (pattern · V) of one layer of an attention block, at every
  position.

The two sentences must have the same number of tokens (position i of one is position i of the
other), else ``PatchingError`` says so. The patched forwards are batched: many copies of the
corrupted sentence in one batch, each row patched at its own cell by a hook function on the hook
points (model/runtime/hooks.py), never by changing the model. ``progress(done, total)`` is called after
each batch; ``cancel()`` is asked between batches (True: ``PatchingCancelled``); ``max_forwards``
bounds the patched forwards (past it: ``PatchingTooLarge`` before anything runs).

Which position is scored:
- a decoder (SmolLM2): the sentence's last token; the answer is what the clean run predicts next.
- an encoder–decoder (the seed, T5, Marian): its decoder predicts. The decoder reads the clean run's
  own output under teacher forcing (its start token + what the clean run writes greedily; the
  common interface of model/arch/generic.py: ``greedy``, ``decoder_input``, ``teacher_forced``), cut right after the first place
  where the corrupted sentence would make it write another token: the scored position is the
  decoder's last position of that input, and the answer the clean run's token there. When the two
  sentences make it write the same text, the decoder input is the whole output and the answer is
  end token. Both runs read the same decoder input, so the decoder positions line up too.
- an encoder alone (MiniLM) predicts no token: it has no output head, so there is nothing to score
  (``PatchingError``).

The stack patched: a decoder's own; for an encoder–decoder, ``stack="encoder"`` (default: positions are the
sentence's tokens, where the two sentences differ) or ``"decoder"`` (the decoder input's positions).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.runtime.hooks import capture, hooks

DEFAULT_BATCH = 32
LOGITS_BYTES = 256 * 2**20  # a batch's logits at most (SmolLM2: 32 rows of up to 42 tokens)
Progress = Callable[[int, int], None]


class PatchingError(ValueError):
    """The two sentences or the model do not allow patching (the message says why and what to do)."""


class PatchingCancelled(RuntimeError):
    """``cancel()`` said stop; nothing is returned."""


class PatchingTooLarge(PatchingError):
    """More patched forwards than ``max_forwards`` allows."""

    def __init__(self, needed: int, bound: int) -> None:
        self.needed, self.bound = needed, bound
        super().__init__(f"patching needs {needed} forward passes, more than the {bound} allowed here; "
                         f"use shorter sentences or run the explorer on your own machine")


@dataclass(frozen=True)
class PatchResult:
    """One patching experiment. ``logp[r][c]``: log p(answer) at the scored position of the corrupted
    run with cell (row r, column c) taken from the clean run. Rows are layers; columns positions
    (``kind="positions"``) or heads (``kind="heads"``). Tuples, so the result is hashable (a cache key)."""

    kind: str  # "positions" | "heads"
    stack: str  # the stack whose layers are the rows
    block: str  # heads: "{stack}.{attn}" whose hook_z is patched; positions: ""
    logp: tuple[tuple[float, ...], ...]
    clean_logp: float
    corrupted_logp: float
    answer_id: int
    answer: str  # the answer token as people read it (model.token_text)
    clean_tokens: tuple[str, ...]  # the positions' tokens (of the patched stack) in each run
    corrupted_tokens: tuple[str, ...]
    scored: int  # the scored position (the last one of the input the predicting stack reads)
    context: tuple[str, ...]  # the tokens the predicting stack reads, up to the scored position
    forwards: int  # patched forward passes run
    texts: tuple[str, str]  # (clean, corrupted)

    @property
    def n_layers(self) -> int:
        return len(self.logp)

    def rows(self) -> list[tuple[int, int, float]]:
        """(layer, position or head, logp), one per cell, layer by layer."""
        return [(li, j, v) for li, row in enumerate(self.logp) for j, v in enumerate(row)]


class _Setup:
    """The two sentences as the model reads them, and a forward pass that scores a batch."""

    def __init__(self, m, clean: str, corrupted: str, stack: str | None) -> None:
        info = m.info
        if info.kind == "encoder":
            raise PatchingError(f"{info.name} is an encoder without an output head: it predicts no next "
                                f"token, so there is no answer to score; patch a decoder (smollm2) or the "
                                f"seed model")
        prep = m.prepare_texts([clean, corrupted])
        self.m, self.kind = m, info.kind
        self.texts = tuple(prep.texts)
        text = m.token_text
        if info.kind == "decoder":  # any decoder family: its own runs, through m.run (see forward)
            self.stack = "decoder"
            if stack not in (None, "decoder"):
                raise PatchingError(f"{info.name} has one stack, 'decoder', not {stack!r}")
            _, cache = m.run_with_cache(list(prep.texts), names=[])  # tokenized as its runs are
            a, b = cache.token_ids
            self.src_tokens = (list(cache.tokens[0]), list(cache.tokens[1]))
        else:
            if not hasattr(m, "teacher_forced"):
                raise PatchingError(f"{info.name} does not offer teacher forcing (model/arch/generic.py's "
                                    f"encoder–decoder interface), which patching an encoder–decoder needs")
            encs, _src, _real, _ = m.source(list(prep.texts))
            self.stack = stack or "encoder"
            if self.stack not in ("encoder", "decoder"):
                raise PatchingError(f"stack must be 'encoder' or 'decoder', not {stack!r}")
            a, b = encs[0].ids, encs[1].ids
            self.src_tokens = ([text(i) for i in a], [text(i) for i in b])
        if len(a) != len(b):
            raise PatchingError(f"the two sentences must have the same number of tokens, so that position "
                                f"i of one is position i of the other: the first has {len(a)}, the second "
                                f"{len(b)}; change a word for one of as many tokens")
        self.ids = torch.tensor([a, b], dtype=torch.long)  # (2, T): clean, corrupted
        if info.kind == "encoder-decoder":
            self._teacher_forcing()
        else:
            self.scored = len(a) - 1
            self.context = tuple(self.src_tokens[0])
        self.n_layers = info.n_layers if self.stack == "encoder" or info.kind == "decoder" else info.n_decoder_layers

    def _teacher_forcing(self) -> None:
        """An encoder–decoder: the decoder input both runs read, and the scored position (see the module)."""
        m = self.m
        max_new = min(self.ids.shape[1] + 8, m.info.max_len - 1)  # as run_with_cache
        written = m.greedy(self.ids[:1], max_new)[0]  # the clean run's text, without its end token
        tgt = torch.tensor(m.decoder_input([written]))  # (1, T): the start token, then what it wrote
        logits = m.teacher_forced(self.ids, tgt.expand(2, -1))  # (2, T, V): both sentences, the clean output
        choice = logits.argmax(-1)  # (2, T)
        differ = (choice[0] != choice[1]).nonzero()
        j = int(differ[0, 0]) if len(differ) else tgt.shape[1] - 1
        self.tgt = tgt[:, : j + 1]  # (1, j + 1): the scored position is its last
        self.scored = j
        self.context = tuple(m.token_text(i) for i in self.tgt[0].tolist())
        if self.stack == "decoder":
            toks = tuple(self.context)
            self.src_tokens = (list(toks), list(toks))

    def tokens(self) -> tuple[list[str], list[str]]:
        return self.src_tokens

    @property
    def positions(self) -> int:
        """The positions of the predicting stack's input (its logits are (n, this, V) a forward)."""
        return self.ids.shape[1] if self.kind == "decoder" else self.tgt.shape[1]

    def forward(self, which: int, n: int) -> torch.Tensor:
        """n copies of sentence ``which`` (0 clean, 1 corrupted) -> log-probabilities (n, V) at the scored
        position. The same length, so a batch of them has no padding: row i is the sentence alone."""
        if self.kind == "decoder":
            logits = self.m.run([self.texts[which]] * n).logits  # (n, T, V)
        else:
            logits = self.m.teacher_forced(self.ids[which: which + 1].expand(n, -1), self.tgt.expand(n, -1))  # (n, T_dec, V)
        return torch.log_softmax(logits[:, self.scored].float(), dim=-1)  # (n, V)


def _run(m, clean: str, corrupted: str, *, kind: str, stack: str | None, block: str | None,
         batch_size: int, progress: Progress | None, cancel: Callable[[], bool] | None,
         max_forwards: int | None) -> PatchResult:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, not {batch_size!r}")
    with torch.inference_mode():
        s = _Setup(m, clean, corrupted, stack if kind == "positions" else (block or "").split(".")[0] or None)
        info = m.info
        if kind == "positions":
            names = [f"{s.stack}.blocks.{li}.hook_resid_post" for li in range(s.n_layers)]
            n_cols = s.ids.shape[1] if s.stack == "encoder" or s.kind == "decoder" else s.scored + 1
        else:
            block = block or f"{s.stack}.self_attn"
            st, attn = block.split(".")
            names = [f"{st}.blocks.{li}.{attn}.hook_z" for li in range(s.n_layers)]
            n_cols = info.n_heads
        missing = [n for n in names if n not in m.hook_names]
        if missing:
            raise PatchingError(f"{info.name} has no hook {missing[0]}; its blocks are {', '.join(info.blocks)}")
        cells = [(li, c) for li in range(len(names)) for c in range(n_cols)]
        if max_forwards is not None and len(cells) > max_forwards:
            raise PatchingTooLarge(len(cells), max_forwards)

        clean_store: dict[str, torch.Tensor] = {}
        with hooks(capture(names, clean_store)):
            clean_lp = s.forward(0, 1)[0]  # (V,) the clean run, its hooks kept
        answer = int(clean_lp.argmax())
        corrupted_lp = float(s.forward(1, 1)[0, answer])
        # every patched forward computes logits at every position: rows × positions × vocabulary floats
        batch_size = max(1, min(batch_size, LOGITS_BYTES // (4 * s.positions * info.vocab_size)))
        clean_of = {n: clean_store[n][0] for n in names}  # (T, d) or (heads, T, hs)

        out = torch.empty(len(cells))
        done = 0
        for start in range(0, len(cells), batch_size):
            if cancel is not None and cancel():
                raise PatchingCancelled(f"patching stopped after {done} of {len(cells)} forward passes")
            chunk = cells[start: start + batch_size]
            rows: dict[str, list[tuple[int, int]]] = {}
            for r, (li, c) in enumerate(chunk):
                rows.setdefault(names[li], []).append((r, c))

            def patch(x: torch.Tensor, name: str) -> torch.Tensor:
                x = x.clone()
                src = clean_of[name]
                for r, c in rows[name]:  # positions: x[r, c] (d,) one token's stream;
                    x[r, c] = src[c]  # heads: (T, hs) one head at every position
                return x

            with hooks({name: patch for name in rows}):
                lp = s.forward(1, len(chunk))[:, answer]  # (n,) copies of the corrupted sentence, patched
            out[start: start + len(chunk)] = lp
            done += len(chunk)
            if progress is not None:
                progress(done, len(cells))
    grid = out.view(len(names), n_cols).tolist()
    toks = s.tokens()
    return PatchResult(kind=kind, stack=s.stack, block=block if kind == "heads" else "",
                       logp=tuple(tuple(float(v) for v in row) for row in grid),
                       clean_logp=float(clean_lp[answer]), corrupted_logp=corrupted_lp, answer_id=answer,
                       answer=m.token_text(answer), clean_tokens=tuple(toks[0][:n_cols if kind == "positions" else None]),
                       corrupted_tokens=tuple(toks[1][:n_cols if kind == "positions" else None]),
                       scored=s.scored, context=s.context, forwards=len(cells), texts=s.texts)


def count_forwards(m, clean: str, corrupted: str, kind: str = "positions", stack: str | None = None) -> int:
    """How many patched forward passes ``patch_positions`` / ``patch_heads`` would run (tokenizes only;
    the seed's decoder stack needs its decoding, so it is counted at its longest)."""
    info = m.info
    if info.kind == "encoder":
        return 0
    if kind == "heads":
        layers = info.n_decoder_layers if (stack == "decoder" and info.kind == "encoder-decoder") else info.n_layers
        return layers * info.n_heads
    n = len(m.tokenizer.encode([clean])[0].ids)
    if info.kind == "encoder-decoder" and stack == "decoder":
        return info.n_decoder_layers * (n + 9)
    return info.n_layers * max(n, 1)


def patch_positions(m, clean: str, corrupted: str, *, stack: str | None = None, batch_size: int = DEFAULT_BATCH,
                    progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
                    max_forwards: int | None = None) -> PatchResult:
    """Every layer × position: the corrupted run with that layer's ``hook_resid_post`` at that position
    taken from the clean run; log p(the clean run's answer) at the scored position (see the module)."""
    return _run(m, clean, corrupted, kind="positions", stack=stack, block=None, batch_size=batch_size,
                progress=progress, cancel=cancel, max_forwards=max_forwards)


def patch_heads(m, clean: str, corrupted: str, *, block: str | None = None, batch_size: int = DEFAULT_BATCH,
                progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
                max_forwards: int | None = None) -> PatchResult:
    """Every layer × head of ``block`` (default: the patched stack's self-attention): the corrupted run
    with that head's ``hook_z`` (every position) taken from the clean run; log p(answer) as above."""
    return _run(m, clean, corrupted, kind="heads", stack=None, block=block, batch_size=batch_size,
                progress=progress, cancel=cancel, max_forwards=max_forwards)


def patch(m, clean: str, corrupted: str, kind: str = "positions", **kw) -> PatchResult:
    """``patch_positions`` (kind "positions") or ``patch_heads`` (kind "heads")."""
    if kind == "positions":
        return patch_positions(m, clean, corrupted, **kw)
    if kind == "heads":
        return patch_heads(m, clean, corrupted, **kw)
    raise ValueError(f"kind must be 'positions' or 'heads', not {kind!r}")


__all__ = ["PatchResult", "PatchingError", "PatchingCancelled", "PatchingTooLarge", "patch_positions",
           "patch_heads", "patch", "count_forwards"]
