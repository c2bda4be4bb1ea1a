"""TF Serving's ``--model_config_file``: a text-format ``ModelServerConfig`` listing models."""

from google.protobuf import text_format

from estimator.serve._protos import messages


def read_model_config(path: str) -> list[tuple[str, str, dict[str, int]]]:
    """Reads a ``ModelServerConfig`` (text format) as TF Serving's ``--model_config_file``.

    Example file::

        model_config_list {
          config { name: "census" base_path: "/models/census" model_platform: "tensorflow" }
          config { name: "wide_deep" base_path: "/models/wd" version_labels { key: "stable"
                   value: 1795321462 } }
        }

    Args:
      path: the file.

    Returns:
      ``[(name, base_path, {label: version})]`` in the file's order.

    Raises:
      ValueError: if the file does not parse, lists no models (or uses
        ``custom_model_config``), or names a model twice or without a name or base_path
        (TF Serving's messages).
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    config = messages.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as err:
        raise ValueError(
            f"{path} is not a text-format tensorflow.serving.ModelServerConfig: {err}"
        ) from None
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError(
            f"{path}: expected a model_config_list {{ config {{ name: ... base_path: ... }} }}; "
            "custom_model_config is not supported."
        )
    models, seen = [], set()
    for entry in config.model_config_list.config:
        if not entry.name or not entry.base_path:
            raise ValueError(f"{path}: every config needs a name and a base_path; got {entry}")
        if entry.name in seen:
            raise ValueError(f"Illegal to list model {entry.name} multiple times in config list")
        seen.add(entry.name)
        models.append((entry.name, entry.base_path, dict(entry.version_labels)))
    if not models:
        raise ValueError(f"{path}: model_config_list lists no model.")
    return models
