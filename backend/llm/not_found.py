"""HTTP 404 from a model server, in words that point at what is wrong: the model id when
the server says it has no such model, the URL when the path itself was not found (a base
URL without `/v1` for an OpenAI-compatible server, or with it for Ollama's native API)."""

from __future__ import annotations

from backend.llm.base import LLMConfigError


def names_a_model(said: str) -> bool:
    """Whether a 404's message is about a model (OpenAI: "The model `x` does not exist",
    Ollama: `model "x" not found`), not about the path ("404 page not found", "File Not
    Found", "Not Found")."""
    return "model" in said.lower()


def not_found_error(model: str, url: str, said: str) -> LLMConfigError:
    if names_a_model(said):
        return LLMConfigError(
            f"Model {model!r} was not found at {url} (HTTP 404): check LLM_MODEL (and "
            f"LLM_BASE_URL). Provider said: {said}"
        )
    return LLMConfigError(
        f"The model server has no {url} (HTTP 404 for the path, not for the model): check "
        "LLM_BASE_URL — an OpenAI-compatible server (llama-server, Ollama's /v1, vLLM) takes "
        "its URL ending in /v1 with an openai/ model id; Ollama's native API (ollama/ ids) "
        f"takes its URL without /v1, e.g. http://127.0.0.1:11434. Server said: {said}"
    )
