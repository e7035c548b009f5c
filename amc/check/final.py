"""The final state of a run, read over HTTP with an admin token once the clients are done."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import httpx


@attrs.frozen
class FinalState:
    """Every task (its wire form, by id) and the message ids of the tasks asked for."""

    tasks: dict[str, dict[str, Any]]
    messages: dict[str, set[str]]


def read_final_state(url: str, token: str, message_tasks: Iterable[str] = (), timeout: float = 30.0) -> FinalState:
    """All tasks (paged), and the messages of `message_tasks`, from the server at `url`."""
    headers = {"Authorization": f"Bearer {token}"}
    tasks: dict[str, dict[str, Any]] = {}
    messages: dict[str, set[str]] = {}
    with httpx.Client(base_url=url, headers=headers, timeout=timeout) as http:
        after: str | None = None
        while True:
            params = {"limit": "1000", **({"after": after} if after else {})}
            response = http.get("/v1/tasks", params=params)
            response.raise_for_status()
            page = response.json()
            tasks.update((task["id"], task) for task in page["tasks"])
            after = page["next"]
            if not after:
                break
        for task_id in sorted(set(message_tasks)):
            response = http.get(f"/v1/tasks/{task_id}/messages")
            listed = response.json()["messages"] if response.status_code == 200 else []
            messages[task_id] = {message["id"] for message in listed}
    return FinalState(tasks, messages)
