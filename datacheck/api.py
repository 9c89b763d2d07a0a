"""The library's public calls, one line each over the layers below (the CLI verbs call these).

``audit`` (the gate), ``load_config``, ``read_report``, ``data_config`` (the config an audit of the
data runs under: the facts a training loop's ``BatchGuard`` takes); the verbs' own entry points live in
:mod:`datacheck.tools` (inspect, clean, diff, schema infer) and :mod:`datacheck.execute`
(parts, merge). Nothing here reads a shard itself.
"""
from __future__ import annotations

from datacheck.execute.audit import audit
from datacheck.execute.setup import config_and_source, data_config, resolve_config_path
from datacheck.model.config import describe_config, load_config
from datacheck.report.model import read_report

__all__ = ["audit", "load_config", "read_report", "resolve_config_path", "config_and_source", "describe_config",
           "data_config"]
