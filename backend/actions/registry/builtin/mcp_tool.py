"""mcp_tool: a tool of a configured MCP server, called as `server__tool` (docs/tools.md)."""

from __future__ import annotations

import json
from typing import Any

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Offer, Shown
from backend.tools.mcp.parts import McpCall

FILES = "mcp_files"  # the workspace folder images and binary resources of results go to
SCHEMA_CHARS = 2_000  # of each tool's input schema in the prompt


async def offer(ctx: ActionContext) -> Offer | None:
    mcp = ctx.tools.mcp if ctx.tools is not None else None
    if mcp is None:
        return None
    listing = await mcp.tools_for(ctx.mcp_servers)
    lines = []
    for tool in listing.tools:
        schema = json.dumps(tool.input_schema, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {tool.name}: {tool.description.strip() or '(no description)'}")
        lines.append(f"  arguments (JSON schema): {schema[:SCHEMA_CHARS]}")
    note = "MCP tools you can call with <mcp_tool>:\n" + "\n".join(lines) if lines else ""
    if note and listing.failures:  # the model knows what it cannot use, and why
        note += "\nNot available now: " + " ".join(f.content for f in listing.failures)
    # the servers of this run's pick that are down: the run names each once, quietly (its
    # card is for calls the model makes); an unknown name in an old pick too
    problems = {
        f"mcp:{server}": f"Not available in this run (the Tools panel shows its state): {why}"
        for server, why in listing.down.items()
    }
    for fault in listing.failures:
        if fault.content not in listing.down.values():
            problems[f"mcp:{fault.content}"] = fault.content
    return Offer(note=note, problems=problems, available=bool(listing.tools))


async def mcp_tool(ctx: ActionContext, action: Action) -> Done:
    mcp = ctx.tools.mcp if ctx.tools is not None else None
    name = action.params.get("name", "").strip()
    raw = action.params.get("arguments", "")
    data = McpCall(name=name, arguments=_arguments_shown(raw), parts=[])
    if mcp is None:
        return Done("failure", "No MCP servers are configured here.", data=[data])
    server = name.partition("__")[0]
    if ctx.mcp_servers is not None and server not in ctx.mcp_servers:
        picked = ", ".join(ctx.mcp_servers) or "none"
        return Done(
            "failure",
            f"MCP server {server!r} is not offered in this run (its servers: {picked}).",
            data=[data],
        )
    on_output = ctx.on_output
    progress = None
    if on_output is not None:
        out = on_output

        async def progress(line: str) -> None:  # the running card shows it live
            out("stdout", line.encode())

    result = await mcp.call(
        name,
        raw or "{}",
        files_dir=ctx.workspace / FILES,
        workspace=ctx.workspace,
        on_progress=progress,
    )
    shown = {"name": name, "arguments": data.arguments, "parts": result.parts}
    call = McpCall.model_validate(shown)
    return Done(result.status, result.content, data=[call])


def _arguments_shown(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


def show(content: str, data: list[McpCall]) -> str:
    call = data[0] if data else McpCall(name="", arguments={}, parts=[])
    args = json.dumps(call.arguments, ensure_ascii=False)
    return f"{call.name} {args}\n{content}"


ACTION = ActionDef(
    spec=ActionSpec(
        name="mcp_tool",
        aliases=("use_mcp_tool", "call_mcp_tool"),
        description=(
            "Call a tool of an MCP server by its name `server__tool`, with its arguments "
            "as a JSON object."
        ),
        required=("name", "arguments"),
        raw=("arguments",),
        example=(
            '<mcp_tool><name>files__search</name><arguments>{"pattern": "TODO"}'
            "</arguments></mcp_tool>"
        ),
    ),
    kind="mcp_tool",
    handler=mcp_tool,
    payload=(McpCall,),
    shown=Shown(
        label=lambda a: f"mcp_tool {a.params.get('name', '')}",
        running=lambda a: (
            f"Calling {a.params.get('name', '')} {a.params.get('arguments', '')[:500]}"
        ),
        describe=lambda a: (
            f"mcp_tool {a.params.get('name', '')} {a.params.get('arguments', '')[:120]}"
        ),
        show=show,
        order=70,
    ),
    handling=Handling(
        offer=offer,
        approval="mcp",
        streams_output=True,  # a long call's progress notifications, as live output
    ),
)
