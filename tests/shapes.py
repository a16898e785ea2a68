"""The Vue client's message shape (CONTRACT.md section 3), for assertions."""

MESSAGE_KEYS = [
    "role", "uuid", "status", "content", "comments", "memorized", "timestamp", "type",
    "conversation_id", "run_id", "seq", "meta",
]  # fmt: skip
META_KEYS = ["pid", "task_id", "action_type", "filepath", "url", "json", "content", "is_active"]
