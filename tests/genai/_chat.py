"""A small OpenAI-compatible chat server on loopback, deterministic: asked a question it calls the ``add`` tool,
given the tool's result it answers with it. Usage grows with the history so every call's tokens differ."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

TOOL_ARGUMENTS = {"a": 2, "b": 3}
ANSWER = "The answer is 5."
PROMPT_TOKENS_PER_MESSAGE = 11


def usage_of(messages: int, completion: int) -> dict[str, int]:
    prompt = PROMPT_TOKENS_PER_MESSAGE * messages
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def reply(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": ANSWER}
        finish, completion = "stop", 6
    else:
        function = {"name": "add", "arguments": json.dumps(TOOL_ARGUMENTS)}
        call = {"id": "call_add_1", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish, completion = "tool_calls", 9
    return {
        "id": f"chatcmpl-{len(messages)}",
        "object": "chat.completion",
        "created": 1,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_of(len(messages), completion),
    }


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps(reply(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class ChatServer:
    """``with ChatServer() as server:`` serves ``server.base_url`` (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> ChatServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
