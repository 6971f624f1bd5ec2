"""A MkDocs hook that lets the gen-files pages be translated pages too.

mkdocs-static-i18n (1.3) handles only files that lie in ``docs_dir``; mkdocs-gen-files writes its pages
into a temporary folder of its own, so a generated ``stages.ko.md`` would be an "unhandled file" (a
warning, so a strict build fails). This hook builds from a staging copy of ``docs/`` instead: at the
first ``on_config`` it copies ``docs/`` into a temporary folder and points ``docs_dir`` there (the i18n
plugin, whose ``on_config`` runs after, takes that as the original); after gen-files has run
(``on_files``, before the i18n plugin, whose priority is -100) every generated file is written into
the staging folder and replaced by a plain file of it. Nothing is ever written into ``docs/``.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

_STAGED: dict[str, str] = {}  # the real docs_dir -> its staging copy, for this process's builds


@event_priority(50)
def on_config(config):
    docs = str(Path(config.docs_dir).resolve())
    if docs in _STAGED.values():  # a later language's build: already staged
        return config
    tmp = tempfile.mkdtemp(prefix="attention-explorer-docs-")
    atexit.register(shutil.rmtree, tmp, True)
    staged = Path(tmp) / "docs"
    shutil.copytree(docs, staged, ignore=shutil.ignore_patterns("__pycache__"))
    _STAGED[docs] = str(staged)
    config.docs_dir = str(staged)
    return config


@event_priority(-50)
def on_files(files: Files, config):
    out = []
    for f in files:
        if getattr(f, "generated_by", None) == "mkdocs-gen-files":
            target = Path(config.docs_dir) / f.src_path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.content_bytes)
            f = File(f.src_path, config.docs_dir, config.site_dir, config.use_directory_urls)
        out.append(f)
    return Files(out)


def on_serve(server, config, builder):
    """`mkdocs serve` watches the real docs and the code the generated pages are made from."""
    root = Path(__file__).resolve().parents[2]
    for name in ("docs", "explorer", "model", "bench/results"):
        server.watch(str(root / name))
    return server
