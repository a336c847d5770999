from typing import Any, Literal

__all__ = ["show_config"]

def show_config(mode: Literal["stdout", "dicts"] = ...) -> dict[str, Any] | None: ...
