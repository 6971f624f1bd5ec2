"""A family is data: what a checkpoint's config.json says about its architecture.

One set of parts (model/arch/parts.py) builds every model; a ``Family`` chooses among them:

    norm         "layer" (LayerNorm) | "rms" (RMSNorm) | "rms1p" (Gemma: x̂·(1 + w))
    placement    "post" (x = Norm(x + f(x)), 2017 and BERT) | "pre" (x = x + f(Norm(x)))
                 | "sandwich" (Gemma: x = x + Norm(f(Norm(x))))
    act, gated   the feed-forward: act(x W_in) W_out, or act(x W_gate) * (x W_up) W_out when gated
                 ("silu" gated = SwiGLU, "gelu_tanh" gated = GeGLU)
    positions    "sinusoidal" | "learned" (RoBERTa: rows start at pad_id + 1) | "rotary"
                 (half-split or interleaved pairs, possibly on the first rope_dims only)
                 | "relative" (T5: a learned bias per head and distance bucket)
    window       a sliding window (a query sees itself and the window - 1 keys before it) on the
                 layers whose window_layers entry is True
    softcaps     c·tanh(x / c) on the attention scores and/or the final logits (0: none)

``FAMILIES`` maps each supported ``model_type`` to the function that reads its config.json;
every size and switch is checked (model/files/checks.py bounds), and so is each special token id the
kind of model uses (against vocab_size), before anything is allocated; ``Family.said`` keeps which
config.json key and value gave each size, for the reader's messages (model/files/hf.py: shape_reasons).
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from model.files.checks import (MAX_FF, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_VOCAB, MAX_WIDTH, need_divides,
                                need_int)
from model.runtime.errors import WeightsError

ACTIVATIONS = {  # config.json's names -> ours
    "gelu": "gelu", "gelu_python": "gelu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "relu": "relu", "silu": "silu", "swish": "silu",
}
ACT_NAMES = {"gelu": "GELU", "gelu_tanh": "GELU (tanh)", "relu": "ReLU", "silu": "SiLU"}
GATED_NAMES = {"silu": "SwiGLU", "gelu": "GeGLU", "gelu_tanh": "GeGLU", "relu": "ReGLU"}
NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "rms1p": "RMSNorm"}


@dataclass(frozen=True)
class Rope:
    """Rotary positions of one kind of layer: θ_i = base^(-2i/dims), then the scaling's change."""

    base: float = 10000.0
    scaling: str = "default"  # "default" | "linear" (θ / factor) | "llama3" (Llama 3.1's smoothing)
    factor: float = 1.0
    low_freq_factor: float = 1.0  # llama3 only
    high_freq_factor: float = 4.0  # llama3 only
    original_max_len: int = 8192  # llama3 only


@dataclass(frozen=True)
class Family:
    model_type: str
    kind: str  # "encoder" | "decoder" | "encoder-decoder"
    vocab_size: int
    d_model: int
    n_layers: int  # blocks of the first stack (the encoder, or the decoder of a decoder-only model)
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    max_len: int  # positions a sentence may take
    n_decoder_layers: int = 0  # encoder-decoder only
    # norms
    norm: str = "layer"  # "layer" | "rms" | "rms1p"
    norm_eps: float = 1e-5
    placement: str = "pre"  # "post" | "pre" | "sandwich"
    embed_norm: bool = False  # a LayerNorm after embedding + positions (BERT)
    final_norm: bool = True  # a norm after each stack's last block (pre-norm, sandwich)
    # feed-forward
    act: str = "gelu"  # "gelu" | "gelu_tanh" | "relu" | "silu"
    gated: bool = False
    # positions
    positions: str = "learned"  # "sinusoidal" | "learned" | "rotary" | "relative"
    pos_offset: int = 0  # learned: position i reads row pos_offset + i (RoBERTa: pad_id + 1)
    sinusoidal_split: bool = False  # sin in the first half, cos in the second (Marian); else interleaved
    sinusoidal_base: float = 10000.0  # the n of sin(pos / n^(2i/d)) (the seed model may use another)
    rope: Rope = field(default_factory=Rope)  # rotary of full-attention layers
    rope_local: Rope | None = None  # rotary of sliding-window layers, if different (Gemma 3)
    rope_dims: int = 0  # rotated dimensions per head (partial rotary); 0: all of d_head
    rope_interleaved: bool = False  # pairs (2i, 2i+1); else (i, i + dims/2) ("rotate half")
    relative_buckets: int = 32  # T5
    relative_max_distance: int = 128  # T5
    type_vocab_size: int = 0  # BERT's token types (every token is type 0)
    # attention
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # a norm over each head's q and k before rotary (Qwen3, Gemma 3)
    attn_scale: float = 0.0  # scores = q·kᵀ · attn_scale; 0: 1/√d_head
    scale_by_layer: bool = False  # GPT-2's scale_attn_by_inverse_layer_idx: also ÷ (layer + 1)
    window: int = 0  # sliding window: keys a query may see, itself included; 0: none
    window_layers: tuple[bool, ...] = ()  # per layer of the first stack: uses the window
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    # embedding and output
    embed_scale: float = 1.0  # token embeddings × this (√d_model: Gemma, Marian, the paper)
    head: str = "lm"  # "lm": final norm + projection | "mlm": dense, act, LayerNorm, projection | "": none
    head_act: str = "gelu"  # the MLM head's activation
    output_bias: bool = False  # a bias on the output projection (MLM heads, Marian's final_logits_bias)
    logit_scale: float = 1.0  # the stream × this before the output projection (T5 with tied output)
    tie_word_embeddings: bool = True  # config.json's claim; the reader ties when the file has no output matrix
    conv1d: bool = False  # GPT-2: weights stored (in, out) (the reader transposes them)
    # tokens
    pad_id: int | None = None
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = ()
    decoder_start_id: int | None = None  # encoder-decoder: the first decoder token
    # what config.json said for each size, for messages: (symbol, "key=value"), symbols vocab, d,
    # heads, kv, head_dim, ff, positions, types, buckets (model/files/hf.py: shape_reasons)
    said: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    # --- derived ------------------------------------------------------------------------------
    def says(self, symbol: str) -> str | None:
        """What config.json said for a size ("hidden_size=32"), None when not recorded."""
        return dict(self.said).get(symbol)

    @property
    def scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.d_head)

    def layer_scale(self, i: int) -> float:
        return self.scale / (i + 1) if self.scale_by_layer else self.scale

    def windowed(self, i: int) -> bool:
        return bool(self.window) and bool(self.window_layers) and self.window_layers[i]

    @property
    def ffn_name(self) -> str:
        return GATED_NAMES[self.act] if self.gated else ACT_NAMES[self.act]

    @property
    def norm_name(self) -> str:
        """ModelInfo.norm: "post-LayerNorm", "pre-RMSNorm", "sandwich-RMSNorm(1+w)", ..."""
        name = NORM_NAMES[self.norm] + ("(1+w)" if self.norm == "rms1p" else "")
        return f"{self.placement}-{name}"


# --- reading config.json -------------------------------------------------------------------------
class Config:
    """config.json with checked reads: every value is validated where it is read."""

    def __init__(self, raw: dict, source: str) -> None:
        self.raw, self.source = raw, source

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def int(self, key: str, lo: int, hi: int, default: object = ...) -> int:
        return need_int(self.source, key, self.first(key, default=default), lo, hi)

    def opt_int(self, key: str, lo: int, hi: int) -> int | None:
        return None if self.raw.get(key) is None else self.int(key, lo, hi)

    def float(self, key: str, default: object = ..., lo: float = 0.0, hi: float = math.inf,
              *, positive: bool = True) -> float:
        value = self.first(key, default=default)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                or not lo <= value <= hi or (positive and value <= 0):
            raise WeightsError(f"{self.source}: {key} is {value!r}; it should be a "
                               f"{'positive ' if positive else ''}number{f' up to {hi}' if hi < math.inf else ''}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise WeightsError(f"{self.source}: {key} is {value!r}; it should be true or false")
        return value

    def str(self, key: str, default: str | None = None, choices: dict | tuple | None = None) -> str:
        value = self.raw.get(key, default)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            shown = ", ".join(choices) if choices is not None else "a string"
            raise WeightsError(f"{self.source}: {key} is {value!r}; supported: {shown}")
        return value

    def first(self, *keys: str, default: object = ...) -> object:
        for k in keys:
            if self.raw.get(k) is not None:
                return self.raw[k]
        if default is ...:
            raise WeightsError(f"{self.source}: {keys[0]} is missing from config.json")
        return default

    def act(self, key: str, default: str) -> str:
        return ACTIVATIONS[self.str(key, default, tuple(ACTIVATIONS))]

    def said(self, **symbols: tuple[str, object]) -> tuple[tuple[str, str], ...]:
        """symbol=(key, value) -> (symbol, "key=value"), "(its default)" when config.json lacks the key."""
        return tuple((sym, f"{key}={value}" + ("" if self.has(key) else " (its default)"))
                     for sym, (key, value) in symbols.items())

    def mha_said(self, V: int, d: tuple[str, int], heads: tuple[str, int], ff: tuple[str, int],
                 positions: tuple[str, int], **more: tuple[str, object]) -> tuple[tuple[str, str], ...]:
        """``said`` of a model whose K/V heads are its heads and whose head width is d / heads (GPT-2,
        BERT and kin, Marian): each symbol's (key, value), then head_dim as "d_key=d / heads_key=H"."""
        return self.said(vocab=("vocab_size", V), d=d, heads=heads, kv=heads, ff=ff, positions=positions, **more) \
            + (("head_dim", f"{d[0]}={d[1]} / {heads[0]}={heads[1]}"),)

    def head_dim_said(self, hs: int, d: int, d_key: str, H: int, heads_key: str, head_dim_key: str) -> str:
        if self.has(head_dim_key):
            return f"{head_dim_key}={hs}"
        return f"{d_key}={d} / {heads_key}={H}"

    USES = {  # the special ids a run looks up in the embedding (an id outside the vocabulary would fail there)
        "encoder": ("pad_token_id",),  # the padding of a batch (and RoBERTa's position offset)
        "decoder": ("pad_token_id",),  # the padding of a batch
        "encoder-decoder": ("pad_token_id", "decoder_start_token_id"),  # padding, the decoder's first token
    }
    # An end id is only compared with what the model writes (an argmax over the vocabulary never reaches
    # an id past it), and a bos id outside the vocabulary only matters for an empty sentence, which then
    # gets a message; as transformers does, such a config.json loads (GPT-2's default eos and bos, 50256,
    # in the many small test checkpoints with a smaller vocab_size), with a note of the ids ignored.

    def token_ids(self, vocab: int, kind: str) -> dict:
        """pad, bos, eos (a list of ids or one) and decoder_start. An id a run of this kind of model
        looks up (USES) must be a token of the vocabulary, else a WeightsError before anything is
        built; any other id that lies outside (GPT-2's 50256 with a small vocab_size, a config.json
        left with another vocabulary's ids) is dropped with a warning that says so."""
        uses = self.USES[kind]

        def valid(key, value):
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < vocab:
                if key in uses:
                    what = "outside the vocabulary" if isinstance(value, numbers.Integral) and \
                        not isinstance(value, bool) else "not a token id"
                    raise WeightsError(f"{self.source}: {key} is {value!r}, {what} (vocab_size={vocab}); "
                                       f"it should be a token id from 0 to {vocab - 1}")
                warnings.warn(f"{self.source}: {key} {value!r} is not a token of the {vocab}-token "
                              f"vocabulary; ignored (a run never looks it up: "
                              f"{'decoding does not stop on it' if key == 'eos_token_id' else 'an empty sentence is refused'})",
                              stacklevel=4)
                return None
            return int(value)

        eos = self.raw.get("eos_token_id")
        eos = [] if eos is None else eos if isinstance(eos, list) else [eos]
        ends = tuple(e for e in (valid("eos_token_id", e) for e in eos) if e is not None)
        return dict(pad_id=valid("pad_token_id", self.raw.get("pad_token_id")),
                    bos_id=valid("bos_token_id", self.raw.get("bos_token_id")), eos_ids=ends,
                    decoder_start_id=valid("decoder_start_token_id", self.raw.get("decoder_start_token_id")))

    def refuse(self, key: str, allowed: object, what: str) -> None:
        """Refuse a setting we do not implement (rather than computing something else)."""
        if self.raw.get(key, allowed) not in (allowed, None):
            raise WeightsError(f"{self.source}: {key}={self.raw[key]!r} ({what}) is not supported")


def _heads(c: Config, d: int, heads_key: str = "num_attention_heads", kv_key: str = "num_key_value_heads",
           head_dim_key: str = "head_dim") -> tuple[int, int, int]:
    H = c.int(heads_key, 1, MAX_HEADS)
    KV = c.int(kv_key, 1, H, H)
    need_divides(c.source, kv_key, KV, heads_key, H)
    if c.has(head_dim_key):
        hs = c.int(head_dim_key, 1, MAX_WIDTH)
    else:
        need_divides(c.source, heads_key, H, "hidden_size", d)
        hs = d // H
    return H, KV, hs


def _rope(c: Config, params: object, default_base: float, where: str) -> Rope:
    """One rotary description from a rope_parameters / rope_scaling dict (transformers 5 or 4)."""
    params = params if isinstance(params, dict) else {}
    base = params.get("rope_theta", default_base)
    kind = params.get("rope_type", params.get("type", "default"))
    sub = Config(params, f"{c.source} ({where})")
    sub.float("rope_theta", base)
    if kind == "default":
        return Rope(base=float(base))
    if kind == "linear":
        return Rope(base=float(base), scaling="linear", factor=sub.float("factor"))
    if kind == "llama3":
        low, high = sub.float("low_freq_factor"), sub.float("high_freq_factor")
        if not high > low:
            raise WeightsError(f"{sub.source}: high_freq_factor ({high}) must exceed low_freq_factor ({low})")
        return Rope(base=float(base), scaling="llama3", factor=sub.float("factor"), low_freq_factor=low,
                    high_freq_factor=high,
                    original_max_len=sub.int("original_max_position_embeddings", 1, MAX_POSITIONS,
                                             c.raw.get("max_position_embeddings", 8192)))
    raise WeightsError(f"{sub.source}: rotary scaling {kind!r} is not supported (supported: default, "
                       f"linear, llama3)")


def _rope_of(c: Config, layer_type: str = "", default_base: float = 10000.0) -> Rope:
    """transformers 5 writes rope_parameters (flat, or per layer type); 4 wrote rope_theta + rope_scaling."""
    params = c.raw.get("rope_parameters")
    if isinstance(params, dict) and layer_type and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    if not isinstance(params, dict) or not params:
        params = dict(c.raw.get("rope_scaling") or {})
        params.setdefault("rope_theta", c.raw.get("rope_theta", default_base))
    params = dict(params)
    params.setdefault("rope_theta", c.raw.get("rope_theta", default_base))
    return _rope(c, params, default_base, f"rotary of {layer_type or 'every layer'}")


def _partial_rotary(c: Config, hs: int) -> int:
    params = c.raw.get("rope_parameters")
    factor = (params or {}).get("partial_rotary_factor") if isinstance(params, dict) else None
    factor = c.raw.get("partial_rotary_factor", factor)
    if factor is None or factor == 1:
        return 0
    dims = int(hs * Config({"partial_rotary_factor": factor}, c.source).float("partial_rotary_factor", hi=1.0))
    if dims < 2 or dims % 2:
        raise WeightsError(f"{c.source}: partial_rotary_factor {factor} leaves {dims} rotated dimensions "
                           f"per head; it should leave an even number")
    return dims


def _layer_windows(c: Config, n_layers: int, window: int, default: Callable[[int], bool]) -> tuple[bool, ...]:
    """Per layer: uses the sliding window (config.json's layer_types, else the family's rule)."""
    types = c.raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers or \
                not all(t in ("full_attention", "sliding_attention") for t in types):
            raise WeightsError(f"{c.source}: layer_types should list 'full_attention' or "
                               f"'sliding_attention' for each of the {n_layers} layers")
        return tuple(bool(window) and t == "sliding_attention" for t in types)
    return tuple(bool(window) and default(i) for i in range(n_layers))


def _check_rotary(c: Config, hs: int, dims: int) -> None:
    if (dims or hs) % 2:
        raise WeightsError(f"{c.source}: head_dim is {hs}; rotary positions need an even head width")


# --- the families ---------------------------------------------------------------------------------
def _decoder_sizes(c: Config, V: int, d: int, H: int, KV: int, hs: int, positions: int) -> tuple[bool, int, int, tuple]:
    """What a Llama-shaped config.json gives every decoder besides its heads: attention bias, the
    feed-forward's width, the positions (``positions`` if unsaid), and which sizes it said."""
    bias = c.bool("attention_bias", False)
    ff = c.int("intermediate_size", 1, MAX_FF)
    P = c.int("max_position_embeddings", 1, MAX_POSITIONS, positions)
    said = c.said(vocab=("vocab_size", V), d=("hidden_size", d), heads=("num_attention_heads", H),
                  kv=("num_key_value_heads", KV), ff=("intermediate_size", ff),
                  positions=("max_position_embeddings", P))
    said += (("head_dim", c.head_dim_said(hs, d, "hidden_size", H, "num_attention_heads", "head_dim")),)
    return bias, ff, P, said


def _llama_like(c: Config, model_type: str, *, qkv_bias: bool | None = None, qk_norm: bool = False,
                window: int = 0, window_rule: Callable[[int], bool] = lambda i: True) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("hidden_size", 1, MAX_WIDTH)
    L = c.int("num_hidden_layers", 1, MAX_LAYERS)
    H, KV, hs = _heads(c, d)
    dims = _partial_rotary(c, hs)
    _check_rotary(c, hs, dims)
    c.refuse("pretraining_tp", 1, "tensor-parallel slicing")
    bias, ff, P, said = _decoder_sizes(c, V, d, H, KV, hs, positions=2048)
    return Family(
        model_type=model_type, kind="decoder", vocab_size=V, d_model=d, n_layers=L, n_heads=H,
        n_kv_heads=KV, d_head=hs, d_ff=ff, max_len=P, said=said,
        norm="rms", norm_eps=c.float("rms_norm_eps", 1e-6), placement="pre",
        act=c.act("hidden_act", "silu"), gated=True, positions="rotary", rope=_rope_of(c), rope_dims=dims,
        qkv_bias=bias if qkv_bias is None else qkv_bias, out_bias=bias if qkv_bias is None else False,
        mlp_bias=c.bool("mlp_bias", False), qk_norm=qk_norm, window=window,
        window_layers=_layer_windows(c, L, window, window_rule),
        tie_word_embeddings=c.bool("tie_word_embeddings", True), **c.token_ids(V, "decoder"))


def llama(c: Config) -> Family:
    return _llama_like(c, "llama")


def mistral(c: Config) -> Family:
    window = c.opt_int("sliding_window", 1, MAX_POSITIONS) or 0
    return _llama_like(c, "mistral", window=window)


def _qwen_window(c: Config) -> tuple[int, Callable[[int], bool]]:
    window = (c.opt_int("sliding_window", 1, MAX_POSITIONS) or 0) if c.bool("use_sliding_window", False) else 0
    first = c.int("max_window_layers", 0, MAX_LAYERS, 28)
    return window, lambda i: i >= first


def qwen2(c: Config) -> Family:
    window, rule = _qwen_window(c)
    return _llama_like(c, "qwen2", qkv_bias=True, window=window, window_rule=rule)


def qwen3(c: Config) -> Family:
    window, rule = _qwen_window(c)
    return _llama_like(c, "qwen3", qk_norm=True, window=window, window_rule=rule)


def gemma3_text(c: Config) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("hidden_size", 1, MAX_WIDTH)
    L = c.int("num_hidden_layers", 1, MAX_LAYERS)
    H, KV, hs = _heads(c, d)
    _check_rotary(c, hs, 0)
    c.float("attn_logit_softcapping", 0.0, positive=False)
    if c.bool("use_bidirectional_attention", False):
        raise WeightsError(f"{c.source}: use_bidirectional_attention (an embedding model) is not supported")
    window = c.opt_int("sliding_window", 1, MAX_POSITIONS) or 0
    pattern = c.int("sliding_window_pattern", 1, MAX_LAYERS, 6)
    global_base = float(c.raw.get("rope_theta", 1_000_000.0))
    local_base = float(c.raw.get("rope_local_base_freq", 10_000.0))
    rope = _rope_of(c, "full_attention", global_base)
    local = _rope_of(c, "sliding_attention", local_base)
    if not isinstance(c.raw.get("rope_parameters"), dict):  # transformers 4: rope_scaling is the global one's
        local = Rope(base=local_base)
    bias, ff, P, said = _decoder_sizes(c, V, d, H, KV, hs, positions=131072)
    return Family(
        model_type="gemma3_text", kind="decoder", vocab_size=V, d_model=d, n_layers=L, n_heads=H,
        n_kv_heads=KV, d_head=hs, d_ff=ff, max_len=P, said=said,
        norm="rms1p", norm_eps=c.float("rms_norm_eps", 1e-6), placement="sandwich",
        act=c.act("hidden_activation", "gelu_pytorch_tanh"), gated=True, positions="rotary",
        rope=rope, rope_local=local, qkv_bias=bias, out_bias=bias, qk_norm=True,
        attn_scale=c.float("query_pre_attn_scalar", 256) ** -0.5,
        window=window, window_layers=_layer_windows(c, L, window, lambda i: bool((i + 1) % pattern)),
        # attn_logit_softcapping is read but not applied: Gemma 3 replaced Gemma 2's score capping
        # with QK-norm, and transformers' Gemma 3 attention never passes it on (checked on 5.23)
        final_softcap=c.float("final_logit_softcapping", 0.0, positive=False),
        embed_scale=math.sqrt(d), tie_word_embeddings=c.bool("tie_word_embeddings", True), **c.token_ids(V, "decoder"))


def gpt2(c: Config) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("n_embd", 1, MAX_WIDTH)
    H = c.int("n_head", 1, MAX_HEADS)
    need_divides(c.source, "n_head", H, "n_embd", d)
    c.refuse("add_cross_attention", False, "cross-attention in a GPT-2")
    c.refuse("reorder_and_upcast_attn", False, "a different attention order")
    scaled = c.bool("scale_attn_weights", True)
    ff = c.int("n_inner", 1, MAX_FF, 4 * d)
    P = c.int("n_positions", 1, MAX_POSITIONS, 1024)
    said = c.mha_said(V, ("n_embd", d), ("n_head", H), ("n_inner", ff), ("n_positions", P))
    return Family(
        model_type="gpt2", kind="decoder", vocab_size=V, d_model=d, n_layers=c.int("n_layer", 1, MAX_LAYERS),
        n_heads=H, n_kv_heads=H, d_head=d // H, d_ff=ff, max_len=P, said=said, norm="layer",
        norm_eps=c.float("layer_norm_epsilon", 1e-5), placement="pre",
        act=c.act("activation_function", "gelu_new"), positions="learned",
        qkv_bias=True, out_bias=True, mlp_bias=True, attn_scale=0.0 if scaled else 1.0,
        scale_by_layer=c.bool("scale_attn_by_inverse_layer_idx", False),
        tie_word_embeddings=c.bool("tie_word_embeddings", True), conv1d=True, **c.token_ids(V, "decoder"))


def _bert_like(c: Config, model_type: str, offset: bool) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("hidden_size", 1, MAX_WIDTH)
    H = c.int("num_attention_heads", 1, MAX_HEADS)
    need_divides(c.source, "num_attention_heads", H, "hidden_size", d)
    c.refuse("position_embedding_type", "absolute", "relative position embeddings")
    c.refuse("is_decoder", False, "a BERT used as a decoder")
    act = c.act("hidden_act", "gelu")
    ids = c.token_ids(V, "encoder")
    pad = ids["pad_id"] if ids["pad_id"] is not None else 0
    ff = c.int("intermediate_size", 1, MAX_FF)
    P = c.int("max_position_embeddings", 1, MAX_POSITIONS, 512)
    types = c.int("type_vocab_size", 0, 1024, 2)
    said = c.mha_said(V, ("hidden_size", d), ("num_attention_heads", H), ("intermediate_size", ff),
                      ("max_position_embeddings", P), types=("type_vocab_size", types))
    return Family(
        model_type=model_type, kind="encoder", vocab_size=V, d_model=d,
        n_layers=c.int("num_hidden_layers", 1, MAX_LAYERS), n_heads=H, n_kv_heads=H, d_head=d // H,
        d_ff=ff, max_len=P - (pad + 1 if offset else 0), said=said,
        norm="layer", norm_eps=c.float("layer_norm_eps", 1e-12, hi=1.0), placement="post",
        embed_norm=True, final_norm=False, act=act, positions="learned",
        pos_offset=pad + 1 if offset else 0, type_vocab_size=types,
        qkv_bias=True, out_bias=True, mlp_bias=True, head="mlm",
        head_act="gelu" if offset else act, output_bias=True, **{**ids, "pad_id": pad})


def bert(c: Config) -> Family:
    return _bert_like(c, "bert", offset=False)


def roberta(c: Config) -> Family:
    f = _bert_like(c, "roberta", offset=True)
    if f.max_len < 1:
        raise WeightsError(f"{c.source}: max_position_embeddings leaves no position after the "
                           f"padding offset (pad_token_id + 1 = {f.pos_offset})")
    return f


def distilbert(c: Config) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("dim", 1, MAX_WIDTH)
    H = c.int("n_heads", 1, MAX_HEADS)
    need_divides(c.source, "n_heads", H, "dim", d)
    act = c.act("activation", "gelu")
    ids = c.token_ids(V, "encoder")
    ff = c.int("hidden_dim", 1, MAX_FF)
    P = c.int("max_position_embeddings", 1, MAX_POSITIONS, 512)
    said = c.mha_said(V, ("dim", d), ("n_heads", H), ("hidden_dim", ff), ("max_position_embeddings", P))
    return Family(
        model_type="distilbert", kind="encoder", vocab_size=V, d_model=d, n_layers=c.int("n_layers", 1, MAX_LAYERS),
        n_heads=H, n_kv_heads=H, d_head=d // H, d_ff=ff, said=said,
        max_len=P, norm="layer", norm_eps=1e-12,
        placement="post", embed_norm=True, final_norm=False, act=act,
        positions="sinusoidal" if c.bool("sinusoidal_pos_embds", False) else "learned",
        qkv_bias=True, out_bias=True, mlp_bias=True, head="mlm", head_act=act, output_bias=True,
        **{**ids, "pad_id": 0 if ids["pad_id"] is None else ids["pad_id"]})


def marian(c: Config) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("d_model", 1, MAX_WIDTH)
    H = c.int("encoder_attention_heads", 1, MAX_HEADS)
    need_divides(c.source, "encoder_attention_heads", H, "d_model", d)
    for key, same in (("decoder_attention_heads", "encoder_attention_heads"), ("decoder_ffn_dim", "encoder_ffn_dim")):
        if c.raw.get(key, c.raw.get(same)) != c.raw.get(same):
            raise WeightsError(f"{c.source}: {key} differs from {same}; both stacks must have the same shape")
    if not c.bool("share_encoder_decoder_embeddings", True) or \
            c.raw.get("decoder_vocab_size") not in (None, V):
        raise WeightsError(f"{c.source}: separate source and target vocabularies are not supported")
    c.refuse("normalize_before", False, "pre-norm Marian")
    ids = c.token_ids(V, "encoder-decoder")
    if ids["decoder_start_id"] is None:
        ids["decoder_start_id"] = ids["pad_id"]
    if ids["decoder_start_id"] is None:
        raise WeightsError(f"{c.source}: neither decoder_start_token_id nor pad_token_id is set; the "
                           f"decoder needs its first token")
    ff = c.int("encoder_ffn_dim", 1, MAX_FF)
    P = c.int("max_position_embeddings", 1, MAX_POSITIONS, 1024)
    said = c.mha_said(V, ("d_model", d), ("encoder_attention_heads", H), ("encoder_ffn_dim", ff),
                      ("max_position_embeddings", P))
    return Family(
        model_type="marian", kind="encoder-decoder", vocab_size=V, d_model=d,
        n_layers=c.int("encoder_layers", 1, MAX_LAYERS), n_decoder_layers=c.int("decoder_layers", 1, MAX_LAYERS),
        n_heads=H, n_kv_heads=H, d_head=d // H, d_ff=ff, said=said,
        max_len=P, norm="layer", norm_eps=1e-5,
        placement="post", final_norm=False, act=c.act("activation_function", "gelu"),
        positions="sinusoidal", sinusoidal_split=True, qkv_bias=True, out_bias=True, mlp_bias=True,
        embed_scale=math.sqrt(d) if c.bool("scale_embedding", False) else 1.0, output_bias=True,
        tie_word_embeddings=c.bool("tie_word_embeddings", True), **ids)


def t5(c: Config) -> Family:
    V = c.int("vocab_size", 1, MAX_VOCAB)
    d = c.int("d_model", 1, MAX_WIDTH)
    H = c.int("num_heads", 1, MAX_HEADS)
    hs = c.int("d_kv", 1, MAX_WIDTH)
    proj = c.str("feed_forward_proj", "relu")
    gated, _, act = proj.rpartition("-")
    if gated not in ("", "gated") or act not in ACTIVATIONS:
        raise WeightsError(f"{c.source}: feed_forward_proj {proj!r} is not supported (e.g. relu, gated-gelu)")
    L = c.int("num_layers", 1, MAX_LAYERS)
    ids = c.token_ids(V, "encoder-decoder")
    if ids["decoder_start_id"] is None:
        ids["decoder_start_id"] = ids["pad_id"] if ids["pad_id"] is not None else 0
    # the original T5 scales its output by d_model^-½, v1.1 does not: transformers 5 writes which as
    # scale_decoder_outputs; earlier configs said it with tie_word_embeddings (false for v1.1)
    scaled = c.bool("scale_decoder_outputs", c.raw.get("tie_word_embeddings") is not False)
    ff = c.int("d_ff", 1, MAX_FF)
    P = c.int("n_positions", 1, MAX_POSITIONS, 512)
    buckets = c.int("relative_attention_num_buckets", 2, 4096, 32)
    said = c.said(vocab=("vocab_size", V), d=("d_model", d), heads=("num_heads", H), kv=("num_heads", H),
                  head_dim=("d_kv", hs), ff=("d_ff", ff), positions=("n_positions", P),
                  buckets=("relative_attention_num_buckets", buckets))
    return Family(
        model_type="t5", kind="encoder-decoder", vocab_size=V, d_model=d, n_layers=L,
        n_decoder_layers=c.int("num_decoder_layers", 1, MAX_LAYERS, L), n_heads=H, n_kv_heads=H, d_head=hs,
        d_ff=ff, max_len=P, said=said,
        norm="rms", norm_eps=c.float("layer_norm_epsilon", 1e-6), placement="pre",
        act="gelu_tanh" if proj == "gated-gelu" else ACTIVATIONS[act], gated=bool(gated),
        positions="relative", relative_buckets=buckets,
        relative_max_distance=c.int("relative_attention_max_distance", 2, MAX_POSITIONS, 128),
        attn_scale=1.0, logit_scale=d ** -0.5 if scaled else 1.0, tie_word_embeddings=True, **ids)


def seed_family(cfg) -> Family:
    """The encoder-decoder of the seed tutorials (model/arch/seed.py's SeedConfig) as one more description:
    post-LayerNorm, ReLU, the paper's interleaved sinusoids with its base n, embeddings × √d_model,
    one embedding matrix for both stacks and the output."""
    return Family(
        model_type="seed", kind="encoder-decoder", vocab_size=cfg.vocab_size, d_model=cfg.d_model,
        n_layers=cfg.n_layers, n_decoder_layers=cfg.n_decoder_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_heads,
        d_head=cfg.d_model // cfg.n_heads, d_ff=cfg.d_ff, max_len=cfg.max_len, norm="layer", norm_eps=1e-5,
        placement="post", final_norm=False, act="relu", positions="sinusoidal", sinusoidal_base=cfg.pe_base,
        qkv_bias=True, out_bias=True, mlp_bias=True, embed_scale=math.sqrt(cfg.d_model),
        pad_id=cfg.pad_id, bos_id=cfg.bos_id, eos_ids=(cfg.eos_id,), decoder_start_id=cfg.bos_id)


FAMILIES: dict[str, Callable[[Config], Family]] = {
    "gpt2": gpt2, "llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3,
    "gemma3_text": gemma3_text, "bert": bert, "roberta": roberta, "distilbert": distilbert,
    "marian": marian, "t5": t5,
}
DESCRIPTIONS = {  # model_type -> what the family is, for messages and the README's table
    "gpt2": "GPT-2: pre-LayerNorm decoder, learned positions, GELU (tanh), Conv1D weights",
    "llama": "Llama: pre-RMSNorm decoder, rotary, SwiGLU, grouped-query attention",
    "mistral": "Mistral: Llama with a sliding window",
    "qwen2": "Qwen2: Llama with Q/K/V biases (sliding window on the upper layers if enabled)",
    "qwen3": "Qwen3: Llama with QK-norm",
    "gemma3_text": "Gemma 3 (text): sandwich RMSNorm(1+w), GeGLU, QK-norm, local/global layers with two rotary bases",
    "bert": "BERT: post-LayerNorm encoder, learned positions and token types",
    "roberta": "RoBERTa: BERT with positions counted from pad_token_id + 1",
    "distilbert": "DistilBERT: BERT without token types, 6 layers",
    "marian": "Marian: post-LayerNorm encoder-decoder, sinusoidal positions (sin half, cos half)",
    "t5": "T5: pre-RMSNorm encoder-decoder, bucketed relative position bias, no 1/√d scale",
}


def supported() -> str:
    return ", ".join(FAMILIES)


def family_of(raw: object, source: str) -> Family:
    """The Family of a parsed config.json; a WeightsError naming the supported model_types otherwise."""
    if not isinstance(raw, dict):
        raise WeightsError(f"{source} holds a {type(raw).__name__}, not a JSON object")
    model_type = raw.get("model_type")
    if model_type is None and any(str(a).startswith("Bert") for a in raw.get("architectures") or ()):
        model_type = "bert"  # BERT configs written before model_type existed name only their class
    if model_type not in FAMILIES:
        raise WeightsError(f"{source}: model_type {model_type!r} is not supported; supported model_types: "
                           f"{supported()}")
    return FAMILIES[model_type](Config(raw, f"{source} ({model_type})"))
