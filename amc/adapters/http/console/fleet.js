// Fleet: every host, online or when last seen, and its devices: serial, model, attributes,
// idle, busy or offline, the task a busy one runs and that task's current step.

import { call, problemText } from "./api.js";
import { ago, badge, el, pairs, replace, table, taskLink } from "./dom.js";

const ACTIVE = ["assigned", "dispatched"];

// The active tasks this caller may read, by id (a device may run another tenant's task:
// then only its id shows). One listing per active status, not one read per device.
async function activeTasks() {
  const found = new Map();
  await Promise.all(
    ACTIVE.map(async (status) => {
      let after = null;
      for (let pages = 0; pages < 10; pages++) {
        const query = new URLSearchParams({ status, limit: "1000" });
        if (after) query.set("after", after);
        const answer = await call("/v1/tasks?" + query);
        if (!answer.ok) return;
        for (const task of answer.data.tasks) found.set(task.id, task);
        after = answer.data.next;
        if (!after) return;
      }
    }),
  );
  return found;
}

export function currentStep(task) {
  const attempt = task && task.attempts.length ? task.attempts[task.attempts.length - 1] : null;
  const progress = attempt && !attempt.ended_at ? attempt.progress : null;
  if (!progress) return task && task.status === "assigned" ? "starting" : "";
  if (progress.step !== null) return progress.step;
  return progress.ended ? `between steps (${progress.ended} ended)` : "starting";
}

function deviceState(device) {
  if (!device.online) return "offline";
  return device.reservation ? "busy" : "idle";
}

export function fleetPage(main) {
  const counts = el("div", { class: "counts", id: "fleet-counts" });
  const hostsBox = el("div", { id: "fleet-hosts" });
  replace(main, el("h1", null, "Fleet"), counts, hostsBox);
  let shown = new Set(); // the task ids the page shows, so a change to one re-reads it

  async function refresh() {
    const [hostsAnswer, tasks] = await Promise.all([call("/v1/hosts"), activeTasks()]);
    if (!hostsAnswer.ok) {
      replace(hostsBox, el("p", { class: "error" }, problemText(hostsAnswer)));
      return;
    }
    const hosts = hostsAnswer.data.hosts;
    const tally = { idle: 0, busy: 0, offline: 0 };
    let online = 0;
    shown = new Set();
    const fragment = document.createDocumentFragment();
    for (const host of hosts) {
      if (host.online) online++;
      const rows = host.devices.map((device) => {
        const state = deviceState(device);
        tally[state]++;
        const reservation = device.reservation;
        const task = reservation ? tasks.get(reservation.task_id) : null;
        if (reservation) shown.add(reservation.task_id);
        const { model, ...others } = device.attributes;
        return el(
          "tr",
          { "data-serial": device.serial, "data-state": state },
          el("td", null, device.serial),
          el("td", null, model || ""),
          el("td", null, pairs(others)),
          el("td", null, badge(state)),
          el("td", null, reservation ? taskLink(reservation.task_id) : ""),
          el("td", { class: "step" }, reservation ? currentStep(task) : ""),
        );
      });
      fragment.append(
        el(
          "section",
          { class: "card host", "data-host": host.id },
          el(
            "h2",
            null,
            host.id,
            " ",
            badge(host.online ? "online" : "offline"),
            el("span", { class: "muted" }, " last seen " + ago(host.last_seen_at)),
          ),
          host.devices.length
            ? table(["Serial", "Model", "Attributes", "State", "Task", "Current step"], rows, { class: "devices" })
            : el("p", { class: "muted" }, "No devices."),
        ),
      );
    }
    const devices = tally.idle + tally.busy + tally.offline;
    replace(
      counts,
      count("hosts", `${online} / ${hosts.length}`, "online"),
      count("devices", devices),
      count("idle", tally.idle),
      count("busy", tally.busy),
      count("offline", tally.offline),
    );
    if (!hosts.length) fragment.append(el("p", { class: "muted" }, "No host has registered yet."));
    replace(hostsBox, fragment);
  }

  return {
    refresh,
    task: (view) => shown.has(view.id) || ACTIVE.includes(view.status),
    host: () => true,
  };
}

function count(name, value, note) {
  return el(
    "div",
    { class: "count", "data-count": name },
    el("strong", null, String(value)),
    el("span", null, note ? `${name} ${note}` : name),
  );
}
