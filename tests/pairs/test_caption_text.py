"""Captions (issue 42 'Rows'): ``pair_fields.caption_text`` is the one check of a caption folder's NAME.txt, a tar's
.txt member and a Parquet row's caption, so its verdicts are what every packer packs."""

from __future__ import annotations

from dataio.formats.pairs.pair_fields import caption_text


def test_a_caption_with_a_utf8_byte_order_mark_is_packed_without_it():
    # Notepad's UTF-8 files start with EF BB BF. Now the BOM is kept in the packed text ('\ufeffa cat on a mat'),
    # so the caption's first token is a BOM token (or the first word is tokenised otherwise): silently other text.
    text, why = caption_text(b"\xef\xbb\xbfa cat on a mat")
    assert why is None and text == "a cat on a mat", repr(text)


def test_a_caption_of_only_replacement_characters_is_not_packed():
    # U+FFFD only: a caption decoded lossily upstream (errors='replace'); it says nothing, like a control-only one.
    text, why = caption_text("\ufffd\ufffd\ufffd".encode())
    assert text is None, repr(text)


def test_control_nul_only_and_utf16_without_bom_are_refused():
    assert caption_text(b"\0\0\0")[0] is None
    assert caption_text("a cat".encode("utf-16-le"))[0] is None
    assert caption_text(b"\xef\xbb\xbf")[0] is None  # a BOM alone: empty
