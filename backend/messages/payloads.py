"""What a message carries in ``meta.json``: one pydantic model per item shape (docs/api.md
"What meta.json carries").

Writers build these models and hand them to :meth:`Message.build`; a message holds its
items as the plain JSON they dump to (``exclude_unset``: a field is sent when it was set,
in the order of the model's fields), so what is stored and sent is the same JSON it always
was, and a message stored before, or written by a newer writer with a kind or a key this
code does not know, still loads: readers pass over what they do not know.

Which kind carries which model is said in one place per kind: the run's own kinds in
:data:`backend.messages.kinds.PAYLOADS`, an action's in its definition
(``ActionDef.payload``, backend/actions/registry). The web UI's types are generated from
both (``MetaPayloads``, by ``make frontend-types``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from backend.messages.tasks import PlanTask

JsonObject = dict[str, Any]  # an item as it is stored and sent (a model's dump)


def plain(item: object) -> object:
    """An item as a message holds it: a model's dump; anything else (a stored dict, an
    unknown kind's item) as it is."""
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return item


# an item of meta.json: the JSON Schema names the models (backend/messages/schema.py)
MetaItem = Annotated[Any, BeforeValidator(plain)]


def plain_items(items: Iterable[object]) -> list[Any]:
    return [plain(item) for item in items]


M = TypeVar("M", bound=BaseModel)


def read_items(items: Iterable[object], model: type[M]) -> list[M]:
    """The items that are a ``model`` (a kind's meta.json read back, typed); an item that
    is not one (another model of the kind, a newer writer's) is passed over."""
    out = []
    for item in items:
        try:
            out.append(model.model_validate(item))
        except ValidationError:
            continue
    return out


def read_payload(items: Iterable[object], models: Sequence[type[BaseModel]]) -> list[BaseModel]:
    """Each item as the first of ``models`` (a kind's payload) that it is; an item that is
    none of them (a newer writer's) is passed over."""
    out: list[BaseModel] = []
    for item in items:
        for model in models:
            try:
                out.append(model.model_validate(item))
            except ValidationError:
                continue
            break
    return out


class RunBudget(BaseModel):
    """The run's budgets (None: no limit; docs/api.md "Budgets")."""

    max_tokens: int | None
    max_cost_usd: float | None
    max_seconds: float | None
    max_model_calls: int | None


class BudgetNote(BaseModel):
    """``question`` (the goal): the budgets the run started with."""

    budget: RunBudget


class SummaryFile(BaseModel):
    """``finish_summery``: a file the run wrote (the same fields as a listed FileEntry)."""

    filepath: str
    filename: str
    url: str
    filesize: int


class PreviewEntry(BaseModel):
    """A running preview: ``preview`` messages' item, and in ``finish_summery`` under
    ``preview``."""

    name: str
    port: int
    path: str
    url: str


class SummaryPreview(BaseModel):
    """``finish_summery``: a preview that runs (file lists pass over it: no filepath)."""

    preview: PreviewEntry


class ApprovalShown(BaseModel):
    """What the approval's content shows of the action: all of it (``whole``) or what
    ``note`` says was left out; ``lines`` and ``chars`` of what it would write or run."""

    whole: bool
    note: str
    lines: int
    chars: int


class ApprovalRequest(BaseModel):
    """``approval``: the action waiting for the person (docs/api.md "Approvals")."""

    model_config = ConfigDict(populate_by_name=True)

    action_type: str = Field(description="The action's name (an ActionType).")
    class_: str = Field(alias="class", description="Its approval class: edits, terminal, ...")
    params: dict[str, str]
    digest: str = Field(description="What an answer echoes to approve exactly this action.")
    shown: ApprovalShown


__all__ = [
    "ApprovalRequest",
    "ApprovalShown",
    "BudgetNote",
    "JsonObject",
    "MetaItem",
    "PlanTask",
    "PreviewEntry",
    "RunBudget",
    "SummaryFile",
    "SummaryPreview",
    "plain",
    "plain_items",
    "read_items",
    "read_payload",
]
