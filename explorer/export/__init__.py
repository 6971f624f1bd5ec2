"""Static export of the explorer's figures: PNG, SVG, PDF, CSV, GIF, and one-click ZIP bundles.

Pure Python (no Streamlit), four modules:

    renderer   the export browser (Debian's chromium through kaleido, kept warm) and bytes
    bundles    captions, file names, themes, the stage items and ZIPs with a manifest
    animation  a figure with animation frames (the Decoding view) as a GIF or a PDF page per frame
    __main__   the command line: python -m explorer.export --model seed --text "hello" ...

    png = figure_bytes(fig, "png", scale=2)
    files = png_and_svg(fig, scale=2)            # {"png": .., "svg": ..}: one drawing for both
    gif = gif_bytes(fig)                         # every frame of a timeline; pdf_pages_bytes(fig)
    data = bundle_zip(run, info, sel, model_name="seed", text="...", formats=("png", "pdf"))
"""
from .animation import current_figure, gif_bytes, has_frames, pdf_pages_bytes, step_figures
from .bundles import (ExportMeta, Item, Written, app_version, bundle_zip, check_formats, default_caption,
                      file_stem, manifest, prepare, render_items, shorten, slugify, stage_ids, stage_item,
                      stage_items, with_caption, zip_items)
from .renderer import (_RENDERER, ANIMATED_FORMATS, BROWSER_CANDIDATES, FORMATS, IMAGE_FORMATS, INSTALL_COMMAND, MIME,
                       RENDER_TIMEOUT_S, START_TIMEOUT_S, ExportError, ExportUnavailable, browser_path,
                       cjk_font_missing, export_size, figure_bytes, has_cjk, png_and_svg, shutdown, table_bytes,
                       unavailable_reason, warm_up)

__all__ = ["ExportMeta", "Item", "Written", "app_version", "bundle_zip", "check_formats", "default_caption",
           "file_stem", "manifest", "prepare", "render_items", "shorten", "slugify", "stage_ids", "stage_item",
           "stage_items", "with_caption", "zip_items", "BROWSER_CANDIDATES", "FORMATS", "IMAGE_FORMATS",
           "INSTALL_COMMAND", "MIME", "RENDER_TIMEOUT_S", "START_TIMEOUT_S", "ExportError", "ExportUnavailable",
           "browser_path", "cjk_font_missing", "export_size", "figure_bytes", "has_cjk", "png_and_svg", "shutdown",
           "table_bytes", "unavailable_reason", "warm_up", "_RENDERER", "ANIMATED_FORMATS", "current_figure",
           "gif_bytes", "has_frames", "pdf_pages_bytes", "step_figures"]
