"""The demo run: the local stack with a small workload, a live table, and a verdict.

What happens, in order (about ten seconds):

1. A server on a fresh temporary store, with 3-second leases so expiries show quickly,
   and its own tokens file (admin, client, hosts h1, h2 and h3); simulated phones: three
   for host h1, one (a Pixel 7, like one of h1's) for host h2, one (an SM-G991B, like one
   of h1's) for host h3.
2. Only h2's and h3's Host Agents start at first, and `checkout` (any Pixel 7) and
   `app-update` (any SM-G991B) are submitted: h2, and h3, are then the only hosts that can
   claim them.
3. h1's agent starts and the rest of the workload is submitted (`workload`);
   `nightly-report`, last in line, is cancelled while still queued. Before any of it, the
   demo builds a minimal APK (`workload.build_app`) and uploads it as an input, as `amc
   input upload` does; `app-install` installs it, launches the package read from it, takes
   a screenshot and uninstalls it, recorded on video (`"record": true`).
4. While `checkout` runs a shell command on h2's phone, the h2 agent is SIGKILLed: its
   lease lapses, the server requeues the task, and h1 runs it on its own Pixel 7.
   While `app-update` runs a shell command on h3's phone, the h3 agent gets SIGTERM with a
   drain time shorter than the command: it claims no more, lets the command end, releases
   the attempt (no verdict on the task) and exits 0; the server requeues the task at once,
   and h1 runs it on its own SM-G991B.
5. While `long-sync` runs `sleep 8` on its phone, it is cancelled: the agent learns it at
   its next lease renewal, stops the command at once and reports `cancelled`.
6. While `photo-share` runs `sleep 2`, it is steered twice (skip `upload`, insert `crop`
   after `capture`): its agent applies both at the next step boundary.
7. While `inventory-scan` runs `sleep 2`, it is paused and sent a follow-up. The demo
   keeps it paused until it has seen the lease renewed twice while the task reads
   `paused`, then resumes it; when it ends done, the server collects the follow-up into a
   successor task (`scan-send`), which a host then runs.
8. When every task has ended, the verdict (`workload.check`) compares each task resource,
   history and messages with what the protocol says, and the summary shows the tasks by
   status, the messages and what became of them, each cancellation's request-to-stop
   latency (to the delivery, to the last device command of the attempt from the
   simulator's log, and to the recorded result), and how many screenshots and UI dumps
   the hosts stored, with the command that lists a task's (`amc task artifacts ID`), and
   what became of the app under test: where it was installed, and its recording's mp4.

Exit 0 only when every task ended as it must. With --json the narration and tables go to
stderr and stdout carries one JSON document: the verdict, and per job its task, messages
and problems. The store and the logs are deleted, unless the demo failed or --keep was
given.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used, so that `amc --help` stays quick
    from collections.abc import Callable, Sequence

    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from amc.cli.client import JsonObject
    from amc.cli.demo.workload import Job
    from amc.cli.launch import Stack
    from amc.sim import SimDeviceSpec, Simulator

from amc.core.lifecycle import ACTIVE_STATUSES, TERMINAL_STATUSES, TaskStatus

LEASE_SECONDS = 3.0
DRAIN_SECONDS = 0.5  # h3's drain time: shorter than app-update's `download`, so the attempt is released
ENDINGS = (TaskStatus.done, TaskStatus.failed, TaskStatus.cancelled)  # in the summary's order


def _write_tokens(path: Path) -> dict[str, JsonObject]:
    """A tokens file for the demo: role or host id -> entry. Mode 0600, like amc serve's own."""
    entries = {
        "admin": {"token": secrets.token_urlsafe(32), "role": "admin"},
        "client": {"token": secrets.token_urlsafe(32), "role": "client", "tenant": "default"},
        "h1": {"token": secrets.token_urlsafe(32), "role": "host", "host_id": "h1"},
        "h2": {"token": secrets.token_urlsafe(32), "role": "host", "host_id": "h2"},
        "h3": {"token": secrets.token_urlsafe(32), "role": "host", "host_id": "h3"},
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(list(entries.values()), out, indent=2)
    return entries


class DemoRun:
    """One run of the demo: start, drive the workload, watch, judge."""

    def __init__(self, stack: Stack, console: Console, workdir: Path):
        from amc.cli.demo import workload

        self.stack = stack
        self.console = console
        self.workdir = workdir
        self.app = workload.build_app()
        self.jobs = workload.jobs(self.app)
        self.by_name = {job.name: job for job in self.jobs}
        self.ids: dict[str, str] = {}  # job name -> task id
        self.tasks: dict[str, JsonObject] = {}  # job name -> latest task resource
        self.notes: dict[str, str] = {}  # job name -> what the demo did to it
        self.messages: dict[str, list[JsonObject]] = {}  # job name -> its messages, read at the end
        self.histories: dict[str, list[JsonObject]] = {}  # job name -> its history, read at the end
        self.problems: dict[str, list[str]] = {}  # job name -> the verdict's findings
        self.seen: dict[str, JsonObject] = {}  # job name -> what the demo saw while it ran (workload.check)
        self.began = time.monotonic()
        self.live: Live | None = None
        self.simulators: dict[str, Simulator] = {}  # host id -> its Simulator
        self.killed_at: float | None = None  # wall time h2 was killed
        self.drained = False  # h3 was told to stop
        self.cancel_sent = False  # long-sync's cancellation
        self.steered = False  # photo-share's steers
        self.pause_sent = False  # inventory-scan's pause (and its follow-up)
        self.resume_sent = False

    # -- narration ------------------------------------------------------------------------

    def say(self, text: str) -> None:
        line = f"[dim]{time.monotonic() - self.began:5.1f}s[/dim]  {text}"
        (self.live.console if self.live is not None else self.console).print(line)

    # -- the run --------------------------------------------------------------------------

    def run(self, timeout: float) -> bool:
        from amc.cli.client import ApiClient
        from amc.cli.demo import workload
        from amc.sim import default_specs

        stack, workdir = self.stack, self.workdir
        tokens = _write_tokens(workdir / "tokens.json")
        url = stack.start_server(workdir / "store", tokens=workdir / "tokens.json", lease_seconds=LEASE_SECONDS)
        specs = default_specs(5)
        self.simulators = {
            workload.SURVIVOR_HOST: stack.start_simulator(specs[:3]),
            workload.DOOMED_HOST: stack.start_simulator(specs[3:4]),
            workload.RETIRING_HOST: stack.start_simulator(specs[4:]),
        }
        self.client = ApiClient(url, tokens["client"]["token"])
        admin = ApiClient(url, tokens["admin"]["token"])
        self.console.print(
            f"[bold]amc demo[/bold]: a control plane, three Host Agents and five simulated phones, on a throwaway store.\n"
            f"  server  {url}  (store {workdir / 'store'}, leases of {LEASE_SECONDS:g} s)\n"
            f"  console {url}/ui  (sign in with the client token in {workdir / 'tokens.json'})\n"
            f"  h1      {self._phones(specs[:3])}\n"
            f"  h2      {self._phones(specs[3:4])}: this host will die mid-task\n"
            f"  h3      {self._phones(specs[4:])}: this host will be stopped gracefully mid-task "
            f"(drain time {DRAIN_SECONDS:g} s)\n"
        )
        self.console.print(f"The workload ({len(self.jobs)} tasks):")
        for job in self.jobs:
            self.console.print(f"  [bold]{job.name:<15}[/bold] {job.story}")
        self.console.print()
        try:
            self._upload_app()
            self._start_agent(workload.DOOMED_HOST, tokens)
            self._start_agent(workload.RETIRING_HOST, tokens, drain_timeout=DRAIN_SECONDS)
            stack.wait_registered(admin, workload.DOOMED_HOST, 1)
            stack.wait_registered(admin, workload.RETIRING_HOST, 1)
            self.say(
                "hosts h2 and h3 registered their phones; submitting [bold]checkout[/bold] (any Pixel 7) and "
                "[bold]app-update[/bold] (any SM-G991B): only h2, and only h3, can claim them now"
            )
            self._submit(self.by_name["checkout"])
            self._submit(self.by_name["app-update"])
            for name, host in (("checkout", "h2"), ("app-update", "h3")):

                def claimed(name: str = name) -> bool:
                    return self._task(name)["status"] in ACTIVE_STATUSES

                self._wait_for(claimed, 10, f"{name} to be claimed by {host}")
            self._start_agent(workload.SURVIVOR_HOST, tokens)
            self.say("host h1 starting with three phones; submitting the rest of the workload")
            for job in self.jobs:
                if job.name not in self.ids and job.body is not None:
                    self._submit(job)
            self._cancel_queued()
            self._follow(timeout)
            retiring = stack.agents[workload.RETIRING_HOST]
            retiring.wait(10)
            self.seen["app-update"] = {"host_exit": retiring.process.returncode}
            for name, task_id in self.ids.items():
                self.histories[name] = self.client.history(task_id)["events"]
                self.messages[name] = self.client.messages(task_id)["messages"]
            self.seen.setdefault("app-install", {})["artifacts"] = self.client.artifacts(self.ids["app-install"])
            self._refresh()
        finally:
            self.client.close()
            admin.close()
        return self._summary()

    def _upload_app(self) -> None:
        """Write the built APK where a user would keep theirs and upload it, as `amc input upload` does."""
        path = self.workdir / f"{self.app.package}.apk"
        path.write_bytes(self.app.data)
        found, _ = self.client.upload_input(path)
        assert found["ref"] == self.app.ref, "the server named the APK by another sha256"
        self.say(
            f"built {path.name} ({len(self.app.data)} bytes: package {self.app.package}, version code "
            f"{self.app.version_code}) and uploaded it once as input [bold]{found['ref'][:19]}…[/bold]"
        )

    def _phones(self, specs: Sequence[SimDeviceSpec]) -> str:
        return ", ".join(f"{spec.serial} ({spec.model})" for spec in specs)

    def _start_agent(self, host_id: str, tokens: dict[str, JsonObject], drain_timeout: float = 60.0) -> None:
        simulator = self.simulators[host_id]
        self.stack.start_agent(
            host_id,
            tokens[host_id]["token"],
            adb_port=simulator.server_port,
            scan_seconds=0.5,
            claim_wait=5,
            drain_timeout=drain_timeout,
        )

    def _submit(self, job: Job) -> None:
        task, _ = self.client.submit(job.submission())
        self.ids[job.name] = task["id"]
        self.tasks[job.name] = task

    def _task(self, name: str) -> JsonObject:
        self.tasks[name] = self.client.task(self.ids[name])
        return self.tasks[name]

    def _wait_for(self, condition: Callable[[], object], timeout: float, what: str) -> None:
        from amc.cli.launch import LaunchError

        deadline = time.monotonic() + timeout
        while not condition():
            self.stack.check()
            if time.monotonic() > deadline:
                raise LaunchError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _cancel_queued(self) -> None:
        """Cancel `nightly-report` right after submitting it: it is last in line, so still queued."""
        name = "nightly-report"
        task, pending = self.client.cancel(self.ids[name], "no longer needed")
        self.tasks[name] = task
        self.notes[name] = "cancel requested while queued"
        self.say(
            f"cancel [bold]{name}[/bold] while it waits in the queue: "
            + ("it was already running!" if pending else f"{task['status']} at once, nothing ran")
        )

    # -- following the workload -----------------------------------------------------------

    def _follow(self, timeout: float) -> None:
        """Poll the tasks until all ended, acting on them when their moment comes."""
        from rich.live import Live

        from amc.cli.launch import LaunchError

        deadline = time.monotonic() + timeout
        shown: dict[str, str] = {}
        # A live table on a terminal; in a pipe or CI log, one line per status change.
        live = (
            Live(self._table(), console=self.console, refresh_per_second=8, transient=False)
            if self.console.is_terminal
            else None
        )
        if live is not None:
            live.start()
            self.live = live
        try:
            while True:
                self._refresh()
                self._act()
                if live is not None:
                    live.update(self._table())
                else:
                    for name, task in self.tasks.items():
                        state = f"{self._status(task):<19} {self._where(task)}"
                        if task.get("paused"):  # one line per renewal: the lease lives on while paused
                            state += f"  lease renewals: {task['attempts'][-1]['renewals']}"
                        if shown.get(name) != state:
                            shown[name] = state
                            self.say(f"{name:<15} {state}")
                if self._settled():
                    break
                self.stack.check()
                if time.monotonic() > deadline:
                    raise LaunchError(f"the workload did not end within {timeout:g} s")
                time.sleep(0.2)
        finally:
            if live is not None:
                live.stop()
                self.live = None
        if live is None:
            self.console.print(self._table())

    def _settled(self) -> bool:
        """Every task ended, and every successor exists or never will (its task did not end done)."""
        for job in self.jobs:
            task = self.tasks.get(job.name)
            if task is None:
                before = self.tasks.get(job.successor_of) if job.successor_of else None
                if before is None or before["status"] not in (TaskStatus.failed, TaskStatus.cancelled):
                    return False
            elif task["status"] not in TERMINAL_STATUSES:
                return False
        return True

    def _refresh(self) -> None:
        page = self.client.all_tasks()
        by_id = {task["id"]: task for task in page["tasks"]}
        for name, task_id in self.ids.items():
            if task_id in by_id:
                self.tasks[name] = by_id[task_id]

    def _act(self) -> None:
        """Kill h2 while checkout runs its shell command there; stop h3 gracefully while app-update
        runs its own; cancel long-sync while its runs."""
        from amc.cli.demo import workload

        update = self.tasks["app-update"]
        if not self.drained and update["status"] == TaskStatus.dispatched and self._sleeping(update):
            self.drained = True
            self.stack.agents[workload.RETIRING_HOST].terminate()
            self.notes["app-update"] = "h3 stopped gracefully while running it"
            self.say(
                "[bold yellow]host h3 stopped[/bold yellow] (SIGTERM) while [bold]app-update[/bold] runs on it: "
                f"it claims no more; after its {DRAIN_SECONDS:g} s drain the running step ends, and the attempt "
                "is released for another host"
            )
        if self.drained and len(update["attempts"]) > 1:
            self.notes["app-update"] = "h3 stopped gracefully; released, requeued"

        checkout = self.tasks["checkout"]
        if self.killed_at is None and checkout["status"] == TaskStatus.dispatched and self._sleeping(checkout):
            agent = self.stack.agents[workload.DOOMED_HOST]
            agent.signal(signal.SIGKILL)
            agent.process.wait(5)
            self.killed_at = time.time()
            self.notes["checkout"] = "h2 killed while running it"
            self.say(
                "[bold red]host h2 killed[/bold red] (SIGKILL) while [bold]checkout[/bold] runs on it: "
                "nobody renews its lease now; the server requeues it when the lease lapses"
            )
        sync = self.tasks["long-sync"]
        if not self.cancel_sent and sync["status"] == TaskStatus.dispatched and self._sleeping(sync):
            self.cancel_sent = True
            task, pending = self.client.cancel(self.ids["long-sync"], "the user changed their mind")
            self.tasks["long-sync"] = task
            self.notes["long-sync"] = "cancel requested while running"
            self.say(
                f"cancel [bold]long-sync[/bold] while `sleep 8` runs on {self._where(task)}: "
                + ("pending until its host hears of it" if pending else f"answered {task['status']}")
            )
        if checkout["status"] not in TERMINAL_STATUSES and len(checkout["attempts"]) > 1:
            self.notes["checkout"] = "h2 killed; lease lapsed, requeued"
        self._steer()
        self._pause()

    def _steer(self) -> None:
        """Send photo-share's corrections while its `load` step sleeps on the phone."""
        from amc.cli.views import edit_text

        job = self.by_name["photo-share"]
        task = self.tasks[job.name]
        if self.steered or task["status"] != TaskStatus.dispatched or not self._sleeping(task):
            return
        self.steered = True
        for edit in job.steers:
            self.client.post_message(self.ids[job.name], "steer", data=edit)
        said = ", then ".join(edit_text(edit) for edit in job.steers)
        self.notes[job.name] = f"steered while loading: {said}"
        self.say(
            f"steer [bold]{job.name}[/bold] while its `load` step runs: {said}; its agent applies them "
            f"at the next step boundary"
        )

    def _pause(self) -> None:
        """Pause inventory-scan while `scan` runs, send it a follow-up, keep it paused over two
        renewals, resume it; when it is done, pick up its successor."""
        job = self.by_name["inventory-scan"]
        task = self.tasks[job.name]
        task_id = self.ids[job.name]
        if not self.pause_sent and task["status"] == TaskStatus.dispatched and self._sleeping(task):
            self.pause_sent = True
            self.client.post_message(task_id, "pause", text="hold on: a colleague checks the shelf")
            assert job.follow_up is not None  # the paused job has one
            self.client.post_message(task_id, "follow_up", **job.follow_up)
            self.notes[job.name] = "pause and follow-up sent while scanning"
            self.say(
                f"pause [bold]{job.name}[/bold] while `scan` runs, and send it a follow-up "
                f"({job.follow_up['text']!r}) for after it"
            )
        if task.get("paused") and not self.resume_sent:
            renewals = self.seen.setdefault(job.name, {}).setdefault("paused_renewals", [])
            renewals.append(task["attempts"][-1]["renewals"])
            self.notes[job.name] = f"paused; lease renewed {renewals[-1] - renewals[0]}× since"
            if renewals[-1] - renewals[0] >= 2:
                self.resume_sent = True
                self.client.post_message(task_id, "resume")
                self.notes[job.name] = f"paused over {renewals[-1] - renewals[0]} lease renewals, resume sent"
                self.say(
                    f"resume [bold]{job.name}[/bold]: it stayed paused while its lease was renewed "
                    f"{renewals[-1] - renewals[0]} times"
                )
        successor = next(j for j in self.jobs if j.successor_of == job.name)
        if task["status"] == TaskStatus.done and successor.name not in self.ids:
            asked = [m for m in self.client.messages(task_id)["messages"] if m.get("successor")]
            if asked:
                self.ids[successor.name] = asked[0]["successor"]
                self.tasks[successor.name] = self.client.task(asked[0]["successor"])
                self.notes[job.name] = "paused, resumed, done; follow-up collected"
                self.notes[successor.name] = f"follow-up of {job.name}, collected into {asked[0]['successor']}"
                self.say(
                    f"{job.name} ended done: the server collected its follow-up into "
                    f"[bold]{asked[0]['successor']}[/bold]"
                )

    def _sleeping(self, task: JsonObject) -> bool:
        """True when the task's current attempt has a `sleep` running on its simulated phone."""
        attempt = task["attempts"][-1]
        simulator = self.simulators.get(attempt["host_id"])
        if simulator is None:
            return False
        return any("sleep" in record.command and record.end == "running" for record in simulator.log(attempt["device"]))

    @staticmethod
    def _where(task: JsonObject) -> str:
        from amc.cli.views import where

        return where(task)

    @staticmethod
    def _status(task: JsonObject) -> str:
        from amc.cli.views import task_status_text

        return task_status_text(task).plain

    def _table(self) -> Table:
        from rich.table import Table
        from rich.text import Text

        from amc.cli.views import task_status_text

        table = Table(show_edge=False, pad_edge=False, title="tasks", title_justify="left")
        for column in ("JOB", "STATUS", "ATTEMPTS", "WHERE", "WHAT HAPPENED"):
            table.add_column(column, no_wrap=column != "WHAT HAPPENED")
        for job in self.jobs:
            task = self.tasks.get(job.name)
            if task is None:
                table.add_row(job.name, "-", "", "", "")
                continue
            attempts = " ".join(f"{a['number']}:{a['outcome'] or 'active'}" for a in task["attempts"]) or "-"
            table.add_row(
                job.name, task_status_text(task), attempts, self._where(task), Text(self.notes.get(job.name, ""))
            )
        return table

    # -- the verdict ----------------------------------------------------------------------

    def _summary(self) -> bool:
        from collections import Counter

        from amc.cli.demo import workload

        counts = Counter(task["status"] for task in self.tasks.values())
        self.console.print(
            "\n[bold]Tasks by status:[/bold] "
            + ", ".join(f"{status} {counts[status]}" for status in ENDINGS if counts[status])
        )
        self._latencies()
        self._lease_loss()
        self._messages()
        self._evidence()
        self._app_under_test()
        for job in self.jobs:
            if job.name in self.tasks:
                self.problems[job.name] = workload.check(
                    job,
                    self.tasks[job.name],
                    self.histories[job.name],
                    self.messages[job.name],
                    self.seen.get(job.name),
                )
            else:
                self.problems[job.name] = [f"no task: {job.successor_of}'s follow-up was never collected"]
        bad = {name: found for name, found in self.problems.items() if found}
        if bad:
            self.console.print("\n[bold red]FAILED[/bold red]: these tasks did not end as the protocol says they must:")
            for name, found in bad.items():
                for problem in found:
                    self.console.print(f"  {name} ({self.ids.get(name, '-')}): {problem}")
            return False
        self.console.print(
            f"\n[bold green]OK[/bold green]: all {len(self.jobs)} tasks ended as the protocol says "
            f"they must (done, an app installed and recorded, cancelled while queued, cancelled while running, requeued after a lost "
            f"lease, released by a host stopped gracefully, steered, paused and resumed, a follow-up "
            f"collected). Try it yourself: `amc up`, then `amc task --help`."
        )
        return True

    def _messages(self) -> None:
        """What each message asked and what became of it; the steered task's steps."""
        from rich.table import Table
        from rich.text import Text

        from amc.cli.views import boundary_text, message_note, message_state_text, request_text, steps_table

        table = Table(show_edge=False, pad_edge=False, title="Messages, and what became of them:", title_justify="left")
        for column in ("JOB", "MESSAGE", "STATE", "BOUNDARY", "DETAIL"):
            table.add_column(column, no_wrap=column in ("JOB", "STATE"), overflow="fold")  # ids stay whole
        for job in self.jobs:
            for message in self.messages.get(job.name, []):
                table.add_row(
                    job.name,
                    Text(request_text(message)),
                    message_state_text(message["state"]),
                    boundary_text(message.get("boundary")),
                    Text(message_note(message)),
                )
        if table.row_count:
            self.console.print(table)
        steered = (self.tasks.get("photo-share", {}).get("result") or {}).get("steps")
        if steered:
            steps = steps_table(steered)
            steps.title = "photo-share's steps after the steers:"
            self.console.print(steps)

    def _evidence(self) -> None:
        """How much evidence the hosts stored, and where to look at it."""
        listed = [
            artifact_id
            for task in self.tasks.values()
            for step in (task.get("result") or {}).get("steps") or ()
            for artifact_id in step.get("artifacts") or ()
        ]
        example = self.ids.get("settings-smoke", "<ID>")
        self.console.print(
            f"\n[bold]Evidence:[/bold] the Host Agents stored {len(listed)} screenshots, UI dumps and recordings with their "
            "tasks' steps. To list a task's (settings-smoke's here; on your own stack, `amc up`, any task's):"
        )
        self.console.print(f"  [bold]amc task artifacts {example}[/bold]", soft_wrap=True)

    def _app_under_test(self) -> None:
        """What became of the built APK, and where app-install's screen recording is."""
        from amc.cli.views import size_text

        task = self.tasks.get("app-install")
        if task is None or not task.get("attempts"):
            return
        attempt = task["attempts"][-1]
        self.console.print(
            f"\n[bold]App under test:[/bold] app-install installed {self.app.package} (version code "
            f"{self.app.version_code}, as its host read them from the uploaded APK) on "
            f"{attempt['host_id']}/{attempt['device']}, launched it, took a screenshot and uninstalled it."
        )
        videos = [a for a in self.seen["app-install"].get("artifacts") or () if a["content_type"] == "video/mp4"]
        for video in videos:
            self.console.print(
                f'[bold]Recording:[/bold] app-install ran with "record": true; its screen recording is '
                f"{video['name']} ({size_text(video['size'])}, {video['content_type']}), an artifact of its "
                f"{video['step']} step. To fetch it:"
            )
            self.console.print(f"  [bold]amc task artifacts {task['id']} --download DIR[/bold]", soft_wrap=True)

    def document(self, passed: bool) -> JsonObject:
        """The run as one JSON document (`--json`): the verdict, and per job what the server holds."""
        return {
            "passed": passed,
            "jobs": [
                {
                    "name": job.name,
                    "kind": job.kind,
                    "task": self.tasks.get(job.name),
                    "messages": self.messages.get(job.name, []),
                    "seen": self.seen.get(job.name, {}),
                    "note": self.notes.get(job.name, ""),
                    "problems": self.problems.get(job.name, []),
                }
                for job in self.jobs
            ],
        }

    def _latencies(self) -> None:
        from rich.table import Table

        from amc.cli.views import parse_time

        table = Table(
            show_edge=False, pad_edge=False, title="Cancellations, from the request to:", title_justify="left"
        )
        for column in ("JOB", "ASKED WHILE", "DELIVERED", "DEVICE QUIET", "REPORTED", "RESULT"):
            table.add_column(column, no_wrap=True)

        def ms(start: float, end: float | None) -> str:
            return "-" if end is None else f"{max(0.0, end - start) * 1000:.0f} ms"

        for name in ("nightly-report", "long-sync"):
            task = self.tasks[name]
            cancellation = task.get("cancellation")
            result = task.get("result") or {}
            outcome = f"{task['status']} ({result.get('reason')})"
            if not cancellation:
                table.add_row(name, "?", "-", "-", "-", outcome)
                continue
            asked = parse_time(cancellation["requested_at"])
            recorded = parse_time(result["recorded_at"]) if result.get("recorded_at") else None
            if cancellation["attempt"] is None:  # queued: it ends in the request itself; nothing ran
                table.add_row(name, TaskStatus.queued, "n/a", "n/a", ms(asked, recorded), outcome)
                continue
            delivered = parse_time(cancellation["delivered_at"]) if cancellation.get("delivered_at") else None
            table.add_row(
                name, "running", ms(asked, delivered), ms(asked, self._device_quiet(task)), ms(asked, recorded), outcome
            )
        self.console.print(table)
        self.console.print(
            f"[dim]  A running task hears of its cancellation at its next lease renewal (every "
            f"{LEASE_SECONDS / 3:g} s with {LEASE_SECONDS:g} s leases); its agent then stops the running "
            f"command at once.[/dim]"
        )

    def _device_quiet(self, task: JsonObject) -> float | None:
        """When the last device command of the cancelled attempt ended (the simulator's log)."""
        from amc.cli.views import parse_time

        if not task.get("attempts"):
            return None
        attempt = task["attempts"][-1]
        simulator = self.simulators.get(attempt["host_id"])
        if simulator is None:
            return None
        # The attempt's commands: those that started between its assignment and its report
        # (the device runs other tasks' commands afterwards). Server and simulator share
        # this machine's clock.
        began, reported = parse_time(attempt["assigned_at"]), parse_time(attempt["ended_at"])
        ended = [
            record.ended_at
            for record in simulator.log(attempt["device"])
            if began <= record.started_at <= reported and record.ended_at is not None
        ]
        return max(ended) if ended else None

    def _lease_loss(self) -> None:
        from amc.cli.views import parse_time, when

        task = self.tasks["checkout"]
        attempts = task["attempts"]
        if len(attempts) < 2 or self.killed_at is None:
            return
        first, last = attempts[0], attempts[-1]
        lapse = parse_time(first["lease_expires_at"]) - self.killed_at
        self.console.print(
            f"[bold]Lease loss:[/bold] checkout's attempt 1 on {first['host_id']}/{first['device']} lost its host; "
            f"its lease lapsed {lapse:.1f} s after the kill ({when(first['ended_at'])}), the task was requeued, "
            f"and attempt {last['number']} on {last['host_id']}/{last['device']} ended {last['outcome']}."
        )
