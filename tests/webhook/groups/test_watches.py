"""The Watches point (framework/points.py): serve's wiring (placer/kube.py run_placer) starts
every extension's watches from the one list, naming none; an extension without the point is not
asked; a watch runs on a thread of its name until the placer stops."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kubernetes import client

from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.framework.points import Feeds, Points, Watch
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.kube import start_watches


class Probe:
    """A watch that says when it runs, and returns once `stop` is set."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running, self.returned = threading.Event(), threading.Event()
        self.stop: threading.Event | None = None

    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        self.running.set()
        stop.wait()
        self.returned.set()


class Watching:
    """An extension whose state needs one watch."""

    def __init__(self) -> None:
        self.probe = Probe("placer-probe")
        self.fed: list[Feeds] = []

    def watches(self, feeds: Feeds) -> Sequence[Watch]:
        self.fed.append(feeds)
        return (self.probe,)


class TickOnly:
    """An extension without the point: asking it for watches would raise AttributeError."""

    def tick(self) -> None: ...


def feeds() -> Feeds:
    return Feeds(client.ApiClient(), lambda apply: apply(), lambda: None)


def test_an_extension_s_watch_is_started_with_the_feeds_and_stopped_with_the_placer() -> None:
    watching = Watching()
    fed = feeds()
    stop = threading.Event()
    threads = start_watches(Points([TickOnly(), watching, TickOnly()]).watches(fed), stop)
    try:
        assert watching.fed == [fed]  # asked once, with what the wiring lends
        assert [t.name for t in threads] == ["placer-probe"]  # only its watch: the others have none
        assert threads[0].daemon
        assert watching.probe.running.wait(5) and watching.probe.stop is stop
        assert not watching.probe.returned.is_set()
    finally:
        stop.set()
    threads[0].join(5)
    assert watching.probe.returned.is_set() and not threads[0].is_alive()


def test_no_extension_with_the_point_means_no_watch() -> None:
    assert Points([TickOnly()]).watches(feeds()) == ()


def test_the_enabled_extensions_watch_what_serve_started_by_name_before() -> None:
    # the names are the threads' names and the watches' log field: unchanged, in this order
    ext = Extensions(imex=ImexChannels(), gang=NativeGang())
    names = [w.name for w in Points(ext.ordered()).watches(feeds())]
    assert names == ["placer-computedomains", "placer-templates", "placer-podgroups"]
