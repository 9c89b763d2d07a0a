"""The dataset lines a Megatron run prints while it builds its datasets, written as each lineage
writes them (the wording is the sources'; the numbers are the caller's, computed by the references
tests/helpers/megatronref.py and megatronlegacyref.py, never by datacheck):

- legacy: bigscience-workshop/Megatron-DeepSpeed megatron/data/gpt_dataset.py @
  20c48380d94beb67e6c63594a5ca0477482128c1 (``get_indexed_dataset_``, ``_build_train_valid_test_datasets``,
  ``_build_index_mappings``: ``total number of samples`` is ``sample_idx.shape[0]``) and training.py's
  ``datasets target sizes``; the layout of the BigScience logs in ../shared/logs/megatron;
- megatron-core 0.16.1: indexed_dataset.py ``_IndexReader``, gpt_dataset.py
  ``_build_document_sample_shuffle_indices`` (``sample_index.shape[0] - 1``; epochs only when built),
  blended_megatron_dataset_builder.py, through Python logging's default ``LEVEL:module:`` prefix.
"""
from __future__ import annotations

import re


def legacy_lines(prefix: str, sequences: int, ends: list[int], ns: int, seq_length: int, seed: int, rows: int,
                 epochs: int, target: int) -> list[str]:
    """The legacy block: ``ends`` the four split bookends, ``rows`` the train sample index's rows."""
    out = ["> building train, validation, and test datasets ...", " > datasets target sizes (minimum size):",
           f"    train:      {target}", "    validation: 440", "    test:       40",
           "> building train, validation, and test datasets for GPT ...", " > building dataset index ...",
           "    reading sizes...", " > finished creating indexed dataset in 0.000764 seconds",
           f"    number of documents: {sequences}", " > dataset split:"]
    for name, i in (("train", 0), ("validation", 1), ("test", 2)):
        out += [f"    {name}:", f"     document indices in [{ends[i]}, {ends[i + 1]}) total of {ends[i + 1] - ends[i]} "
                                "documents"]
    base = f"{prefix}_train_indexmap_{ns}ns_{seq_length}sl_{seed}s"
    out += [f" > loading doc-idx mapping from {base}_doc_idx.npy",
            f" > loading sample-idx mapping from {base}_sample_idx.npy",
            f" > loading shuffle-idx mapping from {base}_shuffle_idx.npy",
            "    loaded indexed file in 0.012 seconds", f"    total number of samples: {rows}",
            f"    total number of epochs: {epochs}"]
    vb = f"{prefix}_valid_indexmap_440ns_{seq_length}sl_{seed}s"
    out += [f" > loading doc-idx mapping from {vb}_doc_idx.npy", "    loaded indexed file in 0.002 seconds",
            "    total number of samples: 7", "    total number of epochs: 3",
            "> finished creating GPT datasets ..."]
    return out


def core_lines(prefix: str, sequences: int, documents: int, seq_length: int, seed: int, split: str, samples: int,
               epochs: int | None, target: int) -> list[str]:
    """The megatron-core block (``epochs`` None: the indices were loaded from the cache, which prints none)."""
    g = "INFO:megatron.core.datasets.gpt_dataset:"
    i = "INFO:megatron.core.datasets.indexed_dataset:"
    out = ["> building train, validation, and test datasets ...", " > datasets target sizes (minimum size):",
           f"    train:      {target}", "    validation: 1680", "    test:       80",
           "INFO:megatron.core.datasets.blended_megatron_dataset_config:Let split_matrix = [(0, 0.949)]",
           "> building train, validation, and test datasets for GPT ...",
           f"INFO:megatron.core.datasets.blended_megatron_dataset_builder:Building GPTDataset splits with "
           f"sizes=({target}, 1680, 80) and config=GPTDatasetConfig(random_seed={seed}, sequence_length={seq_length}, "
           f"blend=(['{prefix}'], None), blend_per_split=None, split='{split}', split_matrix=[(0, 0.949)], "
           "mid_level_dataset_surplus=0.005, add_extra_token_to_sequence=True)",
           f"{i}Load the _IndexReader from {prefix}.idx", f"{i}\tExtract the sequence lengths",
           f"{i}\tExtract the document indices", f"{i}> total number of sequences: {sequences}",
           f"{i}> total number of documents: {documents}"]
    if epochs is None:
        out += [f"{g}Load the GPTDataset train indices",
                f"{g}\tLoad the document index from 0123abcd-GPTDataset-train-document_index.npy",
                f"{g}> total number of samples: {samples}"]
    else:
        out += [f"{g}Build and save the GPTDataset train indices", f"{g}> total number of samples: {samples}",
                f"{g}> total number of epochs: {epochs}"]
    out += [f"{g}Build and save the GPTDataset valid indices", f"{g}> total number of samples: 3",
            f"{g}> total number of epochs: 7", "> finished creating GPT datasets ..."]
    return out


def with_args(lines: list[str], **values: object) -> list[str]:
    """``lines`` with the arguments block's ``  name ...... value`` lines of ``values`` set to them
    (``_print_args``' layout, as in ../shared/logs/megatron)."""
    out = []
    for line in lines:
        m = re.match(r"^(  (\w+) \.{3,} ).*$", line)
        out.append(m.group(1) + str(values[m.group(2)]) if m and m.group(2) in values else line)
    return out
