"""Looking back in a browser: one self-contained HTML file per report.

Everything a page needs is inside it, written by these modules: the CSS, a few lines of our
own JavaScript (sortable tables, hover values) and the charts as inline SVG. It loads nothing
(its Content-Security-Policy forbids every request), so it reads the same offline, after
``scp``, on a laptop.

- :mod:`~metaq_py.report.html.page`: the page frame, sections and sortable tables;
- :mod:`~metaq_py.report.html.svg`: the charts (lines, bars, a Gantt), each mark with its
  value on hover;
- :mod:`~metaq_py.report.html.campaign`: a queue's campaign gathered from the public reading
  functions of :mod:`metaq_py.report` (event logs, accounting, timelines);
- :mod:`~metaq_py.report.html.campaign_page`: that campaign as a page (``metaq report --html``);
- :mod:`~metaq_py.report.html.study`: a study's tables and figures as a page, beside its
  ``report.md`` (``metaq experiment``).

Only the commands that write a page load these modules.
"""
