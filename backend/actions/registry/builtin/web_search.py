"""web_search: titles, links and snippets from the configured provider (docs/tools.md)."""

from __future__ import annotations

from pydantic import BaseModel

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Offer, Shown
from backend.runtime.base import cap_text


class SearchHit(BaseModel):
    """``search``: one result of the search, in the provider's order."""

    title: str
    url: str
    snippet: str


async def offer(ctx: ActionContext) -> Offer | None:
    return Offer() if ctx.tools is not None and ctx.tools.search is not None else None


async def web_search(ctx: ActionContext, action: Action) -> Done:
    search = ctx.tools.search if ctx.tools is not None else None
    if search is None:
        return Done("failure", "Web search is not offered here (SEARCH_PROVIDER is not set).")
    result = await search(action.params.get("query", ""))
    hits = [SearchHit.model_validate(hit) for hit in result.data.get("results", [])]
    return Done(result.status, cap_text(result.content), data=list(hits))


def show(content: str, data: list[SearchHit]) -> str:
    if not data:
        return content
    return "\n".join(f"{hit.title or hit.url}\n  {hit.url}" for hit in data)


ACTION = ActionDef(
    spec=ActionSpec(
        name="web_search",
        aliases=("search", "websearch", "search_web", "google_search"),
        description="Search the web; returns titles, links and snippets.",
        required=("query",),
        example="<web_search><query>python 3.13 release notes</query></web_search>",
    ),
    kind="search",
    handler=web_search,
    payload=(SearchHit,),
    shown=Shown(
        label=lambda a: f"web_search: {a.params.get('query', '')[:200]}",
        running=lambda a: f"Searching the web: {a.params.get('query', '')}",
        describe=lambda a: f"web_search {a.params.get('query', '')[:200]!r}",
        show=show,
        order=50,
    ),
    handling=Handling(
        offer=offer,
        approval="web",
    ),
)
