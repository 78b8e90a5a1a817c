#!/bin/bash
# A malleable task: runs on 1 to 4 nodes. Resized by restarting it with a new node list.
#METAQ TYPE malleable
#METAQ NODES 4
#METAQ MIN_NODES 1
#METAQ MIN_WC_TIME 00:03:00
#METAQ PROJECT lattice
#METAQ RESIZE restart
#METAQ SIGNAL TERM@5

echo "malleable task on $(echo "${METAQ_NODELIST:-}" | wc -w) node(s): ${METAQ_NODELIST:-none}"
env | grep '^METAQ_' | sort
sleep 2
