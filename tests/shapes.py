"""The Vue client's message shape (docs/api.md "The stream"), for assertions."""

MESSAGE_KEYS = [
    "role", "uuid", "status", "content", "comments", "memorized", "timestamp", "type",
    "conversation_id", "run_id", "seq", "meta",
]  # fmt: skip
META_KEYS = ["pid", "task_id", "action_type", "filepath", "url", "json", "content", "is_active"]
