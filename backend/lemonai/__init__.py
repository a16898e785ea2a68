"""The LemonAI client's protocol as an edge adapter under /lemonai: routes, envelope,
base64 stream encoding. It calls planact's services (through services.py), never changes
them."""

from backend.lemonai.routes import create_lemonai_app
from backend.lemonai.services import Services

__all__ = ["Services", "create_lemonai_app"]
