"""``hetplan-profile --kernel-tables``: the profile's rows in the kernel tables' schema, read back by pandas and by
``benchmarks/kernel_curves.py`` (issue 30 item 5). No test reads ../shared: the tables are built here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("hetplan_profiler")

from hetplan_profiler import __version__  # noqa: E402
from hetplan_profiler.kernel_tables import (  # noqa: E402
    COLUMNS,
    kernel_rows,
    system_name,
    table_paths,
    write_kernel_tables,
)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
STRINGS = {"framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "attn_dtype", "kv_cache_dtype",
           "allreduce_dtype", "backend"}  # fmt: skip
"""Columns the collected parquet tables hold as strings; every other column but ``latency`` is int64."""


def _doc(decode_batches: tuple[int, ...] = (1, 4)) -> dict:
    """A profile document's tables, as run.py writes them (values made up)."""
    timing = {"spread": 0.01, "repeats": 3, "calls_per_sample": 1}
    gemm = [{"dtype": d, "shape": "qkv", "m": m, "n": n, "k": 4096, "tflops": 1.0, "median_s": 1e-6 * m * n / 4096,
             **timing}
            for d in ("bf16", "fp8", "fp32") for m in (256, 1024, 4096) for n in (1024, 4096, 14336)]  # fmt: skip
    decode = [{"dtype": "bf16", "shape": "o", "m": m, "n": 4096, "k": 4096, "tflops": 1.0, "gb_per_s": 1.0,
               "median_s": 2e-5 + 1e-8 * m, **timing} for m in (1, 16)]  # fmt: skip
    prefill = [{"prompt_tokens": s, "heads": 32, "kv_heads": 8, "head_dim": 128, "tflops": 1.0,
                "median_s": 1e-5 + 2e-14 * s * s * 32 * 128, **timing} for s in (512, 1024, 2048, 4096)]  # fmt: skip
    dec_att = [{"batch": b, "kv_tokens": kv, "heads": 32, "kv_heads": 8, "head_dim": 128, "kv_gb_per_s": 1.0,
                "median_s": 5e-6 + b * kv * 8 * 128 * 4 / 2e12, **timing}
               for b in decode_batches for kv in (1024, 4096, 16384)]  # fmt: skip
    allreduce = [{"gpus": 2, "bytes": n, "median_s": 1e-5 + n / 1e11, "p10_s": 1e-5, "p90_s": 2e-5,
                  "algbw_gb_per_s": 1.0, "busbw_gb_per_s": 1.0} for n in (8192, 2**20, 2**24)]  # fmt: skip
    return {
        "device": {"device_name": "NVIDIA H100 80GB HBM3"},
        "tables": {"gemm": gemm, "decode_gemm": decode, "memory": [], "attention_prefill": prefill,
                   "attention_decode": dec_att, "allreduce": allreduce},
    }  # fmt: skip


def test_rows_follow_the_kernel_schema():
    rows = kernel_rows(_doc())
    assert set(rows) == set(COLUMNS)
    for name, table in rows.items():
        assert all(tuple(r) == COLUMNS[name] for r in table), name
    gemm = rows["gemm_perf"]
    assert {r["gemm_dtype"] for r in gemm} == {"bfloat16", "fp8", "float32"}
    assert {r["kernel_source"] for r in gemm if r["gemm_dtype"] == "fp8"} == {"torch._scaled_mm"}
    assert len(gemm) == 27 + 2 and gemm[0]["latency"] == pytest.approx(1e-6 * 256 * 1024 / 4096 * 1e3)
    gen = rows["generation_attention_perf"]
    assert {(r["batch_size"], r["isl"]) for r in gen} == {(1, 1), (4, 1)}
    assert {r["step"] for r in gen} == {1024, 4096, 16384}
    ctx = rows["context_attention_perf"]
    assert [r["isl"] for r in ctx] == [512, 1024, 2048, 4096] and {r["step"] for r in ctx} == {0}
    ar = rows["custom_allreduce_perf"]
    assert [r["message_size"] for r in ar] == [8192, 2**20, 2**24] and {r["num_gpus"] for r in ar} == {2}
    assert {r["version"] for t in rows.values() for r in t} == {__version__}


def test_one_gpu_writes_no_allreduce_table():
    doc = _doc()
    del doc["tables"]["allreduce"]
    assert "custom_allreduce_perf" not in kernel_rows(doc)


def test_written_tables_round_trip_with_the_parquet_dtypes(tmp_path):
    pd = pytest.importorskip("pandas")
    doc = _doc()
    written = write_kernel_tables(doc, tmp_path)
    system = system_name("NVIDIA H100 80GB HBM3")
    assert system == "nvidia_h100_80gb_hbm3"
    paths = table_paths(tmp_path, system)
    assert sorted(written) == sorted(paths.values())
    assert paths["gemm_perf"] == tmp_path / system / "gemm" / "hetplan-profile" / __version__ / "gemm_perf.csv"
    rows = kernel_rows(doc)
    for name, path in paths.items():
        df = pd.read_csv(path, dtype={c: "str" for c in STRINGS})
        assert tuple(df.columns) == COLUMNS[name]
        for col in df.columns:
            kind = "O" if col in STRINGS else ("f" if col == "latency" else "i")
            assert df[col].dtype.kind == kind or (col in STRINGS and pd.api.types.is_string_dtype(df[col])), col
        assert len(df) == len(rows[name])
        assert df["latency"].tolist() == pytest.approx([r["latency"] for r in rows[name]], rel=1e-5)
        ints = [c for c in COLUMNS[name] if c not in STRINGS and c != "latency"]
        assert df[ints].to_dict("records") == [{c: r[c] for c in ints} for r in rows[name]]
    # byte-identical on a second write; refused without --force
    before = {p: p.read_bytes() for p in written}
    with pytest.raises(Exception, match="already exists"):
        write_kernel_tables(doc, tmp_path)
    write_kernel_tables(doc, tmp_path, force=True)
    assert {p: p.read_bytes() for p in written} == before


def test_kernel_curves_reads_and_fits_the_written_tables(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    pytest.importorskip("hetplan")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    kc = importlib.import_module("kernel_curves")
    write_kernel_tables(_doc(decode_batches=(1, 4, 16, 64)), tmp_path, system="profiled")
    got = kc.table("profiled", "gemm", kc.PROFILER, "gemm_perf", tmp_path)
    assert got is not None and got[1] == __version__
    df = got[0]
    assert tuple(df.columns) == COLUMNS["gemm_perf"] and df["version"].tolist()[0] == __version__
    fit = kc.fit_tables(tmp_path, "profiled", "H100-SXM", lim=kc.ANY_SIZE)
    assert fit["system"] == "profiled" and fit["gpu"] == "H100-SXM"
    assert {"gemm_max", "mbu", "kv_mbu", "attention_efficiency", "link_efficiency"} <= set(fit["values"])
    assert fit["provenance"]["gemm"]["table"] == f"profiled/gemm/hetplan-profile/{__version__}/gemm_perf"
    with pytest.raises(SystemExit, match="no table has enough rows"):
        kc.fit_tables(tmp_path, "profiled", "H100-SXM")  # the collected tables' minimums: too few rows here
    out = tmp_path / "fit.json"
    assert kc.main(["--tables", str(tmp_path), "--gpu", "H100-SXM", "--any-size", "--out", str(out)]) == 0
    assert '"system": "profiled"' in out.read_text(encoding="utf-8")
    sys.modules.pop("kernel_curves", None)


def test_cpu_profile_writes_the_tables_before_nothing_partial(tmp_path, capsys):
    pytest.importorskip("torch")
    pd = pytest.importorskip("pandas")
    from hetplan_profiler.cli import main

    root = tmp_path / "tables"
    out = tmp_path / "p.yaml"
    assert main(["--device", "cpu", "--quick", "--out", str(out), "--kernel-tables", str(root), "--system", "cpu"]) == 0
    assert "gemm_perf.csv" in capsys.readouterr().err
    paths = table_paths(root, "cpu")
    assert sorted(p.name for p in root.rglob("*.csv")) == sorted(
        p.name for n, p in paths.items() if n != "custom_allreduce_perf"
    )  # one device: no all-reduce table
    gemm = pd.read_csv(paths["gemm_perf"], dtype={c: "str" for c in STRINGS})
    assert tuple(gemm.columns) == COLUMNS["gemm_perf"] and set(gemm["gemm_dtype"]) == {"bfloat16", "float32"}
    assert (gemm["latency"] > 0).all()
    # tables there already: refused before measuring, and --out is not written either
    out.unlink()
    assert main(["--device", "cpu", "--quick", "--out", str(out), "--kernel-tables", str(root), "--system", "cpu"]) == 2
    assert "already exists" in capsys.readouterr().err and not out.exists()
    assert main(["--device", "cpu", "--quick", "--system", "cpu"]) == 2
    assert "--kernel-tables" in capsys.readouterr().err
    assert main(["--device", "cpu", "--quick", "--kernel-tables", str(root), "--system", "../up"]) == 2
    assert "--system '../up' is not a folder name" in capsys.readouterr().err
