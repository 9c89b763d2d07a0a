"""A chat template that builds a huge string through a str method, a filter, ``%`` or ``~`` is refused
before the string is built (it was built: ``'a'.ljust(3000000000)`` allocated 3 GB, a MemoryError under
a memory limit and the OOM killer without one, before RENDER_MAX_CHARS checked the output), and the
same operations on values of ordinary sizes render as jinja2's own sandbox renders them."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli
from hostilegen import write_tokenizer

from datacheck.derive import chat

jinja_sandbox = pytest.importorskip("jinja2.sandbox")
pytest.importorskip("transformers")  # the `chat` extra (in dev)

#: a size no allocator grants: before the bound it raised MemoryError at once, never an allocation
HUGE = 2**62


def _env():
    return chat._bounded_env_class(jinja_sandbox.ImmutableSandboxedEnvironment)()


@pytest.mark.parametrize("template", [
    "{{ 'a'.ljust(%d) }}" % HUGE,
    "{{ 'a'.zfill(%d) }}" % HUGE,
    "{{ 'a'|center(%d) }}" % HUGE,
    "{{ ('a\\n' * 1000)|indent(%d) }}" % HUGE,
    "{{ '{:>%d}'.format('a') }}" % HUGE,
    "{{ '%%.%df' %% 1.5 }}" % HUGE,
    "{{ 'a%%s'|format(1) ~ ('%%%ds'|format('a')) }}" % HUGE,
    "{% set s = 'a' * 1000000 %}{{ s.replace('a', s) }}",
    "{% set l = ['a' * 1000000] * 100000 %}{{ l|join('') }}",
    "{% set l = ['a' * 1000000] * 100000 %}{{ ''.join(l) }}",
    "{% set l = [{'content': 'a' * 1000000}] * 100000 %}{{ l|join('', attribute='content') }}",
    "{{ ('\\t' * 1000000).expandtabs(100000) }}",
    "{% set s = 'a' * 1000000 %}{{ s|replace('a', s) }}",
    "{{ ('a b ' * 1000)|wordwrap(1, true, 'x' * 1000000) }}",
])
def test_a_growing_operation_is_refused_before_it_is_built(template):
    with pytest.raises(Exception) as err:
        _env().from_string(template).render()
    assert type(err.value).__name__ == "SecurityError", repr(err.value)[:200]
    assert f"(datacheck renders at most {chat.RENDER_MAX_CHARS})" in str(err.value)


def test_concatenation_is_bounded(monkeypatch):
    """``~`` doubling a string 20 times: 2**21 characters, over a bound of 2**16."""
    monkeypatch.setattr(chat, "RENDER_MAX_CHARS", 1 << 16)
    tpl = "{% set ns = namespace(s='ab') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
    with pytest.raises(Exception, match=f"with '~' of {1 << 17} characters"):  # the first doubling past 2**16
        _env().from_string(tpl).render()
    monkeypatch.setattr(chat, "RENDER_MAX_CHARS", 1 << 22)
    assert _env().from_string(tpl).render() == "ab" * 2**20


@pytest.mark.parametrize("template", [
    "{{ 'a'.ljust(5) }}|{{ 'x'|center(7) }}|{{ 'a\\nb'|indent(2, true) }}|{{ '{:>4}-{}'.format(1, 'b') }}",
    "{{ '%5.2f' % 1.5 }}|{{ '%s=%d'|format('k', 3) }}|{{ ['a', 'b']|join(', ') }}|{{ '-'.join(['x', 'y']) }}",
    "{% for m in messages %}{{ '<|' ~ m.role ~ '|>' ~ m.content|replace('a', 'A') ~ 1 ~ none }}{% endfor %}",
    "{{ 'a\\tb'.expandtabs(4) }}|{{ 'aaa bbb'|wordwrap(3) }}|{{ 'x' ~ messages|length }}",
    "{% autoescape true %}{{ '<b>' ~ messages[0].content }}{% endautoescape %}",
])
def test_ordinary_operations_render_as_the_sandbox_renders_them(template):
    messages = [{"role": "user", "content": "a<b> a"}, {"role": "assistant", "content": "banana"}]
    plain = jinja_sandbox.ImmutableSandboxedEnvironment().from_string(template).render(messages=messages)
    assert _env().from_string(template).render(messages=messages) == plain


def test_audit_rejects_the_conversation_with_the_reason(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
    (d / "a.jsonl").write_text(json.dumps({"messages": conv}) + "\n" + json.dumps({"messages": conv[:1]}) + "\n")
    # a template padding one of the two conversations past any bound, the other rendered
    write_tokenizer(tmp_path / "tok", "{% for m in messages %}{{ m.content }}{% endfor %}"
                                      "{% if messages|length == 1 %}{{ 'a'.ljust(" + str(HUGE) + ") }}{% endif %}")
    (tmp_path / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{tmp_path / "tok"}"\n')
    r = run_cli("audit", str(d), "--config", str(tmp_path / "datacheck.toml"), "--report-dir", str(tmp_path / "r"),
                "--no-cache", "--no-progress")
    assert r.returncode == 1, r.stderr[-400:]
    assert (f"row 1 (line 2): 'the chat template rejects it: SecurityError: the template builds a string of {HUGE} "
            "characters") in r.stdout
    assert "MemoryError" not in r.stdout
