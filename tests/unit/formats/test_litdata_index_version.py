"""Whether a folder is a litdata folder (:func:`datacheck.formats.litdata.litdata_folder`: its
``index.json`` is a litdata index, which makes its ``.bin`` files litdata chunks rather than Megatron
token files) is read once per version of the index within a process: a rewrite that keeps the size and
puts the modification time back is a new version (its status-change time moved)."""
from __future__ import annotations

import json
import os

from datacheck.formats.litdata import litdata_folder


def test_an_index_rewritten_with_its_old_size_and_time_is_read_again(tmp_path):
    index = tmp_path / "index.json"
    lit = json.dumps({"chunks": [], "config": {"data_format": ["bytes"]}})
    other = json.dumps({"chunkz": [], "config": {"data_format": ["bytes"]}})  # no "chunks": not a litdata index
    assert len(lit) == len(other)
    index.write_text(lit)
    assert litdata_folder(str(tmp_path)) is True
    st = index.stat()
    index.write_text(other)
    os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert index.stat().st_size == st.st_size
    assert litdata_folder(str(tmp_path)) is False
