"""Every tokenizer in the project goes through the Hugging Face ``tokenizers`` library."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
PRINTABLE_ASCII = [chr(c) for c in range(0x20, 0x7F)]
HANGUL_SYLLABLES = [chr(c) for c in range(0xAC00, 0xD7A4)]
SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text the tokenizer can take: every surrogate code point (a lone one from a broken
    encoding, or half of a pair that was never joined) becomes U+FFFD, one character for one,
    so character offsets into the original text stay right."""
    return SURROGATE.sub("\ufffd", text) if SURROGATE.search(text) else text


def char_vocab() -> list[str]:
    """Specials, every printable ASCII character, every Hangul syllable (U+AC00–U+D7A3)."""
    return [PAD, BOS, EOS, UNK, *PRINTABLE_ASCII, *HANGUL_SYLLABLES]


def build_char_tokenizer() -> Tokenizer:
    """Character level: one token per character; unknown characters become ``<unk>``.

    NFC first, so Hangul typed as separate jamo (as some systems do) becomes syllables.
    The encoder side ends every sentence with ``</s>``.
    """
    vocab = {tok: i for i, tok in enumerate(char_vocab())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", special_tokens=[(EOS, vocab[EOS])]
    )
    tok.add_special_tokens([PAD, BOS, EOS, UNK])
    return tok


@dataclass
class Encoded:
    """One tokenized sentence (unpadded)."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]  # character span in the original text; (0, 0) for specials


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` plus the ids a model needs (pad, bos, eos)."""

    def __init__(self, tok: Tokenizer, pad: str | None = PAD, bos: str | None = BOS,
                 eos: str | None = EOS) -> None:
        self.tok = tok
        self.pad_id = tok.token_to_id(pad) if pad else None
        self.bos_id = tok.token_to_id(bos) if bos else None
        self.eos_id = tok.token_to_id(eos) if eos else None
        if self.pad_id is None:
            self.pad_id = 0

    @classmethod
    def from_file(cls, path: str | Path, **ids) -> "TextTokenizer":
        path = Path(path)
        try:
            tok = Tokenizer.from_file(str(path))
        except FileNotFoundError:
            raise FileNotFoundError(f"tokenizer file not found: {path}") from None
        except Exception as e:  # the library raises plain Exceptions for bad JSON
            raise ValueError(f"{path} is not a valid tokenizer.json ({e})") from None
        return cls(tok, **ids)

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoded]:
        encs = self.tok.encode_batch([clean_text(t) for t in texts], add_special_tokens=add_special_tokens)
        return [Encoded(list(e.ids), list(e.tokens), [tuple(o) for o in e.offsets]) for e in encs]

    def id_to_token(self, i: int) -> str:
        t = self.tok.id_to_token(int(i))
        return t if t is not None else UNK

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def to_json(self) -> str:
        return self.tok.to_str()


def char_tokenizer(path: str | Path | None = None) -> TextTokenizer:
    tok = Tokenizer.from_file(str(path)) if path else build_char_tokenizer()
    return TextTokenizer(tok)


def decode_chars(tt: TextTokenizer, ids: list[int]) -> str:
    """Join character tokens back into text (the char tokenizer has no decoder of its own)."""
    specials = {tt.pad_id, tt.bos_id, tt.eos_id}
    return "".join(tt.id_to_token(i) for i in ids if i not in specials)


def save(tok: Tokenizer, path: str | Path) -> None:
    Path(path).write_text(json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=None))
