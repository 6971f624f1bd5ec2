"""Reading files: Hugging Face folders (hf.py), GGUF files (gguf_family.py, gguf_tokenizer.py,
gguf_spm.py), the seed's safetensors (seed_weights.py), the tokenizers (tokenizer.py), the float32
cache of a GGUF (float_cache.py) and the size checks every reader makes first (checks.py)."""
