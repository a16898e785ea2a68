from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from backend.store.tables import Base

config = context.config
target_metadata = Base.metadata

connection = config.attributes.get("connection")
if connection is not None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:  # `alembic` command line: -x url=...
    url = context.get_x_argument(as_dictionary=True).get("url", "sqlite:///./data/planact.db")
    engine = create_engine(url)
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
