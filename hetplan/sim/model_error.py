"""The check of a verified plan against the performance model's own error (``--confidence``): the plan replayed with
every step as slow as the model's error band at a confidence level, and the largest uniform slowdown it still
holds. Used by :mod:`hetplan.planning.verify` after the verdict of :mod:`hetplan.sim.verify`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.plan.blocks import AtConfidence, ModelError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.replay import Outcome, Replayer, fit_context, plan_arrivals
from hetplan.units import rnd
from hetplan.workload.model import Workload

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: Largest step slowdown the error margin searches (3: steps 4x the model's prediction).
MARGIN_MAX = 3.0
#: Bisection steps of the error margin after its bracket (doubling from 0.05).
MARGIN_BISECT = 3


def error_check(
    plan: Plan, workload: Workload, policy: str, confidence: str, catalog: Catalog | None = None
) -> ModelError | None:
    """The verdict's third part: the plan against the performance model's own measured error (the curves and error
    bands of ``catalog``; None: the shipped catalogs).

    Replays ``workload`` at the goodput target (as :func:`verify_plan`'s main run) with every prefill and decode
    step slower than the model predicts: (1) by the model's step slowdown at ``confidence`` for the plan's engine
    and GPUs (:func:`hetplan.perf.error_bands.error_band`: prefill by the TTFT band, decode by the TPOT band);
    (2) by a uniform slowdown found by doubling from 5 % and :data:`MARGIN_BISECT` bisections, the margin: the
    largest slowdown at which the plan still holds (0 when it misses as predicted; capped at :data:`MARGIN_MAX`).

    Returns:
        The :class:`~hetplan.plan.blocks.ModelError` block (the bands, whether it holds at them, the run there
        (joint attainment, p TTFT/TPOT, misses), the margin, the summary); None when no error-band file is
        shipped.
    """
    from hetplan.perf.error_bands import error_band

    gpus = sorted({c.prefill_gpu for c in plan.combos} | {c.decode_gpu for c in plan.combos}
                  | {t.gpu for t in plan.instances})  # fmt: skip
    layouts: dict[str, set[tuple[int, str]]] = {}
    for c in plan.combos:
        layouts.setdefault(c.prefill_gpu, set()).add((c.prefill_tp, plan.weight_dtype))
        layouts.setdefault(c.decode_gpu, set()).add((c.decode_tp, plan.weight_dtype))
    for t in plan.instances:
        layouts.setdefault(t.gpu, set()).add((t.tp, plan.weight_dtype))
    band = error_band(plan.engine, gpus, confidence, plan.settings.corrections, plan.model.spec.name, layouts,
                      catalog)  # fmt: skip
    if band is None:
        return None
    window = deployment_from_plan(plan, catalog).arch.spec.max_position_embeddings
    fitted, _ = fit_context(workload, window)
    stream, own, _, _ = plan_arrivals(plan, fitted)
    base = Replayer(plan, stream, policy, OutputPredictor(fitted.prompt_tokens, fitted.output_tokens), catalog)
    scale = plan.goodput_target_req_per_s / own

    def run(prefill: float, decode: float) -> Outcome:  # the run as predicted needs no slowed copy
        slowed = base if prefill == 0 and decode == 0 else base.slowed(1 + prefill, 1 + decode)
        return slowed.run("goodput target", scale)

    at = run(band.ttft, band.tpot)
    holds = at.holds
    lo, hi = 0.0, None
    if run(0.0, 0.0).misses:
        hi = 0.0
    else:
        x = 0.05
        while x <= MARGIN_MAX:
            if run(x, x).misses:
                hi = x
                break
            lo, x = x, x * 2
        if hi is not None:
            for _ in range(MARGIN_BISECT):
                mid = (lo + hi) / 2
                if run(mid, mid).misses:
                    hi = mid
                else:
                    lo = mid
    capped = hi is None
    names = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
    eng = names.get(plan.engine, plan.engine)
    if lo > 0:
        margin = f"holds up to {lo * 100:.0f} % slower steps than predicted"
    elif hi:  # holds as predicted, but not even at the smallest slowdown the search tried
        margin = f"holds as predicted but misses at {hi * 100:.1f} % slower steps"
    else:
        margin = "misses at any slowdown"
    if capped:
        margin = f"holds even at {MARGIN_MAX * 100:.0f} % slower steps than predicted"
    summary = (
        f"model error: {margin}; at the model's {confidence} error for {eng} (steps +{band.ttft * 100:.0f} % "
        f"prefill, +{band.tpot * 100:.0f} % decode; {band.scope}) it "
        + ("holds" if holds else "misses")
        + f" (joint {at.joint * 100:.1f} %)"
    )
    return ModelError(
        confidence=confidence,
        band_ttft=rnd(band.ttft, 4),
        band_tpot=rnd(band.tpot, 4),
        band_scope=band.scope,
        holds_at_confidence=holds,
        at_confidence=AtConfidence(
            attainment=at.joint,
            ttft_p_s=at.ttft_q_s,
            tpot_p_s=at.tpot_q_s,
            misses=at.misses,
        ),
        margin_step_slowdown=rnd(lo, 4),
        margin_capped=capped,
        summary=summary,
    )


__all__ = ["MARGIN_BISECT", "MARGIN_MAX", "error_check"]
