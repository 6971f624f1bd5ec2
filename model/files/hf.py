"""Reading a Hugging Face checkpoint folder into the generic model (model/arch/generic.py).

    config.json                      -> a Family (model/arch/family.py); unknown model_type refused
    model.safetensors                -> tensors, renamed onto the parts (never a pickle)
      or model-0000x-of-0000y.safetensors + model.safetensors.index.json
    tokenizer.json                   -> the `tokenizers` library; its post-processor adds the specials

Order: config.json is checked (every size within bounds), the file headers are read (names and
shapes only, no data), the layer count and every tensor's shape are compared with what the
configuration gives (an empty model built on the meta device, which allocates nothing), the
float32 size is compared with the memory available; only then are tensors read.
"""
from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from model.arch.family import Family, family_of, supported
from model.arch.generic import Transformer
from model.files.checks import check_layers
from model.files.tokenizer import TextTokenizer
from model.runtime import memory
from model.runtime.errors import WeightsError

WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"

# --- tensor names: theirs -> ours --------------------------------------------------------------
# Per family: (pattern on their name, ours); "{i}" stands for the layer number, "{p}" for weight|bias.
LLAMA_LAYER = {
    "self_attn.q_proj": "self_attn.W_Q", "self_attn.k_proj": "self_attn.W_K",
    "self_attn.v_proj": "self_attn.W_V", "self_attn.o_proj": "self_attn.W_O",
    "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm",
    "mlp.gate_proj": "ffn.W_gate", "mlp.up_proj": "ffn.W_in", "mlp.down_proj": "ffn.W_out",
    "input_layernorm": "ln1", "post_attention_layernorm": "ln2",
}
GEMMA_LAYER = {**LLAMA_LAYER, "post_attention_layernorm": "ln1_post", "pre_feedforward_layernorm": "ln2",
               "post_feedforward_layernorm": "ln2_post"}
GPT2_LAYER = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "self_attn.W_QKV", "attn.c_proj": "self_attn.W_O",
              "mlp.c_fc": "ffn.W_in", "mlp.c_proj": "ffn.W_out"}
BERT_LAYER = {
    "attention.self.query": "self_attn.W_Q", "attention.self.key": "self_attn.W_K",
    "attention.self.value": "self_attn.W_V", "attention.output.dense": "self_attn.W_O",
    "attention.output.LayerNorm": "ln1", "intermediate.dense": "ffn.W_in", "output.dense": "ffn.W_out",
    "output.LayerNorm": "ln2",
}
DISTILBERT_LAYER = {
    "attention.q_lin": "self_attn.W_Q", "attention.k_lin": "self_attn.W_K", "attention.v_lin": "self_attn.W_V",
    "attention.out_lin": "self_attn.W_O", "sa_layer_norm": "ln1", "ffn.lin1": "ffn.W_in",
    "ffn.lin2": "ffn.W_out", "output_layer_norm": "ln2",
}
MARIAN_ATTN = {"q_proj": "W_Q", "k_proj": "W_K", "v_proj": "W_V", "out_proj": "W_O"}
MARIAN_LAYER = {
    **{f"self_attn.{a}": f"self_attn.{b}" for a, b in MARIAN_ATTN.items()},
    **{f"encoder_attn.{a}": f"cross_attn.{b}" for a, b in MARIAN_ATTN.items()},
    "self_attn_layer_norm": "ln1", "encoder_attn_layer_norm": "ln_cross", "fc1": "ffn.W_in", "fc2": "ffn.W_out",
    "final_layer_norm": "ln2",
}
T5_ATTN = {"q": "W_Q", "k": "W_K", "v": "W_V", "o": "W_O"}
T5_FFN = {"DenseReluDense.wi": "ffn.W_in", "DenseReluDense.wi_0": "ffn.W_gate", "DenseReluDense.wi_1": "ffn.W_in",
          "DenseReluDense.wo": "ffn.W_out"}
T5_ENCODER_LAYER = {**{f"layer.0.SelfAttention.{a}": f"self_attn.{b}" for a, b in T5_ATTN.items()},
                    "layer.0.layer_norm": "ln1", **{f"layer.1.{a}": b for a, b in T5_FFN.items()},
                    "layer.1.layer_norm": "ln2"}
T5_DECODER_LAYER = {**{f"layer.0.SelfAttention.{a}": f"self_attn.{b}" for a, b in T5_ATTN.items()},
                    "layer.0.layer_norm": "ln1",
                    **{f"layer.1.EncDecAttention.{a}": f"cross_attn.{b}" for a, b in T5_ATTN.items()},
                    "layer.1.layer_norm": "ln_cross", **{f"layer.2.{a}": b for a, b in T5_FFN.items()},
                    "layer.2.layer_norm": "ln2"}


def _layers(theirs: str, ours: str, table: dict[str, str]) -> list[tuple[re.Pattern, str]]:
    """Rules for ``{theirs}.{i}.{module}.{param}`` -> ``{ours}.blocks.{i}.{module'}.{param}``."""
    return [(re.compile(rf"^{re.escape(theirs)}\.(\d+)\.{re.escape(a)}\.(weight|bias|gamma|beta)$"),
             f"{ours}.blocks.{{0}}.{b}.{{1}}") for a, b in table.items()]


def _top(table: dict[str, str]) -> list[tuple[re.Pattern, str]]:
    return [(re.compile(rf"^{re.escape(a)}\.(weight|bias|gamma|beta)$"), f"{b}.{{0}}") for a, b in table.items()]


def _bert_rules(stem: str, head: dict[str, str]) -> list:
    return _top({"embeddings.word_embeddings": "encoder.embed", "embeddings.token_type_embeddings": "encoder.type_embed",
                 "embeddings.position_embeddings": "encoder.pos_embed", "embeddings.LayerNorm": "encoder.ln_embed",
                 **head}) + _layers(f"{stem}", "encoder", BERT_LAYER)


RULES: dict[str, tuple[tuple[str, ...], list]] = {  # model_type -> (prefixes to strip, rules)
    "llama": (("model.",), _top({"embed_tokens": "decoder.embed", "norm": "decoder.ln_final", "lm_head": "unembed"})
              + _layers("layers", "decoder", LLAMA_LAYER)),
    "gemma3_text": (("model.",), _top({"embed_tokens": "decoder.embed", "norm": "decoder.ln_final",
                                       "lm_head": "unembed"}) + _layers("layers", "decoder", GEMMA_LAYER)),
    "gpt2": (("transformer.",), _top({"wte": "decoder.embed", "wpe": "decoder.pos_embed", "ln_f": "decoder.ln_final",
                                      "lm_head": "unembed"}) + _layers("h", "decoder", GPT2_LAYER)),
    "bert": (("bert.",), _bert_rules("encoder.layer", {
        "cls.predictions.transform.dense": "head_dense", "cls.predictions.transform.LayerNorm": "head_norm",
        "cls.predictions.decoder": "unembed", "cls.predictions": "unembed"})),
    "roberta": (("roberta.",), _bert_rules("encoder.layer", {
        "lm_head.dense": "head_dense", "lm_head.layer_norm": "head_norm", "lm_head.decoder": "unembed",
        "lm_head": "unembed"})),
    "distilbert": (("distilbert.",), _top({
        "embeddings.word_embeddings": "encoder.embed", "embeddings.position_embeddings": "encoder.pos_embed",
        "embeddings.LayerNorm": "encoder.ln_embed", "vocab_transform": "head_dense", "vocab_layer_norm": "head_norm",
        "vocab_projector": "unembed"}) + _layers("transformer.layer", "encoder", DISTILBERT_LAYER)),
    "marian": (("model.",), _top({"shared": "shared", "encoder.embed_tokens": "encoder.embed",
                                  "decoder.embed_tokens": "decoder.embed", "lm_head": "unembed"})
               + _layers("encoder.layers", "encoder", MARIAN_LAYER) + _layers("decoder.layers", "decoder", MARIAN_LAYER)),
    "t5": ((), _top({"shared": "shared", "encoder.embed_tokens": "encoder.embed", "decoder.embed_tokens": "decoder.embed",
                     "encoder.final_layer_norm": "encoder.ln_final", "decoder.final_layer_norm": "decoder.ln_final",
                     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias": "encoder.position_bias.embed",
                     "decoder.block.0.layer.0.SelfAttention.relative_attention_bias": "decoder.position_bias.embed",
                     "lm_head": "unembed"})
           + _layers("encoder.block", "encoder", T5_ENCODER_LAYER) + _layers("decoder.block", "decoder", T5_DECODER_LAYER)),
}
for _t in ("mistral", "qwen2", "qwen3"):
    RULES[_t] = RULES["llama"]
IGNORED = re.compile(  # tensors a checkpoint may hold that no part uses: heads for other tasks, buffers
    r"(^|\.)(pooler|classifier|qa_outputs|score|seq_relationship|cls\.seq_relationship)\.|position_ids$|"
    r"embed_positions\.weight$|rotary_emb\.inv_freq$|attn\.(masked_)?bias$|"
    r"EncDecAttention\.relative_attention_bias\.weight$|^final_logits_bias$")


def rename(model_type: str, name: str) -> str | None:
    """Their tensor name -> ours (None for a tensor no part uses)."""
    prefixes, rules = RULES[model_type]
    if name == "final_logits_bias" or name == "model.final_logits_bias":
        return "unembed.bias"
    for p in prefixes:
        if name.startswith(p):
            name = name[len(p):]
            break
    for pattern, ours in rules:
        m = pattern.match(name)
        if m:
            groups = [g.replace("gamma", "weight").replace("beta", "bias") for g in m.groups()]
            return ours.format(*groups)
    return None


# --- files ---------------------------------------------------------------------------------------
def _safetensors(path: Path, what: Callable):
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return what(f)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightsError(f"{path.name} is not a readable safetensors file ({e}); "
                           f"it may be truncated or corrupt") from None


def weight_files(folder: Path) -> dict[str, Path]:
    """Their tensor name -> the file holding it (one file, or the shards an index names)."""
    if (folder / WEIGHTS).is_file():
        names = _safetensors(folder / WEIGHTS, lambda f: list(f.keys()))
        return {n: folder / WEIGHTS for n in names}
    try:
        index = json.loads((folder / INDEX).read_text())
        weight_map = index["weight_map"]
        assert isinstance(weight_map, dict)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        raise WeightsError(f"{folder / INDEX} is not a readable index of shards ({e})") from None
    files = {}
    for name, file in weight_map.items():
        if not isinstance(file, str) or Path(file).name != file or not file.endswith(".safetensors"):
            raise WeightsError(f"{folder.name}/{INDEX}: {file!r} is not a safetensors file in the folder")
        if not (folder / file).is_file():
            raise WeightsError(f"{folder.name}: the shard {file} named by {INDEX} is missing")
        files[name] = folder / file
    return files


def read_headers(files: dict[str, Path]) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Their tensor name -> shape, and -> dtype as the header names it ("F32", "BF16", "I8", ...),
    from the files' headers only (no tensor data is read)."""
    shapes, kinds = {}, {}

    def read(f) -> None:
        for k in f.keys():
            entry = f.get_slice(k)
            shapes[k], kinds[k] = tuple(entry.get_shape()), entry.get_dtype()

    for path in sorted(set(files.values())):
        _safetensors(path, read)
    missing = set(files) - set(shapes)
    if missing:
        raise WeightsError(f"the index names tensors its shards do not hold: {sorted(missing)[:3]}")
    return shapes, kinds


FLOATS = {"F16", "BF16", "F32", "F64"}  # the dtypes a weight is read from (widened to float32)


def check_dtypes(files: dict[str, Path], kinds: dict[str, str], ours: dict[str, list[str]]) -> None:
    """Every tensor a part reads is floating point: an integer one is a quantization's codes (int8 with
    scales beside it), which widened as they are would be wrong weights."""
    for n in sorted({n for ns in ours.values() for n in ns}):
        if kinds[n] not in FLOATS:
            raise WeightsError(f"{files[n].name}: {n} is {kinds[n]}; weights are read as floating point only "
                               f"({', '.join(sorted(FLOATS))}), not as quantized integers")


def read_tensors(files: dict[str, Path], names: list[str]) -> dict[str, torch.Tensor]:
    """The tensors ``names`` (theirs), as float32."""
    by_file: dict[Path, list[str]] = {}
    for n in names:
        by_file.setdefault(files[n], []).append(n)
    out = {}
    for path, ns in by_file.items():
        out.update(_safetensors(path, lambda f: {n: f.get_tensor(n).float() for n in ns}))
    return out


def read_config(folder: Path) -> Family:
    try:
        raw = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise WeightsError(f"{folder / 'config.json'} is not readable JSON ({e})") from None
    return family_of(raw, f"{folder.name}/config.json")


def model_type_of(folder: Path) -> str | None:
    """config.json's model_type, or None when there is none to read."""
    try:
        raw = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return raw.get("model_type") if isinstance(raw, dict) else None


def read_tokenizer(folder: Path, f: Family) -> tuple[TextTokenizer, str]:
    """The tokenizer and how its pieces are spelled ("bytes", "metaspace" or "")."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as e:  # the library raises plain Exceptions for bad JSON
        raise WeightsError(f"{folder / 'tokenizer.json'} is not a valid tokenizer ({e})") from None
    tok.no_padding()  # we pad ourselves and build the masks from the lengths
    tok.no_truncation()
    if tok.get_vocab_size() > f.vocab_size:  # a token id past the embedding would fail mid-run
        raise WeightsError(f"{folder.name}: tokenizer.json has {tok.get_vocab_size()} tokens, but config.json's "
                           f"vocab_size is {f.vocab_size}; it should be at least {tok.get_vocab_size()}")

    def token(i):
        return None if i is None else tok.id_to_token(i)

    eos = f.eos_ids[0] if f.eos_ids else None
    tt = TextTokenizer(tok, pad=token(f.pad_id), bos=token(f.bos_id), eos=token(eos))
    spec = json.loads(tok.to_str())
    text = json.dumps([spec.get("pre_tokenizer"), spec.get("decoder")])
    style = "bytes" if '"ByteLevel"' in text else "metaspace" if "▁" in text or '"Metaspace"' in text else ""
    return tt, style


# --- checks and the model ------------------------------------------------------------------------
def _sizes(f: Family) -> str:
    return (f"vocab {f.vocab_size}, d_model {f.d_model}, {f.n_heads} heads ({f.n_kv_heads} K/V) of {f.d_head}, "
            f"d_ff {f.d_ff}, {f.max_len} positions")


# The sizes each of our tensors is made of, by the end of its name: one tuple per dimension, of the
# symbols whose product it is (Family.said: what config.json said for each).
_D, _V, _FF, _Q, _KV = ("d",), ("vocab",), ("ff",), ("heads", "head_dim"), ("kv", "head_dim")
SHAPE_SYMBOLS: list[tuple[re.Pattern, tuple[tuple[str, ...], ...]]] = [(re.compile(p + "$"), dims) for p, dims in [
    (r"position_bias\.embed\.weight", (("buckets",), ("heads",))), (r"(^|\.)embed\.weight", (_V, _D)),
    (r"type_embed\.weight", (("types",), _D)), (r"pos_embed\.weight", (("positions",), _D)),
    (r"W_Q\.weight", (_Q, _D)), (r"W_Q\.bias", (_Q,)), (r"W_[KV]\.weight", (_KV, _D)), (r"W_[KV]\.bias", (_KV,)),
    (r"W_O\.weight", (_D, _Q)), (r"W_O\.bias", (_D,)), (r"[qk]_norm\.(weight|bias)", (("head_dim",),)),
    (r"ffn\.W_(in|gate)\.weight", (_FF, _D)), (r"ffn\.W_(in|gate)\.bias", (_FF,)),
    (r"ffn\.W_out\.weight", (_D, _FF)), (r"ffn\.W_out\.bias", (_D,)),
    (r"head_dense\.weight", (_D, _D)), (r"unembed\.weight", (_V, _D)), (r"unembed\.bias", (_V,)),
    (r"(ln\w*|head_norm|head_dense)\.(weight|bias)", (_D,)),
]]


def shape_reasons(f: Family, mine: str) -> list[str] | None:
    """Per dimension of our tensor ``mine``, the config.json values that give it ("num_key_value_heads=2
    × head_dim=4"); None when the family did not record them."""
    for pattern, dims in SHAPE_SYMBOLS:
        if pattern.search(mine):
            said = [[f.says(s) for s in dim] for dim in dims]
            if any(x is None for dim in said for x in dim):
                return None
            return [" × ".join(dim) for dim in said]
    return None


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def check_tensor_shapes(source: str, f: Family, expected: dict[str, tuple[int, ...]],
                        got: dict[str, tuple[int, ...]], names: dict[str, str],
                        stored: dict[str, tuple[int, ...]], where: str = "config.json") -> None:
    """Every tensor the configuration gives, present and of its shape. ``got``: ours -> the shape as our
    part holds it; ``names``: ours -> the file's own name; ``stored``: the file's name -> its shape there.
    A disagreement names the file's tensor, its shape, and the ``where`` keys and values that give the
    expected one (those of the dimensions that differ first)."""
    for mine, shape in expected.items():
        reasons = shape_reasons(f, mine)
        because = ", ".join(_unique(reasons)) if reasons else _sizes(f)
        if mine not in got:
            raise WeightsError(f"{source}: the tensor for our {mine} is missing from the file; it should have "
                               f"shape {tuple(shape)} (the configuration in {where}: {because})")
        have = tuple(got[mine])
        if have == tuple(shape):
            continue
        theirs = names.get(mine, mine)
        raw = stored.get(theirs, have)
        held = f"has shape {tuple(raw)}" + (f" (laid out as our {mine}: {have})" if tuple(raw) != have else "")
        if reasons and len(have) == len(shape):
            differ = [i for i in range(len(shape)) if have[i] != shape[i]]
            because = ", ".join(_unique([reasons[i] for i in differ] + reasons))
            which = "; ".join(f"{reasons[i]} gives {shape[i]} where the file has {have[i]}" for i in differ)
            raise WeightsError(f"{source}: the tensor {theirs} {held}, but the configuration in {where} "
                               f"({because}) says it should be {tuple(shape)}: {which}")
        raise WeightsError(f"{source}: the tensor {theirs} {held}, but the configuration in {where} "
                           f"({because}) says it should be {tuple(shape)}")


def _prepare(f: Family, theirs: dict[str, tuple[int, ...]], source: str) -> tuple[Family, dict[str, list[str]], bool]:
    """Map their names onto ours; check the layers. Returns (the family as the file has it, ours ->
    their names, whether the output projection is tied to the embedding)."""
    ours: dict[str, list[str]] = {}
    for name in theirs:
        mine = rename(f.model_type, name)
        if mine is None:
            if not IGNORED.search(name):
                warnings.warn(f"{source}: ignoring tensor {name} (no part of {f.model_type} uses it)", stacklevel=4)
            continue
        if ".W_QKV." in mine:  # GPT-2: one Conv1D for q, k and v
            for x in "QKV":
                ours.setdefault(mine.replace("W_QKV", f"W_{x}"), []).append(name)
            continue
        ours.setdefault(mine, []).append(name)
    for stack, n in (("encoder", f.n_layers if f.kind != "decoder" else 0),
                     ("decoder", (f.n_decoder_layers if f.kind == "encoder-decoder" else f.n_layers)
                      if f.kind != "encoder" else 0)):
        if n:
            field = "num_decoder_layers" if stack == "decoder" and f.kind == "encoder-decoder" else "num_hidden_layers"
            check_layers(source, field, n, {k: () for k in ours}, f"{stack}.blocks.")
    if "shared.weight" in ours:  # encoder-decoders: one embedding for both stacks
        for stack in ("encoder", "decoder"):
            ours.setdefault(f"{stack}.embed.weight", ours["shared.weight"])
        del ours["shared.weight"]
    if f.head == "mlm" and not any(k.startswith(("head_", "unembed")) for k in ours):
        f = dataclasses.replace(f, head="", output_bias=False)  # the encoder alone (no MLM head)
    tied = f.head != "" and "unembed.weight" not in ours
    if tied and not f.tie_word_embeddings and f.model_type != "t5":
        raise WeightsError(f"{source}: tie_word_embeddings is false but the file holds no output matrix "
                           f"(lm_head.weight)")
    return f, ours, tied


def _expected(m: Transformer, tied: bool) -> dict[str, tuple[int, ...]]:
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    if tied:
        shapes.pop("unembed.weight")
    if m.family.output_bias:
        shapes.pop("unembed.bias")  # optional in the file: zeros when absent
    return shapes


def load_folder(folder: str | Path, name: str | None = None, description: str = "") -> Transformer:
    """Load a Hugging Face checkpoint folder of a supported family (model/arch/family.py: FAMILIES)."""
    folder = Path(folder)
    missing = [x for x in ("config.json", "tokenizer.json") if not (folder / x).is_file()]
    if not (folder / WEIGHTS).is_file() and not (folder / INDEX).is_file():
        missing.append(WEIGHTS)
    if missing:
        pickled = any(folder.glob("*.bin")) or any(folder.glob("*.pt")) or any(folder.glob("*.pth"))
        hint = " (only safetensors weights are read, never pickled .bin files)" if pickled else ""
        raise WeightsError(f"{folder} lacks {', '.join(missing)}: a checkpoint folder needs config.json, "
                           f"model.safetensors (or sharded safetensors with {INDEX}) and tokenizer.json{hint}")
    f = read_config(folder)
    source = f"{folder.name} ({f.model_type})"
    files = weight_files(folder)
    theirs, kinds = read_headers(files)
    f, ours, tied = _prepare(f, theirs, source)
    check_dtypes(files, kinds, ours)
    tok, style = read_tokenizer(folder, f)
    with torch.device("meta"):  # no allocation: the shapes the configuration gives, and the model to fill
        m = Transformer(f, tok, name=name or folder.name, description=description or f"{f.model_type} {folder.name}",
                        tied_output=tied, token_style=style)
    expected = _expected(m, tied)
    got = {mine: tuple(_to_ours(f, mine, names[0], torch.empty(theirs[names[0]], device="meta")).shape)
           for mine, names in ours.items()}  # the layout of their data, on shapes alone
    unused = set(got) - set(expected) - {"unembed.bias", "unembed.weight"}
    if unused:
        raise WeightsError(f"{source}: the file holds {sorted(ours[u][0] for u in unused)[:3]}, which this "
                           f"configuration does not use (check config.json)")
    check_tensor_shapes(source, f, expected, got, {mine: names[0] for mine, names in ours.items()}, theirs)
    need = sum(4 * _numel(theirs[ns[0]]) for ns in ours.values())
    room = memory.available()
    if room is not None and need > room:
        raise WeightsError(f"{source}: the weights need {memory.shown(need)} as float32, but only "
                           f"{memory.shown(room)} of memory is available")
    state = _state(m, ours, files, tied)
    try:
        m.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise WeightsError(f"{source} does not match the {f.model_type} architecture: {e}") from None
    _fill_buffers(m)
    del state
    # The weights are the file's own pages (safetensors maps them), used as they lie: a new layout
    # would be a second copy of each re-laid weight beside the mapped one (Qwen2.5-0.5B's shape:
    # +790 MB at the peak, measured by `python -m bench peers`). GPT-2's Conv1D weights lie
    # input-major in the file and its q, k, v side by side (c_attn): lay_out_weights finds them
    # laid out already and fuses q, k, v as the view of c_attn they are, copying nothing.
    # Read instead into owned memory (numpy's huge pages) in the laid-out layout, the weights are
    # held once too, but fresh memory costs at its first touch on this machine kind (~1-2 s per GB
    # unless it was used just before; the page cache's pages are resident already): the Qwen-sized
    # load went from 0.8 s to 2-4 s, its 512-token forward stayed a tie with transformers (1.000,
    # one paired run), and a bfloat16 copy's peak fell 6 % but its load tripled (1.3 s -> 3.6 s).
    if f.conv1d:
        m.lay_out_weights()
    return m.requires_grad_(False).eval()  # for reading, not training: readout works outside inference_mode


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _to_ours(f: Family, mine: str, theirs: str, t: torch.Tensor) -> torch.Tensor:
    """Their tensor laid out as our part holds it (also on meta tensors, for the shape check)."""
    if ".c_attn." in theirs:  # GPT-2: q, k, v side by side in one Conv1D: (d, 3d) weight, (3d,) bias
        t = (t.T if t.dim() == 2 else t).chunk(3, dim=0)["QKV".index(mine.split(".")[-2][-1])]
    elif f.conv1d and t.dim() == 2 and ".blocks." in mine:
        t = t.T  # Conv1D stores (in, out)
    elif mine == "unembed.bias":
        t = t.reshape(-1)  # Marian's final_logits_bias is (1, V)
    return t


def _state(m: Transformer, ours: dict[str, list[str]], files: dict[str, Path], tied: bool) -> dict[str, torch.Tensor]:
    """Read the tensors and lay them out as our parts hold them."""
    f = m.family
    read = read_tensors(files, sorted({n for ns in ours.values() for n in ns}))
    state: dict[str, torch.Tensor] = {}
    for mine, names in ours.items():
        t = _to_ours(f, mine, names[0], read[names[0]])
        # GPT-2's Conv1D weights stay the file's (in, out) pages, seen transposed: input-major, as
        # lay_out_weights lays out a narrowing projection, and no copy of them is made
        state[mine] = t if f.conv1d and t.dim() == 2 and ".blocks." in mine else t.contiguous()
    enc, dec = state.get("encoder.embed.weight"), state.get("decoder.embed.weight")
    if enc is not None and dec is not None and enc is not dec and torch.equal(enc, dec):
        state["decoder.embed.weight"] = enc  # one tensor for the embedding both stacks share
    if tied:
        state["unembed.weight"] = state[("decoder" if f.kind != "encoder" else "encoder") + ".embed.weight"]
    if f.output_bias and "unembed.bias" not in state:
        state["unembed.bias"] = torch.zeros(f.vocab_size)
    return state


def _fill_buffers(m: Transformer) -> None:
    """Non-persistent buffers (sinusoidal tables) were made on the meta device: make them for real."""
    from model.arch.parts import sinusoidal_table

    for stack in (getattr(m, "encoder", None), getattr(m, "decoder", None)):
        if stack is not None and hasattr(stack, "pe"):
            stack.pe = sinusoidal_table(m.family)


__all__ = ["load_folder", "model_type_of", "rename", "supported"]
