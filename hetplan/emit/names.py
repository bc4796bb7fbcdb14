"""Kubernetes name rules, in one place: DNS-1123 labels and subdomains, label names and values.

Every emitter, the offline validator and the profiling-Job writer use these; ``dns_name`` turns free text (a
scenario or GPU name) into a valid label.

Source: the Kubernetes object-name rules (kubernetes.io/docs/concepts/overview/working-with-objects/names),
restated; the ``dns_name`` folding is hetplan's own.
"""

from __future__ import annotations

import re

#: Longest DNS-1123 label / label value / label name part, and the longest DNS-1123 subdomain.
MAX_LABEL = 63
MAX_SUBDOMAIN = 253

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_dns_label(text: str) -> bool:
    """True for a DNS-1123 label (object names, namespaces): lower-case alphanumerics and '-', <= 63."""
    return len(text) <= MAX_LABEL and bool(DNS_LABEL.match(text))


def is_dns_subdomain(text: str) -> bool:
    """True for a DNS-1123 subdomain (Secret and PVC names): dot-separated labels, <= 253 characters."""
    return len(text) <= MAX_SUBDOMAIN and bool(DNS_SUBDOMAIN.match(text))


def is_label_value(text: str) -> bool:
    """True for a label value: empty, or alphanumerics with '-', '_', '.' inside, <= 63 characters."""
    return len(text) <= MAX_LABEL and bool(LABEL_VALUE.match(text))


def is_label_key(key: str) -> bool:
    """True for a label key: an optional DNS-subdomain prefix and '/', then a name of <= 63 characters."""
    prefix, _, name = key.rpartition("/")
    return len(name) <= MAX_LABEL and bool(LABEL_NAME.match(name)) and (not prefix or bool(DNS_SUBDOMAIN.match(prefix)))


def dns_name(text: str, limit: int = MAX_LABEL, fallback: str = "hetplan") -> str:
    """``text`` made a DNS-1123 label: lower case, each run of other characters as one '-', at most ``limit``
    characters, no '-' at either end; ``fallback`` when nothing is left."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return name or fallback


__all__ = [
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "LABEL_NAME",
    "LABEL_VALUE",
    "MAX_LABEL",
    "MAX_SUBDOMAIN",
    "dns_name",
    "is_dns_label",
    "is_dns_subdomain",
    "is_label_key",
    "is_label_value",
]
