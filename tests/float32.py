"""How far two float32 computations of the same forward pass can disagree, and the tolerances the
tests that compare two such runs take from it.

Two runs of one model on one input differ only in rounding. The order of the additions inside each
matrix product changes with the CPU's vector width (AVX-512, AVX2, SSE), the thread count, the
shapes (a padded batch against a sentence alone) and the path taken (the in-place attention path
against the one keeping every hook). No tolerance tighter than that rounding can hold on every
machine of this project's kind: a test that asked two SmolLM2 forwards to agree on a probability to
1e-5 failed on a machine where they differed by 1.5e-5.

The estimate (Higham & Mary, "A new approach to probabilistic rounding error analysis", 2019):
- a float32 dot product of length K carries a relative error of about √K·u, u = 2⁻²⁴, when its
  rounding errors are independent (the worst case, K·u, is never approached by real kernels);
- a forward pass of L layers with M matrix products each, of inner width at most K, adds L·M such
  independent errors to the residual stream, whose relative error is then about √(L·M)·√K·u;
- that error is a vector in a direction unrelated to any one output row w, so it moves the logit
  h·w by about rel·‖h‖·‖w‖/√d (a random direction in d dimensions meets w at ~1/√d);
- a factor SIGMAS (3) takes the estimate, a typical size, to a bound a run rarely exceeds.

Measured on the 2-core machine (25 November 2026) for SmolLM2, the same batch under AVX-512 and
AVX2 kernels, 1 and 2 threads, and run_data's path against run_with_cache's: log-probabilities
differ by at most 3.1e-5, probabilities by at most 6.9e-6; the estimate below gives 1.6e-3 for a
logit: some 50× the largest difference seen, and still 50× smaller than the differences that a
real mistake makes (each test that uses it checks that one such mistake fails it).
"""
from __future__ import annotations

import math

U = 2.0 ** -24  # float32 unit roundoff
SIGMAS = 3.0


def stream_error(n_layers: int, matmuls_per_layer: int, width: int) -> float:
    """The relative error of the residual stream after a float32 forward pass (see the module)."""
    return SIGMAS * math.sqrt(n_layers * matmuls_per_layer) * math.sqrt(width) * U


def matmuls_per_layer(info) -> int:
    """Q, K, V, the scores, weights·V, W_O, and the feed-forward's products (two, three gated)."""
    return 6 + (3 if info.ffn in ("SwiGLU", "GeGLU") else 2)


def model_stream_error(info) -> float:
    layers = info.n_layers + (info.n_decoder_layers or 0)
    return stream_error(layers, matmuls_per_layer(info), max(info.d_model, info.d_ff or info.d_model))


def logit_error(info, hidden_norm: float, row_norm: float) -> float:
    """An absolute bound on the difference of one logit h·w between two float32 runs, from the
    final stream's norm ‖h‖ and the largest output row's norm ‖w‖."""
    return model_stream_error(info) * hidden_norm * row_norm / math.sqrt(info.d_model)


def logprob_error(dz: float) -> float:
    """log softmax(z)_t = z_t − logsumexp(z): each term moves by at most max|Δz|, so 2·max|Δz|."""
    return 2.0 * dz


def prob_error(dz: float) -> float:
    """|Δp| = p·|e^{Δlog p} − 1| ≤ e^{2Δz} − 1 (p ≤ 1)."""
    return math.expm1(logprob_error(dz))


def kl_error(dz: float, spread: float) -> float:
    """KL(p ‖ q) = Σ p (log p − log q), with both log-probabilities off by at most δ = 2·max|Δz|:
    ΔKL ≈ Σ p δ_p (log p − log q) + Σ p (δ_p − δ_q), so |ΔKL| ≤ δ·Σ p |log p − log q| + 2δ;
    ``spread`` is Σ p |log p − log q| of the runs compared."""
    d = logprob_error(dz)
    return d * spread + 2.0 * d


def direction_error(info) -> float:
    """The change of a unit vector e = m/‖m‖ (an encoder's sentence embedding) when m has relative
    error ε: ‖Δe‖ ≤ 2ε; a cosine of two such vectors then moves by at most 2·2ε."""
    return 4.0 * model_stream_error(info)


def tolerance(info, reference) -> float:
    """An absolute tolerance for one quantity taken from two float32 runs (a padded batch and a
    sentence alone, two code paths): the stream's relative error (model_stream_error) times the
    quantity's largest magnitude, since rounding errors scale with the vectors summed, not with
    each entry."""
    return model_stream_error(info) * float(reference.abs().max())


def close(a, b, info) -> bool:
    """Whether two runs' values of one quantity agree as far as float32 lets them (see tolerance)."""
    return bool((a.double() - b.double()).abs().max() <= tolerance(info, b.double()))
