"""A ``tokenizers.Tokenizer`` rebuilt from a GGUF file's metadata.

A GGUF carries no tokenizer.json: llama.cpp stores the vocabulary, the merges, the special
token ids and the *name* of the pre-tokenizer (``tokenizer.ggml.pre``). Here that becomes:

    byte-level BPE model (tokens + merges)
    pre-tokenizer: the regex splits llama.cpp uses for that name, then ByteLevel
    control tokens (token_type 3) as special tokens, user-defined ones (4) as added tokens
    BOS/EOS added when ``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` say so

Only the byte-level ("gpt2") vocabulary is supported: SmolLM, Llama 3, Qwen 2 and friends.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import lru_cache

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_SPLIT = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
               r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# tokenizer.ggml.pre -> the regexes llama.cpp applies one after the other (llama-vocab.cpp)
PRE_TOKENIZER_SPLITS: dict[str, list[str]] = {
    **{name: [GPT2_SPLIT] for name in ("default", "gpt2", "gpt-2", "mpt", "olmo", "jais")},
    **{name: [r"\p{N}", GPT2_SPLIT]  # digits one by one, then GPT-2's split
       for name in ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")},
    **{name: [LLAMA3_SPLIT] for name in ("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral",
                                          "dbrx", "smaug-bpe")},
    **{name: [QWEN2_SPLIT] for name in ("qwen2", "deepseek-r1-qwen", "megrez")},
}
CONTROL, USER_DEFINED = 3, 4


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def display_token(token: str) -> str:
    """A byte-level token as readable text: "Ġthe" -> " the", "ìķĪ" -> "안".

    A token holding part of a multi-byte character shows its bytes: "\\xec\\x95".
    """
    table = unicode_to_bytes()
    if not all(c in table for c in token):
        return token
    return bytes(table[c] for c in token).decode("utf-8", errors="backslashreplace")


def _respell(token: str) -> str:
    """Tokens stored as raw text (outside the byte alphabet) respelled in it."""
    alphabet = unicode_to_bytes()
    if all(c in alphabet for c in token):
        return token
    b2u = bytes_to_unicode()
    return "".join(b2u[b] for b in token.encode("utf-8"))


def pre_tokenizer_for(pre: str | None) -> pre_tokenizers.PreTokenizer:
    splits = PRE_TOKENIZER_SPLITS.get(pre or "default")
    if splits is None:
        warnings.warn(f"unknown GGUF pre-tokenizer {pre!r}: splitting like GPT-2; token ids may "
                      f"differ from the model's own tokenizer", stacklevel=3)
        splits = [GPT2_SPLIT]
    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(s), behavior="isolated") for s in splits]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]
    )


def tokenizer_from_gguf(meta: Mapping[str, object]) -> Tokenizer:
    """Build the tokenizer from GGUF metadata (key -> value, as llama.cpp names them)."""
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"tokenizer.ggml.model={kind!r} is not supported: only byte-level BPE "
                         f"('gpt2', as in SmolLM, Llama 3, Qwen 2) is")
    tokens = [_respell(t) for t in meta["tokenizer.ggml.tokens"]]
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    types = list(meta.get("tokenizer.ggml.token_type") or [])
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("the GGUF vocabulary has duplicate tokens")

    tok = Tokenizer(models.BPE(vocab, merges, dropout=None, continuing_subword_prefix="",
                               end_of_word_suffix="", fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizer_for(meta.get("tokenizer.ggml.pre"))
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED])

    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
    add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
    bos_id, eos_id = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    template, specials = "$A", []
    if add_bos and bos_id is not None:
        template = f"{tokens[bos_id]} {template}"
        specials.append((tokens[bos_id], int(bos_id)))
    if add_eos and eos_id is not None:
        template = f"{template} {tokens[eos_id]}"
        specials.append((tokens[eos_id], int(eos_id)))
    if specials:
        tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=specials)
    return tok


def special_token(meta: Mapping[str, object], key: str) -> str | None:
    """The text of a special token: key is "bos", "eos", "padding" or "unknown"."""
    i = meta.get(f"tokenizer.ggml.{key}_token_id")
    tokens = meta["tokenizer.ggml.tokens"]
    return _respell(tokens[int(i)]) if i is not None and 0 <= int(i) < len(tokens) else None
