"""Row updates the graph operations need inside a writer's transaction.

The store's :class:`~contextledger.store.sql.Writer` has no update for messages or model
runs; promotion (seed 000 §4.14) changes a message's visibility and a run's end changes
its status, each inside the caller's transaction.  These helpers issue those updates on
the writer's connection, scoped by tenant like every store query.
"""

from __future__ import annotations

from contextledger.errors import NotFoundError
from contextledger.records.models import Message, ModelRun
from contextledger.store import schema as S
from contextledger.store.sql import Writer

__all__ = ["update_message", "update_model_run"]


def update_message(w: Writer, msg: Message) -> None:
    """Replace a message's visibility and body within ``w``'s transaction.

    Raises:
        NotFoundError: no such message in the writer's tenant.
    """
    t = S.messages
    result = w.conn.execute(
        t.update()
        .where(t.c.id == msg.id, t.c.tenant_id == w.scope.tenant_id)
        .values(visibility=msg.visibility.value, body=msg.model_dump(mode="json"))
    )
    if not result.rowcount:
        raise NotFoundError("message", msg.id)


def update_model_run(w: Writer, run: ModelRun) -> None:
    """Replace a model run's body (status, finish time, usage) within ``w``'s transaction.

    Raises:
        NotFoundError: no such run in the writer's tenant.
    """
    t = S.model_runs
    result = w.conn.execute(
        t.update().where(t.c.id == run.id, t.c.tenant_id == w.scope.tenant_id).values(body=run.model_dump(mode="json"))
    )
    if not result.rowcount:
        raise NotFoundError("model run", run.id)
