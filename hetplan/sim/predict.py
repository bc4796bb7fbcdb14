"""Output-length prediction: what a scheduler may know of a request's output before it ends.

No engine knows how many tokens a request will generate. Where a policy needs it (CASCADE's decode budgets,
:mod:`hetplan.sim.cascade`), the simulator gives it a *prediction* from what a deployment can see at that moment,
the prompt length and the tokens generated so far, and a distribution learnt beforehand from the sizing data:

- requests are grouped by prompt length in powers of two (``[2^(k-1), 2^k)``); a group with fewer than
  :data:`MIN_SAMPLES` requests uses the whole sample instead;
- the predicted *remaining* output of a request with ``g`` tokens generated is the mean residual of its group's
  outputs beyond ``g``: ``mean(o − g for o in group if o > g)``, at least one token (a request past every output
  of its group is predicted to end at its next token).

The simulator still ends every request at its true output, so the prediction's error (a long answer predicted
short, a short one predicted long) is part of the simulated outcome.

Source: hetplan's own reconstruction (a conditional-mean length predictor, the simplest of the output-length
predictors the scheduling literature uses, e.g. S³, Jin et al. 2023, predicts a length bucket from the prompt).
"""

from __future__ import annotations

import bisect

import numpy as np

MIN_SAMPLES = 32
"""Fewest sizing requests of a prompt-length group for its own distribution (fewer: the whole sample's)."""


class OutputPredictor:
    """Predicted remaining output of a request from its prompt length and tokens generated so far (module
    docstring).

    Args:
        prompt_tokens / output_tokens: the sizing data's requests, shape (n,), tokens (n may be 0: every
            prediction is then one token).
    """

    def __init__(self, prompt_tokens: np.ndarray, output_tokens: np.ndarray) -> None:
        prompt = np.asarray(prompt_tokens, dtype=np.int64)
        out = np.asarray(output_tokens, dtype=np.int64)
        self._groups: dict[int, tuple[list[int], list[float]]] = {}
        self._all = self._table(out)
        keys = np.array([int(p).bit_length() for p in prompt.tolist()], dtype=np.int64)
        for k in sorted(set(keys.tolist())):
            sel = out[keys == k]
            if sel.size >= MIN_SAMPLES:
                self._groups[k] = self._table(sel)

    @staticmethod
    def _table(out: np.ndarray) -> tuple[list[int], list[float]]:
        """Sorted outputs and the sums of each suffix (``suffix[i] = Σ sorted[i:]``, one extra 0 at the end)."""
        s = np.sort(out.astype(np.int64))
        suffix = np.concatenate([np.cumsum(s[::-1])[::-1], [0]]).astype(float)
        return s.tolist(), suffix.tolist()

    def remaining(self, prompt_tokens: int, generated: int) -> float:
        """Predicted tokens still to come for a request of ``prompt_tokens`` with ``generated`` tokens so far
        (≥ 1)."""
        srt, suffix = self._groups.get(int(prompt_tokens).bit_length(), self._all)
        i = bisect.bisect_right(srt, generated)
        n = len(srt) - i
        if n <= 0:
            return 1.0
        return max(1.0, (suffix[i] - generated * n) / n)


__all__ = ["MIN_SAMPLES", "OutputPredictor"]
