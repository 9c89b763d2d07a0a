"""Whether a dataset card declares ``configs`` (datacheck/io/hfmeta.py ``card_front_text`` and
``declares_configs``): then ``load_dataset`` reads their ``data_files``, not the files the Hub's
file-name rule names."""
from __future__ import annotations

import pytest

from datacheck.io.hfmeta import MAX_README_BYTES, card_front_text, declares_configs, read_card


def card_declares_configs(path) -> bool:
    return declares_configs(card_front_text(path))

PUSH_TO_HUB = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"


@pytest.mark.parametrize(("text", "want"), [
    (PUSH_TO_HUB, True),
    ("---\nlicense: mit\nconfigs:\n  - config_name: a\n    data_files: a/*.csv\n---\n# card\n", True),
    ("---\nlicense: mit\n---\n# card\n", False),
    ("---\ndataset_info:\n  configs: nested, not top level\n---\n", False),  # indented: not the card's key
    ("# no front matter\nconfigs:\n", False),
    ("---\nlicense: mit\n---\nconfigs: after the front matter\n", False),
    ("", False),
])
def test_configs_at_the_top_level_of_the_front_matter(tmp_path, text, want):
    p = tmp_path / "README.md"
    p.write_text(text, encoding="utf-8")
    assert card_declares_configs(p) is want


def test_absent_card_or_a_front_matter_not_closed_within_the_bound_declares_nothing(tmp_path):
    assert card_declares_configs(tmp_path / "README.md") is False
    # a long body after a front matter closed within the bound: read (DatasetCard.load reads it too)
    p = tmp_path / "big.md"
    p.write_bytes(PUSH_TO_HUB.encode() + b"x" * MAX_README_BYTES)
    assert card_declares_configs(p) is True
    # a front matter that does not close within the bound: not read
    p.write_bytes(b"---\nconfigs:\n" + b"# x\n" * (MAX_README_BYTES // 4) + b"---\n")
    assert card_declares_configs(p) is False
    assert card_declares_configs(tmp_path) is False  # a folder


@pytest.mark.parametrize(("raw", "want"), [
    (b"\xef\xbb\xbf" + PUSH_TO_HUB.encode(), True),  # a byte order mark: DatasetCard.load reads past it
    (b"\n  " + PUSH_TO_HUB.encode(), True),  # blank space before the opening ---, as its regex allows
    (PUSH_TO_HUB.replace("\n", "\r\n").encode(), True),
    (PUSH_TO_HUB.encode().replace(b"data/", b"d\xff/"), False),  # not UTF-8: DatasetCard.load raises
    ((PUSH_TO_HUB[:-4] + "---  \n").encode(), True),  # spaces after the closing ---
    (PUSH_TO_HUB.replace("---\n", "---  \n", 1).encode(), False),  # ... but not after the opening one
])
def test_the_front_matter_is_found_as_datasetcard_load_finds_it(tmp_path, raw, want):
    repocard = pytest.importorskip("huggingface_hub.repocard")
    p = tmp_path / "README.md"
    p.write_bytes(raw)
    try:
        ref = "configs" in (repocard.DatasetCard.load(p).data.to_dict() or {})
    except UnicodeDecodeError:
        ref = False
    assert ref is want
    assert card_declares_configs(p) is want


_UTF8_AT_THE_BOUND = b"---\nlicense: mit\n---\n" + b"x" * (MAX_README_BYTES - 21) + "æ".encode()  # "æ" cut by the bound


@pytest.mark.parametrize("raw", [
    PUSH_TO_HUB.encode("utf-16"), PUSH_TO_HUB.encode("utf-16-be"), PUSH_TO_HUB.encode("utf-32"),
    b"\xfe\xff" + PUSH_TO_HUB.encode("utf-16-be"), b"\x00\x00\xfe\xff" + PUSH_TO_HUB.encode("utf-32-be"),
    (PUSH_TO_HUB + "# Dansk sætninger\n").encode("latin-1"),  # the front matter ASCII, the body not UTF-8
    (PUSH_TO_HUB + "# Dansk sætninger\n").encode("utf-8"), b"\xef\xbb\xbf" + PUSH_TO_HUB.encode(),
    PUSH_TO_HUB.encode() + b"\xc3",  # a character cut at the end of the file
    _UTF8_AT_THE_BOUND, _UTF8_AT_THE_BOUND[:-1], _UTF8_AT_THE_BOUND + b"\xff",
], ids=["utf16", "utf16be-nobom", "utf32", "utf16be", "utf32be", "latin1-body", "utf8", "utf8-bom", "cut-at-end",
        "utf8-across-bound", "cut-at-bound", "bad-after-bound"])
def test_a_card_is_unreadable_exactly_when_datasetcard_load_raises(tmp_path, raw):
    """``read_card``'s problem, against ``DatasetCard.load`` (what load_dataset runs on a folder's
    README.md): a problem exactly when it raises, naming the byte and offset it names; a UTF-16/32 card
    by its byte order mark. Past the first MAX_README_BYTES nothing is read: a bad byte there is not
    seen (the one difference, asserted)."""
    repocard = pytest.importorskip("huggingface_hub.repocard")
    p = tmp_path / "README.md"
    p.write_bytes(raw)
    try:
        data = repocard.DatasetCard.load(p).data.to_dict()
        err = None
    except UnicodeDecodeError as exc:
        err = exc
    front, problem = read_card(p)
    if len(raw) > MAX_README_BYTES and err is not None and err.start >= MAX_README_BYTES:
        assert problem is None  # beyond the bound: not read
        return
    assert (problem is None) is (err is None)
    if err is None:  # UTF-16BE text of ASCII without a mark is UTF-8 (NULs and ASCII): read, no front matter found
        assert (front is not None) is bool(data)
        return
    assert front is None and problem.startswith("the dataset card README.md is ")
    bom = next((name for mark, name in ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
                                        (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE")) if raw.startswith(mark)), None)
    if bom is not None:
        assert f"is {bom} text" in problem and f"iconv -f {bom} -t UTF-8 README.md" in problem
    else:
        assert f"(byte 0x{raw[err.start]:02x} at offset {err.start})" in problem
