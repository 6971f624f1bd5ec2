"""The BERT encoder (all-MiniLM-L6-v2 and any BERT checkpoint folder), built from small parts.

    x = LayerNorm(word_emb + type_emb + pos_emb)       (learned absolute positions)
    block: x = LayerNorm(x + SelfAttn(x))               (post-LN, like the seed Transformer)
           x = LayerNorm(x + W_out·gelu(W_in·x))

A folder with config.json + model.safetensors + tokenizer.json (the Hugging Face layout) is
enough. The attention is the project's one ``Attention``; the padding mask hides the pad keys.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import nn

from .attention import Attention, Mask
from .base import HookedModel, HookScope, ModelInfo, Output, pad_batch
from .checks import (MAX_FF, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_VOCAB, MAX_WIDTH, check_layers,
                     check_shapes, need_divides, need_int)
from .errors import WeightsError
from .hooks import Cache, HookPoint
from .tokenizer import TextTokenizer

ACTIVATIONS = {
    "gelu": lambda x: nn.functional.gelu(x),
    "gelu_new": lambda x: nn.functional.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),
    "relu": torch.relu,
}


@dataclass
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, act: str) -> None:
        super().__init__()
        self.W_in = nn.Linear(d_model, d_ff)
        self.W_out = nn.Linear(d_ff, d_model)
        self.act = ACTIVATIONS[act]

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.W_in(x))  # (B, T, d_ff)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.W_out(h)  # (B, T, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(self.hidden(x))


class BertBlock(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.hook_resid_pre = HookPoint()  # (B, T, d) the stream entering the block
        self.self_attn = Attention(d, cfg.num_attention_heads)
        self.hook_attn_sum = HookPoint()  # (B, T, d) x + SelfAttn(x), before ln1
        self.ln1 = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.hook_resid_mid = HookPoint()  # (B, T, d) after ln1
        self.ffn = FeedForward(d, cfg.intermediate_size, cfg.hidden_act)
        self.hook_ffn_hidden = HookPoint()  # (B, T, d_ff) act(x W_in + b_in)
        self.hook_ffn_out = HookPoint()  # (B, T, d)
        self.hook_ffn_sum = HookPoint()  # (B, T, d) x + FFN(x), before ln2
        self.ln2 = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.hook_resid_post = HookPoint()  # (B, T, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(self.ln1(self.hook_attn_sum(x + self.self_attn(x, mask=mask))))
        f = self.hook_ffn_out(self.ffn.project(self.hook_ffn_hidden(self.ffn.hidden(x))))
        x = self.ln2(self.hook_ffn_sum(x + f))
        return self.hook_resid_post(x)


class BertEncoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.word_embed = nn.Embedding(cfg.vocab_size, d)
        self.type_embed = nn.Embedding(cfg.type_vocab_size, d) if cfg.type_vocab_size else None
        self.pos_embed = nn.Embedding(cfg.max_position_embeddings, d)
        self.hook_embed = HookPoint()  # (B, T, d) word + token-type embeddings
        self.hook_pos_embed = HookPoint()  # (1, T, d) learned positions
        self.ln_embed = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.blocks = nn.ModuleList(BertBlock(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        tok = self.word_embed(ids)  # (B, T, d)
        if self.type_embed is not None:  # one sentence per row: every token is of type 0
            tok = tok + self.type_embed(torch.zeros_like(ids))
        pos = self.pos_embed(torch.arange(T)).unsqueeze(0)  # (1, T, d)
        x = self.ln_embed(self.hook_embed(tok) + self.hook_pos_embed(pos))
        mask = Mask.of(mask)  # one mask for every block: derived once, not per layer
        for block in self.blocks:
            x = block(x, mask)
        return x


class Bert(HookedModel):
    def __init__(self, cfg: BertConfig, tokenizer: TextTokenizer, name: str = "bert",
                 description: str = "") -> None:
        super().__init__()
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.encoder = BertEncoder(cfg)
        n, d = cfg.num_attention_heads, cfg.hidden_size
        self.info = ModelInfo(
            name=name, kind="encoder", n_layers=cfg.num_hidden_layers, n_heads=n, n_kv_heads=n,
            d_model=d, d_head=d // n, positional="learned", vocab_size=cfg.vocab_size,
            max_len=cfg.max_position_embeddings, description=description,
            embed_scale=1.0, embed_norm=True, norm="post-LayerNorm", d_ff=cfg.intermediate_size,
            ffn={"relu": "ReLU", "gelu": "GELU"}.get(cfg.hidden_act, "GELU (tanh)"),
        )
        self.setup_hooks()

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids: (B, T) right-padded; lengths: (B,). Returns the last hidden state (B, T, d)."""
        real = torch.arange(ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
        return self.encoder(ids, real[:, None, None, :])  # mask (B, 1, 1, T)

    def _run(self, texts: list[str], scope: HookScope) -> tuple[Output, Cache]:
        tt, max_len = self.tokenizer, self.cfg.max_position_embeddings
        encs = tt.encode(texts)
        truncated = [len(e.ids) > max_len for e in encs]
        for e in encs:  # keep the final [SEP] when cutting
            if len(e.ids) > max_len:
                e.ids = e.ids[: max_len - 1] + e.ids[-1:]
                e.tokens = e.tokens[: max_len - 1] + e.tokens[-1:]
                e.offsets = e.offsets[: max_len - 1] + e.offsets[-1:]
        ids = pad_batch([e.ids for e in encs], tt.pad_id)  # (B, T)
        lengths = torch.tensor([len(e.ids) for e in encs])
        with scope():
            hidden = self(ids, lengths)
        cache = Cache(tokens=[e.tokens for e in encs], token_ids=[e.ids for e in encs],
                      offsets=[e.offsets for e in encs])
        return Output(hidden=hidden, truncated=truncated), cache


# --- reading a checkpoint folder -----------------------------------------------------------
HF_LAYER_NAMES = {  # after "encoder.layer.{i}." -> after "encoder.blocks.{i}."
    "attention.self.query": "self_attn.W_Q",
    "attention.self.key": "self_attn.W_K",
    "attention.self.value": "self_attn.W_V",
    "attention.output.dense": "self_attn.W_O",
    "attention.output.LayerNorm": "ln1",
    "intermediate.dense": "ffn.W_in",
    "output.dense": "ffn.W_out",
    "output.LayerNorm": "ln2",
}
HF_EMBED_NAMES = {
    "embeddings.word_embeddings": "encoder.word_embed",
    "embeddings.token_type_embeddings": "encoder.type_embed",
    "embeddings.position_embeddings": "encoder.pos_embed",
    "embeddings.LayerNorm": "encoder.ln_embed",
}


def rename(hf_name: str) -> str | None:
    """A Hugging Face BERT tensor name -> ours (None for tensors we do not use)."""
    name = hf_name.removeprefix("bert.")
    name = name.replace(".gamma", ".weight").replace(".beta", ".bias")  # very old checkpoints
    module, _, param = name.rpartition(".")
    if module in HF_EMBED_NAMES:
        return f"{HF_EMBED_NAMES[module]}.{param}"
    parts = module.split(".", 3)  # encoder, layer, i, rest
    if len(parts) == 4 and parts[:2] == ["encoder", "layer"] and parts[3] in HF_LAYER_NAMES:
        return f"encoder.blocks.{parts[2]}.{HF_LAYER_NAMES[parts[3]]}.{param}"
    return None  # position_ids, pooler, MLM/NSP heads


def read_config(folder: Path) -> BertConfig:
    try:
        raw = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise WeightsError(f"{folder / 'config.json'} is not readable JSON ({e})") from None
    if not isinstance(raw, dict):
        raise WeightsError(f"{folder.name}/config.json holds a {type(raw).__name__}, not a JSON object")
    if raw.get("model_type", "bert") != "bert":
        raise WeightsError(f"{folder.name}: model_type {raw.get('model_type')!r} is not supported; "
                           f"this loader reads BERT checkpoints (model_type 'bert')")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise WeightsError(f"{folder.name}: only absolute position embeddings are supported")
    try:
        cfg = BertConfig.from_dict(raw)
    except TypeError as e:
        raise WeightsError(f"{folder / 'config.json'} lacks a BERT setting ({e})") from None
    if cfg.hidden_act not in ACTIVATIONS:
        raise WeightsError(f"{folder.name}: activation {cfg.hidden_act!r} is not supported")
    return cfg


def read_tokenizer(folder: Path, cfg: BertConfig) -> TextTokenizer:
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # the library raises plain Exceptions for bad JSON
        raise WeightsError(f"{folder / 'tokenizer.json'} is not a valid tokenizer ({e})") from None
    tok.no_padding()  # we pad ourselves and build the mask from the lengths
    tok.no_truncation()  # we cut at max_position_embeddings, keeping [SEP]
    pad = tok.id_to_token(cfg.pad_token_id)
    return TextTokenizer(tok, pad=pad, bos="[CLS]" if tok.token_to_id("[CLS]") is not None else None,
                         eos="[SEP]" if tok.token_to_id("[SEP]") is not None else None)


def _read_safetensors(path: Path, what):
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return what(f)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightsError(f"{path.name} is not a readable safetensors file ({e}); "
                           f"it may be truncated or corrupt") from None


def read_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Our tensor name -> shape, from the file's header only (no tensor data is read)."""
    return _read_safetensors(path, lambda f: {ours: tuple(f.get_slice(k).get_shape())
                                              for k in f.keys() if (ours := rename(k))})


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    return _read_safetensors(path, lambda f: {ours: f.get_tensor(k).float()
                                              for k in f.keys() if (ours := rename(k))})


def check_sizes(cfg: BertConfig, shapes: dict[str, tuple[int, ...]], source: str) -> None:
    """Every size config.json claims, against sane bounds and the tensors the file holds."""
    L = need_int(source, "num_hidden_layers", cfg.num_hidden_layers, 1, MAX_LAYERS)
    H = need_int(source, "num_attention_heads", cfg.num_attention_heads, 1, MAX_HEADS)
    d = need_int(source, "hidden_size", cfg.hidden_size, 1, MAX_WIDTH)
    need_divides(source, "num_attention_heads", H, "hidden_size", d)
    ff = need_int(source, "intermediate_size", cfg.intermediate_size, 1, MAX_FF)
    V = need_int(source, "vocab_size", cfg.vocab_size, 1, MAX_VOCAB)
    P = need_int(source, "max_position_embeddings", cfg.max_position_embeddings, 1, MAX_POSITIONS)
    n_types = need_int(source, "type_vocab_size", cfg.type_vocab_size, 0, 1024)
    need_int(source, "pad_token_id", cfg.pad_token_id, 0, V - 1)
    eps = cfg.layer_norm_eps
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise WeightsError(f"{source}: layer_norm_eps is {eps!r}; it should be a small positive number")
    check_layers(source, "num_hidden_layers", L, shapes, "encoder.blocks.")
    dd = f"hidden_size={d}"
    want = {"encoder.word_embed.weight": ((V, d), f"vocab_size={V}, {dd}"),
            "encoder.pos_embed.weight": ((P, d), f"max_position_embeddings={P}, {dd}"),
            "encoder.ln_embed.weight": ((d,), dd)}
    if n_types:
        want["encoder.type_embed.weight"] = ((n_types, d), f"type_vocab_size={n_types}, {dd}")
    for i in range(L):  # L is at most the layers the file holds (checked above)
        b = f"encoder.blocks.{i}."
        want.update({b + f"self_attn.W_{x}.weight": ((d, d), dd) for x in "QKVO"})
        want[b + "ffn.W_in.weight"] = ((ff, d), f"intermediate_size={ff}, {dd}")
        want[b + "ffn.W_out.weight"] = ((d, ff), f"{dd}, intermediate_size={ff}")
    check_shapes(source, shapes, want)


def load_bert(folder: str | Path, name: str | None = None, description: str = "") -> Bert:
    """Load a BERT checkpoint folder: config.json + model.safetensors + tokenizer.json."""
    folder = Path(folder)
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
               if not (folder / f).is_file()]
    if missing:
        hint = " (only safetensors weights are read, never pickled .bin files)" \
            if "model.safetensors" in missing and (folder / "pytorch_model.bin").exists() else ""
        raise WeightsError(f"{folder} lacks {', '.join(missing)}: a BERT checkpoint folder needs "
                           f"config.json, model.safetensors and tokenizer.json{hint}")
    cfg = read_config(folder)
    check_sizes(cfg, read_shapes(folder / "model.safetensors"), f"{folder.name}/config.json")
    tok = read_tokenizer(folder, cfg)
    if tok.vocab_size > cfg.vocab_size:  # a token id past the embedding would fail mid-run
        raise WeightsError(f"{folder.name}: tokenizer.json has {tok.vocab_size} tokens, but "
                           f"config.json's vocab_size is {cfg.vocab_size}; it should be at least "
                           f"{tok.vocab_size}")
    state = read_weights(folder / "model.safetensors")
    with torch.device("meta"):  # no random init: the weights come next
        m = Bert(cfg, tok, name=name or folder.name, description=description or f"BERT {folder.name}")
    try:
        m.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise WeightsError(f"{folder.name} does not match the BERT architecture: {e}") from None
    return m.eval()
