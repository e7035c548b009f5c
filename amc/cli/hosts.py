"""`amc host list`: the hosts the control plane knows, their devices and what runs on them.

The command is `list_hosts`, named "list"; it joins the `host` group of amc/cli/host.py.
"""

from __future__ import annotations

import click

from amc.cli.app import EXIT_HELP, Application, caller_command


@click.command(name="list", epilog=EXIT_HELP)
@caller_command
def list_hosts(app: Application) -> None:
    """List the hosts, their devices, and the task each device is running.

    ONLINE is the server's: a device reads offline when its host has not been seen within
    the server's --host-timeout. LAST SEEN is the host's latest request (`-` from a server
    that does not say).
    """
    from amc.cli.views import hosts_table

    hosts = app.client.hosts()
    if app.as_json:
        app.display_json(hosts)
    elif not hosts["hosts"]:
        app.display("No hosts have registered yet (a Host Agent registers when it starts: `amc host run`).")
    else:
        app.display(hosts_table(hosts["hosts"]))
