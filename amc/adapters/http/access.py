"""Who may touch what (specs/protocol.md, Roles), as small predicates the endpoints call.

The rules of an operation live in the kernel; these are the edge's rules about callers.
Two of them deliberately answer 404 instead of 403: a client never learns that another
tenant's task exists, and a host never learns of tasks it had no attempt of.
"""

from __future__ import annotations

from amc.adapters.http.auth import Principal
from amc.adapters.http.problems import forbidden, not_found
from amc.core.records import Task

# The roles an endpoint admits (`require_role`).
CLIENT_OR_ADMIN = ("client", "admin")  # a task's side: the clients of its tenant, and admins
HOST = ("host",)
ADMIN = ("admin",)


def require_role(principal: Principal, roles: tuple[str, ...]) -> None:
    if principal.role not in roles:
        raise forbidden(f"the {principal.role} role may not do this")


def require_host(principal: Principal, host_id: str) -> None:
    """Only the host itself: a host acting for another host, or any other role, is 403."""
    if principal.role != "host" or principal.host_id != host_id:
        raise forbidden("only that host may do this")


def require_host_or_admin(principal: Principal, host_id: str) -> None:
    if principal.role == "admin":
        return
    require_host(principal, host_id)


def may_read_task(principal: Principal, task: Task) -> bool:
    if principal.role == "admin":
        return True
    if principal.role == "client":
        return task.tenant == principal.tenant
    return any(attempt.host_id == principal.host_id for attempt in task.attempts)


def visible_task(principal: Principal, task: Task | None, task_id: str) -> Task:
    """The task if `principal` may read it; otherwise 404, the same as for an unknown id."""
    if task is None or not may_read_task(principal, task):
        raise not_found(f"no task {task_id!r}")
    return task
