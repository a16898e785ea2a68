"""Which model ids take the lean OpenAI-compatible path, and where their requests go.

The lean path (backend/llm/openai_compat.py) serves:

- the litellm prefixes of providers that speak the OpenAI chat-completions protocol
  (table below): the prefix is stripped from the model name sent, as litellm does, and
  ``LLM_BASE_URL`` (when set) replaces the provider's default URL;
- any other model id when ``LLM_BASE_URL`` is set (a bare ``qwen2.5-coder`` or an
  unknown prefix such as ``qwen/qwen3-coder``: sent as written), unless its prefix names a
  provider with a protocol of its own.

Everything else goes to litellm (backend/llm/litellm_client.py): Anthropic, Gemini,
Vertex, Bedrock, Azure, Cohere, Ollama's native API (``ollama/``, ``ollama_chat/`` with
Ollama's own URL, ``http://127.0.0.1:11434``; with a URL ending in ``/v1`` they are sent to
Ollama's OpenAI-compatible API on the lean path, as ``openai/<model>`` is), and bare
ids without ``LLM_BASE_URL`` (litellm knows that ``gpt-4o`` is OpenAI's).
``LLM_CLIENT=litellm`` sends every call through litellm.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# prefix: (default base URL or None when LLM_BASE_URL is required, API key variable)
OPENAI_COMPATIBLE: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "together_ai": ("https://api.together.xyz/v1", "TOGETHERAI_API_KEY"),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
    "deepinfra": ("https://api.deepinfra.com/v1/openai", "DEEPINFRA_API_KEY"),
    "cerebras": ("https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
    "lm_studio": ("http://127.0.0.1:1234/v1", "LM_STUDIO_API_KEY"),
    "hosted_vllm": (None, "HOSTED_VLLM_API_KEY"),
    "openai_like": (None, None),
    "custom_openai": (None, None),
}

# Ollama's native prefixes: with a base URL ending in /v1 (Ollama's OpenAI-compatible API)
# they take the lean path, with Ollama's own URL litellm's native client
OLLAMA = frozenset({"ollama", "ollama_chat"})

# prefixes whose providers litellm speaks another protocol to, even with LLM_BASE_URL
NATIVE = frozenset(
    {
        "anthropic",
        "azure",
        "azure_ai",
        "bedrock",
        "bedrock_converse",
        "cohere",
        "cohere_chat",
        "gemini",
        "huggingface",
        "mistral",
        "ollama",
        "ollama_chat",
        "palm",
        "replicate",
        "sagemaker",
        "vertex_ai",
        "vertex_ai_beta",
        "watsonx",
    }
)


@dataclass(frozen=True)
class Endpoint:
    url: str  # the full chat-completions URL
    model: str  # the model name the server expects
    api_key: str | None


def lean_endpoint(model: str, base_url: str | None, api_key: str | None) -> Endpoint | None:
    """The OpenAI-compatible endpoint for ``model``, or None when litellm should serve it."""
    prefix, slash, rest = model.partition("/")
    if slash and prefix in OPENAI_COMPATIBLE:
        default_url, key_var = OPENAI_COMPATIBLE[prefix]
        url = base_url
        if not url and prefix == "openai":
            url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        url = url or default_url
        if not url:
            return None  # litellm explains what is missing
        key = api_key or (os.environ.get(key_var) if key_var else None)
        return Endpoint(_completions_url(url), rest, key)
    if slash and prefix in OLLAMA and base_url and _is_v1(base_url):
        # an ollama/ id with Ollama's OpenAI-compatible URL (…/v1): that API, the name bare
        return Endpoint(_completions_url(base_url), rest, api_key)
    if base_url and not (slash and prefix in NATIVE):
        return Endpoint(_completions_url(base_url), model, api_key)
    return None


def _is_v1(base_url: str) -> bool:
    return base_url.rstrip("/").removesuffix("/chat/completions").endswith("/v1")


def _completions_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"
