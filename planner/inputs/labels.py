"""Kubernetes node labels: the ``node_labels`` column of ``clusters.csv``, and node selectors.

A cluster's Kueue ``ResourceFlavor`` selects its nodes by labels. ``node_labels`` is written
``key=value;key=value``
(``nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3;topology.kubernetes.io/zone=b``); keys and
values follow Kubernetes' label syntax (checked here, with a message saying what is wrong).
Where a cluster gives none, :func:`node_selector` makes the default:

- ``gpu-planner.io/cluster: <cluster>`` (the id itself where it is a valid label value, else
  its DNS-1123 form with a digest, :func:`label_value`): the site labels each cluster's
  nodes with it (``kubectl label nodes ... gpu-planner.io/cluster=h100-a``), and no two
  clusters share it;
- plus ``nvidia.com/gpu.product: <gpu_type>`` only where the GPU type is written as NVIDIA's
  GPU feature discovery labels real nodes (``NVIDIA-H100-80GB-HBM3``, starting ``NVIDIA-``):
  a bare ``H100`` matches no real node, so it is left out rather than making the flavor
  select nothing.

Two clusters must never select the same nodes: :func:`selector_overlaps` finds pairs where
every label of one selector is also in the other's (then each node the larger one selects
is selected by the smaller one too, equal selectors included).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

LABEL_SEPARATOR = ";"
CLUSTER_LABEL = "gpu-planner.io/cluster"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_RE = re.compile(_NAME)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_GFD_PRODUCT = re.compile(r"NVIDIA-" + _NAME)

Selector = tuple[tuple[str, str], ...]  # (key, value) pairs sorted by key


def key_problem(key: str) -> str | None:
    """What is wrong with a label key (``[prefix/]name``), or ``None``."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"label key {key!r} has an empty prefix before '/'"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return (f"label key prefix {prefix!r} is not a DNS subdomain (lower-case letters, "
                "digits, '-' and '.', at most 253 characters)")
    if not name or len(name) > 63 or not _NAME_RE.fullmatch(name):
        return (f"label key name {name!r} must be 1 to 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


def value_problem(value: str) -> str | None:
    """What is wrong with a label value (empty, or like a key's name), or ``None``."""
    if value and (len(value) > 63 or not _NAME_RE.fullmatch(value)):
        return (f"label value {value!r} must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


def parse_labels(text: str) -> tuple[Selector | None, str | None]:
    """``key=value;key=value`` as sorted pairs, or ``None`` and what is wrong."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(LABEL_SEPARATOR)):
        if not item:
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq:
            return None, f"{item!r} is not key=value; write labels as key=value;key=value"
        problem = key_problem(key) or value_problem(value)
        if problem is not None:
            return None, f"{problem}; write labels as key=value;key=value"
        if key in pairs:
            return None, f"label key {key!r} given twice; keep one"
        pairs[key] = value
    if not pairs:
        return None, "no labels; write key=value;key=value or leave the cell empty"
    return tuple(sorted(pairs.items())), None


def format_labels(selector: Iterable[tuple[str, str]]) -> str:
    """Pairs as written in ``clusters.csv`` (the inverse of :func:`parse_labels`)."""
    return LABEL_SEPARATOR.join(f"{k}={v}" for k, v in selector)


def label_value(text: str) -> str:
    """``text`` where it is a valid label value, else its DNS-1123 form plus a digest."""
    if value_problem(text) is None and text:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:54].strip("-")
    return f"{base}-{digest}" if base else f"x-{digest}"


def node_selector(cluster: str, gpu_type: str,
                  node_labels: Mapping[str, str] | Iterable[tuple[str, str]] | None = None
                  ) -> Selector:
    """The labels a cluster's nodes carry: ``node_labels`` if given, else the default."""
    if node_labels:
        items = node_labels.items() if isinstance(node_labels, Mapping) else node_labels
        return tuple(sorted((str(k), str(v)) for k, v in items))
    labels = {CLUSTER_LABEL: label_value(cluster)}
    if _GFD_PRODUCT.fullmatch(gpu_type) and len(gpu_type) <= 63:
        labels[GPU_PRODUCT_LABEL] = gpu_type
    return tuple(sorted(labels.items()))


def selector_overlaps(selectors: Mapping[str, Selector]) -> list[tuple[str, str]]:
    """Pairs (a, b), a before b in the given order, where a node b selects may match a.

    That is: one selector's labels are a subset of the other's (equal ones included).
    """
    names = list(selectors)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            sa, sb = set(selectors[a]), set(selectors[b])
            if sa <= sb or sb <= sa:
                out.append((a, b))
    return out
