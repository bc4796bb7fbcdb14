import json

import pytest

from hetplan.catalog import find_gpu, find_model, load_gpus, load_models, load_prices, model_from_hf_config
from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import catalog_dir, load_user_prices
from hetplan.catalog.pricing import resolve_price
from hetplan.errors import CatalogError, InputError
from hetplan.perf.arch import ModelArch

SHIPPED = Catalog.shipped()

ISSUE_GPUS = ["H100", "H200", "H800", "H20", "A100-80GB", "A800", "L40S", "L4", "A10G", "RTX 3090", "P100", "MI300X"]


def test_every_shipped_catalog_loads_with_provenance():
    for cat in (load_gpus(), load_prices(), load_models()):
        assert cat.schema_version == 1
        assert cat.source and cat.as_of
    assert len(load_gpus().gpus) == 35  # the 33 rows of shared gpus.csv plus B300 and GB300
    # every size gpu_prices.csv lists (g5.12xlarge included), plus 22 rows of the same SkyPilot snapshots in a
    # second region (AWS us-east-2/us-west-2, Azure eastus/eastus2/westus2/westus3; issue 31)
    assert len(load_prices().prices) == 97
    assert len(load_models().models) == 20  # 14 from shared models.csv plus the six measured ones of issue 13


@pytest.mark.parametrize("name", ISSUE_GPUS)
def test_issue_gpus_resolve(name):
    assert find_gpu(name).hbm_gib > 0


def test_unknown_gpu_suggests():
    with pytest.raises(InputError) as info:
        find_gpu("H10O")
    assert "did you mean" in info.value.why
    assert info.value.exit_code == 2


def test_unknown_model_suggests():
    with pytest.raises(InputError) as info:
        find_model("Llama-3-70")
    assert "Llama-3-70B" in info.value.why


def test_datasheet_values_copied():
    h100 = find_gpu("H100")
    assert (h100.bf16_dense_tflops, h100.hbm_gb_per_s, h100.hbm_gib) == (989.4, 3350, 80)
    assert find_gpu("A10G").bf16_dense_tflops is None  # left blank on purpose in the source
    assert find_gpu("A10G").dense_tflops("bf16") == (70, True)  # flagged estimate


@pytest.mark.parametrize("model", [m.name for m in load_models().models])
def test_param_counts_match_published(model):
    spec = find_model(model)
    arch = ModelArch(spec)
    assert arch.params_total / 1e9 == pytest.approx(spec.params_total_b, rel=0.01)
    assert arch.params_active / 1e9 == pytest.approx(spec.params_active_b, rel=0.01)


def test_hf_config_dense_and_moe(tmp_path):
    dense = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
    }
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "config.json").write_text(json.dumps(dense))
    spec = find_model(str(tmp_path / "dense" / "config.json"))
    assert ModelArch(spec).params_total / 1e9 == pytest.approx(8.03, rel=0.01)
    moe = dict(dense, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=32768)
    (tmp_path / "moe.json").write_text(json.dumps(moe))
    arch = ModelArch(model_from_hf_config(tmp_path / "moe.json"))
    assert arch.params_total / 1e9 == pytest.approx(46.7, rel=0.01)
    assert arch.params_active / 1e9 == pytest.approx(12.88, rel=0.01)


def test_hf_config_missing_key(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(InputError, match="lacks"):
        find_model(str(tmp_path / "c.json"))


def test_prices_cloud_and_user_override(tmp_path):
    h100 = find_gpu("H100")
    assert resolve_price(h100, SHIPPED, "aws").usd_per_gpu_hour == pytest.approx(12.29)
    assert resolve_price(h100, SHIPPED, "lambda").usd_per_gpu_hour == pytest.approx(2.99)
    cheapest = resolve_price(h100, SHIPPED)
    assert cheapest.usd_per_gpu_hour == min(
        p.on_demand_usd_per_gpu_hour
        for p in load_prices().prices
        if p.gpu == "H100-SXM" and p.includes_host and p.on_demand_usd_per_gpu_hour
    )
    assert resolve_price(find_gpu("H800"), SHIPPED) is None
    f = tmp_path / "p.yaml"
    f.write_text("schema_version: 1\nkind: prices\nsource: test\nas_of: '2026-01-01'\nusd_per_gpu_hour: {H100: 1.5}\n")
    assert resolve_price(h100, SHIPPED, "aws", user=load_user_prices(f)).usd_per_gpu_hour == 1.5


def test_bad_price_file_names_field(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("schema_version: 1\nkind: prices\nsource: x\nas_of: y\nusd_per_gpu_hour: {H100: -1}\nextra: 1\n")
    with pytest.raises(CatalogError) as info:
        load_user_prices(f)
    assert "extra" in info.value.why


def test_catalog_dir_exists():
    assert (catalog_dir() / "models.yaml").is_file()
