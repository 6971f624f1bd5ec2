"""A SentencePiece-style tokenizer rebuilt from a GGUF's metadata (``tokenizer.ggml.model = "llama"``).

Llama 2, Mistral and Gemma GGUFs store pieces, scores and token types, but no merges. Here, as
transformers does when it reads such a file (checked against transformers 5.23 on the llama
fixture: the same ids):

    merges   every split of a piece into two pieces of the vocabulary, best first: by the merged
             piece's score (Gemma: by its position in the file, since its scores do not follow
             its merge order)
    model    BPE with byte fallback (pieces <0x00>..<0xFF> for characters outside the vocabulary)
    spaces   Llama: Metaspace ("▁", prepended to the first word); Gemma: " " -> "▁", no prefix
    specials control tokens (type 3) whole; BOS added unless add_bos_token says otherwise
"""
from __future__ import annotations

from collections.abc import Mapping

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

CONTROL, USER_DEFINED = 3, 4


def generate_merges(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """Every (left, right) whose concatenation is a piece, best merged piece first (higher score),
    ties by the shorter left and right part, then by the parts' ids (transformers' order)."""
    merges = []
    for piece, score in scores.items():
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece))
                 if piece[:i] in vocab and piece[i:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(a, b) for a, b, _ in merges]


def spm_tokenizer_from_gguf(meta: Mapping[str, object], architecture: str) -> Tokenizer:
    tokens = list(meta["tokenizer.ggml.tokens"])
    types = list(meta.get("tokenizer.ggml.token_type") or [])
    gemma = architecture.startswith("gemma")
    if gemma:  # pieces of spaces only are stored as spaces; Gemma's pieces spell them "▁"
        tokens = ["▁" * len(t) if t and not t.strip() and " " in t else t for t in tokens]
        scores = {t: -float(i) for i, t in enumerate(tokens)}
    else:
        raw = list(meta.get("tokenizer.ggml.scores") or [])
        if len(raw) != len(tokens):
            raise ValueError("tokenizer.ggml.scores does not give one score per piece")
        scores = dict(zip(tokens, map(float, raw)))
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("the GGUF vocabulary has duplicate pieces")
    unk = meta.get("tokenizer.ggml.unknown_token_id")
    tok = Tokenizer(models.BPE(vocab, generate_merges(vocab, scores), fuse_unk=True, byte_fallback=True,
                               unk_token=tokens[int(unk)] if unk is not None else None, dropout=None))
    if gemma:
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(content=" ", left=1)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED])
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    template, specials = "$A", []
    if bool(meta.get("tokenizer.ggml.add_bos_token", True)) and bos is not None:  # llama.cpp's default
        template, specials = f"{tokens[int(bos)]} {template}", [(tokens[int(bos)], int(bos))]
    if bool(meta.get("tokenizer.ggml.add_eos_token", False)) and eos is not None:
        template += f" {tokens[int(eos)]}"
        specials.append((tokens[int(eos)], int(eos)))
    if specials:
        tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=specials)
    return tok
