"""preview: start what the agent built as a service of the sandbox and give its URL
(docs/api.md "Previews"). The service outlives the action; backend/previews hosts it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Shown, brief
from backend.messages.payloads import PreviewEntry

if TYPE_CHECKING:
    from backend.previews.host import ServiceRuntime


def _port(text: str) -> int | None:
    try:
        port = int(text.strip())
    except ValueError:
        return None
    return port if 1 <= port <= 65535 else None


async def preview(ctx: ActionContext, action: Action) -> Done:
    from backend.previews.host import clean_name

    p = action.params
    port = _port(p.get("port", ""))
    if port is None:
        return Done(
            "failure", f"'port' must be a number from 1 to 65535, not {p.get('port', '')!r}."
        )
    path = p.get("path", "").strip() or "/"
    if not path.startswith("/"):
        path = "/" + path
    name = clean_name(p.get("name", "").strip(), port)
    if name is None:
        return Done(
            "failure",
            "'name' may hold letters, digits, '.', '_' and '-' (at most 40), starting with a "
            "letter or digit.",
        )
    host = ctx.tools.previews if ctx.tools is not None else None
    runtime = getattr(ctx.runtime, "inner", ctx.runtime)  # the run's stop-checked view
    if host is None or not hasattr(runtime, "start_service"):
        return Done("failure", f"Previews are not available in the {runtime.name} runtime here.")
    command = p.get("command", "").strip()
    if not command:
        row = await host.existing(ctx.workspace, port)
        if row is None:
            return Done(
                "failure",
                f"No service of this conversation runs on port {port}. Give the command that "
                "starts it: <preview><port>…</port><command>…</command></preview> (a server "
                "started with terminal_run stops when its command ends).",
            )
        entry = {**host.entry(row), "path": path}
        entry["url"] = host.url(replace(row, path=path))
        content = f"Preview {row.name!r} is at {entry['url']}."
        return Done("success", content, url=entry["url"], data=[PreviewEntry(**entry)])
    started = await host.start(
        cast("ServiceRuntime", runtime),
        ctx.workspace,
        name=name,
        port=port,
        path=path,
        command=command,
        on_output=ctx.on_output,
    )
    url = str(started.data[0]["url"]) if started.data else ""
    data = [PreviewEntry.model_validate(d) for d in started.data]
    return Done("success" if started.ok else "failure", started.content, url=url, data=list(data))


def show(content: str, data: list[PreviewEntry]) -> str:
    if not data:
        return content
    return f"Preview {data[0].name}: {data[0].url}"


def describe(action: Action) -> str:
    p = action.params
    cmd = f" `{brief(p.get('command', ''), 200)}`" if p.get("command") else ""
    return f"preview port {p.get('port', '')}{cmd}"


ACTION = ActionDef(
    spec=ActionSpec(
        name="preview",
        description=(
            "Let the person use a web app, site or API you built: starts `command` as a "
            "service in the workspace that keeps running after this action, waits until it "
            "accepts connections on `port` and answers with its URL. Use it (not "
            "terminal_run) for servers; the app must listen on 127.0.0.1 or 0.0.0.0 at "
            "`port`. `path` (default /) is the page to open; `name` names the preview. "
            "Static HTML files need no server: the person can open them as they are."
        ),
        required=("port",),
        optional=("command", "path", "name"),
        raw=("command",),
        example=(
            "<preview><port>8080</port><command>python3 -m http.server 8080</command></preview>"
        ),
    ),
    kind="preview",
    handler=preview,
    payload=(PreviewEntry,),
    shown=Shown(
        label=lambda a: (
            f"preview port {a.params.get('port', '')}: {a.params.get('command', '')[:200]}"
        ),
        running=lambda a: a.params.get("command", "") or f"preview port {a.params.get('port', '')}",
        describe=describe,
        show=show,
        lemonai="browser",  # LemonAI's client has no preview: its page chip, with the URL
        order=35,
    ),
    handling=Handling(
        approval="terminal",
        streams_output=True,
    ),
)
