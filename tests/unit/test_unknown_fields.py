"""An unknown field in a scenario or price file names the closest known fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetplan.catalog.loader import load_user_prices
from hetplan.errors import HetplanError
from hetplan.scenario import load_scenario


def test_a_misspelled_scenario_field_suggests_the_known_one(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "schema_version: 1\nkind: scenario\nname: x\nmodel: Llama-3-8B\n"
        "workload: {synthetic: {class: balanced, rate_per_s: 2}}\ngoodput_target: 3\n"
        "slo: {ttft: 2s, tpot: 100ms, percentil: 90}\n"
    )
    with pytest.raises(HetplanError) as exc:
        load_scenario(path)
    why = exc.value.why or ""
    assert "goodput_target" in why and "did you mean 'goodput_req_per_s'" in why
    assert "slo.percentil" in why and "'percentile'" in why  # nested models too


def test_a_misspelled_offer_field_suggests_the_known_one(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "schema_version: 1\nkind: prices\nsource: x\nas_of: '2026-12-01'\n"
        "offers:\n  - {provider: aws, gpu: H100, instance_typ: p5.48xlarge, usd_per_instance_hour: 3}\n"
    )
    with pytest.raises(HetplanError) as exc:
        load_user_prices(path)
    assert "offers.0.instance_typ" in (exc.value.why or "") and "'instance_type'" in (exc.value.why or "")
