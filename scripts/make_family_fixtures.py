"""Write the family fixtures (tests/fixtures/families/<family>/) by running the reference `transformers`.

Eleven families: bert, roberta, distilbert (encoders); gpt2, llama, mistral, qwen2, qwen3,
gemma3_text (decoders); marian, t5 (encoder-decoders). For each, transformers itself builds a
TINY random checkpoint (2 layers, d_model 16, d_ff 32, 4 heads of size 4, or 8 for qwen3 and
gemma3 as their head_dim is set apart from d_model; vocabularies of 95-376; grouped-query
attention with 2 K/V heads where the family has it; sliding windows of 3-4 tokens for mistral, qwen2 (layer 1
only), qwen3 (layer 1 only) and gemma3 (layer 0 only) so that window masks show on short
sentences; QK-norm for qwen3 and gemma3; Gemma's attention and final soft-capping; T5's
bucketed relative bias, original T5 style: ReLU MLP, tied output rescaled by d_model**-0.5),
with weights drawn LARGER than the default init (linear and embedding weights N(0, 0.35²), T5's
N(0, 0.2²) as it does not divide scores by sqrt(d_k), T5's relative bias N(0, 1); norm weights
1 + N(0, 0.1²), Gemma's (1 + w) norms w ~ N(0, 0.1²); biases N(0, 0.1²); Marian's sinusoidal
table left as it is) so that attention patterns are far from uniform (reference.json's
mean_row_max: the mean largest weight of a row, 0.34-0.78). Everything is seeded; a re-run writes the same
numbers.

Each folder holds
    config.json, model.safetensors   save_pretrained (safetensors, float32)
    tokenizer.json                   a small tokenizer made here with the `tokenizers` library
                                     from a few English and Korean sentences (BPE trained;
                                     WordPiece and Unigram vocabularies built directly, since
                                     their trainers break ties differently on every run), with the special
                                     tokens and post-processor the family uses: [CLS] $A [SEP]
                                     (bert, distilbert; WordPiece), <s> $A </s> (roberta;
                                     byte-level BPE), none (gpt2; byte-level BPE), <s> $A (llama,
                                     mistral; SentencePiece-style BPE with byte fallback), none
                                     (qwen2, qwen3; byte-level BPE, as Qwen's own), <bos> $A
                                     (gemma3; BPE with byte fallback), $A </s> (marian, t5;
                                     Unigram with Metaspace)
    reference.json                   the sentences, per sentence the input ids and tokens (and for
                                     encoder-decoders the decoder input), versions, and the
                                     shapes/meaning of every tensor below
    reference.safetensors            transformers' eager-attention outputs, float32:

  per sentence s (0, 1, 2), run alone (batch of one, no padding):
    single.{s}.input_ids                   int64 (n,)
    single.{s}.{stack}.{attn}              float32 (L, H, q, k) softmax weights of every layer
                                           (output_attentions=True, attn_implementation="eager");
                                           stack.attn is encoder.self_attn (encoders,
                                           encoder-decoders), decoder.self_attn (decoders,
                                           encoder-decoders), decoder.cross_attn (encoder-decoders)
    single.{s}.hidden                      float32 (n, d_model) last hidden state (encoders;
                                           for encoder-decoders: the encoder's)
    single.{s}.logits                      float32 (n or n_dec, vocab) (decoders, encoder-decoders)
    single.{s}.decoder_input_ids           int64 (n_dec,) encoder-decoders: the teacher-forced
                                           decoder input = the model's own greedy output (start
                                           token + up to 6 tokens, stopping at </s>), so
                                           logits[:-1].argmax(-1) == decoder_input_ids[1:]
  the same sentences as one right-padded batch:
    batch.input_ids, batch.attention_mask  int64 (B, T)  (pad = the tokenizer's pad id, or for
                                           gpt2 and qwen, which have none, the eos id)
    batch.decoder_input_ids, batch.decoder_attention_mask   int64 (B, T_dec) encoder-decoders
    batch.{stack}.{attn}                   float32 (B, L, H, q, k)
    batch.hidden / batch.logits            float32 (B, T, ...)
  Compare batch rows on the real positions only ([:n, :n] of sentence b): rows of padded
  queries are whatever transformers' finite mask value makes of them.

A re-run writes byte-identical files (checked: two runs, `diff -r`). All eleven folders: ~1.8 MB.

Regenerate (about a minute on 2 CPU cores; needs network or a pip mirror once for transformers):

    OMP_NUM_THREADS=1 python scripts/make_family_fixtures.py            # all families
    OMP_NUM_THREADS=1 python scripts/make_family_fixtures.py llama t5   # some of them

The script creates /tmp/family-venv (``--venv`` to change) with ``--system-site-packages`` so
that the installed torch is reused, installs the pinned transformers there (never into the
project's environment; torch is pinned by a constraints file so pip never replaces it), then
re-runs itself inside it with ``--reference``. The project itself never imports transformers.
It also writes ``llama/model.gguf`` (float32, the same weights and tokenizer as the llama
folder, written with the `gguf` package, Q and K rows permuted as llama.cpp's converter does),
whose reference is the llama folder's reference: the script reads it back with transformers
(accelerate==1.15.0 is installed beside it for that) and stops unless the token ids and the logits
are the folder's. Its tokenizer is llama.cpp's SentencePiece kind (tokenizer.ggml.model = "llama",
pieces, scores, token types), as in Llama 2, Mistral and Gemma GGUFs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "families"
TRANSFORMERS = "transformers==5.23.0"
ACCELERATE = "accelerate==1.15.0"  # transformers needs it to read a GGUF (the llama GGUF's check)
SEED = 24
SENTENCES = [
    "The cat sat on the mat.",
    "나는 학교에 간다.",
    "Attention is all you need.",
]
CORPUS = SENTENCES + [
    "The dog sat on the rug because it was warm.",
    "A cat and a dog are friends.",
    "Attention weights sum to one over the keys.",
    "The model reads the sentence and writes another.",
    "나는 집에 간다.",
    "고양이가 매트 위에 앉았다.",
    "학교에 가는 길은 멀다.",
    "주의 집중은 모든 것이다.",
    "We need more data, not more layers.",
]
DECODE_STEPS = 6  # encoder-decoders: the greedy output (and teacher-forced input) length
FAMILIES = ["bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2", "qwen3",
            "gemma3_text", "marian", "t5"]
KIND = {"bert": "encoder", "roberta": "encoder", "distilbert": "encoder", "marian": "encoder-decoder",
        "t5": "encoder-decoder"}  # the rest are decoders


# --- outside: make the venv and re-run inside it ---------------------------------------------
def ensure_venv(venv: Path) -> Path:
    import torch

    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    check = "import accelerate, transformers; print(transformers.__version__, accelerate.__version__)"
    has = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    if has.stdout.strip() != f"{TRANSFORMERS.split('==')[1]} {ACCELERATE.split('==')[1]}":
        constraints = venv / "constraints.txt"  # pip must never replace the project's torch
        constraints.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), TRANSFORMERS,
                        ACCELERATE], check=True)
    return python


# --- tokenizers ---------------------------------------------------------------------------------
def words(normalizer, pre_tokenizer) -> Counter:
    """The corpus's words as the tokenizer will see them, counted."""
    out: Counter = Counter()
    for line in CORPUS:
        out.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)))
    return out


def wordpiece() -> "Tokenizer":  # BERT, DistilBERT: [CLS] $A [SEP]
    """Built, not trained (the trainer breaks ties differently from run to run): every word seen
    twice whole, every other word's first three letters, every character alone and as ##char."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    norm = normalizers.BertNormalizer(lowercase=True, strip_accents=False, clean_text=True,
                                      handle_chinese_chars=True)
    pre = pre_tokenizers.BertPreTokenizer()
    counts = words(norm, pre)
    pieces = {w for w, c in counts.items() if c >= 2} | {w[:3] for w, c in counts.items() if c < 2}
    pieces |= {ch for w in counts for ch in w} | {"##" + ch for w in counts for ch in w}
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {p: i for i, p in enumerate(specials + sorted(pieces))}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tok


def byte_level(specials: list[str], vocab_size: int = 330) -> "Tokenizer":  # GPT-2, RoBERTa, Qwen
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def sentencepiece_bpe(specials: list[str], bos: str) -> "Tokenizer":  # Llama, Mistral, Gemma: bos $A
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.normalizer = normalizers.NFC()
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    trained.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=120, special_tokens=specials))
    learnt = json.loads(trained.to_str())["model"]
    # the SentencePiece layout: specials, the 256 byte pieces (ordinary vocabulary, as in Llama's
    # own file), then the learnt pieces
    pieces = specials + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [p for p, _ in sorted(learnt["vocab"].items(), key=lambda kv: kv[1]) if p not in specials]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in learnt["merges"]]
    tok = Tokenizer(models.BPE({p: i for i, p in enumerate(pieces)}, merges, unk_token="<unk>",
                               byte_fallback=True))
    tok.normalizer = trained.normalizer
    tok.pre_tokenizer = trained.pre_tokenizer
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁")])
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def unigram(specials: list[str]) -> "Tokenizer":  # Marian, T5: $A </s>
    """Built, not trained (the trainer's ties and scores vary from run to run): every word seen
    twice whole (with its ▁), every character pair seen three times, every character; the score
    of a piece is the log of its share of the counts."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    norm = normalizers.NFKC()
    pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    counts = words(norm, pre)
    pieces: Counter = Counter({w: c for w, c in counts.items() if c >= 2})
    pairs: Counter = Counter(w[i:i + 2] for w, c in counts.items() for i in range(len(w) - 1)
                             for _ in range(c))
    pieces.update({p: c for p, c in pairs.items() if c >= 3})
    pieces.update(Counter(ch for w, c in counts.items() for ch in w for _ in range(c)))
    total = sum(pieces.values())
    scored = sorted(((p, round(math.log(c / total), 4)) for p, c in pieces.items()), key=lambda ps: (-ps[1], ps[0]))
    tok = Tokenizer(models.Unigram([(p, 0.0) for p in specials] + scored, unk_id=specials.index("<unk>"),
                                   byte_fallback=False))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    tok.decoder = decoders.Metaspace(replacement="▁")
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return tok


def make_tokenizer(family: str) -> tuple["Tokenizer", dict]:
    """The tokenizer and the special ids the config needs (pad, bos, eos, ...)."""
    from tokenizers import processors

    if family in ("bert", "distilbert"):
        tok = wordpiece()
        ids = {"pad": tok.token_to_id("[PAD]")}
    elif family == "roberta":
        tok = byte_level(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                          add_prefix_space=False)
        ids = {"bos": 0, "pad": 1, "eos": 2}
    elif family == "gpt2":
        tok = byte_level(["<|endoftext|>"])
        e = tok.token_to_id("<|endoftext|>")
        ids = {"bos": e, "eos": e, "pad": e}
    elif family in ("qwen2", "qwen3"):
        tok = byte_level(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        e = tok.token_to_id("<|endoftext|>")
        ids = {"bos": None, "eos": e, "pad": e}
    elif family in ("llama", "mistral"):
        tok = sentencepiece_bpe(["<unk>", "<s>", "</s>"], bos="<s>")
        ids = {"bos": 1, "eos": 2, "pad": 2}  # neither has a pad token: pad with eos
    elif family == "gemma3_text":
        tok = sentencepiece_bpe(["<pad>", "<eos>", "<bos>", "<unk>"], bos="<bos>")
        ids = {"pad": 0, "eos": 1, "bos": 2}
    elif family == "marian":
        tok = unigram(["</s>", "<unk>", "<pad>"])
        ids = {"eos": 0, "pad": 2}
    elif family == "t5":
        tok = unigram(["<pad>", "</s>", "<unk>"])
        ids = {"pad": 0, "eos": 1}
    else:
        raise ValueError(family)
    return tok, ids  # no padding in the file: the reference pads by hand


# --- configs ---------------------------------------------------------------------------------------
def make_model(family: str, vocab: int, ids: dict):
    """A tiny transformers model of the family (eager attention), not yet re-initialised."""
    import transformers as tf

    d, ff, layers, heads, kv, pos = 16, 32, 2, 4, 2, 64
    common = dict(vocab_size=vocab, attn_implementation="eager")
    rms = dict(hidden_size=d, intermediate_size=ff, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv, max_position_embeddings=pos, tie_word_embeddings=False,
               bos_token_id=ids.get("bos"), eos_token_id=ids.get("eos"), pad_token_id=ids["pad"], **common)
    if family == "bert":
        cfg = tf.BertConfig(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=ff, max_position_embeddings=pos, pad_token_id=ids["pad"], **common)
        return tf.BertModel(cfg, add_pooling_layer=False)
    if family == "roberta":
        cfg = tf.RobertaConfig(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                               intermediate_size=ff, max_position_embeddings=pos + 2, type_vocab_size=1,
                               pad_token_id=ids["pad"], bos_token_id=ids["bos"], eos_token_id=ids["eos"],
                               **common)
        return tf.RobertaModel(cfg, add_pooling_layer=False)
    if family == "distilbert":
        cfg = tf.DistilBertConfig(dim=d, n_layers=layers, n_heads=heads, hidden_dim=ff,
                                  max_position_embeddings=pos, pad_token_id=ids["pad"], **common)
        return tf.DistilBertModel(cfg)
    if family == "gpt2":
        cfg = tf.GPT2Config(n_embd=d, n_layer=layers, n_head=heads, n_inner=ff, n_positions=pos,
                            bos_token_id=ids["bos"], eos_token_id=ids["eos"], **common)
        return tf.GPT2LMHeadModel(cfg)
    if family == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(**rms))
    if family == "mistral":
        return tf.MistralForCausalLM(tf.MistralConfig(sliding_window=3, **rms))
    if family == "qwen2":  # layer 0 full, layer 1 windowed (max_window_layers=1); q/k/v biases
        return tf.Qwen2ForCausalLM(tf.Qwen2Config(use_sliding_window=True, sliding_window=4,
                                                  max_window_layers=1, **rms))
    if family == "qwen3":  # head_dim 8: heads x head_dim = 32 != d_model 16, as in the real ones
        return tf.Qwen3ForCausalLM(tf.Qwen3Config(use_sliding_window=True, sliding_window=4,
                                                  max_window_layers=1, head_dim=8, **rms))
    if family == "gemma3_text":
        cfg = tf.Gemma3TextConfig(head_dim=8, query_pre_attn_scalar=8, sliding_window=3,
                                  layer_types=["sliding_attention", "full_attention"],
                                  attn_logit_softcapping=10.0, final_logit_softcapping=8.0,
                                  **{**rms, "tie_word_embeddings": True})
        return tf.Gemma3ForCausalLM(cfg)
    if family == "marian":
        cfg = tf.MarianConfig(d_model=d, encoder_layers=layers, decoder_layers=layers,
                              encoder_attention_heads=heads, decoder_attention_heads=heads,
                              encoder_ffn_dim=ff, decoder_ffn_dim=ff, max_position_embeddings=pos,
                              pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                              decoder_start_token_id=ids["pad"], forced_eos_token_id=None,
                              scale_embedding=True, **common)
        return tf.MarianMTModel(cfg)
    if family == "t5":  # original T5 (t5-small style): ReLU MLP, tied output rescaled by d**-0.5
        cfg = tf.T5Config(d_model=d, d_kv=4, d_ff=ff, num_layers=layers, num_decoder_layers=layers,
                          num_heads=heads, relative_attention_num_buckets=8,
                          relative_attention_max_distance=16, feed_forward_proj="relu",
                          tie_word_embeddings=True, pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                          decoder_start_token_id=ids["pad"], **common)
        return tf.T5ForConditionalGeneration(cfg)
    raise ValueError(family)


WEIGHT_STD = {"t5": 0.2}  # T5 does not divide scores by sqrt(d_k): a smaller draw keeps them sane


def reinit(model, family: str) -> None:
    """Weights larger than the default init, so that patterns are far from uniform."""
    import torch

    g = torch.Generator().manual_seed(SEED)
    std = WEIGHT_STD.get(family, 0.35)
    done: set[int] = set()
    with torch.no_grad():
        for mod_name, mod in model.named_modules():
            kind = type(mod).__name__
            for p_name, p in mod.named_parameters(recurse=False):
                if id(p) in done:  # tied weights: drawn once
                    continue
                done.add(id(p))
                noise = torch.randn(p.shape, generator=g)
                if "Norm" in kind:
                    one = 0.0 if kind.startswith("Gemma") else 1.0  # Gemma scales by (1 + w)
                    p.copy_(one + 0.1 * noise if p_name == "weight" else 0.1 * noise)
                elif p_name == "bias":
                    p.copy_(0.1 * noise)
                elif "relative_attention_bias" in mod_name:
                    p.copy_(1.0 * noise)  # T5's bias per bucket and head: visible in the pattern
                elif "embed_positions" in mod_name and family == "marian":
                    continue  # Marian's sinusoidal table is fixed, not learned
                else:
                    p.copy_(std * noise)
    model.eval()


# --- the reference ---------------------------------------------------------------------------------
def stack_attn(attns) -> "torch.Tensor":
    import torch

    return torch.stack(list(attns), dim=1)  # (B, L, H, q, k)


def pad_rows(rows: list[list[int]], pad: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    import torch

    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])  # (B, T) right-padded
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])  # (B, T)
    return ids, mask


def run(model, family: str, ids, mask, dec_ids=None, dec_mask=None) -> dict:
    import torch

    kind = KIND.get(family, "decoder")
    with torch.no_grad():
        if kind == "encoder-decoder":
            out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_ids,
                        decoder_attention_mask=dec_mask, output_attentions=True, output_hidden_states=True)
            return {"encoder.self_attn": stack_attn(out.encoder_attentions),
                    "decoder.self_attn": stack_attn(out.decoder_attentions),
                    "decoder.cross_attn": stack_attn(out.cross_attentions),
                    "hidden": out.encoder_last_hidden_state, "logits": out.logits}
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        if kind == "encoder":
            return {"encoder.self_attn": stack_attn(out.attentions), "hidden": out.last_hidden_state}
        return {"decoder.self_attn": stack_attn(out.attentions), "logits": out.logits}


def greedy(model, ids: list[int], start: int, eos: int) -> list[int]:
    """The encoder-decoder's own greedy output, one forward per token (no generate() defaults)."""
    import torch

    out = [start]
    src = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(DECODE_STEPS):
            logits = model(input_ids=src, decoder_input_ids=torch.tensor([out])).logits
            out.append(int(logits[0, -1].argmax()))
            if out[-1] == eos:
                break
    return out


def reference_family(family: str, out_dir: Path) -> dict:
    import torch
    import transformers
    from safetensors.torch import save_file

    torch.manual_seed(SEED)
    tok, ids = make_tokenizer(family)
    model = make_model(family, tok.get_vocab_size(), ids)
    reinit(model, family)
    folder = out_dir / family
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    for extra in ("generation_config.json",):  # the project reads config.json only
        (folder / extra).unlink(missing_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    # reload from disk, exactly as a user would, so the reference is what the files say
    cls = type(model)
    model = cls.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()

    kind = KIND.get(family, "decoder")
    encoded = [tok.encode(s) for s in SENTENCES]
    rows = [e.ids for e in encoded]
    tensors: dict[str, torch.Tensor] = {}
    meta: dict = {"family": family, "kind": kind, "sentences": SENTENCES, "pad_id": ids["pad"],
                  "transformers": transformers.__version__, "torch": torch.__version__,
                  "input_ids": rows, "tokens": [e.tokens for e in encoded]}
    dec_rows = None
    if kind == "encoder-decoder":
        start = model.config.decoder_start_token_id
        dec_rows = [greedy(model, r, start, ids["eos"]) for r in rows]
        meta["decoder_input_ids"] = dec_rows
        meta["decoder_tokens"] = [[tok.id_to_token(i) for i in r] for r in dec_rows]
    stats = []
    for s, r in enumerate(rows):
        single = torch.tensor([r])
        dec = torch.tensor([dec_rows[s]]) if dec_rows else None
        got = run(model, family, single, torch.ones_like(single), dec, torch.ones_like(dec) if dec_rows else None)
        tensors[f"single.{s}.input_ids"] = single[0]
        if dec_rows:
            tensors[f"single.{s}.decoder_input_ids"] = dec[0]
        for k, v in got.items():
            tensors[f"single.{s}.{k}"] = v[0].contiguous()
        stats.append(got[next(k for k in got if k.endswith("self_attn"))].amax(-1).mean().item())
    ids_b, mask_b = pad_rows(rows, ids["pad"])
    tensors["batch.input_ids"], tensors["batch.attention_mask"] = ids_b, mask_b
    dec_b = dec_m = None
    if dec_rows:
        dec_b, dec_m = pad_rows(dec_rows, ids["pad"])
        tensors["batch.decoder_input_ids"], tensors["batch.decoder_attention_mask"] = dec_b, dec_m
    for k, v in run(model, family, ids_b, mask_b, dec_b, dec_m).items():
        tensors[f"batch.{k}"] = v.contiguous()
    # the batch agrees with the single runs on the real positions (a check of the fixture itself)
    worst = 0.0
    for s in range(len(rows)):
        for k in [k for k in tensors if k.startswith(f"single.{s}.") and k.endswith("_attn")]:
            name = k.split(".", 2)[2]
            a = tensors[k]
            q, kk = a.shape[-2], a.shape[-1]
            worst = max(worst, (tensors[f"batch.{name}"][s, :, :, :q, :kk] - a).abs().max().item())
    meta["tensors"] = {k: list(v.shape) for k, v in tensors.items()}
    meta["mean_row_max"] = round(sum(stats) / len(stats), 3)  # 1/k would be uniform, 1 one-hot
    meta["batch_vs_single_max_abs"] = worst
    save_file(tensors, str(folder / "reference.safetensors"))
    (folder / "reference.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n")
    if family == "llama":
        write_llama_gguf(model, tok, ids, folder / "model.gguf")
        check_gguf(folder, meta, tensors)
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{family:12s} {size / 1e3:7.1f} kB  tokens {[len(r) for r in rows]}  "
          f"mean row max {meta['mean_row_max']}  batch-vs-single {worst:.1e}")
    return meta


# --- GGUF (llama) -------------------------------------------------------------------------------------
def write_llama_gguf(model, tok, ids: dict, path: Path) -> None:
    """The llama folder as a float32 GGUF, written the way llama.cpp's convert_hf_to_gguf.py does."""
    import gguf
    import numpy as np

    cfg = model.config
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    # the tokenizer as llama.cpp's "llama" (SentencePiece) model: pieces, scores, types
    vocab = tok.get_vocab()
    pieces = [None] * len(vocab)
    for piece, i in vocab.items():
        pieces[i] = piece
    merges = json.loads(tok.to_str())["model"]["merges"]
    rank = {}
    for m_i, m in enumerate(merges):
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        rank.setdefault(a + b, m_i)
    types, scores = [], []
    for i, piece in enumerate(pieces):
        if piece in ("<s>", "</s>"):
            types.append(gguf.TokenType.CONTROL)
        elif piece == "<unk>":
            types.append(gguf.TokenType.UNKNOWN)
        elif piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
        scores.append(-float(rank.get(piece, 0 if types[-1] != gguf.TokenType.NORMAL else i)))
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])
    w.add_unk_token_id(vocab["<unk>"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def permute(x: "np.ndarray", n_head: int) -> "np.ndarray":  # HF's rotary halves -> llama.cpp's pairs
        return (x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:])
                .swapaxes(1, 2).reshape(x.shape))

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
                 "post_attention_layernorm": "ffn_norm"}
    for i in range(cfg.num_hidden_layers):
        for hf, gg in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    for hf, gg in names.items():
        x = sd[hf]
        if gg.endswith("attn_q.weight"):
            x = permute(x, cfg.num_attention_heads)
        elif gg.endswith("attn_k.weight"):
            x = permute(x, cfg.num_key_value_heads)
        w.add_tensor(gg, np.ascontiguousarray(x, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    back = {t.name: np.asarray(t.data).reshape(list(reversed(t.shape.tolist()))) for t in gguf.GGUFReader(path).tensors}
    for hf, gg in names.items():  # read back: the file holds exactly the folder's weights
        x = back[gg]
        if gg.endswith(("attn_q.weight", "attn_k.weight")):
            n = cfg.num_attention_heads if "attn_q" in gg else cfg.num_key_value_heads
            x = x.reshape(n, x.shape[0] // n // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)
        assert np.array_equal(x, sd[hf]), gg


def check_gguf(folder: Path, meta: dict, tensors: dict) -> None:
    """transformers reads the GGUF back (its own tokenizer from the metadata, its own dequantizing):
    the same ids and the same logits as the folder, or the script stops."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, gguf_file="model.gguf")
    ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file="model.gguf", dtype=torch.float32,
                                               attn_implementation="eager").eval()
    for s, text in enumerate(SENTENCES):
        ids = tok(text)["input_ids"]
        assert ids == meta["input_ids"][s], (ids, meta["input_ids"][s])
        with torch.no_grad():
            logits = ref(torch.tensor([ids])).logits[0]
        assert torch.allclose(logits, tensors[f"single.{s}.logits"], atol=1e-5), s


def run_reference(out_dir: Path, families: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for family in families:
        reference_family(family, out_dir)
    size = sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())
    print(f"wrote {out_dir} ({size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("families", nargs="*", default=FAMILIES, help=f"default: all of {FAMILIES}")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/family-venv"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--reference", action="store_true",
                        help="(internal) run the reference; needs transformers importable")
    args = parser.parse_args()
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {FAMILIES}")
    if args.reference:
        run_reference(args.out, args.families)
        return
    python = ensure_venv(args.venv)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    subprocess.run([str(python), __file__, "--reference", "--out", str(args.out), *args.families],
                   check=True, env=env)


if __name__ == "__main__":
    main()
