"""The encoder–decoder of "Attention Is All You Need", built from small parts to the whole.

    tokens → embedding·√d_model + sinusoidal PE
    encoder block: x = LayerNorm(x + SelfAttn(x)); x = LayerNorm(x + FFN(x))
    decoder block: masked self-attention, cross-attention to the encoder, FFN (each post-LN)
    logits = decoder output · Eᵀ      (one embedding matrix shared by both stacks and the output)

The padding mask hides pad keys everywhere; the decoder's self-attention adds the subsequent
(causal) mask. Masked scores are −inf, so their softmax weights are exactly 0.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from torch import nn

from .attention import Attention, causal_mask, padding_mask
from .base import HookedModel, HookScope, ModelInfo, Output, pad_batch
from .hooks import Cache, HookPoint
from .positional import sinusoidal
from .tokenizer import TextTokenizer, char_tokenizer, decode_chars


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


class FeedForward(nn.Module):
    """Position-wise: ReLU(x W1 + b1) W2 + b2."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_in = nn.Linear(d_model, d_ff)
        self.W_out = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_out(torch.relu(self.W_in(x)))


class EncoderBlock(nn.Module):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg.d_model, cfg.n_heads)
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.self_attn(x, mask=mask))
        x = self.ln2(x + self.ffn(x))
        return self.hook_resid_post(x)


class DecoderBlock(nn.Module):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg.d_model, cfg.n_heads)
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.cross_attn = Attention(cfg.d_model, cfg.n_heads)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)
        self.ln3 = nn.LayerNorm(cfg.d_model)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x, memory, self_mask, cross_mask) -> torch.Tensor:
        x = self.ln1(x + self.self_attn(x, mask=self_mask))
        x = self.ln2(x + self.cross_attn(x, kv=memory, mask=cross_mask))
        x = self.ln3(x + self.ffn(x))
        return self.hook_resid_post(x)


class Stack(nn.Module):
    """Embedding hooks, the sinusoidal encoding, and a list of blocks."""

    def __init__(self, cfg: SeedConfig, block: type[nn.Module], n: int) -> None:
        super().__init__()
        self.hook_embed = HookPoint()  # (B, T, d)
        self.hook_pos_embed = HookPoint()  # (1, T, d)
        self.register_buffer("pe", sinusoidal(cfg.max_len, cfg.d_model, cfg.pe_base), persistent=False)
        self.blocks = nn.ModuleList(block(cfg) for _ in range(n))

    def embed(self, tok_emb: torch.Tensor) -> torch.Tensor:
        T = tok_emb.shape[1]
        return self.hook_embed(tok_emb) + self.hook_pos_embed(self.pe[:T].unsqueeze(0))


class Encoder(Stack):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__(cfg, EncoderBlock, cfg.n_layers)

    def forward(self, tok_emb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(tok_emb)
        for block in self.blocks:
            x = block(x, mask)
        return x


class Decoder(Stack):
    def __init__(self, cfg: SeedConfig) -> None:
        super().__init__(cfg, DecoderBlock, cfg.n_decoder_layers)

    def forward(self, tok_emb, memory, self_mask, cross_mask) -> torch.Tensor:
        x = self.embed(tok_emb)
        for block in self.blocks:
            x = block(x, memory, self_mask, cross_mask)
        return x


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

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)

    @torch.inference_mode()
    def greedy(self, src: torch.Tensor, max_new: int) -> list[list[int]]:
        """Greedy decoding; each sentence stops at </s>. Returns ids without <s>/</s>."""
        cfg = self.cfg
        memory, src_mask = self.encode(src)
        B = src.shape[0]
        tgt = torch.full((B, 1), cfg.bos_id, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        for _ in range(max_new):
            nxt = self.decode(tgt, memory, src_mask, last_only=True)[:, -1].argmax(-1)  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, cfg.pad_id), nxt)
            tgt = torch.cat([tgt, nxt[:, None]], dim=1)
            done |= nxt == cfg.eos_id
            if done.all():
                break
        out = []
        for row in tgt[:, 1:].tolist():
            ids = []
            for i in row:
                if i in (cfg.eos_id, cfg.pad_id):
                    break
                ids.append(i)
            out.append(ids)
        return out

    # --- the hook contract ------------------------------------------------------------
    def _run(self, texts: list[str], scope: HookScope) -> tuple[Output, Cache]:
        tt, cfg = self.tokenizer, self.cfg
        encs = tt.encode(texts)
        truncated = [len(e.ids) > cfg.max_len for e in encs]
        for e in encs:  # keep the final </s> when cutting
            if len(e.ids) > cfg.max_len:
                e.ids = e.ids[: cfg.max_len - 1] + [cfg.eos_id]
                e.tokens = e.tokens[: cfg.max_len - 1] + [tt.id_to_token(cfg.eos_id)]
                e.offsets = e.offsets[: cfg.max_len - 1] + [(0, 0)]
        src = pad_batch([e.ids for e in encs], cfg.pad_id)  # (B, S)
        max_new = min(src.shape[1] + 8, cfg.max_len - 1)
        generated = self.greedy(src, max_new)
        dec_ids = [[cfg.bos_id] + g[: cfg.max_len - 1] for g in generated]
        tgt = pad_batch(dec_ids, cfg.pad_id)  # (B, T)
        with scope():
            logits = self(src, tgt)
        cache = Cache(
            tokens=[e.tokens for e in encs], token_ids=[e.ids for e in encs],
            offsets=[e.offsets for e in encs],
            decoder_tokens=[[tt.id_to_token(i) for i in d] for d in dec_ids],
            decoder_token_ids=dec_ids,
        )
        out = Output(logits=logits, generated=[decode_chars(tt, g) for g in generated], truncated=truncated)
        return out, cache

    # --- weights ----------------------------------------------------------------------
    def save(self, path: str | Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        meta = {"format": "attention-explorer-seed", "config": json.dumps(asdict(self.cfg))}
        meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path), metadata=meta)
