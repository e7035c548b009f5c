// Live updates: the server's event stream (GET /v1/events), read with fetch, because the
// browser's EventSource cannot send the Authorization header.
//
// The stream sends `event: task` (a task view, as GET /v1/tasks/{id}), `event: host` (a
// host view, as GET /v1/hosts/{id}) and `event: reset` (re-read everything shown), each
// with an `id`; a dropped stream reconnects with Last-Event-ID and the server catches up
// or sends a reset. A server without the stream (404) is re-read on a timer instead.
//
// No read waits for ever (BOUNDED/s1): the server sends a keep-alive comment on a quiet
// stream every 15 s (or the seconds its Amc-Keep-Alive header says), so a stream silent for
// twice that long is dead (a leader that froze, a link that went away unheard) and is
// aborted and opened again; a stream that ends or is cut is opened again at once (behind a
// load balancer that follows the leader, the new one answers), then with a backoff.

import { request, SignedOut } from "./api.js";

const POLL_MS = 2000;
const MAX_BACKOFF_MS = 4000;
const KEEPALIVE_SECONDS = 15;
const SILENCE_FACTOR = 2;

// Parses server-sent events from text chunks; `emit(type, data, id)` gets each event.
export class SseParser {
  constructor(emit) {
    this.emit = emit;
    this.buffer = "";
    this.type = "";
    this.data = [];
    this.lastId = null;
  }

  push(chunk) {
    this.buffer += chunk;
    let end;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end).replace(/\r$/, "");
      this.buffer = this.buffer.slice(end + 1);
      this.line(line);
    }
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.emit(this.type || "message", this.data.join("\n"), this.lastId);
      this.type = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a comment: the keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id") this.lastId = value;
  }
}

// Tells `listener` ({task(view), host(view), reset()}) of changes until stop().
// `onMode(text)` hears how: "live", "reconnecting…" or "re-reading every 2 s".
export class Live {
  constructor(listener, onMode) {
    this.listener = listener;
    this.onMode = onMode;
    this.stopped = false;
    this.abort = null;
    this.timer = null;
    this.lastId = null;
    this.opened = false; // the latest connection had a stream open
    this.openedAt = 0;
  }

  start() {
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
    clearTimeout(this.timer);
  }

  async run() {
    let backoff = 0; // the wait before the next connection: none right after a stream was open
    while (!this.stopped) {
      this.opened = false;
      try {
        const absent = await this.stream();
        if (absent) return this.poll();
      } catch (error) {
        if (this.stopped || error instanceof SignedOut) return;
      }
      if (this.stopped) return;
      this.onMode("reconnecting…");
      // At once after a stream that lived (a leader gone); a stream that ends as soon as it
      // opens is no better than one that does not open.
      const lived = this.opened && Date.now() - this.openedAt > 1000;
      backoff = lived ? 0 : Math.min(Math.max(backoff * 2, 500), MAX_BACKOFF_MS);
      await new Promise((resolve) => (this.timer = setTimeout(resolve, backoff)));
    }
  }

  // Reads the stream until it ends; true when the server has none.
  async stream() {
    this.abort = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (this.lastId) headers["Last-Event-ID"] = this.lastId;
    const response = await request("/v1/events", { headers, signal: this.abort.signal });
    if (response.status === 404) return true;
    if (!response.ok || !response.body) throw new Error("events: " + response.status);
    this.opened = true;
    this.openedAt = Date.now();
    this.onMode("live");
    const said = Number(response.headers.get("Amc-Keep-Alive"));
    const silenceMs = SILENCE_FACTOR * 1000 * (said > 0 && said <= 3600 ? said : KEEPALIVE_SECONDS);
    const abort = this.abort;
    let watchdog = setTimeout(() => abort.abort(), silenceMs);
    if (this.lastId === null) this.listener.reset(); // anything missed before the stream opened
    const parser = new SseParser((type, data, id) => {
      this.lastId = id;
      this.dispatch(type, data);
    });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        clearTimeout(watchdog); // heard something, a keep-alive at least
        watchdog = setTimeout(() => abort.abort(), silenceMs);
        parser.push(value);
      }
    } finally {
      clearTimeout(watchdog);
    }
  }

  dispatch(type, data) {
    let value;
    try {
      value = JSON.parse(data);
    } catch {
      return;
    }
    if (type === "task") this.listener.task(value);
    else if (type === "host") this.listener.host(value);
    else if (type === "reset") this.listener.reset();
  }

  poll() {
    this.onMode("re-reading every " + POLL_MS / 1000 + " s");
    const tick = () => {
      if (this.stopped) return;
      this.listener.reset();
      this.timer = setTimeout(tick, POLL_MS);
    };
    this.timer = setTimeout(tick, POLL_MS);
  }
}
