"""Data layouts: what kind of training rows a shard holds, and which layouts a check applies to.

A layout names the shape of a training example (the field's names: Hugging Face ``run_clm``,
TRL's trainers, ``DataCollatorWithFlattening``, token-classification and seq2seq examples):

- ``packed_lm``: pre-training rows packed to one length (``group_texts``: no padding, the row end
  cuts a document) or several documents per row (``position_ids`` that reset, ``document_ids``,
  ``seq_lens``, ``cu_seqlens``); labels, when present, are the ids themselves (the loss covers
  every token);
- ``packed_sft``: packed rows whose labels also hide prompts (``DataCollatorWithFlattening`` over
  SFT examples, TRL ``padding_free``);
- ``causal_lm``: one document per row, padded (or of varying length), labels the ids;
- ``masked_lm``: pre-masked masked-LM rows (BERT-style, ``DataCollatorForLanguageModeling(mlm=True)``
  output saved as data): ``input_ids`` with the mask token at most supervised positions (the
  collator's 80% ``[MASK]``, 10% a random id, 10% the id unchanged), ``labels`` the original ids at
  those positions and ``ignore_index`` everywhere else; the loss is a mean over the supervised
  positions of the whole batch, so a row with no masked position (common at 15% masking of short
  rows) is harmless, and only a shard with no supervised position at all is a defect;
- ``sft_tokenized``: tokenized instruction/chat rows whose labels (or an ``assistant_mask``) hide the
  prompt;
- ``chat_sft``: conversations (``messages`` / ShareGPT ``conversations``), before or after rendering;
- ``dpo``: preference pairs (``chosen``, ``rejected``; ``prompt`` optional);
- ``kto``: unpaired preference rows (``prompt``, ``completion``, a boolean ``label``: TRL's KTO form);
- ``seq2seq``: encoder-decoder rows (T5, BART): ``labels`` is the target sequence, of its own length;
- ``text_classification``: a text (or its token ids) and one class label;
- ``token_classification``: one class label per token or word (NER, POS);
- ``tabular``: numeric feature columns and a class label;
- ``regression``: a numeric (float) target per row, with text or features;
- ``ctc``: audio features and a label sequence (wav2vec2-style CTC);
- ``raw_text``: a text corpus before tokenization (a ``text`` column, optionally with metadata such
  as ``url`` or ``id``, and no label: the web-text JSONL/parquet that ``run_clm``'s
  ``raw_datasets`` or Megatron's ``preprocess_data.py`` read); the checks of text and rows apply,
  none of tokens or labels.

:class:`Layout` is a shard's layout with where it came from (``config``: ``[dataset] layout``;
``schema``: the built-in contract named by ``[dataset] schema``; ``recognized``: the recognizer
of ``datacheck schema infer``; ``unknown``: none could be determined, with the reason). The groups
below are what checks declare (``@check(..., layouts=...)``); a check outside the shard's layout is
not applicable there. A shard of unknown layout runs every check its roles allow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LAYOUTS", "LAYOUT_NAMES", "Layout", "ANY", "LM", "PACKED", "SFT", "TOKENIZED", "CLASSIFICATION",
           "LABELED", "TEXT", "UNTOKENIZED_TEXT", "OPTIONAL_ROLES", "OPTIONAL_BESIDE", "optional_roles", "SOURCES",
           "layout_of"]

#: layout name -> what its rows hold, in words (``datacheck checks --layout``, the text header)
LAYOUTS: dict[str, str] = {
    "packed_lm": "pre-training rows: documents packed to one length (labels = input_ids)",
    "packed_sft": "packed fine-tuning rows: several examples per row, prompts hidden from the loss",
    "causal_lm": "one document per row, padded (labels = input_ids)",
    "masked_lm": "pre-masked masked-LM rows: [MASK] in input_ids, labels the original ids there, ignore_index elsewhere",
    "sft_tokenized": "tokenized fine-tuning rows: labels or an assistant mask hide the prompt",
    "chat_sft": "conversations (messages / ShareGPT conversations), rendered by a chat template",
    "dpo": "preference pairs (chosen, rejected; prompt optional)",
    "kto": "unpaired preference rows (prompt, completion, boolean label)",
    "seq2seq": "encoder-decoder rows: labels are a target sequence of their own length",
    "text_classification": "a text (or its token ids) and one class label",
    "token_classification": "one class label per token or word (NER, POS)",
    "tabular": "numeric feature columns and a class label",
    "regression": "a numeric target per row",
    "ctc": "audio features and a label sequence (CTC)",
    "raw_text": "a text corpus before tokenization (text, no label)",
}
#: the layout names, in the order above
LAYOUT_NAMES: tuple[str, ...] = tuple(LAYOUTS)
#: where a shard's layout came from
SOURCES = ("config", "schema", "recognized", "unknown")

#: every layout (checks of the rows' bytes, schema, values and duplicates)
ANY: frozenset[str] = frozenset(LAYOUT_NAMES)
#: language-model rows whose labels are the ids themselves (pre-training)
LM: frozenset[str] = frozenset({"packed_lm", "causal_lm"})
#: rows that pack several documents or examples
PACKED: frozenset[str] = frozenset({"packed_lm", "packed_sft"})
#: rows with a prompt and a response: the response rules (sft.*) apply
SFT: frozenset[str] = frozenset({"sft_tokenized", "chat_sft", "packed_sft"})
#: rows of token ids (input_ids) a model's embedding reads
TOKENIZED: frozenset[str] = LM | SFT | PACKED | frozenset({"masked_lm", "seq2seq", "text_classification",
                                                              "token_classification"})
#: rows with a class label
CLASSIFICATION: frozenset[str] = frozenset({"text_classification", "token_classification", "tabular"})
#: rows with a label or labels of any kind
LABELED: frozenset[str] = CLASSIFICATION | frozenset({"kto", "regression"})
#: rows with text columns
TEXT: frozenset[str] = frozenset({"chat_sft", "dpo", "kto", "seq2seq", "text_classification",
                                  "token_classification", "regression", "sft_tokenized", "causal_lm", "packed_lm",
                                  "raw_text"})
#: a text corpus before tokenization: no token ids, no labels, no list columns to align (the checks of
#: labels, token supervision and aligned lists do not apply to it)
UNTOKENIZED_TEXT: frozenset[str] = frozenset({"raw_text"})

#: the roles of a token row's form (ids and what lies over them)
_TOKEN_FORM = frozenset({"input_ids", "attention_mask", "token_type_ids", "position_ids"})
#: the columns that delimit a packed row's documents: rows packed by ``group_texts`` have none
_PACKING = frozenset({"position_ids", "document_ids", "seq_lens", "cu_seqlens"})
#: layout -> the roles its rows hold in one form and not in another, or never: a text classifier's
#: sentence or its ``input_ids``; a preference pair as strings, conversations or TRL's token ids
#: (and no label of any kind: the preference is which side is ``chosen``); a regression target with
#: text or features; a causal-LM row's labels made by the collator; a packed row's document
#: delimiters (``group_texts`` rows have none); an SFT row's assistant mask (or labels that hide the
#: prompt); a conversation's attention mask, token type ids and position ids (neither the conversation
#: nor its rendering by ``[tokens] tokenizer``, one unpadded sequence per row, holds them: the collator
#: builds them). A check whose declared roles are
#: all absent from a shard and all optional in its layout does not apply there (the rows are of the
#: other form: counted as not applicable, as on ``raw_text``); a role the layout's rows always hold,
#: missing, stays a named skip (set ``[columns]``). A check that finds its token-id columns itself
#: (``reads_tokens``) does not apply where ``input_ids`` is optional and the rows hold none.
OPTIONAL_ROLES: dict[str, frozenset[str]] = {
    "text_classification": _TOKEN_FORM | {"text", "labels", "target", "aligned"},
    "token_classification": _TOKEN_FORM | {"text", "target"},
    "seq2seq": _TOKEN_FORM | {"text"},
    "dpo": _TOKEN_FORM | {"text", "messages", "label", "labels", "target", "aligned"},
    "kto": _TOKEN_FORM | {"text", "messages", "labels", "target", "aligned"},
    "regression": _TOKEN_FORM | {"text", "features", "label", "labels", "aligned"},
    "tabular": frozenset({"text", "labels", "target"}),
    "sft_tokenized": frozenset({"text", "label", "target", "token_type_ids", "assistant_mask"}),
    "packed_sft": _PACKING | {"text", "label", "target", "token_type_ids", "assistant_mask"},
    "chat_sft": frozenset({"text", "attention_mask", "token_type_ids", "position_ids"}),
    "causal_lm": frozenset({"text", "label", "labels", "target", "token_type_ids"}),
    "masked_lm": frozenset({"text", "label", "target", "token_type_ids"}),
    "packed_lm": _PACKING | {"text", "label", "labels", "target", "token_type_ids"},
}

#: layout -> {role: the role whose presence makes it optional}: a form of the layout known by a column
#: it holds. TRL's tokenized SFT rows with ``assistant_masks`` (``assistant_only_loss``) are unpadded and
#: hold no labels and no attention mask: its collator makes both (labels from the mask)
OPTIONAL_BESIDE: dict[str, dict[str, str]] = {
    "sft_tokenized": {"labels": "assistant_mask", "attention_mask": "assistant_mask"},
}


def optional_roles(layout: str | None, present: Any) -> frozenset[str]:
    """The roles optional in ``layout`` for a shard whose present roles answer ``present.has(role)``:
    :data:`OPTIONAL_ROLES`, plus each role of :data:`OPTIONAL_BESIDE` whose companion is present."""
    base = OPTIONAL_ROLES.get(layout or "", frozenset())
    beside = OPTIONAL_BESIDE.get(layout or "", {})
    return base | frozenset(r for r, companion in beside.items() if present.has(companion))


@dataclass(frozen=True)
class Layout:
    """A shard's layout and where it came from.

    Attributes:
        name: a name of :data:`LAYOUTS`, or None (unknown: every check the roles allow runs).
        source: ``config``, ``schema``, ``recognized`` or ``unknown`` (:data:`SOURCES`).
        why: the evidence in words (the key that set it, or what the recognizer saw, or why none fits).
    """

    name: str | None
    source: str
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "why": self.why}

    def describe(self) -> str:
        """``NAME (source: why)``, or ``unknown (why)``: how the text outputs name a shard's layout."""
        return f"{self.name} ({self.source}: {self.why})" if self.name is not None else f"unknown ({self.why})"

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Layout":
        d = d or {}
        return cls(d.get("name"), d.get("source", "unknown"), d.get("why", ""))


def layout_of(configured: str | None, schema_name: str | None) -> Layout | None:
    """The layout given by the config (``[dataset] layout``) or by the built-in contract named in
    ``[dataset] schema`` (when it names a layout); None when neither gives one (then the shard's
    layout is recognized from its columns)."""
    if configured is not None:
        return Layout(configured, "config", f'[dataset] layout = "{configured}"')
    if schema_name in LAYOUTS:
        return Layout(schema_name, "schema", f'[dataset] schema = "{schema_name}" (a built-in layout)')
    return None
