"""The hetgraph page of the Dask dashboard (``/hetgraph``) and hetgraph gauges on the
scheduler's Prometheus endpoint (``/metrics``), both read from the run events that every
run logs on the scheduler (:mod:`hetgraph.events`).

Importing this module registers both (:func:`install`); :class:`hetgraph.Cluster` does
so before it starts its scheduler. For a scheduler started by hand:
``dask scheduler --preload hetgraph.dashboard``. The page needs bokeh
(``pip install 'hetgraph[dashboard]'``), the gauges prometheus_client; without them the
rest still works.

Gauges (prefix ``dask_hetgraph_`` with Dask's default namespace), for the latest
iteration of the latest run: ``running``, ``iteration``, ``alpha`` (NaN when no GPU
took part in the decision), ``f``, ``rho``, ``active_vertices``, ``iteration_seconds``,
``overhead_seconds``, ``pages{device}``, ``edges{device}``, ``page_seconds{device}``,
``cpu_mode{mode}`` (1 for the mode of the iteration); counter ``iterations_total``
(every run's iterations).
"""

from __future__ import annotations

import html
import logging

from . import tuning
from .result import HISTORY_COLUMNS
from .events import TOPIC, message_rows, run_events

log = logging.getLogger("hetgraph.dashboard")

DEVICES = ("cpu", "gpu")
CPU_MODES = ("pull", "notify-pull", "push", "gpu-pull", "gpu-push", "gpu-tocab", "colored",
             "gpu-colored")


def latest_run(scheduler):
    """(start, rows, end) of the newest run in ``scheduler``'s event log: the start
    message (None when no run was logged), its history rows in order, and its end
    message (None while it runs)."""
    events = run_events(message for _, message in scheduler.get_events(TOPIC))
    starts = [i for i, message in enumerate(events) if message.get("event") == "start"]
    if not starts:
        return None, [], None
    start = events[starts[-1]]
    mine = [m for m in events[starts[-1] + 1:] if m.get("run") == start["run"]]
    rows = [row for m in mine if m.get("event") == "iterations" for row in message_rows(m)]
    ends = [m for m in mine if m.get("event") == "end"]
    return start, rows, ends[-1] if ends else None


def iterations_total(scheduler) -> int:
    """Iterations logged by every run."""
    return sum(m["count"] for m in run_events(m for _, m in scheduler.get_events(TOPIC))
               if m["event"] == "iterations")


def run_title(start, rows, end) -> str:
    """One line about the newest run."""
    if start is None:
        return "hetgraph: no run yet"
    state = "running" if end is None else "failed: " + end["error"] if end.get("error") \
        else "converged" if end["converged"] else "stopped at the iteration limit"
    kinds = ", ".join(f"{n} {kind.upper()}" for kind, n in start["kinds"].items())
    return (f"{start['program']} on {start['vertices']:,} vertices, {start['arcs']:,} arcs "
            f"(run {start['run']}, devices {start['devices']}: {kinds} worker(s))"
            f"{_coloring_text(start.get('coloring'))}: {len(rows)} iteration(s), {state}")


def _coloring_text(coloring) -> str:
    """", colored: k colors (s% in the first k-1), p passes an iteration" of a colored
    run's start event ("" for another run, or fields of the wrong types: any client
    can post events)."""
    if not isinstance(coloring, dict):
        return ""
    count, share, passes = (coloring.get(name) for name in
                            ("colors", "colored_share", "passes_per_iteration"))
    if not (isinstance(count, int) and isinstance(share, float) and isinstance(passes, int)):
        return ""
    return (f", colored: {count} colors ({share:.1%} in the first {count - 1}), {passes} "
            f"passes an iteration")


# --- the bokeh page ---------------------------------------------------------------------------

def _columns(rows):
    """The page's columns: the history columns, plus alpha and f for a log axis
    ("log_alpha", "log_f": NaN where not positive)."""
    data = {name: [row.get(name) for row in rows] for name in HISTORY_COLUMNS}
    for name in ("alpha", "f"):
        data[f"log_{name}"] = [v if v is not None and v > 0 else float("nan")
                               for v in data[name]]
    return data


_TOOLS = "pan,wheel_zoom,box_zoom,reset,hover"


def _ratio_figure(source):
    """alpha and f per iteration, on a log axis with a line at 1."""
    from bokeh.models import Span
    from bokeh.plotting import figure

    ratio = figure(title="alpha (CPU time / GPU time; < 1: CPU only) and f (active "
                         "out-degree / |E|)", height=260, sizing_mode="stretch_width",
                   x_axis_label="iteration", y_axis_type="log", tools=_TOOLS)
    for name, color in (("alpha", "#d62728"), ("f", "#1f77b4")):
        ratio.line("iteration", f"log_{name}", source=source, color=color,
                   legend_label=name, line_width=2)
        ratio.scatter("iteration", f"log_{name}", source=source, color=color, size=5)
    ratio.add_layout(Span(location=1.0, dimension="width", line_dash="dashed",
                          line_color="grey"))
    return ratio


def _device_figures(source):
    """(pages, seconds): per iteration, the pages and the seconds of each device kind
    (the seconds with the iteration's wall time)."""
    from bokeh.plotting import figure

    pages = figure(title="pages per device", height=260, sizing_mode="stretch_width",
                   x_axis_label="iteration", tools=_TOOLS)
    pages.vbar_stack(["cpu_pages", "gpu_pages"], x="iteration", width=0.8, source=source,
                     color=["#2ca02c", "#ff7f0e"], legend_label=["CPU", "GPU"])
    seconds = figure(title="seconds per device (and wall)", height=260,
                     sizing_mode="stretch_width", x_axis_label="iteration", tools=_TOOLS)
    for name, color, label in (("cpu_seconds", "#2ca02c", "CPU"),
                               ("gpu_seconds", "#ff7f0e", "GPU"),
                               ("seconds", "#7f7f7f", "wall")):
        seconds.line("iteration", name, source=source, color=color, legend_label=label,
                     line_width=2)
    return pages, seconds


def _table(source):
    """The latest iterations' main columns."""
    from bokeh.models import DataTable, NumberFormatter, TableColumn

    shown = ("iteration", "placement", "mode", "f", "alpha", "active", "cpu_pages",
             "gpu_pages", "cpu_seconds", "gpu_seconds", "seconds", "overhead")
    return DataTable(source=source, height=240, sizing_mode="stretch_width",
                     columns=[TableColumn(field=name, title=name.replace("_", " "),
                                          formatter=NumberFormatter(format="0.[0000]"))
                              if name not in ("placement", "mode") else
                              TableColumn(field=name, title=name) for name in shown])


def hetgraph_doc(scheduler, extra, doc):
    """The page: a title line, alpha and f, pages and seconds per device kind per
    iteration, and a table of the latest iterations; refreshed every
    ``tuning.DASHBOARD_REFRESH_MS`` milliseconds."""
    from bokeh.layouts import column, row
    from bokeh.models import ColumnDataSource, Div

    source = ColumnDataSource(_columns([]))
    title = Div(text="", styles={"font-size": "16px", "font-weight": "bold"})
    ratio = _ratio_figure(source)
    pages, seconds = _device_figures(source)
    for plot in (ratio, pages, seconds):
        plot.legend.location = "top_left"
    table = _table(source)
    seen = {"key": None}

    def update():
        start, rows, end = latest_run(scheduler)
        key = (start and start["run"], len(rows), end is not None)
        if key == seen["key"]:
            return
        seen["key"] = key
        title.text = html.escape(run_title(start, rows, end))  # an error's text is data
        source.data = _columns(rows)

    update()
    doc.add_periodic_callback(update, tuning.DASHBOARD_REFRESH_MS)
    doc.title = "Dask: hetgraph"
    doc.add_root(column(title, row(ratio, pages, sizing_mode="stretch_width"), seconds,
                        table, sizing_mode="stretch_width"))
    try:  # the dashboard's own frame (menus, theme) when this Dask version has it
        from distributed.dashboard.components.scheduler import BOKEH_THEME, env

        doc.template = env.get_template("simple.html")
        doc.template_variables.update(extra)
        doc.theme = BOKEH_THEME
    except (ImportError, AttributeError) as exc:  # pragma: no cover - older Dask
        log.debug("plain hetgraph page: %s", exc)


# --- Prometheus --------------------------------------------------------------------------------

def _collector_class():
    from distributed.http.prometheus import PrometheusCollector
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class HetGraphCollector(PrometheusCollector):
        """hetgraph gauges of the scheduler's newest run (see the module docstring)."""

        def __init__(self, server):
            super().__init__(server)
            self.subsystem = "hetgraph"

        def collect(self):
            start, rows, end = latest_run(self.server)

            def gauge(name, text, value):
                return GaugeMetricFamily(self.build_name(name), text, value=value)

            yield gauge("running", "1 while a hetgraph run is in progress",
                        int(start is not None and end is None))
            yield CounterMetricFamily(self.build_name("iterations"), "hetgraph iterations "
                                      "run", value=iterations_total(self.server))
            if not rows:
                return
            last = rows[-1]
            yield gauge("iteration", "latest iteration", last["iteration"])
            yield gauge("alpha", "Garaph's alpha = CPU time / GPU time (NaN: no GPU)",
                        last["alpha"])
            yield gauge("f", "active out-degree / |E|", last["f"])
            yield gauge("rho", "storage read-cost ratio", last["rho"])
            yield gauge("active_vertices", "vertices active at the iteration's start",
                        last["active"])
            yield gauge("iteration_seconds", "wall seconds of the iteration", last["seconds"])
            yield gauge("overhead_seconds", "seconds beyond the busiest device",
                        last["overhead"])
            for name, text in (("pages", "pages computed"), ("edges", "edges computed"),
                               ("page_seconds", "seconds computing pages")):
                family = GaugeMetricFamily(self.build_name(name), f"{text} per device kind",
                                           labels=["device"])
                field = "seconds" if name == "page_seconds" else name
                for device in DEVICES:
                    family.add_metric([device], last[f"{device}_{field}"])
                yield family
            mode = GaugeMetricFamily(self.build_name("cpu_mode"), "1 for the iteration's "
                                     "mode", labels=["mode"])
            for name in CPU_MODES:
                mode.add_metric([name], int(last["mode"] == name))
            yield mode

    return HetGraphCollector


def _install_gauges():
    try:
        import prometheus_client
        from distributed.http.scheduler.prometheus import core
    except ImportError:
        return False
    if any(getattr(c, "__name__", "") == "HetGraphCollector" for c in core.COLLECTORS):
        return True
    collector = _collector_class()
    core.COLLECTORS.append(collector)
    served = core.PrometheusHandler._collectors
    if served:  # /metrics was already served in this process: join its collectors
        instance = collector(served[0].server)
        prometheus_client.REGISTRY.register(instance)
        core.PrometheusHandler._collectors = served + (instance,)
    return True


def install():
    """Register the ``/hetgraph`` page (and ``/individual-hetgraph``, listed under the
    dashboard's "More" menu) for schedulers started after this, and the gauges.
    Idempotent; returns (page registered, gauges registered)."""
    try:
        from distributed.dashboard.scheduler import applications
    except ImportError:  # no bokeh
        page = False
    else:
        applications.setdefault("/hetgraph", hetgraph_doc)
        applications.setdefault("/individual-hetgraph", hetgraph_doc)
        page = True
    return page, _install_gauges()


install()
