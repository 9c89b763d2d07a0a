"""Data contracts: Pandera polars schemas for the common layouts, user schemas, inference.

- :func:`load_contract`: a built-in layout (:data:`LAYOUTS`) by name, a Pandera YAML/JSON file or a
  Python ``DataFrameModel`` (``file.py:ClassName``).
- :func:`structure_findings` / :func:`data_items`: a contract as shard findings and fused row checks
  (used by the ``schema`` check family).
- writing a contract from the data (``datacheck schema infer``) is a tool: :mod:`datacheck.tools.infer`.
"""
from __future__ import annotations

from datacheck.contracts.load import LAYOUTS, layout_text, load_contract
from datacheck.contracts.validate import data_items, structure_findings, validate_with_pandera

__all__ = ["LAYOUTS", "load_contract", "layout_text", "structure_findings", "data_items", "validate_with_pandera"]
