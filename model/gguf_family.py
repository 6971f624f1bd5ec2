"""GGUF files of the qwen2 and qwen3 architectures, read onto the family parts (model/generic.py).

The metadata becomes the config.json a Hugging Face folder would hold, and model/family.py reads
it as it reads any folder's: one description of each family, whatever the file. Tensor names map
onto the parts; every size is checked against the tensors the file holds (shapes from the header,
on a model built on the meta device) before anything is dequantized; nothing is unpickled.
llama GGUFs keep their own reader (model/llama.py, with its float32 cache).

    GGUF                          ours
    token_embd / output_norm / output      decoder.embed / decoder.ln_final / unembed
    blk.{i}.attn_norm, ffn_norm            decoder.blocks.{i}.ln1, ln2
    blk.{i}.attn_q|k|v|output (.bias)      self_attn.W_Q|W_K|W_V|W_O
    blk.{i}.attn_q_norm, attn_k_norm       self_attn.q_norm, k_norm (qwen3)
    blk.{i}.ffn_gate|up|down               ffn.W_gate|W_in|W_out

qwen2 and qwen3 keep Hugging Face's rotary layout in GGUF (llama.cpp's "NEOX" rope), so no row
is permuted. A sliding window is not part of these files (llama.cpp does not use one for them).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from . import memory
from .checks import MAX_VOCAB, check_layers, check_shapes
from .errors import WeightsError
from .family import family_of
from .generic import Transformer
from .tokenizer import TextTokenizer

ARCHITECTURES = ("qwen2", "qwen3")  # read here; "llama" is read by model/llama.py
TOP = {"token_embd": "decoder.embed", "output_norm": "decoder.ln_final", "output": "unembed"}
LAYER = {"attn_norm": "ln1", "attn_q": "self_attn.W_Q", "attn_k": "self_attn.W_K", "attn_v": "self_attn.W_V",
         "attn_output": "self_attn.W_O", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
         "ffn_norm": "ln2", "ffn_gate": "ffn.W_gate", "ffn_up": "ffn.W_in", "ffn_down": "ffn.W_out"}


def rename(name: str) -> str | None:
    """A GGUF tensor name -> ours (None for tensors no part uses)."""
    module, _, param = name.rpartition(".")
    if module in TOP:
        return f"{TOP[module]}.{param}"
    blk, i, rest = (module.split(".", 2) + ["", ""])[:3]
    if blk == "blk" and i.isdigit() and rest in LAYER:
        return f"decoder.blocks.{int(i)}.{LAYER[rest]}.{param}"
    return None


def architecture(path: Path) -> str | None:
    """general.architecture of a GGUF file; None when it is not a readable GGUF."""
    try:
        import gguf

        field = gguf.GGUFReader(str(path)).fields.get("general.architecture")
        return None if field is None else field.contents()
    except Exception:  # not a GGUF, truncated: the llama reader gives the message
        return None


def config_of(meta: dict, arch: str, tensors: set[str], source: str) -> dict:
    """The config.json a Hugging Face folder of this model would hold, from the GGUF metadata."""
    def key(k, default=None):
        return meta.get(f"{arch}.{k}", default)

    if key("rope.scaling.type", "none") not in ("none", None):
        raise WeightsError(f"{source}: rope scaling {key('rope.scaling.type')!r} is not supported")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not 0 < len(tokens) <= MAX_VOCAB:
        raise WeightsError(f"{source}: the vocabulary (tokenizer.ggml.tokens) is missing or too large")
    head_dim = key("attention.key_length")
    if key("attention.value_length", head_dim) != head_dim:
        raise WeightsError(f"{source}: value heads wider or narrower than key heads are not supported")
    return {
        "model_type": arch, "vocab_size": len(tokens), "hidden_size": key("embedding_length"),
        "num_hidden_layers": key("block_count"), "num_attention_heads": key("attention.head_count"),
        "num_key_value_heads": key("attention.head_count_kv"), "head_dim": head_dim,
        "intermediate_size": key("feed_forward_length"),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": key("rope.freq_base", 10000.0), "max_position_embeddings": key("context_length", 2048),
        "tie_word_embeddings": "output.weight" not in tensors,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"), "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    }


def load_gguf_family(path: str | Path, name: str | None = None, description: str = "") -> Transformer:
    """Load a qwen2 or qwen3 GGUF (any quantization the `gguf` package dequantizes)."""
    import gguf

    from .gguf_tokenizer import special_token, tokenizer_from_gguf
    from .llama import TOKENIZER_KEYS

    path = Path(path)
    try:
        reader = gguf.GGUFReader(str(path))
        meta = {k: f.contents() for k, f in reader.fields.items()
                if not k.startswith("tokenizer.") or k in TOKENIZER_KEYS}
    except Exception as e:  # the reader raises plain errors on truncated or corrupt files
        raise WeightsError(f"{path.name} is not a readable GGUF file ({type(e).__name__}: {e}); "
                           f"it may be truncated or corrupt") from None
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise WeightsError(f"{path.name}: architecture {arch!r} is not read here ({', '.join(ARCHITECTURES)})")
    tensors = {t.name: t for t in reader.tensors}
    source = f"{path.name} ({arch})"
    f = family_of(config_of(meta, arch, set(tensors), source), source)

    ours = {}
    for t in tensors:
        mine = rename(t)
        if mine is None:
            raise WeightsError(f"{source}: tensor {t} is not one this reader knows; refusing rather than "
                               f"computing something else")
        ours[mine] = t
    shapes = {mine: tuple(int(n) for n in reversed(tensors[t].shape.tolist())) for mine, t in ours.items()}
    check_layers(source, f"{arch}.block_count", f.n_layers, shapes, "decoder.blocks.")
    try:
        tok = tokenizer_from_gguf(meta)
    except (ValueError, KeyError) as e:
        raise WeightsError(f"{source}: its tokenizer cannot be rebuilt ({e})") from None
    pad = special_token(meta, "padding") or special_token(meta, "eos")
    tt = TextTokenizer(tok, pad=pad, bos=special_token(meta, "bos"), eos=special_token(meta, "eos"))
    tied = f.tie_word_embeddings
    with torch.device("meta"):  # the shapes the metadata gives, allocating nothing
        m = Transformer(f, tt, name=name or path.stem, description=description or f"{arch} GGUF {path.name}",
                        tied_output=tied, token_style="bytes")
    expected = {k: tuple(v.shape) for k, v in m.state_dict().items() if not (tied and k == "unembed.weight")}
    extra = set(shapes) - set(expected)
    if extra:
        raise WeightsError(f"{source}: the file holds {sorted(extra)[:3]}, which its metadata does not describe")
    check_shapes(source, shapes, {k: (v, f"{arch} metadata") for k, v in expected.items()})
    need = sum(4 * int(np.prod(s)) for s in shapes.values())
    room = memory.available()
    if room is not None and need > room:
        raise WeightsError(f"{source}: the weights need {memory.shown(need)} as float32, but only "
                           f"{memory.shown(room)} of memory is available")
    state = {}
    for mine, t in ours.items():
        a = gguf.quants.dequantize(tensors[t].data, tensors[t].tensor_type)  # numpy, (out, in) like torch
        state[mine] = torch.from_numpy(np.require(a, np.float32, ["C", "W", "O"])).reshape(shapes[mine])
    if tied:
        state["unembed.weight"] = state["decoder.embed.weight"]
    try:
        m.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise WeightsError(f"{source} does not match the {arch} architecture: {e}") from None
    return m.requires_grad_(False).eval()
