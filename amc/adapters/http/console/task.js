// Task: its status and why it waits, the attempts as a timeline, the steps with their
// outcomes and artifacts, the messages, the cancellation, the history, and the actions.

import { call, problemText, request } from "./api.js";
import { badge, duration, el, json, pairs, replace, section, table, taskLink, time } from "./dom.js";
import { currentStep } from "./fleet.js";
import { statusBadges, waitingText } from "./tasks.js";

const TERMINAL = ["done", "failed", "cancelled"];
const TEXT_LIMIT = 256 * 1024; // characters of a text artifact shown inline
const FILE_TYPE = "application/octet-stream"; // a pulled file's bytes, linked rather than shown
const TEXT_TYPES = /^(text\/|application\/(xml|json)|[^;]*\+xml)/;

function planSteps(plan) {
  if (!plan) return []; // a session (Part D): its steps are its actions
  if (plan.steps) return plan.steps;
  return (plan.stages || []).flatMap((stage) => stage.steps);
}

// The outcomes to show: the result's, else those of the latest attempt that reported some.
function outcomes(task) {
  if (task.result && task.result.steps) return { attempt: task.result.attempt, steps: task.result.steps };
  for (const attempt of [...task.attempts].reverse()) {
    if (attempt.steps) return { attempt: attempt.number, steps: attempt.steps };
  }
  return null;
}

// Steps that no attempt has started yet: the ones a steer may still skip.
function notStarted(task) {
  const attempt = task.attempts.length ? task.attempts[task.attempts.length - 1] : null;
  const steps = planSteps(task.plan).map((s) => s.id);
  if (!attempt || !attempt.progress) return steps;
  const { step, ended } = attempt.progress;
  return steps.slice(ended + (step === null ? 0 : 1));
}

export function taskPage(main, where) {
  const id = where.arg;
  const rendered = new Map(); // artifact id -> its rendered node, fetched once per page
  const urls = []; // object URLs of screenshots, recordings and files, revoked when the page goes
  const actionsNote = el("p", { id: "action-note", role: "status" });
  let current = null;
  let actionsKey = null; // what the actions on show were built for

  // One slot per section, made once: a refresh fills them again, and leaves the actions (and
  // what a person is typing there) in place unless what they offer changed.
  const slots = {};
  for (const name of ["header", "actions", "cancellation", "attempts", "steps", "messages", "history"]) {
    slots[name] = el("div", { class: "slot", "data-slot": name });
  }
  replace(main, Object.values(slots));

  async function refresh() {
    const path = "/v1/tasks/" + encodeURIComponent(id);
    const [task, history, messages, artifacts] = await Promise.all([
      call(path),
      call(path + "/history"),
      call(path + "/messages"),
      call(path + "/artifacts"),
    ]);
    if (!task.ok) {
      const text = task.status === 404 ? "Task not found." : problemText(task);
      for (const slot of Object.values(slots)) replace(slot);
      replace(slots.header, el("h1", null, "Task ", id), el("p", { class: "error", id: "task-error" }, text));
      actionsKey = null;
      return;
    }
    current = task.data;
    const stepList = await steps(task.data, artifacts.ok ? artifacts.data.artifacts : []);
    replace(slots.header, header(task.data));
    const key = JSON.stringify([task.data.status, task.data.paused, task.data.held, notStarted(task.data)]);
    if (key !== actionsKey) {
      actionsKey = key;
      rebuild(slots.actions, actions(task.data));
    }
    replace(slots.cancellation, cancellation(task.data));
    replace(slots.attempts, attempts(task.data));
    replace(slots.steps, stepList);
    replace(slots.messages, messageList(messages.ok ? messages.data.messages : []));
    replace(slots.history, historyList(history.ok ? history.data.events : []));
  }

  // Replaces the actions, carrying over what a person typed or picked, and the focus.
  function rebuild(slot, fresh) {
    const focused = document.activeElement && slot.contains(document.activeElement) ? document.activeElement.id : null;
    const kept = new Map([...slot.querySelectorAll("input[id], select[id]")].map((field) => [field.id, field.value]));
    replace(slot, fresh);
    for (const [fieldId, value] of kept) {
      const field = slot.querySelector("#" + CSS.escape(fieldId));
      if (field && [...(field.options || [{ value }])].some((option) => option.value === value)) field.value = value;
    }
    if (focused) {
      const field = slot.querySelector("#" + CSS.escape(focused));
      if (field) field.focus();
    }
  }

  function header(task) {
    const facts = [
      ["Status", statusBadges(task)],
      ["Waiting", task.waiting ? el("span", { id: "waiting" }, waitingText(task.waiting)) : "—"],
      ["Labels", pairs(task.labels)],
      ["Priority", String(task.priority)],
      ["Requirements", pairs({ ...(task.requirements.serial ? { serial: task.requirements.serial } : {}), ...task.requirements.attributes })],
      ["Created", time(task.created_at)],
      ["Updated", time(task.updated_at)],
      ["Attempts", `${task.attempts.length} of at most ${task.max_attempts}`],
    ];
    if (task.follow_up_of) facts.push(["Follow-up of", taskLink(task.follow_up_of)]);
    if (task.result) facts.push(["Result", [badge(task.result.status), " ", task.result.reason || ""]]);
    if (task.result && Object.keys(task.result.metadata || {}).length)
      facts.push(["Metadata", el("pre", null, json(task.result.metadata))]);
    return el(
      "div",
      { class: "card", id: "task-header" },
      el("h1", null, "Task ", el("span", { id: "task-id" }, task.id), " ", el("span", { id: "task-status" }, statusBadges(task))),
      el("dl", { class: "facts" }, facts.map(([name, value]) => [el("dt", null, name), el("dd", null, value)])),
    );
  }

  function actions(task) {
    const box = el("div", { class: "actions" });
    const ended = TERMINAL.includes(task.status);
    if (!ended) {
      const reason = el("input", { id: "cancel-reason", placeholder: "reason (optional)" });
      box.append(
        el(
          "div",
          { class: "action" },
          confirmed("cancel", "Cancel task", "Cancel this task? A cancellation cannot be undone.", async () => {
            const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
            return call(`/v1/tasks/${encodeURIComponent(id)}/cancel`, { method: "POST", body });
          }),
          reason,
        ),
      );
      const pausing = task.paused || task.held;
      box.append(
        el(
          "div",
          { class: "action" },
          button(pausing ? "resume" : "pause", pausing ? "Resume" : "Pause", () => message({ intent: pausing ? "resume" : "pause" })),
        ),
      );
      const skippable = notStarted(task);
      if (skippable.length && task.plan && task.plan.steps) {
        const pick = el("select", { id: "skip-step" }, skippable.map((s) => el("option", { value: s }, s)));
        box.append(
          el(
            "div",
            { class: "action" },
            confirmed("skip", "Skip step", "Skip this step? A skipped step is not run again.", () =>
              message({ intent: "steer", data: { skip: [pick.value] } }),
            ),
            pick,
          ),
        );
      }
    }
    if (task.status !== "failed" && task.status !== "cancelled") {
      const text = el("input", { id: "follow-up-text", placeholder: "what to do next" });
      box.append(
        el(
          "div",
          { class: "action" },
          confirmed("follow-up", "Follow up", "Send this follow-up? It makes a successor task and cannot be taken back.", () =>
            message({ intent: "follow_up", text: text.value }),
          ),
          text,
        ),
      );
    }
    return section("Actions", box.childNodes.length ? box : el("p", { class: "muted" }, "This task has ended."), actionsNote);
  }

  function message(body) {
    return call(`/v1/tasks/${encodeURIComponent(id)}/messages`, { method: "POST", body });
  }

  function button(name, label, act) {
    return el("button", { type: "button", id: "action-" + name, onclick: () => run(label, act) }, label);
  }

  // A button that asks first, in the page, for actions that cannot be undone.
  function confirmed(name, label, question, act) {
    const box = el("span", { class: "confirm" });
    const ask = el("button", { type: "button", id: "action-" + name }, label);
    ask.addEventListener("click", () => {
      replace(
        box,
        el("span", { class: "question" }, question, " "),
        el("button", { type: "button", id: "confirm-" + name, class: "danger", onclick: () => run(label, act) }, "Yes"),
        el("button", { type: "button", onclick: () => replace(box, ask) }, "No"),
      );
    });
    return add1(box, ask);
  }

  async function run(label, act) {
    actionsNote.textContent = label + "…";
    const answer = await act();
    actionsNote.textContent = answer.ok ? `${label}: accepted.` : `${label}: ${problemText(answer)}`;
    actionsNote.className = answer.ok ? "ok" : "error";
    await refresh();
  }

  function cancellation(task) {
    const c = task.cancellation;
    if (!c) return "";
    return section(
      "Cancellation",
      el(
        "dl",
        { class: "facts", id: "cancellation" },
        el("dt", null, "State"),
        el("dd", null, badge(c.state)),
        el("dt", null, "Requested"),
        el("dd", null, time(c.requested_at)),
        el("dt", null, "Attempt"),
        el("dd", null, c.attempt === null ? "—" : "#" + c.attempt),
        el("dt", null, "Delivered"),
        el("dd", null, time(c.delivered_at)),
        el("dt", null, "Reason"),
        el("dd", null, c.reason || "—"),
      ),
    );
  }

  function attempts(task) {
    if (!task.attempts.length) return section("Attempts", el("p", { class: "muted" }, "No attempt yet."));
    const items = task.attempts.map((a) =>
      el(
        "li",
        { class: "attempt", "data-attempt": a.number },
        el("strong", null, `#${a.number} `, `${a.host_id} / ${a.device}`),
        " ",
        a.outcome ? badge(a.outcome) : badge("running"),
        el(
          "div",
          { class: "times" },
          "assigned ",
          time(a.assigned_at),
          " → dispatched ",
          time(a.dispatched_at),
          " → ended ",
          time(a.ended_at),
          a.ended_at ? ` (${duration(a.assigned_at, a.ended_at)})` : "",
        ),
        !a.ended_at && a.progress ? el("div", { class: "muted" }, "current step: ", currentStep(task)) : "",
        el("div", { class: "muted" }, `${a.renewals} renewal(s), lease until `, time(a.lease_expires_at)),
      ),
    );
    return section("Attempts", el("ol", { class: "timeline", id: "attempts" }, items));
  }

  async function steps(task, artifacts) {
    const reported = outcomes(task);
    const byId = new Map((reported ? reported.steps : []).map((s) => [s.id, s]));
    const ids = planSteps(task.plan).map((s) => s.id);
    for (const s of reported ? reported.steps : []) if (!ids.includes(s.id)) ids.push(s.id); // inserted by a steer
    const running = currentStep(task);
    const perStep = new Map();
    const loose = [];
    for (const artifact of artifacts) {
      if (artifact.step !== null && ids.includes(artifact.step)) {
        if (!perStep.has(artifact.step)) perStep.set(artifact.step, []);
        perStep.get(artifact.step).push(artifact);
      } else loose.push(artifact);
    }
    const items = await Promise.all(
      ids.map(async (stepId) => {
        const outcome = byId.get(stepId);
        const plan = planSteps(task.plan).find((s) => s.id === stepId);
        const status = outcome ? outcome.status : stepId === running ? "running" : "";
        return el(
          "li",
          { class: "step", "data-step": stepId, "data-status": status },
          el("strong", null, stepId),
          plan ? el("span", { class: "muted" }, " " + plan.action) : "",
          " ",
          status ? badge(status) : "",
          outcome && outcome.reason ? el("span", { class: "reason" }, " " + outcome.reason) : "",
          outcome ? el("span", { class: "muted" }, " " + duration(outcome.started_at, outcome.ended_at)) : "",
          outcome && outcome.output ? el("pre", { class: "output" }, outcome.output) : "",
          el("div", { class: "artifacts" }, await Promise.all((perStep.get(stepId) || []).map(artifactNode))),
        );
      }),
    );
    const title = reported ? `Steps (attempt #${reported.attempt})` : "Steps";
    return section(
      title,
      el("ol", { class: "steps", id: "steps" }, items),
      loose.length ? [el("h3", null, "Other artifacts"), el("div", { class: "artifacts" }, await Promise.all(loose.map(artifactNode)))] : "",
    );
  }

  async function artifactNode(artifact) {
    if (rendered.has(artifact.id)) return rendered.get(artifact.id);
    const caption = el(
      "figcaption",
      null,
      `${artifact.name} · attempt #${artifact.attempt} · ${artifact.content_type} · ${artifact.size} bytes`,
    );
    const figure = el("figure", { class: "artifact", "data-artifact": artifact.id, "data-name": artifact.name }, caption);
    const path = `/v1/tasks/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(artifact.id)}`;
    const type = artifact.content_type || "";
    if (type === FILE_TYPE) {
      // A pulled file may be large: it is fetched only when a person asks for it.
      figure.prepend(downloadLink(path, artifact.name));
      rendered.set(artifact.id, figure);
      return figure;
    }
    const response = await request(path);
    if (!response.ok) {
      figure.append(el("p", { class: "error" }, `could not read it (${response.status})`));
      return figure;
    }
    if (type.startsWith("video/")) {
      // A recording plays from a blob the page made: a <video src> cannot send the token.
      const url = URL.createObjectURL(await response.blob());
      urls.push(url);
      figure.prepend(el("video", { src: url, controls: true, preload: "metadata", class: "recording" }));
    } else if (type.startsWith("image/")) {
      const url = URL.createObjectURL(await response.blob());
      urls.push(url);
      figure.prepend(el("img", { src: url, alt: artifact.name, class: "screenshot" }));
    } else if (TEXT_TYPES.test(type) || /\.(xml|txt|log|json)$/.test(artifact.name)) {
      let text = await response.text();
      if (text.length > TEXT_LIMIT) text = text.slice(0, TEXT_LIMIT) + `\n… (${text.length - TEXT_LIMIT} more characters)`;
      figure.prepend(el("pre", { class: "artifact-text" }, text));
    } else {
      const url = URL.createObjectURL(await response.blob());
      urls.push(url);
      figure.prepend(el("a", { href: url, download: artifact.name }, "download"));
    }
    rendered.set(artifact.id, figure);
    return figure;
  }

  // A link that fetches the file with the token when clicked, then saves it under its name
  // through a blob URL (a plain link would go without the token and be refused).
  function downloadLink(path, name) {
    const note = el("span", { class: "muted", role: "status" });
    const link = el("a", { href: "#", class: "download", "data-download": name }, "download ", name);
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      note.textContent = " fetching…";
      const response = await request(path);
      if (!response.ok) {
        note.textContent = ` could not read it (${response.status})`;
        return;
      }
      const url = URL.createObjectURL(await response.blob());
      urls.push(url);
      el("a", { href: url, download: name }).click();
      note.textContent = "";
    });
    return el("span", null, link, note);
  }

  function messageList(messages) {
    if (!messages.length) return section("Messages", el("p", { class: "muted" }, "No messages."));
    const rows = messages.map((m) =>
      el(
        "tr",
        { "data-message": m.id },
        el("td", null, m.id),
        el("td", null, m.intent),
        el("td", null, m.text || "", m.data ? el("pre", null, json(m.data)) : ""),
        el("td", null, badge(m.state)),
        el("td", null, m.attempt === null ? "—" : "#" + m.attempt),
        el("td", null, time(m.created_at)),
        el("td", null, time(m.delivered_at)),
        el("td", null, time(m.admitted_at)),
        el("td", null, time(m.completed_at)),
        el("td", null, m.boundary ? (m.boundary.before_step === null ? "after the last step" : "before " + m.boundary.before_step) : "—"),
        el("td", null, m.detail || "", m.successor ? [" → ", taskLink(m.successor)] : ""),
      ),
    );
    return section(
      "Messages",
      table(["Id", "Intent", "Asked", "State", "Attempt", "Posted", "Delivered", "Admitted", "Completed", "Boundary", "Detail"], rows, {
        id: "messages",
      }),
    );
  }

  function historyList(events) {
    const rows = events.map((e) =>
      el("tr", null, el("td", null, String(e.seq)), el("td", null, time(e.at)), el("td", null, e.type), el("td", null, el("code", null, JSON.stringify(e.data)))),
    );
    return section("History", table(["#", "At", "Event", "Data"], rows, { id: "history" }));
  }

  return {
    refresh,
    task: (view) => view.id === id || (current !== null && view.follow_up_of === id),
    stop: () => urls.forEach((url) => URL.revokeObjectURL(url)),
  };
}

function add1(box, child) {
  box.append(child);
  return box;
}
