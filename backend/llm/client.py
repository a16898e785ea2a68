"""Kept for old imports: the litellm client lives in backend/llm/litellm_client.py."""

from backend.llm.litellm_client import LiteLLM

__all__ = ["LiteLLM"]
