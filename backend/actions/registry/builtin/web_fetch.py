"""web_fetch: a page's main content as Markdown, its title and links (docs/tools.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Offer, Shown
from backend.runtime.base import OUTPUT_CAP, cap_text

SCREENSHOTS = "screenshots"  # the workspace folder rendered pages' screenshots go to
SHOWN_LINES = 8  # of a page's text in `planact run`


class PageLink(BaseModel):
    url: str
    text: str


class PageRead(BaseModel):
    """``browser`` (web_fetch): the page read. A failure carries ``url`` and an empty
    ``markdown`` only; ``screenshot`` (workspace-relative) only when one was kept."""

    url: str
    status: int = Field(0, description="The HTTP status.")
    kind: str = Field("", description="html, pdf or text.")
    truncated: bool = False
    redirects: list[str] = []
    rendered: bool = Field(False, description="Read with headless Chromium.")
    screenshot: str = ""
    title: str = ""
    markdown: str = Field("", description=f"At most {OUTPUT_CAP:,} characters.")
    links: list[PageLink] = []


async def offer(ctx: ActionContext) -> Offer | None:
    return Offer() if ctx.tools is not None and ctx.tools.fetch is not None else None


async def web_fetch(ctx: ActionContext, action: Action) -> Done:
    fetch = ctx.tools.fetch if ctx.tools is not None else None
    if fetch is None:
        return Done("failure", "Web pages are not offered here (WEB_FETCH=0).")
    result = await fetch(action.params.get("url", ""), screenshot_dir=ctx.workspace / SCREENSHOTS)
    page = dict(result.data)
    page["markdown"] = str(page.get("markdown", ""))[:OUTPUT_CAP]
    shot = page.get("screenshot")
    if shot:
        try:
            page["screenshot"] = (
                Path(shot).resolve().relative_to(ctx.workspace.resolve()).as_posix()
            )
        except ValueError:
            page.pop("screenshot")
    return Done(
        result.status,
        cap_text(result.content),
        filepath=str(page.get("screenshot", "")),
        url=str(page.get("url", "")),
        data=[PageRead.model_validate(page)],
    )


def show(content: str, data: list[PageRead]) -> str:
    page = data[0] if data else PageRead(url="")
    if not page.title and not page.markdown:
        return content
    lines = [ln for ln in page.markdown.splitlines() if ln.strip()]
    head = f"{page.title or '(untitled)'} <{page.url}>"
    return "\n".join([head, *lines[:SHOWN_LINES]])


ACTION = ActionDef(
    spec=ActionSpec(
        name="web_fetch",
        aliases=("fetch", "fetch_url", "browse", "open_url", "read_url"),
        description="Read a web page (or a PDF) as Markdown, with its title and links.",
        required=("url",),
        example="<web_fetch><url>https://docs.python.org/3/whatsnew/</url></web_fetch>",
    ),
    kind="browser",
    handler=web_fetch,
    payload=(PageRead,),
    shown=Shown(
        label=lambda a: f"web_fetch {a.params.get('url', '')[:300]}",
        running=lambda a: f"Reading {a.params.get('url', '')}",
        describe=lambda a: f"web_fetch {a.params.get('url', '')[:300]}",
        show=show,
        order=60,
    ),
    handling=Handling(
        offer=offer,
        approval="web",
    ),
)
