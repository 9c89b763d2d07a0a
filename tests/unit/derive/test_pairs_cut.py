"""The trainers' cut of a preference pair (datacheck.derive.pairs.PairCut, infer_seqlen), each
expected value worked out here from the trainer's rule on token-id lists:

- TRL 0.12-0.28 (DPOTrainer.tokenize_row, concatenated_forward): ``prompt[-max_prompt_length:]``,
  ``response[:max_completion_length]``, then ``seq[:max_length]`` (keep_start) or
  ``seq[-max_length:]`` (keep_end); TRL >= 0.29 (DataCollatorForPreference): the sequence cut only.
- LLaMA-Factory (pairwise processor, infer_seqlen): the response keeps all when ``2 t < cutoff``,
  else ``cutoff - s`` when ``2 s < cutoff``, else ``int(cutoff * t / (s + t))``; the prompt keeps
  ``min(cutoff - new_t, s)``; first tokens kept on both sides, both responses cut to one length."""
from __future__ import annotations

import pytest

from datacheck.derive.pairs import PairCut, infer_seqlen
from datacheck.model.config import config_from_dict


@pytest.mark.parametrize(("s", "t", "cutoff", "expected"), [
    (2000, 100, 1024, (924, 100)),   # 2t < cutoff: the response whole, the prompt the rest
    (300, 900, 1024, (300, 724)),    # 2s < cutoff: the prompt whole, the response the rest
    (2000, 600, 1024, (788, 236)),   # both long: int(1024 * 600 / 2600) = 236, 1024 - 236 = 788
    (1000, 1000, 1024, (512, 512)),  # int(1024 * 1000 / 2000) = 512
    (100, 2, 4, (4, 0)),             # 2t = cutoff and 2s > cutoff: int(4 * 2 / 102) = 0, the response cut away
])
def test_infer_seqlen_is_llamafactorys_split(s, t, cutoff, expected):
    assert infer_seqlen(s, t, cutoff) == expected


P = list(range(1000, 1010))          # a 10-token prompt
C = list(range(2000, 2006))          # a 6-token chosen
R = list(range(3000, 3004))          # a 4-token rejected


@pytest.mark.parametrize(("cut", "expected"), [
    (PairCut(max_length=None), (P + C, P + R, 6, 4)),
    (PairCut(max_length=12), (P + C[:2], P + R[:2], 2, 2)),                    # keep_start: seq[:12]
    (PairCut(max_length=10), (P, P, 0, 0)),                                   # the prompt fills it
    (PairCut(max_length=8), (P[:8], P[:8], 0, 0)),
    (PairCut(max_length=8, keep_end=True), ((P + C)[-8:], (P + R)[-8:], 6, 4)),  # keep_end: seq[-8:]
    (PairCut(max_length=3, keep_end=True), (C[-3:], R[-3:], 3, 3)),
    (PairCut(max_length=10, max_prompt_length=4), (P[-4:] + C, P[-4:] + R, 6, 4)),   # TRL <= 0.28 defaults' shape
    (PairCut(max_length=8, max_prompt_length=4, max_completion_length=3), (P[-4:] + C[:3], P[-4:] + R[:3], 3, 3)),
    (PairCut(max_length=7, max_prompt_length=4, max_completion_length=5), (P[-4:] + C[:3], P[-4:] + R[:3], 3, 3)),
    # 2 * 6 >= 10 and 2 * 10 >= 10: the response's share int(10 * 6 / 16) = 3, the prompt 10 - 3 = 7, first tokens
    (PairCut(trainer="llamafactory", max_length=10), (P[:7] + C[:3], P[:7] + R[:3], 3, 3)),
    (PairCut(trainer="llamafactory", max_length=13), (P[:7] + C, P[:7] + R, 6, 4)),  # 2 * 6 < 13: the responses whole
    (PairCut(trainer="llamafactory", max_length=None), (P + C, P + R, 6, 4)),
])
def test_pair_cut_follows_the_trainers_rule(cut, expected):
    assert cut.cut(P, C, R) == expected


def test_pair_cut_of_a_config_mirrors_trls_names():
    cfg = config_from_dict({"tokens": {"max_seq_len": 1024, "truncation_side": "left"},
                            "pref": {"max_prompt_length": 512}})
    cut = PairCut.of(cfg)
    assert cut == PairCut(trainer="trl", max_length=1024, keep_end=True, max_prompt_length=512)
    assert cut.describe() == "TRL's truncation at max_length=1024 (keep_end, max_prompt_length=512)"
    lf = PairCut.of(config_from_dict({"tokens": {"max_seq_len": 2048}, "pref": {"trainer": "llamafactory"}}))
    assert lf.describe() == "LLaMA-Factory's infer_seqlen with cutoff_len=2048"
