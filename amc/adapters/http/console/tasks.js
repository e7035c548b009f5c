// Tasks: newest first, filtered by status and label, a page at a time along the API's cursor.

import { call, problemText } from "./api.js";
import { badge, el, pairs, replace, table, taskLink, time } from "./dom.js";

const STATUSES = ["queued", "assigned", "dispatched", "done", "failed", "cancelled"];
const PAGE_SIZE = "50";

export function statusBadges(task) {
  return [badge(task.status), task.paused ? badge("paused") : null, task.held ? badge("held") : null];
}

export function waitingText(waiting) {
  if (!waiting) return "";
  const reasons = {
    ready: "ready: next for a free device",
    held: "held (paused while queued)",
    no_device_matches: "no device matches its requirements",
    matching_devices_offline: "every matching device is offline",
    matching_devices_busy: "every matching device is busy",
  };
  const text = reasons[waiting.reason] || waiting.reason;
  return `${text} (${waiting.matching_devices} matching)`;
}

export function tasksPage(main, where) {
  const query = where.query;
  const status = el(
    "select",
    { id: "filter-status", name: "status" },
    el("option", { value: "" }, "any status"),
    STATUSES.map((s) => el("option", { value: s, selected: query.get("status") === s }, s)),
  );
  const label = el("input", {
    id: "filter-label",
    name: "label",
    placeholder: "label key=value",
    value: query.get("label") || "",
  });
  const form = el(
    "form",
    { class: "filters", id: "task-filters" },
    status,
    label,
    el("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    if (status.value) next.set("status", status.value);
    if (label.value.trim()) next.set("label", label.value.trim());
    location.hash = "#/tasks" + (next.toString() ? "?" + next : "");
  });
  const list = el("div", { id: "task-list" });
  const pager = el("nav", { class: "pager" });
  replace(main, el("h1", null, "Tasks"), form, list, pager);
  let shown = new Set();

  async function refresh() {
    const params = new URLSearchParams({ order: "newest", limit: PAGE_SIZE });
    for (const name of ["status", "label", "after"]) if (query.get(name)) params.set(name, query.get(name));
    const answer = await call("/v1/tasks?" + params);
    if (!answer.ok) {
      replace(list, el("p", { class: "error" }, problemText(answer)));
      replace(pager);
      return;
    }
    const { tasks, next } = answer.data;
    shown = new Set(tasks.map((t) => t.id));
    const rows = tasks.map((task) => {
      const attempt = task.attempts.length ? task.attempts[task.attempts.length - 1] : null;
      return el(
        "tr",
        { "data-task": task.id },
        el("td", null, taskLink(task.id)),
        el("td", null, statusBadges(task)),
        el("td", null, pairs(task.labels)),
        el("td", null, time(task.created_at)),
        el("td", null, attempt ? `#${attempt.number} ${attempt.host_id}/${attempt.device}` : ""),
        el("td", null, waitingText(task.waiting)),
      );
    });
    replace(
      list,
      tasks.length
        ? table(["Task", "Status", "Labels", "Created", "Latest attempt", "Waiting"], rows, { class: "tasks" })
        : el(
            "p",
            { class: "muted" },
            next ? "No match among the tasks examined so far; the next page searches on." : "No tasks.",
          ),
    );
    const links = [];
    if (query.get("after")) links.push(el("a", { href: "#", id: "page-back", onclick: back }, "← Back"));
    if (query.get("after")) links.push(el("a", { href: pageHash(null) }, "Newest"));
    if (next) links.push(el("a", { href: pageHash(next), id: "page-next" }, "Older →"));
    replace(pager, links);
  }

  function pageHash(after) {
    const next = new URLSearchParams(query);
    if (after) next.set("after", after);
    else next.delete("after");
    return "#/tasks?" + next;
  }

  function back(event) {
    event.preventDefault();
    history.back();
  }

  return {
    refresh,
    // A change to a task on this page, or a new task on the first page.
    task: (view) => shown.has(view.id) || !query.get("after"),
  };
}
