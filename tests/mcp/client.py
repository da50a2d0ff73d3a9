"""Drive toolgraph's MCP server with the official Python SDK (`mcp` from PyPI, pinned in
requirements.txt) and print what it saw as one JSON object; tests/integration/mcp_serve.rs asserts on it.

Usage: python client.py CONFIG_JSON, where CONFIG_JSON has
  "stdio": [command, args...] | "url": "http://.../mcp" (+ "key": an API key),
  "mode": "auto" (discover; 2026-07-28) | "legacy" (the initialize handshake),
  "request": a request to orchestrate, "needs": a request that lacks a value,
  "answer": the value the user gives when asked, "elicit": whether the client can be asked,
  "only_needs": only orchestrate the `needs` request,
  "linger": seconds to keep the session open at the end.
"""

import asyncio
import json
import sys

import httpx2
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def structured(result):
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


async def drive(cfg):
    out = {"progress": [], "chain_progress": [], "elicited": []}

    async def on_elicit(_ctx, params):
        out["elicited"].append({"message": params.message, "schema": params.requested_schema})
        props = params.requested_schema.get("properties", {})
        return types.ElicitResult(action="accept", content={k: cfg["answer"] for k in props})

    async def on_progress(progress, total, message):
        out["progress"].append({"progress": progress, "message": message})

    if "stdio" in cfg:
        server = StdioServerParameters(command=cfg["stdio"][0], args=cfg["stdio"][1:], env=cfg.get("env"), cwd=cfg.get("cwd"))
    else:
        headers = {"Authorization": f"Bearer {cfg['key']}"} if cfg.get("key") else {}
        server = streamable_http_client(cfg["url"], http_client=httpx2.AsyncClient(headers=headers, timeout=120))
    kwargs = {"mode": cfg.get("mode", "auto"), "read_timeout_seconds": 120}
    if cfg.get("elicit", True):
        kwargs["elicitation_callback"] = on_elicit
    async with Client(server, **kwargs) as client:
        out["protocol_version"] = client.protocol_version
        out["server"] = client.server_info.name if client.server_info else None
        tools = await client.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)

        if cfg.get("only_needs"):
            asked = await client.call_tool("orchestrate", {"request": cfg["needs"]})
            out["needs"] = structured(asked)
            return out

        found = await client.call_tool("search_tools", {"query": cfg["request"], "k": 5})
        out["search"] = structured(found)

        run = await client.call_tool("orchestrate", {"request": cfg["request"]}, progress_callback=on_progress)
        out["orchestrate"] = structured(run)
        out["orchestrate_is_error"] = bool(run.is_error)
        run_id = out["orchestrate"].get("run_id")

        got = await client.call_tool("get_run", {"run_id": run_id})
        out["get_run"] = {k: structured(got).get(k) for k in ("run_id", "status", "request")}

        first = (out["orchestrate"].get("chain") or [{}])[0].get("api")
        if first:
            out["neighbors"] = structured(await client.call_tool("graph_neighbors", {"id": first, "k": 5}))

        steps = [{"api": c["api"], "arguments": c["arguments"]} for c in out["orchestrate"].get("chain") or []]
        if steps:
            async def on_chain_progress(progress, total, message):
                out["chain_progress"].append({"progress": progress, "message": message})

            replayed = await client.call_tool("execute_chain", {"steps": steps, "request": cfg["request"]}, progress_callback=on_chain_progress)
            out["execute_chain"] = {k: structured(replayed).get(k) for k in ("status", "chain", "run_id")}

        resources = await client.list_resources()
        out["resources"] = [str(r.uri) for r in resources.resources]
        read = await client.read_resource(f"toolgraph://runs/{run_id}")
        out["resource_status"] = json.loads(read.contents[0].text).get("status")

        if cfg.get("needs"):
            asked = await client.call_tool("orchestrate", {"request": cfg["needs"]})
            out["needs"] = structured(asked)
            out["needs_run"] = structured(await client.call_tool("get_run", {"run_id": out["needs"]["run_id"]}))

        bad = await client.call_tool("get_run", {"run_id": "run_does_not_exist"})
        out["bad_is_error"] = bool(bad.is_error)
        out["bad_text"] = bad.content[0].text if bad.content else ""
        # Keep the session open a while (the server's background upkeep runs meanwhile).
        await asyncio.sleep(cfg.get("linger", 0))
    return out


def main():
    cfg = json.loads(sys.argv[1])
    print(json.dumps(asyncio.run(drive(cfg))))


if __name__ == "__main__":
    main()
