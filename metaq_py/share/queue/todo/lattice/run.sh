#!/bin/bash
# A rigid task on two nodes that checkpoints, and asks for a warning before it is stopped.
#METAQ NODES 2
#METAQ MIN_WC_TIME 00:02:00
#METAQ PROJECT lattice
#METAQ CHECKPOINT 00:00:30 00:00:01
#METAQ SIGNAL USR1@10
#METAQ SETUP 1s

trap 'echo "warned: saving a checkpoint"' USR1
echo "rigid task on: ${METAQ_NODELIST:-no node list given}"
env | grep '^METAQ_' | sort
sleep 2
