"""Offline validation: strict schemas, what is reported, and that nothing touches the network."""

from __future__ import annotations

import socket

import jsonschema
import pytest
import yaml

from hetplan.emit.validate import CUSTOM_SCHEMAS, NOT_CHECKED, load_schema, make_strict, validate_files
from hetplan.errors import InputError
from tests.emit.helpers import combo, files_of, plan_doc


def test_make_strict_rejects_unknown_fields_only_where_the_schema_lists_properties():
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"n": {"type": "integer", "default": {"properties": {}}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "default": {"type": "object", "properties": {"x": {}}},  # a property *named* default is a schema
        },
    }
    strict = make_strict(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["spec"]["additionalProperties"] is False
    assert strict["properties"]["spec"]["properties"]["n"]["default"] == {"properties": {}}  # values untouched
    assert "additionalProperties" not in strict["properties"]["free"]
    assert strict["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert strict["properties"]["default"]["additionalProperties"] is False
    assert "additionalProperties" not in schema  # the input is not modified
    v = jsonschema.Draft202012Validator(strict)
    assert v.is_valid({"spec": {"n": 1}, "free": {"anything": 1}, "map": {"k": "v"}})
    assert not v.is_valid({"spec": {"n": 1, "typo": 2}})


@pytest.mark.parametrize(("api_kind", "relative"), sorted(CUSTOM_SCHEMAS.items()))
def test_every_shipped_schema_rejects_an_unknown_spec_field(api_kind, relative):
    schema = load_schema(relative)  # read as package data (hetplan/emit/schemas)
    assert set(schema["properties"]) >= {"apiVersion", "kind", "metadata", "spec"}
    api, kind = api_kind
    obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": {"hetplanTypo": 1}}
    report = validate_files({"x.yaml": yaml.safe_dump(obj)}, "1.33")
    assert any("'hetplanTypo' was unexpected" in e for e in report.errors), report.errors


def test_report_flags_unknown_kinds_bad_yaml_names_and_scripts():
    files = {
        "a.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
        "b.yaml": "key: [unclosed\n",
        "c.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: Bad_Name}\nspec: {ports: [{port: 80}]}\n",
        "d.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: s, labels: {app: 'a b'}}\nspec: {}\n",
        "e.sh": "#!/usr/bin/env bash\nif then fi\n",
        "f.md": "# notes\n",
    }
    report = validate_files(files, "1.33")
    assert not report.ok
    text = "\n".join(report.errors)
    assert "a.yaml: Widget/w: no schema for example.com/v1 Widget" in text
    assert "b.yaml: not valid YAML" in text
    assert "metadata.name 'Bad_Name' is not a DNS-1123 label" in text
    assert "label value 'a b' of 'app' is not valid" in text
    assert "e.sh: bash -n:" in text
    assert report.skipped == ("f.md (documentation)",)
    assert report.not_checked == NOT_CHECKED


def test_unsupported_kubernetes_version_is_an_input_error():
    with pytest.raises(InputError, match="no Kubernetes 1.2 schemas"):
        validate_files({}, "1.2")


def test_validation_runs_offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("validation tried to open a network connection")

    files = files_of(plan_doc([combo("H100-SXM", 1, 2, "L40S", 2, 1)]))
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    report = validate_files(files, "1.33")
    assert report.ok, report.errors
    assert len(report.objects) >= 10
