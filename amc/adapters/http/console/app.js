// The amc console: hash routes, the sign-in, and the page on show kept up to date.
//
//   #/fleet            hosts and devices          (fleet.js)
//   #/tasks?...        the task list              (tasks.js)
//   #/task/<id>        one task and its evidence  (task.js)
//   #/submit           submit a plan              (submit.js)

import { call, session, SignedOut } from "./api.js";
import { el, replace } from "./dom.js";
import { fleetPage } from "./fleet.js";
import { Live } from "./live.js";
import { submitPage } from "./submit.js";
import { taskPage } from "./task.js";
import { tasksPage } from "./tasks.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const liveMode = document.getElementById("live");
const signOutButton = document.getElementById("sign-out");

const MIN_GAP_MS = 400;

let page = null; // the page on show: {refresh(), task?(view), host?(view), stop?()}
let live = null;
let refreshing = null;
let again = false;

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const [name, ...rest] = path.split("/");
  return { name: name || "fleet", arg: rest.length ? decodeURIComponent(rest.join("/")) : null, query: new URLSearchParams(query) };
}

const PAGES = { fleet: fleetPage, tasks: tasksPage, task: taskPage, submit: submitPage };

async function show() {
  if (page && page.stop) page.stop();
  page = null;
  if (!session.token) return showSignIn();
  nav.hidden = false;
  signOutButton.hidden = false;
  const where = route();
  for (const link of nav.querySelectorAll("a")) {
    link.classList.toggle("current", link.dataset.page === where.name || (where.name === "task" && link.dataset.page === "tasks"));
  }
  const make = PAGES[where.name];
  if (!make) {
    replace(main, el("p", { class: "error" }, "No such page."));
    return;
  }
  page = make(main, where);
  await refresh();
  // When the page first showed its data, for the Performance API (bench/console.py reads it).
  performance.mark("amc:rendered", { detail: where.name });
  startLive();
}

// Re-reads the page on show; calls while one runs fold into one more afterwards.
async function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      // The page shown now, read afresh each turn: a page shown while another page's read
      // was still running folds its own read in here, and must get it.
      const current = page;
      const began = performance.now();
      try {
        if (current) await current.refresh();
      } catch (error) {
        if (!(error instanceof SignedOut)) console.error(error);
      }
      // A busy fleet sends many changes a second: re-read at most every MIN_GAP_MS.
      if (again && current === page) {
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, MIN_GAP_MS - (performance.now() - began))));
      }
    } while (again);
  })();
  try {
    await refreshing;
  } finally {
    refreshing = null;
  }
}

function startLive() {
  if (live) return;
  liveMode.hidden = false;
  live = new Live(
    {
      task: (view) => page && (page.task ? page.task(view) : true) && refresh(),
      host: (view) => page && (page.host ? page.host(view) : false) && refresh(),
      reset: () => refresh(),
    },
    (mode) => {
      liveMode.textContent = mode;
      liveMode.dataset.mode = mode === "live" ? "live" : mode.startsWith("re-reading") ? "polling" : "down";
    },
  ).start();
}

function stopLive() {
  if (live) live.stop();
  live = null;
  liveMode.hidden = true;
}

function showSignIn(message) {
  stopLive();
  nav.hidden = true;
  signOutButton.hidden = true;
  const input = el("input", {
    id: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "a client or admin token",
  });
  const error = el("p", { class: "error", id: "sign-in-error", role: "alert" }, message || "");
  const form = el(
    "form",
    { id: "sign-in", class: "card narrow" },
    el("h1", null, "Sign in"),
    el("label", { for: "token" }, "Token"),
    input,
    el("button", { type: "submit" }, "Sign in"),
    error,
    el(
      "p",
      { class: "muted" },
      "Paste a client token (you see your tenant's tasks) or an admin token (every tenant's). ",
      "The console keeps it in this tab's session storage and sends it only as a Bearer header to this server: ",
      "it is gone when the tab closes, and unlike a cookie the browser never sends it on its own, ",
      "so no other site can make requests with it. Sign out forgets it.",
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    session.signIn(input.value.trim());
    try {
      const answer = await call("/v1/tasks?limit=1");
      if (answer.status === 403) {
        session.signOut();
        error.textContent = "This token may not read tasks: sign in with a client or admin token.";
        return;
      }
    } catch (problem) {
      if (problem instanceof SignedOut) return; // the sign-in page shows again, saying so

      throw problem;
    }
    show();
  });
  replace(main, form);
  input.focus();
}

signOutButton.addEventListener("click", () => {
  session.signOut();
  showSignIn("Signed out.");
});
window.addEventListener("amc:signed-out", (event) => showSignIn(event.detail));
window.addEventListener("hashchange", show);
show();
