"""Chat-template rendering of conversations (the ``messages`` role) through the tokenizer of
``[tokens] tokenizer``, as a trainer renders them: the tokenized SFT columns derived from chat data.

:func:`render_chat` is the one per-row Python step: each conversation goes through
transformers' ``apply_chat_template(..., tokenize=True, return_dict=True,
return_assistant_tokens_mask=True)`` exactly as a trainer calls it (batched, 512 conversations a
call), truncated at ``[tokens] max_seq_len`` on ``truncation_side`` when it is set. The result is
the columns a tokenized SFT shard has (``input_ids``, ``assistant_mask``, and ``labels``: the token
id on assistant tokens, ``ignore_index`` elsewhere, as assistant-only loss builds them), which the
read path (:mod:`datacheck.derive.read`) adds to the shard so that the tokenized ``sft.*`` rules
judge them unchanged. The tokenizer loader (:func:`load_chat_tokenizer`), the template-error column
and the error text are shared with the preference pair rendering (:mod:`datacheck.derive.pairs`).
transformers and jinja2 are the optional ``chat`` extra, imported lazily.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.derive.tokfiles import TOKENIZER_FILES, loaded_files, refuse_special_files, tokenizer_file
from datacheck.model.errors import UsageError

__all__ = ["bounded_templates", "RenderLimit", "RENDER_SECONDS", "RENDER_MAX_CHARS", "CHAT_INSTALL", "RENDERED_COLUMNS",
           "TEMPLATE_ERROR", "UNTRUNCATED_ASSISTANT", "Rendered", "render_chat", "ChatTemplate", "template_of",
           "GENERATION_TAG",
           "load_chat_tokenizer", "refuse_special_files", "template_error_column", "error_text", "TOKENIZER_FILES", "tokenizer_file"]

#: the files a folder's chat template is read from by transformers (``tokenizer_config.json``'s
#: ``chat_template``, or the template files beside it)
_TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")


#: the install command of the optional ``chat`` extra (transformers renders chat templates)
CHAT_INSTALL = ('pip install "transformers>=4.45" "jinja2>=3.1" (or, in the datacheck source folder, '
                'pip install -e ".[chat]")')
#: the columns rendering adds (the roles of the same names)
RENDERED_COLUMNS = ("input_ids", "assistant_mask", "labels")
#: the column rendering adds beside them: per row, the first line of the error the chat template
#: (or the renderer) raised on the conversation (String; null where it rendered or the
#: conversation is null); ``sft.role_order`` fails those rows. Prefixed with ``_`` until the name
#: is free when the shard already has a column of that name (:func:`template_error_column`).
TEMPLATE_ERROR = "chat_template_error"
#: the column rendering adds beside them: per row, the assistant tokens (``{% generation %}``) of the
#: whole rendering, before truncation at ``max_seq_len`` (UInt32; null where the row has no tokens).
#: A row whose kept mask is all zero while this is above 0 lost its answer to truncation, not to the
#: template (``sft.assistant_mask_empty``, ``empty.no_supervised_tokens``). ``_``-prefixed like
#: :data:`TEMPLATE_ERROR` when the shard has a column of that name.
UNTRUNCATED_ASSISTANT = "chat_assistant_tokens_untruncated"
#: conversations per apply_chat_template call
_BATCH = 512
#: seconds one conversation's rendering may take (a template looping ``range(100000)`` twice runs
#: for hours); past it the row is rejected with :class:`RenderLimit`'s text
RENDER_SECONDS = 5.0
#: characters one conversation's rendering (or one string the template builds with ``*`` or ``+``)
#: may reach: 16 Mi characters, far above any training context; ``'a' * 3000000000`` is refused
#: before it is built
RENDER_MAX_CHARS = 16 << 20


#: rendered blocks held before they are joined into one string: a template loop yields one small
#: string per step, millions of list entries (8 bytes each, and more) before a bound stops it
_COALESCE = 1 << 16


class RenderLimit(Exception):
    """A conversation's rendering passed :data:`RENDER_SECONDS` or :data:`RENDER_MAX_CHARS`."""


_guard = threading.local()  # .deadline: the monotonic time the current conversation must end by


def _check_deadline() -> None:
    deadline = getattr(_guard, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        _guard.deadline = None
        raise RenderLimit(f"the chat template ran past {RENDER_SECONDS:g} s on one conversation")


def _sized(v: Any) -> int:
    return len(v) if isinstance(v, (str, bytes, list, tuple)) else 0


#: a printf conversion (``%-3000000000s``, ``%.9999999f``) and a str.format field (``{:>3000000000}``):
#: the digits in them are widths and precisions, each as many characters as it says
_PRINTF_SPEC = re.compile(r"%[^a-zA-Z%]*")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_DIGITS = re.compile(r"\d+")


def _spec_chars(fmt: str, spec: re.Pattern[str]) -> int:
    """The characters the widths and precisions of ``fmt``'s conversions ask for, summed (a run of
    digits longer than any bound counts as over :data:`RENDER_MAX_CHARS`)."""
    total = 0
    for m in spec.finditer(fmt):
        for d in _DIGITS.findall(m.group(0)):
            total += int(d) if len(d) <= 12 else RENDER_MAX_CHARS + 1
    return total


def _items_chars(v: Any) -> int:
    """The characters of the values of a list, tuple or dict (their text where they are strings)."""
    vals = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ()
    return sum(_sized(x) for x in vals)


def _join_chars(sep: str, items: Any) -> int:
    """An upper bound of ``sep.join(items)``'s length (a dict item counted by its values' text, as
    ``join(attribute=...)`` reads one of them); 0 for an iterable that is no list or tuple."""
    if not isinstance(items, (list, tuple)):
        return 0
    return sum(_items_chars(x) if isinstance(x, dict) else _sized(x) for x in items) + len(sep) * max(0, len(items) - 1)


def _str_method_chars(text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """An upper bound of the length of ``text.<name>(*args, **kwargs)`` for the ``str`` methods whose
    result can be far longer than their arguments (0 for the others: what they build is bounded by
    their inputs' sizes, and the rendered text by :data:`RENDER_MAX_CHARS`)."""
    a = list(args)
    if name in ("ljust", "rjust", "center", "zfill") and a and isinstance(a[0], int):
        return max(len(text), a[0])
    if name == "expandtabs":
        size = a[0] if a else kwargs.get("tabsize", 8)
        return len(text) + text.count("\t") * size if isinstance(size, int) else 0
    if name == "replace" and len(a) >= 2 and isinstance(a[0], str) and isinstance(a[1], str):
        return len(text) + (text.count(a[0]) if a[0] else len(text) + 1) * len(a[1])
    if name == "join" and a:
        return _join_chars(text, a[0])
    if name in ("format", "format_map"):
        return len(text) + _spec_chars(text, _FORMAT_FIELD) + _items_chars(a) + _items_chars(kwargs) \
            + sum(_items_chars(x) for x in a if isinstance(x, dict))
    return 0


def _filter_chars(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """An upper bound of the length of a jinja2 filter's result for the built-in filters whose result
    can be far longer than their input (``args`` without the context a filter may be passed; 0 for
    the other filters)."""
    if not args or not isinstance(args[0], str) and name not in ("join", "center", "format"):
        return 0
    v, a = args[0], list(args[1:])
    if name == "center":
        width = a[0] if a else kwargs.get("width", 80)
        return max(len(str(v)), width) if isinstance(width, int) else 0
    if name == "indent":
        width = a[0] if a else kwargs.get("width", 4)
        per = width if isinstance(width, int) else _sized(width)
        return len(v) + (v.count("\n") + 1) * per
    if name == "replace":
        return _str_method_chars(v, "replace", tuple(a), kwargs)
    if name == "join":
        return _join_chars(str(a[0]) if a else str(kwargs.get("d", "")), v)
    if name == "format":
        return (len(v) + _spec_chars(v, _PRINTF_SPEC) + _items_chars(a) + _items_chars(kwargs)) if isinstance(v, str) else 0
    if name == "wordwrap":
        wrap = a[2] if len(a) > 2 else kwargs.get("wrapstring")
        return len(v) * (1 + (len(wrap) if isinstance(wrap, str) else 1))
    return 0


#: the built-in filters whose result can be far longer than their input (:func:`_filter_chars`)
_GROWING_FILTERS = ("center", "indent", "replace", "join", "format", "wordwrap")


@functools.lru_cache(maxsize=1)
def _bounded_env_class(base: type) -> type:
    """``base`` (transformers' ``ImmutableSandboxedEnvironment``) with bounds: ``*``, ``**``, ``+``
    and ``%`` are intercepted (a string or list product or sum past :data:`RENDER_MAX_CHARS`, a power
    of a huge exponent, a printf width or precision past it, refused before it is computed), as are
    ``~`` (through the code generator), the ``str`` methods that pad, replace, join or format
    (``'a'.ljust(3000000000)``, ``'{:>3000000000}'.format(x)``) and the filters of
    :data:`_GROWING_FILTERS` (``center``, ``indent``, ``join``, ...): each result's size is bounded
    before it is built, so a template cannot allocate gigabytes on one conversation (a MemoryError,
    or the kernel's OOM killer, before :data:`RENDER_MAX_CHARS` checked the output). Every call,
    filter and ``~``, and every 1,024 steps of ``range``, check the conversation's deadline. The
    sandbox's own rules stay."""
    from jinja2.exceptions import SecurityError

    def timed_range(inner: Any, *args: Any) -> Any:
        r = inner(*args)  # the sandbox's own range first: its size bound holds as it is
        for i, v in enumerate(r):
            if not i & 1023:
                _check_deadline()
            yield v

    def over(chars: int, what: str) -> None:
        if chars > RENDER_MAX_CHARS:
            raise SecurityError(f"the template builds {what} of {chars} characters (datacheck renders at most "
                                f"{RENDER_MAX_CHARS})")

    def bounded_filter(name: str, f: Any) -> Any:
        skip = 1 if getattr(f, "jinja_pass_arg", None) is not None else 0  # the context a filter is passed

        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            _check_deadline()
            over(_filter_chars(name, args[skip:], kwargs), f"a '{name}' filter's value")
            return f(*args, **kwargs)
        return run

    def bounded_concat(values: tuple[Any, ...], join: Any) -> Any:
        """``~``: the values' text joined, refused before it is built past :data:`RENDER_MAX_CHARS`."""
        _check_deadline()
        over(sum(_sized(v) for v in values), "a string with '~'")
        return join(values)

    class BoundedCodeGenerator(base.code_generator_class):  # type: ignore[misc, name-defined]
        """jinja2's code generator with ``~`` (``str_join`` / ``markup_join`` over the operands)
        called through the environment's ``bounded_concat`` (defined above), which jinja2 leaves unintercepted."""

        def visit_Concat(self, node: Any, frame: Any) -> None:  # noqa: N802 - jinja2's visitor name
            if frame.eval_ctx.volatile:
                join = "(markup_join if context.eval_ctx.volatile else str_join)"
            else:
                join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
            self.write("environment.bounded_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write(f"), {join})")

    class BoundedEnv(base):  # type: ignore[misc, valid-type]
        intercepted_binops = frozenset(["*", "**", "+", "%"])
        code_generator_class = BoundedCodeGenerator

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # the instance's range (the sandbox's safe_range: ``globals`` is set per instance, the
            # class has none), wrapped to check the deadline
            self.globals["range"] = functools.partial(timed_range, self.globals.get("range", range))
            self.filters.update({n: bounded_filter(n, self.filters[n]) for n in _GROWING_FILTERS if n in self.filters})
            self.bounded_concat = bounded_concat

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_deadline()
            if operator == "*":
                seq, n = (left, right) if _sized(left) or isinstance(left, (str, list, tuple)) else (right, left)
                if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > RENDER_MAX_CHARS:
                    raise SecurityError(f"the template builds a value of {len(seq) * n} items (datacheck renders at "
                                        f"most {RENDER_MAX_CHARS})")
            elif operator == "**":
                if isinstance(right, (int, float)) and isinstance(left, (int, float)) and abs(right) > 1024 \
                        and abs(left) > 1:
                    raise SecurityError("the template raises a number to a power over 1024")
            elif operator == "+" and _sized(left) + _sized(right) > RENDER_MAX_CHARS:
                raise SecurityError(f"the template builds a value over {RENDER_MAX_CHARS} items")
            elif operator == "%" and isinstance(left, str):
                over(len(left) + _spec_chars(left, _PRINTF_SPEC) + _sized(right) + _items_chars(right), "a '%' string")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            _check_deadline()
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox hands str.format out wrapped
            text = getattr(method, "__self__", None)
            if isinstance(text, str):  # a str method: its result's size bounded before it is built
                over(_str_method_chars(text, getattr(method, "__name__", ""), args, kwargs), "a string")
            return super().call(__context, __obj, *args, **kwargs)

    return BoundedEnv


@functools.lru_cache(maxsize=16)
def _bounded_compile(ctu: Any, template: str) -> Any:
    """transformers' own template compilation with :func:`_bounded_env_class` as its environment."""
    base = ctu.ImmutableSandboxedEnvironment
    ctu.ImmutableSandboxedEnvironment = _bounded_env_class(base)
    try:
        compiled = ctu._cached_compile_jinja_template(template)
    finally:
        ctu.ImmutableSandboxedEnvironment = base
    compiled.render = functools.partial(_bounded_text, compiled)  # the tokenize=False path (preference pairs)
    return compiled


def _bounded_text(compiled: Any, *args: Any, **kwargs: Any) -> str:
    """``Template.render`` of one conversation under its bounds (deadline, :data:`RENDER_MAX_CHARS`)."""
    _guard.deadline = time.monotonic() + RENDER_SECONDS
    out: list[str] = []
    size = 0
    try:
        for block in compiled.generate(*args, **kwargs):
            size += len(block)
            if size > RENDER_MAX_CHARS:
                raise RenderLimit(f"the chat template rendered over {RENDER_MAX_CHARS} characters of one conversation")
            out.append(block)
            if len(out) >= _COALESCE:
                out[:] = ["".join(out)]
            _check_deadline()
    finally:
        _guard.deadline = None
    return "".join(out)


def _bounded_render(compiled_template: Any, messages: Any, tools: Any, documents: Any, add_generation_prompt: Any,
                    **template_kwargs: Any) -> tuple[str, list[Any]]:
    """transformers' ``_render_with_assistant_indices`` with one conversation's bounds: the deadline
    starts here, and the blocks rendered may not pass :data:`RENDER_MAX_CHARS` characters."""
    _guard.deadline = time.monotonic() + RENDER_SECONDS
    rendered_blocks: list[str] = []
    generation_indices: list[Any] = []
    size = 0
    try:
        with compiled_template.environment.activate_tracker(rendered_blocks, generation_indices):
            for block in compiled_template.generate(messages=messages, tools=tools, documents=documents,
                                                    add_generation_prompt=add_generation_prompt, **template_kwargs):
                size += len(block)
                if size > RENDER_MAX_CHARS:
                    raise RenderLimit(f"the chat template rendered over {RENDER_MAX_CHARS} characters of one conversation")
                rendered_blocks.append(block)
                if len(rendered_blocks) >= _COALESCE:  # one string, not millions of small ones (a loop's
                    rendered_blocks[:] = ["".join(rendered_blocks)]  # output); the tracker reads the same list
                _check_deadline()
            rendered_chat = "".join(rendered_blocks)
    finally:
        _guard.deadline = None
    return rendered_chat, generation_indices


@contextlib.contextmanager
def bounded_templates() -> Any:
    """While rendering: transformers compiles chat templates with the bounded environment and renders
    each conversation under its bounds; in the main thread a 0.5 s timer also stops a template loop
    that calls nothing (the timer raises :class:`RenderLimit` once the deadline has passed). Where
    transformers lacks the functions patched here, only the timer holds."""
    transformers = _import_transformers()
    ctu = getattr(getattr(transformers, "utils", None), "chat_template_utils", None)
    patch = ctu is not None and all(hasattr(ctu, n) for n in (
        "_compile_jinja_template", "_cached_compile_jinja_template", "_render_with_assistant_indices",
        "ImmutableSandboxedEnvironment"))
    saved = (ctu._compile_jinja_template, ctu._render_with_assistant_indices) if patch else None
    if patch:
        ctu._compile_jinja_template = functools.partial(_bounded_compile, ctu)
        ctu._render_with_assistant_indices = _bounded_render
    timer = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    old = None
    if timer:
        def on_alarm(_sig: int, _frame: Any) -> None:
            _check_deadline()

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)
    try:
        yield
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, old)
        if saved is not None:
            ctu._compile_jinja_template, ctu._render_with_assistant_indices = saved


def _import_transformers() -> Any:
    try:
        import transformers  # lazy: the optional ``chat`` extra
    except ImportError:
        return None
    return transformers


def _state(f: Path, folder: Path) -> tuple[str, int, int, int, int]:
    """(path relative to ``folder``, size, modification and status-change times in ns, inode) of
    ``f``: any write to it changes its status-change time."""
    st = f.stat()
    return f.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


@functools.lru_cache(maxsize=4)
def _load(folder: str, _stamp: tuple, given: str) -> Any:
    """The tokenizer in ``folder`` (``given``: the path as ``[tokens] tokenizer`` names it, for the
    message; ``_stamp``: the state of every file the load reads, :func:`_state`, so that an edited
    file is loaded again). Raises UsageError naming ``given`` and the folder transformers read."""
    transformers = _import_transformers()
    try:
        # never the data's code (auto_map), never a prompt asking whether to run it, never the network
        return transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the config's tokenizer path
        first = (str(exc).splitlines() or [type(exc).__name__])[0].strip()
        where = "there" if Path(given) == Path(folder) else f"from its folder {folder!r}"
        raise UsageError(f"[tokens] tokenizer = {given!r}: transformers cannot load a tokenizer {where} "
                         f"(transformers: {first}); give a folder holding tokenizer.json and "
                         "tokenizer_config.json") from None


def load_chat_tokenizer(path: str) -> tuple[Any, str | None]:
    """The tokenizer of ``[tokens] tokenizer`` (a folder, or a file inside it) for rendering, or
    (None, why) when it cannot render: transformers is not installed (the install command), or the
    tokenizer has no chat template, also a folder holding a tokenizer by :func:`tokenizer_file`'s
    rule (as ``inspect --tokenizer`` reads it: e.g. a GPT-2 ``vocab.json`` + ``merges.txt``) and no
    file a chat template lives in (``tokenizer_config.json``, ``chat_template.jinja``), which is not
    given to transformers. Loaded once per folder and modification time.

    The load passes ``trust_remote_code=False`` (a ``tokenizer_config.json`` whose ``auto_map`` names
    a Python file is refused, never imported, and transformers never asks whether to run it) and
    ``local_files_only=True`` (nothing is downloaded).

    Raises:
        UsageError: no such path, or transformers cannot load a tokenizer from it (exit 2).
    """
    p = Path(path)
    if not p.exists():
        raise UsageError(f"[tokens] tokenizer = {path!r}: no such file or folder; give the tokenizer's folder "
                         "(tokenizer.json, tokenizer_config.json and its chat template)")
    folder = p if p.is_dir() else p.parent
    refuse_special_files(folder, path)
    found = tokenizer_file(folder)
    if found is not None and found.name == "vocab.json" and not (folder / "merges.txt").is_file():
        found = None  # half a GPT-2 vocabulary: transformers says why it cannot load it
    if found is not None and not any((folder / n).is_file() for n in _TEMPLATE_FILES):
        # a tokenizer inspect --tokenizer reads (tokenizer.json, vocab.json + merges.txt, vocab.txt), no template beside it
        return None, (f"the tokenizer in {folder} ({found.name}) has no chat template (no tokenizer_config.json or "
                      "chat_template.jinja beside it): messages cannot be rendered as the trainer does")
    if _import_transformers() is None:
        return None, f"rendering messages with [tokens] tokenizer needs transformers and jinja2: {CHAT_INSTALL}"
    stamp = tuple(_state(f, folder) for f in loaded_files(folder))  # a file rewritten, added or removed: loaded anew
    tok = _load(str(folder), stamp, path)
    if not getattr(tok, "chat_template", None):
        return None, (f"the tokenizer in {folder} has no chat template (set chat_template in tokenizer_config.json "
                      "or add chat_template.jinja): messages cannot be rendered as the trainer does")
    _check_compiles(tok.chat_template, folder, path)
    return tok, None


@functools.lru_cache(maxsize=16)
def _compile_problem(template: str) -> str | None:
    """Why transformers' own compiler (its sandboxed jinja2 environment, with the ``generation`` tag,
    bounded as :func:`_bounded_env_class` bounds rendering) refuses ``template``: the jinja2 message and line; None when it compiles (or transformers has no
    such compiler to ask)."""
    transformers = _import_transformers()
    ctu = getattr(getattr(transformers, "utils", None), "chat_template_utils", None)
    if ctu is None or not all(hasattr(ctu, n) for n in ("_cached_compile_jinja_template",
                                                         "ImmutableSandboxedEnvironment")):
        return None
    import jinja2

    try:
        # the bounded environment, as rendering compiles it: jinja2 folds constant expressions when it
        # compiles, and in a plain sandbox ``{{ 'a' * 3000000000 }}`` was built here (3 GB) before any
        # conversation was rendered; the bounded one intercepts ``*``, ``**`` and ``+`` (never folded)
        _bounded_compile(ctu, template)
    except jinja2.TemplateSyntaxError as exc:
        return f"{exc.message} (line {exc.lineno})"
    except Exception:  # noqa: BLE001 - anything else is found when a conversation is rendered
        return None
    return None


def _json_type(v: Any) -> str:
    """The JSON name of a value's type (``5`` -> ``number``, ``[1]`` -> ``array``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return "array" if isinstance(v, (list, tuple)) else "object" if isinstance(v, dict) else type(v).__name__


def _check_compiles(template: Any, folder: Path, given: str) -> None:
    """Refuse a chat template that does not compile: it rejects every conversation alike, which is a
    fault of the tokenizer's template, never of a row (rendering would blame each row's turn order).

    Raises:
        UsageError: a template (the default one, or any named one) with a jinja2 syntax error,
            naming the file it comes from and the error's line; or one that is no text at all
            (``"chat_template": 5`` in tokenizer_config.json: transformers loads it, and every
            conversation raised a TypeError blamed on its row).
    """
    templates = template.items() if isinstance(template, dict) else [("", template)]
    for name, text in templates:
        jinja = folder / "chat_template.jinja"
        source = jinja if jinja.is_file() else folder / "tokenizer_config.json"
        label = f"chat template {name!r}" if name else "chat template"
        if not isinstance(text, str):
            raise UsageError(f"[tokens] tokenizer = {given!r}: the {label} in {source} is a JSON "
                             f"{_json_type(text)}, not the template's text; no conversation can be rendered with "
                             "it: set chat_template to the template (a string)")
        why = _compile_problem(text)
        if why is not None:
            raise UsageError(f"[tokens] tokenizer = {given!r}: the {label} in {source} does not compile "
                             f"(jinja2: {why}); no conversation can be rendered with it: fix the template")


#: a ``{% generation %}`` tag of a chat template (whitespace control ``{%-``/``-%}`` allowed): the
#: markers transformers' ``return_assistant_tokens_mask`` reads
GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


@dataclass(frozen=True)
class ChatTemplate:
    """The chat template the read path rendered with.

    Attributes:
        source: where it came from: the folder's ``chat_template.jinja`` when it has one, else its
            ``tokenizer_config.json`` (``chat_template``).
        generation: whether it has ``{% generation %}`` markers (:data:`GENERATION_TAG`); without
            them transformers marks no assistant token, so every rendered ``assistant_mask`` is all
            zeros and the rendered labels supervise nothing.
    """

    source: str
    generation: bool


def template_of(tok: Any, path: str) -> ChatTemplate:
    """The :class:`ChatTemplate` of ``tok``, loaded from ``path`` (``[tokens] tokenizer``: a folder
    or a file inside it)."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    jinja = folder / "chat_template.jinja"
    source = str(jinja if jinja.is_file() else folder / "tokenizer_config.json")
    text = tok.chat_template if isinstance(tok.chat_template, str) else str(tok.chat_template)
    return ChatTemplate(source=source, generation=bool(GENERATION_TAG.search(text)))


def template_error_column(names: Any, name: str = TEMPLATE_ERROR) -> str:
    """The name of a column rendering adds (``name``: :data:`TEMPLATE_ERROR` or
    :data:`UNTRUNCATED_ASSISTANT`) among the columns ``names`` (an iterable of column names) of a
    shard: ``name``, prefixed with ``_`` until it is not one of them."""
    taken = set(names)
    while name in taken:
        name = "_" + name
    return name


@dataclass
class Rendered:
    """The result of :func:`render_chat`.

    Attributes:
        columns: ``input_ids`` (List(Int32), token ids), ``assistant_mask`` (List(Int8), 1 on tokens
            the template marks with ``{% generation %}``), ``labels`` (List(Int32): the id where the
            mask is 1, else ``ignore_index``), all three truncated at ``max_seq_len``;
            :data:`UNTRUNCATED_ASSISTANT` (UInt32: the mask's 1s before truncation) and
            :data:`TEMPLATE_ERROR`; one row per input row, null where the conversation is null or the
            template rejected it.
        rejected: rows (0-based) the template raised on, with the first error text.
        tokens: tokens rendered in all.
    """

    columns: pl.DataFrame
    rejected: list[int]
    first_error: str | None
    tokens: int


def _call(tok: Any, convs: list[Any]) -> dict[str, Any]:
    """The whole rendering (no truncation: :func:`render_chat` truncates, as TRL's SFTTrainer
    truncates the rendered ids after rendering)."""
    return tok.apply_chat_template(convs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)


def _cut(seq: list[int], max_len: int | None, side: str) -> list[int]:
    """``seq`` truncated to ``max_len`` on ``side`` (right keeps the start, left the end)."""
    if max_len is None or len(seq) <= max_len:
        return seq
    return seq[:max_len] if side == "right" else seq[len(seq) - max_len:]


def error_text(exc: Exception) -> str:
    """The first line of a rendering error, its type named (``TemplateError: Conversation roles must
    alternate ...``, ``TypeError: can only concatenate str ...``)."""
    first = (str(exc).splitlines() or [""])[0].strip()
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


#: conversations in a row that may each run past :data:`RENDER_SECONDS` or :data:`RENDER_MAX_CHARS`,
#: none rendered before them, before the template itself is refused (at 5 s a conversation, a slow
#: template would take days)
SLOW_TEMPLATE_STRIKES = 3


def _render_rows(tok: Any, conversations: list[Any], ids: list[Any], masks: list[Any], errors: list[str | None],
                 rejected: list[int]) -> None:
    """Fill ``ids``/``masks`` of the rendered rows, ``errors``/``rejected`` of the rows the template
    raised on (batches of :data:`_BATCH`; a batch that raises is rendered row by row).

    Raises:
        UsageError: the first :data:`SLOW_TEMPLATE_STRIKES` conversations rendered one by one each ran
            past :data:`RENDER_SECONDS` or :data:`RENDER_MAX_CHARS` and none rendered: the template,
            not the rows, is at fault.
    """
    n = len(conversations)
    strikes, rendered = 0, False
    for start in range(0, n, _BATCH):
        rows = [i for i in range(start, min(start + _BATCH, n)) if conversations[i] is not None]
        if not rows:
            continue
        try:
            out = _call(tok, [conversations[i] for i in rows])
            for k, i in enumerate(rows):
                ids[i], masks[i] = out["input_ids"][k], out["assistant_masks"][k]
            rendered = True
        except Exception:  # noqa: BLE001 - find the rows the template rejects, one by one
            for i in rows:
                try:
                    out = _call(tok, [conversations[i]])
                    ids[i], masks[i] = out["input_ids"][0], out["assistant_masks"][0]
                    rendered = True
                except Exception as exc:  # noqa: BLE001 - a template's raise_exception, a bound, a bad value
                    rejected.append(i)
                    errors[i] = error_text(exc)
                    # either bound: a loop of one character a step reaches RENDER_MAX_CHARS before
                    # RENDER_SECONDS on a fast machine, after it on a slow one; the same template either way
                    strikes += isinstance(exc, RenderLimit)
                    if strikes >= SLOW_TEMPLATE_STRIKES and not rendered:
                        raise UsageError(
                            f"[tokens] tokenizer: the chat template ran past its bounds ({RENDER_SECONDS:g} s or "
                            f"{RENDER_MAX_CHARS} characters a conversation) on each of the first {strikes} "
                            f"conversations it was given and rendered none (last: {error_text(exc)}): it cannot "
                            "render the data (a loop that runs too long?); fix the template") from None


def render_chat(conversations: list[Any], tok: Any, max_seq_len: int | None, truncation_side: str,
                ignore_index: int) -> Rendered:
    """Render ``conversations`` (lists of ``{role, content}`` dicts as :func:`~datacheck.derive.messages.template_turns` gives
    them, or None) with ``tok``'s chat template, as the trainer does (see the module docstring): the
    whole conversation rendered, then its ids and mask truncated at ``max_seq_len`` on
    ``truncation_side`` (the assistant tokens before truncation kept in :data:`UNTRUNCATED_ASSISTANT`).
    A batch the template raises on is rendered row by row, so a good row of that batch is rendered
    (never blamed); the rows it still raises on (the template's ``raise_exception``, a content type
    the template cannot concatenate, a bound of :func:`bounded_templates` passed: over
    :data:`RENDER_SECONDS` or :data:`RENDER_MAX_CHARS` on one conversation) have null token columns
    and their error in :data:`TEMPLATE_ERROR` (``sft.role_order`` reports those rows).
    """
    tok.truncation_side = truncation_side
    n = len(conversations)
    ids: list[Any] = [None] * n
    masks: list[Any] = [None] * n
    whole: list[int | None] = [None] * n
    errors: list[str | None] = [None] * n
    rejected: list[int] = []
    tlog = logging.getLogger("transformers")
    level = tlog.level
    tlog.setLevel(logging.ERROR)  # the "no {% generation %}" warning is what sft.assistant_mask_empty reports
    try:
        with bounded_templates():
            _render_rows(tok, conversations, ids, masks, errors, rejected)
    finally:
        tlog.setLevel(level)
    first_error = next((errors[i] for i in rejected), None)
    for i in range(n):
        if ids[i] is not None:
            whole[i] = int(sum(masks[i]))
            ids[i] = _cut(ids[i], max_seq_len, truncation_side)
            masks[i] = _cut(masks[i], max_seq_len, truncation_side)
    valid = np.array([x is not None for x in ids], dtype=bool)
    lens = np.array([len(x) if x is not None else 0 for x in ids], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    flat_ids = np.fromiter((t for x in ids if x is not None for t in x), dtype=np.int32, count=int(lens.sum()))
    flat_mask = np.fromiter((t for x in masks if x is not None for t in x), dtype=np.int8, count=int(lens.sum()))
    flat_labels = np.where(flat_mask == 1, flat_ids, np.int32(ignore_index)).astype(np.int32)
    nulls = pa.array(~valid)

    def lists(values: np.ndarray) -> pl.Series:
        return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=nulls))  # type: ignore[return-value]

    cols = pl.DataFrame([lists(flat_ids).alias("input_ids"), lists(flat_mask).alias("assistant_mask"),
                         lists(flat_labels).alias("labels"), pl.Series(UNTRUNCATED_ASSISTANT, whole, dtype=pl.UInt32),
                         pl.Series(TEMPLATE_ERROR, errors, dtype=pl.String)])
    return Rendered(columns=cols, rejected=rejected, first_error=first_error, tokens=int(lens.sum()))
