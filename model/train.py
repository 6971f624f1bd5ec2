"""Train the shipped seed Transformer weights on toy tasks whose attention is worth seeing.

    python -m model.train reverse     # the default model: the input reversed, character by character
    python -m model.train sort        # the distinct letters of the input, in alphabetical order
    python -m model.train reverse --checkpoints 0,100,400,...   # and the weights along the way, packed
                                      # (model/files/seed_checkpoints.py: model.load("seed", step=400))

Both are seeded and reproducible (same seed, same machine → same weights). ``reverse`` makes
cross-attention run along the anti-diagonal (a positional pattern); ``sort`` makes it jump to
wherever the next letter sits in the input (a content-based pattern).
"""
from __future__ import annotations

import argparse
import math
import random
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from model.arch.seed import TASKS, Batch, Seed, SeedConfig, encode_batch, task_target
from model.files.tokenizer import (HANGUL_SYLLABLES, PRINTABLE_ASCII, build_char_tokenizer, char_tokenizer,
                                   decode_chars, save)
from model.registry import ASSETS, SEED_TOKENIZER, SEED_WEIGHTS, load_seed_file

MAX_CHARS = 40
# cumulative shares of the reverse task's inputs: ASCII, Hangul, mixed, few distinct (rest: words)
MIX = (0.12, 0.62, 0.82, 0.9)
# what `python -m model.train TASK` runs unless told otherwise: the shipped weights' recipes. A
# recipe's ``then`` is a second stage that continues from the first stage's weights with its own
# settings (the rest as in the first): reverse learns the task on the vocabulary first, then to keep
# characters outside it (<unk>) in place, at full length with a lower learning rate. (Mixing them
# in from the start cost accuracy on long Hangul strings: README, "How the shipped weights were made".)
RECIPES = {
    "reverse": dict(steps=3300, lr=2e-3, ramp=0.25, long_bias=0.7, pe_base=20.0, d_ff=128, unk_rate=0.0,
                    then=dict(steps=800, lr=5e-4, start_len=40, ramp=0.01, unk_rate=0.05)),
    "sort": dict(steps=1000, lr=1e-3, ramp=0.5, long_bias=0.0, pe_base=10000.0, d_ff=256, unk_rate=0.0),
}
SECOND_STAGE = ("steps", "lr", "start_len", "ramp", "unk_rate")  # what a ``then`` may set
# Characters outside the seed vocabulary (each one code point, unchanged by NFC, so each becomes one
# <unk>): what people paste into the app (√, curly quotes, accents, emoji, other scripts, jamo). The
# reverse task mixes them in at ``unk_rate`` of the positions, and the target keeps each <unk> in its
# reversed place, so the model learns to write <unk> where the input had one.
UNKNOWN_CHARS = ("√∑∞≈≠≤≥→←↑↓×÷±°•…“”‘’–—€£¥©®™§¶"
                 "éèêëàâäçñöüßÉÀÇÑ"
                 "αβγδεθλμπσφωΑΒΓΔΩ"
                 "абвгдежзиклмнопрстЖЯ"
                 "中文日本語人大小山水學"
                 "あいうえおかきアイウ"
                 "ㄱㄴㄷㄹㅁㅂㅅㅇㅈㅎㅏㅓㅗㅜㅡㅣ"
                 "😀🙂👍🎉🔥❤★☆♪")
LOWER = string.ascii_lowercase
# A few common syllables and words so that "natural" sequences look like text, not noise.
_EN_WORDS = ("the a of and to in is it you that he was for on are as with his they at be this "
             "from have or by one had not but what all were when we there can an your which "
             "their said if do will each about how up out them then she many some so these would "
             "other into has more her two like him see time could no make than first been its who "
             "now people my made over did down only way find use may water long little very after "
             "words called just where most know attention model token query key value head layer").split()
_KO_WORDS = ("나는 너는 우리 오늘 내일 학교 에 에서 가 이 을 를 은 는 하다 했다 합니다 입니다 "
             "사람 시간 공부 어텐션 모델 토큰 문장 단어 한국어 영어 마스크 위치 인코딩 그리고 "
             "하지만 정말 아주 많이 조금 먹었다 갔다 왔다 좋아요 감사합니다 안녕하세요 세계").split()


def _words(rng: random.Random, words: tuple[str, ...] | list[str], n: int) -> str:
    out = ""
    while len(out) < n:
        w = rng.choice(words)
        if rng.random() < 0.15:
            w = w.capitalize() + rng.choice(",.!?")
        out = (out + " " + w) if out else w
    return out[:n]


def expected_output(task: str, s: str, tt) -> str:
    """What the model should write for ``s``, as it can write it: the task's target with every
    character outside the vocabulary as the visible token ``<unk>`` (the target itself when all its
    characters are in the vocabulary)."""
    return decode_chars(tt, tt.encode([task_target(task, s)])[0].ids)


def with_unknowns(s: str, rng: random.Random, rate: float) -> str:
    """``s`` with each character replaced, with probability ``rate``, by one outside the vocabulary."""
    if rate <= 0:  # draws nothing: the other recipes' random streams stay as they were
        return s
    return "".join(rng.choice(UNKNOWN_CHARS) if rng.random() < rate else c for c in s)


def sample_input(task: str, rng: random.Random, n: int | None = None, max_chars: int = MAX_CHARS,
                 long_bias: float = 0.0, unk_rate: float = 0.0) -> str:
    """One training/evaluation input of 1..max_chars characters from the task's domain.

    Lengths are uniform, except that with probability ``long_bias`` the longer of two draws is
    taken (long inputs are where positional attention must be most precise). ``unk_rate``: the
    share of positions (in expectation) given a character outside the vocabulary instead."""
    if unk_rate > 0:
        return with_unknowns(sample_input(task, rng, n, max_chars, long_bias), rng, unk_rate)
    n = n or (max(rng.randint(1, max_chars), rng.randint(1, max_chars)) if rng.random() < long_bias
              else rng.randint(1, max_chars))
    if task == "sort":  # lowercase letters, biased toward few distinct letters now and then
        pool = LOWER if rng.random() < 0.7 else rng.sample(LOWER, rng.randint(1, 8))
        return "".join(rng.choice(pool) for _ in range(n))
    # Hangul gets most of the inputs: each of its 11,172 syllables is rare, and a rarely seen
    # embedding is noise that the positional part of attention has to learn to ignore
    mode = rng.random()
    if mode < MIX[0]:
        return "".join(rng.choice(PRINTABLE_ASCII) for _ in range(n))
    if mode < MIX[1]:
        return "".join(rng.choice(HANGUL_SYLLABLES) for _ in range(n))
    if mode < MIX[2]:
        return "".join(rng.choice(PRINTABLE_ASCII if rng.random() < 0.5 else HANGUL_SYLLABLES)
                       for _ in range(n))
    if mode < MIX[3]:  # few distinct characters: repeats force attention by position, not content
        pool = rng.sample(PRINTABLE_ASCII + HANGUL_SYLLABLES[:50], rng.randint(1, 4))
        return "".join(rng.choice(pool) for _ in range(n))
    return _words(rng, _EN_WORDS if rng.random() < 0.5 else _KO_WORDS, n)


def curriculum(step: int, steps: int, start: int = 8, frac: float = 0.5) -> int:
    """The longest input at this step: grows from ``start`` to MAX_CHARS over the first ``frac``
    of training, then stays there. Short inputs teach the mechanism; long ones refine it."""
    return min(MAX_CHARS, start + int((MAX_CHARS - start) * step / max(1.0, frac * steps)))


def candidates(batches: list[Batch], always: torch.Tensor) -> torch.Tensor:
    """The ids the sampled softmax scores: every id in the batches plus ``always``, sorted."""
    return torch.unique(torch.cat([always] + [t.flatten() for b in batches for t in (b.src, b.tgt_out)]))


def sampled_loss(model: Seed, b: Batch, table: torch.Tensor, cand: torch.Tensor,
                 reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy over the candidate ids ``cand`` (sorted: every id of the batch, specials, ASCII).

    ``table`` holds the embedding rows of ``cand`` (C, d): the inputs are embedded from it and the
    tied output projection scores against it, so one step touches C rows instead of the 11k of
    the full vocabulary. Evaluation and the app always use the full softmax.
    """
    def rows(ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, d): E's rows, from the candidates'
        return F.embedding(torch.searchsorted(cand, ids), table)

    pad = model.cfg.pad_id
    src_real, tgt_real = b.src != pad, b.tgt_in != pad  # (B, S), (B, T)
    enc, dec = model.encoder, model.decoder
    S, T = b.src.shape[1], b.tgt_in.shape[1]
    memory = enc.finish(enc(enc.embed_tokens(b.src, vectors=rows(b.src)), enc.context(src_real, torch.arange(S))))
    h = dec(dec.embed_tokens(b.tgt_in, vectors=rows(b.tgt_in)),
            dec.context(tgt_real, torch.arange(T), None, memory, src_real))  # (B, T, d)
    keep = b.tgt_out != pad
    logits = h[keep] @ table.T  # (N, C)
    return F.cross_entropy(logits, torch.searchsorted(cand, b.tgt_out[keep]), reduction=reduction)


def accumulate_gradient(model: Seed, pieces: list[Batch], always: torch.Tensor) -> torch.Tensor:
    """Set the parameters' ``.grad`` to the gradient of the mean token loss over all ``pieces``
    (one batch split by length) and return that loss.

    The candidates' embedding rows are gathered once, as a leaf of their own, which every piece
    reads; their gradient is written into the full (vocab, d) embedding gradient once per step.
    (Letting autograd do it costs a zeroed 11k x 128 gradient for every lookup, six a step.)
    """
    cand = candidates(pieces, always)
    weight = model.embedding.weight
    table = weight.detach()[cand].requires_grad_()  # (C, d)
    n_tokens = sum(int((b.tgt_out != model.cfg.pad_id).sum()) for b in pieces)
    loss = torch.zeros(())
    for b in pieces:  # the whole batch's mean loss, accumulated piece by piece
        part = sampled_loss(model, b, table, cand, reduction="sum") / n_tokens
        part.backward()
        loss += part.detach()
    grad = torch.zeros_like(weight)
    grad[cand] = table.grad
    weight.grad = grad if weight.grad is None else weight.grad + grad
    return loss


def split_by_length(task: str, tt, srcs: list[str], pieces: int) -> list[Batch]:
    """One mixed-length batch as ``pieces`` sub-batches of similar lengths, each padded only to
    its own longest input. Their summed gradients equal the whole batch's (padding is masked),
    so a step sees the same mix of lengths at a fraction of the padded compute."""
    order = sorted(srcs, key=len)
    k = max(1, min(pieces, len(order)))
    return [encode_batch(task, tt, order[i * len(order) // k: (i + 1) * len(order) // k]) for i in range(k)]


@torch.inference_mode()
def exact_match(model: Seed, task: str, inputs: list[str], batch: int = 256) -> float:
    """Fraction of inputs whose greedy output equals the task's target exactly."""
    ok = 0
    for i in range(0, len(inputs), batch):
        chunk = inputs[i: i + batch]
        out = model.run(chunk)
        ok += sum(g == expected_output(task, s, model.tokenizer) for g, s in zip(out.generated, chunk))
    return ok / len(inputs)


def held_out(task: str, n: int, seed: int, unk_rate: float = 0.0) -> list[str]:
    rng = random.Random(10_000 + seed)
    return [sample_input(task, rng, unk_rate=unk_rate) for _ in range(n)]


def train(task: str, steps: int, batch_size: int, seed: int, cfg_overrides: dict,
          log: Callable[[str], None] = print, eval_every: int = 0, lr: float = 1e-3,
          checkpoint: Path | None = None, init: Path | None = None, start_len: int = 8,
          stop_after: int | None = None, split: int = 2, long_bias: float = 0.0,
          ramp: float = 0.5, final_eval: int = 1000, unk_rate: float = 0.0,
          init_state: dict | None = None,
          on_step: Callable[[int, float | None, Seed], None] | None = None) -> tuple[Seed, dict]:
    """``on_step(n, loss, model)``: called with n = 0 (the weights before the first step, loss None) and
    after every optimizer step n (its batch's mean token loss, the sampled softmax's): what
    ``--checkpoints`` records. It reads the weights only, so the run's numbers stay the same."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tt = char_tokenizer()
    cfg = SeedConfig(vocab_size=tt.vocab_size, task=task, seed=seed, **cfg_overrides)
    model = Seed(cfg, tt, name="seed" if task == "reverse" else f"seed-{task}")
    if init is not None:  # continue from earlier weights (a second stage of training)
        model.load_state_dict(load_seed_file(init).state_dict())
    if init_state is not None:  # the same, from weights in memory (the recipe's second stage)
        model.load_state_dict(init_state)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0,
                            fused=True)
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))) + 0.01)
    always = torch.arange(4 + len(PRINTABLE_ASCII))
    t0 = time.time()
    bar = tqdm(range(min(steps, stop_after or steps)), desc=f"train {task}", file=sys.stderr, mininterval=2)
    model.train()
    if on_step is not None:
        on_step(0, None, model)
    for step in bar:
        longest = curriculum(step, steps, start_len, ramp)
        srcs = [sample_input(task, rng, max_chars=longest, long_bias=long_bias, unk_rate=unk_rate)
                for _ in range(batch_size)]
        pieces = split_by_length(task, tt, srcs, split)
        opt.zero_grad(set_to_none=True)
        loss = accumulate_gradient(model, pieces, always)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if on_step is not None:
            on_step(step + 1, loss.item(), model)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
        if eval_every and step and step % eval_every == 0:
            model.eval()
            acc = exact_match(model, task, held_out(task, 400, seed + 1, unk_rate))
            model.train()
            log(f"step {step} ({time.time() - t0:.0f} s): exact match {acc:.4f} on 400 held-out inputs")
            if checkpoint:
                model.save(checkpoint, extra={"training": {"steps": step}})
    model.eval()
    seconds = time.time() - t0
    acc = exact_match(model, task, held_out(task, final_eval, seed, unk_rate))
    log(f"{task}: {steps} steps in {seconds:.0f} s; held-out exact match {acc:.4f}")
    return model, {"steps": min(steps, stop_after or steps), "schedule_steps": steps, "batch_size": batch_size, "train_seconds": round(seconds, 1),
                   "held_out_exact_match": acc, "lr": lr, "start_len": start_len, "seed": seed,
                   "init": str(init) if init else None, "split": split,
                   "long_bias": long_bias, "ramp": ramp, "mix": list(MIX) if task == "reverse" else None,
                   "unk_rate": unk_rate}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=list(TASKS))
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: per task)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: per task)")
    p.add_argument("--eval-every", type=int, default=0, help="print held-out accuracy every N steps")
    p.add_argument("--d-ff", type=int, default=None, help="feed-forward width (default: per task)")
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this many steps of the --steps schedule (a first stage)")
    p.add_argument("--init", type=Path, default=None, help="start from these weights (a second stage)")
    p.add_argument("--stage", type=int, choices=(1, 2), default=None,
                   help="run only this stage of a two-stage recipe (2 needs --init: the first stage's weights); "
                        "default: the whole recipe")
    p.add_argument("--start-len", type=int, default=None,
                   help="longest input at step 0 (grows to 40 over the first half; 40 = no curriculum)")
    p.add_argument("--ramp", type=float, default=None,
                   help="fraction of --steps over which the curriculum grows (default: per task)")
    p.add_argument("--long-bias", type=float, default=None,
                   help="probability of drawing a length as the longer of two uniform draws (default: per task)")
    p.add_argument("--pe-base", type=float, default=None, help="positional-encoding base n (default: per task)")
    p.add_argument("--unk-rate", type=float, default=None,
                   help="share of input positions given a character outside the vocabulary (<unk>), kept in "
                        "place in the target (default: per task)")
    p.add_argument("--split", type=int, default=2, help="pieces a batch is split into by length")
    p.add_argument("--final-eval", type=int, default=1000, help="held-out inputs scored after each stage")
    p.add_argument("--mix", type=str, default=None,
                   help="cumulative shares ASCII,Hangul,mixed,few-distinct of reverse inputs (rest: words)")
    p.add_argument("--out", type=Path, default=None, help="weights file (default: the shipped one)")
    p.add_argument("--checkpoints", type=str, default=None,
                   help="steps of the whole run (comma-separated, e.g. 0,100,400,3300,4100) whose weights to keep: "
                        "float32 files in --checkpoint-dir, then packed into the checkpoints file "
                        "(model/files/seed_checkpoints.py); every step's loss is kept too")
    p.add_argument("--checkpoint-dir", type=Path, default=None,
                   help="where --checkpoints writes its float32 files (default: TMPDIR/OUT-checkpoints/)")
    p.add_argument("--checkpoints-out", type=Path, default=None,
                   help="the packed checkpoints file (default: the shipped one, for the shipped recipe's weights)")
    p.add_argument("--pack-only", action="store_true",
                   help="train nothing: pack --checkpoints from --checkpoint-dir (a run's folder) into --checkpoints-out")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.mix:
        global MIX
        MIX = tuple(float(x) for x in a.mix.split(","))
    recipe = dict(RECIPES[a.task])
    then = recipe.pop("then", None)
    if a.stage == 2:
        if then is None or a.init is None:
            p.error("--stage 2 needs a task with a second stage (reverse) and --init WEIGHTS")
        recipe.update(then)
        then = None
    elif a.pack_only and not a.checkpoints:
        p.error("--pack-only needs --checkpoints (the steps to pack)")
    elif a.stage == 1 or a.init is not None or a.steps is not None or a.stop_after is not None:
        then = None  # a first stage, or a run of one's own: no second stage
    for k, v in recipe.items():
        if getattr(a, k, None) is None:
            setattr(a, k, v)
    if a.start_len is None:
        a.start_len = 8
    steps = a.steps
    out = a.out or SEED_WEIGHTS["seed" if a.task == "reverse" else f"seed-{a.task}"]
    overrides = {"d_ff": a.d_ff, "pe_base": a.pe_base}
    recorder = None
    if a.checkpoints:
        from model.files import seed_checkpoints

        if a.pack_only:
            if a.checkpoint_dir is None:
                p.error("--pack-only needs --checkpoint-dir (the folder a --checkpoints run wrote)")
            packed = a.checkpoints_out or seed_checkpoints.CHECKPOINTS["seed"]
            record = seed_checkpoints.pack(a.checkpoint_dir, packed, shipped=out, sample_input=sample_input,
                                           steps=[int(x) for x in a.checkpoints.split(",") if x.strip()])
            print(seed_checkpoints.describe(record))
            print(f"wrote {packed} ({packed.stat().st_size / 1e6:.1f} MB)")
            return 0

        recorder = seed_checkpoints.Recorder([int(x) for x in a.checkpoints.split(",") if x.strip()],
                                             a.checkpoint_dir or Path(tempfile.gettempdir()) / f"{out.stem}-checkpoints")
    model, stats = train(a.task, steps, a.batch_size, a.seed, overrides, eval_every=a.eval_every,
                         lr=a.lr, checkpoint=out.with_suffix(".partial.safetensors") if a.eval_every else None,
                         init=a.init, start_len=a.start_len, stop_after=a.stop_after,
                         split=a.split, long_bias=a.long_bias, ramp=a.ramp, unk_rate=a.unk_rate,
                         final_eval=a.final_eval, on_step=recorder and recorder.at(0))
    if then is not None:  # the recipe's second stage, from the first stage's weights in memory
        first = stats
        model, stats = train(a.task, then["steps"], a.batch_size, a.seed, overrides, lr=then["lr"],
                             init_state=model.state_dict(), start_len=then["start_len"], split=a.split,
                             long_bias=a.long_bias, ramp=then["ramp"], unk_rate=then["unk_rate"],
                             final_eval=a.final_eval, on_step=recorder and recorder.at(first["steps"]))
        stats["first_stage"] = first
        stats["train_seconds_total"] = round(first["train_seconds"] + stats["train_seconds"], 1)
    ASSETS.mkdir(exist_ok=True)
    if not SEED_TOKENIZER.exists():
        save(build_char_tokenizer(), SEED_TOKENIZER)
    model.save(out, extra={"training": stats})
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    if recorder is not None:
        recorder.finish(stats)
        packed = a.checkpoints_out or (seed_checkpoints.CHECKPOINTS.get("seed") if a.task == "reverse" else None)
        if packed is not None and (a.checkpoints_out or a.out is None):
            print(seed_checkpoints.describe(seed_checkpoints.pack(recorder.folder, packed, shipped=out,
                                                                  sample_input=sample_input)))
            print(f"wrote {packed} ({packed.stat().st_size / 1e6:.1f} MB)")
        else:
            print(f"checkpoints in {recorder.folder}; pack them with `python -m model.train {a.task} --pack-only "
                  f"--checkpoint-dir {recorder.folder} --checkpoints {a.checkpoints} --checkpoints-out OUT`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
