"""Where a tokenizer's files are, without reading them: the one rule every verb follows to find a
tokenizer in a folder, and the refusal of a folder holding special files. Kept apart from
:mod:`datacheck.derive.chat` (which imports polars and pyarrow) so that what the training loop imports
(:class:`datacheck.torch.BatchGuard`, through :mod:`datacheck.derive.tokenizer`) stays light."""
from __future__ import annotations

from pathlib import Path

from datacheck.model.errors import UsageError

__all__ = ["CHAT_TEMPLATE_DIR", "TOKENIZER_FILES", "loaded_files", "tokenizer_file", "refuse_special_files"]

#: the files a tokenizer folder is read from, in this order (``inspect --tokenizer``, ``schema infer
#: --tokenizer`` and ``[tokens] tokenizer`` alike): a Hugging Face fast tokenizer, a GPT-2 style
#: byte-level BPE vocabulary (``merges.txt`` beside it), a WordPiece vocabulary
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")
#: the ending of a GPT-2 style vocabulary saved under a prefix, as Megatron-LM names its
#: ``--vocab-file`` / ``--merge-file`` pair (``gpt2-vocab.json`` + ``gpt2-merges.txt``); the merges
#: file is the same prefix + :data:`PREFIXED_MERGES`
PREFIXED_VOCAB = "-vocab.json"
PREFIXED_MERGES = "-merges.txt"
#: the sub-folder of a tokenizer folder whose ``*.jinja`` files transformers loads as named chat
#: templates (``transformers.utils.CHAT_TEMPLATE_DIR``, read by ``from_pretrained`` since 4.5x;
#: ``default.jinja`` there renders ``messages`` when the folder gives no other template)
CHAT_TEMPLATE_DIR = "additional_chat_templates"


def loaded_files(folder: Path) -> list[Path]:
    """The files a tokenizer's load from ``folder`` may read, sorted: the folder's own regular files
    and the ``*.jinja`` files of its :data:`CHAT_TEMPLATE_DIR` sub-folder (the inputs of a rendering:
    the result cache's key and the loaded tokenizer's memo are made of them). Raises ``OSError``."""
    files = sorted(f for f in folder.iterdir() if f.is_file())
    templates = folder / CHAT_TEMPLATE_DIR
    if templates.is_dir():
        files += sorted(f for f in templates.iterdir() if f.is_file() and f.name.endswith(".jinja"))
    return files


def tokenizer_file(path: str | Path) -> Path | None:
    """The tokenizer file ``path`` names: ``path`` itself when it is not a folder, else the first of
    :data:`TOKENIZER_FILES` the folder holds, else its one ``PREFIX-vocab.json`` with a
    ``PREFIX-merges.txt`` beside it (Megatron-LM's ``gpt2-vocab.json`` + ``gpt2-merges.txt``; None
    when the folder holds none of these, or several such pairs). The one rule by which every verb
    finds a tokenizer in a folder."""
    p = Path(path)
    if not p.is_dir():
        return p
    found = next((p / name for name in TOKENIZER_FILES if (p / name).is_file()), None)
    if found is not None:
        return found
    pairs = sorted(f for f in p.iterdir() if f.name.endswith(PREFIXED_VOCAB) and f.is_file()
                   and (p / (f.name[: -len(PREFIXED_VOCAB)] + PREFIXED_MERGES)).is_file())
    return pairs[0] if len(pairs) == 1 else None


def refuse_special_files(folder: Path, given: str) -> None:
    """Refuse a tokenizer folder holding a FIFO, device or socket (a FIFO would block the open of a
    tokenizer file, a device never ends), before any of its files is opened.

    Raises:
        UsageError: naming ``[tokens] tokenizer = given`` and the file.
    """
    special = next((f.name for f in folder.iterdir() if f.exists() and not f.is_dir() and not f.is_file()), None)
    if special is not None:
        raise UsageError(f"[tokens] tokenizer = {given!r}: {special} in {folder} is not a regular file (a FIFO, device "
                         "or socket); datacheck loads no tokenizer from such a folder")
