"""Looking back: what the batch jobs of a queue did, read from their event logs and leases.

``joblog`` reads ``jobs/<jobid>/events.jsonl`` and says what is wrong with it; ``allocations``
rebuilds what each live batch job holds now (``metaq status``); ``accounting`` totals node- and
GPU-hours per project (``metaq report``); ``explain`` says why a task is not running;
``timeline`` and ``gantt`` draw one allocation's history (``metaq gantt``).
"""
