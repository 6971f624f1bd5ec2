"""The Llama decoder (SmolLM2 and kin) read from a GGUF file, built from small parts.

    x = embed(tokens)                                       (no positional table: rotary)
    block: x = x + Attn(RMSNorm(x))     q, k rotated by position; K/V heads shared (GQA)
           x = x + W_down(silu(W_gate·RMSNorm(x)) * W_up·RMSNorm(x))
    logits = RMSNorm(x) · W_outᵀ         (W_out = the embedding when the file has no output.weight)

The attention is the project's one ``Attention``: causal ∧ padding mask, −inf where masked.
Tensors are dequantized with ``gguf``; llama.cpp's converter interleaves the rows of W_Q and W_K
for its rotary layout, which ``unpermute`` undoes so that ``apply_rotary``'s rotate-half layout
(the one the checkpoint was trained with) applies. Every size the file claims is checked against
its tensors before anything is built. The first load writes a float32 safetensors conversion
(with the tokenizer, config and a checksum in its metadata); later loads read only that file
(model/float_cache.py: verified, written once under a lock, never left half-written).
"""
from __future__ import annotations

import json
import logging
import math
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import float_cache
from .attention import Attention, KVCache, Mask, causal_mask
from .base import HookedModel, HookScope, ModelInfo, Output, Recorder, Trace, pad_batch
from .checks import (MAX_FF, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_VOCAB, MAX_WIDTH, check_layers,
                     check_shapes, need_divides, need_int)
from .errors import WeightsError
from .float_cache import check_stop, converted_path
from .hooks import Cache, HookPoint
from .positional import rotary_tables
from .tokenizer import TextTokenizer

CONVERTED_FORMAT = "attention-explorer-llama"
CONVERTED_VERSION = "1"  # bump when the conversion or the tokenizer building changes
log = logging.getLogger(__name__)


@dataclass
class LlamaConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    d_head: int
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    max_len: int = 2048
    tied: bool = True  # the output projection is the embedding matrix

    @classmethod
    def from_dict(cls, d: dict) -> "LlamaConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# --- parts -----------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · weight (no mean subtraction, no bias)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_gate = nn.Linear(d_model, d_ff, bias=False)
        self.W_up = nn.Linear(d_model, d_ff, bias=False)
        self.W_down = nn.Linear(d_ff, d_model, bias=False)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.silu(self.W_gate(x)) * self.W_up(x)  # (B, T, d_ff)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.W_down(h)  # (B, T, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.hidden(x))


class LlamaBlock(nn.Module):
    """Pre-norm: x + Attn(norm(x)), then x + MLP(norm(x))."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.ln1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.hook_attn_normed = HookPoint()  # (B, T, d) RMSNorm(x): what the attention reads
        self.self_attn = Attention(cfg.d_model, cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
                                   d_head=cfg.d_head, bias=False)
        self.hook_resid_mid = HookPoint()  # (B, T, d) x + Attn(RMSNorm(x))
        self.ln2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.hook_ffn_normed = HookPoint()  # (B, T, d) RMSNorm(x): what the feed-forward reads
        self.mlp = SwiGLU(cfg.d_model, cfg.d_ff)
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff) silu(x W_gate) * (x W_up)
        self.hook_ffn_out = HookPoint()  # (B, T, d)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, rotary, kv: KVCache | None = None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.self_attn(self.hook_attn_normed(self.ln1(x)), mask=mask, rotary=rotary,
                                                   cache=kv))
        f = self.hook_ffn_out(self.mlp.project(self.hook_ffn_hidden(self.mlp.hidden(self.hook_ffn_normed(self.ln2(x))))))
        x = x + f
        return self.hook_resid_post(x)


class LlamaDecoder(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.hook_embed = HookPoint()  # (B, T, d)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None = None,
                kv: list[KVCache] | None = None) -> torch.Tensor:
        """ids (B, T); mask (B, 1, T, Tk); positions (B, T), each sentence's own (default 0..T-1);
        kv: per block, this call's key/value caches (then Tk = the earlier tokens + T)."""
        T = ids.shape[1]
        x = self.hook_embed(self.embed(ids))  # (B, T, d)
        if positions is None:
            rotary = rotary_tables(torch.arange(T), self.cfg.d_head, self.cfg.rope_base)  # 2 × (T, hs)
        else:
            cos, sin = rotary_tables(positions, self.cfg.d_head, self.cfg.rope_base)  # 2 × (B, T, hs)
            rotary = cos[:, None], sin[:, None]  # 2 × (B, 1, T, hs): the same for every head
        mask = Mask.of(mask)  # one mask for every block: derived once, not per layer
        for i, block in enumerate(self.blocks):
            x = block(x, mask, rotary, None if kv is None else kv[i])
        return self.norm(x)


class Llama(HookedModel):
    def __init__(self, cfg: LlamaConfig, tokenizer: TextTokenizer, name: str = "llama",
                 description: str = "") -> None:
        super().__init__()
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.decoder = LlamaDecoder(cfg)
        self.lm_head = None if cfg.tied else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.info = ModelInfo(
            name=name, kind="decoder", n_layers=cfg.n_layers, n_heads=cfg.n_heads,
            n_kv_heads=cfg.n_kv_heads, d_model=cfg.d_model, d_head=cfg.d_head,
            positional="rotary", vocab_size=cfg.vocab_size, max_len=cfg.max_len,
            positional_base=cfg.rope_base, description=description,
            embed_scale=1.0, norm="pre-RMSNorm", final_norm=True, ffn="SwiGLU", d_ff=cfg.d_ff,
            qkv_bias=False, out_bias=False, ffn_bias=False, tied_output=cfg.tied,
        )
        self.setup_hooks()

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids: (B, T) right-padded; lengths: (B,). Returns (logits (B, T, V), hidden (B, T, d))."""
        T = ids.shape[1]
        real = torch.arange(T)[None, :] < lengths[:, None]  # (B, T) True for real tokens
        mask = causal_mask(T) & real[:, None, None, :]  # (B, 1, T, T)
        h = self.decoder(ids, mask)
        return self.unembed(h), h

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        """The last stream (.., d) -> logits (.., vocab)."""
        W_out = self.decoder.embed.weight if self.lm_head is None else self.lm_head.weight
        return h @ W_out.T

    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """Any layer's residual stream (.., d) -> logits (.., vocab): the final RMSNorm, then the
        output projection, as after the last block (the logit lens reads earlier layers this way)."""
        return self.unembed(self.decoder.norm(resid))

    def token_text(self, token_id: int) -> str:
        """ "ĠParis" -> " Paris": byte-level tokens as readable text."""
        from .gguf_tokenizer import display_token

        return display_token(self.tokenizer.id_to_token(token_id))

    def _prompts(self, texts: list[str]):
        """Tokenize and cut to max_len: (encodings, truncated); an empty sentence becomes BOS."""
        tt, cfg = self.tokenizer, self.cfg
        encs = tt.encode(texts)
        truncated = [len(e.ids) > cfg.max_len for e in encs]
        for e in encs:
            if not e.ids and tt.bos_id is not None:  # an empty sentence: the model sees BOS only
                e.ids, e.tokens, e.offsets = [tt.bos_id], [tt.id_to_token(tt.bos_id)], [(0, 0)]
            if not e.ids:
                raise ValueError("a sentence gave no tokens at all; type at least one character")
            e.ids, e.tokens, e.offsets = e.ids[: cfg.max_len], e.tokens[: cfg.max_len], e.offsets[: cfg.max_len]
        return encs, truncated

    def _run(self, texts: list[str], scope: HookScope) -> tuple[Output, Cache]:
        from .gguf_tokenizer import display_token

        tt = self.tokenizer
        encs, truncated = self._prompts(texts)
        ids = pad_batch([e.ids for e in encs], tt.pad_id)  # (B, T)
        lengths = torch.tensor([len(e.ids) for e in encs])
        with scope():
            logits, hidden = self(ids, lengths)
        cache = Cache(tokens=[[display_token(t) for t in e.tokens] for e in encs],
                      token_ids=[e.ids for e in encs], offsets=[e.offsets for e in encs])
        return Output(logits=logits, hidden=hidden, truncated=truncated), cache

    def _generate(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                  use_cache: bool) -> Trace:
        """Greedy or sampled decoding of a batch of prompts, one token per step.

        The prompts are left-padded to a common length P, so that the token each step runs on
        sits in the same column for every sentence; each sentence keeps its own positions (0 at
        its first real token), so its rotary angles, and therefore all its numbers, are those of
        the sentence alone. Pad keys are masked; a pad query (left of a short prompt) has no key
        to look at, and its pattern row is all zeros. With the cache, the prompt but its last
        token is read once (``trace.prompt``); step t runs on column P-1+t (step 0: the prompt's
        last token) and chooses the next token. Each sentence stops at its end token (then pads).
        """
        tt, cfg = self.tokenizer, self.cfg
        encs, _ = self._prompts(texts)
        B, P = len(encs), max(len(e.ids) for e in encs)
        if P >= cfg.max_len:
            raise ValueError(f"the prompt takes all {cfg.max_len} positions of {self.info.name}: "
                             f"no room to write; give a shorter prompt")
        max_new = min(32 if max_new_tokens is None else max_new_tokens, cfg.max_len - P)
        n_pad = torch.tensor([P - len(e.ids) for e in encs])  # (B,)
        ids = torch.full((B, P), tt.pad_id, dtype=torch.long)  # (B, P) left-padded
        for b, e in enumerate(encs):
            ids[b, P - len(e.ids):] = torch.tensor(e.ids, dtype=torch.long)
        columns = torch.arange(P)[None, :]  # (1, P)
        real = columns >= n_pad[:, None]  # (B, P) True for real tokens
        positions = (columns - n_pad[:, None]).clamp(min=0)  # (B, P) each sentence's own positions

        kv = [KVCache(P + max_new) for _ in self.decoder.blocks] if use_cache else None
        if use_cache and P > 1:
            with rec.prompt():
                self.decoder(ids[:, : P - 1], causal_mask(P - 1) & real[:, None, None, : P - 1],
                             positions[:, : P - 1], kv)
        done = torch.zeros(B, dtype=torch.bool)
        for t in range(max_new):
            c = P - 1 + t  # the column this step runs on; ids holds columns 0..c
            with rec.step():
                if use_cache:  # the new token sees every real token so far: causal by construction
                    h = self.decoder(ids[:, c:], real[:, None, None, :], positions[:, c:], kv)  # (B, 1, d)
                else:  # every earlier position again
                    h = self.decoder(ids, causal_mask(c + 1) & real[:, None, None, :], positions)  # (B, c+1, d)
            nxt = rec.choose(self.unembed(h[:, -1]), ~done, tt.pad_id)  # (B,)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            real = torch.cat([real, ~done[:, None]], dim=1)
            positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
            if tt.eos_id is not None:
                done |= nxt == tt.eos_id
            if done.all():
                break

        written = [ids[b, P:][real[b, P:]].tolist() for b in range(B)]  # the end token included
        text = [w[:-1] if w and w[-1] == tt.eos_id else w for w in written]
        return rec.trace(
            B, texts=texts, generated=[tt.tok.decode(w, skip_special_tokens=False) for w in text],
            tokens=[[self.token_text(i) for i in w] for w in written], token_ids=written,
            input_tokens=[[self.token_text(i) for i in e.ids] for e in encs],
            input_token_ids=[e.ids for e in encs],
            decoder_tokens=[[self.token_text(i) for i in row] for row in ids.tolist()],
            decoder_token_ids=ids.tolist(), query=[P - 1 + t for t in range(len(rec.steps))],
            positions=positions, use_cache=use_cache)


# --- reading a GGUF ----------------------------------------------------------------------
GGUF_TOP_NAMES = {"token_embd.weight": "decoder.embed.weight", "output_norm.weight": "decoder.norm.weight",
                  "output.weight": "lm_head.weight"}
GGUF_NAMES = {  # GGUF tensor name (after "blk.{i}.") -> ours (after "decoder.blocks.{i}.")
    "attn_norm.weight": "ln1.weight",
    "attn_q.weight": "self_attn.W_Q.weight",
    "attn_k.weight": "self_attn.W_K.weight",
    "attn_v.weight": "self_attn.W_V.weight",
    "attn_output.weight": "self_attn.W_O.weight",
    "ffn_norm.weight": "ln2.weight",
    "ffn_gate.weight": "mlp.W_gate.weight",
    "ffn_up.weight": "mlp.W_up.weight",
    "ffn_down.weight": "mlp.W_down.weight",
}
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                  "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                  "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id",
                  "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token")


def unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row order: per head, rows (0, h/2, 1, h/2+1, ...) -> (0..h/2, h/2..h).

    w: (n_heads * hs, d_in). llama.cpp wrote w.view(nh, 2, hs/2, d).transpose(1, 2).
    """
    out, d_in = w.shape
    hs = out // n_heads
    return w.view(n_heads, hs // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)  # (nh*hs, d)


def _gguf_name_to_ours(name: str) -> str | None:
    """A GGUF tensor name -> ours (None for tensors we do not use)."""
    if name in GGUF_TOP_NAMES:
        return GGUF_TOP_NAMES[name]
    blk, i, rest = (name.split(".", 2) + ["", ""])[:3]
    if blk == "blk" and i.isdigit() and rest in GGUF_NAMES:
        return f"decoder.blocks.{int(i)}.{GGUF_NAMES[rest]}"
    return None


def check_sizes(cfg: LlamaConfig, shapes: dict[str, tuple[int, ...]], source: str) -> None:
    """Every size the file claims, against sane bounds and the tensors it holds (our names)."""
    L = need_int(source, "llama.block_count", cfg.n_layers, 1, MAX_LAYERS)
    H = need_int(source, "llama.attention.head_count", cfg.n_heads, 1, MAX_HEADS)
    KV = need_int(source, "llama.attention.head_count_kv", cfg.n_kv_heads, 1, H)
    need_divides(source, "llama.attention.head_count_kv", KV, "llama.attention.head_count", H)
    d = need_int(source, "llama.embedding_length", cfg.d_model, 1, MAX_WIDTH)
    hs = need_int(source, "llama.attention.key_length", cfg.d_head, 2, MAX_WIDTH)
    if hs % 2:
        raise WeightsError(f"{source}: llama.attention.key_length is {hs}; rotary positions need "
                           f"an even head width")
    ff = need_int(source, "llama.feed_forward_length", cfg.d_ff, 1, MAX_FF)
    V = need_int(source, "the vocabulary size (tokenizer.ggml.tokens)", cfg.vocab_size, 1, MAX_VOCAB)
    need_int(source, "llama.context_length", cfg.max_len, 1, MAX_POSITIONS)
    for field, value in (("llama.rope.freq_base", cfg.rope_base),
                         ("llama.attention.layer_norm_rms_epsilon", cfg.norm_eps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise WeightsError(f"{source}: {field} is {value!r}; it should be a positive number")
    check_layers(source, "llama.block_count", L, shapes, "decoder.blocks.")
    dd, q, kv = f"embedding_length={d}", f"head_count={H} × key_length={hs}", f"head_count_kv={KV} × key_length={hs}"
    want = {"decoder.embed.weight": ((V, d), f"{V} tokens, {dd}"), "decoder.norm.weight": ((d,), dd)}
    if not cfg.tied:
        want["lm_head.weight"] = ((V, d), f"{V} tokens, {dd}")
    for i in range(L):  # L is the number of layers the file holds (checked above)
        b = f"decoder.blocks.{i}."
        want.update({
            b + "ln1.weight": ((d,), dd), b + "ln2.weight": ((d,), dd),
            b + "self_attn.W_Q.weight": ((H * hs, d), f"{q}, {dd}"),
            b + "self_attn.W_K.weight": ((KV * hs, d), f"{kv}, {dd}"),
            b + "self_attn.W_V.weight": ((KV * hs, d), f"{kv}, {dd}"),
            b + "self_attn.W_O.weight": ((d, H * hs), f"{dd}, {q}"),
            b + "mlp.W_gate.weight": ((ff, d), f"feed_forward_length={ff}, {dd}"),
            b + "mlp.W_up.weight": ((ff, d), f"feed_forward_length={ff}, {dd}"),
            b + "mlp.W_down.weight": ((d, ff), f"{dd}, feed_forward_length={ff}"),
        })
    check_shapes(source, shapes, want)


def read_gguf(path: Path) -> tuple[LlamaConfig, dict, dict[str, torch.Tensor]]:
    """Parse and dequantize a llama GGUF: (config, tokenizer metadata, our state dict).

    Every size the file claims is checked against its tensors before anything is dequantized.
    """
    import gguf

    reader = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items()
            if not k.startswith("tokenizer.") or k in TOKENIZER_KEYS}
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise WeightsError(f"{path.name}: architecture {arch!r} is not supported; this loader "
                           f"reads the llama family (Llama, SmolLM, TinyLlama-style GGUFs)")

    def key(k, default=None):
        return meta.get(f"{arch}.{k}", default)

    if key("rope.scaling.type", "none") not in ("none", None):
        raise WeightsError(f"{path.name}: rope scaling {key('rope.scaling.type')!r} is not supported")
    tensors = {t.name: t for t in reader.tensors}
    if "rope_freqs.weight" in tensors:
        raise WeightsError(f"{path.name}: per-frequency rope factors (rope_freqs) are not supported")
    n_heads = need_int(path.name, "llama.attention.head_count", key("attention.head_count"), 1, MAX_HEADS)
    d_model = need_int(path.name, "llama.embedding_length", key("embedding_length"), 1, MAX_WIDTH)
    d_head = key("attention.key_length", d_model // n_heads)
    if key("rope.dimension_count", d_head) != d_head:
        raise WeightsError(f"{path.name}: partial rotary dimensions are not supported")
    if key("attention.value_length", d_head) != d_head:
        raise WeightsError(f"{path.name}: value heads narrower or wider than key heads are not supported")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        raise WeightsError(f"{path.name}: the vocabulary (tokenizer.ggml.tokens) is missing")
    cfg = LlamaConfig(  # as the file claims them: check_sizes comes next
        vocab_size=len(tokens), d_model=d_model, n_layers=key("block_count"), n_heads=n_heads,
        n_kv_heads=key("attention.head_count_kv", n_heads), d_ff=key("feed_forward_length"),
        d_head=d_head, rope_base=key("rope.freq_base", 10000.0),
        norm_eps=key("attention.layer_norm_rms_epsilon", 1e-5),
        max_len=key("context_length", 2048), tied="output.weight" not in tensors,
    )
    names = {}
    for name in tensors:
        ours = _gguf_name_to_ours(name)
        if ours is None:
            warnings.warn(f"{path.name}: ignoring tensor {name}", stacklevel=2)
        else:
            names[name] = ours
    shapes = {ours: tuple(int(n) for n in reversed(tensors[name].shape.tolist()))  # GGUF: (in, out)
              for name, ours in names.items()}
    check_sizes(cfg, shapes, path.name)
    state = {}
    with float_cache.converting():  # torch from here on: at exit, stop between two tensors
        for name, ours in names.items():
            check_stop()
            t = tensors[name]
            a = gguf.quants.dequantize(t.data, t.tensor_type)  # numpy, (out, in) like torch
            w = torch.from_numpy(np.require(a, np.float32, ["C", "W", "O"]))
            if name.endswith("attn_q.weight"):
                w = unpermute(w, cfg.n_heads)
            elif name.endswith("attn_k.weight"):
                w = unpermute(w, cfg.n_kv_heads)
            state[ours] = w.contiguous()
    return cfg, {k: v for k, v in meta.items() if k.startswith("tokenizer.")}, state


# --- the float cache (model/float_cache.py) ----------------------------------------------------
def _stamp(gguf_path: Path) -> dict[str, str]:
    st = gguf_path.stat()
    return {"format": CONVERTED_FORMAT, "version": CONVERTED_VERSION, "gguf_size": str(st.st_size),
            "gguf_mtime_ns": str(st.st_mtime_ns)}


def _check_magic(path: Path) -> None:
    if not path.is_file():
        raise WeightsError(f"GGUF file not found: {path}")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise WeightsError(f"{path.name} is not a GGUF file (no GGUF magic bytes)")


def _build(cfg: LlamaConfig, tok, specials: dict, state: dict[str, torch.Tensor], source: str,
           name: str, description: str) -> Llama:
    pad = specials["padding"] or specials["eos"]
    tt = TextTokenizer(tok, pad=pad, bos=specials["bos"], eos=specials["eos"])
    with torch.device("meta"):  # no random init: the weights come next
        m = Llama(cfg, tt, name=name, description=description)
    try:
        m.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise WeightsError(f"{source} does not match the llama architecture: {e}") from None
    return m.eval()


def _from_cache(conv: Path, path: Path, name: str, description: str) -> Llama | None:
    """The model from an intact, current float cache; None to convert again."""
    from tokenizers import Tokenizer

    found = float_cache.read(conv, _stamp(path))
    if found is None:
        return None
    meta, state = found
    try:
        cfg = LlamaConfig.from_dict(json.loads(meta["config"]))
        check_sizes(cfg, {k: tuple(v.shape) for k, v in state.items()}, conv.name)
        return _build(cfg, Tokenizer.from_str(meta["tokenizer"]), json.loads(meta["specials"]),
                      state, conv.name, name, description)
    except Exception as e:  # written by us, checksum intact: only a bug or a foreign writer gets here
        warnings.warn(f"ignoring the float cache {conv.name} ({type(e).__name__}: {str(e)[:200]}); "
                      f"converting the GGUF again", stacklevel=3)
        return None


def _convert(path: Path, conv: Path, name: str, description: str) -> Llama:
    """Read and check the GGUF, build the model, then (only then) write the float cache."""
    from .gguf_tokenizer import special_token, tokenizer_from_gguf

    log.info("converting %s to float32 (once; later loads read %s)", path.name, conv.name)
    try:
        cfg, tok_meta, state = read_gguf(path)
        tok = tokenizer_from_gguf(tok_meta)
        specials = {k: special_token(tok_meta, k) for k in ("padding", "bos", "eos")}
    except WeightsError:
        raise
    except Exception as e:  # the reader raises plain errors on truncated/corrupt files
        raise WeightsError(f"{path.name} is not a readable GGUF file ({type(e).__name__}: "
                           f"{e}); it may be truncated or corrupt") from None
    meta = {**_stamp(path), "source": str(path), "config": json.dumps(asdict(cfg)),
            "tokenizer": tok.to_str(), "specials": json.dumps(specials)}
    with float_cache.converting():  # at exit: the write stops between chunks, cleans up
        m = _build(cfg, tok, specials, state, path.name, name, description)
        float_cache.write(conv, state, meta)
    return m


def load_gguf(path: str | Path, name: str | None = None, description: str = "") -> Llama:
    """Load a llama-family GGUF, through (or creating) its float32 safetensors conversion.

    Concurrent first loads (threads or processes) convert once: the others wait for the lock,
    then read what the first one wrote.
    """
    path = Path(path)
    _check_magic(path)
    name, description = name or path.stem, description or f"Llama GGUF {path.name}"
    conv = converted_path(path)
    return float_cache.load_or_convert(path, conv, lambda: _from_cache(conv, path, name, description),
                                       lambda: _convert(path, conv, name, description))
