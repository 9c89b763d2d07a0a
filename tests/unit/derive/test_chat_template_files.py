"""The files a tokenizer's load reads (:func:`datacheck.derive.tokfiles.loaded_files`) decide both the
result cache's key and when a process loads the tokenizer again: transformers also reads the
``additional_chat_templates/*.jinja`` of the folder (``default.jinja`` renders ``messages`` when the
folder gives no other template). Real tokenizer: ``shared/chat/tokenizers/smollm_135m`` (no chat
template of its own)."""
from __future__ import annotations

import os

from checkhelp import CHATML, TOKENIZER, tokenizer_copy

from datacheck.derive.chat import load_chat_tokenizer
from datacheck.derive.tokfiles import CHAT_TEMPLATE_DIR, loaded_files


def test_loaded_files_are_the_folders_files_and_its_templates(tmp_path):
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok")
    (tok / CHAT_TEMPLATE_DIR).mkdir()
    (tok / CHAT_TEMPLATE_DIR / "default.jinja").write_text(CHATML)
    (tok / CHAT_TEMPLATE_DIR / "notes.txt").write_text("not a template")
    (tok / "sub").mkdir()
    (tok / "sub" / "x.jinja").write_text("not read by transformers")
    want = sorted(tok / f.name for f in TOKENIZER.iterdir()) + [tok / CHAT_TEMPLATE_DIR / "default.jinja"]
    assert loaded_files(tok) == want


def test_an_edited_template_in_the_subfolder_is_loaded_again_in_the_same_process(tmp_path):
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok")
    (tok / CHAT_TEMPLATE_DIR).mkdir()
    jinja = tok / CHAT_TEMPLATE_DIR / "default.jinja"
    jinja.write_text(CHATML)
    first, why = load_chat_tokenizer(str(tok))
    assert why is None and first.chat_template == CHATML
    st = jinja.stat()
    jinja.write_text(CHATML + "{# edited #}")
    os.utime(jinja, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same modification time: the write still shows
    again, why = load_chat_tokenizer(str(tok))
    assert why is None and again.chat_template == CHATML + "{# edited #}"
