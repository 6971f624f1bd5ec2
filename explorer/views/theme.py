"""Figure themes: "screen" (what the app shows) and "presentation" (slides).

    fig = apply_theme(stage_figure(...)[0], "presentation")   # a themed copy; the input is untouched

"screen" keeps the figure's colours, labels and order exactly as on screen and only makes sure
every text has a real CJK font (so Korean tokens never turn into empty boxes in PNG/PDF).
"presentation" is for slides: white background, large fonts, colour-blind-safe colour scales
(unsafe scales such as Jet or Rainbow become Cividis or RdBu; the Okabe–Ito palette for lines) and a
16:9 export size.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.colors import get_colorscale, hex_to_rgb, unlabel_rgb

from .style import FONT, OKABE_ITO


@dataclass(frozen=True)
class Theme:
    name: str
    width: int  # default export size in layout pixels
    height: int
    font_size: int | None  # None: keep the figure's own sizes
    title_size: int | None = None
    tick_size: int | None = None
    text_scale: float = 1.0  # numbers inside cells and other annotations grow by this factor
    light: bool = False  # force a white background and dark text
    colour_blind_safe: bool = False  # swap colour scales for colour-blind-safe ones
    caption_size: int = 14
    fixed_size: bool = False  # export at (width, height) whatever the figure's own size


THEMES: dict[str, Theme] = {
    "screen": Theme("screen", width=1280, height=720, font_size=None, caption_size=13),
    "presentation": Theme("presentation", width=1600, height=900, font_size=22, title_size=30,
                          tick_size=20, text_scale=1.6, light=True, colour_blind_safe=True,
                          caption_size=18, fixed_size=True),
}
THEME_NAMES = tuple(THEMES)
DEFAULT_THEME = "screen"


def get_theme(name: str) -> Theme:
    try:
        return THEMES[name]
    except KeyError:
        raise ValueError(f"unknown theme {name!r}; choose one of {', '.join(THEMES)}") from None


def _rgb(colour: str) -> tuple[float, float, float]:
    colour = colour.strip()
    if colour.startswith("#"):
        return tuple(float(c) for c in hex_to_rgb(colour))  # type: ignore[return-value]
    return tuple(float(c) for c in unlabel_rgb(colour)[:3])  # type: ignore[return-value]


def _luminance(colour: str) -> float:
    r, g, b = _rgb(colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# Scales that are already colour-blind safe (single-hue or ColorBrewer/matplotlib CVD-safe ones):
# kept as they are, so slides look like the screen where that is already safe.
SAFE_SCALES = ("Blues", "Greens", "Greys", "Oranges", "Purples", "Reds", "BuGn", "BuPu", "GnBu",
               "OrRd", "PuBu", "PuBuGn", "PuRd", "RdPu", "YlGn", "YlGnBu", "YlOrBr", "YlOrRd",
               "Viridis", "Cividis", "Plasma", "Inferno", "Magma",
               "RdBu", "PuOr", "BrBG", "PiYG", "PRGn", "RdYlBu")


def _key(stops) -> tuple:
    return tuple((round(float(p), 4), str(c).replace(" ", "").lower()) for p, c in stops)


_SAFE_KEYS = {_key(get_colorscale(n + r)) for n in SAFE_SCALES for r in ("", "_r")}
DIVERGING_SCALES = ("RdBu", "PuOr", "BrBG", "PiYG", "PRGn", "RdYlBu", "RdYlGn", "RdGy", "Spectral",
                    "Portland", "Picnic", "Armyrose", "Earth", "Fall", "Geyser", "Tealrose",
                    "Temps", "Tropic", "balance", "curl", "delta")
_DIVERGING_KEYS = {_key(get_colorscale(n + r)) for n in DIVERGING_SCALES for r in ("", "_r")}


def _safe_scale(scale, *, diverging_hint: bool):
    """The scale itself if colour-blind safe, else a safe one of the same shape and polarity."""
    try:
        stops = get_colorscale(scale) if isinstance(scale, str) else [list(s) for s in scale]
        if _key(stops) in _SAFE_KEYS:
            return scale
        lo, hi = stops[0][1], stops[-1][1]
        l_lo, l_hi = _luminance(lo), _luminance(hi)
    except Exception:  # an exotic scale: keep a sensible default
        return "RdBu_r" if diverging_hint else "Cividis"
    if diverging_hint or _key(stops) in _DIVERGING_KEYS:
        # RdBu (ColorBrewer, colour-blind safe); keep which end is red
        red_high = _rgb(hi)[0] - _rgb(hi)[2] > _rgb(lo)[0] - _rgb(lo)[2]
        return "RdBu_r" if red_high else "RdBu"
    # Cividis runs dark -> light; reverse it when the original ran light -> dark
    return "Cividis_r" if l_lo > l_hi else "Cividis"


def _font(size: int | None = None, colour: str | None = None) -> dict:
    font: dict = {"family": FONT}
    if size:
        font["size"] = size
    if colour:
        font["color"] = colour
    return font


def apply_theme(fig: go.Figure, name: str = DEFAULT_THEME) -> go.Figure:
    """Return a themed copy of ``fig``; ``fig`` itself is never changed."""
    theme = get_theme(name)
    out = go.Figure(fig)
    ink = "#111111" if theme.light else None
    base = out.layout.font.size or 12
    out.update_layout(font=_font(theme.font_size, ink), hoverlabel_font_family=FONT)
    if theme.light:
        # the plot background stays what the figure chose: masked cells show it as their colour
        out.update_layout(template="plotly_white", paper_bgcolor="white",
                          plot_bgcolor=out.layout.plot_bgcolor or "white", colorway=list(OKABE_ITO),
                          colorscale_sequential="Cividis", colorscale_diverging="RdBu_r")
    if theme.title_size:
        out.update_layout(title_font=_font(theme.title_size, ink))
    if theme.tick_size:
        for update in (out.update_xaxes, out.update_yaxes):
            # larger labels need more room than the figure's own margins: let plotly grow them
            update(tickfont=_font(theme.tick_size), title_font=_font(theme.font_size),
                   automargin=True)
    if theme.light:
        out.update_yaxes(tickangle=0)  # horizontal row labels read best on a slide
    for ann in out.layout.annotations or ():
        ann.font.family = FONT
        if theme.text_scale != 1:
            ann.font.size = round((ann.font.size or base) * theme.text_scale)
    for trace in out.data:
        _theme_trace(trace, theme)
    for key in out.layout:  # shared colour axes: coloraxis, coloraxis2, ...
        if key.startswith("coloraxis") and out.layout[key] is not None:
            _theme_colours(out.layout[key], theme, diverging_hint=out.layout[key].cmid is not None)
    return out


def _theme_colours(holder, theme: Theme, *, diverging_hint: bool) -> None:
    """Colour scale and colour bar of a trace, a marker or a layout coloraxis."""
    props = holder.to_plotly_json()
    if theme.colour_blind_safe and props.get("colorscale") is not None:
        holder.colorscale = _safe_scale(holder.colorscale, diverging_hint=diverging_hint)
    if theme.tick_size and "colorbar" in holder:
        holder.colorbar.tickfont = _font(theme.tick_size)
        holder.colorbar.title.font = _font(theme.tick_size)


def _theme_trace(trace, theme: Theme) -> None:
    props = trace.to_plotly_json()  # what the trace sets itself (not the template defaults)
    if "textfont" in trace and ("text" in props or "texttemplate" in props):
        trace.textfont.family = FONT
        if theme.text_scale != 1:
            trace.textfont.size = round((trace.textfont.size or 12) * theme.text_scale)
    if "colorscale" in trace:
        _theme_colours(trace, theme, diverging_hint=props.get("zmid") is not None)
    if "marker" in props and "colorscale" in props["marker"]:
        _theme_colours(trace.marker, theme, diverging_hint=trace.marker.cmid is not None)
