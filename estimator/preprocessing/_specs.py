"""Parsing specs for the host phase: the spec classes live in ``estimator.io`` (the
bottom layer, beside ``parse_example``); ``_merge_specs`` joins the specs of several
columns."""

from __future__ import annotations

from collections.abc import Mapping

from estimator.io._specs import STRING as STRING
from estimator.io._specs import FixedLenFeature as FixedLenFeature
from estimator.io._specs import VarLenFeature as VarLenFeature
from estimator.io._specs import _as_list as _as_list
from estimator.io._specs import _as_tuple as _as_tuple
from estimator.io._specs import dtype_name as dtype_name
from estimator.io._specs import feature_from_config as feature_from_config


def _merge_specs(into: dict, spec: Mapping) -> dict:
    for key, value in spec.items():
        if key in into and into[key] != value:
            raise ValueError(
                f"feature_columns contain different parse_spec for key {key}. Given {value} "
                f"and {into[key]}"
            )
        into[key] = value
    return into
