"""The encoder–decoder of "Attention Is All You Need", as the tutorials build it, on the family parts.

    tokens → embedding·√d_model + sinusoidal PE
    encoder block: x = LayerNorm(x + SelfAttn(x)); x = LayerNorm(x + FFN(x))
    decoder block: masked self-attention, cross-attention to the encoder, FFN (each post-LN)
    logits = decoder output · Eᵀ      (one embedding matrix shared by both stacks and the output)

The padding mask hides pad keys everywhere; the decoder's self-attention adds the subsequent
(causal) mask. Masked scores are −inf, so their softmax weights are exactly 0.

The architecture is one more ``Family`` (``model.arch.family.seed_family``), built by model/arch/generic.py's
``Transformer`` like every checkpoint; ``Seed`` adds only what the seed has of its own: the
character tokenizer, the one embedding matrix shared by both stacks and the output, the file format
of its weights (``save``; model/files/seed_weights.py reads it), and the draft-and-verify fast path of
``_run`` (weights trained on a task are first checked against what the task asks for).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from torch import nn

from model.arch.family import seed_family
from model.arch.generic import Transformer
from model.files.tokenizer import TextTokenizer, char_tokenizer
from model.runtime.base import HookScope, Output, pad_batch
from model.runtime.hooks import Cache, active


# what each task the shipped weights learned (model/train.py) asks the model to write for a text
TASKS: dict[str, Callable[[str], str]] = {
    "reverse": lambda s: s[::-1],
    "sort": lambda s: "".join(sorted(set(s))),
}


def task_target(task: str, s: str) -> str:
    """What a seed model of this task is trained to write for ``s``."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: choose {' or '.join(TASKS)}")
    return TASKS[task](s)


@dataclass
class Batch:
    """Inputs and their targets, teacher-forced (model/train.py trains on these, and
    model/files/seed_checkpoints.py scores checkpoints on them)."""
    src: torch.Tensor  # (B, S)  chars + </s>
    tgt_in: torch.Tensor  # (B, T)  <s> + target
    tgt_out: torch.Tensor  # (B, T)  target + </s>


def encode_batch(task: str, tt, srcs: list[str]) -> Batch:
    src_ids = [e.ids for e in tt.encode(srcs)]
    tgt_ids = [e.ids[:-1] for e in tt.encode([task_target(task, s) for s in srcs])]
    return Batch(
        src=pad_batch(src_ids, tt.pad_id),
        tgt_in=pad_batch([[tt.bos_id] + t for t in tgt_ids], tt.pad_id),
        tgt_out=pad_batch([t + [tt.eos_id] for t in tgt_ids], tt.pad_id),
    )


@dataclass
class SeedConfig:
    vocab_size: int = 11271
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2  # encoder blocks
    n_decoder_layers: int = 2
    d_ff: int = 512
    max_len: int = 512  # positions of the precomputed sinusoidal table
    pe_base: float = 10000.0
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    task: str = "untrained"  # what the weights were trained to do
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> "SeedConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def validate(self) -> None:
        if self.d_model < 2 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        if not (1 <= self.n_heads <= 64 and 1 <= self.n_layers <= 24 and 1 <= self.n_decoder_layers <= 24):
            raise ValueError("n_heads must be 1..64 and the layer counts 1..24")
        if self.pe_base <= 1:
            raise ValueError("the positional base n must be greater than 1")

    def n_floats(self) -> int:
        """The floats a model of this configuration allocates: its parameters (the output is tied to
        the embedding) and the two stacks' sinusoidal tables. Computed from the numbers alone, so a loader can
        compare it with what a file holds before anything is allocated."""
        d, f = self.d_model, self.d_ff
        attn = 4 * (d * d + d)  # W_Q, W_K, W_V, W_O with biases
        ffn = 2 * d * f + f + d
        norm = 2 * d
        encoder = self.n_layers * (attn + ffn + 2 * norm)
        decoder = self.n_decoder_layers * (2 * attn + ffn + 3 * norm)
        return self.vocab_size * d + encoder + decoder + 2 * self.max_len * d  # a table per stack


# The seed's weight files name the parameters as the seed's first, hand-written classes did; the
# parts name two of the decoder's norms otherwise, and hold the one embedding matrix three times.
FILE_NAMES = {"ln_cross.": "ln2.", "ln2.": "ln3."}  # decoder blocks: ours -> the file's
TIED = ("encoder.embed.weight", "decoder.embed.weight", "unembed.weight")  # the file's "embedding.weight"


def file_name(ours: str) -> str | None:
    """Our parameter name -> the one in a seed weight file (None: the shared embedding's copies)."""
    if ours in TIED:
        return "embedding.weight" if ours == TIED[0] else None
    if ours.startswith("decoder.blocks."):
        i, _, rest = ours[len("decoder.blocks."):].partition(".")
        for mine, theirs in FILE_NAMES.items():
            if rest.startswith(mine):
                return f"decoder.blocks.{i}.{theirs}{rest[len(mine):]}"
    return ours


class Seed(Transformer):
    """The seed Transformer: ``seed_family(cfg)`` on the parts, with the character tokenizer and one
    embedding matrix E for the encoder's input, the decoder's input and the output (logits = h·Eᵀ)."""

    def __init__(self, cfg: SeedConfig, tokenizer: TextTokenizer | None = None, name: str = "seed") -> None:
        cfg.validate()
        tokenizer = tokenizer or char_tokenizer()
        if tokenizer.vocab_size != cfg.vocab_size:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens, weights expect {cfg.vocab_size}")
        super().__init__(seed_family(cfg), tokenizer, name=name, description=f"seed Transformer, task: {cfg.task}",
                         tied_output=True)
        self.cfg = cfg
        embedding = self.encoder.embed
        nn.init.normal_(embedding.weight, std=cfg.d_model ** -0.5)  # the tied matrix's scale (the paper's practice)
        self.decoder.embed = embedding  # one matrix: the same module in both stacks ...
        self.unembed.weight = embedding.weight  # ... and the output projection

    @property
    def embedding(self) -> nn.Embedding:
        """E: the token embedding of both stacks, and (transposed) the output projection."""
        return self.encoder.embed

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """The tutorials' ``model(src, tgt)``: logits (B, T, vocab) of the decoder reading ``tgt``
        (B, T: <s> first) after the encoder read ``src`` (B, S), both right-padded with <pad> (the
        masks come from the pad id: the seed's <pad> is never a real token, unlike T5's start token)."""
        pad = self.cfg.pad_id
        return self.teacher_forced(src, tgt, src != pad, tgt != pad)

    # --- weights ----------------------------------------------------------------------
    def file_state(self) -> dict[str, torch.Tensor]:
        """The parameters under the names a seed weight file uses (E once)."""
        return {theirs: t for ours, t in self.state_dict().items() if (theirs := file_name(ours)) is not None}

    def load_file_state(self, tensors: dict[str, torch.Tensor]) -> None:
        """Copy a seed weight file's tensors (``file_state``'s names) into the model."""
        state = {ours: tensors[file_name(ours) or "embedding.weight"] for ours in self.state_dict()}
        self.load_state_dict(state, strict=True)

    def save(self, path: str | Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        meta = {"format": "attention-explorer-seed", "config": json.dumps(asdict(self.cfg))}
        meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
        save_file({k: v.detach().contiguous() for k, v in self.file_state().items()}, str(path), metadata=meta)

    # --- draft and verify -------------------------------------------------------------
    def _guess(self, texts: list[str], max_new: int) -> list[list[int]] | None:
        """What the weights were trained to write for each text (their task's target: TASKS), as
        decoder ids ending in </s>, cut to ``max_new``; None for weights without a known task."""
        target = TASKS.get(self.cfg.task)
        if target is None:
            return None
        return [e.ids[:max_new] for e in self.tokenizer.encode([target(t) for t in texts])]

    def _confirmed(self, logits: torch.Tensor, guess: list[list[int]], max_new: int) -> list[list[int]]:
        """What greedy decoding writes, as far as a teacher-forced pass over <s> + ``guess`` shows it.

        ``logits`` (B, T, vocab) of that pass: position j's argmax is the token greedy decoding
        chooses after <s> and the guess's first j tokens, so long as those are what it chose
        before. Per row: the argmax after <s>, then after each guessed token it matched, up to and
        including the first that differs from the guess (greedy's own choice there), </s>, or
        ``max_new`` tokens."""
        out = []
        for p, g in zip(logits.argmax(-1).tolist(), guess):
            w: list[int] = []
            for j in range(min(len(g) + 1, max_new)):  # p[j]: the choice after <s> + g[:j]
                w.append(p[j])
                if p[j] == self.cfg.eos_id or j == len(g) or p[j] != g[j]:
                    break
            out.append(w)
        return out

    def _written(self, row: list[int]) -> list[int]:
        """A row of ids -> the text's ids: up to the </s> (or a pad), without it."""
        ids = []
        for i in row:
            if i in (self.cfg.eos_id, self.cfg.pad_id):
                break
            ids.append(i)
        return ids

    def _run(self, texts: list[str], scope: HookScope, *, readout: bool = True) -> tuple[Output, Cache]:
        # (``readout`` changes nothing here: the teacher-forced pass's logits are how it decodes)
        cfg = self.cfg
        encs, src, real, truncated = self.source(texts)
        max_new = min(src.shape[1] + 8, cfg.max_len - 1)
        # Draft and verify: for weights trained on a task, the hooked teacher-forced pass runs first
        # on what the task asks for. Its argmax at each position is greedy decoding's choice there
        # (the decoder is causal), so when every choice matches the guess, that pass is the run and
        # greedy decoding needs no step of its own. Where the model writes something else, decoding
        # goes on step by step from the last token it confirmed, and the hooked pass runs again on
        # what was written. With edits active (model/runtime/edits.py), never: an edit such as no_causal lets
        # a position read later ones, and every step recomputes its whole prefix (an edit such as
        # ablate_mean reads all the positions written so far, which a cached step does not have).
        guess = None if active() else self._guess(texts, max_new)
        written = start = logits = None
        if guess is not None:
            drafts = [self._written(g) for g in guess]  # without the </s>
            with scope():
                logits = self.teacher_forced(src, self.decoder_input(drafts), real)  # (B, T, vocab)
            start = self._confirmed(logits, drafts, max_new)
            if all(cfg.eos_id in w or len(w) >= max_new for w in start):  # every row written
                written = [self._written(w) for w in start]
            if start != guess:  # the pass ran on other tokens than those written
                logits = None
        if written is None:
            written = self.greedy(src, max_new, use_cache=not active(), start=start, real=real)
        return self._seq2seq_output(encs, truncated, src, real, written, scope, logits)
