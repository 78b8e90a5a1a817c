"""Pure decision functions: a snapshot of the world in, a list of actions out.

Nothing in this package reads a clock, a file or the environment, and nothing in it imports a
driver (``metaq_py.runner``, ``sim``). See ``docs/model.md`` for every modelling choice.
"""
