"""One model for every family: the parts of model/arch/parts.py put together as a Family says.

    encoder          tokens → Stack (bidirectional) → [MLM head] → logits over the vocabulary
    decoder          tokens → Stack (causal, windows)  → final norm → logits of the next token
    encoder-decoder  source → encoder Stack → memory; the decoder writes greedily from its start
                     token, reading the memory through cross-attention (as the seed model does)

``readout(resid)`` is the model's own way from the last stream to logits: the final norm, the MLM
head's transform if any, the output projection (× logit_scale, + bias), the final softcap.
``readout(cache[last hook_resid_post]) == out.logits``.
"""
from __future__ import annotations

import re

import torch
from torch import nn

from model.arch.family import Family
from model.arch.parts import ACT, Norm, Stack, numpy_owned
from model.files.tokenizer import Encoded, TextTokenizer
from model.runtime.base import HookedModel, HookScope, ModelInfo, Output, Recorder, Trace, pad_batch
from model.runtime.hooks import Cache, active


BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback: one byte of UTF-8


def display_token(token: str, style: str) -> str:
    """A vocabulary entry as the text it spells: byte-level ("Ġcat" -> " cat"), SentencePiece
    ("▁cat" -> " cat", the byte piece "<0x0A>" -> a newline; a byte of a longer character alone,
    "<0xEB>", -> "�", the character it starts being unknown without its neighbours: see
    ``display_tokens``); WordPiece pieces are shown as they are."""
    if style == "bytes":
        from model.files.gguf_tokenizer import display_token as from_bytes

        return from_bytes(token)
    if style == "metaspace":
        byte = BYTE_PIECE.fullmatch(token)
        if byte:
            b = int(byte.group(1), 16)
            return chr(b) if b < 0x80 else "\ufffd"
        return token.replace("▁", " ")
    return token


def utf8_length(lead: int) -> int:
    """How many bytes the UTF-8 character starting with byte ``lead`` takes (0: not a first byte)."""
    return 1 if lead < 0x80 else 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0


def display_tokens(tokens: list[str], style: str) -> list[str]:
    """A sentence's vocabulary entries as text, one per token. SentencePiece byte pieces that
    together spell a character ("<0xF0><0x9F><0x98><0x80>") show it on the first of them and ""
    on the others, so that the labels joined give the text back; a byte that starts no whole
    character shows "�". Every other token as ``display_token``."""
    out = [display_token(t, style) for t in tokens]
    if style != "metaspace":
        return out
    byte = [BYTE_PIECE.fullmatch(t) for t in tokens]
    i = 0
    while i < len(tokens):
        n = utf8_length(int(byte[i].group(1), 16)) if byte[i] else 0
        if n > 1 and i + n <= len(tokens) and all(byte[i: i + n]):
            try:
                char = bytes(int(b.group(1), 16) for b in byte[i: i + n]).decode("utf-8")
            except UnicodeDecodeError:
                i += 1
                continue
            out[i: i + n] = [char] + [""] * (n - 1)
            i += n
        else:
            i += 1
    return out


def cut_at_end(rows: list[list[int]], ends: set[int]) -> list[list[int]]:
    """Each row up to and including its first end token (the pads after it dropped)."""
    out = []
    for row in rows:
        end = next((j for j, i in enumerate(row) if i in ends), None)
        out.append(row if end is None else row[: end + 1])
    return out


def _scaling(rope) -> tuple:
    """ModelInfo's form of a rotary's scaling: () for none (see ModelInfo.rope_scaling)."""
    if rope.scaling == "default":
        return ()
    return (rope.scaling, rope.factor, rope.low_freq_factor, rope.high_freq_factor, rope.original_max_len)


class Transformer(HookedModel):
    def __init__(self, f: Family, tokenizer: TextTokenizer, name: str, description: str = "",
                 tied_output: bool = True, token_style: str = "") -> None:
        super().__init__()
        self.family, self.tokenizer, self.token_style = f, tokenizer, token_style
        d = f.d_model
        if f.kind in ("encoder", "encoder-decoder"):
            self.encoder = Stack(f, f.n_layers, causal=False)
        if f.kind in ("decoder", "encoder-decoder"):
            n = f.n_decoder_layers if f.kind == "encoder-decoder" else f.n_layers
            self.decoder = Stack(f, n, causal=True, cross=f.kind == "encoder-decoder")
        if f.head == "mlm":  # BERT-style: dense, activation, LayerNorm, then the projection
            self.head_dense = nn.Linear(d, d)
            self.head_norm = Norm(d, "layer", f.norm_eps)
        self.unembed = nn.Linear(d, f.vocab_size, bias=f.output_bias) if f.head else None
        self.info = ModelInfo(
            name=name, kind=f.kind, n_layers=f.n_layers, n_heads=f.n_heads, n_kv_heads=f.n_kv_heads,
            d_model=d, d_head=f.d_head,
            positional=f.positions, vocab_size=f.vocab_size, max_len=f.max_len,
            n_decoder_layers=f.n_decoder_layers,
            positional_base=f.rope.base if f.positions == "rotary" else f.sinusoidal_base if f.positions == "sinusoidal" else None,
            description=description, embed_scale=f.embed_scale, embed_norm=f.embed_norm, norm=f.norm_name,
            final_norm=f.final_norm, ffn=f.ffn_name, d_ff=f.d_ff, qkv_bias=f.qkv_bias, out_bias=f.out_bias,
            ffn_bias=f.mlp_bias, tied_output=tied_output and f.head != "", family=f.model_type,
            attn_scale=f.attn_scale, qk_norm=f.qk_norm, sliding_window=f.window,
            window_layers=tuple(i for i in range(f.n_layers) if f.windowed(i)),
            positional_base_local=f.rope_local.base if f.rope_local is not None else None,
            rotary_dims=f.rope_dims, rotary_interleaved=f.positions == "rotary" and f.rope_interleaved,
            attn_softcap=f.attn_softcap, final_softcap=f.final_softcap,
            logit_scale=f.logit_scale, output_bias=f.output_bias and f.head != "",
            pos_offset=f.pos_offset, token_types=f.type_vocab_size, sinusoidal_split=f.sinusoidal_split,
            rope_scaling=_scaling(f.rope) if f.positions == "rotary" else (),
            rope_scaling_local=_scaling(f.rope_local) if f.positions == "rotary" and f.rope_local else (),
        )
        self.setup_hooks()

    def lay_out_weights(self) -> "Transformer":
        """The weights laid out for the CPU's matrix products, the numbers and the parameters' names
        and shapes unchanged; the loaders call it once their weights are in (the seed's too: 5 % off
        its run_with_cache, paired in one process, the same logits; a model being trained keeps the
        plain layout).

        - every self-attention's W_Q, W_K, W_V as one matrix (parts.Attention.fuse);
        - every projection to fewer features than it reads (the feed-forward's W_out, a W_O wider
          than the stream) stored input-major, as GPT-2's Conv1D stores all of its weights: the
          parameter is the (out, in) transpose of a contiguous (in, out) tensor. x·Wᵀ then reads W in
          the order the product wants: GPT-2's 3072 → 768 at 128 tokens 1.89 ms against 2.07 ms,
          2048 → 640 (Gemma 3) 0.97 ms against 1.05 ms, the same weights side by side; a projection
          to as many or more features gains nothing from it (measured too), so it stays as it is.
        """
        fused = set()
        for module in list(self.modules()):
            attn = getattr(module, "self_attn", None)
            if attn is not None and hasattr(attn, "fuse") and attn.qkv_weight is None:
                attn.fuse()
                fused |= {id(attn.W_Q), id(attn.W_K), id(attn.W_V)}
        for module in list(self.modules()):
            if isinstance(module, nn.Linear) and id(module) not in fused \
                    and module.in_features > module.out_features and module.weight.is_contiguous():
                w = module.weight.detach()  # (out, in)
                by_input = numpy_owned((w.shape[1], w.shape[0])).copy_(w.T)  # (in, out), contiguous
                module.weight = nn.Parameter(by_input.T, requires_grad=False)  # (out, in) again
        return self

    # --- the way out --------------------------------------------------------------------------
    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """The last stream (.., d) -> logits (.., vocab): final norm, [MLM transform], projection."""
        f = self.family
        if self.unembed is None:
            raise TypeError(f"{self.info.name} has no output head (its checkpoint holds the encoder only)")
        stack = self.decoder if f.kind != "encoder" else self.encoder
        h = stack.finish(resid)
        if f.head == "mlm":
            h = self.head_norm(ACT[f.head_act](self.head_dense(h)))
        if f.logit_scale != 1.0:
            h = h * f.logit_scale
        logits = self.unembed(h)
        if f.final_softcap:
            logits = torch.tanh(logits / f.final_softcap) * f.final_softcap
        return logits

    def token_text(self, token_id: int) -> str:
        return display_token(self.tokenizer.id_to_token(token_id), self.token_style)

    def tokens_text(self, ids: list[int]) -> list[str]:
        """A sequence's tokens as text: ``token_text`` of each, except SentencePiece byte pieces,
        joined into the characters they spell (``display_tokens``)."""
        return display_tokens([self.tokenizer.id_to_token(i) for i in ids], self.token_style)

    # --- pieces -------------------------------------------------------------------------------
    def _tokens(self, texts: list[str], keep_last: bool) -> tuple[list[Encoded], list[bool]]:
        """Tokenize (the tokenizer's own post-processor adds the specials) and cut to max_len,
        keeping the final special token when ``keep_last``; an empty sentence becomes BOS."""
        tt, n = self.tokenizer, self.family.max_len
        encs = tt.encode(texts)
        truncated = [len(e.ids) > n for e in encs]
        for e in encs:
            if not e.ids:
                bos = tt.bos_id if tt.bos_id is not None else self.family.bos_id
                if bos is None:
                    raise ValueError("a sentence gave no tokens at all; type at least one character")
                e.ids, e.tokens, e.offsets = [bos], [tt.id_to_token(bos)], [(0, 0)]
            if len(e.ids) > n:
                keep = [-1] if keep_last else []
                cut = slice(0, n - len(keep))
                e.ids = e.ids[cut] + [e.ids[i] for i in keep]
                e.tokens = e.tokens[cut] + [e.tokens[i] for i in keep]
                e.offsets = e.offsets[cut] + [e.offsets[i] for i in keep]
        return encs, truncated

    def _batch(self, encs: list[Encoded]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids (B, T) and real (B, T): True for real tokens."""
        ids = pad_batch([e.ids for e in encs], self.tokenizer.pad_id)  # (B, T)
        lengths = torch.tensor([len(e.ids) for e in encs])
        return ids, torch.arange(ids.shape[1])[None, :] < lengths[:, None]

    def encode(self, src: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """The encoder's last stream (B, S, d), before any final norm."""
        S = src.shape[1]
        return self.encoder(self.encoder.embed_tokens(src), self.encoder.context(real, torch.arange(S)))

    def decode(self, ids: torch.Tensor, real: torch.Tensor, memory: torch.Tensor | None = None,
               memory_real: torch.Tensor | None = None, kv: list | None = None,
               positions: torch.Tensor | None = None) -> torch.Tensor:
        """The decoder's last stream for the tokens the caches ``kv`` do not hold yet (all of them
        without a cache). ids, real: (B, T) every token so far; memory (B, S, d) the encoder's
        output after its final norm; positions (B, T): rotary positions (default the columns)."""
        p = 0 if kv is None else kv[0][0].length  # tokens already in the caches
        T = ids.shape[1]
        cols = torch.arange(p, T)
        pos = None if positions is None else positions[:, p:]
        c = self.decoder.context(real, cols, pos, memory, memory_real)
        return self.decoder(self.decoder.embed_tokens(ids[:, p:], start=p, positions=pos), c, kv)

    def _end_ids(self) -> torch.Tensor:
        ends = set(self.family.eos_ids)
        if self.tokenizer.eos_id is not None and not ends:
            ends.add(self.tokenizer.eos_id)
        return torch.tensor(sorted(ends), dtype=torch.long)

    # --- the hook contract --------------------------------------------------------------------
    def _run(self, texts: list[str], scope: HookScope, *, readout: bool = True) -> tuple[Output, Cache]:
        kind = self.family.kind
        encs, truncated = self._tokens(texts, keep_last=kind != "decoder")
        ids, real = self._batch(encs)
        cache = Cache(tokens=[self.tokens_text(e.ids) for e in encs],
                      token_ids=[e.ids for e in encs], offsets=[e.offsets for e in encs])
        if kind == "encoder":
            with scope():
                h = self.encode(ids, real)  # (B, T, d)
            logits = None if self.unembed is None or not readout else self.readout(h)
            return Output(logits=logits, hidden=h, truncated=truncated), cache
        if kind == "decoder":
            with scope():
                h = self.decode(ids, real)  # (B, T, d)
            return Output(logits=self.readout(h) if readout else None, hidden=h, truncated=truncated), cache
        max_new = min(ids.shape[1] + 8, self.family.max_len - 1)
        written = self.greedy(ids, max_new, use_cache=not active(), real=real)  # the decoder reads no end token
        return self._seq2seq_output(encs, truncated, ids, real, written, scope)

    def _seq2seq_output(self, encs: list[Encoded], truncated: list[bool], src: torch.Tensor, real: torch.Tensor,
                        written: list[list[int]], scope: HookScope,
                        logits: torch.Tensor | None = None) -> tuple[Output, Cache]:
        """An encoder–decoder run's output and cache: the hooked teacher-forced pass over the start
        token and what was written (``logits``: that pass, when it has run already)."""
        dec_ids = self.decoder_input(written)
        if logits is None:
            with scope():
                logits = self.teacher_forced(src, dec_ids, real)
        cache = Cache(tokens=[self.tokens_text(e.ids) for e in encs], token_ids=[e.ids for e in encs],
                      offsets=[e.offsets for e in encs], decoder_tokens=[self.tokens_text(d) for d in dec_ids],
                      decoder_token_ids=dec_ids)
        return Output(logits=logits, generated=[self._text(w) for w in written], truncated=truncated), cache

    # --- the encoder–decoder interface (greedy decoding, teacher forcing: model/analysis/patching.py) ---
    def source(self, texts: list[str]) -> tuple[list[Encoded], torch.Tensor, torch.Tensor, list[bool]]:
        """Encoder input: (encodings, src (B, S) right-padded, real (B, S), truncated), each cut to
        max_len keeping its final special token."""
        encs, truncated = self._tokens(texts, keep_last=True)
        src, real = self._batch(encs)
        return encs, src, real, truncated

    def decoder_input(self, written: list[list[int]]) -> list[list[int]]:
        """Per sentence, the decoder input that reads what was written: the start token, then the
        written ids (no end token), cut to max_len."""
        return [[self.family.decoder_start_id] + w[: self.family.max_len - 1] for w in written]

    def teacher_forced(self, src: torch.Tensor, dec_ids: list[list[int]] | torch.Tensor,
                       real: torch.Tensor | None = None, dec_real: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) of the decoder reading ``dec_ids`` (rows of ids, right-padded here;
        or a (B, T) tensor, its real tokens ``dec_real``, default every one: a decoder's start token
        may be its pad token, as T5's is) after the encoder read ``src`` (B, S) right-padded; real:
        src's real tokens (default: those that are not the pad token)."""
        real = src != self.tokenizer.pad_id if real is None else real
        if isinstance(dec_ids, torch.Tensor):
            tgt = dec_ids
            tgt_real = torch.ones_like(dec_ids, dtype=torch.bool) if dec_real is None else dec_real
        else:
            tgt, tgt_real = self._batch([Encoded(d, [], []) for d in dec_ids])
        memory = self.encoder.finish(self.encode(src, real))
        return self.readout(self.decode(tgt, tgt_real, memory, real))  # (B, T, vocab)

    def _text(self, ids: list[int]) -> str:
        """Written ids as text, specials left out (a tokenizer without a decoder: its pieces joined)."""
        if self.tokenizer.tok.decoder is not None:
            return self.tokenizer.decode(ids)
        specials = {self.tokenizer.pad_id, self.tokenizer.bos_id, self.tokenizer.eos_id, *self.family.eos_ids}
        return "".join(self.token_text(i) for i in ids if i not in specials)

    @torch.inference_mode()
    def greedy(self, src: torch.Tensor, max_new: int, use_cache: bool = True,
               start: list[list[int]] | None = None, real: torch.Tensor | None = None) -> list[list[int]]:
        """Encoder-decoder: greedy decoding from the decoder start token; each sentence stops at its
        end token. src (B, S) right-padded, real (B, S) its real tokens (default: those that are not
        the pad token). Returns per sentence the ids written, without the end token.

        With ``use_cache`` each step runs the decoder on the new token only, reading the earlier
        tokens' keys and values from a key/value cache; without, every step recomputes every
        earlier position (the same tokens, more slowly). ``start``: per sentence, the first tokens
        greedy decoding writes, when already known; decoding goes on from the longest start every
        unfinished row shares."""
        real = src != self.tokenizer.pad_id if real is None else real
        memory = self.encoder.finish(self.encode(src, real))
        B, ends, pad = src.shape[0], self._end_ids(), self.tokenizer.pad_id
        end_set, first = set(ends.tolist()), self.family.decoder_start_id
        if start is None:
            tgt = torch.full((B, 1), first, dtype=torch.long)  # (B, 1)
        else:
            k = min((len(w) for w in start if not end_set & set(w)), default=0)
            rows = [w if end_set & set(w) and len(w) <= k else w[:k] for w in start]
            tgt = pad_batch([[first] + w for w in rows], pad)  # (B, 1 + k)
        done = torch.isin(tgt[:, 1:], ends).any(dim=1)  # (B,)
        kv = self.decoder.new_kv(1 + max_new) if use_cache else None
        for _ in range(max_new - (tgt.shape[1] - 1)):
            h = self.decode(tgt, torch.ones_like(tgt, dtype=torch.bool), memory, real, kv)
            nxt = self.readout(h[:, -1]).argmax(-1)  # (B,)
            nxt = torch.where(done, pad, nxt)
            tgt = torch.cat([tgt, nxt[:, None]], dim=1)
            done |= torch.isin(nxt, ends)
            if done.all():
                break
        written = cut_at_end(tgt[:, 1:].tolist(), end_set)
        return [w[:-1] if w and w[-1] in end_set else w for w in written]

    def _generate(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                  use_cache: bool) -> Trace:
        if self.family.kind == "decoder":
            return self._generate_decoder(texts, max_new_tokens, rec, use_cache)
        if self.family.kind == "encoder-decoder":
            return self._generate_seq2seq(texts, max_new_tokens, rec, use_cache)
        return super()._generate(texts, max_new_tokens, rec, use_cache)

    def _generate_decoder(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                          use_cache: bool) -> Trace:
        """As Llama._generate: prompts left-padded to a common length P, each sentence with its own
        positions (0 at its first real token: rotary angles and learned rows alike); the prompt but
        its last token read once, then one step per token; each sentence stops at its end token."""
        tt, n = self.tokenizer, self.family.max_len
        encs, _ = self._tokens(texts, keep_last=False)
        B, P = len(encs), max(len(e.ids) for e in encs)
        if P >= n:
            raise ValueError(f"the prompt takes all {n} positions of {self.info.name}: no room to write; "
                             f"give a shorter prompt")
        max_new = min(32 if max_new_tokens is None else max_new_tokens, n - P)
        n_pad = torch.tensor([P - len(e.ids) for e in encs])  # (B,)
        ids = torch.full((B, P), tt.pad_id, dtype=torch.long)  # (B, P) left-padded
        for b, e in enumerate(encs):
            ids[b, P - len(e.ids):] = torch.tensor(e.ids, dtype=torch.long)
        columns = torch.arange(P)[None, :]  # (1, P)
        real = columns >= n_pad[:, None]  # (B, P)
        positions = (columns - n_pad[:, None]).clamp(min=0)  # (B, P)
        kv = self.decoder.new_kv(P + max_new) if use_cache else None
        if use_cache and P > 1:
            with rec.prompt():
                self.decode(ids[:, : P - 1], real[:, : P - 1], kv=kv, positions=positions[:, : P - 1])
        ends, done = self._end_ids(), torch.zeros(B, dtype=torch.bool)
        for t in range(max_new):
            with rec.step():
                h = self.decode(ids, real, kv=kv, positions=positions)  # (B, new, d)
            nxt = rec.choose(self.readout(h[:, -1]), ~done, tt.pad_id)  # (B,)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            real = torch.cat([real, ~done[:, None]], dim=1)
            positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
            done |= torch.isin(nxt, ends)
            if done.all():
                break
        end_set = set(ends.tolist())
        written = [ids[b, P:][real[b, P:]].tolist() for b in range(B)]
        text = [w[:-1] if w and w[-1] in end_set else w for w in written]
        return rec.trace(
            B, texts=texts, generated=[tt.tok.decode(w, skip_special_tokens=False) for w in text],
            tokens=[self.tokens_text(w) for w in written], token_ids=written,
            input_tokens=[self.tokens_text(e.ids) for e in encs],
            input_token_ids=[e.ids for e in encs],
            decoder_tokens=[self.tokens_text(row) for row in ids.tolist()],
            decoder_token_ids=ids.tolist(), query=[P - 1 + t for t in range(len(rec.steps))],
            positions=positions, use_cache=use_cache)

    def _generate_seq2seq(self, texts: list[str], max_new_tokens: int | None, rec: Recorder,
                          use_cache: bool) -> Trace:
        """As the seed: the encoder once (``trace.prompt``), then one decoder step per token."""
        tt, f = self.tokenizer, self.family
        encs, _ = self._tokens(texts, keep_last=True)
        src, real = self._batch(encs)
        max_new = min(src.shape[1] + 8 if max_new_tokens is None else max_new_tokens, f.max_len - 1)
        with rec.prompt():
            memory = self.encoder.finish(self.encode(src, real))
        B, ends = src.shape[0], self._end_ids()
        tgt = torch.full((B, 1), f.decoder_start_id, dtype=torch.long)  # (B, 1)
        done = torch.zeros(B, dtype=torch.bool)
        kv = self.decoder.new_kv(1 + max_new) if use_cache else None
        for _ in range(max_new):
            with rec.step():
                h = self.decode(tgt, torch.ones_like(tgt, dtype=torch.bool), memory, real, kv)
            nxt = rec.choose(self.readout(h[:, -1]), ~done, tt.pad_id)  # (B,)
            tgt = torch.cat([tgt, nxt[:, None]], dim=1)
            done |= torch.isin(nxt, ends)
            if done.all():
                break
        end_set = set(ends.tolist())
        written = cut_at_end(tgt[:, 1:].tolist(), end_set)
        return rec.trace(
            B, texts=texts, generated=[self._text([i for i in w if i not in end_set]) for w in written],
            tokens=[[self.token_text(i) for i in w] for w in written], token_ids=written,
            input_tokens=[[self.token_text(i) for i in e.ids] for e in encs],
            input_token_ids=[e.ids for e in encs],
            decoder_tokens=[[self.token_text(i) for i in row] for row in tgt.tolist()],
            decoder_token_ids=tgt.tolist(), query=list(range(tgt.shape[1] - 1)),
            positions=torch.arange(tgt.shape[1]).expand(B, -1), use_cache=use_cache)
