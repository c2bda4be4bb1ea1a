"""Parsing specs for the host phase (the spec classes are ``estimator.io``'s, the bottom
layer, beside ``parse_example``): ``_merge_specs`` joins the specs of several
columns."""

from __future__ import annotations

from collections.abc import Mapping


def _merge_specs(into: dict, spec: Mapping) -> dict:
    for key, value in spec.items():
        if key in into and into[key] != value:
            raise ValueError(
                f"feature_columns contain different parse_spec for key {key}. Given {value} "
                f"and {into[key]}"
            )
        into[key] = value
    return into
