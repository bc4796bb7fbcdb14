"""A plan's first block as every report format shows it: key/value rows after the recommendation sentence.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.plan.deployment import Purchase
from hetplan.report.decision import owned_text
from hetplan.report.types import PlanSection


def purchase_text(item: Purchase) -> str:
    """One purchase (an instance offer the plan buys, or owned nodes it uses) in words."""
    where = "owned" if item.owned else f"{item.provider} {item.region}, rented"
    used = f", {item.gpus_used} of their GPUs used" if item.gpus_used else ""
    return (
        f"{item.count}x {item.instance_type} ({where}): {item.gpus_per_instance}x {item.gpu} each, "
        f"${float(item.usd_per_hour_each):,.2f}/h each{used}"
    )


def _traffic_left_out(p: PlanSection) -> tuple[str, str] | None:
    left = p.workload.over_context
    if left is None:  # requests the plan was sized without (hetplan.workload.context)
        return None
    total, rate = left.requests_total, left.arrival_rate_per_s
    text = (
        f"{left.refused:,} of {total:,} requests ({left.refused / total * 100:.1f} %): prompt over the "
        f"{left.window_tokens:,}-token window"
    )
    return ("traffic left out", text + (f"; the trace's rate with them {rate:.3g} req/s" if rate else ""))


def _gpu_rows(p: PlanSection) -> list[tuple[str, str]]:
    """What each GPU type does, at what price from where (owned-only types: what renting would cost)."""
    d = p.decision
    prices = {r.gpu: r for r in d.prices}
    owned_only = {  # GPU types the plan uses only from owned nodes: their catalog price is not what is paid
        item.gpu for item in d.purchase if item.owned and not any(o.gpu == item.gpu and not o.owned for o in d.purchase)
    }
    rows = []
    for role in d.gpu_roles:
        price = prices.get(role.gpu)
        text = role.text
        if price is not None:
            listed = float(price.usd_per_gpu_hour)
            paid = price.usd_per_gpu_hour_bought
            if role.gpu in owned_only and paid is not None and abs(float(paid)) < 5e-3:
                text += (f"; owned, priced at $0/GPU-hour (no price given: give its amortised usd_per_gpu_hour in a "
                         f"price file); renting it costs ${listed:,.2f}/GPU-hour, {price.source}")  # fmt: skip
            elif paid is not None and abs(float(paid) - listed) > 0.005 * max(listed, 1e-9):
                text += (f"; ${float(paid):,.2f}/GPU-hour as bought ({', '.join(price.bought_as or ())}); the "
                         f"lowest per-GPU price is ${listed:,.2f}/GPU-hour, {price.source}")  # fmt: skip
            else:
                text += f"; ${listed:,.2f}/GPU-hour, {price.source}"
        rows.append((role.gpu, text))
    return rows


def decision_rows(p: PlanSection) -> list[tuple[str, str]]:
    """The first block of a plan's report, as key/value rows after the recommendation sentence: the simulated
    verdict, what each GPU type does and at what price from where, purchases, owned GPUs and their use (idle ones
    with the reason), quality changes."""
    d = p.decision
    verdict = str(d.verdict)
    shown = verdict if verdict.lower().startswith(str(d.status).lower()) else f"{d.status}: {verdict}"
    left = _traffic_left_out(p)
    rows: list[tuple[str, str]] = ([left] if left else []) + [("verification", shown)]
    rows += _gpu_rows(p)
    rows += [("purchase", purchase_text(item)) for item in d.purchase]
    for row in d.owned or ():  # every owned type, used or idle, and why idle (issue 31)
        rows.append((f"owned {row.gpu}", owned_text(row)))
    simulated = p.verification is not None
    for name, other in p.strategies.items():
        cheaper = not other.infeasible and other.usd_per_hour < p.usd_per_hour
        if name != p.strategy and cheaper:
            rows.append(
                (
                    "cheaper on paper",
                    f"{name}: ${other.usd_per_hour:,.2f}/h by the model"
                    + (", not simulated" if simulated else "")
                    + f"; plan it with --strategy {name}"
                    + (" to verify it" if simulated else ""),
                )
            )
    rows += [("quality change", note) for note in d.quality]
    return rows
