"""``tf.ConfigProto``, ``tf.GPUOptions``, ``tf.GraphOptions``, ``tf.OptimizerOptions``:
session settings, accepted and ignored.

TF 1 programs pass a session configuration to ``RunConfig(session_config=...)``, often to
let GPU memory grow (``config.gpu_options.allow_growth = True``). There is no session
here: XLA and jax manage devices and memory (see jax's ``XLA_PYTHON_CLIENT_PREALLOCATE`` /
``XLA_PYTHON_CLIENT_MEM_FRACTION`` environment variables for what these options did), so
``RunConfig`` accepts the object and ignores it. The classes keep TF's field names and
defaults, nested messages and protobuf's errors for unknown fields, so a misspelt option
fails as it does in TF.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["ConfigProto", "GPUOptions", "GraphOptions", "OptimizerOptions"]


class _Message:
    """A protobuf-like message: known fields with defaults, settable (internal)."""

    _FIELDS: ClassVar[dict[str, Any]] = {}
    _MESSAGES: ClassVar[dict[str, type]] = {}

    def __init__(self, **fields: Any) -> None:
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default() if callable(default) else default)
        for name, kind in self._MESSAGES.items():
            object.__setattr__(self, name, kind())
        for name, value in fields.items():
            if name not in self._FIELDS and name not in self._MESSAGES:
                raise ValueError(f'Protocol message {type(self).__name__} has no "{name}" field.')
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise AttributeError(
                f'Assignment not allowed (no field "{name}" in protocol message object).'
            )
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        changed = {
            k: v
            for k, v in vars(self).items()
            if k in self._MESSAGES or v != (d() if callable(d := self._FIELDS[k]) else d)
        }
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"


class GPUOptions(_Message):
    """``tf.GPUOptions`` (ignored: jax manages device memory)."""

    _FIELDS: ClassVar[dict[str, Any]] = {
        "per_process_gpu_memory_fraction": 0.0,
        "allow_growth": False,
        "allocator_type": "",
        "deferred_deletion_bytes": 0,
        "visible_device_list": "",
        "polling_active_delay_usecs": 0,
        "polling_inactive_delay_msecs": 0,
        "force_gpu_compatible": False,
    }


class OptimizerOptions(_Message):
    """``tf.OptimizerOptions`` (ignored: XLA compiles every step)."""

    L1, L0 = 0, -1  # TF's optimization levels
    DEFAULT, OFF, ON_1, ON_2 = 0, -1, 1, 2  # TF's global JIT levels
    _FIELDS: ClassVar[dict[str, Any]] = {
        "do_common_subexpression_elimination": False,
        "do_constant_folding": False,
        "max_folded_constant_in_bytes": 0,
        "do_function_inlining": False,
        "opt_level": 0,
        "global_jit_level": 0,
        "cpu_global_jit": False,
    }


class GraphOptions(_Message):
    """``tf.GraphOptions`` (ignored: there is no graph)."""

    _FIELDS: ClassVar[dict[str, Any]] = {
        "enable_recv_scheduling": False,
        "build_cost_model": 0,
        "build_cost_model_after": 0,
        "infer_shapes": False,
        "place_pruned_graph": False,
        "enable_bfloat16_sendrecv": False,
        "timeline_step": 0,
    }
    _MESSAGES: ClassVar[dict[str, type]] = {"optimizer_options": OptimizerOptions}


class ConfigProto(_Message):
    """``tf.ConfigProto``: session settings, accepted by ``RunConfig(session_config=...)``
    and ignored (see the module docstring)."""

    _FIELDS: ClassVar[dict[str, Any]] = {
        "device_count": dict,
        "intra_op_parallelism_threads": 0,
        "inter_op_parallelism_threads": 0,
        "use_per_session_threads": False,
        "placement_period": 0,
        "device_filters": list,
        "allow_soft_placement": False,
        "log_device_placement": False,
        "operation_timeout_in_ms": 0,
        "isolate_session_state": False,
        "share_cluster_devices_in_session": False,
    }
    _MESSAGES: ClassVar[dict[str, type]] = {
        "gpu_options": GPUOptions,
        "graph_options": GraphOptions,
    }
