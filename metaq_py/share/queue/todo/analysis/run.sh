#!/bin/bash
# Same file name as todo/lattice/run.sh: tasks are known by their path in the folder, so the
# two never collide in finished/ or in the logs.
#METAQ NODES 1
#METAQ GPUS 2
#METAQ MIN_WC_TIME 00:01:30
#METAQ PROJECT analysis

echo "GPU task on: ${METAQ_NODELIST:-no node list given}"
env | grep '^METAQ_' | sort
sleep 1
