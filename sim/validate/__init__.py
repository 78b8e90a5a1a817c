"""The simulator checked against what really happened (``metaq simulate --compare-recorded``).

A trace records when each job really started. Replaying it under the candidate policies sets
the simulated waits beside the recorded ones:

- :mod:`~sim.validate.candidates`: the policies a site's scheduler may have been (EASY on
  estimates, EASY on runtimes, conservative, FCFS);
- :mod:`~sim.validate.recorded`: the waits compared, overall, by size class and by month, and
  which policy comes closest;
- :mod:`~sim.validate.figure`: the comparison drawn.
"""
