"""GGUF files read onto the family parts (model/arch/generic.py): the llama (byte-level or
SentencePiece vocabulary: SmolLM2, Llama 2 and 3, Mistral), qwen2, qwen3 and gemma3 architectures.
This is the project's one GGUF reader.

The metadata becomes the config.json a Hugging Face folder would hold, and model/arch/family.py reads
it as it reads any folder's: one description of each family, whatever the file. Tensor names map
onto the parts; every size is checked against the tensors the file holds (shapes from the header,
on a model built on the meta device) before anything is dequantized; nothing is unpickled.

    GGUF                          ours
    token_embd / output_norm / output      decoder.embed / decoder.ln_final / unembed
    blk.{i}.attn_norm, ffn_norm            decoder.blocks.{i}.ln1, ln2
    blk.{i}.attn_q|k|v|output (.bias)      self_attn.W_Q|W_K|W_V|W_O
    blk.{i}.attn_q_norm, attn_k_norm       self_attn.q_norm, k_norm (qwen3)
    blk.{i}.ffn_gate|up|down               ffn.W_gate|W_in|W_out
    blk.{i}.post_attention_norm, post_ffw_norm   ln1_post, ln2_post (gemma3's sandwich)

llama.cpp's converter interleaves the rows of W_Q and W_K of llama files for its rotary layout
(``unpermute`` undoes it); qwen2, qwen3 and gemma3 keep Hugging Face's layout. Gemma's
norms are stored as 1 + w (the converter adds the 1), so they are read as plain RMSNorms; its
attention scale is llama.cpp's (1/√head_dim; 1/√(d_model/heads) for the 62-layer 27B), its local
layers every sixth one full (unless the file says otherwise) with rotary base 10000 (GEMMA3 below
says where each of these facts comes from). qwen2's sliding window is not part of its files
(llama.cpp does not use one).

A file of CACHE_FROM_BYTES or more is converted once: the float32 tensors, the config and the
tokenizer go to a float cache (model/files/float_cache.py), and later loads read only that (SmolLM2
135M: ~10 s to read and dequantize, about a second from the cache; Gemma 3 270M: ~75 s to read
the metadata, rebuild the 262,144-piece tokenizer and dequantize, a few seconds from the cache).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
import warnings
from pathlib import Path

import numpy as np
import torch

from model.arch.family import family_of
from model.arch.generic import Transformer
from model.files import float_cache
from model.files.checks import MAX_VOCAB, check_layers
from model.files.float_cache import check_stop, converted_path
from model.files.hf import check_tensor_shapes
from model.files.tokenizer import TextTokenizer
from model.runtime import malloc, memory
from model.runtime.errors import WeightsError

CONVERTED_FORMAT = "attention-explorer-gguf-family"
CONVERTED_VERSION = "1"  # bump when the conversion, the config or the tokenizer building changes
CACHE_FROM_BYTES = 32 << 20  # smaller files load from the GGUF directly in about a second
log = logging.getLogger(__name__)

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma3")
MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3_text"}
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                  "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                  "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token")
TOP = {"token_embd": "decoder.embed", "output_norm": "decoder.ln_final", "output": "unembed"}
LAYER = {"attn_norm": "ln1", "attn_q": "self_attn.W_Q", "attn_k": "self_attn.W_K", "attn_v": "self_attn.W_V",
         "attn_output": "self_attn.W_O", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
         "ffn_norm": "ln2", "ffn_gate": "ffn.W_gate", "ffn_up": "ffn.W_in", "ffn_down": "ffn.W_out",
         "post_attention_norm": "ln1_post", "post_ffw_norm": "ln2_post"}


def rename(name: str) -> str | None:
    """A GGUF tensor name -> ours (None for tensors no part uses)."""
    module, _, param = name.rpartition(".")
    if module in TOP:
        return f"{TOP[module]}.{param}"
    blk, i, rest = (module.split(".", 2) + ["", ""])[:3]
    if blk == "blk" and i.isdigit() and rest in LAYER:
        return f"decoder.blocks.{int(i)}.{LAYER[rest]}.{param}"
    return None


def gguf_name(mine: str) -> str:
    """Our tensor name -> the GGUF file's (``rename`` backwards), for messages."""
    module, _, param = mine.rpartition(".")
    for theirs, ours in TOP.items():
        if module == ours:
            return f"{theirs}.{param}"
    m = re.fullmatch(r"decoder\.blocks\.(\d+)\.(.+)", module)
    back = {ours: theirs for theirs, ours in LAYER.items()}
    return f"blk.{m.group(1)}.{back[m.group(2)]}.{param}" if m and m.group(2) in back else mine


# config_of's config.json keys -> the GGUF metadata keys they come from ("{arch}." before the relative ones)
GGUF_KEYS = {"vocab_size": "len(tokenizer.ggml.tokens)", "hidden_size": "embedding_length",
             "num_attention_heads": "attention.head_count", "num_key_value_heads": "attention.head_count_kv",
             "head_dim": "attention.key_length", "intermediate_size": "feed_forward_length",
             "max_position_embeddings": "context_length", "num_hidden_layers": "block_count",
             "rope_theta": "rope.freq_base", "rms_norm_eps": "attention.layer_norm_rms_epsilon",
             "sliding_window": "attention.sliding_window", "rope_local_base_freq": "rope.freq_base_swa"}


def gguf_words(message: str, arch: str) -> str:
    """A message about the config.json the metadata became, in the file's own metadata keys
    ("num_hidden_layers is 10000" -> "llama.block_count is 10000")."""
    def key(m: re.Match) -> str:
        k = GGUF_KEYS[m.group(0)]
        return k if "(" in k else f"{arch}.{k}"

    return re.sub(r"\b(" + "|".join(GGUF_KEYS) + r")\b", key, message)


def gguf_said(f, arch: str):
    """The family with what its sizes say in GGUF metadata keys ("gemma3.embedding_length=640")."""
    def key(m: re.Match) -> str:
        k = GGUF_KEYS.get(m.group(1))
        return m.group(0) if k is None else f"{k if '(' in k else f'{arch}.{k}'}="

    return dataclasses.replace(f, said=tuple((sym, re.sub(r"\b(\w+)=", key, text)) for sym, text in f.said))


def reads(arch: str | None) -> bool:
    """Whether this reader reads a file of this architecture."""
    return arch in ARCHITECTURES


def unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row order: per head, rows (0, h/2, 1, h/2+1, ...) -> (0..h/2, h/2..h).

    w: (n_heads * hs, d_in). llama.cpp wrote w.view(nh, 2, hs/2, d).transpose(1, 2).
    """
    out, d_in = w.shape
    hs = out // n_heads
    return w.view(n_heads, hs // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)  # (nh*hs, d)


# What a gemma3 GGUF does not store, from the architecture's published definition. llama.cpp's
# converter writes gemma3.rope.freq_base (the global layers' base), attention.sliding_window and the
# shapes; the rest is fixed by the architecture and the same for every Gemma 3 text model:
GEMMA3 = {
    # five local (sliding-window) layers for every global one, the global ones at layers 6, 12, ...
    # (1-based): Gemma 3 Technical Report (arXiv:2503.19786) §2 "5 local layers for every global
    # layer"; transformers' Gemma3TextConfig (sliding_window_pattern=6 -> layer_types); llama.cpp
    # (src/llama-model.cpp, LLM_ARCH_GEMMA3: hparams.set_swa_pattern(6))
    "sliding_window_pattern": 6,
    # RoPE base of the local layers: the report §2 "increase RoPE base frequency from 10k to 1M on
    # global self-attention layers, and keep the frequency of the local layers at 10k";
    # Gemma3TextConfig.default_theta["local"]; llama.cpp rope_freq_base_train_swa = 10000
    "rope_local_base_freq": 10_000.0,
    # RoPE base of the global layers when the file does not say (it does: gemma3.rope.freq_base)
    "rope_theta": 1_000_000.0,
    # scores = q·kᵀ / √query_pre_attn_scalar: 256 = head_dim for 270M, 1B, 4B, 12B (google/gemma-3-*
    # config.json; Gemma3TextConfig's default), d_model / heads for the 62-layer 27B (its
    # config.json: 168); llama.cpp f_attention_scale the same
    "query_pre_attn_scalar": "head_dim",
    # no soft-capping: Gemma 3 replaced Gemma 2's logit and score capping with QK-norm (the report
    # §2); the config.json files say null
    "final_logit_softcapping": None,
}


def config_of(meta: dict, arch: str, tensors: set[str], source: str) -> dict:
    """The config.json a Hugging Face folder of this model would hold, from the GGUF metadata."""
    def key(k, default=None):
        return meta.get(f"{arch}.{k}", default)

    scaling = key("rope.scaling.type", "none")
    if scaling not in ("none", None, "linear"):
        raise WeightsError(f"{source}: rope scaling {scaling!r} is not supported (none, linear)")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not 0 < len(tokens) <= MAX_VOCAB:
        raise WeightsError(f"{source}: the vocabulary (tokenizer.ggml.tokens) is missing or too large")
    head_dim = key("attention.key_length")
    if key("attention.value_length", head_dim) != head_dim:
        raise WeightsError(f"{source}: value heads wider or narrower than key heads are not supported")
    if key("rope.dimension_count", head_dim) not in (head_dim, None) and head_dim is not None:
        raise WeightsError(f"{source}: partial rotary dimensions are not supported in GGUF files")
    rope = {"rope_type": "linear", "factor": key("rope.scaling.factor")} if scaling == "linear" else {}
    config = {
        "model_type": MODEL_TYPES[arch], "vocab_size": len(tokens), "hidden_size": key("embedding_length"),
        "num_hidden_layers": key("block_count"), "num_attention_heads": key("attention.head_count"),
        "num_key_value_heads": key("attention.head_count_kv"), "head_dim": head_dim,
        "intermediate_size": key("feed_forward_length"),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": key("rope.freq_base", 10000.0), "max_position_embeddings": key("context_length", 2048),
        "tie_word_embeddings": "output.weight" not in tensors,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"), "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"), "rope_scaling": rope or None,
    }
    if arch == "gemma3":
        d, H, hs = key("embedding_length"), key("attention.head_count"), head_dim
        pattern = key("attention.sliding_window_pattern", GEMMA3["sliding_window_pattern"])
        n = key("block_count")
        if isinstance(pattern, list):  # per layer: True where the layer uses the window
            config["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
        else:
            config["sliding_window_pattern"] = pattern
        scalar = d // H if n == 62 and isinstance(d, int) and isinstance(H, int) else hs
        config.update(query_pre_attn_scalar=scalar, sliding_window=key("attention.sliding_window"),
                      rope_local_base_freq=key("rope.freq_base_swa", GEMMA3["rope_local_base_freq"]),
                      final_logit_softcapping=key("final_logit_softcapping", GEMMA3["final_logit_softcapping"]),
                      rope_theta=key("rope.freq_base", GEMMA3["rope_theta"]))
    return config


def _read_meta(path: Path) -> tuple[object, dict]:
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
        meta = {k: f.contents() for k, f in reader.fields.items()
                if not k.startswith("tokenizer.") or k in TOKENIZER_KEYS}
    except Exception as e:  # the reader raises plain errors on truncated or corrupt files
        raise WeightsError(f"{path.name} is not a readable GGUF file ({type(e).__name__}: {e}); "
                           f"it may be truncated or corrupt") from None
    return reader, meta


def _family(config: dict, source: str, arch: str):
    """The Family of the config.json the metadata became; a message in the file's own keys."""
    try:
        f = family_of(config, source)
    except WeightsError as e:
        raise WeightsError(gguf_words(str(e), arch)) from None
    if f.norm == "rms1p":  # Gemma: the file holds 1 + w
        f = dataclasses.replace(f, norm="rms")
    return f


def _assemble(f, tt: TextTokenizer, spm: bool, shapes: dict, source: str, arch: str, name: str,
              description: str) -> Transformer:
    """The model on the meta device (nothing allocated), its shapes checked against ``shapes``."""
    tied = f.tie_word_embeddings
    with torch.device("meta"):  # the shapes the metadata gives, allocating nothing
        m = Transformer(f, tt, name=name, description=description, tied_output=tied,
                        token_style="metaspace" if spm else "bytes")
    expected = {k: tuple(v.shape) for k, v in m.state_dict().items() if not (tied and k == "unembed.weight")}
    extra = set(shapes) - set(expected)
    if extra:
        raise WeightsError(f"{source}: the file holds {sorted(gguf_name(x) for x in extra)[:3]}, which its "
                           f"metadata does not describe")
    check_tensor_shapes(source, gguf_said(f, arch), expected, shapes, {k: gguf_name(k) for k in expected}, {},
                        where=f"the {arch} metadata")
    return m


def _load_state(m: Transformer, state: dict[str, torch.Tensor], source: str, arch: str) -> Transformer:
    """``m`` with ``state``'s tensors as its weights, laid out for the CPU (lay_out_weights). ``state``
    is emptied: lay_out_weights copies W_Q, W_K, W_V and the narrowing projections into new tensors one
    module at a time, and each old tensor is freed as its copy is made only if nothing else holds it.
    A caller that kept the dict kept every old tensor to the end: SmolLM2's load from its float cache
    peaked at 1002 MB, 904 MB with the dict emptied (bench/results/smollm2-load-peak-20261128.txt)."""
    given = state
    if m.family.tie_word_embeddings:
        state = {**state, "unembed.weight": state["decoder.embed.weight"]}
    try:
        m.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise WeightsError(f"{source} does not match the {arch} architecture: {e}") from None
    given.clear()
    del state, given
    m = m.lay_out_weights().requires_grad_(False).eval()
    malloc.trim()  # the old layouts' blocks, freed, back to the kernel (not kept for a run to reuse)
    return m


def _read_gguf(path: Path, name: str | None, description: str):
    """Read, check and dequantize; returns (model, what the float cache keeps)."""
    import gguf

    from model.files.gguf_spm import spm_tokenizer_from_gguf
    from model.files.gguf_tokenizer import special_token, tokenizer_from_gguf

    reader, meta = _read_meta(path)
    arch, spm = meta.get("general.architecture"), meta.get("tokenizer.ggml.model") == "llama"
    if not reads(arch):
        raise WeightsError(f"{path.name}: GGUF architecture {arch!r} is not supported; supported: "
                           f"{', '.join(ARCHITECTURES)}")
    tensors = {t.name: t for t in reader.tensors}
    source = f"{path.name} ({arch})"
    config = config_of(meta, arch, set(tensors), source)
    f = _family(config, path.name, arch)  # family_of adds the model_type: "x.gguf (llama): ..."

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
        tok = spm_tokenizer_from_gguf(meta, arch) if spm else tokenizer_from_gguf(meta)
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise WeightsError(f"{source}: its tokenizer cannot be rebuilt ({e})") from None
    specials = {"pad": special_token(meta, "padding") or special_token(meta, "eos"),
                "bos": special_token(meta, "bos"), "eos": special_token(meta, "eos")}
    tt = TextTokenizer(tok, **specials)
    m = _assemble(f, tt, spm, shapes, source, arch, name or path.stem,
                  description or f"{arch} GGUF {path.name}")
    need = sum(4 * int(np.prod(s)) for s in shapes.values())
    room = memory.available()
    if room is not None and need > room:
        raise WeightsError(f"{source}: the weights need {memory.shown(need)} as float32, but only "
                           f"{memory.shown(room)} of memory is available")
    state = {}
    with float_cache.converting():  # torch from here on: at exit, stop between two tensors
        for mine, t in ours.items():
            check_stop()
            a = gguf.quants.dequantize(tensors[t].data, tensors[t].tensor_type)  # numpy, (out, in) like torch
            w = torch.from_numpy(np.require(a, np.float32, ["C", "W", "O"])).reshape(shapes[mine])
            if arch == "llama" and mine.endswith(("W_Q.weight", "W_K.weight")):  # llama.cpp's rotary row order
                w = unpermute(w, f.n_heads if "W_Q" in mine else f.n_kv_heads)
            state[mine] = w.contiguous()
    kept = {"config": json.dumps(config), "tokenizer": tok.to_str(), "specials": json.dumps(specials),
            "arch": arch, "spm": "1" if spm else "0"}
    return _load_state(m, dict(state), source, arch), kept, state  # the float cache writes state's layouts


# --- the float cache (model/files/float_cache.py) ----------------------------------------------
def _stamp(path: Path) -> dict[str, str]:
    st = path.stat()
    return {"format": CONVERTED_FORMAT, "version": CONVERTED_VERSION, "gguf_size": str(st.st_size),
            "gguf_mtime_ns": str(st.st_mtime_ns)}


def _from_cache(conv: Path, path: Path, name: str | None, description: str) -> Transformer | None:
    """The model from an intact, current float cache; None to convert again."""
    from tokenizers import Tokenizer

    found = float_cache.read(conv, _stamp(path))
    if found is None:
        return None
    meta, state = found
    del found  # _load_state empties state: no other name may keep its tensors
    try:
        arch, source = meta["arch"], f"{conv.name} ({meta['arch']})"
        f = _family(json.loads(meta["config"]), conv.name, arch)
        tt = TextTokenizer(Tokenizer.from_str(meta["tokenizer"]), **json.loads(meta["specials"]))
        m = _assemble(f, tt, meta["spm"] == "1", {k: tuple(v.shape) for k, v in state.items()}, source, arch,
                      name or path.stem, description or f"{arch} GGUF {path.name}")
        return _load_state(m, state, source, arch)
    except Exception as e:  # written by us, checksum intact: only a bug or a foreign writer gets here
        warnings.warn(f"ignoring the float cache {conv.name} ({type(e).__name__}: {str(e)[:200]}); "
                      f"converting the GGUF again", stacklevel=3)
        return None


def _convert(path: Path, conv: Path, name: str | None, description: str) -> Transformer:
    """Read and check the GGUF, build the model, then (only then) write the float cache."""
    log.info("converting %s to float32 (once; later loads read %s)", path.name, conv.name)
    m, kept, state = _read_gguf(path, name, description)
    with float_cache.converting():  # at exit: the write stops between chunks, cleans up
        float_cache.write(conv, state, {**_stamp(path), "source": str(path), **kept})
    return m


def _check_magic(path: Path) -> None:
    if not path.is_file():
        raise WeightsError(f"GGUF file not found: {path}")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise WeightsError(f"{path.name} is not a GGUF file (no GGUF magic bytes)")


def load_gguf_family(path: str | Path, name: str | None = None, description: str = "") -> Transformer:
    """Load a llama, qwen2, qwen3 or gemma3 GGUF, any quantization the `gguf` package dequantizes;
    a file of CACHE_FROM_BYTES or more through its float cache (written by the first load;
    concurrent first loads convert once, the others wait and read it)."""
    path = Path(path)
    _check_magic(path)
    big = path.stat().st_size >= CACHE_FROM_BYTES
    if not big:
        return _read_gguf(path, name, description)[0]
    conv = converted_path(path)
    return float_cache.load_or_convert(path, conv, lambda: _from_cache(conv, path, name, description),
                                       lambda: _convert(path, conv, name, description))
