"""The OpenAPI document: routes declare their bodies and answers (meta.py), the document
is built from those declarations and the pydantic models behind them (document.py)."""

from backend.openapi.document import ApiInfo, api_path, build_document
from backend.openapi.meta import Operation, Param, Reply, operation, operation_of, undocumented

__all__ = [
    "ApiInfo",
    "Operation",
    "Param",
    "Reply",
    "api_path",
    "build_document",
    "operation",
    "operation_of",
    "undocumented",
]
