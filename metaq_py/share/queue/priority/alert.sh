#!/bin/bash
# An on-demand task: time-critical, must start at once, never preempted.
#METAQ TYPE ondemand
#METAQ NODES 1
#METAQ GPUS 1
#METAQ MIN_WC_TIME 00:01:00
#METAQ PROJECT alerts
#METAQ PRIORITY 10

echo "on-demand task on: ${METAQ_NODELIST:-no node list given}"
env | grep '^METAQ_' | sort
sleep 1
