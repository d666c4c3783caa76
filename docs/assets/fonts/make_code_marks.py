"""Make docs/assets/fonts/code-marks.woff: the glyphs φ and combining tilde of DejaVu Sans Mono
(matplotlib's copy) and one glyph for the pair φ̃, chosen by the font's `ccmp` feature.

Why: the checks print φ̃ (U+03C6 U+0303, there is no precomposed character). DejaVu Sans Mono,
the monospace font of most Linux desktops, draws a combining mark as a full-width glyph centred
in its cell and has no anchor to put it on φ, so browsers (which zero a mark's advance) draw the
tilde over the *next* character. The site's code font stack starts with this small font
(docs/assets/extra.css, unicode-range U+03C6 and U+0303 only), so φ̃ in a code block is one
glyph with the tilde over φ, one cell wide, and every other character keeps the reader's font.

Run from the checkout's root: `python docs/assets/fonts/make_code_marks.py` (fontTools, which
matplotlib brings). The result is committed; rerun only to change it.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
from fontTools import subset
from fontTools.feaLib.builder import addOpenTypeFeaturesFromString
from fontTools.pens.transformPen import TransformPen
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.ttLib import TTFont

FAMILY = "exactmem code marks"
SOURCE = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSansMono.ttf"
HERE = Path(__file__).resolve().parent
# the tilde sits just above capital height in DejaVu, and φ's stem reaches nearly as high:
# raise the tilde a little so that the two stay apart at a code block's small size
RAISE = 100


def main() -> None:
    font = TTFont(SOURCE)
    options = subset.Options()
    options.layout_features = []  # only the feature added below
    options.name_IDs = []
    options.notdef_outline = True
    options.drop_tables += ["FFTM"]  # FontForge's time stamps
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[0x03C6, 0x0303])
    subsetter.subset(font)

    glyf, hmtx = font["glyf"], font["hmtx"]
    order = list(font.getGlyphOrder())
    phi, tilde = font.getBestCmap()[0x03C6], font.getBestCmap()[0x0303]
    glyphs = font.getGlyphSet()
    pen = TTGlyphPen(glyphs)
    glyphs[phi].draw(pen)
    glyphs[tilde].draw(TransformPen(pen, (1, 0, 0, 1, 0, RAISE)))
    pair = "phi_tildecomb"
    glyf[pair] = pen.glyph()
    hmtx[pair] = hmtx[phi]
    new_order = [*order, pair]
    font.setGlyphOrder(new_order)
    glyf.glyphOrder = new_order
    if "post" in font:
        font["post"].formatType = 3.0  # no glyph names stored: nothing to keep in step
    for table in ("GSUB", "GPOS", "GDEF"):
        if table in font:
            del font[table]
    addOpenTypeFeaturesFromString(
        font, f"languagesystem DFLT dflt;\nfeature ccmp {{ sub {phi} {tilde} by {pair}; }} ccmp;"
    )

    # renamed, as the Bitstream Vera licence asks of a modified font
    names = font["name"]
    names.names = []
    for name_id, text in (
        (1, FAMILY),
        (2, "Regular"),
        (4, FAMILY),
        (6, FAMILY.replace(" ", "-")),
        (0, "Glyphs from DejaVu Sans Mono: see LICENSE-DejaVu.txt"),
    ):
        names.setName(text, name_id, 3, 1, 0x409)
    font.flavor = "woff"
    out = io.BytesIO()
    font.save(out)
    (HERE / "code-marks.woff").write_bytes(out.getvalue())
    licence = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "LICENSE_DEJAVU"
    (HERE / "LICENSE-DejaVu.txt").write_text(licence.read_text())


if __name__ == "__main__":
    main()
