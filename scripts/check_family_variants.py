"""Parity of family variants the committed fixtures (tests/fixtures/families) do not cover.

The fixtures hold one tiny checkpoint per family. Real checkpoints vary within a family: T5 v1.1
(gated GELU, untied output, no output rescaling), MLM heads on BERT, RoBERTa and DistilBERT (the
fixtures are base models), Llama 3.1's rotary scaling with biases and one K/V head, GPT-2 with
scale_attn_by_inverse_layer_idx, Marian with swish and unequal stacks. This script builds each
with transformers 5.23 in the throwaway venv of scripts/make_family_fixtures.py (weights drawn
large), saves it beside a fixture's tokenizer.json in a temporary folder, loads it with
``model.load(folder)`` and prints the worst pattern and logit differences against transformers'
eager attention. Nothing is written into the project.

    /tmp/family-venv/bin/python scripts/check_family_variants.py     # after make_family_fixtures.py

Measured on 25 November 2026 (2-core machine): every variant within 8e-6 (patterns 0 to 1.7e-6,
logits 0 to 7.4e-6).
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "families"
SENTENCES = ["The cat sat on the mat.", "Attention is all you need."]


def draw_large(m, seed: int = 0) -> None:
    """Matrices N(0, 0.3²), norm weights 1 + N(0, 0.1²), biases N(0, 0.1²); sinusoidal tables kept."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "embed_positions" in name:  # Marian's sinusoidal table: not saved, never drawn
                continue
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            elif "norm" in name.lower() or "ln" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def compare(label: str, ref, fixture: str, seq2seq: bool) -> tuple[float, float]:
    import torch

    import model

    folder = Path(tempfile.mkdtemp()) / label.split()[0]
    ref.save_pretrained(folder)
    shutil.copy(FIXTURES / fixture / "tokenizer.json", folder / "tokenizer.json")
    ours = model.load(folder)
    out, cache = ours.run_with_cache(SENTENCES)
    worst_p = worst_l = 0.0
    for b, ids in enumerate(cache.token_ids):
        x = torch.tensor([ids])
        with torch.no_grad():
            if seq2seq:
                r = ref(input_ids=x, decoder_input_ids=torch.tensor([cache.decoder_token_ids[b]]),
                        output_attentions=True)
                patterns = [("encoder.self_attn", r.encoder_attentions), ("decoder.self_attn", r.decoder_attentions),
                            ("decoder.cross_attn", r.cross_attentions)]
            else:
                r = ref(input_ids=x, output_attentions=True)
                patterns = [(ours.info.blocks[0], r.attentions)]
        for block, layers in patterns:
            stack, attn = block.split(".")
            for i, a in enumerate(layers):
                q, k = a.shape[-2:]
                ours_p = cache[f"{stack}.blocks.{i}.{attn}.hook_pattern"][b, :, :q, :k]
                worst_p = max(worst_p, (ours_p - a[0]).abs().max().item())
        worst_l = max(worst_l, (out.logits[b, : r.logits.shape[1]] - r.logits[0]).abs().max().item())
    print(f"{label:40s} patterns {worst_p:.1e}  logits {worst_l:.1e}  ({ours.info.norm}, {ours.info.ffn})")
    shutil.rmtree(folder.parent, ignore_errors=True)
    return worst_p, worst_l


def main() -> int:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    eager = dict(attn_implementation="eager")
    llama3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    variants = [
        ("t5 v1.1 (gated-gelu, untied)", "t5", True, lambda: tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=95, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4, feed_forward_proj="gated-gelu",
            tie_word_embeddings=False, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
            relative_attention_num_buckets=8, relative_attention_max_distance=16, **eager))),
        ("gpt2 (inverse layer scale, relu)", "gpt2", False, lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=330, n_embd=16, n_layer=2, n_head=4, n_positions=64, scale_attn_by_inverse_layer_idx=True,
            activation_function="relu", bos_token_id=0, eos_token_id=0, **eager))),
        ("bert MLM head", "bert", False, lambda: tf.BertForMaskedLM(tf.BertConfig(
            vocab_size=200, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
            max_position_embeddings=64, **eager))),
        ("roberta MLM head", "roberta", False, lambda: tf.RobertaForMaskedLM(tf.RobertaConfig(
            vocab_size=400, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
            max_position_embeddings=66, type_vocab_size=1, pad_token_id=1, **eager))),
        ("distilbert MLM head", "distilbert", False, lambda: tf.DistilBertForMaskedLM(tf.DistilBertConfig(
            vocab_size=200, dim=16, n_layers=2, n_heads=4, hidden_dim=32, max_position_embeddings=64, **eager))),
        ("llama (llama3 rope, biases, one K/V head)", "llama", False, lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=400, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=1, max_position_embeddings=64, rope_parameters=llama3, attention_bias=True,
            mlp_bias=True, tie_word_embeddings=True, **eager))),
        ("qwen2 (no window, tied)", "qwen2", False, lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(
            vocab_size=400, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, tie_word_embeddings=True, **eager))),
        ("marian (swish, unscaled, 1 decoder layer)", "marian", True, lambda: tf.MarianMTModel(tf.MarianConfig(
            vocab_size=95, d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
            pad_token_id=2, eos_token_id=0, decoder_start_token_id=2, activation_function="swish",
            scale_embedding=False, **eager))),
    ]
    worst = 0.0
    for label, fixture, seq2seq, make in variants:
        ref = make()
        draw_large(ref)
        worst = max(worst, *compare(label, ref.eval(), fixture, seq2seq))
    print(f"worst: {worst:.1e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
