"""The architecture and its parts: a checkpoint's config as a Family (family.py), the parts every
model is built from (parts.py, positional.py), the one Transformer that assembles them (generic.py)
and the seed encoder–decoder on those parts (seed.py)."""
