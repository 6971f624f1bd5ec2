"""The seed Transformer's training, replayed: its weights at steps along the run that made them.

    model.checkpoint_steps("seed")        # [0, 100, ..., 4100]: steps of the whole run (both stages)
    model.load("seed", step=400)          # the weights after 400 optimizer steps
    training_record("seed")               # every step's training loss, each checkpoint's recorded loss

How they are made: ``python -m model.train reverse --checkpoints 0,100,...`` keeps the float32 weights at
those steps of the run (and every step's loss) in a folder (``Recorder``), then packs them into one file
beside the shipped weights (``pack``; ``python -m model.train reverse --pack-only --checkpoint-dir FOLDER
--checkpoints STEPS`` packs again from the folder, e.g. fewer of its steps): each 2-D weight as int8 with one float32 scale per row (its largest |w| / 127),
the 1-D ones (biases, norms) as float32. A step whose weights equal the shipped file's bit for bit is stored
as a reference to that file (its sha256), not again. The loss each checkpoint records is measured on exactly
the weights a load gives (dequantized), on the evaluation inputs stored in the file, teacher-forced, with
the full softmax (``eval_loss``), in float32 and in float64.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from model.files.seed_weights import ASSETS, load_seed_file
from model.runtime.base import HookedModel
from model.runtime.errors import WeightsError

FORMAT = "attention-explorer-seed-checkpoints"
CHECKPOINTS = {"seed": ASSETS / "seed-reverse-checkpoints.safetensors"}  # a model name -> its checkpoints
SHIPPED = {"seed": ASSETS / "seed-reverse.safetensors"}  # the weights a checkpoint may refer to
SOURCES = ("run", "replay", "first_stage", "shipped")  # where a checkpoint's weights come from (sources.json)
EVAL_INPUTS = 32  # the recorded evaluation batch: inputs drawn as the training draws them
EVAL_SEED = 20_000  # (model.train.held_out's stream 10_000 + seed; the training's own streams are 0 and 1)


# --- writing: during training, then packed ----------------------------------------------------------

class Recorder:
    """``train(..., on_step=recorder.at(offset))``: keeps every step's loss and, at the chosen steps of
    the whole run (a second stage's steps counted on from the first's), the float32 weights as
    ``FOLDER/step-N.safetensors`` (the seed's own file format)."""

    def __init__(self, steps: list[int], folder: Path) -> None:
        self.steps, self.folder = sorted(set(steps)), Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.losses: dict[int, float] = {}
        self.saved: set[int] = set()
        self.stages: list[int] = []  # the step each stage started at

    def at(self, offset: int) -> Callable:
        self.stages.append(offset)

        def on_step(n: int, loss: float | None, model) -> None:
            step = offset + n
            if loss is not None:
                self.losses[step] = float(loss)
            if step in self.steps and step not in self.saved:
                model.save(self.folder / f"step-{step}.safetensors", extra={"training": {"step": step}})
                self.saved.add(step)
                self.finish(None)  # the losses so far: a run stopped early keeps them
        return on_step

    def finish(self, stats: dict | None) -> None:
        last = max(self.losses, default=0)
        (self.folder / "losses.json").write_text(json.dumps({
            "train_loss": [self.losses.get(s) for s in range(1, last + 1)], "stages": self.stages,
            "training": stats}))


def _quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 rows and one float32 scale per row (largest |w| / 127): w ≈ q · scale."""
    scale = t.abs().amax(dim=1).clamp_min(1e-30) / 127.0  # (rows,)
    return torch.round(t / scale[:, None]).clamp(-127, 127).to(torch.int8), scale.float()


def _dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[:, None]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    with safe_open(str(path), framework="pt") as f:
        return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}


def pack(folder: Path, out: Path, shipped: Path | None = None, steps: list[int] | None = None,
         name: str = "seed", *,
         sample_input: Callable[[str, random.Random], str]) -> dict:
    """The checkpoints in ``folder`` (``Recorder``'s) -> one file ``out``; returns its record."""
    folder = Path(folder)
    found = sorted(int(p.stem.split("-")[1]) for p in folder.glob("step-*.safetensors"))
    steps = sorted(steps) if steps else found
    missing = sorted(set(steps) - set(found))
    if missing:
        raise WeightsError(f"no checkpoint for steps {missing} in {folder}")
    log = json.loads((folder / "losses.json").read_text())
    shipped_tensors = _read(shipped)[1] if shipped is not None and Path(shipped).is_file() else None
    tensors: dict[str, torch.Tensor] = {}
    config = None
    stored: dict[str, dict] = {}
    for step in steps:
        meta, state = _read(folder / f"step-{step}.safetensors")
        config = config or meta["config"]
        if shipped_tensors is not None and state.keys() == shipped_tensors.keys() and all(
                torch.equal(state[k], shipped_tensors[k]) for k in state):
            stored[str(step)] = {"shipped": Path(shipped).name, "sha256": _sha256(Path(shipped))}
            continue
        for k, v in state.items():
            if v.dim() == 2:
                tensors[f"step{step}.{k}.q"], tensors[f"step{step}.{k}.scale"] = _quantize(v)
            else:
                tensors[f"step{step}.{k}"] = v.float().contiguous()
        stored[str(step)] = {"int8": True}
    rng = random.Random(EVAL_SEED)
    inputs = [sample_input("reverse", rng) for _ in range(EVAL_INPUTS)]
    sources = json.loads((folder / "sources.json").read_text()) if (folder / "sources.json").is_file() else {}
    meta = {"format": FORMAT, "model": json.dumps(name), "config": config, "steps": json.dumps(steps),
            "sources": json.dumps({str(s): sources.get(str(s), "run") for s in steps}),
            "stored": json.dumps(stored), "train_loss": json.dumps(log["train_loss"]),
            "stages": json.dumps(log["stages"]), "training": json.dumps(log.get("training")),
            "eval_inputs": json.dumps(inputs, ensure_ascii=False)}
    save_file(tensors, str(out), metadata=meta)
    _open.cache_clear()
    # what each checkpoint, as loaded, scores: recorded in the file
    evals, heads = {}, {}
    for step in steps:
        m = load_checkpoint(name, step, path=out)
        evals[str(step)] = {"loss": eval_loss(m, inputs), "loss_float64": eval_loss(m, inputs, torch.float64)}
        if "int8" in stored[str(step)]:  # what the rounding to int8 moved: the run's own float32 weights' loss
            evals[str(step)]["loss_before_int8"] = eval_loss(load_seed_file(folder / f"step-{step}.safetensors"), inputs)
        heads[str(step)] = cross_attention_summary(m, inputs)
    meta.update(eval=json.dumps(evals), heads=json.dumps(heads))
    save_file(tensors, str(out), metadata=meta)
    _open.cache_clear()
    return training_record(name, path=out)


# --- reading --------------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _open(path: Path, stamp: float) -> tuple[dict, list[str]]:
    try:
        with safe_open(str(path), framework="pt") as f:
            meta, keys = f.metadata() or {}, list(f.keys())
    except (SafetensorError, OSError, ValueError) as e:
        raise WeightsError(f"{path.name} is not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise WeightsError(f"{path.name} is not a seed checkpoints file")
    return {k: (v if k == "config" else json.loads(v)) for k, v in meta.items() if k != "format"}, keys


def _meta(name: str, path: Path | None = None) -> dict | None:
    path = Path(path or CHECKPOINTS.get(name) or "")
    if not path.is_file():
        return None
    return _open(path, path.stat().st_mtime)[0]


def checkpoint_steps(name: str) -> list[int]:
    """The training steps ``load(name, step=N)`` accepts ([] for a model without checkpoints)."""
    meta = _meta(name) if name in CHECKPOINTS else None
    return list(meta["steps"]) if meta else []


def training_record(name: str, path: Path | None = None) -> dict:
    """The run's record: ``train_loss`` (every step's, index i = step i + 1: the sampled softmax's mean
    token loss on that step's batch), ``stages`` (the step each stage started at), ``steps`` (the
    checkpoints), ``eval`` (step -> loss, loss_float64 on ``eval_inputs``, measured on the weights as loaded, and
    loss_before_int8: the run's own float32 weights' loss),
    ``heads`` (step -> every cross-attention head's anti-diagonal weight and entropy), ``training``, and
    ``sources`` (step -> where its weights come from: "run", the run that made the shipped weights; or
    what the packed folder's sources.json says, e.g. "replay", "first_stage", "shipped": SOURCES)."""
    meta = _meta(name, path)
    if meta is None:
        raise WeightsError(f"{name!r} has no training checkpoints")
    return {k: v for k, v in meta.items() if k != "config"}


def load_checkpoint(name: str, step: int, path: Path | None = None) -> HookedModel:
    """The weights of ``name`` after ``step`` optimizer steps (one of ``checkpoint_steps(name)``)."""
    path = Path(path or CHECKPOINTS.get(name) or "")
    meta = _meta(name, path)
    if meta is None:
        raise WeightsError(f"{name!r} has no training checkpoints" + (
            f" (missing file {path.name}; retrain with `python -m model.train reverse --checkpoints ...`)"
            if name in CHECKPOINTS else ""))
    if isinstance(step, bool) or not isinstance(step, int) or step not in meta["steps"]:
        raise WeightsError(f"{name!r} has no checkpoint at step {step!r}: choose one of "
                           f"{', '.join(map(str, meta['steps']))}")
    where = meta["stored"][str(step)]
    if "shipped" in where:
        m = load_seed_file(path.parent / where["shipped"], name=name)
    else:
        from model.arch.seed import Seed, SeedConfig  # noqa: PLC0415
        from model.files.seed_weights import SEED_TOKENIZER  # noqa: PLC0415
        from model.files.tokenizer import char_tokenizer  # noqa: PLC0415

        prefix = f"step{step}."
        with safe_open(str(path), framework="pt") as f:
            raw = {k[len(prefix):]: f.get_tensor(k) for k in f.keys() if k.startswith(prefix)}
        state = {}
        for k, v in raw.items():
            if k.endswith(".q"):
                state[k[:-2]] = _dequantize(v, raw[k[:-2] + ".scale"])
            elif not k.endswith(".scale"):
                state[k] = v
        cfg = SeedConfig.from_dict(json.loads(meta["config"]))
        m = Seed(cfg, char_tokenizer(SEED_TOKENIZER if SEED_TOKENIZER.is_file() else None), name=name)
        m.load_file_state(state)
        m = m.requires_grad_(False).lay_out_weights().eval()
    m.training_step = step
    return m


# --- what a checkpoint scores ---------------------------------------------------------------------

@torch.inference_mode()
def eval_loss(m, inputs: list[str], dtype: torch.dtype = torch.float32, chunk: int = 16) -> float:
    """The mean token cross-entropy (full softmax, nats) of reversing ``inputs``, teacher-forced: what
    the training minimises, on every token of the vocabulary. ``dtype`` float64 runs a copy in double."""
    return eval_stats(m, inputs, dtype, chunk)[0]


@torch.inference_mode()
def eval_stats(m, inputs: list[str], dtype: torch.dtype = torch.float32, chunk: int = 16) -> tuple[float, float]:
    """(``eval_loss``, the largest |logit| on the way: what a bound on the loss's rounding scales with)."""
    from model.arch.seed import encode_batch  # noqa: PLC0415

    net = m if dtype == torch.float32 else _copy_as(m, dtype)
    total, count, top = torch.zeros((), dtype=torch.float64), 0, 0.0
    for i in range(0, len(inputs), chunk):
        b = encode_batch(m.cfg.task, m.tokenizer, inputs[i: i + chunk])
        logits = net(b.src, b.tgt_in)  # (B, T, vocab)
        keep = b.tgt_out != m.cfg.pad_id
        total += torch.nn.functional.cross_entropy(logits[keep], b.tgt_out[keep], reduction="sum").double()
        count += int(keep.sum())
        top = max(top, float(logits[keep].abs().max()))
    return float(total / count), top


def _copy_as(m, dtype: torch.dtype):
    """The same weights in a model of its own, in ``dtype`` (the plain layout: lay_out_weights's fused
    matrices are float32 copies)."""
    from model.arch.seed import Seed  # noqa: PLC0415

    copy = Seed(m.cfg, m.tokenizer, name=m.info.name).to(dtype)
    copy.load_file_state({k: v.detach().to(dtype) for k, v in m.file_state().items()})
    return copy.requires_grad_(False).eval()


@torch.inference_mode()
def cross_attention_summary(m, inputs: list[str]) -> dict:
    """Every cross-attention head's pattern on ``inputs``, teacher-forced on the reversed text: for output
    position t < L, the mean weight on input position L-1-t (the anti-diagonal: where reversing reads)
    and the mean entropy of the row divided by log(L+1) (1: uniform over the L characters and </s>).
    {"L{layer}H{head}": {"anti_diagonal": ..., "entropy": ...}}."""
    from model.runtime.hooks import hooks  # noqa: PLC0415
    from model.arch.seed import encode_batch  # noqa: PLC0415

    b = encode_batch(m.cfg.task, m.tokenizer, inputs)
    names = [f"decoder.blocks.{i}.cross_attn.hook_pattern" for i in range(m.cfg.n_decoder_layers)]
    cache = {}
    with hooks({n: lambda x, n: cache.__setitem__(n, x.detach().clone()) for n in names}):
        m(b.src, b.tgt_in)
    return _summarise(m, cache, inputs)


def _summarise(m, cache, inputs: list[str]) -> dict:
    lengths = [len(m.tokenizer.encode([s])[0].ids) - 1 for s in inputs]  # characters (without </s>)
    out = {}
    for i in range(m.cfg.n_decoder_layers):
        a = cache[f"decoder.blocks.{i}.cross_attn.hook_pattern"].double()  # (B, H, T, S)
        for h in range(a.shape[1]):
            diag, ent, n = 0.0, 0.0, 0
            for b, L in enumerate(lengths):
                if L < 2:
                    continue
                rows = a[b, h, :L, : L + 1]  # (L, L+1): output positions t < L over the L characters and </s>
                t = torch.arange(L)
                diag += float(rows[t, L - 1 - t].sum())
                p = rows.clamp_min(1e-300)
                ent += float(-(rows * p.log()).sum(-1).sum() / math.log(L + 1))
                n += L
            out[f"L{i}H{h}"] = {"anti_diagonal": round(diag / n, 6), "entropy": round(ent / n, 6)}
    return out


def describe(record: dict) -> str:
    """One line a checkpoint: its recorded loss and the most anti-diagonal head, and how it is stored."""
    lines = []
    for s in record["steps"]:
        e, hd = record["eval"][str(s)], record["heads"][str(s)]
        best = max(hd, key=lambda k: hd[k]["anti_diagonal"])
        before = f", before int8 {e['loss_before_int8']:.6f}" if "loss_before_int8" in e else ""
        lines.append(f"step {s:5d}: loss {e['loss']:.6f} (float64 {e['loss_float64']:.9f}{before}); {best} anti-diagonal "
                     f"{hd[best]['anti_diagonal']:.3f}, entropy {hd[best]['entropy']:.3f} of uniform; "
                     f"{record['stored'][str(s)]}")
    return "\n".join(lines)
