"""The supervision class of each token of a row: what the loss trains on, as the trainer sees it
(``datacheck inspect --tokenizer`` classifies with it, :mod:`datacheck.render.supervision` shows it).

Pure Python over one row's lists; no tokenizer, no data read.
"""
from __future__ import annotations

from typing import Any

__all__ = ["SUPERVISED", "IGNORED", "PADDING", "PADDING_SUPERVISED", "SUPERVISION_CLASSES", "classify_supervision"]

#: The supervision classes of a token (:func:`classify_supervision`), in legend order.
SUPERVISED, IGNORED, PADDING, PADDING_SUPERVISED = "supervised", "ignored", "padding", "padding_supervised"
SUPERVISION_CLASSES = (SUPERVISED, IGNORED, PADDING, PADDING_SUPERVISED)


def classify_supervision(ids: list[Any], *, attention_mask: list[Any] | None = None, labels: list[Any] | None = None,
                         assistant_mask: list[Any] | None = None, ignore_index: int | None = -100,
                         shifted: bool = False, pad_token_id: int | None = None,
                         padding_side: str = "right") -> list[str]:
    """The supervision class of each token of one row: what the loss trains on, as the trainer sees it.

    A token is a *target* when the loss asks the model to produce it:

    - with ``labels`` and ``shifted = false`` (Hugging Face: the model shifts): token ``j >= 1`` is a
      target when ``labels[j]`` is not null and not ``ignore_index`` (``labels[0]`` is never used by
      the shifted loss, so token 0 is never a target);
    - with ``labels`` and ``shifted = true`` (nanoGPT, Megatron: ``labels[i]`` is the target of
      position ``i``): token ``j >= 1`` is a target when ``labels[j - 1]`` is supervised;
    - without labels, with ``assistant_mask`` (assistant-only loss): token ``j >= 1`` is a target when
      ``assistant_mask[j] == 1``;
    - with neither (causal LM, labels = input_ids): every non-padding token ``j >= 1``.

    A token is *padding* when ``attention_mask[j] == 0``; without a mask, when it belongs to the run
    of ``pad_token_id`` at the padded end of the row (``padding_side``; none when ``pad_token_id``
    is unset). Classes: ``"supervised"`` (a target), ``"ignored"`` (not a target: prompt, system,
    user turns), ``"padding"``, and ``"padding_supervised"`` (padding that is a target: the loss
    trains on padding, ``padding.label_not_ignored``).

    Args:
        ids: the row's token ids (length L); lists shorter than L leave the missing positions
            unsupervised / attended.
        attention_mask: 0/1 per token, or None.
        labels: token labels per position, or None.
        assistant_mask: 0/1 per token, or None (used only without ``labels``).
        ignore_index: the label the loss ignores (``[labels] ignore_index``; None: none).
        shifted: ``[labels] shifted``.
        pad_token_id: ``[tokens] pad_token_id`` (only used without ``attention_mask``).
        padding_side: ``"right"`` or ``"left"`` (only used without ``attention_mask``).

    Returns:
        One class per token of ``ids`` (length L).
    """
    n = len(ids)

    def at(xs: list[Any] | None, j: int) -> Any:
        return xs[j] if xs is not None and 0 <= j < len(xs) else None

    if attention_mask is not None:
        pad = [at(attention_mask, j) == 0 for j in range(n)]
    else:
        pad = [False] * n
        if pad_token_id is not None:
            order = range(n - 1, -1, -1) if padding_side == "right" else range(n)
            for j in order:
                if ids[j] != pad_token_id:
                    break
                pad[j] = True

    def sup_label(v: Any) -> bool:
        return v is not None and v != ignore_index

    out = []
    for j in range(n):
        if j == 0:
            target = False
        elif labels is not None:
            target = sup_label(at(labels, j - 1 if shifted else j))
        elif assistant_mask is not None:
            target = at(assistant_mask, j) in (1, True)
        else:
            target = not pad[j]
        out.append((PADDING_SUPERVISED if target else PADDING) if pad[j] else (SUPERVISED if target else IGNORED))
    return out
