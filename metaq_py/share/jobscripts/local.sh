#!/bin/bash
# metaq-py without a batch system: a pretend cluster of METAQ_NODES nodes on this machine,
# for a laptop, a workstation or an interactive allocation you manage yourself.
#
#     metaq jobscript local > local.sh              # a copy to keep (this file)
#     bash local.sh                                 # 4 pretend nodes, queue ./queue
#     METAQ_NODES=2 bash local.sh --walltime 30m
# Arguments go to `metaq run`. Ctrl-C or SIGTERM stops the tasks gracefully and requeues them.
queue="${METAQ_QUEUE:-queue}"
nodes="${METAQ_NODES:-4}"

# exec: metaq takes this shell's place, so Ctrl-C and SIGTERM reach it.
exec metaq run --queue "$queue" --nodes "$nodes" "$@"
