"""The models a host offers beside the built-in ones: a TOML file of name -> path, description.

Where the file is: ``$ATTENTION_EXPLORER_MODELS`` (a path), else ``models.toml`` in the project's
root folder if there is one (a checkout or an editable install; a wheel's package has no such folder:
there, the variable or ``attention-explorer --models FILE``); neither: no configured models. The file::

    [models.gpt2-lecture]                   # the name: letters, digits, ".", "_", "-" (at most 40)
    path = "/srv/models/gpt2"               # a Hugging Face folder, a .gguf file or a seed
                                            # .safetensors; relative to the file's own folder
    description = "GPT-2 small, the model of lecture 3"
    description_ko = "GPT-2 small, 3강의 모델"   # optional (else the English one)

``model.load(NAME)``, ``model.available()``, the app's model selector (and the URL's ``model=``,
which never takes a path on a hosted server), the lessons and ``python -m explorer.export --model
NAME`` all read it. The file is read again when it changes. A malformed file or entry never
raises: what is wrong is in ``problems()`` and the entries that are fine are offered. A name that
is built in ("seed", "minilm", ...) cannot be taken.
"""
from __future__ import annotations

import os
import re
import threading
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

ENV = "ATTENTION_EXPLORER_MODELS"
DEFAULT_FILE = Path(__file__).resolve().parent.parent / "models.toml"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
MAX_FILE_BYTES = 1 << 20  # a configuration, not a data file


@dataclass(frozen=True)
class Entry:
    name: str
    path: Path  # absolute: relative paths are read from the file's folder
    description: str = ""
    description_ko: str = ""
    source: str = ""  # the configuration file's name (not its folder: messages on a hosted server)

    def describe(self, lang: str = "en") -> str:
        return (self.description_ko if lang == "ko" and self.description_ko else self.description) or self.name


def config_file(environ=os.environ) -> Path | None:
    """The configuration file in use: $ATTENTION_EXPLORER_MODELS, else models.toml beside the app."""
    raw = (environ.get(ENV) or "").strip()
    if raw:
        return Path(raw).expanduser()
    return DEFAULT_FILE if DEFAULT_FILE.is_file() else None


def parse(text: str, folder: Path, reserved: Iterable[str] = (), source: str = "") -> tuple[dict[str, Entry], list[str]]:
    """Entries and problems from the text of a configuration file (pure: nothing is opened)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return {}, [f"{source or 'the models file'} is not valid TOML ({e})"]
    table = doc.get("models", {})
    if not isinstance(table, dict):
        return {}, [f"{source}: [models] must be a table of [models.NAME] entries"]
    reserved = set(reserved)
    entries: dict[str, Entry] = {}
    problems = [f"{source}: unknown top-level key {k!r} (only [models.NAME] entries)" for k in doc if k != "models"]
    for name, spec in table.items():
        where = f"{source}: [models.{name}]"
        if not NAME.fullmatch(name):
            problems.append(f"{where}: a name is 1-40 letters, digits, '.', '_' or '-', starting with a letter or digit")
            continue
        if name in reserved:
            problems.append(f"{where}: {name!r} is a built-in model's name; choose another")
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str) or not spec["path"].strip():
            problems.append(f'{where}: needs path = "a folder or a .gguf file"')
            continue
        unknown = sorted(set(spec) - {"path", "description", "description_ko"})
        if unknown:
            problems.append(f"{where}: unknown keys {', '.join(unknown)} (path, description, description_ko)")
        texts = [spec.get(k, "") for k in ("description", "description_ko")]
        if not all(isinstance(x, str) for x in texts):
            problems.append(f"{where}: description and description_ko are strings")
            texts = ["", ""]
        path = Path(spec["path"].strip()).expanduser()
        entries[name] = Entry(name, path if path.is_absolute() else folder / path,
                              " ".join(texts[0].split())[:200], " ".join(texts[1].split())[:200], source)
    return entries, problems


_lock = threading.Lock()
_seen: dict = {"key": None, "entries": {}, "problems": []}


def _read(reserved: tuple[str, ...], environ=os.environ) -> tuple[dict[str, Entry], list[str]]:
    path = config_file(environ)
    if path is None:
        return {}, []
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size, reserved)
    except OSError:
        return {}, [f"the models file {path.name} ({ENV}) cannot be read: it does not exist"]
    with _lock:
        if _seen["key"] == key:
            return _seen["entries"], _seen["problems"]
    try:
        if st.st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES // 1024} kB")
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # a folder, unreadable, not UTF-8, too large
        entries, problems = {}, [f"the models file {path.name} cannot be read ({type(e).__name__}: {e})"]
    else:
        entries, problems = parse(text, path.parent, reserved, path.name)
    with _lock:
        _seen.update(key=key, entries=entries, problems=problems)
    return entries, problems


def entries(reserved: Iterable[str] = ()) -> dict[str, Entry]:
    """name -> Entry of the configuration file in use ({} without one), built-in names left out."""
    return _read(tuple(reserved))[0]


def problems(reserved: Iterable[str] = ()) -> list[str]:
    """What is wrong with the configuration file ([] when nothing is), without its folder."""
    return list(_read(tuple(reserved))[1])


def load_entry(entry: Entry, load: Callable):
    """The entry's model, read by ``load`` (model.load: a folder, a GGUF or a seed file), named as
    configured. A path that is not there says which name and which file, not the folder."""
    from model.runtime.errors import WeightsError

    if not entry.path.exists():
        raise WeightsError(f"the configured model {entry.name!r} ({entry.source}) points to "
                           f"{entry.path.name!r}, which does not exist; fix its path in {entry.source}")
    m = load(entry.path)
    fields = {"name": entry.name}
    if entry.description and hasattr(m.info, "description"):
        fields["description"] = entry.description
    m.info = replace(m.info, **fields)
    return m
