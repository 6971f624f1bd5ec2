"""The encoder–decoder of "Attention Is All You Need", built from small parts to the whole.

    tokens → embedding·√d_model + sinusoidal PE
    encoder block: x = LayerNorm(x + SelfAttn(x)); x = LayerNorm(x + FFN(x))
    decoder block: masked self-attention, cross-attention to the encoder, FFN (each post-LN)
    logits = decoder output · Eᵀ      (one embedding matrix shared by both stacks and the output)

The padding mask hides pad keys everywhere; the decoder's self-attention adds the subsequent
(causal) mask. Masked scores are −inf, so their softmax weights are exactly 0.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from torch import nn

from .attention import Attention, KVCache, Mask, causal_mask, padding_mask
from .base import HookedModel, HookScope, ModelInfo, Output, Recorder, Trace, pad_batch
from .hooks import Cache, HookPoint, active
from .positional import sinusoidal
from .tokenizer import TextTokenizer, char_tokenizer, decode_chars


# what each task the shipped weights learned (model/train.py) asks the model to write for a text
TASKS: dict[str, Callable[[str], str]] = {
    "reverse": lambda s: s[::-1],
    "sort": lambda s: "".join(sorted(set(s))),
}


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


class FeedForward(nn.Module):
    """Position-wise: ReLU(x W1 + b1) W2 + b2."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_in = nn.Linear(d_model, d_ff)
        self.W_out = nn.Linear(d_ff, d_model)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.W_in(x))  # (B, T, d_ff)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.W_out(h)  # (B, T, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.hidden(x))


class EncoderBlock(nn.Module):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.self_attn = Attention(cfg.d_model, cfg.n_heads)
        self.hook_attn_sum = HookPoint()  # (B, T, d) x + SelfAttn(x), before ln1
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_mid = HookPoint()  # (B, T, d) after ln1: the stream between the sublayers
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff) ReLU(x W_in + b_in)
        self.hook_ffn_out = HookPoint()  # (B, T, d)
        self.hook_ffn_sum = HookPoint()  # (B, T, d) x + FFN(x), before ln2
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(self.ln1(self.hook_attn_sum(x + self.self_attn(x, mask=mask))))
        f = self.hook_ffn_out(self.ffn.project(self.hook_ffn_hidden(self.ffn.hidden(x))))
        x = self.ln2(self.hook_ffn_sum(x + f))
        return self.hook_resid_post(x)


class DecoderBlock(nn.Module):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.self_attn = Attention(cfg.d_model, cfg.n_heads)
        self.hook_attn_sum = HookPoint()  # (B, T, d) x + SelfAttn(x), before ln1
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_mid = HookPoint()  # (B, T, d) after ln1
        self.cross_attn = Attention(cfg.d_model, cfg.n_heads)
        self.hook_cross_sum = HookPoint()  # (B, T, d) x + CrossAttn(x, encoder output), before ln2
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_mid_cross = HookPoint()  # (B, T, d) after ln2
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff) ReLU(x W_in + b_in)
        self.hook_ffn_out = HookPoint()  # (B, T, d)
        self.hook_ffn_sum = HookPoint()  # (B, T, d) x + FFN(x), before ln3
        self.ln3 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x, memory, self_mask, cross_mask, kv=None) -> torch.Tensor:
        """kv: this call's (self-attention, cross-attention) key/value caches, step by step."""
        self_kv, cross_kv = kv or (None, None)
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(self.ln1(self.hook_attn_sum(x + self.self_attn(x, mask=self_mask, cache=self_kv))))
        x = self.hook_resid_mid_cross(self.ln2(self.hook_cross_sum(
            x + self.cross_attn(x, kv=memory, mask=cross_mask, cache=cross_kv))))
        f = self.hook_ffn_out(self.ffn.project(self.hook_ffn_hidden(self.ffn.hidden(x))))
        x = self.ln3(self.hook_ffn_sum(x + f))
        return self.hook_resid_post(x)


class Stack(nn.Module):
    """Embedding hooks, the sinusoidal encoding, and a list of blocks."""

    def __init__(self, cfg: SeedConfig, block: type[nn.Module], n: int) -> None:
        super().__init__()
        self.hook_embed = HookPoint()  # (B, T, d)
        self.hook_pos_embed = HookPoint()  # (1, T, d)
        self.register_buffer("pe", sinusoidal(cfg.max_len, cfg.d_model, cfg.pe_base), persistent=False)
        self.blocks = nn.ModuleList(block(cfg) for _ in range(n))

    def embed(self, tok_emb: torch.Tensor, start: int = 0) -> torch.Tensor:
        """tok_emb (B, T, d) holds positions start..start+T-1 (start > 0: one decoding step)."""
        T = tok_emb.shape[1]
        return self.hook_embed(tok_emb) + self.hook_pos_embed(self.pe[start : start + T].unsqueeze(0))


class Encoder(Stack):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__(cfg, EncoderBlock, cfg.n_layers)

    def forward(self, tok_emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(tok_emb)
        mask = Mask.of(mask)  # one mask for every block: derived once, not per layer
        for block in self.blocks:
            x = block(x, mask)
        return x


class Decoder(Stack):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__(cfg, DecoderBlock, cfg.n_decoder_layers)

    def forward(self, tok_emb, memory, self_mask, cross_mask, kv=None, start: int = 0) -> torch.Tensor:
        """kv: per block, this call's key/value caches (``new_kv``); start: the position of the
        first token of tok_emb (the earlier ones are in the caches)."""
        x = self.embed(tok_emb, start)
        self_mask, cross_mask = Mask.of(self_mask), Mask.of(cross_mask)  # derived once, not per layer
        for i, block in enumerate(self.blocks):
            x = block(x, memory, self_mask, cross_mask, None if kv is None else kv[i])
        return x

    def new_kv(self, capacity: int = 0) -> list[tuple[KVCache, KVCache]]:
        """Empty key/value caches for one decoding call: per block, (self-attention, cross-attention)."""
        return [(KVCache(capacity), KVCache(fixed=True)) for _ in self.blocks]


class SeedTransformer(HookedModel):
    def __init__(self, cfg: SeedConfig, tokenizer: TextTokenizer | None = None, name: str = "seed") -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.tokenizer = tokenizer or char_tokenizer()
        if self.tokenizer.vocab_size != cfg.vocab_size:
            raise ValueError(f"tokenizer has {self.tokenizer.vocab_size} tokens, weights expect {cfg.vocab_size}")
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embedding.weight, std=cfg.d_model ** -0.5)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.info = ModelInfo(
            name=name, kind="encoder-decoder", n_layers=cfg.n_layers, n_heads=cfg.n_heads,
            n_kv_heads=cfg.n_heads, d_model=cfg.d_model, d_head=cfg.d_model // cfg.n_heads,
            positional="sinusoidal", vocab_size=cfg.vocab_size, max_len=cfg.max_len,
            n_decoder_layers=cfg.n_decoder_layers, positional_base=cfg.pe_base,
            description=f"seed Transformer, task: {cfg.task}",
            embed_scale=math.sqrt(cfg.d_model), norm="post-LayerNorm", ffn="ReLU", d_ff=cfg.d_ff,
            tied_output=True,
        )
        self.setup_hooks()

    # --- the pieces -----------------------------------------------------------------
    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids) * math.sqrt(self.cfg.d_model)  # (B, T, d)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        src_mask = padding_mask(src, self.cfg.pad_id)  # (B, 1, 1, S)
        return self.encoder(self.embed_tokens(src), src_mask), src_mask

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               last_only: bool = False) -> torch.Tensor:
        """Logits (B, T, vocab) for decoder inputs ``tgt`` (starting with <s>); with
        ``last_only``, (B, 1, vocab) for the last position only (what greedy decoding needs)."""
        self_mask = padding_mask(tgt, self.cfg.pad_id) & causal_mask(tgt.shape[1], tgt.device)
        h = self.decoder(self.embed_tokens(tgt), memory, self_mask, src_mask)
        if last_only:
            h = h[:, -1:]
        return h @ self.embedding.weight.T  # tied output projection

    def decode_step(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                    kv: list[tuple[KVCache, KVCache]]) -> torch.Tensor:
        """Logits (B, vocab) after the last token of ``tgt`` (B, T), running the decoder only on the
        tokens the caches ``kv`` do not hold yet: the new one, step by step (the earlier tokens' keys
        and values come from the caches, which the step extends), or several at once at the first
        call of a decoding that starts from tokens already known (each then sees those before it)."""
        p = kv[0][0].length  # positions already in the caches: the first new token's position
        self_mask = padding_mask(tgt, self.cfg.pad_id)  # (B, 1, 1, T): every real token so far
        if tgt.shape[1] - p > 1:  # several new tokens: the subsequent mask of their rows
            self_mask = self_mask & causal_mask(tgt.shape[1], tgt.device)[:, :, p:]  # (B, 1, T - p, T)
        h = self.decoder(self.embed_tokens(tgt[:, p:]), memory, self_mask, src_mask, kv=kv, start=p)
        return h[:, -1] @ self.embedding.weight.T  # (B, vocab)

    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """A decoder layer's residual stream (.., d) -> logits (.., vocab): the tied output projection
        (each post-LayerNorm block already ends in its own norm, so there is no final norm to add)."""
        return resid @ self.embedding.weight.T

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)

    def _decode_loop(self, memory, src_mask, max_new: int, choose, use_cache: bool = True,
                     step_scope: HookScope = contextlib.nullcontext,
                     start: torch.Tensor | None = None) -> torch.Tensor:
        """Write up to ``max_new`` tokens after <s>; each sentence stops at </s> (then pads).

        choose(logits (B, vocab), active (B,)) -> next ids (B,), the pad id where not active.
        start: the decoder input so far (B, 1 + k): <s>, then k tokens already written (a row that
        wrote </s> among them is done); default <s> alone.
        Returns the decoder input (B, 1 + steps): <s>, then what was written."""
        cfg = self.cfg
        B = memory.shape[0]
        tgt = torch.full((B, 1), cfg.bos_id, dtype=torch.long) if start is None else start  # (B, 1 + k)
        done = (tgt[:, 1:] == cfg.eos_id).any(dim=1)  # (B,)
        kv = self.decoder.new_kv(capacity=1 + max_new) if use_cache else None
        for _ in range(max_new - (tgt.shape[1] - 1)):
            with step_scope():
                if use_cache:
                    logits = self.decode_step(tgt, memory, src_mask, kv)  # (B, vocab)
                else:  # every earlier position again
                    logits = self.decode(tgt, memory, src_mask, last_only=True)[:, -1]  # (B, vocab)
            nxt = choose(logits, ~done)  # (B,)
            tgt = torch.cat([tgt, nxt[:, None]], dim=1)
            done |= nxt == cfg.eos_id
            if done.all():
                break
        return tgt

    def _argmax(self, logits: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        return torch.where(active, logits.argmax(-1), self.cfg.pad_id)  # (B,)

    @torch.inference_mode()
    def greedy(self, src: torch.Tensor, max_new: int, use_cache: bool = True,
               start: list[list[int]] | None = None) -> list[list[int]]:
        """Greedy decoding; each sentence stops at </s>. Returns ids without <s>/</s>.

        With ``use_cache`` each step runs the decoder on the new token only, reading the earlier
        tokens' keys and values from a key/value cache; without, every step recomputes every
        earlier position (the same tokens, more slowly: kept for the tests and the benchmark).
        ``start``: per sentence, the first tokens greedy decoding writes, when already known (what
        ``_confirmed`` returns); decoding goes on from the longest start every unfinished row shares."""
        memory, src_mask = self.encode(src)
        prefix = None
        if start is not None:
            cfg = self.cfg
            open_rows = [w for w in start if cfg.eos_id not in w]
            k = min((len(w) for w in open_rows), default=0)
            rows = [w if cfg.eos_id in w and len(w) <= k else w[:k] for w in start]
            prefix = pad_batch([[cfg.bos_id] + w for w in rows], cfg.pad_id)  # (B, 1 + k)
        tgt = self._decode_loop(memory, src_mask, max_new, self._argmax, use_cache, start=prefix)
        return [self._written(row)[0] for row in tgt[:, 1:].tolist()]

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

    def _written(self, row: list[int]) -> tuple[list[int], list[int]]:
        """A row of written ids -> (the text's ids, the same with the </s> if one was written)."""
        ids = []
        for i in row:
            if i == self.cfg.eos_id:
                return ids, ids + [i]
            if i == self.cfg.pad_id:
                break
            ids.append(i)
        return ids, ids

    # --- the hook contract ------------------------------------------------------------
    def _source(self, texts: list[str]):
        """Tokenize, cut to max_len (keeping the final </s>), right-pad: (encodings, src (B, S), truncated)."""
        tt, cfg = self.tokenizer, self.cfg
        encs = tt.encode(texts)
        truncated = [len(e.ids) > cfg.max_len for e in encs]
        for e in encs:  # keep the final </s> when cutting
            if len(e.ids) > cfg.max_len:
                e.ids = e.ids[: cfg.max_len - 1] + [cfg.eos_id]
                e.tokens = e.tokens[: cfg.max_len - 1] + [tt.id_to_token(cfg.eos_id)]
                e.offsets = e.offsets[: cfg.max_len - 1] + [(0, 0)]
        return encs, pad_batch([e.ids for e in encs], cfg.pad_id), truncated  # src: (B, S)

    def _run(self, texts: list[str], scope: HookScope) -> tuple[Output, Cache]:
        tt, cfg = self.tokenizer, self.cfg
        encs, src, truncated = self._source(texts)
        max_new = min(src.shape[1] + 8, cfg.max_len - 1)
        # Draft and verify: for weights trained on a task, the hooked teacher-forced pass runs first
        # on what the task asks for. Its argmax at each position is greedy decoding's choice there
        # (the decoder is causal), so when every choice matches the guess, that pass is the run and
        # greedy decoding needs no step of its own. Where the model writes something else, decoding
        # goes on step by step from the last token it confirmed, and the hooked pass runs again on
        # what was written. With edits active (model/edits.py), never: an edit such as no_causal lets
        # a position read later ones, and every step recomputes its whole prefix (an edit such as
        # ablate_mean reads all the positions written so far, which a cached step does not have).
        guess = None if active() else self._guess(texts, max_new)
        generated = start = logits = None
        if guess is not None:
            drafts = [self._written(g)[0] for g in guess]  # without the </s>
            with scope():
                logits = self(src, pad_batch([[cfg.bos_id] + d for d in drafts], cfg.pad_id))  # tgt: (B, T)
            start = self._confirmed(logits, drafts, max_new)
            if all(cfg.eos_id in w or len(w) >= max_new for w in start):  # every row written
                generated = [self._written(w)[0] for w in start]
            if start != guess:  # the pass ran on other tokens than those written
                logits = None
        if generated is None:
            generated = self.greedy(src, max_new, use_cache=not active(), start=start)
        dec_ids = [[cfg.bos_id] + g[: cfg.max_len - 1] for g in generated]
        if logits is None:
            with scope():
                logits = self(src, pad_batch(dec_ids, cfg.pad_id))  # tgt: (B, T)
        cache = Cache(
            tokens=[e.tokens for e in encs], token_ids=[e.ids for e in encs],
            offsets=[e.offsets for e in encs],
            decoder_tokens=[[tt.id_to_token(i) for i in d] for d in dec_ids],
            decoder_token_ids=dec_ids,
        )
        out = Output(logits=logits, generated=[decode_chars(tt, g) for g in generated], truncated=truncated)
        return out, cache

    def _generate(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                  use_cache: bool) -> Trace:
        """The encoder once (``trace.prompt``), then one decoder step per token written: step t
        runs on the decoder input at position t (<s> at step 0) and chooses the token after it."""
        tt, cfg = self.tokenizer, self.cfg
        encs, src, _ = self._source(texts)
        default = src.shape[1] + 8  # as run_with_cache
        max_new = min(default if max_new_tokens is None else max_new_tokens, cfg.max_len - 1)
        with rec.prompt():
            memory, src_mask = self.encode(src)
        choose = functools.partial(rec.choose, pad_id=cfg.pad_id)
        tgt = self._decode_loop(memory, src_mask, max_new, choose, use_cache, rec.step)  # (B, 1 + steps)
        written = [self._written(row) for row in tgt[:, 1:].tolist()]
        dec_ids = tgt.tolist()
        return rec.trace(
            len(texts), texts=texts, generated=[decode_chars(tt, ids) for ids, _ in written],
            tokens=[[tt.id_to_token(i) for i in ids] for _, ids in written],
            token_ids=[ids for _, ids in written],
            input_tokens=[e.tokens for e in encs], input_token_ids=[e.ids for e in encs],
            decoder_tokens=[[tt.id_to_token(i) for i in row] for row in dec_ids],
            decoder_token_ids=dec_ids, query=list(range(tgt.shape[1] - 1)),
            positions=torch.arange(tgt.shape[1]).expand(len(texts), -1), use_cache=use_cache)

    # --- weights ----------------------------------------------------------------------
    def save(self, path: str | Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        meta = {"format": "attention-explorer-seed", "config": json.dumps(asdict(self.cfg))}
        meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path), metadata=meta)
